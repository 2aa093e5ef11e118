//! `/api/calendars`: named sets of days off that tasks' schedules leave out or move from,
//! shared by every ax process of the cluster.

use actix_web::{web, HttpResponse};
use serde::Serialize;
use serde_json::json;

use super::json::JsonBody;
use super::{Actor, ApiState};
use crate::error::ApiError;
use crate::service::calendars::CalendarUse;
use ax_core::calendar::{self, Calendar};
use ax_core::ids::CalendarName;
use ax_core::time::clock::rfc3339;
use ax_store::from_db;
use ax_store::queries::calendars::{CalendarRow, TaskUsing};

/// A calendar as the API shows it: its days as written, and how many tasks name it.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CalendarView {
    name: CalendarName,
    #[serde(flatten)]
    calendar: Calendar,
    task_count: i64,
    updated_at: String,
    /// The first tasks naming it (one calendar's read only).
    #[serde(skip_serializing_if = "Option::is_none")]
    tasks: Option<Vec<TaskUsing>>,
}

impl CalendarView {
    fn new(row: CalendarRow, task_count: i64, tasks: Option<Vec<TaskUsing>>) -> Self {
        CalendarView {
            updated_at: rfc3339(from_db(row.updated_at)),
            name: row.name,
            calendar: row.calendar,
            task_count,
            tasks,
        }
    }
}

impl From<CalendarUse> for CalendarView {
    fn from(used: CalendarUse) -> Self {
        CalendarView::new(used.row, used.tasks, None)
    }
}

/// A calendar's name from the path, or a 400 naming `name`.
fn name(path: web::Path<String>) -> Result<CalendarName, ApiError> {
    calendar::name(&path.into_inner()).map_err(|err| ApiError::invalid(err.field(), err.message()))
}

/// `GET /api/calendars`: every calendar, by name.
pub async fn list(state: web::Data<ApiState>) -> Result<HttpResponse, ApiError> {
    let items: Vec<CalendarView> = state
        .service
        .calendars()
        .await?
        .into_iter()
        .map(CalendarView::from)
        .collect();
    Ok(HttpResponse::Ok().json(json!({ "items": items })))
}

/// `GET /api/calendars/{name}`: one calendar, with the first tasks naming it.
pub async fn get(
    state: web::Data<ApiState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    Ok(HttpResponse::Ok().json(view(&state, name(path)?).await?))
}

async fn view(state: &ApiState, name: CalendarName) -> Result<CalendarView, ApiError> {
    let (row, tasks) = state.service.calendar(name).await?;
    let count = state.service.calendar_use_count(&row.name).await?;
    Ok(CalendarView::new(row, count, Some(tasks)))
}

/// `PUT /api/calendars/{name}` `{dates?, ranges?, weekdays?}` → 201 when created, 200 when
/// replaced, with the calendar; the tasks naming it move their next runs onto its new days.
pub async fn put(
    state: web::Data<ApiState>,
    actor: Actor,
    path: web::Path<String>,
    body: JsonBody,
) -> Result<HttpResponse, ApiError> {
    let name = name(path)?;
    let calendar = Calendar::from_json(&body.0)
        .map_err(|err| ApiError::invalid(err.field(), err.message()))?;
    let created = state
        .service
        .put_calendar(name.clone(), calendar, &actor.0)
        .await?;
    let view = view(&state, name).await?;
    Ok(match created {
        true => HttpResponse::Created().json(view),
        false => HttpResponse::Ok().json(view),
    })
}

/// `DELETE /api/calendars/{name}` → 204; 409 naming the tasks that use it.
pub async fn delete(
    state: web::Data<ApiState>,
    actor: Actor,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    state.service.delete_calendar(name(path)?, &actor.0).await?;
    Ok(HttpResponse::NoContent().finish())
}
