//! `GET /api/schedule/load`: the schedule ahead across all tasks.

use std::collections::HashMap;

use actix_web::{web, HttpResponse};
use serde::Serialize;

use super::validate;
use crate::error::ApiError;
use crate::web::ApiState;
use ax_core::run::TaskId;
use ax_core::task::schedule_load::{Busy, Load};
use ax_core::time::clock::rfc3339_serde;

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct LoadView {
    #[serde(serialize_with = "rfc3339_serde")]
    from: chrono::DateTime<chrono::Utc>,
    #[serde(serialize_with = "rfc3339_serde")]
    to: chrono::DateTime<chrono::Utc>,
    tasks: usize,
    total_runs: u64,
    busiest: Vec<BusyView>,
    per_minute: Vec<u64>,
    /// Percent of the tasks firing in the busiest second.
    busiest_share: Option<f64>,
    suggestion: Option<String>,
}

#[derive(Serialize)]
struct BusyView {
    #[serde(serialize_with = "rfc3339_serde")]
    at: chrono::DateTime<chrono::Utc>,
    runs: u64,
    tasks: Vec<TaskId>,
}

impl From<Load> for LoadView {
    fn from(load: Load) -> Self {
        LoadView {
            busiest_share: load
                .busiest_share()
                .map(|share| (share * 10.0).round() / 10.0),
            from: load.from,
            to: load.to,
            tasks: load.tasks,
            total_runs: load.total_runs,
            busiest: load
                .busiest
                .into_iter()
                .map(|Busy { at, runs, tasks }| BusyView { at, runs, tasks })
                .collect(),
            per_minute: load.per_minute,
            suggestion: load.suggestion,
        }
    }
}

/// `GET /api/schedule/load?hours=`.
pub async fn load(
    state: web::Data<ApiState>,
    query: web::Query<HashMap<String, String>>,
) -> Result<HttpResponse, ApiError> {
    let hours = validate::schedule_hours(&query)?;
    let load = state.service.schedule_load(hours).await?;
    Ok(HttpResponse::Ok().json(LoadView::from(load)))
}
