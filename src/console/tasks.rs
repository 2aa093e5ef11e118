//! The tasks page (`/console/tasks`, filtered in the URL) and a task's page
//! (`/console/tasks/{id}`): its definition, its next fire times and its latest runs.

use std::collections::HashMap;

use actix_web::http::StatusCode;
use actix_web::{web, HttpRequest, HttpResponse};
use chrono::{DateTime, Utc};
use maud::{html, Markup};

use super::filters::{self, error_for, FilterError, Params};
use super::layout::{self, maybe_time, none, page, scrolling, stored_time, task_badge, Section};
use super::{html as respond, ok, runs, ConsoleError};
use crate::api::ApiState;
use crate::cron::{CronSchedule, Fire};
use crate::run::TaskId;
use crate::service::TaskDetails;
use crate::store::models::{Instance, Task, TaskStatus};
use crate::store::queries::Page;

/// Runs a task's page lists.
const LATEST_RUNS: i64 = 20;
/// Fire times a task's page previews.
const UPCOMING: usize = 10;

/// One page of the task listing.
struct Listing {
    tasks: Vec<Task>,
    total: i64,
    page: Page,
    /// Each task's latest due run.
    last_runs: HashMap<TaskId, Instance>,
}

/// `GET /console/tasks?scene=&status=&q=&offset=`.
pub async fn list(
    state: web::Data<ApiState>,
    req: HttpRequest,
) -> Result<HttpResponse, ConsoleError> {
    let params = filters::params(&req);
    let query = match filters::tasks(&params) {
        Ok(query) => query,
        Err(error) => {
            let page = list_page(&params, Some(&error), None);
            return Ok(respond(StatusCode::BAD_REQUEST, page));
        }
    };
    let service = &state.service;
    let (tasks, total) = service.tasks(query.filter, query.page).await?;
    let tasks: Vec<_> = tasks.into_iter().map(|details| details.task).collect();
    let last_runs = service
        .last_runs(tasks.iter().map(|task| task.id).collect())
        .await?;
    let listing = Listing {
        tasks,
        total,
        page: query.page,
        last_runs,
    };
    Ok(ok(list_page(&params, None, Some(&listing))))
}

fn list_page(params: &Params, error: Option<&FilterError>, listing: Option<&Listing>) -> Markup {
    page(
        "Tasks",
        Some(Section::Tasks),
        html! {
            (task_filters(params, error))
            @if let Some(listing) = listing {
                (task_table(listing))
                (paging(params, listing))
            }
        },
    )
}

fn task_filters(params: &Params, error: Option<&FilterError>) -> Markup {
    let value = |name: &str| params.get(name).map(String::as_str);
    let statuses: Vec<&str> = TaskStatus::ALL.iter().map(|s| s.as_str()).collect();
    layout::filter_form(
        "/console/tasks",
        html! {
            (layout::input("q", "Name contains", "search", value("q"), error_for(error, "q")))
            (layout::input("scene", "Scene", "text", value("scene"), error_for(error, "scene")))
            (layout::select("status", "Status", &statuses, value("status"), error_for(error, "status")))
        },
    )
}

fn task_table(listing: &Listing) -> Markup {
    if listing.tasks.is_empty() {
        return html! { p.muted { "No task matches these filters." } };
    }
    scrolling(
        "Tasks",
        html! {
            table {
                thead {
                    tr {
                        th scope="col" { "Name" }
                        th scope="col" { "Scene" }
                        th scope="col" { "Status" }
                        th scope="col" { "Schedule" }
                        th scope="col" { "Time zone" }
                        th scope="col" { "Next run" }
                        th scope="col" { "Last run" }
                    }
                }
                tbody {
                    @for task in &listing.tasks {
                        (task_row(task, listing.last_runs.get(&task.id)))
                    }
                }
            }
        },
    )
}

fn task_row(task: &Task, last_run: Option<&Instance>) -> Markup {
    html! {
        tr {
            td { a href=(task_href(task.id)) { (task.name) } }
            td { a href=(filters::link("/console/tasks", &[("scene", Some(&task.scene))])) { (task.scene) } }
            td { (task_badge(task.status)) }
            td { (schedule(task)) }
            td { (task.time_zone) }
            td { (maybe_time(task.next_run_at)) }
            td {
                @match last_run {
                    Some(run) => {
                        a href=(runs::run_href(run)) { (layout::run_badge(run.status)) }
                        " " (stored_time(run.scheduled_at))
                    }
                    None => (none()),
                }
            }
        }
    }
}

/// A task's cron expression with its reading in English.
fn schedule(task: &Task) -> Markup {
    html! {
        code { (task.cron) }
        br;
        @match task.schedule() {
            Ok(schedule) => span.muted { (schedule.describe()) },
            Err(err) => span.error { "Cannot be read: " (err.to_string()) },
        }
    }
}

/// Previous and next links that keep the filters.
fn paging(params: &Params, listing: &Listing) -> Markup {
    let Page { limit, offset } = listing.page;
    let shown = listing.tasks.len() as i64;
    let to = |offset: i64| {
        let offset = offset.to_string();
        let keep = |name: &str| params.get(name).map(String::as_str);
        filters::link(
            "/console/tasks",
            &[
                ("q", keep("q")),
                ("scene", keep("scene")),
                ("status", keep("status")),
                ("offset", (offset != "0").then_some(offset.as_str())),
            ],
        )
    };
    html! {
        nav.paging aria-label="Pages of tasks" {
            span { "Tasks " (offset + 1) "–" (offset + shown) " of " (listing.total) }
            @if offset > 0 {
                a href=(to((offset - limit).max(0))) rel="prev" { "Previous page" }
            }
            @if offset + shown < listing.total {
                a href=(to(offset + limit)) rel="next" { "Next page" }
            }
        }
    }
}

/// The link to a task's page.
pub fn task_href(id: TaskId) -> String {
    format!("/console/tasks/{id}")
}

/// `GET /console/tasks/{id}`.
pub async fn detail(
    state: web::Data<ApiState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ConsoleError> {
    let id = path
        .parse::<i64>()
        .ok()
        .filter(|id| *id > 0)
        .map(TaskId)
        .ok_or_else(|| ConsoleError::NotFound(format!("There is no task {path}.")))?;
    let service = &state.service;
    let details = service.task(id).await?;
    let latest = Page {
        limit: LATEST_RUNS,
        offset: 0,
    };
    let (runs, total) = service.task_instances(id, latest).await?;
    Ok(ok(detail_page(&details, &runs, total, service.now())))
}

fn detail_page(
    details: &TaskDetails,
    latest: &[Instance],
    total: i64,
    now: DateTime<Utc>,
) -> Markup {
    let task = &details.task;
    let schedule = task.schedule();
    page(
        &format!("Task {}", task.name),
        Some(Section::Tasks),
        html! {
            // Actions on the task (pause, trigger, edit) belong here, with the console's sign-in.
            h2 { "Definition" }
            (definition(details))
            h2 { "Next " (UPCOMING) " fire times" }
            @match &schedule {
                Ok(schedule) => (upcoming(schedule, &schedule.upcoming(now, UPCOMING))),
                Err(err) => p.error { "The cron expression cannot be read: " (err.to_string()) },
            }
            h2 { "Latest runs" }
            p {
                "The last " (latest.len()) " of " (total) ". "
                a href=(filters::link("/console/runs", &[("task", Some(&task.id.to_string()))])) {
                    "All runs of this task"
                }
            }
            (runs::run_table(latest, None))
        },
    )
}

fn definition(details: &TaskDetails) -> Markup {
    let task = &details.task;
    let or_default = |value: Option<i32>, unit: &str| match value {
        Some(value) => format!("{value}{unit}"),
        None => "the server's default".to_string(),
    };
    html! {
        dl.fields {
            dt { "Id" } dd { (task.id) }
            dt { "Name" } dd { (task.name) }
            dt { "Scene" } dd { (task.scene) }
            dt { "Status" } dd { (task_badge(task.status)) }
            dt { "Cron" } dd { (schedule(task)) }
            dt { "Time zone" } dd { (task.time_zone) }
            dt { "Handler URL" } dd { code { (task.handler_url) } }
            dt { "Params" } dd { pre { (pretty_json(&task.params)) } }
            dt { "Max retries" } dd { (task.max_retry) }
            dt { "Timeout" } dd { (layout::millis(task.timeout_ms)) }
            dt { "Retry back-off" } dd { (or_default(task.retry_backoff_secs, " s")) }
            dt { "Retry factor" } dd { (or_default(task.retry_factor, "")) }
            dt { "Misfire threshold" } dd { (or_default(task.misfire_threshold_secs, " s")) }
            dt { "Dependency timeout" } dd { (or_default(task.dependency_timeout_secs, " s")) }
            dt { "Depends on" }
            dd {
                @if details.depends_on.is_empty() { (none()) }
                @for (n, upstream) in details.depends_on.iter().enumerate() {
                    @if n > 0 { ", " }
                    a href=(task_href(*upstream)) { "task " (upstream) }
                }
            }
            dt { "Overlap" } dd { (task.overlap.as_str()) }
            dt { "Jitter" } dd { (task.jitter_secs) " s" }
            dt { "Next run" } dd { (maybe_time(task.next_run_at)) }
            dt { "Created" } dd { (stored_time(task.created_at)) }
            dt { "Updated" } dd { (stored_time(task.updated_at)) }
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

fn upcoming(schedule: &CronSchedule, fires: &[Fire]) -> Markup {
    let zone = schedule.zone().name();
    if fires.is_empty() {
        return html! { p.muted { "The schedule fires no more." } };
    }
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
                    @for fire in fires {
                        tr {
                            td.mono { (fire.local.format("%Y-%m-%d %H:%M:%S %:z")) }
                            td { (layout::fixed_utc(fire.utc)) }
                            td {
                                @match &fire.note {
                                    Some(note) => span.badge.warn { (note) },
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
