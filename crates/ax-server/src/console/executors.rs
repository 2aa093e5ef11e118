//! The executors page (`/console/executors`): each executor group with its members, each
//! member's health (shared by the cluster, so every ax process shows the same) and its load
//! here.

use std::collections::HashMap;

use actix_web::{web, HttpResponse};
use maud::{html, Markup};

use super::layout::{health_badge, maybe_time, none, page, scrolling, stored_time, time, Section};
use super::paths::group_anchor;
use super::session::Visitor;
use super::{ok, ConsoleError};
use crate::service::executors::{GroupDetails, MemberState};
use crate::web::ApiState;
use ax_core::dispatch::host_slots::HostLoad;
use ax_core::dispatch::routing::HealthState;
use ax_store::queries::executors::{GoneRow, MemberRow};

/// `GET /console/executors`.
pub async fn list(
    state: web::Data<ApiState>,
    visitor: Visitor,
) -> Result<HttpResponse, ConsoleError> {
    let groups = state.service.executor_groups().await?;
    let states = state.service.member_states();
    let hosts = state.service.host_loads();
    Ok(ok(executors_page(&visitor, &groups, &states, &hosts)))
}

fn executors_page(
    visitor: &Visitor,
    groups: &[GroupDetails],
    states: &HashMap<String, MemberState>,
    hosts: &(Vec<HostLoad>, usize),
) -> Markup {
    page(
        visitor,
        "Executors",
        Some(Section::Executors),
        html! {
            @if groups.is_empty() {
                p.muted {
                    "No executor groups yet. Define one with "
                    code { "PUT /api/executors/{group}" }
                    ", or have an executor register itself with "
                    code { "POST /api/executors/{group}/members" }
                    " (which creates its group)."
                }
            } @else {
                p.hint { "Health is the cluster's: only transport failures (refused, reset, DNS, connect timeout) count against a member. In flight, successes and failures are this ax process's." }
                @for details in groups { (group_section(details, states)) }
            }
            (hosts_section(&hosts.0, hosts.1))
        },
    )
}

/// Each host's and group member's slots in this process, in both lanes.
fn hosts_section(loads: &[HostLoad], slow_handlers: usize) -> Markup {
    html! {
        section #hosts aria-labelledby="hosts-heading" {
            h2 #hosts-heading { "Hosts" }
            p.hint {
                "Requests in flight from this ax process to each executor host (and group member), up to its cap. A handler whose attempt held its slot for "
                code { "dispatch.slow_after_ms" }
                " or longer is slow: its attempts take the host's slow lane, which holds at most "
                code { "dispatch.slow_share_percent" }
                " of the slots, and the rest always serve the host's other handlers. "
                (slow_handlers) @if slow_handlers == 1 { " handler is" } @else { " handlers are" } " slow now."
            }
            @if loads.is_empty() {
                p.muted { "No requests in flight now." }
            } @else {
                (scrolling("Hosts", html! {
                    table.hosts {
                        thead {
                            tr {
                                th scope="col" { "Host" }
                                th.num scope="col" { "In flight" }
                                th.num scope="col" { "Waiting" }
                                th.num scope="col" { "Slow lane in flight" }
                                th.num scope="col" { "Slow lane waiting" }
                            }
                        }
                        tbody {
                            @for load in loads {
                                tr {
                                    td { code { (load.host) } }
                                    td.num { (load.in_flight) " of " (load.cap) }
                                    td.num { (load.waiting) }
                                    td.num { (load.slow_in_flight) " of " (load.slow_cap) }
                                    td.num { (load.slow_waiting) }
                                }
                            }
                        }
                    }
                }))
            }
        }
    }
}

fn group_section(details: &GroupDetails, states: &HashMap<String, MemberState>) -> Markup {
    let group = &details.group;
    let heading = format!("{}-heading", group_anchor(&group.name));
    html! {
        section #(group_anchor(&group.name)) aria-labelledby=(heading) {
            h2 #(heading) { (group.name) }
            dl.fields {
                dt { "Routing" } dd { (group.routing) }
                dt { "maxInFlight" } dd { (group.max_in_flight) " per member" }
                dt { "Updated" } dd { (stored_time(group.updated_at)) }
            }
            @if details.members.is_empty() {
                p.muted { "No live members: its tasks' attempts fail with NO_EXECUTOR." }
            } @else {
                (member_table(&group.name, &details.members, states))
            }
            @if !details.gone.is_empty() { (gone_table(&group.name, &details.gone)) }
        }
    }
}

fn member_table(
    group: &str,
    members: &[MemberRow],
    states: &HashMap<String, MemberState>,
) -> Markup {
    scrolling(
        &format!("Members of {group}"),
        html! {
            table {
                thead {
                    tr {
                        th scope="col" { "URL" }
                        th scope="col" { "Member" }
                        th.num scope="col" { "Capacity" }
                        th scope="col" { "State" }
                        th scope="col" { "Unhealthy until" }
                        th.num scope="col" { "In flight" }
                        th.num scope="col" { "Successes" }
                        th.num scope="col" { "Failures" }
                        th.num scope="col" { "Error rate" }
                        th scope="col" { "Last failure" }
                        th scope="col" { "Last seen" }
                    }
                }
                tbody {
                    @for member in members { (member_row(member, states.get(&member.url))) }
                }
            }
        },
    )
}

/// A member's row; one this process has not dispatched to yet is healthy and idle (as the API
/// shows it).
fn member_row(member: &MemberRow, state: Option<&MemberState>) -> Markup {
    let (successes, failures) = state.map_or((0, 0), |s| (s.successes, s.failures));
    html! {
        tr {
            td { code { (member.url) } }
            td {
                @if member.last_seen_at.is_some() { "registered" } @else { "defined" }
            }
            td.num {
                @match member.capacity {
                    Some(capacity) => (capacity),
                    None => (none()),
                }
            }
            td { (health_badge(state.map_or(HealthState::Healthy, |s| s.state))) }
            td { (maybe_utc(state.and_then(|s| s.unhealthy_until))) }
            td.num { (state.map_or(0, |s| s.in_flight)) }
            td.num { (successes) }
            td.num { (failures) }
            td.num {
                @match error_rate(successes, failures) {
                    Some(rate) => (rate),
                    None => (none()),
                }
            }
            td {
                @if let Some(at) = state.and_then(|s| s.last_failure_at) { (time(at)) ": " }
                @match state.and_then(|s| s.last_error.as_deref()) {
                    Some(error) => (error),
                    None => (none()),
                }
            }
            td { (maybe_time(member.last_seen_at)) }
        }
    }
}

fn maybe_utc(at: Option<chrono::DateTime<chrono::Utc>>) -> Markup {
    at.map_or_else(none, time)
}

/// The members gone from the group in the last hour: when and why (never dispatched to).
fn gone_table(group: &str, gone: &[GoneRow]) -> Markup {
    scrolling(
        &format!("Members gone from {group} in the last hour"),
        html! {
            table.gone {
                thead {
                    tr {
                        th scope="col" { "URL" }
                        th scope="col" { "State" }
                        th scope="col" { "Gone at" }
                        th scope="col" { "Why" }
                    }
                }
                tbody {
                    @for member in gone {
                        tr {
                            td { code { (member.url) } }
                            td { (health_badge(HealthState::Gone)) }
                            td { (stored_time(member.gone_at)) }
                            td { (member.reason) }
                        }
                    }
                }
            }
        },
    )
}

/// Failures among the dispatches that ended, as a percentage; none before the first.
fn error_rate(successes: u64, failures: u64) -> Option<String> {
    let ended = successes + failures;
    (ended > 0).then(|| format!("{:.1} %", failures as f64 * 100.0 / ended as f64))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::console::session::tests::visitor;
    use ax_store::queries::executors::GroupRow;

    fn at() -> chrono::NaiveDateTime {
        chrono::DateTime::UNIX_EPOCH.naive_utc()
    }

    fn member(url: &str, registered: bool) -> MemberRow {
        MemberRow {
            group_name: "billing".into(),
            url: url.into(),
            position: 0,
            capacity: registered.then_some(8),
            registered_at: at(),
            last_seen_at: registered.then(at),
        }
    }

    #[test]
    fn error_rates_are_failures_among_ended_dispatches() {
        assert_eq!(error_rate(0, 0), None);
        assert_eq!(error_rate(3, 1).as_deref(), Some("25.0 %"));
        assert_eq!(error_rate(0, 2).as_deref(), Some("100.0 %"));
        assert_eq!(error_rate(2, 1).as_deref(), Some("33.3 %"));
    }

    #[test]
    fn groups_list_their_members_with_their_health() {
        let groups = [GroupDetails {
            group: GroupRow {
                name: "billing".into(),
                routing: "FAILOVER".into(),
                max_in_flight: 16,
                updated_at: at(),
            },
            members: vec![
                member("http://10.0.0.7:9000", false),
                member("http://10.0.0.8:9000", true),
            ],
            gone: vec![GoneRow {
                group_name: "billing".into(),
                url: "http://10.0.0.9:9000".into(),
                gone_at: at(),
                reason: "expired: not heard from within the member TTL".into(),
            }],
        }];
        let states = HashMap::from([(
            "http://10.0.0.7:9000".to_string(),
            MemberState {
                state: HealthState::Unhealthy,
                unhealthy_until: chrono::DateTime::from_timestamp(1_800_000_030, 0),
                last_failure_at: chrono::DateTime::from_timestamp(1_800_000_000, 0),
                in_flight: 2,
                successes: 1,
                failures: 3,
                last_error: Some("connection <refused>".into()),
            },
        )]);
        let html = executors_page(&visitor(), &groups, &states, &(Vec::new(), 0)).into_string();
        assert!(html.contains(r#"<section id="group-billing""#), "{html}");
        assert!(html.contains("FAILOVER") && html.contains("16 per member"));
        assert!(html.contains(r#"<span class="badge bad">UNHEALTHY</span>"#));
        assert!(html.contains("75.0 %") && html.contains("connection &lt;refused&gt;"));
        assert!(html.contains("2027-01-15 08:00:30 UTC"), "until: {html}");
        // The member this process has not dispatched to: healthy, idle, registered.
        assert!(html.contains(r#"<span class="badge good">HEALTHY</span>"#));
        assert!(html.contains("registered") && html.contains("defined"));
        assert!(html.contains(r#"aria-current="page">Executors"#));
        // The member gone: listed with when and why.
        assert!(
            html.contains(r#"<span class="badge idle">GONE</span>"#),
            "{html}"
        );
        assert!(html.contains("http://10.0.0.9:9000") && html.contains("expired: not heard"));
        assert!(html.contains("No requests in flight now."), "{html}");
    }

    #[test]
    fn hosts_show_their_slots_in_both_lanes() {
        let hosts = vec![HostLoad {
            host: "127.0.0.1:9000".into(),
            cap: 64,
            in_flight: 64,
            waiting: 300,
            slow_in_flight: 32,
            slow_waiting: 290,
            slow_cap: 32,
        }];
        let html = executors_page(&visitor(), &[], &HashMap::new(), &(hosts, 3)).into_string();
        assert!(html.contains(r#"<section id="hosts""#), "{html}");
        assert!(html.contains("<code>127.0.0.1:9000</code>"));
        assert!(
            html.contains("64 of 64") && html.contains("32 of 32"),
            "{html}"
        );
        assert!(html.contains("3 handlers are slow now."), "{html}");
    }

    #[test]
    fn without_groups_the_page_says_how_to_make_one() {
        let html = executors_page(&visitor(), &[], &HashMap::new(), &(Vec::new(), 0)).into_string();
        assert!(html.contains("No executor groups yet"), "{html}");
        assert!(html.contains("PUT /api/executors/{group}"));
        assert!(html.contains("POST /api/executors/{group}/members"));
    }
}
