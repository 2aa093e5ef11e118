//! The console's URLs: its pages' home (`web::console_home`), sign-in, assets, tasks, runs,
//! scenes, alerts and executor groups; and its address as people outside reach it (the links
//! in alerts).

use std::net::SocketAddr;

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

/// The console's address for links sent out (alerts): `configured` (`alerts.console_url`) when
/// set, else the address ax serves on, with this machine's `host_name` for an unspecified
/// one (`0.0.0.0` reaches nothing from elsewhere). No trailing `/`.
pub fn console_base(
    configured: Option<&str>,
    served_on: SocketAddr,
    host_name: Option<String>,
) -> String {
    if let Some(url) = configured {
        return url.trim_end_matches('/').to_string();
    }
    match host_name.filter(|_| served_on.ip().is_unspecified()) {
        Some(host) => format!("http://{host}:{}", served_on.port()),
        None => format!("http://{served_on}"),
    }
}

/// The full URL of a run's page, under the console's address `base` (see [`console_base`]).
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
        let served: SocketAddr = "127.0.0.1:8901".parse().expect("addr");
        let host = || Some("ax-1".to_string());
        let base = console_base(None, served, host());
        assert_eq!(base, "http://127.0.0.1:8901");
        assert_eq!(
            run_url(&base, "abc"),
            "http://127.0.0.1:8901/console/runs/abc"
        );
        // Behind a proxy, with a path of its own and a trailing slash.
        let proxied = console_base(Some("https://ops.example.com/ax/"), served, host());
        assert_eq!(
            run_url(&proxied, "abc"),
            "https://ops.example.com/ax/console/runs/abc"
        );
        // Every interface: the machine's name, which reaches it from elsewhere.
        let any: SocketAddr = "0.0.0.0:8901".parse().expect("addr");
        assert_eq!(console_base(None, any, host()), "http://ax-1:8901");
        assert_eq!(console_base(None, any, None), "http://0.0.0.0:8901");
        let v6: SocketAddr = "[::1]:8901".parse().expect("addr");
        assert_eq!(console_base(None, v6, host()), "http://[::1]:8901");
    }
}
