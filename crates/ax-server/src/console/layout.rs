//! What every console page shares: the layout (skip link, navigation, `<main>`), status badges,
//! times, and the error page.

use chrono::{DateTime, NaiveDateTime, Utc};
use maud::{html, Markup, DOCTYPE};

use super::filters::{Around, Params};
pub use super::notice::Notice;
use super::paths::{asset_href, ALERTS, CALENDARS, EXECUTORS, SCENES, SEARCH};
use super::visitor::{csrf_field, sign_out_form, Visitor};
use ax_core::alerting::{AlertEvent, AlertStatus};
use ax_core::dispatch::routing::HealthState;
use ax_core::run::RunStatus;
use ax_store::from_db;
use ax_store::rows::models::TaskStatus;

/// The pages the navigation names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Section {
    Dashboard,
    Tasks,
    Runs,
    Alerts,
    Scenes,
    Executors,
    Calendars,
    Schedule,
    Audit,
}

const SECTIONS: &[(Section, &str, &str)] = &[
    (Section::Dashboard, "Dashboard", "/console"),
    (Section::Tasks, "Tasks", "/console/tasks"),
    (Section::Runs, "Runs", "/console/runs"),
    (Section::Alerts, "Alerts", ALERTS),
    (Section::Scenes, "Scenes", SCENES),
    (Section::Executors, "Executors", EXECUTORS),
    (Section::Calendars, "Calendars", CALENDARS),
    (Section::Schedule, "Schedule", "/console/schedule"),
    (Section::Audit, "Audit log", "/console/audit"),
];

/// `path` with the query that tells `notice` on it.
pub fn notice_link(path: &str, notice: Notice) -> String {
    format!("{path}?{}", notice.query())
}

/// A whole page: `title` heads it and names it in the browser; `section` is marked current in
/// the navigation.
pub fn page(visitor: &Visitor, title: &str, section: Option<Section>, body: Markup) -> Markup {
    frame(Some(visitor), title, section, body)
}

/// A page's frame, with the visitor's sign-out and notice when there is a visitor.
fn frame(visitor: Option<&Visitor>, title: &str, section: Option<Section>, body: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) " · ax" }
                link rel="stylesheet" href=(asset_href("console.css"));
                link rel="icon" href=(asset_href("favicon.svg")) type="image/svg+xml";
                script src=(asset_href("console.js")) defer {}
            }
            body {
                a.skip href="#main" { "Skip to content" }
                header.top {
                    a.brand href="/console" { "ax" }
                    nav aria-label="Console" {
                        ul {
                            @for (each, name, href) in SECTIONS {
                                li {
                                    a href=(href)
                                        aria-current=[(section == Some(*each)).then_some("page")]
                                    { (name) }
                                }
                            }
                        }
                    }
                    (search_box())
                    // Shown by the script, which is what it needs.
                    button #zone-switch type="button" hidden aria-pressed="false" {
                        "Times: UTC"
                    }
                    @if let Some(visitor) = visitor.filter(|v| v.signed_in) {
                        (sign_out_form(visitor))
                    }
                }
                main #main tabindex="-1" {
                    h1 { (title) }
                    @if let Some(notice) = visitor.and_then(|v| v.notice) {
                        p.notice role="status" { (notice.text()) }
                    }
                    (body)
                }
                (keys_help())
            }
        }
    }
}

/// The search that heads every page (`/` reaches it where no filter field is nearer): a
/// request id, its start, or text in a task's `scene/name`.
fn search_box() -> Markup {
    html! {
        form.search method="get" action=(SEARCH) role="search" {
            label.hidden-label for="search-q" { "Search runs by request id, tasks by scene/name" }
            input #search-q name="q" type="search" placeholder="Request id or task"
                autocomplete="off" spellcheck="false";
            button type="submit" { "Search" }
        }
    }
}

/// The keyboard shortcuts, shown by the script on `?` (they need it).
fn keys_help() -> Markup {
    const KEYS: &[(&str, &str)] = &[
        ("/", "the page's filter, else the search"),
        (
            "g d · g t · g r · g a · g s",
            "dashboard, tasks, runs, alerts, schedule",
        ),
        ("j · k", "next or previous row of a table"),
        ("Enter · o", "open the row"),
        ("?", "show or hide this list"),
    ];
    html! {
        aside #keys-help hidden aria-label="Keyboard shortcuts" {
            h2 { "Keyboard shortcuts" }
            dl { @for (keys, what) in KEYS { dt { kbd { (keys) } } dd { (what) } } }
        }
    }
}

/// The page of an error, in the same layout.
pub fn error_page(title: &str, message: &str) -> Markup {
    frame(
        None,
        title,
        None,
        html! {
            p.error role="alert" { (message) }
            p { a href="/console" { "Back to the dashboard" } }
        },
    )
}

/// How a status reads at a glance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tone {
    Good,
    Bad,
    Busy,
    Idle,
    Warn,
}

impl Tone {
    fn class(self) -> &'static str {
        match self {
            Tone::Good => "badge good",
            Tone::Bad => "badge bad",
            Tone::Busy => "badge busy",
            Tone::Idle => "badge idle",
            Tone::Warn => "badge warn",
        }
    }
}

fn run_tone(status: RunStatus) -> Tone {
    match status {
        RunStatus::Success => Tone::Good,
        RunStatus::Failed => Tone::Bad,
        RunStatus::Ready | RunStatus::Running => Tone::Busy,
        RunStatus::Pending | RunStatus::Cancelled => Tone::Idle,
        RunStatus::Missed | RunStatus::Skipped => Tone::Warn,
    }
}

/// A run's status as a coloured badge.
pub fn run_badge(status: RunStatus) -> Markup {
    html! { span class=(run_tone(status).class()) { (status.as_str()) } }
}

fn alert_tone(status: AlertStatus) -> Tone {
    match status {
        AlertStatus::Sent => Tone::Good,
        AlertStatus::Failed => Tone::Bad,
        AlertStatus::Pending => Tone::Busy,
        AlertStatus::Folded => Tone::Idle,
    }
}

/// An alert's status as a coloured badge.
pub fn alert_badge(status: AlertStatus) -> Markup {
    html! { span class=(alert_tone(status).class()) { (status.as_str()) } }
}

/// What an alert is about as a coloured badge, as the run's own status reads.
pub fn event_badge(event: AlertEvent) -> Markup {
    let tone = match event {
        AlertEvent::Resolved => Tone::Good,
        AlertEvent::Missed | AlertEvent::Skipped | AlertEvent::Lag => Tone::Warn,
        AlertEvent::Test => Tone::Idle,
        AlertEvent::Failed
        | AlertEvent::UpstreamFailed
        | AlertEvent::DependencyTimeout
        | AlertEvent::MemberUnhealthy
        | AlertEvent::ProcessLeft
        | AlertEvent::StoreUnreachable
        | AlertEvent::RedisUnreachable
        | AlertEvent::ClockSkew => Tone::Bad,
    };
    html! { span class=(tone.class()) { (event.as_str()) } }
}

/// A task's status as a coloured badge.
pub fn task_badge(status: TaskStatus) -> Markup {
    let tone = match status {
        TaskStatus::Enabled => Tone::Good,
        TaskStatus::Paused => Tone::Idle,
    };
    html! { span class=(tone.class()) { (status.as_str()) } }
}

/// How an executor member's health reads, with its name as the API spells it.
fn health_look(state: HealthState) -> (Tone, &'static str) {
    match state {
        HealthState::Healthy => (Tone::Good, "HEALTHY"),
        HealthState::Unhealthy => (Tone::Bad, "UNHEALTHY"),
        HealthState::Probing => (Tone::Warn, "PROBING"),
        HealthState::Gone => (Tone::Idle, "GONE"),
    }
}

/// An executor member's health as a coloured badge.
pub fn health_badge(state: HealthState) -> Markup {
    let (tone, name) = health_look(state);
    html! { span class=(tone.class()) { (name) } }
}

/// A task's state as badges: its own status, and `SCENE PAUSED` while its scene is paused
/// (it fires only when neither is paused).
pub fn task_state(status: TaskStatus, scene_paused: bool) -> Markup {
    html! {
        (task_badge(status))
        @if scene_paused { " " span class=(Tone::Idle.class()) title="its scene is paused: it does not fire" { "SCENE PAUSED" } }
    }
}

/// A paused scene's badge: none of its tasks fires until it is resumed.
pub fn scene_paused_badge() -> Markup {
    html! { span class=(Tone::Idle.class()) title="none of its tasks fires until it is resumed" { "PAUSED" } }
}

/// A UTC instant, which the script shows in the browser's zone when asked to.
pub fn time(at: DateTime<Utc>) -> Markup {
    html! {
        time datetime=(ax_core::time::clock::rfc3339(at)) {
            (at.format("%Y-%m-%d %H:%M:%S")) " UTC"
        }
    }
}

/// A UTC instant that stays in UTC when the script switches the others (beside the same
/// instant in another zone).
pub fn fixed_utc(at: DateTime<Utc>) -> Markup {
    html! {
        time.fixed datetime=(ax_core::time::clock::rfc3339(at)) {
            (at.format("%Y-%m-%d %H:%M:%S")) " UTC"
        }
    }
}

/// A stored time (UTC) as [`time`].
pub fn stored_time(at: NaiveDateTime) -> Markup {
    time(from_db(at))
}

/// An optional stored time; a dash when there is none.
pub fn maybe_time(at: Option<NaiveDateTime>) -> Markup {
    match at {
        Some(at) => stored_time(at),
        None => none(),
    }
}

/// The mark of an empty cell.
pub fn none() -> Markup {
    html! { span.none aria-label="none" { "—" } }
}

/// A duration in milliseconds, readable: `850 ms`, `12.3 s`, `4 min 10 s`.
pub fn millis(ms: i64) -> String {
    let abs = ms.unsigned_abs();
    let sign = if ms < 0 { "-" } else { "" };
    match abs {
        0..=999 => format!("{sign}{abs} ms"),
        1_000..=59_999 => format!("{sign}{:.1} s", abs as f64 / 1000.0),
        _ => format!("{sign}{} min {} s", abs / 60_000, abs % 60_000 / 1000),
    }
}

/// A table that scrolls sideways on narrow screens instead of overflowing the page; `label`
/// names the region for keyboard and screen-reader users.
pub fn scrolling(label: &str, table: Markup) -> Markup {
    html! { div.scroll role="region" aria-label=(label) tabindex="0" { (table) } }
}

/// The links between the pages of a listing paged by cursor (see [`Around`]): to the first
/// page and the previous one from a later one, on to the next when there is one; `href` makes a
/// page's link from its query.
pub fn paging(label: &str, around: &Around, href: impl Fn(&Params) -> String) -> Markup {
    html! {
        nav.paging aria-label=(label) {
            (page_links(around, href))
        }
    }
}

/// The links of [`paging`], for a listing that says more beside them.
pub fn page_links(around: &Around, href: impl Fn(&Params) -> String) -> Markup {
    html! {
        @if let Some(first) = &around.first {
            a href=(href(first)) { "First page" }
        }
        @if let Some(previous) = &around.previous {
            a href=(href(previous)) rel="prev" { "Previous page" }
        }
        @if let Some(next) = &around.next {
            a href=(href(next)) rel="next" { "Next page" }
        }
    }
}

/// A labelled form field around `control`, with the error that names it, if any, beside it.
fn field(name: &str, label: &str, error: Option<&str>, control: Markup) -> Markup {
    html! {
        div.field {
            label for=(name) { (label) }
            (control)
            @if let Some(error) = error {
                span.field-error id=(format!("{name}-error")) { (error) }
            }
        }
    }
}

/// The id of the error beside field `name`, when there is one.
fn described_by(name: &str, error: Option<&str>) -> Option<String> {
    error.map(|_| format!("{name}-error"))
}

/// A text input of a filter form: `kind` is its HTML input type.
pub fn input(
    name: &str,
    label: &str,
    kind: &str,
    value: Option<&str>,
    error: Option<&str>,
) -> Markup {
    field(
        name,
        label,
        error,
        html! {
            input #(name) name=(name) type=(kind) value=[value]
                aria-invalid=[error.map(|_| "true")]
                aria-describedby=[described_by(name, error)];
        },
    )
}

/// A text input offering `choices` as the browser filters them while one types (a
/// `<datalist>`, no script), any other text still taken, for the server to check.
pub fn searchable(
    name: &str,
    label: &str,
    value: &str,
    choices: &[String],
    error: Option<&str>,
) -> Markup {
    let list = format!("{name}-choices");
    field(
        name,
        label,
        error,
        html! {
            input #(name) name=(name) type="text" value=(value) list=(list) autocomplete="off"
                spellcheck="false"
                aria-invalid=[error.map(|_| "true")]
                aria-describedby=[described_by(name, error)];
            datalist #(list) { @for choice in choices { option value=(choice); } }
        },
    )
}

/// A choice of a filter form; the empty choice, `any`, filters nothing.
pub fn select(
    name: &str,
    label: &str,
    choices: &[&str],
    value: Option<&str>,
    error: Option<&str>,
) -> Markup {
    let value = value.unwrap_or_default();
    choice(name, label, Some("any"), choices, value, error)
}

/// A choice of a form with no empty choice, `value` chosen.
pub fn select_of(
    name: &str,
    label: &str,
    choices: &[&str],
    value: &str,
    error: Option<&str>,
) -> Markup {
    choice(name, label, None, choices, value, error)
}

/// A `<select>` of `choices`, after an empty one named `empty` if given, `value` chosen.
fn choice(
    name: &str,
    label: &str,
    empty: Option<&str>,
    choices: &[&str],
    value: &str,
    error: Option<&str>,
) -> Markup {
    field(
        name,
        label,
        error,
        html! {
            select #(name) name=(name)
                aria-invalid=[error.map(|_| "true")]
                aria-describedby=[described_by(name, error)]
            {
                @if let Some(empty) = empty { option value="" { (empty) } }
                @for choice in choices {
                    option value=(choice) selected[value == *choice] { (choice) }
                }
            }
        },
    )
}

/// A text area of `rows` lines.
pub fn textarea(name: &str, label: &str, value: &str, rows: u32, error: Option<&str>) -> Markup {
    field(
        name,
        label,
        error,
        html! {
            textarea #(name) name=(name) rows=(rows) spellcheck="false"
                aria-invalid=[error.map(|_| "true")]
                aria-describedby=[described_by(name, error)]
            { (value) }
        },
    )
}

/// A whole number, typed as text (so what the API refuses is shown as typed), with a hint.
pub fn number(name: &str, label: &str, hint: &str, value: &str, error: Option<&str>) -> Markup {
    let hint_id = format!("{name}-hint");
    let described = match described_by(name, error) {
        Some(error_id) => format!("{hint_id} {error_id}"),
        None => hint_id.clone(),
    };
    field(
        name,
        label,
        error,
        html! {
            input #(name) name=(name) type="text" inputmode="numeric" value=(value)
                aria-invalid=[error.map(|_| "true")]
                aria-describedby=(described);
            span.hint #(hint_id) { (hint) }
        },
    )
}

/// A checkbox with its label after it.
pub fn checkbox(name: &str, label: &str, checked: bool) -> Markup {
    html! {
        div.field.check {
            input #(name) name=(name) type="checkbox" value="true" checked[checked];
            label for=(name) { (label) }
        }
    }
}

/// A filter form (GET, so the filters are in the URL) with these fields.
pub fn filter_form(action: &str, fields: Markup) -> Markup {
    html! {
        form.filters method="get" action=(action) role="search" {
            (fields)
            div.field {
                button type="submit" { "Filter" }
            }
            div.field {
                a href=(action) { "Clear filters" }
            }
        }
    }
}

/// A button that posts to `action` (a change: CSRF-checked, for admins only; shown to them).
pub fn action_button(visitor: &Visitor, action: &str, label: &str) -> Markup {
    html! {
        @if visitor.may_change() {
            form.inline method="post" action=(action) {
                (csrf_field(visitor))
                button type="submit" { (label) }
            }
        }
    }
}

/// JSON text indented for reading; as it is if it is not JSON.
pub fn pretty_json(text: &str) -> String {
    serde_json::from_str::<serde_json::Value>(text)
        .ok()
        .and_then(|value| serde_json::to_string_pretty(&value).ok())
        .unwrap_or_else(|| text.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_run_status_has_its_colour() {
        let class = |status| run_tone(status).class();
        assert_eq!(class(RunStatus::Success), "badge good");
        assert_eq!(class(RunStatus::Failed), "badge bad");
        assert_eq!(class(RunStatus::Running), "badge busy");
        assert_eq!(class(RunStatus::Ready), "badge busy");
        assert_eq!(class(RunStatus::Pending), "badge idle");
        assert_eq!(class(RunStatus::Missed), "badge warn");
    }

    #[test]
    fn every_alert_status_has_its_colour() {
        let class = |status| alert_tone(status).class();
        assert_eq!(class(AlertStatus::Sent), "badge good");
        assert_eq!(class(AlertStatus::Failed), "badge bad");
        assert_eq!(class(AlertStatus::Pending), "badge busy");
        assert_eq!(class(AlertStatus::Folded), "badge idle");
    }

    #[test]
    fn health_badges_name_the_state_as_the_api_does() {
        for state in [
            HealthState::Healthy,
            HealthState::Unhealthy,
            HealthState::Probing,
        ] {
            let (_, name) = health_look(state);
            assert_eq!(serde_json::to_value(state).ok(), Some(name.into()));
        }
        assert_eq!(health_look(HealthState::Unhealthy).0, Tone::Bad);
        assert_eq!(health_look(HealthState::Probing).0, Tone::Warn);
    }

    #[test]
    fn durations_read_in_their_unit() {
        assert_eq!(millis(850), "850 ms");
        assert_eq!(millis(12_345), "12.3 s");
        assert_eq!(millis(250_000), "4 min 10 s");
        assert_eq!(millis(-20), "-20 ms");
    }

    #[test]
    fn times_are_utc_with_a_machine_readable_instant() {
        let at = DateTime::from_timestamp(1_700_000_000, 0).expect("a time");
        assert_eq!(
            time(at).into_string(),
            r#"<time datetime="2023-11-14T22:13:20.000Z">2023-11-14 22:13:20 UTC</time>"#
        );
    }

    #[test]
    fn text_is_escaped() {
        let page = error_page("Not Found", "<script>alert(1)</script>").into_string();
        assert!(page.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
        assert!(!page.contains("<script>alert"));
    }
}
