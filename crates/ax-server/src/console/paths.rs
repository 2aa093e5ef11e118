//! The console's URLs: its pages' home (`web::console_home`), sign-in, assets, tasks, runs,
//! scenes, alerts, executor groups and calendars, and a run's page under the console's address (the links
//! in alerts).

pub use crate::web::console_home::HOME;
use ax_core::run::TaskId;

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

/// The full URL of a run's page, under the console's address `base` (see `cluster::identity::reachable_at`).
pub fn run_url(base: &str, request_id: &str) -> String {
    format!("{}{}", base.trim_end_matches('/'), run_href(request_id))
}

/// The scenes page.
pub const SCENES: &str = "/console/scenes";

/// The link to a scene's page (scene names are `A-Z a-z 0-9 _ . : -`, so they make a valid
/// path segment as they are).
pub fn scene_href(scene: &str) -> String {
    format!("{SCENES}/{scene}")
}

/// The calendars page.
pub const CALENDARS: &str = "/console/calendars";

/// The link to a calendar's page (calendar names are `a-z 0-9 _ . -`, so they make a valid
/// path segment as they are).
pub fn calendar_href(name: &str) -> String {
    format!("{CALENDARS}/{name}")
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_runs_link_opens_its_page_under_the_consoles_address() {
        assert_eq!(
            run_url("http://127.0.0.1:8901", "abc"),
            "http://127.0.0.1:8901/console/runs/abc"
        );
        // Behind a proxy, with a path of its own and a trailing slash.
        assert_eq!(
            run_url("https://ops.example.com/ax/", "abc"),
            "https://ops.example.com/ax/console/runs/abc"
        );
    }
}
