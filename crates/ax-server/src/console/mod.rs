//! The web console at `/console`: pages rendered on the server (maud) from the same
//! [`Service`](crate::service::Service) the JSON API calls, with a small script that switches
//! times between UTC and the browser's zone. Its assets are compiled into the binary.
//!
//! Handlers parse the query, make one or two service calls and hand the result to a page's
//! render function; rendering lives in one module per page.

mod alerts;
mod assets;
pub mod attention;
mod audit;
mod calendars;
mod chart;
mod dashboard;
mod editor;
mod error;
mod executors;
mod filters;
mod headers;
mod layout;
mod live;
mod notice;
pub(crate) mod paths;
mod respond;
mod run_log;
mod runs;
mod scenes;
mod schedule;
mod search;
mod session;
mod tasks;
mod timeline;
mod visitor;

use actix_web::{middleware, web, HttpRequest, HttpResponse, ResponseError};

use error::{admins_only, ConsoleError};
use paths::HOME;
use respond::{html, ok, see_other};

/// Mounts the console: `/` redirects to it, its assets are open, its pages are guarded.
pub fn routes(cfg: &mut web::ServiceConfig) {
    cfg.route("/", web::get().to(to_home))
        // Before the pages' scope, which would take these paths too.
        .service(web::scope("/console/assets").route("/{name}", web::get().to(assets::serve)))
        .service(
            web::scope(HOME)
                .wrap(middleware::from_fn(session::guard))
                .route("/sign-in", web::get().to(session::sign_in_form))
                .route("/sign-in", web::post().to(session::sign_in))
                .route("/sign-out", web::post().to(session::sign_out))
                .route("", web::get().to(dashboard::show))
                .route("/", web::get().to(dashboard::show))
                .route("/tasks", web::get().to(tasks::list))
                .route("/tasks/bulk", web::get().to(tasks::confirm_bulk))
                .route("/tasks/bulk", web::post().to(tasks::bulk))
                .route("/tasks/new", web::get().to(editor::new_form))
                .route("/tasks/new", web::post().to(editor::create))
                .route("/tasks/{id}", web::get().to(tasks::detail))
                .route("/tasks/{id}/edit", web::get().to(editor::edit_form))
                .route("/tasks/{id}/edit", web::post().to(editor::update))
                .route("/tasks/{id}/pause", web::post().to(tasks::pause))
                .route("/tasks/{id}/resume", web::post().to(tasks::resume))
                .route("/tasks/{id}/trigger", web::post().to(tasks::trigger))
                .route("/tasks/{id}/backfill", web::post().to(tasks::backfill))
                .route("/tasks/{id}/delete", web::get().to(tasks::confirm_delete))
                .route("/tasks/{id}/delete", web::post().to(tasks::delete))
                .route("/runs", web::get().to(runs::list))
                .route("/runs/{request_id}", web::get().to(runs::detail))
                .route(
                    "/runs/{request_id}/cancel",
                    web::get().to(runs::confirm_cancel),
                )
                .route("/runs/{request_id}/cancel", web::post().to(runs::cancel))
                .route("/runs/{request_id}/rerun", web::post().to(runs::rerun))
                .route("/alerts", web::get().to(alerts::list))
                .route("/scenes", web::get().to(scenes::list))
                .route(
                    "/scenes/{action:pause|resume}",
                    web::get().to(scenes::confirm),
                )
                .route("/scenes/pause", web::post().to(scenes::pause))
                .route("/scenes/resume", web::post().to(scenes::resume))
                .route("/scenes/{scene}", web::get().to(scenes::detail))
                .route("/executors", web::get().to(executors::list))
                .route("/calendars", web::get().to(calendars::list))
                .route("/calendars", web::post().to(calendars::create))
                .route("/calendars/{name}", web::get().to(calendars::detail))
                .route("/calendars/{name}", web::post().to(calendars::save))
                .route(
                    "/calendars/{name}/delete",
                    web::get().to(calendars::confirm_delete),
                )
                .route(
                    "/calendars/{name}/delete",
                    web::post().to(calendars::delete),
                )
                .route("/schedule", web::get().to(schedule::show))
                .route("/search", web::get().to(search::show))
                .route("/audit", web::get().to(audit::list))
                .default_service(web::to(not_found)),
        );
}

/// How a console answer goes out, from what its request carried: an error no console page
/// shows (a form the extractor refused, 413 or 400; a response that could not be built, 500)
/// as the console's error page, and the console's headers on every answer, pages, errors and
/// assets alike.
pub struct Finish {
    signed_in: bool,
}

impl Finish {
    pub fn of(req: &HttpRequest) -> Finish {
        Finish {
            signed_in: headers::signed_in(req),
        }
    }

    pub fn apply(&self, response: HttpResponse) -> HttpResponse {
        let mut response = match crate::error::foreign::<ConsoleError>(&response) {
            Some(err) => ConsoleError::Refused(err).error_response(),
            None => response,
        };
        headers::add(&mut response, self.signed_in);
        response
    }
}

async fn to_home() -> HttpResponse {
    see_other(HOME)
}

async fn not_found(req: HttpRequest) -> HttpResponse {
    ConsoleError::NotFound(format!("There is no console page at {}.", req.path())).error_response()
}
