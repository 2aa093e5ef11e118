//! Why a console page could not be shown, answered as an error page in the console's layout.

use actix_web::body::BoxBody;
use actix_web::http::StatusCode;
use actix_web::{HttpResponse, ResponseError};

use super::layout;
use super::respond::html;
use super::visitor::Visitor;
use crate::service::error::ServiceError;

/// Refuses a viewer a page that only leads to a change (the editor, the delete confirmation),
/// as no page offers it to them.
pub fn admins_only(visitor: &Visitor) -> Result<(), ConsoleError> {
    if visitor.may_change() {
        Ok(())
    } else {
        Err(ConsoleError::Forbidden(visitor.principal.name.clone()))
    }
}

/// Why a page could not be shown; each is answered as an error page in the console's layout.
/// (A bad filter is not one: its page shows the message beside the filter.)
#[derive(Debug, thiserror::Error)]
pub enum ConsoleError {
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
            ServiceError::TaskNotFound(_)
            | ServiceError::RunNotFound(_)
            | ServiceError::CalendarNotFound(_) => {
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
        let err = ConsoleError::from(ServiceError::TaskNotFound(ax_core::run::TaskId(7)));
        assert_eq!(err.status_code(), StatusCode::NOT_FOUND);
        assert_eq!(err.to_string(), "Task 7 not found.");
    }
}
