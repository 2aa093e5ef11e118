//! The tasks page (`/console/tasks`, filtered and sorted in the URL, paged both ways by
//! keyset), with a selection of tasks to pause, resume or trigger (see [`super::bulk`]).

use std::collections::{HashMap, HashSet};

use actix_web::http::StatusCode;
use actix_web::{web, HttpRequest, HttpResponse};
use maud::{html, Markup};

use crate::console::filters::{self, error_for, FilterError, Params, TASK_FILTERS};
use crate::console::layout::{
    self, maybe_time, none, page, scrolling, stored_time, task_state, Section,
};
use crate::console::paths::task_href;
use crate::console::session::Visitor;
use crate::console::{html as respond, ok, runs, ConsoleError};
use crate::service::task_details::TaskDetails;
use crate::web::ApiState;
use ax_core::run::TaskId;
use ax_store::queries::task_pages::{key_of, Cursor, SortColumn, TaskPage, TaskSort};
use ax_store::rows::models::{Run, Task, TaskStatus};

/// One page of the task listing.
struct Listing {
    tasks: Vec<Task>,
    /// The scenes of these tasks that are paused.
    paused_scenes: HashSet<String>,
    /// Where the page lies (its rows moved to `tasks`).
    page: TaskPage<()>,
    sort: TaskSort,
    /// Each task's latest due run.
    last_runs: HashMap<TaskId, Run>,
}

/// `GET /console/tasks?q=&scene=&status=&label=&sort=&after=|before=`.
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
    let sort = query.keyset.sort;
    let mut found = service.task_page(query.filter, query.keyset).await?;
    let details: Vec<TaskDetails> = std::mem::take(&mut found.tasks);
    let paused_scenes = details
        .iter()
        .filter(|details| details.scene_paused)
        .map(|details| details.task.scene.to_string())
        .collect();
    let tasks: Vec<_> = details.into_iter().map(|details| details.task).collect();
    let last_runs = service
        .last_runs(tasks.iter().map(|task| task.id).collect())
        .await?;
    let listing = Listing {
        tasks,
        paused_scenes,
        page: found.with_rows(Vec::new()),
        sort,
        last_runs,
    };
    Ok(ok(list_page(&visitor, &req, &params, None, Some(&listing))))
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
                    (super::bulk::selection_form(req, params, listing.page.total, task_table(params, listing, true)))
                } @else {
                    (task_table(params, listing, false))
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
            // Filtering keeps the sort, from the first page.
            @if let Some(sort) = value("sort") {
                input type="hidden" name="sort" value=(sort);
            }
            // The parameters no field shows: the sort, and a page link's cursor.
            @if let Some(error) = error.filter(|error| !TASK_FILTERS.contains(&error.field)) {
                p.field-error role="alert" { (error.field) ": " (error.message) }
            }
        },
    )
}

/// The listing's table; `selectable` adds a checkbox a row, for the bulk actions.
fn task_table(params: &Params, listing: &Listing, selectable: bool) -> Markup {
    if listing.tasks.is_empty() {
        return html! { p.muted { "No task matches these filters." } };
    }
    let sortable =
        |label: &str, column: SortColumn| sort_header(params, listing.sort, label, column);
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
                        (sortable("Name", SortColumn::Name))
                        (sortable("Scene", SortColumn::Scene))
                        (sortable("Status", SortColumn::Status))
                        th scope="col" { "Schedule" }
                        th scope="col" { "Time zone" }
                        (sortable("Next run", SortColumn::NextRun))
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

/// A column's header that sorts by it: by the column on a first click, the other way round on
/// the next; the current sort is told by `aria-sort` and an arrow.
fn sort_header(params: &Params, current: TaskSort, label: &str, column: SortColumn) -> Markup {
    let sorted = (current.column == column).then_some(current.descending);
    let next = TaskSort {
        column,
        descending: sorted == Some(false),
    };
    let (aria, arrow) = match sorted {
        Some(false) => (Some("ascending"), " ▲"),
        Some(true) => (Some("descending"), " ▼"),
        None => (None, ""),
    };
    let title = match next.descending {
        true => format!("Sort by {} the other way round", label.to_lowercase()),
        false => format!("Sort by {}", label.to_lowercase()),
    };
    html! {
        th scope="col" aria-sort=[aria] {
            a.sort href=(tasks_link(params, next, None)) title=(title) { (label) (arrow) }
        }
    }
}

/// A page of the listing: `params`' filters, `sort`, and a cursor (`after` or `before`).
fn tasks_link(params: &Params, sort: TaskSort, cursor: Option<(&str, String)>) -> String {
    let sort = filters::task_sort_text(sort);
    let mut pairs: Vec<(&str, Option<&str>)> = TASK_FILTERS
        .iter()
        .map(|name| (*name, params.get(*name).map(String::as_str)))
        .collect();
    pairs.push(("sort", sort.as_deref()));
    if let Some((key, value)) = &cursor {
        pairs.push((key, Some(value)));
    }
    filters::link("/console/tasks", &pairs)
}

fn task_row(task: &Task, listing: &Listing, selectable: bool) -> Markup {
    let last_run = listing.last_runs.get(&task.id);
    let scene_paused = listing.paused_scenes.contains(task.scene.as_str());
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
        @match task.cron() {
            Ok(schedule) => span.muted { (schedule.describe()) },
            Err(err) => span.error { "Cannot be read: " (err.to_string()) },
        }
    }
}

/// The first, previous and next pages, with the filters and the sort.
fn paging(params: &Params, listing: &Listing) -> Markup {
    let shown = listing.tasks.len();
    let sort = listing.sort;
    let cursor = |task: &Task| {
        filters::task_cursor_text(&Cursor {
            key: key_of(task, sort.column),
            id: task.id,
        })
    };
    let page = &listing.page;
    let previous = listing
        .tasks
        .first()
        .filter(|_| page.more_before)
        .map(|first| tasks_link(params, sort, Some(("before", cursor(first)))));
    let next = listing
        .tasks
        .last()
        .filter(|_| page.more_after)
        .map(|last| tasks_link(params, sort, Some(("after", cursor(last)))));
    html! {
        nav.paging aria-label="Pages of tasks" {
            span { (shown) " shown of " (page.total) " tasks" }
            @if let Some(previous) = previous {
                a href=(tasks_link(params, sort, None)) { "First page" }
                a href=(previous) rel="prev" { "Previous page" }
            }
            @if let Some(next) = next {
                a href=(next) rel="next" { "Next page" }
            }
        }
    }
}
