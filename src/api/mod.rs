//! The HTTP API: handlers parse and validate, make one call to the scheduler, and map the
//! reply. JSON is camelCase; errors are `ApiError`.

mod callback;
mod health;
mod instances;
mod scenes;
mod tasks;
mod validate;
mod views;

use actix_web::{error::JsonPayloadError, web, HttpRequest};

use crate::error::ApiError;
use crate::scheduler::Scheduler;

/// Largest request body accepted.
pub const MAX_BODY_BYTES: usize = 1024 * 1024;

/// What every handler shares.
#[derive(Clone)]
pub struct ApiState {
    pub scheduler: Scheduler,
    pub instance_id: String,
    pub backend: &'static str,
}

/// Mounts every route.
pub fn routes(cfg: &mut web::ServiceConfig) {
    cfg.app_data(
        web::JsonConfig::default()
            .limit(MAX_BODY_BYTES)
            .error_handler(json_error),
    )
    .app_data(
        web::PathConfig::default()
            .error_handler(|err, _| ApiError::invalid("path", err.to_string()).into()),
    )
    .route("/healthz", web::get().to(health::healthz))
    .service(
        web::scope("/api")
            .route("/tasks", web::post().to(tasks::create))
            .route("/tasks", web::get().to(tasks::list))
            .route("/tasks/{id}", web::get().to(tasks::get))
            .route("/tasks/{id}", web::put().to(tasks::update))
            .route("/tasks/{id}", web::delete().to(tasks::delete))
            .route("/tasks/{id}/instances", web::get().to(instances::for_task))
            .route("/tasks/{id}/pause", web::post().to(tasks::pause))
            .route("/tasks/{id}/resume", web::post().to(tasks::resume))
            .route("/tasks/{id}/trigger", web::post().to(tasks::trigger))
            .route("/tasks/{id}/stats", web::get().to(tasks::stats))
            .route("/scenes", web::get().to(scenes::list))
            .route("/scenes/{scene}/pause", web::post().to(scenes::pause))
            .route("/scenes/{scene}/resume", web::post().to(scenes::resume))
            .route("/instances", web::get().to(instances::history))
            .route("/instances/{request_id}", web::get().to(instances::get))
            .route("/callback", web::post().to(callback::report))
            .route("/cluster", web::get().to(health::cluster)),
    )
    .default_service(web::to(not_found));
}

fn json_error(err: JsonPayloadError, _: &HttpRequest) -> actix_web::Error {
    match err {
        JsonPayloadError::Overflow { limit }
        | JsonPayloadError::OverflowKnownLength { limit, .. } => ApiError::TooLarge(limit).into(),
        JsonPayloadError::ContentType => ApiError::Invalid {
            field: None,
            message: "Content-Type must be application/json".into(),
        }
        .into(),
        other => ApiError::Invalid {
            field: None,
            message: format!("invalid JSON body: {other}"),
        }
        .into(),
    }
}

async fn not_found(req: HttpRequest) -> Result<actix_web::HttpResponse, ApiError> {
    Err(ApiError::NotFound(format!(
        "no route for {} {}",
        req.method(),
        req.path()
    )))
}
