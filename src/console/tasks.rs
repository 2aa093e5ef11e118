//! The tasks page (`/console/tasks`, filtered in the URL, with pause, resume and trigger of the
//! selected tasks) and a task's page (`/console/tasks/{id}`): its definition, its next fire
//! times, its latest runs, and its actions (pause, resume, trigger with params, backfill,
//! delete after a confirmation).

use std::collections::{HashMap, HashSet};

use actix_web::http::StatusCode;
use actix_web::{web, HttpRequest, HttpResponse};
use chrono::{DateTime, Utc};
use maud::{html, Markup};

use super::filters::{self, error_for, FilterError, Params};
use super::layout::pretty_json;
use super::layout::{
    self, action_button, maybe_time, none, notice_link, page, scrolling, stored_time, task_state,
    Notice, Section,
};
use super::paths::task_href;
use super::session::{csrf_field, Submitted, Visitor};
use super::{admins_only, html as respond, ok, runs, see_other, ConsoleError};
use crate::api::validate;
use crate::cron::{CronSchedule, Fire};
use crate::error::ApiError;
use crate::run::TaskId;
use crate::service::TaskDetails;
use crate::store::models::{Instance, Task, TaskStatus};
use crate::store::queries::tasks::Versions;
use crate::store::queries::Page;
use crate::web::ApiState;

/// Runs a task's page lists.
const LATEST_RUNS: i64 = 20;
/// Fire times a task's page previews.
const UPCOMING: usize = 10;

/// One page of the task listing.
struct Listing {
    tasks: Vec<Task>,
    /// The scenes of these tasks that are paused.
    paused_scenes: HashSet<String>,
    total: i64,
    page: Page,
    /// Each task's latest due run.
    last_runs: HashMap<TaskId, Instance>,
}

/// `GET /console/tasks?scene=&status=&q=&label=&after=`.
pub async fn list(
    state: web::Data<ApiState>,
    visitor: Visitor,
    req: HttpRequest,
) -> Result<HttpResponse, ConsoleError> {
    let params = filters::params(&req);
    let query = match filters::tasks(&params) {
        Ok(query) => query,
        Err(error) => {
            let page = list_page(&visitor, &req, &params, Some(&error), None);
            return Ok(respond(StatusCode::BAD_REQUEST, page));
        }
    };
    let service = &state.service;
    let (tasks, total) = service.tasks(query.filter, query.page).await?;
    let paused_scenes = tasks
        .iter()
        .filter(|details| details.scene_paused)
        .map(|details| details.task.scene.clone())
        .collect();
    let tasks: Vec<_> = tasks.into_iter().map(|details| details.task).collect();
    let last_runs = service
        .last_runs(tasks.iter().map(|task| task.id).collect())
        .await?;
    let listing = Listing {
        tasks,
        paused_scenes,
        total,
        page: query.page,
        last_runs,
    };
    Ok(ok(list_page(&visitor, &req, &params, None, Some(&listing))))
}

/// What the buttons under the task table do to the selected tasks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Bulk {
    Pause,
    Resume,
    Trigger,
}

/// Most tasks one bulk action takes: a page of the listing.
const MAX_SELECTED: usize = filters::PAGE_SIZE as usize;

/// `POST /console/tasks/bulk` (`action`, `id`…, `back`): pauses, resumes or triggers each
/// selected task through the API's own calls, then goes back to the listing.
pub async fn bulk(
    state: web::Data<ApiState>,
    visitor: Visitor,
    form: Submitted,
) -> Result<HttpResponse, ConsoleError> {
    let action = match form.get("action") {
        Some("pause") => Bulk::Pause,
        Some("resume") => Bulk::Resume,
        Some("trigger") => Bulk::Trigger,
        _ => {
            return Err(
                ApiError::invalid("action", "action must be pause, resume or trigger").into(),
            )
        }
    };
    let mut ids = form
        .all("id")
        .map(validate::task_id)
        .collect::<Result<Vec<TaskId>, ApiError>>()?;
    ids.sort_unstable();
    ids.dedup();
    if ids.is_empty() || ids.len() > MAX_SELECTED {
        let message = format!("select between 1 and {MAX_SELECTED} tasks");
        return Err(ApiError::invalid("id", message).into());
    }
    let (service, actor) = (&state.service, &visitor.principal);
    for id in &ids {
        match action {
            Bulk::Pause => service.pause_task(*id, actor).await.map(drop),
            Bulk::Resume => service.resume_task(*id, actor).await.map(drop),
            Bulk::Trigger => service.trigger(*id, None, actor).await.map(drop),
        }?;
    }
    let n = ids.len() as i64;
    let notice = match action {
        Bulk::Pause => Notice::PausedMany(n),
        Bulk::Resume => Notice::ResumedMany(n),
        Bulk::Trigger => Notice::TriggeredMany(n),
    };
    let back = form
        .get("back")
        .filter(|back| back.starts_with("/console/tasks") && !back.contains("//"))
        .unwrap_or("/console/tasks");
    let (path, query) = back.split_once('?').unwrap_or((back, ""));
    let kept: Vec<(String, String)> = url::form_urlencoded::parse(query.as_bytes())
        .into_owned()
        .filter(|(key, _)| key != "done" && key != "n")
        .collect();
    let mut to = url::form_urlencoded::Serializer::new(String::new());
    to.extend_pairs(kept);
    let query = to.finish();
    let separator = if query.is_empty() { "" } else { "&" };
    Ok(see_other(&format!(
        "{path}?{query}{separator}{}",
        notice.query()
    )))
}

fn list_page(
    visitor: &Visitor,
    req: &HttpRequest,
    params: &Params,
    error: Option<&FilterError>,
    listing: Option<&Listing>,
) -> Markup {
    page(
        visitor,
        "Tasks",
        Some(Section::Tasks),
        html! {
            @if visitor.may_change() {
                p { a.button href=(filters::link("/console/tasks/new", &[("scene", params.get("scene").map(String::as_str))])) { "New task" } }
            }
            (task_filters(params, error))
            @if let Some(listing) = listing {
                @if visitor.may_change() && !listing.tasks.is_empty() {
                    form #bulk method="post" action="/console/tasks/bulk" {
                        (csrf_field(visitor))
                        input type="hidden" name="back" value=(req.uri().to_string());
                        (task_table(listing, true))
                        div.actions role="group" aria-label="Selected tasks" {
                            button type="submit" name="action" value="pause" { "Pause selected" }
                            button type="submit" name="action" value="resume" { "Resume selected" }
                            button type="submit" name="action" value="trigger" { "Trigger selected" }
                        }
                    }
                } @else {
                    (task_table(listing, false))
                }
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
            (layout::input("label", "Label (key=value)", "text", value("label"), error_for(error, "label")))
        },
    )
}

/// The listing's table; `selectable` adds a checkbox a row, for the bulk actions.
fn task_table(listing: &Listing, selectable: bool) -> Markup {
    if listing.tasks.is_empty() {
        return html! { p.muted { "No task matches these filters." } };
    }
    scrolling(
        "Tasks",
        html! {
            table {
                thead {
                    tr {
                        @if selectable {
                            th scope="col" {
                                input #select-all type="checkbox" hidden aria-label="Select every task on this page";
                            }
                        }
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
                        (task_row(task, listing, selectable))
                    }
                }
            }
        },
    )
}

fn task_row(task: &Task, listing: &Listing, selectable: bool) -> Markup {
    let last_run = listing.last_runs.get(&task.id);
    let scene_paused = listing.paused_scenes.contains(&task.scene);
    html! {
        tr {
            @if selectable {
                td {
                    input.select type="checkbox" name="id" value=(task.id)
                        aria-label=(format!("Select {}", task.name));
                }
            }
            td { a href=(task_href(task.id)) { (task.name) } }
            td { a href=(filters::link("/console/tasks", &[("scene", Some(&task.scene))])) { (task.scene) } }
            td { (task_state(task.status, scene_paused)) }
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
    let shown = listing.tasks.len() as i64;
    let to = |after: Option<TaskId>| {
        let after = after.map(|id| id.to_string());
        let keep = |name: &str| params.get(name).map(String::as_str);
        filters::link(
            "/console/tasks",
            &[
                ("q", keep("q")),
                ("scene", keep("scene")),
                ("status", keep("status")),
                ("label", keep("label")),
                ("after", after.as_deref()),
            ],
        )
    };
    let last = listing.tasks.last().map(|task| task.id);
    html! {
        nav.paging aria-label="Pages of tasks" {
            span { (shown) " shown of " (listing.total) " tasks" }
            @if params.contains_key("after") {
                a href=(to(None)) { "First page" }
            }
            @if shown == listing.page.limit {
                a href=(to(last)) rel="next" { "Next page" }
            }
        }
    }
}

/// A task id in a console path; anything else is a page that is not there.
pub fn parse_task_id(raw: &str) -> Result<TaskId, ConsoleError> {
    raw.parse::<i64>()
        .ok()
        .filter(|id| *id > 0)
        .map(TaskId)
        .ok_or_else(|| ConsoleError::NotFound(format!("There is no task {raw}.")))
}

/// What a task's page shows besides the task: the forms' values and the refusal of the last
/// one sent.
#[derive(Debug, Default)]
struct Forms {
    /// The trigger form's params; the task's own when empty.
    params: Option<String>,
    from: Option<String>,
    to: Option<String>,
    /// The field a refused form named, and why.
    error: Option<(String, String)>,
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

async fn task_page(
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
    let (runs, total) = service.task_instances(id, latest).await?;
    let page = detail_page(visitor, &details, &runs, total, service.now(), forms);
    Ok(respond(status, page))
}

/// Shows the task's page again with a form's refusal beside the field it names.
async fn refused(
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

/// `POST /console/tasks/{id}/pause`.
pub async fn pause(
    state: web::Data<ApiState>,
    visitor: Visitor,
    path: web::Path<String>,
    _form: Submitted,
) -> Result<HttpResponse, ConsoleError> {
    let id = parse_task_id(&path)?;
    state.service.pause_task(id, &visitor.principal).await?;
    Ok(see_other(&notice_link(&task_href(id), Notice::Paused)))
}

/// `POST /console/tasks/{id}/resume`.
pub async fn resume(
    state: web::Data<ApiState>,
    visitor: Visitor,
    path: web::Path<String>,
    _form: Submitted,
) -> Result<HttpResponse, ConsoleError> {
    let id = parse_task_id(&path)?;
    state.service.resume_task(id, &visitor.principal).await?;
    Ok(see_other(&notice_link(&task_href(id), Notice::Resumed)))
}

/// `POST /console/tasks/{id}/trigger` (`params`, a JSON object; the task's when empty): the
/// API's trigger; goes on to the new run.
pub async fn trigger(
    state: web::Data<ApiState>,
    visitor: Visitor,
    path: web::Path<String>,
    form: Submitted,
) -> Result<HttpResponse, ConsoleError> {
    let id = parse_task_id(&path)?;
    let params = form.raw("params").map(str::trim).unwrap_or_default();
    let triggered = async {
        let body = match params {
            "" => Vec::new(),
            params => {
                let params: serde_json::Value = serde_json::from_str(params).map_err(|err| {
                    ApiError::invalid("params", format!("params is not valid JSON: {err}"))
                })?;
                serde_json::json!({ "params": params })
                    .to_string()
                    .into_bytes()
            }
        };
        // The form shows the task's params: sent unchanged, the run keeps using the task's.
        let task_params = state.service.task(id).await?.task.params;
        let params =
            validate::trigger_params(&body)?.filter(|params| !same_json(params, &task_params));
        Ok::<_, ConsoleError>(
            state
                .service
                .trigger(id, params, &visitor.principal)
                .await?,
        )
    };
    match triggered.await {
        Ok(run) => Ok(see_other(&notice_link(
            &runs::run_href(&run),
            Notice::Triggered,
        ))),
        Err(err) => {
            let forms = Forms {
                params: Some(params.to_string()),
                ..Forms::default()
            };
            refused(&state, &visitor, id, forms, err).await
        }
    }
}

/// `POST /console/tasks/{id}/backfill` (`from`, `to`: RFC 3339, or a UTC time without offset).
pub async fn backfill(
    state: web::Data<ApiState>,
    visitor: Visitor,
    path: web::Path<String>,
    form: Submitted,
) -> Result<HttpResponse, ConsoleError> {
    let id = parse_task_id(&path)?;
    let (from, to) = (
        form.get("from").unwrap_or_default(),
        form.get("to").unwrap_or_default(),
    );
    let done = async {
        let body = serde_json::json!({ "from": utc_text(from), "to": utc_text(to) });
        let (from, to) = validate::backfill_range(body.to_string().as_bytes())?;
        Ok::<_, ConsoleError>(
            state
                .service
                .backfill(id, from, to, &visitor.principal)
                .await?,
        )
    };
    match done.await {
        Ok(done) => Ok(see_other(&notice_link(
            &task_href(id),
            Notice::Backfilled(done.runs as i64),
        ))),
        Err(err) => {
            let forms = Forms {
                from: Some(from.to_string()),
                to: Some(to.to_string()),
                ..Forms::default()
            };
            refused(&state, &visitor, id, forms, err).await
        }
    }
}

/// Whether two JSON texts hold the same value.
fn same_json(a: &str, b: &str) -> bool {
    let parse = |text: &str| serde_json::from_str::<serde_json::Value>(text).ok();
    parse(a).is_some_and(|a| Some(a) == parse(b))
}

/// A time typed without an offset is UTC, as the form says: `2026-12-01T10:00` reads as
/// `2026-12-01T10:00:00Z`; anything else goes to the API's check as typed.
fn utc_text(typed: &str) -> String {
    // `get`, not an index: a character of several bytes may straddle byte 10 of what was typed.
    let time = typed.get(10..).filter(|_| typed.len() >= 16);
    let bare = time.is_some_and(|time| !time.ends_with('Z') && !time.contains(['+', '-']));
    match (bare, typed.len()) {
        (true, 16) => format!("{typed}:00Z"),
        (true, _) => format!("{typed}Z"),
        (false, _) => typed.to_string(),
    }
}

/// `GET /console/tasks/{id}/delete`: says what deleting does, and asks.
pub async fn confirm_delete(
    state: web::Data<ApiState>,
    visitor: Visitor,
    path: web::Path<String>,
) -> Result<HttpResponse, ConsoleError> {
    admins_only(&visitor)?;
    let id = parse_task_id(&path)?;
    let task = state.service.task(id).await?.task;
    let open = state.service.open_runs(id).await?;
    let href = task_href(id);
    Ok(ok(page(
        &visitor,
        &format!("Delete task {}?", task.name),
        Some(Section::Tasks),
        html! {
            p { "Task " strong { (task.name) } " of scene " (task.scene) " stops firing on every ax process." }
            p role="note" {
                @if open == 0 {
                    "It has no open runs."
                } @else {
                    "Its " strong { (open) " open " (if open == 1 { "run" } else { "runs" }) }
                    " (PENDING, READY or RUNNING) end FAILED with code TASK_DELETED: none is dispatched again, and a result that arrives later changes nothing."
                }
                " Its run history stays."
            }
            div.actions {
                form.inline method="post" action=(format!("{href}/delete")) {
                    (csrf_field(&visitor))
                    button.danger type="submit" { "Delete task" }
                }
                a href=(href) { "Keep it" }
            }
        },
    )))
}

/// `POST /console/tasks/{id}/delete`.
pub async fn delete(
    state: web::Data<ApiState>,
    visitor: Visitor,
    path: web::Path<String>,
    _form: Submitted,
) -> Result<HttpResponse, ConsoleError> {
    let id = parse_task_id(&path)?;
    state
        .service
        .delete_task(id, Versions::Any, &visitor.principal)
        .await?;
    Ok(see_other(&notice_link("/console/tasks", Notice::Deleted)))
}

fn detail_page(
    visitor: &Visitor,
    details: &TaskDetails,
    latest: &[Instance],
    total: i64,
    now: DateTime<Utc>,
    forms: &Forms,
) -> Markup {
    let task = &details.task;
    let schedule = task.schedule();
    page(
        visitor,
        &format!("Task {}", task.name),
        Some(Section::Tasks),
        html! {
            @if let Some((_, message)) = forms.error.as_ref().filter(|(field, _)| field.is_empty()) {
                p.error role="alert" { (message) }
            }
            @if visitor.may_change() { (task_actions(visitor, details, forms)) }
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

/// The task's actions: edit, pause or resume, delete, trigger with params, backfill.
fn task_actions(visitor: &Visitor, details: &TaskDetails, forms: &Forms) -> Markup {
    let task = &details.task;
    let href = task_href(task.id);
    let params = forms
        .params
        .clone()
        .unwrap_or_else(|| pretty_json(&task.params));
    html! {
        div.actions {
            a.button href=(format!("{href}/edit")) { "Edit" }
            @match task.status {
                TaskStatus::Enabled => (action_button(visitor, &format!("{href}/pause"), "Pause")),
                TaskStatus::Paused => (action_button(visitor, &format!("{href}/resume"), "Resume")),
            }
            a.button.danger href=(format!("{href}/delete")) { "Delete…" }
        }
        div.cards {
            section.card aria-labelledby="trigger-heading" {
                h2 #trigger-heading { "Trigger now" }
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
            dt { "Status" }
            dd {
                (task_state(task.status, details.scene_paused))
                @if details.scene_paused {
                    " Its scene is paused: it fires again when "
                    a href="/console/scenes" { "the scene" }
                    " is resumed (and it is enabled)."
                }
            }
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
            dt { "Labels" }
            dd {
                @if task.labels.is_empty() { (none()) }
                @for (key, value) in task.labels.iter() {
                    a href=(filters::link("/console/tasks", &[("label", Some(&format!("{key}={value}")))])) { code { (key) "=" (value) } }
                    " "
                }
            }
            dt { "Next run" } dd { (maybe_time(task.next_run_at)) }
            dt { "Created" } dd { (stored_time(task.created_at)) }
            dt { "Updated" } dd { (stored_time(task.updated_at)) }
        }
    }
}

pub(super) fn upcoming(schedule: &CronSchedule, fires: &[Fire]) -> Markup {
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
