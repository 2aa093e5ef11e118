//! How a console page goes out.

use actix_web::http::{header, StatusCode};
use actix_web::HttpResponse;
use maud::Markup;

/// A rendered page with this status.
pub fn html(status: StatusCode, page: Markup) -> HttpResponse {
    HttpResponse::build(status)
        .content_type("text/html; charset=utf-8")
        .body(page.into_string())
}

/// The answer to a form: go on to `location` (a GET), so a reload does not post again.
pub fn see_other(location: &str) -> HttpResponse {
    HttpResponse::SeeOther()
        .insert_header((header::LOCATION, location))
        .finish()
}

/// A page answered 200.
pub fn ok(page: Markup) -> HttpResponse {
    html(StatusCode::OK, page)
}
