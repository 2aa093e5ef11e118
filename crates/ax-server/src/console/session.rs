//! Who is at the console: the sign-in page, the session cookie, the CSRF token of every form,
//! and the guard that lets a page or an action through.
//!
//! With tokens configured, signing in with one opens a session in the store (so any ax process
//! of a cluster knows it), carried by an `HttpOnly`, `SameSite=Strict` cookie; a request with
//! `Authorization: Bearer <token>` is let in as that token too. Without tokens the console is
//! open, like the API. Either way every form carries a CSRF token the server checks: an HMAC
//! (keyed with the signing secret) of the session when there is one, else of a random cookie
//! of its own (a signed double submit). A session lasts while the token it signed in with is
//! configured under its name: the session row keeps the token's digest.

use actix_web::body::{BoxBody, MessageBody};
use actix_web::cookie::{Cookie, SameSite};
use actix_web::dev::{Payload, ServiceRequest, ServiceResponse};
use actix_web::http::{header, Method};
use actix_web::{middleware, web, FromRequest, HttpMessage, HttpRequest, HttpResponse};
use futures_util::future::LocalBoxFuture;
use maud::{html, Markup};

use super::error::ConsoleError;
use super::layout::{self, Notice};
use super::paths::{HOME, SIGN_IN, SIGN_OUT};
use super::respond::{html as respond, ok, see_other};
use super::visitor::CSRF_FIELD;
pub use super::visitor::{csrf_field, Submitted, Visitor};
use crate::web::session::{is_secret, session_principal, SESSION_COOKIE};
use crate::web::ApiState;
use ax_core::security::{self, same_secret, Principal};

/// The cookie of the CSRF token when there is no session (no tokens configured, or the sign-in
/// form itself).
const CSRF_COOKIE: &str = "ax_csrf";
/// How long a sign-in lasts.
const SESSION_HOURS: i64 = 12;

impl FromRequest for Visitor {
    type Error = actix_web::Error;
    type Future = std::future::Ready<Result<Visitor, actix_web::Error>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        let visitor = req.extensions().get::<Visitor>().cloned();
        std::future::ready(visitor.ok_or_else(|| ConsoleError::SignInRequired.into()))
    }
}

impl FromRequest for Submitted {
    type Error = actix_web::Error;
    type Future = LocalBoxFuture<'static, Result<Submitted, actix_web::Error>>;

    fn from_request(req: &HttpRequest, payload: &mut Payload) -> Self::Future {
        let body = web::Bytes::from_request(req, payload);
        let expected = req.extensions().get::<Visitor>().map(|v| v.csrf.clone());
        Box::pin(async move {
            let body = body.await?;
            let fields: Vec<(String, String)> =
                url::form_urlencoded::parse(&body).into_owned().collect();
            let given = fields.iter().find(|(key, _)| key == CSRF_FIELD);
            match (expected, given) {
                (Some(expected), Some((_, given))) if same_secret(given, &expected) => {
                    Ok(Submitted { fields })
                }
                _ => Err(ConsoleError::CsrfFailed.into()),
            }
        })
    }
}

/// Lets a console request through as its visitor, or sends it to the sign-in page; a change
/// needs an admin. Sets the CSRF cookie when the request had none.
pub async fn guard(
    req: ServiceRequest,
    next: middleware::Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<BoxBody>, actix_web::Error> {
    let Some(state) = req.app_data::<web::Data<ApiState>>().cloned() else {
        return Err(ConsoleError::Failed("the console has no state".into()).into());
    };
    let security = &state.security;
    let cookie_csrf = req
        .cookie(CSRF_COOKIE)
        .map(|cookie| cookie.value().to_string())
        .filter(|value| is_secret(value));
    let session = req
        .cookie(SESSION_COOKIE)
        .map(|cookie| cookie.value().to_string())
        .filter(|value| is_secret(value));
    let at_sign_in = req.path() == SIGN_IN;
    let principal = if !security.has_tokens() {
        Some(Principal::anonymous())
    } else if let Some(principal) = bearer(&req, security) {
        Some(principal)
    } else if offers_bearer(&req) {
        // A wrong token, even beside a session: the page would tell a guess that is right.
        state
            .auth_failures
            .failed(req.peer_addr(), "console token")
            .await;
        None
    } else if session.is_some() {
        session_principal(&req, &state).await
    } else {
        None
    };
    // A session's forms carry a token bound to it; without one, bound to the CSRF cookie.
    // Either is keyed with the signing secret: a cookie planted by another app on this host
    // (cookies ignore ports) has no token of ax's to go with it.
    let new_cookie = cookie_csrf.is_none().then(security::new_secret);
    let bound_to = principal
        .as_ref()
        .and(session)
        .or(cookie_csrf)
        .or_else(|| new_cookie.clone())
        .unwrap_or_default();
    let csrf = security::csrf_token(&security.secret, &bound_to);
    let reads = matches!(*req.method(), Method::GET | Method::HEAD);
    let principal = match principal {
        Some(principal) => principal,
        None if at_sign_in => Principal::anonymous(),
        None if reads => {
            let target = format!("{SIGN_IN}?next={}", encoded(&local_target(&req)));
            return Ok(req.into_response(see_other(&target)));
        }
        None => return Err(ConsoleError::SignInRequired.into()),
    };
    if !principal.may_read() && !at_sign_in && req.path() != SIGN_OUT {
        return Err(ConsoleError::Forbidden(principal.name).into());
    }
    if !reads && !at_sign_in && req.path() != SIGN_OUT && !principal.may_change() {
        return Err(ConsoleError::Forbidden(principal.name).into());
    }
    let notice = Notice::from_query(req.query_string());
    req.extensions_mut().insert(Visitor {
        signed_in: security.has_tokens() && !at_sign_in,
        principal,
        csrf,
        notice,
    });
    let secure = req.connection_info().scheme() == "https";
    let mut response = next.call(req).await?.map_into_boxed_body();
    if let Some(value) = new_cookie {
        let cookie = private_cookie(CSRF_COOKIE, value, secure);
        response.response_mut().add_cookie(&cookie)?;
    }
    Ok(response)
}

/// Who an `Authorization: Bearer` header names, when it carries a configured token.
fn bearer(req: &ServiceRequest, security: &security::Security) -> Option<Principal> {
    let header = req.headers().get(header::AUTHORIZATION)?.to_str().ok()?;
    security.authorize(Some(header))
}

/// Whether an `Authorization` header offers a token (a proxy's `Basic` one is not ax's).
fn offers_bearer(req: &ServiceRequest) -> bool {
    req.headers()
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(security::bearer_token)
        .is_some()
}

/// A cookie scripts cannot read and other sites' requests do not carry.
fn private_cookie(name: &str, value: String, secure: bool) -> Cookie<'static> {
    Cookie::build(name.to_string(), value)
        .path("/")
        .http_only(true)
        .same_site(SameSite::Strict)
        .secure(secure)
        .finish()
}

/// The page a request asked for, to return to after signing in.
fn local_target(req: &ServiceRequest) -> String {
    match req.query_string() {
        "" => req.path().to_string(),
        query => format!("{}?{query}", req.path()),
    }
}

fn encoded(text: &str) -> String {
    url::form_urlencoded::byte_serialize(text.as_bytes()).collect()
}

/// Where to go after signing in: the dashboard unless another console page is asked for; a
/// `next` that is no console page (another site, or text no `Location` may hold) is refused.
fn next_page(next: Option<&str>) -> Result<&str, ConsoleError> {
    let Some(next) = next else {
        return Ok(HOME);
    };
    let console_page =
        (next == HOME || next.starts_with("/console/") || next.starts_with("/console?"))
            && !next.contains("//")
            && !next.chars().any(char::is_control);
    match console_page {
        true if next.starts_with(SIGN_IN) => Ok(HOME),
        true => Ok(next),
        false => Err(crate::error::ApiError::invalid(
            "next",
            "next must be a page of the console: a path under /console, without // or control characters",
        )
        .into()),
    }
}

/// `GET /console/sign-in?next=`: the form, or straight on when there is nothing to sign in to.
pub async fn sign_in_form(
    state: web::Data<ApiState>,
    visitor: Visitor,
    req: HttpRequest,
) -> Result<HttpResponse, ConsoleError> {
    let params = super::filters::params(&req);
    let next = next_page(params.get("next").map(String::as_str))?;
    if !state.security.has_tokens() {
        return Ok(see_other(next));
    }
    Ok(ok(sign_in_page(&visitor, next, None)))
}

/// `POST /console/sign-in`: with a configured token, opens a session and goes on to `next`.
pub async fn sign_in(
    state: web::Data<ApiState>,
    visitor: Visitor,
    form: Submitted,
    req: HttpRequest,
) -> Result<HttpResponse, ConsoleError> {
    let next = next_page(form.get("next"))?.to_string();
    let token = form.get("token").unwrap_or_default();
    let principal = (!token.is_empty())
        .then(|| state.security.authorize(Some(&format!("Bearer {token}"))))
        .flatten()
        .filter(|_| state.security.has_tokens());
    let Some(principal) = principal else {
        let error = if token.is_empty() {
            "Enter a token."
        } else {
            state.auth_failures.failed(req.peer_addr(), "sign-in").await;
            "This is not a token of this ax."
        };
        let page = sign_in_page(&visitor, &next, Some(error));
        return Ok(respond(actix_web::http::StatusCode::UNAUTHORIZED, page));
    };
    let lifetime = chrono::Duration::hours(SESSION_HOURS);
    let digest = state.security.token_digest(token);
    let secret = state
        .service
        .open_session(&principal.name, &digest, lifetime)
        .await?;
    log::info!("console: {} signed in", principal.name);
    let secure = req.connection_info().scheme() == "https";
    let mut cookie = private_cookie(SESSION_COOKIE, secret, secure);
    cookie.set_max_age(actix_web::cookie::time::Duration::hours(SESSION_HOURS));
    let mut response = see_other(&next);
    response
        .add_cookie(&cookie)
        .map_err(|err| ConsoleError::Failed(err.to_string()))?;
    Ok(response)
}

/// `POST /console/sign-out`: ends the session in the store and drops its cookie.
pub async fn sign_out(
    state: web::Data<ApiState>,
    _form: Submitted,
    req: HttpRequest,
) -> Result<HttpResponse, ConsoleError> {
    if let Some(cookie) = req.cookie(SESSION_COOKIE) {
        if is_secret(cookie.value()) {
            state.service.close_session(cookie.value()).await?;
        }
    }
    let mut response = see_other(&format!("{SIGN_IN}?done=signed-out"));
    let mut gone = private_cookie(SESSION_COOKIE, String::new(), false);
    gone.make_removal();
    response
        .add_cookie(&gone)
        .map_err(|err| ConsoleError::Failed(err.to_string()))?;
    Ok(response)
}

fn sign_in_page(visitor: &Visitor, next: &str, error: Option<&str>) -> Markup {
    layout::page(
        visitor,
        "Sign in",
        None,
        html! {
            p { "Sign in with an ax token: the admin token or a named one from "
                code { "server.tokens" } "." }
            form.stacked method="post" action=(SIGN_IN) {
                (csrf_field(visitor))
                input type="hidden" name="next" value=(next);
                (layout::input("token", "Token", "password", None, error))
                div.field { button type="submit" { "Sign in" } }
            }
        },
    )
}

#[cfg(test)]
pub(super) mod tests {
    use actix_web::ResponseError;

    use super::*;

    /// The visitor of a console without tokens, for rendering pages in tests.
    pub fn visitor() -> Visitor {
        Visitor {
            principal: Principal::anonymous(),
            signed_in: false,
            csrf: "0".repeat(64),
            notice: None,
        }
    }

    #[test]
    fn only_console_pages_are_returned_to() {
        for page in ["/console/tasks?scene=a", "/console", "/console?done=saved"] {
            assert_eq!(next_page(Some(page)).ok(), Some(page));
        }
        assert_eq!(next_page(None).ok(), Some(HOME));
        assert_eq!(next_page(Some("/console/sign-in?next=/x")).ok(), Some(HOME));
        for elsewhere in [
            "https://evil.example/",
            "//evil.example/console",
            "/console//evil.example",
            "/consoles",
            "/api/tasks",
            "/console/tasks\r\nSet-Cookie: a=b",
            "/console/\u{7f}",
        ] {
            let err = next_page(Some(elsewhere)).expect_err(elsewhere);
            assert_eq!(err.status_code(), actix_web::http::StatusCode::BAD_REQUEST);
            assert!(err.to_string().contains("next must be"), "{err}");
        }
    }

    #[test]
    fn only_secrets_ax_makes_are_read_from_cookies() {
        assert!(is_secret(&security::new_secret()));
        assert!(!is_secret("abc"));
        assert!(!is_secret(&"z".repeat(64)));
    }
}
