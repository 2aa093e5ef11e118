//! The headers of every console answer: pages, errors, redirects and assets.

use actix_web::http::header::{
    HeaderValue, AUTHORIZATION, CACHE_CONTROL, CONTENT_SECURITY_POLICY, REFERRER_POLICY,
    SET_COOKIE, X_CONTENT_TYPE_OPTIONS,
};
use actix_web::{HttpRequest, HttpResponse};

use crate::web::session::SESSION_COOKIE;

/// Scripts, styles and images from ax only (the pages have no inline script, style or event
/// handler), no framing by any site, forms sent to ax only.
const POLICY: &str = "default-src 'self'; script-src 'self'; style-src 'self'; \
    img-src 'self' data:; object-src 'none'; frame-ancestors 'none'; base-uri 'none'; \
    form-action 'self'";

/// Whether a request comes with credentials: a session cookie or a token.
pub fn signed_in(req: &HttpRequest) -> bool {
    req.cookie(SESSION_COOKIE).is_some() || req.headers().contains_key(AUTHORIZATION)
}

/// Adds the console's headers to `response`. What a signed-in visitor sees (or an answer that
/// sets a cookie) is never stored by a browser or a proxy; the assets, the same for everyone,
/// keep the lifetime they were served with.
pub fn add(response: &mut HttpResponse, signed_in: bool) {
    let headers = response.headers_mut();
    headers.insert(CONTENT_SECURITY_POLICY, HeaderValue::from_static(POLICY));
    headers.insert(X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(REFERRER_POLICY, HeaderValue::from_static("same-origin"));
    let private = signed_in || headers.contains_key(SET_COOKIE);
    if private && !headers.contains_key(CACHE_CONTROL) {
        headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    }
}
