//! A task's actions from its page: pause, resume, trigger with params, backfill, delete after
//! a confirmation.

use actix_web::{web, HttpResponse};
use maud::html;

use super::links::parse_task_id;
use super::page::{refused, Forms};
use crate::api::validate;
use crate::console::layout::{notice_link, page, Notice, Section};
use crate::console::paths::task_href;
use crate::console::session::{csrf_field, Submitted, Visitor};
use crate::console::{admins_only, ok, runs, see_other, ConsoleError};
use crate::error::ApiError;
use crate::web::ApiState;
use ax_store::queries::tasks::Versions;

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
