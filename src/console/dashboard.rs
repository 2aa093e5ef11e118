//! The dashboard (`/console`): runs of the last hour and day by status, the latest failures,
//! the cluster and the health of this process.

use std::collections::HashMap;

use actix_web::{web, HttpResponse};
use chrono::Duration;
use maud::{html, Markup};

use super::chart::{self, Minute};
use super::filters::link;
use super::layout::{self, none, page, run_badge, scrolling, stored_time, Section};
use super::live;
use super::runs::{run_href, task_ids, task_link};
use super::session::Visitor;
use super::{ok, ConsoleError};
use crate::actors::cluster::Member;
use crate::actors::lock::LockError;
use crate::health::Report;
use crate::run::{RunStatus, TaskId};
use crate::service::console_reads::DAY_COUNTS_SECS;
use crate::service::Counted;
use crate::store::models::Instance;
use crate::store::queries::instances::InstanceFilter;
use crate::web::ApiState;

/// Failures the dashboard lists.
const LATEST_FAILURES: i64 = 10;
/// Most runs the chart is drawn from: enough for a busy hour, bounded for the page's sake.
const CHART_RUNS: i64 = 20_000;

/// What the dashboard shows.
struct Dashboard {
    last_hour: HashMap<RunStatus, i64>,
    /// When the last day's counts were counted, and the counts.
    last_day: Counted,
    failures: Vec<Instance>,
    chart: Vec<Minute>,
    /// Whether the chart had more runs than it was drawn from.
    chart_cut: bool,
    names: HashMap<TaskId, String>,
    cluster: Result<Vec<Member>, LockError>,
    health: Report,
}

/// `GET /console`.
pub async fn show(
    state: web::Data<ApiState>,
    visitor: Visitor,
) -> Result<HttpResponse, ConsoleError> {
    let service = &state.service;
    let now = service.now();
    let failed = InstanceFilter {
        statuses: vec![RunStatus::Failed],
        ..InstanceFilter::default()
    };
    let (last_hour, last_day, failures, dispatches, cluster, health) = futures_util::join!(
        service.run_counts_since(now - Duration::hours(1)),
        service.day_counts(),
        service.history(failed, None, LATEST_FAILURES),
        service.dispatch_times_since(now - Duration::minutes(chart::MINUTES), CHART_RUNS),
        service.cluster(),
        state.health.check(),
    );
    let (failures, _) = failures?;
    let names = service.task_names(task_ids(&failures)).await?;
    let dispatches = dispatches?;
    let dashboard = Dashboard {
        chart: chart::per_minute(now, &dispatches),
        chart_cut: dispatches.len() as i64 == CHART_RUNS,
        last_hour: last_hour?,
        last_day: last_day?,
        failures,
        names,
        cluster,
        health,
    };
    Ok(ok(dashboard_page(&visitor, &dashboard)))
}

fn dashboard_page(visitor: &Visitor, dashboard: &Dashboard) -> Markup {
    page(
        visitor,
        "Dashboard",
        Some(Section::Dashboard),
        html! {
            (live::feed(None, None, None))
            (live::region("dashboard-live", html! {
            div.cards {
                section.card aria-labelledby="runs-heading" {
                    h2 #runs-heading { "Runs by status" }
                    (counts(&dashboard.last_hour, &dashboard.last_day.1))
                    p.hint { "The last day as counted at " (layout::time(dashboard.last_day.0)) " (again every " (DAY_COUNTS_SECS) " s)." }
                }
                section.card aria-labelledby="health-heading" {
                    h2 #health-heading { "Health" }
                    (health(&dashboard.health))
                }
                section.card aria-labelledby="cluster-heading" {
                    h2 #cluster-heading { "Cluster" }
                    (cluster(&dashboard.cluster))
                }
            }
            section aria-labelledby="activity-heading" {
                h2 #activity-heading { "Last hour" }
                (chart::svg(&dashboard.chart))
                @if dashboard.chart_cut {
                    p.muted { "Drawn from the latest " (CHART_RUNS) " runs only." }
                }
            }
            section aria-labelledby="failures-heading" {
                h2 #failures-heading { "Latest failures" }
                (failures(&dashboard.failures, &dashboard.names))
            }
            }))
        },
    )
}

fn counts(last_hour: &HashMap<RunStatus, i64>, last_day: &HashMap<RunStatus, i64>) -> Markup {
    let count =
        |counts: &HashMap<RunStatus, i64>, status| counts.get(&status).copied().unwrap_or(0);
    html! {
        table {
            thead {
                tr {
                    th scope="col" { "Status" }
                    th.num scope="col" { "Last hour" }
                    th.num scope="col" { "Last day" }
                }
            }
            tbody {
                @for status in RunStatus::ALL {
                    tr {
                        th scope="row" {
                            a href=(link("/console/runs", &[("status", Some(status.as_str()))])) { (run_badge(*status)) }
                        }
                        td.num { (count(last_hour, *status)) }
                        td.num { (count(last_day, *status)) }
                    }
                }
            }
        }
    }
}

fn health(report: &Report) -> Markup {
    html! {
        @if report.is_healthy() {
            p { span.badge.good { "HEALTHY" } " Every actor answers, the wheel ticks, the store answers." }
        } @else {
            p { span.badge.bad { "UNHEALTHY" } }
            ul { @for problem in &report.problems { li { (problem) } } }
        }
        @if let Some(size) = report.wheel_size {
            p.muted { "The wheel holds " (size) " entries." }
        }
    }
}

fn cluster(members: &Result<Vec<Member>, LockError>) -> Markup {
    match members {
        Err(err) => html! { p.error { "Redis is unavailable: " (err.to_string()) } },
        Ok(members) if members.is_empty() => {
            html! { p.muted { "No ax process has announced itself yet." } }
        }
        Ok(members) => html! {
            ul {
                @for member in members {
                    li {
                        code { (member.instance_id) } " at " code { (member.addr) }
                        br;
                        span.muted { "started " (layout::time(member.started_at)) ", last seen " (layout::time(member.last_seen)) }
                    }
                }
            }
        },
    }
}

fn failures(runs: &[Instance], names: &HashMap<TaskId, String>) -> Markup {
    if runs.is_empty() {
        return html! { p.muted { "No failed runs." } };
    }
    scrolling(
        "Latest failures",
        html! {
            table {
                thead {
                    tr {
                        th scope="col" { "Task" }
                        th scope="col" { "Scheduled" }
                        th scope="col" { "Code" }
                        th scope="col" { "Message" }
                    }
                }
                tbody {
                    @for run in runs {
                        tr {
                            td { (task_link(run.task_id, names)) }
                            td { a href=(run_href(run)) { (stored_time(run.scheduled_at)) } }
                            td { @match &run.callback_code { Some(code) => code { (code) }, None => (none()) } }
                            td { @match &run.callback_message { Some(message) => (message), None => (none()) } }
                        }
                    }
                }
            }
        },
    )
}
