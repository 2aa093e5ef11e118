//! `/api/tasks`: create, list, read, replace, delete, pause, resume and trigger tasks.

use std::collections::HashMap;

use actix_web::{web, HttpResponse};
use serde_json::Value;

use super::json::JsonBody;
use super::validate;
use super::views::{InstanceView, PageView, StatsView, TaskView};
use super::{Actor, ApiState};
use crate::error::ApiError;
use crate::run::TaskId;
use crate::store::models::TaskStatus;
use crate::store::queries::tasks::TaskFilter;

/// `POST /api/tasks` → 201 with the task.
pub async fn create(
    state: web::Data<ApiState>,
    actor: Actor,
    body: JsonBody,
) -> Result<HttpResponse, ApiError> {
    let input = validate::task_input(body.0, &state.security.allowlist)?;
    let task = state.service.create_task(input, &actor.0).await?;
    Ok(HttpResponse::Created().json(TaskView::from(task)))
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

/// `GET /api/tasks?scene=&status=&limit=&offset=`.
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
    let filter = TaskFilter {
        scene: query.get("scene").cloned(),
        status,
        name_like: None,
        after: None,
    };
    let (tasks, total) = state.service.tasks(filter, page).await?;
    Ok(HttpResponse::Ok().json(PageView {
        items: tasks.into_iter().map(TaskView::from).collect(),
        total,
        limit: page.limit,
        offset: page.offset,
    }))
}

/// `GET /api/tasks/{id}`.
pub async fn get(
    state: web::Data<ApiState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let task = state.service.task(validate::task_id(&path)?).await?;
    Ok(HttpResponse::Ok().json(TaskView::from(task)))
}

/// `PUT /api/tasks/{id}`: replaces the task's definition; its next run is computed anew.
pub async fn update(
    state: web::Data<ApiState>,
    actor: Actor,
    path: web::Path<String>,
    body: JsonBody,
) -> Result<HttpResponse, ApiError> {
    replace(&state, &actor, validate::task_id(&path)?, body.0).await
}

/// Replaces task `id` with the definition in `body`, checked as a whole.
async fn replace(
    state: &ApiState,
    actor: &Actor,
    id: TaskId,
    body: Value,
) -> Result<HttpResponse, ApiError> {
    let input = validate::task_input(body, &state.security.allowlist)?;
    let task = state.service.update_task(id, input, &actor.0).await?;
    Ok(HttpResponse::Ok().json(TaskView::from(task)))
}

/// `PATCH /api/tasks/{id}`: merges the body into the task as a JSON merge patch (RFC 7386):
/// the fields given change, `null` resets one to its default, the others stay; the result is
/// checked as a whole, like a `PUT`.
pub async fn patch(
    state: web::Data<ApiState>,
    actor: Actor,
    path: web::Path<String>,
    body: JsonBody,
) -> Result<HttpResponse, ApiError> {
    let id = validate::task_id(&path)?;
    let patch = body.0;
    if !patch.is_object() {
        return Err(ApiError::Invalid {
            field: None,
            message: "a merge patch of a task must be a JSON object".into(),
        });
    }
    let current =
        serde_json::to_value(TaskView::from(state.service.task(id).await?)).map_err(|err| {
            ApiError::Invalid {
                field: None,
                message: format!("the task could not be read: {err}"),
            }
        })?;
    replace(
        &state,
        &actor,
        id,
        validate::merge_patch(validate::task_body(current), patch),
    )
    .await
}

/// `DELETE /api/tasks/{id}` → 204; the task's run history stays.
pub async fn delete(
    state: web::Data<ApiState>,
    actor: Actor,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    state
        .service
        .delete_task(validate::task_id(&path)?, &actor.0)
        .await?;
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
    Ok(HttpResponse::Ok().json(TaskView::from(task)))
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
    Ok(HttpResponse::Ok().json(TaskView::from(task)))
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
    Ok(HttpResponse::Created().json(InstanceView::from(run)))
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
