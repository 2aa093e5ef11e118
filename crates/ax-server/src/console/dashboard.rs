//! The dashboard (`/console`): what needs attention first (failing tasks folded by task, late
//! or stuck runs, paused scenes and tasks, executor members unhealthy or gone in the last
//! hour, ax processes), the next runs, health and cluster in one line, then runs of the last
//! hour and day by status.

use std::collections::HashMap;

use actix_web::{web, HttpResponse};
use chrono::{DateTime, Duration, Utc};
use maud::{html, Markup};

use super::chart::{self, Minute};
use super::filters::link;
use super::layout::{self, health_badge, millis, page, run_badge, scrolling, stored_time, Section};
use super::live;
use super::paths::{scene_href, task_href, EXECUTORS};
use super::runs::{run_href, task_ids, task_link};
use super::session::Visitor;
use super::{ok, ConsoleError};
use crate::actors::cluster::{Member, ShareFigures, HEARTBEAT_INTERVAL};
use crate::actors::health::Report;
use crate::actors::redis_link::LockError;
use crate::console::attention::{self, FailingTask, TaskNow, Trouble};
use crate::service::console_reads::{Pauses, RunCounts, DAY_COUNTS_SECS};
use crate::service::executors::MemberState;
use crate::web::ApiState;
use ax_core::cluster::shares::PARTITIONS;
use ax_core::dispatch::routing::HealthState;
use ax_core::run::{RunStatus, TaskId};
use ax_store::queries::executors::{GoneRow, HealthRow};
use ax_store::queries::runs::RunFilter;
use ax_store::rows::models::Run;
use ax_store::to_db;

/// Failures of the last day the attention list folds by task.
const FAILURES_READ: i64 = 1_000;
/// Failing tasks and troubled runs the attention list shows.
const SHOWN: usize = 15;
/// Open runs read per status, oldest first.
const OPEN_READ: i64 = 200;
/// MISSED runs of the last day read.
const MISSED_READ: i64 = 20;
/// Next runs shown.
const NEXT_RUNS: i64 = 8;
/// Most runs the chart is drawn from: enough for a busy hour, bounded for the page's sake.
const CHART_RUNS: i64 = 20_000;

/// What the dashboard shows.
struct Dashboard {
    counts: RunCounts,
    failing: Vec<FailingTask>,
    troubled: Vec<(Run, Trouble)>,
    pauses: Pauses,
    unhealthy: Vec<(String, MemberState)>,
    /// Members healthy again after being set aside within the last hour.
    recovered: Vec<HealthRow>,
    /// Members gone from their groups in the last hour.
    gone: Vec<GoneRow>,
    next_runs: Vec<(TaskId, String, DateTime<Utc>)>,
    now: DateTime<Utc>,
    chart: Vec<Minute>,
    /// Whether the chart had more runs than it was drawn from.
    chart_cut: bool,
    names: HashMap<TaskId, String>,
    /// The live processes, each with its share of the tasks.
    cluster: Result<Vec<(Member, ShareFigures)>, LockError>,
    health: Report,
}

/// `GET /console`.
pub async fn show(
    state: web::Data<ApiState>,
    visitor: Visitor,
) -> Result<HttpResponse, ConsoleError> {
    let service = &state.service;
    let now = service.now();
    let last_day = |status| RunFilter {
        statuses: vec![status],
        from: Some(to_db(now - Duration::days(1))),
        ..RunFilter::default()
    };
    let (counts, failures, missed, open, next_runs) = futures_util::join!(
        service.run_counts(),
        service.history(last_day(RunStatus::Failed), None, FAILURES_READ),
        service.history(last_day(RunStatus::Missed), None, MISSED_READ),
        service.oldest_open(OPEN_READ),
        service.next_runs(NEXT_RUNS),
    );
    let (dispatches, cluster, health, gone, pauses, recovered) = futures_util::join!(
        service.dispatch_times_since(now - Duration::minutes(chart::MINUTES), CHART_RUNS),
        service.cluster(),
        state.health.check(),
        service.gone_members(),
        service.pauses(SHOWN as i64),
        service.members_recovered_since(now - Duration::hours(1)),
    );
    let (failures, _) = failures?;
    let latest = service.last_runs(task_ids(&failures)).await?;
    let mut failing = attention::failing_tasks(failures, &latest);
    failing.truncate(SHOWN);
    let (mut runs, _) = missed?;
    runs.extend(open?);
    let mut troubled = attention::troubled(runs, now);
    troubled.truncate(SHOWN);
    let mut ids: Vec<TaskId> = failing.iter().map(|f| f.task_id).collect();
    ids.extend(troubled.iter().map(|(run, _)| run.task_id));
    let names = service.task_names(ids).await?;
    let mut unhealthy: Vec<(String, MemberState)> = service
        .member_states()
        .into_iter()
        .filter(|(_, state)| state.state != HealthState::Healthy)
        .collect();
    unhealthy.sort_by(|a, b| a.0.cmp(&b.0));
    // A member set aside again since it recovered is listed as it is now.
    let mut recovered = recovered?;
    recovered.retain(|member| !unhealthy.iter().any(|(url, _)| *url == member.url));
    let dispatches = dispatches?;
    let cluster = match cluster {
        Ok(members) => {
            let shares = service.shares(&members).await?;
            Ok(members.into_iter().zip(shares).collect())
        }
        Err(err) => Err(err),
    };
    let dashboard = Dashboard {
        chart: chart::per_minute(now, &dispatches),
        chart_cut: dispatches.len() as i64 == CHART_RUNS,
        counts: counts?,
        failing,
        troubled,
        pauses: pauses?,
        unhealthy,
        recovered,
        gone: gone?,
        next_runs: next_runs?,
        now,
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
            (status_line(&dashboard.health, &dashboard.cluster, dashboard.now))
            section aria-labelledby="attention-heading" {
                h2 #attention-heading { "Needs attention" }
                (attention_list(dashboard))
            }
            section aria-labelledby="next-heading" {
                h2 #next-heading { "Next runs" }
                (next_runs(&dashboard.next_runs))
            }
            div.cards {
                section.card aria-labelledby="runs-heading" {
                    h2 #runs-heading { "Runs by status" }
                    (counts(&dashboard.counts.last_hour, &dashboard.counts.last_day))
                    p.hint {
                        "Runs scheduled in the last hour and day, up to now; the day's runs older than an hour as counted at "
                        (layout::time(dashboard.counts.older_counted_at)) " (again every " (DAY_COUNTS_SECS) " s)."
                    }
                }
            }
            section aria-labelledby="activity-heading" {
                h2 #activity-heading { "Last hour" }
                (chart::svg(&dashboard.chart))
                @if dashboard.chart_cut {
                    p.muted { "Drawn from the latest " (CHART_RUNS) " runs only." }
                }
                p.hint { "Lag is ax's own, from when a run is due to its first dispatch; time a run waits on its upstreams or its overlap policy is waiting, not lag." }
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

/// Health and cluster in one line; what is wrong, below it.
fn status_line(
    report: &Report,
    members: &Result<Vec<(Member, ShareFigures)>, LockError>,
    now: DateTime<Utc>,
) -> Markup {
    let late = |member: &Member| now - member.last_seen > late_heartbeat();
    html! {
        p #status-line.status-line {
            @if report.is_healthy() { span.badge.good { "HEALTHY" } } @else { span.badge.bad { "UNHEALTHY" } }
            " "
            @match members {
                Err(err) => span.error { "Redis is unavailable: " (err.to_string()) },
                Ok(members) if members.is_empty() => span.muted { "No ax process has announced itself yet." },
                Ok(members) => {
                    (members.len()) @if members.len() == 1 { " ax process: " } @else { " ax processes: " }
                    @for (n, (member, share)) in members.iter().enumerate() {
                        @if n > 0 { ", " }
                        code title=(format!("at {}, started {}", member.addr, member.started_at.to_rfc3339())) { (member.instance_id) }
                        " " span.share title=(format!("{} of the {PARTITIONS} partitions of the tasks", share.partitions)) {
                            "(" (share.tasks) " tasks · " (share.fires_per_sec) " fires/s)"
                        }
                        @if !member.firing { " " span.badge.bad { "NOT FIRING" } }
                        @if late(member) { " " span.badge.bad { "LATE HEARTBEAT" } }
                    }
                }
            }
            @if let Some(size) = report.wheel_size { span.muted { " · the wheel holds " (size) " entries" } }
        }
        @if !report.is_healthy() {
            ul.problems { @for problem in &report.problems { li { (problem) } } }
        }
    }
}

/// A process whose last heartbeat is older than three of its intervals is falling behind.
fn late_heartbeat() -> Duration {
    Duration::from_std(HEARTBEAT_INTERVAL * 3).unwrap_or(Duration::seconds(6))
}

fn attention_list(dashboard: &Dashboard) -> Markup {
    let pauses = &dashboard.pauses;
    let paused = !pauses.scenes.is_empty() || pauses.task_count > 0;
    let members = !dashboard.unhealthy.is_empty()
        || !dashboard.recovered.is_empty()
        || !dashboard.gone.is_empty();
    let quiet =
        dashboard.failing.is_empty() && dashboard.troubled.is_empty() && !paused && !members;
    html! {
        @if quiet {
            p #attention-none.muted { "Nothing needs attention: no failures in the last day, no late or stuck runs, nothing paused, every executor healthy for the last hour." }
        }
        @if !dashboard.failing.is_empty() {
            h3 { "Failing tasks (last day)" }
            (failing(&dashboard.failing, &dashboard.names))
        }
        @if !dashboard.troubled.is_empty() {
            h3 { "Late, stuck or waiting runs" }
            (troubled(&dashboard.troubled, &dashboard.names, dashboard.now))
        }
        @if paused {
            h3 { "Paused: " (count_of(pauses.scenes.len() as i64, "scene")) ", " (count_of(pauses.task_count, "task")) }
            (paused_list(pauses))
        }
        @if members {
            h3 { "Executors (last hour)" }
            ul #unhealthy-members {
                @for (url, state) in &dashboard.unhealthy {
                    li {
                        (health_badge(state.state)) " " code { (url) }
                        @if let Some(error) = &state.last_error { span.muted { " — " (error) } }
                        " " a href=(EXECUTORS) { "executors" }
                    }
                }
                @for member in &dashboard.recovered {
                    li.recovered {
                        (health_badge(HealthState::Healthy)) " " code { (member.url) }
                        span.muted {
                            " — healthy again since " (stored_time(member.changed_at)) ", after it was set aside"
                            @if let (Some(at), Some(error)) = (member.last_failure_at, &member.last_error) {
                                "; its last failure " (stored_time(at)) ": " (error)
                            }
                        }
                        " " a href=(EXECUTORS) { "executors" }
                    }
                }
                @for member in &dashboard.gone {
                    li {
                        (health_badge(HealthState::Gone)) " " code { (member.url) }
                        span.muted {
                            " — " (member.group_name) ": " (member.reason) ", "
                            (stored_time(member.gone_at))
                        }
                        " " a href=(EXECUTORS) { "executors" }
                    }
                }
            }
        }
    }
}

/// `1 task`, `3 tasks`.
fn count_of(count: i64, thing: &str) -> String {
    match count {
        1 => format!("1 {thing}"),
        _ => format!("{count} {thing}s"),
    }
}

/// The paused scenes, then the tasks paused last on their own, each with since when and by
/// whom, linking to it; a link to every paused task when not all are listed.
fn paused_list(pauses: &Pauses) -> Markup {
    let since = |at: Option<chrono::NaiveDateTime>, by: &Option<String>| {
        html! {
            span.muted {
                " — paused "
                @match at { Some(at) => { "since " (stored_time(at)) }, None => "since before ax noted it" }
                " by " (by.as_deref().unwrap_or("someone ax did not note"))
            }
        }
    };
    let all = link("/console/tasks", &[("status", Some("PAUSED"))]);
    html! {
        ul #paused {
            @for scene in &pauses.scenes {
                li {
                    span.badge.idle { "SCENE PAUSED" } " "
                    a href=(scene_href(&scene.scene)) { "scene " (scene.scene) }
                    (since(scene.paused_at, &scene.paused_by))
                }
            }
            @for task in &pauses.tasks {
                li {
                    span.badge.idle { "PAUSED" } " "
                    a href=(task_href(task.id)) { (task.scene) "/" (task.name) }
                    (since(task.paused_at, &task.paused_by))
                }
            }
        }
        @if pauses.task_count > pauses.tasks.len() as i64 {
            p { a href=(all) { "All " (pauses.task_count) " paused tasks" } }
        }
    }
}

fn failing(tasks: &[FailingTask], names: &HashMap<TaskId, String>) -> Markup {
    scrolling(
        "Failing tasks",
        html! {
            table #failing-tasks {
                thead {
                    tr {
                        th scope="col" { "Task" }
                        th.num scope="col" { "Failures" }
                        th scope="col" { "Last error" }
                        th scope="col" { "Since" }
                        th scope="col" { "Now" }
                    }
                }
                tbody {
                    @for task in tasks {
                        tr {
                            td { (task_link(task.task_id, names)) }
                            td.num { a href=(link("/console/runs", &[("task", Some(&task.task_id.to_string())), ("status", Some("FAILED"))])) { (task.failures) } }
                            td {
                                a href=(run_href(&task.latest)) {
                                    @match &task.latest.callback_code { Some(code) => code { (code) }, None => "failed" }
                                }
                                @if let Some(message) = &task.latest.callback_message { " " span.muted { (message) } }
                            }
                            td { (layout::time(task.since)) }
                            td { (task_now(task.now)) }
                        }
                    }
                }
            }
        },
    )
}

/// What a failing task is doing now, as a badge: `RECOVERED` only once a run succeeded.
fn task_now(now: TaskNow) -> Markup {
    match now {
        TaskNow::Failing => html! { span.badge.bad { "FAILING" } },
        TaskNow::Recovered => html! { span.badge.good { "RECOVERED" } },
        TaskNow::Running => html! { span.badge.busy { "RUNNING" } },
        TaskNow::Retrying { due } => {
            html! { span.badge.busy { "RETRYING" } " " (layout::time(due)) }
        }
        TaskNow::Latest(status) => run_badge(status),
    }
}

fn troubled(
    runs: &[(Run, Trouble)],
    names: &HashMap<TaskId, String>,
    now: DateTime<Utc>,
) -> Markup {
    scrolling(
        "Late, stuck or waiting runs",
        html! {
            table #troubled-runs {
                thead {
                    tr {
                        th scope="col" { "Task" }
                        th scope="col" { "Scheduled" }
                        th scope="col" { "Status" }
                        th scope="col" { "Why" }
                    }
                }
                tbody {
                    @for (run, why) in runs {
                        tr {
                            td { (task_link(run.task_id, names)) }
                            td { a href=(run_href(run)) { (stored_time(run.scheduled_at)) } }
                            td { (run_badge(run.status)) }
                            td { (trouble_text(run, *why, now)) }
                        }
                    }
                }
            }
        },
    )
}

fn trouble_text(run: &Run, why: Trouble, now: DateTime<Utc>) -> Markup {
    let span = |d: Duration| millis(d.num_milliseconds());
    match why {
        Trouble::PastDeadline { by } => {
            html! { "no result, " (span(by)) " past its deadline (attempt " (run.attempt) ")" }
        }
        Trouble::RetryWaiting { attempt, due } => {
            html! { "attempt " (attempt - 1) " failed; attempt " (attempt) " in " (span(due - now)) }
        }
        Trouble::NotDispatched { lag } => {
            html! { "late: due " (span(lag)) " ago, not dispatched (ax's lag)" }
        }
        Trouble::WaitingOnUpstreams { waited } => {
            html! { "waiting on its upstreams for " (span(waited)) " (not lag)" }
        }
        Trouble::WaitingOnOverlap { waited } => {
            html! { "waiting behind an earlier run (overlap policy) for " (span(waited)) " (not lag)" }
        }
        Trouble::Missed => html! {
            "missed"
            @if let Some(message) = &run.callback_message { ": " (message) }
        },
    }
}

fn next_runs(next: &[(TaskId, String, DateTime<Utc>)]) -> Markup {
    if next.is_empty() {
        return html! { p.muted { "No enabled task is scheduled." } };
    }
    html! {
        ul #next-runs {
            @for (id, name, at) in next {
                li { a href=(task_href(*id)) { (name) } " — " (layout::time(*at)) }
            }
        }
    }
}
