//! The alerts page (`/console/alerts`, filtered in the URL, paged by the API's cursor), and
//! the alerts section of a task's and a scene's page: the rule that applies, where it comes
//! from, and the last alerts.

use actix_web::http::StatusCode;
use actix_web::{web, HttpRequest, HttpResponse};
use maud::{html, Markup};

use super::filters::{self, error_for, FilterError, Params, ALERT_FILTERS, PAGE_SIZE};
use super::layout::{self, alert_badge, event_badge, none, page, scrolling, stored_time, Section};
use super::paths::{run_href, task_href, ALERTS};
use super::session::Visitor;
use super::{html as respond, ok, ConsoleError};
use crate::api::validate::next_alert_cursor;
use crate::web::ApiState;
use ax_core::alerting::{most_specific, AlertRule, AlertStatus};
use ax_store::queries::alerts::AlertRow;

/// `GET /console/alerts?task=&scene=&status=&cursor=`.
pub async fn list(
    state: web::Data<ApiState>,
    visitor: Visitor,
    req: HttpRequest,
) -> Result<HttpResponse, ConsoleError> {
    let params = filters::params(&req);
    let filter = match filters::alerts(&params) {
        Ok(filter) => filter,
        Err(error) => {
            let page = list_page(&visitor, &params, Some(&error), None);
            return Ok(respond(StatusCode::BAD_REQUEST, page));
        }
    };
    let service = &state.service;
    let alerts = service.alerts(filter, PAGE_SIZE).await?;
    let listing = Listing {
        next: next_alert_cursor(&alerts, PAGE_SIZE),
        alerts,
        configured: !service.alert_channels().is_empty(),
    };
    Ok(ok(list_page(&visitor, &params, None, Some(&listing))))
}

/// One page of alerts.
struct Listing {
    alerts: Vec<AlertRow>,
    next: Option<String>,
    /// Whether any channel is configured (else ax makes no alerts).
    configured: bool,
}

fn list_page(
    visitor: &Visitor,
    params: &Params,
    error: Option<&FilterError>,
    listing: Option<&Listing>,
) -> Markup {
    page(
        visitor,
        "Alerts",
        Some(Section::Alerts),
        html! {
            (alert_filters(params, error))
            @if let Some(error) = error_for(error, "cursor") {
                p.error role="alert" { (error) " " a href=(kept_link(params, None)) { "First page" } }
            }
            @if let Some(listing) = listing {
                @if listing.alerts.is_empty() {
                    (nothing_listed(params, listing.configured))
                } @else {
                    (alert_table(&listing.alerts))
                }
                (layout::paging("Pages of alerts", &filters::around(params, "cursor", listing.next.as_deref()), |query| kept_link(query, query.get("cursor").map(String::as_str))))
            }
        },
    )
}

/// Why the page lists no alert: none older, none matching, none configured, or none yet.
fn nothing_listed(params: &Params, configured: bool) -> Markup {
    let filtered = ALERT_FILTERS.iter().any(|name| params.contains_key(*name));
    html! {
        @if params.contains_key("cursor") {
            p.muted { "No older alerts." }
        } @else if filtered {
            p.muted { "No alerts match these filters." }
        } @else if !configured {
            p.muted {
                "No alerts: no channel is configured. Name channels under "
                code { "alerts.channels" } " and the events to tell under "
                code { "alerts.default" } " in ax's configuration (see the README's Alerts section)."
            }
        } @else {
            p.muted { "No alerts yet." }
        }
    }
}

fn alert_filters(params: &Params, error: Option<&FilterError>) -> Markup {
    let value = |name: &str| params.get(name).map(String::as_str);
    layout::filter_form(
        ALERTS,
        html! {
            (layout::input("task", "Task id", "text", value("task"), error_for(error, "task")))
            (layout::input("scene", "Scene", "text", value("scene"), error_for(error, "scene")))
            (layout::select("status", "Status", AlertStatus::NAMES, value("status"), error_for(error, "status")))
        },
    )
}

/// The alerts page with these filters and `cursor`.
fn kept_link(params: &Params, cursor: Option<&str>) -> String {
    filters::kept_link(ALERTS, ALERT_FILTERS, params, cursor)
}

/// Alerts as a table, newest first: one row per alert and channel.
fn alert_table(alerts: &[AlertRow]) -> Markup {
    scrolling(
        "Alerts",
        html! {
            table {
                thead {
                    tr {
                        th scope="col" { "Time" }
                        th scope="col" { "Event" }
                        th scope="col" { "Subject" }
                        th scope="col" { "Channel" }
                        th scope="col" { "Status" }
                        th.num scope="col" { "Tries" }
                        th scope="col" { "Count" }
                        th scope="col" { "Last error" }
                    }
                }
                tbody {
                    @for alert in alerts {
                        tr {
                            td { (stored_time(alert.at)) }
                            td {
                                (event_badge(alert.event))
                                @if let Some(code) = &alert.code { " " code { (code) } }
                            }
                            td { (subject(alert)) }
                            td {
                                // A folded event goes out on no channel of its own.
                                @if alert.channel.is_empty() { (none()) } @else { (alert.channel) }
                            }
                            td { (alert_badge(alert.status)) }
                            td.num { (alert.tries) }
                            td { (count(alert)) }
                            td {
                                @match &alert.last_error {
                                    Some(error) => (error),
                                    None => (none()),
                                }
                            }
                        }
                    }
                }
            }
        },
    )
}

/// What an alert is about (`scene/name`), linking to its task, and to its run when it has one.
fn subject(alert: &AlertRow) -> Markup {
    html! {
        @match alert.task_id {
            Some(id) => a href=(task_href(id)) { (alert.subject) },
            None => (alert.subject),
        }
        @if let Some(request_id) = &alert.request_id {
            " · " a href=(run_href(request_id)) aria-label=(format!("run {request_id}")) { "run" }
        }
    }
}

/// How many events the alert tells: `3 (2 folded since …)`.
fn count(alert: &AlertRow) -> Markup {
    html! {
        (alert.count)
        @if alert.folded > 0 {
            " (" (alert.folded) " folded"
            @if let Some(since) = alert.folded_since { " since " (stored_time(since)) }
            ")"
        }
    }
}

/// Alerts a task's or a scene's page lists.
pub const LATEST_ALERTS: i64 = 10;

/// The rule that applies, given a task's own rule and its scene's (each `None` when there is
/// none), and where it comes from, to say beside it.
pub fn rule_in_force<'a>(
    task_rule: Option<&'a AlertRule>,
    scene_rule: Option<&'a AlertRule>,
    default: &'a AlertRule,
) -> (&'a AlertRule, &'static str) {
    let source = match (task_rule, scene_rule) {
        (Some(_), _) => "the task's own rule",
        (None, Some(_)) => "the scene's own rule",
        (None, None) => "the default rule",
    };
    (most_specific(task_rule, scene_rule, default), source)
}

/// The alerts section of a task's or a scene's page: the rule in force and where it comes
/// from, its last alerts, and a link to the alerts page filtered to them by `filter`
/// (`("task", id)` or `("scene", name)`).
pub fn alert_section(
    (rule, source): (&AlertRule, &str),
    latest: &[AlertRow],
    (filter, value): (&str, &str),
) -> Markup {
    let all = filters::link(ALERTS, &[(filter, Some(value))]);
    html! {
        h2 #alerts-heading { "Alerts" }
        p { "Alerts follow " strong { (source) } ":" }
        (rule_fields(rule))
        h3 { "Last alerts" }
        @if latest.is_empty() {
            p.muted { "No alerts yet." }
        } @else {
            (alert_table(latest))
        }
        p { a href=(all) { "All alerts of this " (filter) } }
    }
}

/// A rule's keys, as `alerts.default` and `PUT /api/scenes/{scene}/alerts` spell them.
fn rule_fields(rule: &AlertRule) -> Markup {
    html! {
        dl.fields {
            dt { "Events" }
            dd {
                @if rule.events.is_empty() { (none()) }
                @for (n, event) in rule.events.iter().enumerate() {
                    @if n > 0 { ", " }
                    code { (event.as_str()) }
                }
            }
            dt { "Channels" }
            dd {
                @if rule.channels.is_empty() { "none, so no alert goes out" }
                @for (n, channel) in rule.channels.iter().enumerate() {
                    @if n > 0 { ", " }
                    code { (channel) }
                }
            }
            dt { "Threshold" }
            dd {
                (rule.threshold) @if rule.threshold == 1 { " event" } @else { " events" }
                " of one kind within the window"
            }
            dt { "Window (windowSecs)" } dd { (rule.window_secs) " s" }
            dt { "Silence (silenceSecs)" } dd { (rule.silence_secs) " s" }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::console::session::tests::visitor;
    use ax_core::alerting::AlertEvent;
    use ax_core::run::TaskId;

    fn rule(threshold: u32) -> AlertRule {
        AlertRule {
            threshold,
            ..AlertRule::default()
        }
    }

    #[test]
    fn the_most_specific_rule_applies_and_is_named() {
        let (task, scene, default) = (rule(1), rule(2), rule(3));
        assert_eq!(
            rule_in_force(Some(&task), Some(&scene), &default),
            (&task, "the task's own rule")
        );
        assert_eq!(
            rule_in_force(None, Some(&scene), &default),
            (&scene, "the scene's own rule")
        );
        assert_eq!(
            rule_in_force(None, None, &default),
            (&default, "the default rule")
        );
    }

    fn alert(channel: &str, folded: i32) -> AlertRow {
        let at = chrono::DateTime::UNIX_EPOCH.naive_utc();
        AlertRow {
            id: "a1".into(),
            channel: channel.into(),
            event: AlertEvent::Failed,
            subject: "billing/<nightly>".into(),
            task_id: Some(TaskId(7)),
            scene: Some("billing".into()),
            request_id: Some("r-1".into()),
            code: Some("HTTP_500".into()),
            message: None,
            count: folded + 1,
            folded,
            folded_since: (folded > 0).then_some(at),
            at,
            status: AlertStatus::Sent,
            tries: 1,
            next_try_at: None,
            claimant: None,
            claimed_until: None,
            sent_at: Some(at),
            last_error: None,
            created_at: at,
        }
    }

    #[test]
    fn a_row_links_its_task_and_run_and_tells_the_folded() {
        let html = alert_table(&[alert("ops-hook", 2), alert("", 0)]).into_string();
        assert!(html.contains("billing/&lt;nightly&gt;"), "escaped: {html}");
        assert!(html.contains("href=\"/console/tasks/7\""));
        assert!(html.contains("href=\"/console/runs/r-1\""));
        assert!(html.contains("3 (2 folded since <time"));
        assert!(html.contains("ops-hook") && html.contains("HTTP_500"));
    }

    #[test]
    fn an_empty_page_says_why() {
        let listing = |configured| Listing {
            alerts: Vec::new(),
            next: None,
            configured,
        };
        let shown = |params: &Params, configured| {
            list_page(&visitor(), params, None, Some(&listing(configured))).into_string()
        };
        let none = Params::new();
        assert!(shown(&none, false).contains("alerts.channels"));
        assert!(shown(&none, true).contains("No alerts yet."));
        let filtered = Params::from([("status".to_string(), "failed".to_string())]);
        assert!(shown(&filtered, true).contains("No alerts match these filters."));
        let later = Params::from([("cursor".to_string(), "1~a~b".to_string())]);
        assert!(shown(&later, true).contains("No older alerts."));
    }
}
