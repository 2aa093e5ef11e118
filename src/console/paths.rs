//! Where the console lives: its pages' home, its assets' and its tasks' URLs.

use crate::run::TaskId;

/// Where the console lives.
pub const HOME: &str = "/console";

/// The sign-in page, and the sign-out action.
pub const SIGN_IN: &str = "/console/sign-in";
pub const SIGN_OUT: &str = "/console/sign-out";

/// Whether the console answers `path` and so checks who asks itself (with its sign-in), not
/// the API's token check.
pub fn guards_itself(path: &str) -> bool {
    path == "/" || path == HOME || path.starts_with("/console/")
}

/// The URL of the asset `name`.
pub fn asset_href(name: &str) -> String {
    format!("/console/assets/{name}")
}

/// The link to a task's page.
pub fn task_href(id: TaskId) -> String {
    format!("/console/tasks/{id}")
}
