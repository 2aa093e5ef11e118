//! Pause, resume or trigger of many tasks from the tasks page: the rows checked, or every task
//! matching the page's filters. The listing's form asks (`GET /console/tasks/bulk`, a page that
//! says what will happen to which tasks); only its confirmation (`POST`) changes anything.

use actix_web::http::StatusCode;
use actix_web::{web, HttpRequest, HttpResponse};
use maud::{html, Markup};

use crate::api::validate;
use crate::console::filters::{self, Params, TASK_FILTERS};
use crate::console::layout::{page, Notice, Section};
use crate::console::paths::task_href;
use crate::console::session::{csrf_field, Submitted, Visitor};
use crate::console::{admins_only, html as respond, ok, see_other, ConsoleError};
use crate::error::ApiError;
use crate::web::ApiState;
use ax_core::run::TaskId;

/// What the buttons under the task table do to the selected tasks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Bulk {
    Pause,
    Resume,
    Trigger,
}

impl Bulk {
    fn parse(text: Option<&str>) -> Result<Bulk, ApiError> {
        match text {
            Some("pause") => Ok(Bulk::Pause),
            Some("resume") => Ok(Bulk::Resume),
            Some("trigger") => Ok(Bulk::Trigger),
            _ => Err(ApiError::invalid(
                "action",
                "action must be pause, resume or trigger",
            )),
        }
    }

    fn as_str(self) -> &'static str {
        match self {
            Bulk::Pause => "pause",
            Bulk::Resume => "resume",
            Bulk::Trigger => "trigger",
        }
    }

    fn verb(self) -> &'static str {
        match self {
            Bulk::Pause => "Pause",
            Bulk::Resume => "Resume",
            Bulk::Trigger => "Trigger",
        }
    }

    /// What it does to each task, as the confirmation says it.
    fn change(self) -> &'static str {
        match self {
            Bulk::Pause => "stops firing on every ax process until it is resumed",
            Bulk::Resume => {
                "fires again from its next time after now (a task of a paused scene waits for its scene)"
            }
            Bulk::Trigger => "gets one manual run now, with its own params",
        }
    }
}

/// Most tasks checked one by one: a page of the listing.
const MAX_SELECTED: usize = filters::PAGE_SIZE as usize;

/// Most tasks "all matching" acts on at once: each is its own change, with its own audit entry.
pub const MAX_MATCHING: usize = 1000;

/// Most names the confirmation lists.
const NAMES_SHOWN: usize = 20;

/// Which tasks an action is asked for: the rows checked, or every task matching the filters.
enum Selection {
    Checked(Vec<TaskId>),
    Matching(Params),
}

impl Selection {
    /// `id`… or `all=1` with the filters, from a form's fields.
    fn read<'f>(
        mut get: impl FnMut(&str) -> Option<String>,
        ids: impl Iterator<Item = &'f str>,
    ) -> Result<Selection, ApiError> {
        if get("all").as_deref() == Some("1") {
            let filters = TASK_FILTERS
                .iter()
                .filter_map(|name| get(name).map(|value| (name.to_string(), value)))
                .collect();
            return Ok(Selection::Matching(filters));
        }
        let mut ids = ids
            .flat_map(|ids| ids.split(','))
            .map(|id| validate::task_id(id.trim()))
            .collect::<Result<Vec<TaskId>, ApiError>>()?;
        ids.sort_unstable();
        ids.dedup();
        if ids.len() > MAX_SELECTED {
            let message = format!("select at most {MAX_SELECTED} tasks");
            return Err(ApiError::invalid("id", message));
        }
        Ok(Selection::Checked(ids))
    }

    /// The tasks' ids, at most one more than [`MAX_MATCHING`] (too many to act on).
    async fn resolve(&self, state: &ApiState) -> Result<Vec<TaskId>, ConsoleError> {
        match self {
            Selection::Checked(ids) => Ok(ids.clone()),
            Selection::Matching(params) => {
                let filter = filters::task_filter(params)
                    .map_err(|error| ApiError::invalid(error.field, error.message))?;
                let limit = MAX_MATCHING as i64 + 1;
                Ok(state.service.matching_tasks(filter, limit).await?)
            }
        }
    }

    /// The hidden fields that carry it to the confirmed form.
    fn fields(&self) -> Markup {
        html! {
            @match self {
                Selection::Checked(ids) => {
                    @for id in ids { input type="hidden" name="id" value=(id); }
                }
                Selection::Matching(params) => {
                    input type="hidden" name="all" value="1";
                    @for (name, value) in params { input type="hidden" name=(name) value=(value); }
                }
            }
        }
    }
}

/// The listing's table in a form that asks for a bulk action on its checked rows (a GET: the
/// confirmation changes nothing), with the bar of actions that sticks to the bottom of the
/// window while rows are checked, and (with the script) the choice of every matching task.
pub(super) fn selection_form(
    req: &HttpRequest,
    params: &Params,
    total: i64,
    table: Markup,
) -> Markup {
    html! {
        form #bulk method="get" action="/console/tasks/bulk" {
            input type="hidden" name="back" value=(req.uri().to_string());
            @for name in TASK_FILTERS {
                @if let Some(value) = params.get(*name) {
                    input type="hidden" name=(name) value=(value);
                }
            }
            // Enabled by the script when every matching task is chosen.
            input #all-matching type="hidden" name="all" value="1" disabled;
            (table)
            div.actions.bulk-bar role="group" aria-label="Selected tasks" {
                span #selected-count aria-live="polite" {}
                button #select-matching type="button" hidden data-total=(total) {
                    "Select all " (total) " matching"
                }
                button type="submit" name="action" value="pause" { "Pause selected" }
                button type="submit" name="action" value="resume" { "Resume selected" }
                button type="submit" name="action" value="trigger" { "Trigger selected" }
            }
        }
    }
}

/// `GET /console/tasks/bulk?action=&id=…&back=` (or `all=1` and the filters): says what the
/// action does to how many tasks, which, and asks; with nothing selected, back to the listing
/// with a notice.
pub async fn confirm(
    state: web::Data<ApiState>,
    visitor: Visitor,
    req: HttpRequest,
) -> Result<HttpResponse, ConsoleError> {
    admins_only(&visitor)?;
    let params = filters::params(&req);
    let get = |name: &str| params.get(name).cloned();
    let action = Bulk::parse(params.get("action").map(String::as_str))?;
    let back = back_path(params.get("back").map(String::as_str));
    let selection = Selection::read(get, params.get("id").map(String::as_str).into_iter())?;
    let ids = selection.resolve(&state).await?;
    if ids.is_empty() {
        return Ok(see_other(&with_notice(&back, Notice::NothingSelected)));
    }
    if ids.len() > MAX_MATCHING {
        return Ok(respond(
            StatusCode::BAD_REQUEST,
            too_many_page(&visitor, action, &back),
        ));
    }
    let shown: Vec<TaskId> = ids.iter().take(NAMES_SHOWN).copied().collect();
    let names = state.service.task_names(shown.clone()).await?;
    let named: Vec<(TaskId, &str)> = shown
        .iter()
        .filter_map(|id| names.get(id).map(|name| (*id, name.as_str())))
        .collect();
    let asked = Asked {
        action,
        selection: &selection,
        count: ids.len(),
        named: &named,
        back: &back,
    };
    Ok(ok(confirm_page(&visitor, &asked)))
}

/// What a confirmation page asks.
struct Asked<'a> {
    action: Bulk,
    selection: &'a Selection,
    count: usize,
    /// The first tasks' ids and names.
    named: &'a [(TaskId, &'a str)],
    back: &'a str,
}

fn tasks_text(n: usize) -> String {
    match n {
        1 => "1 task".to_string(),
        n => format!("{n} tasks"),
    }
}

fn confirm_page(visitor: &Visitor, asked: &Asked) -> Markup {
    let Asked {
        action,
        count,
        named,
        back,
        ..
    } = *asked;
    let what = match asked.selection {
        Selection::Checked(_) => "selected",
        Selection::Matching(_) => "matching the filters",
    };
    page(
        visitor,
        &format!("{} {}?", action.verb(), tasks_text(count)),
        Some(Section::Tasks),
        html! {
            p role="note" {
                strong.count { (count) } " " (if count == 1 { "task" } else { "tasks" }) " " (what) ": each "
                (action.change()) "."
            }
            ul.names {
                @for (id, name) in named {
                    li { a href=(task_href(*id)) { (name) } }
                }
                @if count > named.len() {
                    li.muted { "and " (count - named.len()) " more" }
                }
            }
            div.actions {
                form.inline method="post" action="/console/tasks/bulk" {
                    (csrf_field(visitor))
                    input type="hidden" name="action" value=(action.as_str());
                    input type="hidden" name="back" value=(back);
                    (asked.selection.fields())
                    button type="submit" { (action.verb()) " " (tasks_text(count)) }
                }
                a href=(back) { "Cancel" }
            }
        },
    )
}

fn too_many_page(visitor: &Visitor, action: Bulk, back: &str) -> Markup {
    page(
        visitor,
        &format!("{} too many tasks", action.verb()),
        Some(Section::Tasks),
        html! {
            p.error role="alert" {
                "More than " (MAX_MATCHING) " tasks match these filters: at most " (MAX_MATCHING)
                " are changed at once. Narrow the filters (a scene, a status, a name) and try again."
            }
            p { a href=(back) { "Back to the tasks" } }
        },
    )
}

/// `POST /console/tasks/bulk` (`action`, `id`… or `all=1` with the filters, `back`): pauses,
/// resumes or triggers each task through the API's own calls, then goes back to the listing.
pub async fn apply(
    state: web::Data<ApiState>,
    visitor: Visitor,
    form: Submitted,
) -> Result<HttpResponse, ConsoleError> {
    let action = Bulk::parse(form.get("action"))?;
    let back = back_path(form.get("back"));
    let selection = Selection::read(|name| form.get(name).map(str::to_string), form.all("id"))?;
    let ids = selection.resolve(&state).await?;
    if ids.is_empty() {
        return Ok(see_other(&with_notice(&back, Notice::NothingSelected)));
    }
    if ids.len() > MAX_MATCHING {
        let message = format!("more than {MAX_MATCHING} tasks match: narrow the filters");
        return Err(ApiError::invalid("all", message).into());
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
    Ok(see_other(&with_notice(&back, notice)))
}

/// The listing a form came from (its `back`, a tasks page only), without an earlier notice.
fn back_path(back: Option<&str>) -> String {
    let back = back
        .filter(|back| back.starts_with("/console/tasks") && !back.contains("//"))
        .unwrap_or("/console/tasks");
    let (path, query) = back.split_once('?').unwrap_or((back, ""));
    let kept: Vec<(String, String)> = url::form_urlencoded::parse(query.as_bytes())
        .into_owned()
        .filter(|(key, _)| key != "done" && key != "n")
        .collect();
    let mut to = url::form_urlencoded::Serializer::new(String::new());
    to.extend_pairs(kept);
    match to.finish() {
        query if query.is_empty() => path.to_string(),
        query => format!("{path}?{query}"),
    }
}

/// `back` telling `notice`.
fn with_notice(back: &str, notice: Notice) -> String {
    let separator = if back.contains('?') { "&" } else { "?" };
    format!("{back}{separator}{}", notice.query())
}
