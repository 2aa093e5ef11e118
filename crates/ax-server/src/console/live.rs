//! The parts of a page that update by themselves: the console's script listens to
//! `GET /api/events` and, on a change, fetches the page again and replaces each live region
//! by its new content (keeping scroll, focus and every form, which stay outside the regions);
//! without the events it refreshes them every 10 s.

use maud::{html, Markup};

use super::filters::link;

/// A region of a page the script replaces when something changed.
pub fn region(id: &str, body: Markup) -> Markup {
    html! { div id=(id) data-live { (body) } }
}

/// What a live page listens to: the events of `task` or `scene` (all when neither); on a run's
/// page, only `run`'s. The script shows it as the page's live status.
pub fn feed(task: Option<&str>, scene: Option<&str>, run: Option<&str>) -> Markup {
    let events = link("/api/events", &[("task", task), ("scene", scene)]);
    html! {
        p #live-status.hint role="status" hidden data-events=(events) data-run=[run] {}
    }
}
