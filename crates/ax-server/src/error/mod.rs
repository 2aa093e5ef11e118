//! The API's error type: every failure maps once to a status and a JSON body
//! `{"error": {"code", "message", "field"?, "errors"?}}`.

use crate::actors::alerts::TestError;
use std::borrow::Cow;

use actix_web::http::StatusCode;
use actix_web::{HttpResponse, ResponseError};
use serde::Serialize;

use crate::actors::redis_link::LockError;
use crate::service::error::ServiceError;
use ax_store::StoreError;

/// Errors answered by the HTTP API.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// Bad input; `field` names the offending field or parameter. `more`: the further fields
    /// refused with it, when a body's fields are checked together (a task's), in the order
    /// checked; this one is the first.
    #[error("{message}")]
    Invalid {
        field: Option<String>,
        message: String,
        more: Vec<FieldError>,
    },
    #[error("missing or wrong admin token: send Authorization: Bearer <token>")]
    Unauthorized,
    #[error("{0}")]
    Forbidden(String),
    /// A change refused to this token for what `field` names (an executor group, a member).
    #[error("{message}")]
    NotPermitted { field: String, message: String },
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
    /// A change sent by a page of another site: the header that says so, and its value.
    #[error("a page of another site may not change anything here ({header}: {value})")]
    CrossSite { header: &'static str, value: String },
    /// A body whose `Content-Type` is not JSON: the type it names, if any.
    #[error("a body must be sent with Content-Type: application/json{}", .0.as_ref().map(|t| format!(", not `{t}`")).unwrap_or_default())]
    NotJson(Option<String>),
    /// A `Host` this ax does not answer to (see `ax_core::security::site`).
    #[error("this ax does not answer to the host `{0}`; list it in server.allowed_hosts")]
    MisdirectedHost(String),
    #[error("the store is unavailable")]
    Store(#[from] StoreError),
    #[error("Redis is unavailable")]
    Lock(#[from] LockError),
    /// What the HTTP layer under the handlers answered (an extractor's refusal, a response
    /// that could not be built), with its status, in ax's shape.
    #[error("{message}")]
    Http { status: StatusCode, message: String },
}

impl From<ServiceError> for ApiError {
    fn from(err: ServiceError) -> Self {
        match err {
            ServiceError::Store(err) => ApiError::Store(err),
            ServiceError::TaskNotFound(_)
            | ServiceError::RunNotFound(_)
            | ServiceError::GroupNotFound(_)
            | ServiceError::CalendarNotFound(_)
            | ServiceError::MemberNotFound { .. } => ApiError::NotFound(err.to_string()),
            ServiceError::NotInGroups { .. } => ApiError::NotPermitted {
                field: "group".into(),
                message: err.to_string(),
            },
            ServiceError::MemberHeld { .. } => ApiError::NotPermitted {
                field: "url".into(),
                message: err.to_string(),
            },
            ServiceError::GroupFull { .. } => ApiError::Conflict {
                field: Some("group".into()),
                message: err.to_string(),
            },
            ServiceError::GroupInUse { .. } => ApiError::Conflict {
                field: Some("group".into()),
                message: err.to_string(),
            },
            ServiceError::CalendarInUse { .. } => ApiError::Conflict {
                field: Some("name".into()),
                message: err.to_string(),
            },
            ServiceError::UnknownCalendar { ref field, .. } => {
                ApiError::invalid(field.clone(), err.to_string())
            }
            ServiceError::Backfill(message) => ApiError::invalid("to", message),
            ServiceError::RunFinal { .. } => ApiError::Conflict {
                field: None,
                message: err.to_string(),
            },
            ServiceError::LogClosed(ref closed) => ApiError::Conflict {
                field: match closed {
                    ax_core::run::logs::Closed::NotDispatched { .. } => Some("attempt".into()),
                    ax_core::run::logs::Closed::Ended { .. } => None,
                },
                message: err.to_string(),
            },
            ServiceError::AlertRule { field, message } => ApiError::invalid(&field, message),
            ServiceError::UnknownUpstreams(_) | ServiceError::Cycle(_) => {
                ApiError::invalid("dependsOn", err.to_string())
            }
            ServiceError::NameTaken { .. }
            | ServiceError::Exists(_)
            | ServiceError::CalendarExists(_) => ApiError::Conflict {
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
            ServiceError::AlertTest(TestError::NoChannel { .. }) => {
                ApiError::invalid("channel", err.to_string())
            }
            ServiceError::AlertTest(TestError::Failed(_)) => ApiError::Http {
                status: StatusCode::BAD_GATEWAY,
                message: err.to_string(),
            },
            ServiceError::TooManyListeners(_) | ServiceError::ShuttingDown => ApiError::Http {
                status: StatusCode::SERVICE_UNAVAILABLE,
                message: err.to_string(),
            },
            ServiceError::Item { index, error } => ApiError::from(*error).in_item(index),
        }
    }
}

/// One refused field of a 400: the field and why (an item of the body's `errors`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FieldError {
    pub field: String,
    pub message: String,
}

impl ApiError {
    /// Bad input in `field`.
    pub fn invalid(field: impl Into<String>, message: impl Into<String>) -> Self {
        ApiError::Invalid {
            field: Some(field.into()),
            message: message.into(),
            more: Vec::new(),
        }
    }

    /// Bad input without a field to name (a body that is no object).
    pub fn invalid_body(message: impl Into<String>) -> Self {
        ApiError::Invalid {
            field: None,
            message: message.into(),
            more: Vec::new(),
        }
    }

    /// The refusals of several fields checked together, as one 400: the first is its `field`
    /// and message, all of them its `errors`. A single one is returned as it is.
    pub fn all(refusals: Vec<ApiError>) -> Self {
        let mut refusals = refusals.into_iter();
        let Some(first) = refusals.next() else {
            return ApiError::invalid_body("the body was refused");
        };
        let more: Vec<FieldError> = refusals.flat_map(|err| err.field_errors()).collect();
        match first {
            ApiError::Invalid {
                field,
                message,
                more: own,
            } => ApiError::Invalid {
                field,
                message,
                more: own.into_iter().chain(more).collect(),
            },
            other => other,
        }
    }

    /// Every field a 400 refuses, each with its message, the one it names first; none for
    /// another error.
    pub fn field_errors(&self) -> Vec<FieldError> {
        match self {
            ApiError::Invalid {
                field: Some(field),
                message,
                more,
            } => {
                let first = FieldError {
                    field: field.clone(),
                    message: message.clone(),
                };
                std::iter::once(first).chain(more.iter().cloned()).collect()
            }
            _ => Vec::new(),
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
        let item = |error: FieldError| FieldError {
            field: format!("items[{index}].{}", error.field),
            message: format!("items[{index}]: {}", error.message),
        };
        match self {
            ApiError::Invalid {
                field,
                message,
                more,
            } => ApiError::Invalid {
                field: within(field),
                message: format!("items[{index}]: {message}"),
                more: more.into_iter().map(item).collect(),
            },
            ApiError::Conflict { field, message } => ApiError::Conflict {
                field: within(field),
                message: format!("items[{index}]: {message}"),
            },
            other => other,
        }
    }

    /// The error `err` the HTTP layer answered with `status`; a server error's detail goes to
    /// the log, not to the client.
    pub fn http(status: StatusCode, err: &actix_web::Error) -> Self {
        let message = if status.is_server_error() {
            log::error!("request failed: {err}");
            "the request could not be answered; the server's log says why".to_string()
        } else {
            err.to_string()
        };
        ApiError::Http { status, message }
    }

    /// The field or parameter the error names, if any.
    pub fn field(&self) -> Option<&str> {
        match self {
            ApiError::Invalid { field, .. } | ApiError::Conflict { field, .. } => field.as_deref(),
            ApiError::NotPermitted { field, .. } => Some(field),
            ApiError::CrossSite { header, .. } => Some(header),
            ApiError::NotJson(_) => Some("Content-Type"),
            ApiError::MisdirectedHost(_) => Some("Host"),
            ApiError::PreconditionFailed { .. } => Some("If-Match"),
            _ => None,
        }
    }

    fn code(&self) -> Cow<'static, str> {
        let code = match self {
            ApiError::Invalid { .. } => "INVALID_ARGUMENT",
            ApiError::Unauthorized => "UNAUTHORIZED",
            ApiError::Forbidden(_) | ApiError::NotPermitted { .. } | ApiError::CrossSite { .. } => {
                "FORBIDDEN"
            }
            ApiError::NotFound(_) => "NOT_FOUND",
            ApiError::MethodNotAllowed { .. } => "METHOD_NOT_ALLOWED",
            ApiError::Conflict { .. } => "CONFLICT",
            ApiError::PreconditionFailed { .. } => "PRECONDITION_FAILED",
            ApiError::TooLarge(_) => "PAYLOAD_TOO_LARGE",
            ApiError::NotJson(_) => "UNSUPPORTED_MEDIA_TYPE",
            ApiError::MisdirectedHost(_) => "MISDIRECTED_REQUEST",
            ApiError::Store(_) => "STORE_UNAVAILABLE",
            ApiError::Lock(_) => "REDIS_UNAVAILABLE",
            // The status's name: `BAD_REQUEST`, `PAYLOAD_TOO_LARGE`, `INTERNAL_SERVER_ERROR`.
            ApiError::Http { status, .. } => {
                let name = status.canonical_reason().unwrap_or("ERROR");
                return name.to_ascii_uppercase().replace([' ', '-'], "_").into();
            }
        };
        code.into()
    }
}

/// The error of `response` as an [`ApiError::Http`], when there is one and it is no `E`: an
/// error that did not come from the part's own handlers, so is not in that part's shape yet.
pub fn foreign<E: ResponseError + 'static>(response: &HttpResponse) -> Option<ApiError> {
    let err = response.error()?;
    err.as_error::<E>()
        .is_none()
        .then(|| ApiError::http(response.status(), err))
}

#[derive(Serialize)]
struct ErrorBody<'a> {
    error: ErrorDetail<'a>,
}

#[derive(Serialize)]
struct ErrorDetail<'a> {
    code: Cow<'static, str>,
    message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    field: Option<&'a str>,
    /// Every field refused (a 400's), `field` and `message` being the first.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    errors: Vec<FieldError>,
}

impl ResponseError for ApiError {
    fn status_code(&self) -> StatusCode {
        match self {
            ApiError::Invalid { .. } => StatusCode::BAD_REQUEST,
            ApiError::Unauthorized => StatusCode::UNAUTHORIZED,
            ApiError::Forbidden(_) | ApiError::NotPermitted { .. } | ApiError::CrossSite { .. } => {
                StatusCode::FORBIDDEN
            }
            ApiError::NotFound(_) => StatusCode::NOT_FOUND,
            ApiError::MethodNotAllowed { .. } => StatusCode::METHOD_NOT_ALLOWED,
            ApiError::Conflict { .. } => StatusCode::CONFLICT,
            ApiError::PreconditionFailed { .. } => StatusCode::PRECONDITION_FAILED,
            ApiError::TooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::NotJson(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            ApiError::MisdirectedHost(_) => StatusCode::MISDIRECTED_REQUEST,
            ApiError::Store(_) | ApiError::Lock(_) => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::Http { status, .. } => *status,
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
                response.insert_header(("ETag", crate::service::etag::etag(*current)));
            }
            _ => {}
        }
        response.json(ErrorBody {
            error: ErrorDetail {
                code: self.code(),
                message: self.to_string(),
                field,
                errors: self.field_errors(),
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The JSON body of an error's response.
    fn body(err: &ApiError) -> serde_json::Value {
        let response = err.error_response();
        let bytes = actix_web::body::to_bytes(response.into_body());
        let bytes = futures_util::FutureExt::now_or_never(bytes)
            .expect("a body in memory")
            .expect("a body");
        serde_json::from_slice(&bytes).expect("JSON")
    }

    #[test]
    fn an_error_from_under_the_handlers_is_put_in_the_json_shape() {
        let refused = HttpResponse::from_error(actix_web::error::PayloadError::Overflow);
        let err = foreign::<ApiError>(&refused).expect("not an ApiError");
        assert_eq!(err.status_code(), StatusCode::PAYLOAD_TOO_LARGE);
        let body = body(&err);
        assert_eq!(body["error"]["code"], "PAYLOAD_TOO_LARGE");
        assert_eq!(body["error"]["message"], "payload reached size limit");

        let own = HttpResponse::from_error(ApiError::NotFound("no task 7".into()));
        assert!(foreign::<ApiError>(&own).is_none(), "already in shape");
        assert!(foreign::<ApiError>(&HttpResponse::Ok().finish()).is_none());
    }

    #[test]
    fn a_400_lists_every_field_it_refuses_the_first_as_its_field() {
        let one = body(&ApiError::invalid("cron", "bad cron"));
        assert_eq!(one["error"]["field"], "cron");
        assert_eq!(
            one["error"]["errors"],
            serde_json::json!([{"field": "cron", "message": "bad cron"}])
        );
        let all = ApiError::all(vec![
            ApiError::invalid("cron", "bad cron"),
            ApiError::invalid("maxRetry", "too many"),
        ]);
        let both = body(&all);
        assert_eq!(both["error"]["code"], "INVALID_ARGUMENT");
        assert_eq!(both["error"]["field"], "cron");
        assert_eq!(both["error"]["message"], "bad cron");
        assert_eq!(both["error"]["errors"][1]["field"], "maxRetry");
        let item = body(&all.in_item(2));
        assert_eq!(item["error"]["field"], "items[2].cron");
        assert_eq!(item["error"]["errors"][1]["field"], "items[2].maxRetry");
        assert_eq!(item["error"]["errors"][1]["message"], "items[2]: too many");
        let none = body(&ApiError::NotFound("no task 7".into()));
        assert!(none["error"].get("errors").is_none(), "{none}");
        let unnamed = body(&ApiError::invalid_body("the body must be a JSON object"));
        assert!(unnamed["error"].get("errors").is_none(), "{unnamed}");
    }

    #[test]
    fn a_server_error_keeps_its_detail_for_the_log() {
        let cause = actix_web::error::ErrorInternalServerError("header value has a CR");
        let err = ApiError::http(StatusCode::INTERNAL_SERVER_ERROR, &cause);
        let body = body(&err);
        assert_eq!(body["error"]["code"], "INTERNAL_SERVER_ERROR");
        let message = body["error"]["message"].as_str().expect("a message");
        assert!(!message.contains("CR"), "{message}");
    }
}
