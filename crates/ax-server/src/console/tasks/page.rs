//! A task's page (`/console/tasks/{id}`): first its scene, status and actions (above the
//! fold), then its latest runs, history, alert rule and last alerts, the forms of its actions,
//! its definition and its next fire times.

use std::collections::HashMap;

use actix_web::http::StatusCode;
use actix_web::{web, HttpResponse};
use chrono::{DateTime, Utc};
use maud::{html, Markup};

use super::links::parse_task_id;
use super::list::schedule;
use crate::console::alerts::{alert_section, rule_in_force, LATEST_ALERTS};
use crate::console::filters;
use crate::console::layout::millis;
use crate::console::layout::pretty_json;
use crate::console::layout::{
    self, action_button, maybe_time, none, page, scrolling, stored_time, task_state, Section,
};
use crate::console::live;
use crate::console::paths::{calendar_href, group_href, scene_href, task_href};
use crate::console::session::{csrf_field, Visitor};
use crate::console::timeline;
use crate::console::{html as respond, runs, ConsoleError};
use crate::service::run_history::{
    History, FAILURE_DAYS, STATS_DAYS, STATS_RUNS, TIMELINE_HOURS, TIMELINE_RUNS,
};
use crate::service::task_details::TaskDetails;
use crate::web::ApiState;
use ax_core::calendar::schedule::{DayOff, Previewed, Schedule};
use ax_core::calendar::CalendarPolicy;
use ax_core::run::history::{stats, Percentiles};
use ax_core::run::TaskId;
use ax_cron::CronError;
use ax_store::queries::alerts::AlertFilter;
use ax_store::queries::Page;
use ax_store::rows::models::{Run, Task, TaskStatus};

/// Runs a task's page lists.
const LATEST_RUNS: i64 = 20;
/// Fire times a task's page previews.
const UPCOMING: usize = 10;

/// What a task's page shows besides the task: the forms' values and the refusal of the last
/// one sent.
#[derive(Debug, Default)]
pub(super) struct Forms {
    /// The trigger form's params; the task's own when empty.
    pub(super) params: Option<String>,
    pub(super) from: Option<String>,
    pub(super) to: Option<String>,
    /// The field a refused form named, and why.
    pub(super) error: Option<(String, String)>,
}

impl Forms {
    fn error_for(&self, field: &str) -> Option<&str> {
        self.error
            .as_ref()
            .filter(|(name, _)| name == field)
            .map(|(_, message)| message.as_str())
    }
}

/// `GET /console/tasks/{id}`.
pub async fn detail(
    state: web::Data<ApiState>,
    visitor: Visitor,
    path: web::Path<String>,
) -> Result<HttpResponse, ConsoleError> {
    let id = parse_task_id(&path)?;
    task_page(&state, &visitor, id, &Forms::default(), StatusCode::OK).await
}

pub(super) async fn task_page(
    state: &ApiState,
    visitor: &Visitor,
    id: TaskId,
    forms: &Forms,
    status: StatusCode,
) -> Result<HttpResponse, ConsoleError> {
    let service = &state.service;
    let details = service.task(id).await?;
    let latest = Page {
        limit: LATEST_RUNS,
        offset: 0,
    };
    let alerts = AlertFilter {
        task: Some(id),
        ..AlertFilter::default()
    };
    let (runs, scene_rule, last_alerts, history, downstreams) = futures_util::join!(
        service.task_runs(id, latest),
        service.scene_alerts(details.task.scene.clone()),
        service.alerts(alerts, LATEST_ALERTS),
        service.task_history(id),
        service.downstreams(id),
    );
    let ((runs, total), scene_rule) = (runs?, scene_rule?);
    let downstreams = downstreams?;
    let related: Vec<TaskId> = details
        .depends_on
        .iter()
        .chain(&downstreams)
        .copied()
        .collect();
    let relations = Relations {
        names: service.task_names(related).await?,
        downstreams,
    };
    let own_rule = details.task.alerts.as_ref();
    let rule = rule_in_force(own_rule, scene_rule.as_ref(), service.default_alert_rule());
    let alerts = alert_section(rule, &last_alerts?, ("task", &id.to_string()));
    let history = history_section(&details, &history?);
    let schedule = service.schedule_of(&details.task).await?;
    let page = detail_page(
        visitor,
        (&details, &schedule),
        (&runs, total),
        (alerts, history, &relations),
        service.now(),
        forms,
    );
    Ok(respond(status, page))
}

/// Shows the task's page again with a form's refusal beside the field it names.
pub(super) async fn refused(
    state: &ApiState,
    visitor: &Visitor,
    id: TaskId,
    mut forms: Forms,
    err: ConsoleError,
) -> Result<HttpResponse, ConsoleError> {
    let ConsoleError::Refused(err) = err else {
        return Err(err);
    };
    let status = actix_web::ResponseError::status_code(&err);
    forms.error = Some((err.field().unwrap_or_default().to_string(), err.to_string()));
    task_page(state, visitor, id, &forms, status).await
}

/// A task's page: `(latest, total)` its latest runs and how many it has, `alerts` its alerts
/// section.
fn detail_page(
    visitor: &Visitor,
    (details, schedule): (&TaskDetails, &Result<Schedule, CronError>),
    (latest, total): (&[Run], i64),
    (alerts, history, relations): (Markup, Markup, &Relations),
    now: DateTime<Utc>,
    forms: &Forms,
) -> Markup {
    let task = &details.task;
    page(
        visitor,
        &format!("Task {}", task.name),
        Some(Section::Tasks),
        html! {
            @if let Some((_, message)) = forms.error.as_ref().filter(|(field, _)| field.is_empty()) {
                p.error role="alert" { (message) }
            }
            // What an operator opens the page for comes first, above the fold: where the task
            // belongs, whether it fires, and what can be done to it.
            (summary(details))
            @if visitor.may_change() { (task_buttons(visitor, task)) }
            h2 { "Latest runs" }
            (live::feed(Some(&task.id.to_string()), None, None))
            (live::region("task-runs-live", html! {
                p {
                    "The last " (latest.len()) " of " (total) ". "
                    a href=(filters::link("/console/runs", &[("task", Some(&task.id.to_string()))])) {
                        "All runs of this task"
                    }
                }
                (runs::run_table(latest, None))
                (history)
                (alerts)
            }))
            @if visitor.may_change() { (task_forms(visitor, details, forms)) }
            h2 { "Definition" }
            (definition(details, relations))
            h2 #dependencies-heading { "Dependencies" }
            (dependencies(details, relations))
            h2 { "Next " (UPCOMING) " fire times" }
            @match schedule {
                Ok(schedule) => (upcoming(schedule, &schedule.preview(now, UPCOMING))),
                Err(err) => p.error { "The cron expression cannot be read: " (err.to_string()) },
            }
        },
    )
}

/// The task at a glance: its scene, whether it fires, its schedule and next run.
fn summary(details: &TaskDetails) -> Markup {
    let task = &details.task;
    html! {
        dl.fields.summary {
            dt { "Scene" } dd.scene { a href=(scene_href(&task.scene)) { (task.scene) } }
            dt { "Status" }
            dd.status {
                (task_state(task.status, details.scene_paused))
                @if details.scene_paused {
                    " Its scene is paused: it fires again when "
                    a href=(scene_href(&task.scene)) { "the scene" }
                    " is resumed (and it is enabled)."
                }
            }
            dt { "Cron" } dd { (schedule(task)) }
            dt { "Next run" } dd { (maybe_time(task.next_run_at)) }
        }
    }
}

/// The task's actions: edit, pause or resume, trigger now (with its own params), delete.
fn task_buttons(visitor: &Visitor, task: &Task) -> Markup {
    let href = task_href(task.id);
    html! {
        div.actions.task-actions {
            a.button href=(format!("{href}/edit")) { "Edit" }
            @match task.status {
                TaskStatus::Enabled => (action_button(visitor, &format!("{href}/pause"), "Pause")),
                TaskStatus::Paused => (action_button(visitor, &format!("{href}/resume"), "Resume")),
            }
            (action_button(visitor, &format!("{href}/trigger"), "Trigger now"))
            a.button.danger href=(format!("{href}/delete")) { "Delete…" }
        }
    }
}

/// The forms of the actions that take values: trigger with other params, backfill.
fn task_forms(visitor: &Visitor, details: &TaskDetails, forms: &Forms) -> Markup {
    let task = &details.task;
    let href = task_href(task.id);
    let params = forms
        .params
        .clone()
        .unwrap_or_else(|| pretty_json(&task.params));
    html! {
        div.cards {
            section.card aria-labelledby="trigger-heading" {
                h2 #trigger-heading { "Trigger with params" }
                form.stacked method="post" action=(format!("{href}/trigger")) {
                    (csrf_field(visitor))
                    (layout::textarea("params", "Params for this run (JSON)", &params, 4, forms.error_for("params")))
                    div.field { button type="submit" { "Trigger run" } }
                }
            }
            section.card aria-labelledby="backfill-heading" {
                h2 #backfill-heading { "Backfill" }
                p.hint { "Gives every fire time in [from, to) a run; times in UTC (2026-12-01T10:00) or RFC 3339." }
                form.stacked method="post" action=(format!("{href}/backfill")) {
                    (csrf_field(visitor))
                    (layout::input("from", "From", "text", forms.from.as_deref(), forms.error_for("from")))
                    (layout::input("to", "To", "text", forms.to.as_deref(), forms.error_for("to")))
                    div.field { button type="submit" { "Backfill" } }
                }
            }
        }
    }
}

fn definition(details: &TaskDetails, relations: &Relations) -> Markup {
    let task = &details.task;
    let or_default = |value: Option<i32>, unit: &str| match value {
        Some(value) => format!("{value}{unit}"),
        None => "the server's default".to_string(),
    };
    html! {
        dl.fields {
            dt { "Id" } dd { (task.id) }
            dt { "Name" } dd { (task.name) }
            dt { "Time zone" } dd { (task.time_zone) }
            (days_off(task))
            (destination(task))
            dt { "Params" } dd { pre { (pretty_json(&task.params)) } }
            dt { "Max retries" } dd { (task.max_retry) }
            dt { "Timeout" } dd { (layout::millis(task.timeout_ms)) }
            dt { "Retry back-off" } dd { (or_default(task.retry_backoff_secs, " s")) }
            dt { "Retry factor" } dd { (or_default(task.retry_factor, "")) }
            dt { "Misfire threshold" } dd { (or_default(task.misfire_threshold_secs, " s")) }
            dt { "Dependency timeout" } dd { (or_default(task.dependency_timeout_secs, " s")) }
            dt { "Depends on" } dd { (task_links(&details.depends_on, &relations.names)) }
            dt { "Overlap" } dd { (task.overlap.as_str()) }
            dt { "Jitter" } dd { (task.jitter_secs) " s" }
            dt { "Lag alert" }
            dd {
                @match task.alert_lag_ms {
                    Some(ms) => { "LAG when first dispatched over " (ms) " ms late" }
                    None => { (none()) }
                }
            }
            dt { "Labels" }
            dd {
                @if task.labels.is_empty() { (none()) }
                @for (key, value) in task.labels.iter() {
                    a href=(filters::link("/console/tasks", &[("label", Some(&format!("{key}={value}")))])) { code { (key) "=" (value) } }
                    " "
                }
            }
            dt { "Created" } dd { (stored_time(task.created_at)) }
            dt { "Updated" } dd { (stored_time(task.updated_at)) }
        }
    }
}

/// The calendars whose days off the task does not fire on, each linked to its page, and what
/// its policy does with such a fire; nothing when it names none.
fn days_off(task: &Task) -> Markup {
    let Some(calendars) = &task.calendars else {
        return html! {};
    };
    let policy = match calendars.policy {
        CalendarPolicy::Skip => "a fire on a day off is left out",
        CalendarPolicy::PreviousOpenDay => {
            "a fire on a day off is moved to the nearest open day before it, same time"
        }
        CalendarPolicy::NextOpenDay => {
            "a fire on a day off is moved to the nearest open day after it, same time"
        }
    };
    html! {
        dt { "Calendars" }
        dd.calendars {
            @for (n, name) in calendars.exclude.iter().enumerate() {
                @if n > 0 { ", " }
                a href=(calendar_href(name)) { (name) }
            }
            br;
            "Policy " code { (calendars.policy.as_str()) } ": " (policy) "."
        }
    }
}

/// The names of a task's upstreams and downstreams, and its downstreams.
struct Relations {
    names: HashMap<TaskId, String>,
    downstreams: Vec<TaskId>,
}

/// Tasks by name, each linking to its page.
fn task_links(ids: &[TaskId], names: &HashMap<TaskId, String>) -> Markup {
    html! {
        @if ids.is_empty() { (none()) }
        @for (n, id) in ids.iter().enumerate() {
            @if n > 0 { ", " }
            (runs::task_link(*id, names))
        }
    }
}

/// The tasks this one waits on and those that wait on it.
fn dependencies(details: &TaskDetails, relations: &Relations) -> Markup {
    html! {
        dl.fields.dependencies aria-labelledby="dependencies-heading" {
            dt { "Upstream (waits on)" } dd.upstream { (task_links(&details.depends_on, &relations.names)) }
            dt { "Downstream (waiting on it)" } dd.downstream { (task_links(&relations.downstreams, &relations.names)) }
        }
    }
}

/// The task's timeline, stats and failure heat-maps.
fn history_section(details: &TaskDetails, history: &History) -> Markup {
    let task = &details.task;
    let stats = stats(&history.spans);
    let pct = |p: Option<Percentiles>| match p {
        Some(p) => format!("{} / {} / {}", millis(p.p50), millis(p.p95), millis(p.p99)),
        None => "—".to_string(),
    };
    html! {
        section.history aria-labelledby="timeline-heading" {
            h2 #timeline-heading { "Timeline, last " (TIMELINE_HOURS) " h" }
            (timeline::gantt(history.timeline(), &[(task.id, task.name.clone())], history.now, TIMELINE_HOURS))
            p.muted { "Each bar is a run, from its first dispatch (or its scheduled time) for its duration: green succeeded, red failed, blue open, grey missed, skipped or cancelled; at most " (TIMELINE_RUNS) " runs." }
            h2 #stats-heading { "Stats" }
            dl.fields.stats {
                dt { "Over" } dd { "the " (stats.runs) " runs scheduled in the last " (STATS_DAYS) " days (at most " (STATS_RUNS) ")" }
                dt { "Success rate" }
                dd.success-rate {
                    @match stats.success_rate() {
                        Some(rate) => { (format!("{rate:.1} %")) " (" (stats.succeeded) " of " (stats.decided) " ended SUCCESS, FAILED or MISSED)" }
                        None => (none()),
                    }
                }
                dt { "Duration p50 / p95 / p99" } dd.duration { (pct(stats.duration_ms)) }
                dt { "Lag p50 / p95 / p99" } dd.lag { (pct(stats.lag_ms)) " (scheduled → first dispatch, backfills left out)" }
            }
            h2 #failures-heading { "Failures" }
            (timeline::heatmaps(&history.failures, history.now, FAILURE_DAYS))
        }
    }
}

/// Where the task's runs go: its executor group (linked to the group on the executors page),
/// the path on the group's members and the routing; or its handler URL.
fn destination(task: &Task) -> Markup {
    html! {
        @match &task.executor {
            Some(executor) => {
                dt { "Executor group" }
                dd { a href=(group_href(&executor.group)) { (executor.group) } }
                dt { "Path" }
                dd {
                    @if executor.path.is_empty() { (none()) } @else { code { (executor.path) } }
                }
                dt { "Routing" }
                dd {
                    @match executor.routing {
                        Some(routing) => (routing.name()),
                        None => span.muted { "the group's" },
                    }
                }
            }
            None => {
                dt { "Handler URL" } dd { code { (task.handler_url) } }
            }
        }
    }
}

pub(in crate::console) fn upcoming(schedule: &Schedule, fires: &[Previewed]) -> Markup {
    let zone = schedule.cron().zone().name();
    if fires.is_empty() {
        return html! { p.muted { "The schedule fires no more." } };
    }
    let policy = schedule.days_off().map(|off| off.policy);
    scrolling(
        "Next fire times",
        html! {
            table {
                thead {
                    tr {
                        th scope="col" { "In " (zone) }
                        th scope="col" { "UTC" }
                        th scope="col" { "Note" }
                    }
                }
                tbody {
                    @for Previewed { fire, day_off } in fires {
                        tr.day-off[matches!(day_off, Some(DayOff::Off(_)))] {
                            td.mono { (fire.local.format("%Y-%m-%d %H:%M:%S %:z")) }
                            td { (layout::fixed_utc(fire.utc)) }
                            td {
                                @if let Some(note) = &fire.note {
                                    span.badge.warn { (note) } " "
                                }
                                @match day_off {
                                    Some(DayOff::MovedFrom(day, calendar)) => span.badge.busy {
                                        "moved from " (day.format("%a %Y-%m-%d")) " (" (calendar) ")"
                                    },
                                    Some(DayOff::Off(calendar)) => span.badge.idle {
                                        "day off in " (calendar) ": "
                                        (if policy == Some(CalendarPolicy::Skip) { "left out" } else { "moved" })
                                    },
                                    None if fire.note.is_none() => (none()),
                                    None => {}
                                }
                            }
                        }
                    }
                }
            }
        },
    )
}
