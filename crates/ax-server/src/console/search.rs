//! The search (`/console/search?q=`), whose box heads every page: a whole request id opens its
//! run, the start of one (six hex digits or more) lists the runs it names, and any text lists
//! the tasks whose `scene/name` contains it (see `ax_core::task::search`).

use actix_web::http::StatusCode;
use actix_web::{web, HttpRequest, HttpResponse};
use maud::{html, Markup};

use super::filters::{self, link, FilterError, Params, PAGE_SIZE};
use super::layout::{self, maybe_time, page, scrolling, task_state};
use super::paths::{task_href, SEARCH};
use super::runs::{run_href, run_table, task_ids};
use super::session::Visitor;
use super::{html as respond, ok, see_other, ConsoleError};
use crate::service::task_details::TaskDetails;
use crate::web::ApiState;
use ax_core::run::RequestIdPrefix;
use ax_core::task::search::{Search, MAX_QUERY_CHARS};
use ax_store::rows::models::Run;

/// What a search found.
enum Found {
    /// Nothing was asked.
    Nothing,
    /// No run has this request id.
    NoRun(String),
    /// The runs a prefix names (one more than shown when there are more), and the tasks.
    Runs {
        prefix: RequestIdPrefix,
        runs: Vec<Run>,
        names: std::collections::HashMap<ax_core::run::TaskId, String>,
        tasks: Vec<TaskDetails>,
    },
    /// The tasks text names (one more than shown when there are more).
    Tasks(Vec<TaskDetails>),
}

/// `GET /console/search?q=`.
pub async fn show(
    state: web::Data<ApiState>,
    visitor: Visitor,
    req: HttpRequest,
) -> Result<HttpResponse, ConsoleError> {
    let params = filters::params(&req);
    let typed = params.get("q").map(String::as_str).unwrap_or_default();
    if typed.chars().count() > MAX_QUERY_CHARS {
        let error = FilterError {
            field: "q",
            message: format!("a search has at most {MAX_QUERY_CHARS} characters"),
        };
        let page = search_page(&visitor, &params, Some(&error), &Found::Nothing);
        return Ok(respond(StatusCode::BAD_REQUEST, page));
    }
    let service = &state.service;
    let found = match Search::of(typed) {
        Search::Nothing => Found::Nothing,
        Search::Run(id) => match service.instance(id.clone()).await? {
            Some(run) => return Ok(see_other(&run_href(&run))),
            None => Found::NoRun(id.to_string()),
        },
        Search::RunPrefix(prefix) => {
            let (runs, tasks) = futures_util::join!(
                service.runs_by_prefix(prefix.clone(), PAGE_SIZE + 1),
                service.tasks_containing(typed, PAGE_SIZE + 1),
            );
            let runs = runs?;
            let names = service.task_names(task_ids(&runs)).await?;
            Found::Runs {
                prefix,
                runs,
                names,
                tasks: tasks?,
            }
        }
        Search::Text => Found::Tasks(service.tasks_containing(typed, PAGE_SIZE + 1).await?),
    };
    Ok(ok(search_page(&visitor, &params, None, &found)))
}

fn search_page(
    visitor: &Visitor,
    params: &Params,
    error: Option<&FilterError>,
    found: &Found,
) -> Markup {
    let typed = params.get("q").map(String::as_str).unwrap_or_default();
    page(
        visitor,
        "Search",
        None,
        html! {
            form.filters method="get" action=(SEARCH) role="search" {
                (layout::input("q", "Request id, its first 6 characters or more, or text in a task's scene/name", "search", Some(typed).filter(|q| !q.is_empty()), filters::error_for(error, "q")))
                div.field { button type="submit" { "Search" } }
            }
            @match found {
                Found::Nothing => {
                    p.muted { "A whole request id opens its run; its start (6 hex digits or more, dashes or not) lists the runs it names; other text lists the tasks whose scene/name contains it." }
                }
                Found::NoRun(id) => {
                    p #no-run role="status" { "No run has request id " code { (id) } "." }
                }
                Found::Runs { prefix, runs, names, tasks } => {
                    section aria-labelledby="runs-found" {
                        h2 #runs-found { "Runs whose request id starts with " code { (prefix) } }
                        @if runs.is_empty() {
                            p.muted { "None." }
                        } @else {
                            (run_table(&runs[..runs.len().min(PAGE_SIZE as usize)], Some(names)))
                            @if runs.len() as i64 > PAGE_SIZE {
                                p.muted { "More than " (PAGE_SIZE) " runs: the latest made are shown. Give more of the request id." }
                            }
                        }
                    }
                    @if !tasks.is_empty() {
                        (task_results(typed, tasks))
                    }
                }
                Found::Tasks(tasks) => (task_results(typed, tasks)),
            }
        },
    )
}

/// The tasks a text names, by scene and name.
fn task_results(typed: &str, tasks: &[TaskDetails]) -> Markup {
    let shown = &tasks[..tasks.len().min(PAGE_SIZE as usize)];
    html! {
        section aria-labelledby="tasks-found" {
            h2 #tasks-found { "Tasks whose scene/name contains “" (typed.trim()) "”" }
            @if shown.is_empty() {
                p.muted { "None." }
            } @else {
                (scrolling("Tasks found", html! {
                    table #tasks-found-table {
                        thead {
                            tr {
                                th scope="col" { "Task" }
                                th scope="col" { "Status" }
                                th scope="col" { "Cron" }
                                th scope="col" { "Next run" }
                            }
                        }
                        tbody {
                            @for details in shown {
                                @let task = &details.task;
                                tr {
                                    td { a href=(task_href(task.id)) { (task.scene) "/" (task.name) } }
                                    td { (task_state(task.status, details.scene_paused)) }
                                    td { code { (task.cron) } }
                                    td { (maybe_time(task.next_run_at)) }
                                }
                            }
                        }
                    }
                }))
                @if tasks.len() as i64 > PAGE_SIZE {
                    p.muted {
                        "More than " (PAGE_SIZE) " tasks: the first by scene and name are shown. Type more, or "
                        a href=(link("/console/tasks", &[("q", Some(typed.trim()))])) { "search the tasks page by name" } "."
                    }
                }
            }
        }
    }
}
