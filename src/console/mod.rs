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
mod editor;
mod filters;
mod headers;
mod layout;
mod runs;
mod scenes;
mod session;
mod tasks;

use actix_web::body::BoxBody;
use actix_web::http::{header, StatusCode};
use actix_web::{middleware, web, HttpRequest, HttpResponse, ResponseError};
use maud::Markup;

use crate::service::error::ServiceError;

/// Where the console lives.
pub const HOME: &str = "/console";

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
                .route("/runs/{request_id}/cancel", web::post().to(runs::cancel))
                .route("/runs/{request_id}/rerun", web::post().to(runs::rerun))
                .route("/scenes", web::get().to(scenes::list))
                .route("/scenes/pause", web::post().to(scenes::pause))
                .route("/scenes/resume", web::post().to(scenes::resume))
                .route("/audit", web::get().to(audit::list))
                .default_service(web::to(not_found)),
        );
}

pub use session::session_principal;

/// Whether the console answers `path` and so checks who asks itself (with its sign-in), not
/// the API's token check.
pub fn guards_itself(path: &str) -> bool {
    path == "/" || path == HOME || path.starts_with("/console/")
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

/// A rendered page with this status.
fn html(status: StatusCode, page: Markup) -> HttpResponse {
    HttpResponse::build(status)
        .content_type("text/html; charset=utf-8")
        .body(page.into_string())
}

/// The answer to a form: go on to `location` (a GET), so a reload does not post again.
fn see_other(location: &str) -> HttpResponse {
    HttpResponse::SeeOther()
        .insert_header((header::LOCATION, location))
        .finish()
}

/// A page answered 200.
fn ok(page: Markup) -> HttpResponse {
    html(StatusCode::OK, page)
}

/// Refuses a viewer a page that only leads to a change (the editor, the delete confirmation),
/// as no page offers it to them.
fn admins_only(visitor: &session::Visitor) -> Result<(), ConsoleError> {
    if visitor.may_change() {
        Ok(())
    } else {
        Err(ConsoleError::Forbidden(visitor.principal.name.clone()))
    }
}

/// Why a page could not be shown; each is answered as an error page in the console's layout.
/// (A bad filter is not one: its page shows the message beside the filter.)
#[derive(Debug, thiserror::Error)]
enum ConsoleError {
    #[error("{0}")]
    NotFound(String),
    #[error("Sign in first: this needs a token of this ax.")]
    SignInRequired,
    /// A viewer's token asked for a change; the token's name.
    #[error("The token `{0}` is a viewer's: it may look, not change.")]
    Forbidden(String),
    #[error("This form expired or came from another site: reload the page and send it again.")]
    CsrfFailed,
    #[error("The store is unavailable: {0}")]
    Unavailable(String),
    #[error("{0}")]
    Failed(String),
    /// What the API would answer to the same change (bad input, a conflict).
    #[error("{0}")]
    Refused(#[from] crate::error::ApiError),
    /// The task changed since the form was opened: the task as it is now.
    #[error("This task changed since you opened it: reload it and make the change again.")]
    Changed(Box<crate::service::task_details::TaskDetails>),
}

impl From<ServiceError> for ConsoleError {
    fn from(err: ServiceError) -> Self {
        match err {
            ServiceError::TaskNotFound(_) | ServiceError::RunNotFound(_) => {
                ConsoleError::NotFound(format!("{}.", capitalized(&err.to_string())))
            }
            ServiceError::Store(err) => ConsoleError::Unavailable(err.to_string()),
            other => ConsoleError::Refused(other.into()),
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
            ConsoleError::Forbidden(_) | ConsoleError::CsrfFailed => StatusCode::FORBIDDEN,
            ConsoleError::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            ConsoleError::Failed(_) => StatusCode::INTERNAL_SERVER_ERROR,
            ConsoleError::Refused(err) => err.status_code(),
            ConsoleError::Changed(_) => StatusCode::PRECONDITION_FAILED,
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
