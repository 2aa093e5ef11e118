//! Cron previews: the next fire times of an expression in a zone, less the days off of some
//! calendars, for a console or a client checking a schedule before it saves it.

use std::collections::HashMap;

use actix_web::{web, HttpResponse};
use chrono::SecondsFormat;
use serde::Serialize;

use super::validate;
use super::ApiState;
use crate::error::ApiError;
use ax_core::calendar::schedule::{DayOff, Previewed, Schedule};
use ax_core::time::clock::rfc3339;
use ax_cron::Fire;

#[derive(Serialize)]
struct Preview {
    times: Vec<FireView>,
    /// The cron's fires on a day off among them: left out, or moved (see `times`).
    excluded: Vec<FireView>,
    description: String,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct FireView {
    utc: String,
    local: String,
    /// Why the fire is not at the expression's own local time (a DST gap or overlap).
    note: Option<String>,
    /// The day off a moved fire was moved from.
    #[serde(skip_serializing_if = "Option::is_none")]
    moved_from: Option<String>,
    /// The calendar holding the day off it was moved from (or, excluded, its own day).
    #[serde(skip_serializing_if = "Option::is_none")]
    calendar: Option<String>,
}

impl FireView {
    fn new(fire: Fire, moved_from: Option<String>, calendar: Option<String>) -> Self {
        FireView {
            utc: rfc3339(fire.utc),
            local: fire.local.to_rfc3339_opts(SecondsFormat::Millis, true),
            note: fire.note,
            moved_from,
            calendar,
        }
    }
}

/// `GET /api/cron/next?expr=&tz=&calendar=&policy=&from=&count=`: the next `count` (1-100,
/// default 10) fire times after `from` (default now), in UTC and local time, less the days
/// off of the calendars named in `calendar` (by commas) under `policy`; the cron's fires on a
/// day off among them; the expression in English.
pub async fn next(
    state: web::Data<ApiState>,
    query: web::Query<HashMap<String, String>>,
) -> Result<HttpResponse, ApiError> {
    let asked = validate::cron_preview(&query, state.service.now())?;
    let book = state.service.book_for(asked.calendars.as_ref()).await?;
    if let Some(missing) = asked.calendars.as_ref().and_then(|c| book.first_missing(c)) {
        let message = format!("no calendar `{}`", missing.1);
        return Err(ApiError::invalid("calendar", message));
    }
    let description = asked.cron.describe();
    let schedule = Schedule::new(asked.cron, book.days_off(asked.calendars.as_ref()));
    let (mut times, mut excluded) = (Vec::new(), Vec::new());
    for Previewed { fire, day_off } in schedule.preview(asked.from, asked.count) {
        match day_off {
            None => times.push(FireView::new(fire, None, None)),
            Some(DayOff::MovedFrom(day, calendar)) => {
                times.push(FireView::new(fire, Some(day.to_string()), Some(calendar)))
            }
            Some(DayOff::Off(calendar)) => excluded.push(FireView::new(fire, None, Some(calendar))),
        }
    }
    Ok(HttpResponse::Ok().json(Preview {
        times,
        excluded,
        description,
    }))
}
