//! The console's URLs: its pages' home (`web::console_home`), sign-in, assets, tasks, runs,
//! scenes, alerts and executor groups.

use crate::run::TaskId;
pub use crate::web::console_home::HOME;

/// The sign-in page, and the sign-out action.
pub const SIGN_IN: &str = "/console/sign-in";
pub const SIGN_OUT: &str = "/console/sign-out";

/// The URL of the asset `name`.
pub fn asset_href(name: &str) -> String {
    format!("/console/assets/{name}")
}

/// The link to a task's page.
pub fn task_href(id: TaskId) -> String {
    format!("/console/tasks/{id}")
}

/// The link to a run's page.
pub fn run_href(request_id: &str) -> String {
    format!("/console/runs/{request_id}")
}

/// The search, whose box heads every page.
pub const SEARCH: &str = "/console/search";

/// The scenes page.
pub const SCENES: &str = "/console/scenes";

/// The link to a scene's page (scene names are `A-Z a-z 0-9 _ . : -`, so they make a valid
/// path segment as they are).
pub fn scene_href(scene: &str) -> String {
    format!("{SCENES}/{scene}")
}

/// The alerts page.
pub const ALERTS: &str = "/console/alerts";

/// The executors page.
pub const EXECUTORS: &str = "/console/executors";

/// The id of an executor group's section on the executors page (group names are
/// `a-z 0-9 _ . -`, so they make a valid fragment as they are).
pub fn group_anchor(group: &str) -> String {
    format!("group-{group}")
}

/// The link to an executor group on the executors page.
pub fn group_href(group: &str) -> String {
    format!("{EXECUTORS}#{}", group_anchor(group))
}
