//! Run history: all runs with filters, a task's runs, and one run by request id.

use std::collections::HashMap;

use actix_web::{web, HttpResponse};

use super::validate;
use super::views::{HistoryView, PageView, RunDetailView, RunView};
use super::{Actor, ApiState};
use crate::error::ApiError;

/// `GET /api/instances?taskId=&scene=&status=&from=&to=&limit=&cursor=`: newest scheduled
/// first; `nextCursor` fetches the next page. `?requestIdPrefix=&limit=`: the runs whose
/// request id starts with it, the latest made first, in one page.
pub async fn history(
    state: web::Data<ApiState>,
    query: web::Query<HashMap<String, String>>,
) -> Result<HttpResponse, ApiError> {
    if let Some((prefix, limit)) = validate::prefix_query(&query)? {
        let runs = state.service.runs_by_prefix(prefix, limit).await?;
        return Ok(HttpResponse::Ok().json(HistoryView {
            items: runs.into_iter().map(RunView::from).collect(),
            next_cursor: None,
        }));
    }
    let (filter, cursor, limit) = validate::history_query(&query)?;
    let (runs, next) = state.service.history(filter, cursor, limit).await?;
    Ok(HttpResponse::Ok().json(HistoryView {
        items: runs.into_iter().map(RunView::from).collect(),
        next_cursor: next.map(validate::encode_cursor),
    }))
}

/// `GET /api/tasks/{id}/instances?limit=&offset=`: newest scheduled first.
pub async fn for_task(
    state: web::Data<ApiState>,
    path: web::Path<String>,
    query: web::Query<HashMap<String, String>>,
) -> Result<HttpResponse, ApiError> {
    let id = validate::task_id(&path)?;
    let page = validate::page(&query)?;
    let (runs, total) = state.service.task_runs(id, page).await?;
    Ok(HttpResponse::Ok().json(PageView {
        items: runs.into_iter().map(RunView::from).collect(),
        total,
        limit: page.limit,
        offset: page.offset,
    }))
}

/// `GET /api/instances/{requestId}`.
pub async fn get(
    state: web::Data<ApiState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let request_id = validate::request_id(&path, "requestId")?;
    let run = state
        .service
        .instance(request_id.clone())
        .await?
        .ok_or_else(|| ApiError::NotFound(format!("no run with requestId {request_id}")))?;
    let (attempts, shards) = futures_util::join!(
        state.service.attempts(request_id),
        state.service.shards(&run)
    );
    Ok(HttpResponse::Ok().json(RunDetailView::new(run, attempts?, shards?)))
}

/// `POST /api/instances/{requestId}/cancel`: the run, CANCELLED; 409 if it is final already.
pub async fn cancel(
    state: web::Data<ApiState>,
    actor: Actor,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let request_id = validate::request_id(&path, "requestId")?;
    let run = state.service.cancel(request_id, &actor.0).await?;
    Ok(HttpResponse::Ok().json(RunView::from(run)))
}
