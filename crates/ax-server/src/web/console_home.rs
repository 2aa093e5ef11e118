//! Where the console lives, as the API's guards and error pages need to know: the paths it
//! answers and checks itself.

/// Where the console lives.
pub const HOME: &str = "/console";

/// Whether the console answers `path` and so checks who asks itself (with its sign-in), not
/// the API's token check.
pub fn guards_itself(path: &str) -> bool {
    path == "/" || path == HOME || path.starts_with("/console/")
}
