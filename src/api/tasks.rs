//! `/api/tasks`: create, list, read, replace and delete tasks.

use std::collections::HashMap;

use actix_web::{web, HttpResponse};
use serde_json::Value;

use super::validate;
use super::views::{PageView, TaskView};
use super::ApiState;
use crate::error::ApiError;
use crate::store::models::TaskStatus;
use crate::store::queries::tasks::TaskFilter;

fn no_task(id: i64) -> ApiError {
    ApiError::NotFound(format!("task {id} not found"))
}

/// `POST /api/tasks` → 201 with the task.
pub async fn create(
    state: web::Data<ApiState>,
    body: web::Json<Value>,
) -> Result<HttpResponse, ApiError> {
    let input = validate::task_input(body.into_inner())?;
    let task = state.scheduler.create_task(input).await?;
    Ok(HttpResponse::Created().json(TaskView::from(task)))
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
                .ok_or_else(|| ApiError::invalid("status", "status must be ENABLED or DISABLED"))?,
        ),
    };
    let filter = TaskFilter {
        scene: query.get("scene").cloned(),
        status,
    };
    let (tasks, total) = state.scheduler.tasks(filter, page).await?;
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
    let id = validate::task_id(&path)?;
    let task = state.scheduler.task(id).await?.ok_or_else(|| no_task(id))?;
    Ok(HttpResponse::Ok().json(TaskView::from(task)))
}

/// `PUT /api/tasks/{id}`: replaces the task's definition; its next run is computed anew.
pub async fn update(
    state: web::Data<ApiState>,
    path: web::Path<String>,
    body: web::Json<Value>,
) -> Result<HttpResponse, ApiError> {
    let id = validate::task_id(&path)?;
    let input = validate::task_input(body.into_inner())?;
    let task = state
        .scheduler
        .update_task(id, input)
        .await?
        .ok_or_else(|| no_task(id))?;
    Ok(HttpResponse::Ok().json(TaskView::from(task)))
}

/// `DELETE /api/tasks/{id}` → 204; the task's run history stays.
pub async fn delete(
    state: web::Data<ApiState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let id = validate::task_id(&path)?;
    if !state.scheduler.delete_task(id).await? {
        return Err(no_task(id));
    }
    Ok(HttpResponse::NoContent().finish())
}
