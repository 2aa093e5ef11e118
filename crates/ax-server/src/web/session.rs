//! The console's session as the API's token check sees it: a read from a signed-in console
//! page (the cron preview) is let in as its session's token.

use actix_web::dev::ServiceRequest;

use super::state::ApiState;
use ax_core::security::Principal;

/// The cookie of a signed-in session.
pub const SESSION_COOKIE: &str = "ax_session";

/// Who the session cookie of `req` is signed in as, if it is one of an open session.
pub async fn session_principal(req: &ServiceRequest, state: &ApiState) -> Option<Principal> {
    let secret = req.cookie(SESSION_COOKIE)?.value().to_string();
    if !is_secret(&secret) {
        return None;
    }
    match state.service.session(&secret).await {
        Ok(token) => {
            token.and_then(|(name, digest)| state.security.session_principal(&name, &digest))
        }
        Err(err) => {
            log::warn!("console: a session could not be looked up: {err}");
            None
        }
    }
}

/// Whether a cookie's value has the shape of a secret ax made, so nothing else reaches a query.
pub fn is_secret(value: &str) -> bool {
    value.len() == 64 && value.bytes().all(|b| b.is_ascii_hexdigit())
}
