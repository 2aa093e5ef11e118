//! `/api/tasks`: create, list, read, replace, delete, pause, resume and trigger tasks.

use ax_core::ids::SceneName;
use std::collections::HashMap;

use actix_web::http::header;
use actix_web::{web, HttpRequest, HttpResponse, HttpResponseBuilder};

use super::json::JsonBody;
use super::validate;
use super::views::{PageView, RunView, StatsView, TaskView};
use super::{Actor, ApiState};
use crate::error::ApiError;
use crate::service::error::ServiceError;
use crate::service::etag::{self, etag};
use crate::service::task_details::TaskDetails;
use ax_core::task::labels;
use ax_store::queries::tasks::{TaskFilter, Versions};
use ax_store::rows::models::TaskStatus;

/// How often a `PATCH` without `If-Match` is merged again onto a task that changed meanwhile.
const PATCH_TRIES: usize = 5;

/// A task as a reply, its version as the `ETag`.
fn task_reply(mut reply: HttpResponseBuilder, details: TaskDetails) -> HttpResponse {
    reply
        .insert_header((header::ETAG, etag(details.task.version)))
        .json(TaskView::from(details))
}

/// The versions a change applies to, from its `If-Match` header (any without one).
fn if_match(req: &HttpRequest) -> Result<Versions, ApiError> {
    let invalid = |message: String| ApiError::invalid("If-Match", message);
    let values = req
        .headers()
        .get_all(header::IF_MATCH)
        .map(|value| {
            value
                .to_str()
                .map_err(|_| invalid("If-Match must be ASCII".into()))
        })
        .collect::<Result<Vec<&str>, ApiError>>()?;
    etag::if_match(&values).map_err(|err| invalid(err.to_string()))
}

/// `POST /api/tasks` → 201 with the task.
pub async fn create(
    state: web::Data<ApiState>,
    actor: Actor,
    body: JsonBody,
) -> Result<HttpResponse, ApiError> {
    let input = validate::task_input(body.0, &state.security.allowlist)?;
    let task = state.service.create_task(input, &actor.0).await?;
    Ok(task_reply(HttpResponse::Created(), task))
}

/// `POST /api/tasks/bulk` `{"items": [task bodies], "upsert": bool}` → 200 `{created, updated,
/// unchanged}`: all the tasks or none (an error names its item, `items[17].cron`); with
/// `upsert`, a task whose scene and name exist replaces that task.
pub async fn bulk(
    state: web::Data<ApiState>,
    actor: Actor,
    body: web::Payload,
) -> Result<HttpResponse, ApiError> {
    let body = super::body_within_limit(body, super::MAX_BULK_BODY_BYTES).await?;
    let (inputs, upsert) = validate::bulk(&body, &state.security.allowlist)?;
    let registered = state
        .service
        .register_tasks(inputs, upsert, &actor.0)
        .await?;
    Ok(HttpResponse::Ok().json(registered))
}

/// `GET /api/tasks?scene=&status=&label=KEY=VALUE&name=&limit=&offset=`; `name` is exact (the
/// CLI names a task `scene/name` and finds it with one request).
pub async fn list(
    state: web::Data<ApiState>,
    query: web::Query<HashMap<String, String>>,
) -> Result<HttpResponse, ApiError> {
    let page = validate::page(&query)?;
    let status = match query.get("status") {
        None => None,
        Some(text) => Some(
            TaskStatus::parse(text)
                .ok_or_else(|| ApiError::invalid("status", "status must be ENABLED or PAUSED"))?,
        ),
    };
    let label = query
        .get("label")
        .map(|text| labels::filter(text))
        .transpose()
        .map_err(|message| ApiError::invalid("label", message))?;
    let name = query.get("name");
    let filter = TaskFilter {
        scene: query.get("scene").cloned().map(SceneName::from),
        status,
        name_like: name.map(|name| validate::exact_like(name)),
        label,
    };
    let (mut tasks, mut total) = state.service.tasks(filter, page).await?;
    if let Some(name) = name {
        // `LIKE` ignores ASCII case on SQLite: names compare exactly.
        let before = tasks.len();
        tasks.retain(|details| details.task.name == *name);
        total -= (before - tasks.len()) as i64;
    }
    Ok(HttpResponse::Ok().json(PageView {
        items: tasks.into_iter().map(TaskView::from).collect(),
        total,
        limit: page.limit,
        offset: page.offset,
    }))
}

/// `GET /api/tasks/{id}`, its version as the `ETag`.
pub async fn get(
    state: web::Data<ApiState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let task = state.service.task(validate::task_id(&path)?).await?;
    Ok(task_reply(HttpResponse::Ok(), task))
}

/// `PUT /api/tasks/{id}`: replaces the task's definition (with `If-Match`, only at a version it
/// names, else 412); its next run is computed anew.
pub async fn update(
    state: web::Data<ApiState>,
    actor: Actor,
    req: HttpRequest,
    path: web::Path<String>,
    body: JsonBody,
) -> Result<HttpResponse, ApiError> {
    let id = validate::task_id(&path)?;
    let versions = if_match(&req)?;
    let input = validate::task_input(body.0, &state.security.allowlist)?;
    let task = state
        .service
        .update_task(id, versions, input, &actor.0)
        .await?;
    Ok(task_reply(HttpResponse::Ok(), task))
}

/// `PATCH /api/tasks/{id}`: merges the body into the task as a JSON merge patch (RFC 7386):
/// the fields given change, `null` resets one to its default, the others stay; the result is
/// checked as a whole, like a `PUT`. The merge is written only onto the version it was made
/// on: with `If-Match`, a task at another version is a 412; without, a task that changed
/// meanwhile is merged onto again, so no concurrent change is lost.
pub async fn patch(
    state: web::Data<ApiState>,
    actor: Actor,
    req: HttpRequest,
    path: web::Path<String>,
    body: JsonBody,
) -> Result<HttpResponse, ApiError> {
    let id = validate::task_id(&path)?;
    let asked = if_match(&req)?;
    let patch = body.0;
    if !patch.is_object() {
        return Err(ApiError::invalid_body(
            "a merge patch of a task must be a JSON object",
        ));
    }
    for _ in 0..PATCH_TRIES {
        let current = state.service.task(id).await?;
        let version = current.task.version;
        if !asked.allows(version) {
            return Err(ServiceError::Stale(Box::new(current)).into());
        }
        let view = serde_json::to_value(TaskView::from(current))
            .map_err(|err| ApiError::invalid_body(format!("the task could not be read: {err}")))?;
        let merged = validate::merge_patch(validate::task_body(view), patch.clone());
        let input = validate::task_input(merged, &state.security.allowlist)?;
        let on = Versions::OneOf(vec![version]);
        match state.service.update_task(id, on, input, &actor.0).await {
            Ok(task) => return Ok(task_reply(HttpResponse::Ok(), task)),
            Err(ServiceError::Stale(_)) if asked == Versions::Any => continue,
            Err(err) => return Err(err.into()),
        }
    }
    Err(ApiError::Conflict {
        field: None,
        message: format!(
            "task {id} changed {PATCH_TRIES} times while this patch was merged onto it; \
             nothing was changed: send it again"
        ),
    })
}

/// `DELETE /api/tasks/{id}` → 204 (with `If-Match`, only at a version it names, else 412); the
/// task's run history stays.
pub async fn delete(
    state: web::Data<ApiState>,
    actor: Actor,
    req: HttpRequest,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let id = validate::task_id(&path)?;
    let versions = if_match(&req)?;
    state.service.delete_task(id, versions, &actor.0).await?;
    Ok(HttpResponse::NoContent().finish())
}

/// `POST /api/tasks/{id}/pause`: the task fires no more until resumed.
pub async fn pause(
    state: web::Data<ApiState>,
    actor: Actor,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let task = state
        .service
        .pause_task(validate::task_id(&path)?, &actor.0)
        .await?;
    Ok(task_reply(HttpResponse::Ok(), task))
}

/// `POST /api/tasks/{id}/resume`: the next run is computed from now.
pub async fn resume(
    state: web::Data<ApiState>,
    actor: Actor,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let task = state
        .service
        .resume_task(validate::task_id(&path)?, &actor.0)
        .await?;
    Ok(task_reply(HttpResponse::Ok(), task))
}

/// `POST /api/tasks/{id}/trigger` (body optional: `{"params": {…}}`) → 201 with the new run.
pub async fn trigger(
    state: web::Data<ApiState>,
    actor: Actor,
    path: web::Path<String>,
    body: web::Payload,
) -> Result<HttpResponse, ApiError> {
    let id = validate::task_id(&path)?;
    let body = super::body_within_limit(body, super::MAX_BODY_BYTES).await?;
    let params = validate::trigger_params(&body)?;
    let run = state.service.trigger(id, params, &actor.0).await?;
    Ok(HttpResponse::Created().json(RunView::from(run)))
}

/// `POST /api/tasks/{id}/backfill` with `{"from", "to"}`: 202 `{"runs": n, "existing": k}`.
pub async fn backfill(
    state: web::Data<ApiState>,
    actor: Actor,
    path: web::Path<String>,
    body: web::Payload,
) -> Result<HttpResponse, ApiError> {
    let id = validate::task_id(&path)?;
    let body = super::body_within_limit(body, super::MAX_BODY_BYTES).await?;
    let (from, to) = validate::backfill_range(&body)?;
    let done = state.service.backfill(id, from, to, &actor.0).await?;
    Ok(HttpResponse::Accepted().json(serde_json::json!({
        "runs": done.runs,
        "existing": done.existing,
    })))
}

/// `GET /api/tasks/{id}/stats?windowSecs=`: counts by status and trigger-lag percentiles of
/// the runs scheduled in the window (default one day).
pub async fn stats(
    state: web::Data<ApiState>,
    path: web::Path<String>,
    query: web::Query<HashMap<String, String>>,
) -> Result<HttpResponse, ApiError> {
    let id = validate::task_id(&path)?;
    let window = validate::stats_window(&query)?;
    let stats = state.service.task_stats(id, window).await?;
    Ok(HttpResponse::Ok().json(StatsView::new(id, stats)))
}
