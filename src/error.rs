//! The API's error type: every failure maps once to a status and a JSON body
//! `{"error": {"code", "message", "field"?}}`.

use actix_web::http::StatusCode;
use actix_web::{HttpResponse, ResponseError};
use serde::Serialize;

use crate::actors::lock::LockError;
use crate::service::ServiceError;
use crate::store::StoreError;

/// Errors answered by the HTTP API.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// Bad input; `field` names the offending field or parameter.
    #[error("{message}")]
    Invalid {
        field: Option<String>,
        message: String,
    },
    #[error("missing or wrong admin token: send Authorization: Bearer <token>")]
    Unauthorized,
    #[error("{0}")]
    Forbidden(String),
    #[error("{0}")]
    NotFound(String),
    /// A known path asked with a method it does not serve; the ones it serves.
    #[error("{method} is not served here; this path serves {}", .allow.join(", "))]
    MethodNotAllowed {
        method: String,
        allow: Vec<&'static str>,
    },
    /// The request contradicts the state of what it names; `field` names the part at fault.
    #[error("{message}")]
    Conflict {
        field: Option<String>,
        message: String,
    },
    /// `If-Match` names none of the versions the resource is at; the current one, for its
    /// `ETag`.
    #[error("{message}")]
    PreconditionFailed { message: String, current: i64 },
    #[error("request body larger than {0} bytes")]
    TooLarge(usize),
    #[error("the store is unavailable")]
    Store(#[from] StoreError),
    #[error("Redis is unavailable")]
    Lock(#[from] LockError),
}

impl From<ServiceError> for ApiError {
    fn from(err: ServiceError) -> Self {
        match err {
            ServiceError::Store(err) => ApiError::Store(err),
            ServiceError::TaskNotFound(_) | ServiceError::RunNotFound(_) => {
                ApiError::NotFound(err.to_string())
            }
            ServiceError::Backfill(message) => ApiError::invalid("to", message),
            ServiceError::RunFinal { .. } => ApiError::Conflict {
                field: None,
                message: err.to_string(),
            },
            ServiceError::UnknownUpstreams(_) | ServiceError::Cycle(_) => {
                ApiError::invalid("dependsOn", err.to_string())
            }
            ServiceError::NameTaken { .. } | ServiceError::Exists(_) => ApiError::Conflict {
                field: Some("name".into()),
                message: err.to_string(),
            },
            ServiceError::Raced => ApiError::Conflict {
                field: None,
                message: err.to_string(),
            },
            ServiceError::Stale(ref current) => ApiError::PreconditionFailed {
                current: current.task.version,
                message: err.to_string(),
            },
            ServiceError::Item { index, error } => ApiError::from(*error).in_item(index),
        }
    }
}

impl ApiError {
    /// Bad input in `field`.
    pub fn invalid(field: impl Into<String>, message: impl Into<String>) -> Self {
        ApiError::Invalid {
            field: Some(field.into()),
            message: message.into(),
        }
    }

    /// The error of the item at `index` of a list in the body (`items`): its field becomes
    /// `items[index].field`, its message names the item.
    pub fn in_item(self, index: usize) -> Self {
        let within = |field: Option<String>| {
            Some(match field {
                Some(field) => format!("items[{index}].{field}"),
                None => format!("items[{index}]"),
            })
        };
        match self {
            ApiError::Invalid { field, message } => ApiError::Invalid {
                field: within(field),
                message: format!("items[{index}]: {message}"),
            },
            ApiError::Conflict { field, message } => ApiError::Conflict {
                field: within(field),
                message: format!("items[{index}]: {message}"),
            },
            other => other,
        }
    }

    /// The field or parameter the error names, if any.
    pub fn field(&self) -> Option<&str> {
        match self {
            ApiError::Invalid { field, .. } | ApiError::Conflict { field, .. } => field.as_deref(),
            ApiError::PreconditionFailed { .. } => Some("If-Match"),
            _ => None,
        }
    }

    fn code(&self) -> &'static str {
        match self {
            ApiError::Invalid { .. } => "INVALID_ARGUMENT",
            ApiError::Unauthorized => "UNAUTHORIZED",
            ApiError::Forbidden(_) => "FORBIDDEN",
            ApiError::NotFound(_) => "NOT_FOUND",
            ApiError::MethodNotAllowed { .. } => "METHOD_NOT_ALLOWED",
            ApiError::Conflict { .. } => "CONFLICT",
            ApiError::PreconditionFailed { .. } => "PRECONDITION_FAILED",
            ApiError::TooLarge(_) => "PAYLOAD_TOO_LARGE",
            ApiError::Store(_) => "STORE_UNAVAILABLE",
            ApiError::Lock(_) => "REDIS_UNAVAILABLE",
        }
    }
}

#[derive(Serialize)]
struct ErrorBody<'a> {
    error: ErrorDetail<'a>,
}

#[derive(Serialize)]
struct ErrorDetail<'a> {
    code: &'a str,
    message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    field: Option<&'a str>,
}

impl ResponseError for ApiError {
    fn status_code(&self) -> StatusCode {
        match self {
            ApiError::Invalid { .. } => StatusCode::BAD_REQUEST,
            ApiError::Unauthorized => StatusCode::UNAUTHORIZED,
            ApiError::Forbidden(_) => StatusCode::FORBIDDEN,
            ApiError::NotFound(_) => StatusCode::NOT_FOUND,
            ApiError::MethodNotAllowed { .. } => StatusCode::METHOD_NOT_ALLOWED,
            ApiError::Conflict { .. } => StatusCode::CONFLICT,
            ApiError::PreconditionFailed { .. } => StatusCode::PRECONDITION_FAILED,
            ApiError::TooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::Store(_) | ApiError::Lock(_) => StatusCode::SERVICE_UNAVAILABLE,
        }
    }

    fn error_response(&self) -> HttpResponse {
        // The detail of an outage is for the operator's log, not for the client.
        match self {
            ApiError::Store(err) => log::error!("request failed: {err}"),
            ApiError::Lock(err) => log::error!("request failed: {err}"),
            _ => {}
        }
        let field = self.field();
        let mut response = HttpResponse::build(self.status_code());
        match self {
            // RFC 7235: a 401 names the scheme that would be accepted.
            ApiError::Unauthorized => {
                response.insert_header(("WWW-Authenticate", "Bearer"));
            }
            // RFC 9110: a 405 lists the methods the path serves.
            ApiError::MethodNotAllowed { allow, .. } => {
                response.insert_header(("Allow", allow.join(", ")));
            }
            // The version the task is at: what a retry sends as its If-Match.
            ApiError::PreconditionFailed { current, .. } => {
                response.insert_header(("ETag", crate::etag::etag(*current)));
            }
            _ => {}
        }
        response.json(ErrorBody {
            error: ErrorDetail {
                code: self.code(),
                message: self.to_string(),
                field,
            },
        })
    }
}
