//! The runs page (`/console/runs`, filtered in the URL, paged by cursor), a run's page
//! (`/console/runs/{requestId}`), and a run's cancel and re-run.

use std::collections::HashMap;

use actix_web::http::StatusCode;
use actix_web::{web, HttpRequest, HttpResponse};
use maud::{html, Markup};

use super::filters::{self, error_for, FilterError, Params, PAGE_SIZE};
use super::layout::pretty_json;
use super::layout::{
    self, action_button, maybe_time, none, notice_link, page, run_badge, scrolling, stored_time,
    Notice, Section,
};
use super::paths::{self, task_href};
use super::session::{Submitted, Visitor};
use super::{html as respond, ok, see_other, ConsoleError};
use super::{live, run_log};
use crate::service::run_history::FailedUpstream;
use crate::web::ApiState;
use ax_core::run::history::MissedReason;
use ax_core::run::logs::Limits;
use ax_core::run::{RequestId, RunStatus, TaskId};
use ax_store::queries::attempts::AttemptRow;
use ax_store::queries::run_log::AttemptLog;
use ax_store::queries::runs::Cursor;
use ax_store::rows::models::Run;

/// The filters the runs page keeps in its links, in their order in the URL.
const KEPT: &[&str] = &["task", "scene", "status", "from", "to"];

/// The most scenes the scene filter offers as a choice; with more, it is typed.
const SCENE_CHOICES: i64 = 500;

/// `GET /console/runs?task=&scene=&status=&from=&to=&cursor=&back=`: `task` an id or a name,
/// `status` one or several (repeated or separated by commas).
pub async fn list(
    state: web::Data<ApiState>,
    visitor: Visitor,
    req: HttpRequest,
) -> Result<HttpResponse, ConsoleError> {
    let params = filters::params(&req);
    let service = &state.service;
    let scenes = service.scene_names(SCENE_CHOICES + 1).await?;
    let mut query = match filters::runs(&params) {
        Ok(query) => query,
        Err(error) => {
            let page = list_page(&visitor, &params, &scenes, Some(&error), None);
            return Ok(respond(StatusCode::BAD_REQUEST, page));
        }
    };
    if let Some(name) = query.task_name.take() {
        query.filter.task_ids = Some(service.tasks_called(name, PAGE_SIZE).await?);
    }
    let (runs, next) = service
        .history(query.filter, query.cursor, PAGE_SIZE)
        .await?;
    let names = service.task_names(task_ids(&runs)).await?;
    let listing = Listing { runs, next, names };
    Ok(ok(list_page(
        &visitor,
        &params,
        &scenes,
        None,
        Some(&listing),
    )))
}

/// The distinct tasks of these runs.
pub fn task_ids(runs: &[Run]) -> Vec<TaskId> {
    let mut ids: Vec<TaskId> = runs.iter().map(|run| run.task_id).collect();
    ids.sort_unstable();
    ids.dedup();
    ids
}

/// One page of the run history.
struct Listing {
    runs: Vec<Run>,
    next: Option<Cursor>,
    names: HashMap<TaskId, String>,
}

fn list_page(
    visitor: &Visitor,
    params: &Params,
    scenes: &[String],
    error: Option<&FilterError>,
    listing: Option<&Listing>,
) -> Markup {
    let value = |name: &str| params.get(name).map(String::as_str);
    page(
        visitor,
        "Runs",
        Some(Section::Runs),
        html! {
            (run_filters(params, scenes, error))
            @if let Some(error) = error_for(error, "cursor") {
                p.error role="alert" { (error) " " a href=(kept_link(params, None)) { "First page" } }
            }
            @if let Some(listing) = listing {
                (live::feed(value("task").filter(|task| task.parse::<i64>().is_ok()), value("scene"), None))
                (live::region("runs-live", html! {
                    (run_table(&listing.runs, Some(&listing.names)))
                    (layout::paging("Pages of runs", &filters::around(params, "cursor", listing.next.map(filters::encode_cursor).as_deref()), |query| kept_link(query, query.get("cursor").map(String::as_str))))
                }))
            }
        },
    )
}

fn run_filters(params: &Params, scenes: &[String], error: Option<&FilterError>) -> Markup {
    let value = |name: &str| params.get(name).map(String::as_str);
    let scene_error = error_for(error, "scene");
    let scene = match scenes.len() as i64 > SCENE_CHOICES {
        true => layout::input("scene", "Scene", "text", value("scene"), scene_error),
        false => {
            let mut choices: Vec<&str> = scenes.iter().map(String::as_str).collect();
            // A scene asked for that has no tasks (any longer) stays chosen.
            choices.extend(value("scene").filter(|scene| !choices.contains(scene)));
            layout::select("scene", "Scene", &choices, value("scene"), scene_error)
        }
    };
    layout::filter_form(
        "/console/runs",
        html! {
            (layout::input("task", "Task (id or name)", "search", value("task"), error_for(error, "task")))
            (scene)
            (status_choices(value("status").unwrap_or_default(), error_for(error, "status")))
            (layout::input("from", "Scheduled from (UTC)", "text", value("from"), error_for(error, "from")))
            (layout::input("to", "Scheduled before (UTC)", "text", value("to"), error_for(error, "to")))
        },
    )
}

/// A checkbox a run status; those of `chosen` (separated by commas) checked: any of them.
fn status_choices(chosen: &str, error: Option<&str>) -> Markup {
    let chosen: Vec<&str> = chosen.split(',').map(str::trim).collect();
    html! {
        fieldset.field.statuses aria-describedby=[error.map(|_| "status-error")] {
            legend { "Status (any of)" }
            @for status in RunStatus::ALL {
                label.check {
                    input type="checkbox" name="status" value=(status.as_str())
                        checked[chosen.contains(&status.as_str())];
                    " " (status.as_str())
                }
            }
            @if let Some(error) = error {
                span.field-error #status-error { (error) }
            }
        }
    }
}

/// The runs page with these filters and `cursor`.
fn kept_link(params: &Params, cursor: Option<&str>) -> String {
    filters::kept_link("/console/runs", KEPT, params, cursor)
}

/// Runs as a table, newest first; with `names`, a column names each run's task.
pub fn run_table(runs: &[Run], names: Option<&HashMap<TaskId, String>>) -> Markup {
    if runs.is_empty() {
        return html! { p.muted { "No runs." } };
    }
    scrolling(
        "Runs",
        html! {
            table {
                thead {
                    tr {
                        th scope="col" { "Status" }
                        th scope="col" { "Scheduled" }
                        th scope="col" { "Dispatched" }
                        th.num scope="col" { "Lag" }
                        th.num scope="col" { "Attempt" }
                        th scope="col" { "Code" }
                        th scope="col" { "Message" }
                        th scope="col" { "Trigger" }
                        th.num scope="col" { "Duration" }
                        @if names.is_some() { th scope="col" { "Task" } }
                    }
                }
                tbody {
                    @for run in runs {
                        tr {
                            td { (run_badge(run.status)) }
                            td {
                                a href=(run_href(run)) { (stored_time(run.scheduled_at)) }
                                (shard_mark(run))
                            }
                            td { (maybe_time(run.dispatched_at)) }
                            td.num { (lag(run)) }
                            td.num { (run.attempt) }
                            td { (text_or_none(run.callback_code.as_deref())) }
                            td { (text_or_none(run.callback_message.as_deref())) }
                            td { (run.trigger_type.as_str()) }
                            td.num { (duration(run)) }
                            @if let Some(names) = names { td { (task_link(run.task_id, names)) } }
                        }
                    }
                }
            }
        },
    )
}

/// A task's name linking to its page; its id when it was deleted.
pub fn task_link(id: TaskId, names: &HashMap<TaskId, String>) -> Markup {
    match names.get(&id) {
        Some(name) => html! { a href=(task_href(id)) { (name) } },
        None => html! { span.muted { "task " (id) " (deleted)" } },
    }
}

/// From scheduled to first dispatched.
fn lag(run: &Run) -> Markup {
    match run.dispatched_at {
        Some(at) => html! { (layout::millis((at - run.scheduled_at).num_milliseconds())) },
        None => none(),
    }
}

/// From first dispatched to finished, for a run that ended after it was dispatched.
fn duration(run: &Run) -> Markup {
    match (run.dispatched_at, run.finished_at) {
        (Some(from), Some(to)) => html! { (layout::millis((to - from).num_milliseconds())) },
        _ => none(),
    }
}

fn text_or_none(text: Option<&str>) -> Markup {
    match text {
        Some(text) => html! { (text) },
        None => none(),
    }
}

/// The executor group member that served an attempt; none for a handler URL's.
fn member(url: Option<&str>) -> Markup {
    match url {
        Some(url) => html! { code { (url) } },
        None => none(),
    }
}

/// A broadcast shard's place in its fire, after its time: `shard 2/3`.
fn shard_mark(run: &Run) -> Markup {
    match (run.shard_index, run.shard_total) {
        (Some(index), Some(total)) if ax_core::run::sharded(Some(total)) => {
            html! { " " span.muted { "shard " (index + 1) "/" (total) } }
        }
        _ => html! {},
    }
}

/// The link to a run's page.
pub fn run_href(run: &Run) -> String {
    paths::run_href(&run.request_id.to_string())
}

/// `GET /console/runs/{requestId}`.
pub async fn detail(
    state: web::Data<ApiState>,
    visitor: Visitor,
    path: web::Path<String>,
) -> Result<HttpResponse, ConsoleError> {
    let request_id = request_id(&path)?;
    let service = &state.service;
    let run = service
        .instance(request_id)
        .await?
        .ok_or_else(|| no_run(&path))?;
    let (upstreams, missed) =
        futures_util::join!(service.failed_upstreams(&run), service.missed_reason(&run),);
    let (upstreams, missed) = (upstreams?, missed?);
    let mut ids: Vec<TaskId> = upstreams.iter().map(|up| up.task_id).collect();
    ids.push(run.task_id);
    let (names, attempts, shards, logs) = futures_util::join!(
        service.task_names(ids),
        service.attempts(run.request_id.clone()),
        service.shards(&run),
        service.run_log(run.request_id.clone()),
    );
    let reads = Reads {
        why: Why {
            upstreams: &upstreams,
            missed,
        },
        names: &names?,
        attempts: &attempts?,
        shards: &shards?,
        logs: &logs?,
        limits: service.run_log_limits(),
    };
    Ok(ok(detail_page(&visitor, &run, reads)))
}

/// `GET /console/runs/{requestId}/cancel`: says what cancelling does to this run, and asks.
pub async fn confirm_cancel(
    state: web::Data<ApiState>,
    visitor: Visitor,
    path: web::Path<String>,
) -> Result<HttpResponse, ConsoleError> {
    super::admins_only(&visitor)?;
    let service = &state.service;
    let run = service
        .instance(request_id(&path)?)
        .await?
        .ok_or_else(|| no_run(&path))?;
    let names = service.task_names(vec![run.task_id]).await?;
    let href = run_href(&run);
    Ok(ok(page(
        &visitor,
        &format!("Cancel run {}?", run.request_id),
        Some(Section::Runs),
        html! {
            p role="note" {
                "Run of " (task_link(run.task_id, &names)) ", scheduled " (stored_time(run.scheduled_at)) ", is "
                (run_badge(run.status)) "."
                @if run.status.is_final() {
                    " It has ended: there is nothing to cancel."
                } @else {
                    " Cancelled, it ends CANCELLED: it is not dispatched again, and a result that arrives later changes nothing."
                }
            }
            div.actions {
                @if !run.status.is_final() {
                    form.inline method="post" action=(format!("{href}/cancel")) {
                        (super::session::csrf_field(&visitor))
                        button.danger type="submit" { "Cancel run" }
                    }
                }
                a href=(href) { "Back to the run" }
            }
        },
    )))
}

/// `POST /console/runs/{requestId}/cancel`: the API's cancel (409 when the run is final).
pub async fn cancel(
    state: web::Data<ApiState>,
    visitor: Visitor,
    path: web::Path<String>,
    _form: Submitted,
) -> Result<HttpResponse, ConsoleError> {
    let run = state
        .service
        .cancel(request_id(&path)?, &visitor.principal)
        .await?;
    Ok(see_other(&notice_link(&run_href(&run), Notice::Cancelled)))
}

/// `POST /console/runs/{requestId}/rerun`: a manual run of the run's task with the run's params.
pub async fn rerun(
    state: web::Data<ApiState>,
    visitor: Visitor,
    path: web::Path<String>,
    _form: Submitted,
) -> Result<HttpResponse, ConsoleError> {
    let service = &state.service;
    let run = service
        .instance(request_id(&path)?)
        .await?
        .ok_or_else(|| no_run(&path))?;
    let again = service
        .trigger(run.task_id, run.params, &visitor.principal)
        .await?;
    Ok(see_other(&notice_link(
        &run_href(&again),
        Notice::Triggered,
    )))
}

fn request_id(raw: &str) -> Result<RequestId, ConsoleError> {
    RequestId::parse(raw).ok_or_else(|| no_run(raw))
}

fn no_run(raw: &str) -> ConsoleError {
    ConsoleError::NotFound(format!("There is no run with request id {raw}."))
}

/// What a run's page shows besides the run.
struct Reads<'a> {
    why: Why<'a>,
    names: &'a HashMap<TaskId, String>,
    attempts: &'a [AttemptRow],
    /// Its broadcast fire's shards.
    shards: &'a [Run],
    logs: &'a [AttemptLog],
    limits: Limits,
}

fn detail_page(visitor: &Visitor, run: &Run, reads: Reads) -> Markup {
    let Reads {
        why,
        names,
        attempts,
        shards,
        logs,
        limits,
    } = reads;
    let href = run_href(run);
    let task = run.task_id.to_string();
    let request_id = run.request_id.to_string();
    page(
        visitor,
        &format!("Run {}", run.request_id),
        Some(Section::Runs),
        html! {
            (live::feed(Some(&task), None, Some(&request_id)))
            (live::region("run-live", html! {
            div.actions {
                @if !run.status.is_final() {
                    (action_button(visitor, &format!("{href}/cancel"), "Cancel run"))
                }
                @if names.contains_key(&run.task_id) {
                    (action_button(visitor, &format!("{href}/rerun"), "Run again"))
                }
            }
            dl.fields {
                dt { "Status" } dd { (run_badge(run.status)) }
                dt { "Task" } dd { (task_link(run.task_id, names)) }
                dt { "Request id" } dd { code { (run.request_id) } }
                dt { "Trigger" } dd { (run.trigger_type.as_str()) }
                dt { "Scheduled" } dd { (stored_time(run.scheduled_at)) }
                dt { "Due" } dd { (stored_time(run.trigger_at)) }
                dt { "Dispatched" } dd { (maybe_time(run.dispatched_at)) }
                dt { "Lag" } dd { (lag(run)) }
                dt { "Finished" } dd { (maybe_time(run.finished_at)) }
                dt { "Attempt" } dd { (run.attempt) " (retries: " (run.retry_count) ")" }
                dt { "Next attempt" } dd { (maybe_time(run.next_attempt_at)) }
                dt { "Deadline" } dd { (maybe_time(run.deadline_at)) }
                dt { "Code" } dd { (text_or_none(run.callback_code.as_deref())) }
                dt { "Message" } dd { (text_or_none(run.callback_message.as_deref())) }
                (why_markup(&why, names))
                dt { "Params" }
                dd {
                    @match &run.params {
                        Some(params) => pre { (pretty_json(params)) },
                        None => span.muted { "the task's" },
                    }
                }
                dt { "Fired by" } dd { code { (run.fired_by) } }
                dt { "Executor member" } dd { (member(run.member.as_deref())) }
                @if let (Some(index), Some(total)) = (run.shard_index, run.shard_total) {
                    dt { "Shard" } dd { (index + 1) " of " (total) " (shardIndex " (index) ")" }
                }
                dt { "Recorded" } dd { (stored_time(run.created_at)) }
            }
            h2 #attempts-heading { "Attempts" }
            (timeline(run, attempts))
            @if !shards.is_empty() {
                h2 #shards-heading { "Shards of this fire" }
                (shard_table(run, shards))
            }
            (run_log::section(logs, limits))
            }))
            p { a href=(filters::link("/console/runs", &[("task", Some(&run.task_id.to_string()))])) { "Other runs of this task" } }
        },
    )
}

/// A broadcast fire's shards, each with its status and member; the run shown is marked.
fn shard_table(run: &Run, shards: &[Run]) -> Markup {
    scrolling(
        "Shards of this fire",
        html! {
            table aria-labelledby="shards-heading" {
                thead {
                    tr {
                        th.num scope="col" { "Shard" }
                        th scope="col" { "Status" }
                        th scope="col" { "Member" }
                        th.num scope="col" { "Attempt" }
                        th scope="col" { "Request id" }
                    }
                }
                tbody {
                    @for shard in shards {
                        tr {
                            td.num { (shard.shard_index.unwrap_or_default()) }
                            td { (run_badge(shard.status)) }
                            td { (member(shard.member.as_deref())) }
                            td.num { (shard.attempt) }
                            td {
                                @if shard.request_id == run.request_id {
                                    code { (shard.request_id) } " " span.muted { "(this run)" }
                                } @else {
                                    a href=(run_href(shard)) { code { (shard.request_id) } }
                                }
                            }
                        }
                    }
                }
            }
        },
    )
}

/// The run's attempts, oldest first: those that failed and were retried, then the current one
/// (its outcome is the run's own).
fn timeline(run: &Run, attempts: &[AttemptRow]) -> Markup {
    let dispatched = run.dispatched_attempt >= run.attempt;
    let (when, outcome) = current_attempt(run, dispatched);
    let show_result = run.status.is_final();
    scrolling(
        "Attempts",
        html! {
            table aria-labelledby="attempts-heading" {
                thead {
                    tr {
                        th scope="col" { "Attempt" }
                        th scope="col" { "Time" }
                        th scope="col" { "Outcome" }
                        th scope="col" { "Code" }
                        th scope="col" { "Message" }
                        th scope="col" { "ax process" }
                        th scope="col" { "Executor member" }
                    }
                }
                tbody {
                    @for attempt in attempts {
                        tr {
                            td.num { (attempt.attempt) }
                            td { (stored_time(attempt.ended_at)) }
                            td { (run_badge(RunStatus::Failed)) " then retried" }
                            td { (text_or_none(attempt.code.as_deref())) }
                            td { (text_or_none(attempt.message.as_deref())) }
                            td { code { (attempt.process) } }
                            td { (member(attempt.member.as_deref())) }
                        }
                    }
                    tr {
                        td.num { (run.attempt) }
                        td { (when) }
                        td { (outcome) }
                        td { (text_or_none(run.callback_code.as_deref().filter(|_| show_result))) }
                        td { (text_or_none(run.callback_message.as_deref().filter(|_| show_result))) }
                        td {
                            @if dispatched { code { (run.fired_by) } } @else { (none()) }
                        }
                        td { (member(run.member.as_deref().filter(|_| dispatched))) }
                    }
                }
            }
        },
    )
}

/// When the current attempt ended (or is due), and how it stands.
fn current_attempt(run: &Run, dispatched: bool) -> (Markup, Markup) {
    match run.status {
        status if status.is_final() => (maybe_time(run.finished_at), run_badge(status)),
        RunStatus::Running => (
            html! { "deadline " (maybe_time(run.deadline_at)) },
            html! { (run_badge(RunStatus::Running)) " in flight" },
        ),
        RunStatus::Ready if dispatched => (
            maybe_time(run.claimed_until),
            html! { (run_badge(RunStatus::Ready)) " being dispatched" },
        ),
        RunStatus::Ready => (
            html! { "due " (maybe_time(run.next_attempt_at)) },
            html! { (run_badge(RunStatus::Ready)) " waiting" },
        ),
        status => (
            none(),
            html! { (run_badge(status)) " waiting to be released" },
        ),
    }
}

/// Why a run ended as it did, when ax decided it: the upstream runs that failed, or how late a
/// missed run was.
struct Why<'a> {
    upstreams: &'a [FailedUpstream],
    missed: Option<MissedReason>,
}

fn why_markup(why: &Why, names: &HashMap<TaskId, String>) -> Markup {
    html! {
        @if !why.upstreams.is_empty() {
            dt { "Upstream run that failed" }
            dd.failed-upstream {
                @for (n, up) in why.upstreams.iter().enumerate() {
                    @if n > 0 { ", " }
                    a href=(paths::run_href(&up.request_id.to_string())) { (run_badge(up.status)) " run " code { (up.request_id) } }
                    " of " (task_link(up.task_id, names))
                }
            }
        }
        @if let Some(missed) = why.missed {
            dt { "Why missed" }
            dd.missed-reason {
                "Noticed " (layout::millis(missed.late.num_milliseconds())) " after its scheduled time, later than the misfire threshold; "
                (missed.periods) " period" @if missed.periods != 1 { "s" } " of the schedule missed, recorded as this one run."
            }
        }
    }
}
