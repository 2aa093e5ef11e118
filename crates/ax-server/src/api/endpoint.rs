//! One endpoint of the HTTP API, as the router mounts it and the OpenAPI document describes it.

/// One endpoint: the router mounts it and the OpenAPI document describes it, from this one
/// table, so the two cannot drift apart.
pub struct Endpoint {
    pub method: &'static str,
    /// The path, with `{name}` parameters (the same syntax for actix-web and OpenAPI).
    pub path: &'static str,
    pub summary: &'static str,
    /// Whether the admin token is required (when one is configured).
    pub admin: bool,
    pub(super) route: fn() -> actix_web::Route,
}
