//! The console's static files, compiled into the binary and served with their content type
//! and a cache lifetime.

use actix_web::http::header;
use actix_web::{web, HttpResponse};

use super::ConsoleError;

/// One asset: its name in the URL, its content type and its bytes.
struct Asset {
    name: &'static str,
    content_type: &'static str,
    body: &'static [u8],
}

const ASSETS: &[Asset] = &[
    Asset {
        name: "console.css",
        content_type: "text/css; charset=utf-8",
        body: include_bytes!("../../assets/console.css"),
    },
    Asset {
        name: "console.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_bytes!("../../assets/console.js"),
    },
    Asset {
        name: "favicon.svg",
        content_type: "image/svg+xml",
        body: include_bytes!("../../assets/favicon.svg"),
    },
];

/// Browsers keep an asset this long before asking again: their names carry no version, so a
/// new release reaches them within the hour.
const CACHE_CONTROL: &str = "public, max-age=3600";

/// `GET /console/assets/{name}`.
pub async fn serve(name: web::Path<String>) -> Result<HttpResponse, ConsoleError> {
    let asset = ASSETS
        .iter()
        .find(|asset| asset.name == name.as_str())
        .ok_or_else(|| ConsoleError::NotFound(format!("There is no asset named {name}.")))?;
    Ok(HttpResponse::Ok()
        .content_type(asset.content_type)
        .insert_header((header::CACHE_CONTROL, CACHE_CONTROL))
        .body(asset.body))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The budget of scripts and styles a first page load may fetch.
    const FIRST_LOAD_BUDGET: usize = 150 * 1024;

    #[test]
    fn scripts_and_styles_stay_within_the_first_load_budget() {
        let size: usize = ASSETS
            .iter()
            .filter(|asset| asset.name.ends_with(".css") || asset.name.ends_with(".js"))
            .map(|asset| asset.body.len())
            .sum();
        assert!(size <= FIRST_LOAD_BUDGET, "{size} bytes");
    }
}
