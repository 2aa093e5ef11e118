//! The tasks page (`/console/tasks`, filtered in the URL), with pause, resume and trigger of
//! the selected tasks.

use std::collections::{HashMap, HashSet};

use actix_web::http::StatusCode;
use actix_web::{web, HttpRequest, HttpResponse};
use maud::{html, Markup};

use crate::api::validate;
use crate::console::filters::{self, error_for, FilterError, Params};
use crate::console::layout::{
    self, maybe_time, none, page, scrolling, stored_time, task_state, Notice, Section,
};
use crate::console::paths::task_href;
use crate::console::session::{csrf_field, Submitted, Visitor};
use crate::console::{html as respond, ok, runs, see_other, ConsoleError};
use crate::error::ApiError;
use crate::run::TaskId;
use crate::store::models::{Instance, Task, TaskStatus};
use crate::store::queries::Page;
use crate::web::ApiState;

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
    if ids.is_empty() {
        return Ok(see_other(&back_to(&form, Notice::NothingSelected)));
    }
    if ids.len() > MAX_SELECTED {
        let message = format!("select at most {MAX_SELECTED} tasks");
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
    Ok(see_other(&back_to(&form, notice)))
}

/// The listing the form came from (its `back`, a tasks page only), telling `notice`.
fn back_to(form: &Submitted, notice: Notice) -> String {
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
    format!("{path}?{query}{separator}{}", notice.query())
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
pub(super) fn schedule(task: &Task) -> Markup {
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
