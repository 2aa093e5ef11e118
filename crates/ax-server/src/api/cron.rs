//! Cron previews: the next fire times of an expression in a zone, for a console or a client
//! checking an expression before it saves it.

use std::collections::HashMap;

use actix_web::{web, HttpResponse};
use chrono::SecondsFormat;
use serde::Serialize;

use super::validate;
use super::ApiState;
use crate::error::ApiError;
use ax_core::time::clock::rfc3339;
use ax_cron::Fire;

#[derive(Serialize)]
struct Preview {
    times: Vec<FireView>,
    description: String,
}

#[derive(Serialize)]
struct FireView {
    utc: String,
    local: String,
    /// Why the fire is not at the expression's own local time (a DST gap or overlap).
    note: Option<String>,
}

impl From<Fire> for FireView {
    fn from(fire: Fire) -> Self {
        FireView {
            utc: rfc3339(fire.utc),
            local: fire.local.to_rfc3339_opts(SecondsFormat::Millis, true),
            note: fire.note,
        }
    }
}

/// `GET /api/cron/next?expr=&tz=&from=&count=`: the next `count` (1-100, default 10) fire
/// times after `from` (default now), in UTC and local time, and the expression in English.
pub async fn next(
    state: web::Data<ApiState>,
    query: web::Query<HashMap<String, String>>,
) -> Result<HttpResponse, ApiError> {
    let (schedule, from, count) = validate::cron_preview(&query, state.service.now())?;
    Ok(HttpResponse::Ok().json(Preview {
        times: schedule
            .upcoming(from, count)
            .into_iter()
            .map(FireView::from)
            .collect(),
        description: schedule.describe(),
    }))
}
