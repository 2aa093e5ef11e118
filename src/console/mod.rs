//! The web console at `/console`: pages rendered on the server (maud) from the same
//! [`Service`](crate::service::Service) the JSON API calls, with a small script that switches
//! times between UTC and the browser's zone. Its assets are compiled into the binary.
//!
//! Handlers parse the query, make one or two service calls and hand the result to a page's
//! render function; rendering lives in one module per page.

mod assets;
mod audit;
mod chart;
mod dashboard;
mod filters;
mod layout;
mod runs;
mod scenes;
mod tasks;

use actix_web::body::{BoxBody, MessageBody};
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::{header, StatusCode};
use actix_web::{middleware, web, HttpRequest, HttpResponse, ResponseError};
use maud::Markup;

use crate::api::ApiState;
use crate::service::ServiceError;

/// Where the console lives.
pub const HOME: &str = "/console";

/// Mounts the console: `/` redirects to it, its assets are open, its pages are guarded.
pub fn routes(cfg: &mut web::ServiceConfig) {
    cfg.route("/", web::get().to(to_home))
        // Before the pages' scope, which would take these paths too.
        .service(web::scope("/console/assets").route("/{name}", web::get().to(assets::serve)))
        .service(
            web::scope(HOME)
                .wrap(middleware::from_fn(signed_in))
                .route("", web::get().to(dashboard::show))
                .route("/", web::get().to(dashboard::show))
                .route("/tasks", web::get().to(tasks::list))
                .route("/tasks/{id}", web::get().to(tasks::detail))
                .route("/runs", web::get().to(runs::list))
                .route("/runs/{request_id}", web::get().to(runs::detail))
                .route("/scenes", web::get().to(scenes::list))
                .route("/audit", web::get().to(audit::list))
                .default_service(web::to(not_found)),
        );
}

async fn to_home() -> HttpResponse {
    HttpResponse::SeeOther()
        .insert_header((header::LOCATION, HOME))
        .finish()
}

/// Until the console has a sign-in of its own, it is served only where the admin API is open
/// to all (no admin token configured); otherwise a page says so.
async fn signed_in(
    req: ServiceRequest,
    next: middleware::Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<BoxBody>, actix_web::Error> {
    let guarded = req
        .app_data::<web::Data<ApiState>>()
        .is_some_and(|state| state.security.has_tokens());
    if guarded {
        return Err(ConsoleError::SignInRequired.into());
    }
    Ok(next.call(req).await?.map_into_boxed_body())
}

async fn not_found(req: HttpRequest) -> HttpResponse {
    ConsoleError::NotFound(format!("There is no console page at {}.", req.path())).error_response()
}

/// A rendered page with this status.
fn html(status: StatusCode, page: Markup) -> HttpResponse {
    HttpResponse::build(status)
        .content_type("text/html; charset=utf-8")
        .body(page.into_string())
}

/// A page answered 200.
fn ok(page: Markup) -> HttpResponse {
    html(StatusCode::OK, page)
}

/// Why a page could not be shown; each is answered as an error page in the console's layout.
/// (A bad filter is not one: its page shows the message beside the filter.)
#[derive(Debug, thiserror::Error)]
enum ConsoleError {
    #[error("{0}")]
    NotFound(String),
    #[error("The console needs a sign-in, which is not built yet: while an admin token is configured, use the JSON API with Authorization: Bearer <token>.")]
    SignInRequired,
    #[error("The store is unavailable: {0}")]
    Unavailable(String),
    #[error("{0}")]
    Failed(String),
}

impl From<ServiceError> for ConsoleError {
    fn from(err: ServiceError) -> Self {
        match err {
            ServiceError::TaskNotFound(_) | ServiceError::RunNotFound(_) => {
                ConsoleError::NotFound(format!("{}.", capitalized(&err.to_string())))
            }
            ServiceError::Store(err) => ConsoleError::Unavailable(err.to_string()),
            other => ConsoleError::Failed(other.to_string()),
        }
    }
}

fn capitalized(text: &str) -> String {
    let mut chars = text.chars();
    chars.next().map_or_else(String::new, |first| {
        first.to_uppercase().chain(chars).collect()
    })
}

impl ResponseError for ConsoleError {
    fn status_code(&self) -> StatusCode {
        match self {
            ConsoleError::NotFound(_) => StatusCode::NOT_FOUND,
            ConsoleError::SignInRequired => StatusCode::UNAUTHORIZED,
            ConsoleError::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            ConsoleError::Failed(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    fn error_response(&self) -> HttpResponse<BoxBody> {
        let status = self.status_code();
        let title = status.canonical_reason().unwrap_or("Error");
        html(status, layout::error_page(title, &self.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_task_is_a_not_found_page() {
        let err = ConsoleError::from(ServiceError::TaskNotFound(crate::run::TaskId(7)));
        assert_eq!(err.status_code(), StatusCode::NOT_FOUND);
        assert_eq!(err.to_string(), "Task 7 not found.");
    }
}
