//! Who a request is from, as the token check found it.

use actix_web::{HttpMessage, HttpRequest};

use ax_core::security::Principal;

/// Who a request is from (see [`require_token`](crate::api::require_token)): the audit log's actor.
pub struct Actor(pub Principal);

impl actix_web::FromRequest for Actor {
    type Error = actix_web::Error;
    type Future = std::future::Ready<Result<Actor, actix_web::Error>>;

    fn from_request(req: &HttpRequest, _: &mut actix_web::dev::Payload) -> Self::Future {
        let principal = req.extensions().get::<Principal>().cloned();
        std::future::ready(Ok(Actor(principal.unwrap_or_else(Principal::anonymous))))
    }
}
