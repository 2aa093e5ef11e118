//! The guards in front of every route: the rules of [`ax_core::security::site`] applied to a request's
//! headers, where it comes from before anything else looks at it, whether its body is JSON
//! once it is known who sent it.

use actix_web::body::{BoxBody, MessageBody};
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::header;
use actix_web::{middleware, web};

use super::ApiState;
use crate::error::ApiError;
use ax_core::security::site;

/// Refuses a request for a host ax does not answer to (421) and a change sent by a page of
/// another site (403), on the API and the console alike.
pub async fn same_site(
    req: ServiceRequest,
    next: middleware::Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<BoxBody>, actix_web::Error> {
    if let Some(state) = req.app_data::<web::Data<ApiState>>() {
        check_site(&req, state.security.hosts.as_ref())?;
    }
    Ok(next.call(req).await?.map_into_boxed_body())
}

/// Refuses a body sent to the API without saying it is JSON (415); the console's forms are
/// its own.
pub async fn json_bodies(
    req: ServiceRequest,
    next: middleware::Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<BoxBody>, actix_web::Error> {
    let api = !crate::web::console_home::guards_itself(req.path());
    let body = site::has_body(
        text(&req, header::CONTENT_LENGTH),
        req.headers().contains_key(header::TRANSFER_ENCODING),
    );
    let content_type = text(&req, header::CONTENT_TYPE);
    if api && site::changes(req.method().as_str()) && body && !site::is_json(content_type) {
        return Err(ApiError::NotJson(content_type.map(str::to_string)).into());
    }
    Ok(next.call(req).await?.map_into_boxed_body())
}

fn text(req: &ServiceRequest, name: header::HeaderName) -> Option<&str> {
    req.headers().get(name).and_then(|v| v.to_str().ok())
}

fn check_site(req: &ServiceRequest, hosts: Option<&site::AllowedHosts>) -> Result<(), ApiError> {
    // A request target in absolute form names its host itself (RFC 9112 3.2.2). A request
    // without any (HTTP/1.0) is served: browsers always send one.
    let host = match req.uri().authority() {
        Some(authority) => Some(authority.as_str()),
        None => text(req, header::HOST),
    };
    if let (Some(hosts), Some(host)) = (hosts, host) {
        if !hosts.allows(host) {
            return Err(ApiError::MisdirectedHost(host.to_string()));
        }
    }
    if !site::changes(req.method().as_str()) {
        return Ok(());
    }
    let fetch_site = text(req, header::HeaderName::from_static("sec-fetch-site"));
    let origin = text(req, header::ORIGIN);
    match site::cross_site(fetch_site, origin, host, hosts) {
        Some(header) => {
            let value = if header == "Origin" {
                origin
            } else {
                fetch_site
            };
            Err(ApiError::CrossSite {
                header,
                value: value.unwrap_or_default().to_string(),
            })
        }
        None => Ok(()),
    }
}
