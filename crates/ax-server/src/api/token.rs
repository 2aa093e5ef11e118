//! The token check in front of the API: an endpoint that asks for one gets a configured
//! token, or the console's session for a read.

use actix_web::body::{BoxBody, MessageBody};
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::{header, Method};
use actix_web::{middleware, web, HttpMessage};

use crate::error::ApiError;
use crate::web::session::session_principal;
use crate::web::ApiState;
use ax_core::security::Role;

/// Whether a call is one an executor's token may make: registering or removing a member of a
/// group (`/api/executors/{group}/members`).
fn executor_may(method: &Method, path: &str) -> bool {
    let member_call = path
        .strip_prefix("/api/executors/")
        .and_then(|rest| rest.strip_suffix("/members"))
        .is_some_and(|group| !group.is_empty() && !group.contains('/'));
    member_call && matches!(*method, Method::POST | Method::DELETE)
}

/// Requires a token (when any is configured) on every endpoint that says so, and an admin's
/// for a change; who the request is from is kept for the handler ([`Actor`](crate::web::Actor)). The result
/// callback proves itself with its run's callback token instead.
pub async fn require_token(
    req: ServiceRequest,
    next: middleware::Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<BoxBody>, actix_web::Error> {
    let open = super::is_open(req.method(), req.path())
        || crate::web::console_home::guards_itself(req.path());
    let state = req.app_data::<web::Data<ApiState>>().cloned();
    if let (false, Some(state)) = (open, state) {
        let authorization = req
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|value| value.to_str().ok());
        let reads = matches!(*req.method(), Method::GET | Method::HEAD);
        let mut principal = state.security.authorize(authorization);
        // The console's pages read the API (the cron preview) with their session; changes
        // need the token, so a session cookie cannot be used across sites to make one.
        if principal.is_none() && authorization.is_none() && reads {
            principal = session_principal(&req, &state).await;
        }
        let Some(principal) = principal else {
            let what = format!("API token for {} {}", req.method(), req.path());
            state.auth_failures.failed(req.peer_addr(), &what).await;
            return Err(ApiError::Unauthorized.into());
        };
        let executor_call = executor_may(req.method(), req.path());
        if principal.role == Role::Executor && !executor_call {
            let why = format!(
                "the token `{}` is an executor's: it may register members and send callbacks, \
                 nothing else",
                principal.name
            );
            return Err(ApiError::Forbidden(why).into());
        }
        let allowed = reads || principal.may_change() || principal.role == Role::Executor;
        if !allowed {
            let why = format!(
                "the token `{}` is a viewer's: it may read, not change",
                principal.name
            );
            return Err(ApiError::Forbidden(why).into());
        }
        req.extensions_mut().insert(principal);
    }
    Ok(next.call(req).await?.map_into_boxed_body())
}
