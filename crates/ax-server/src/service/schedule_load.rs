//! The schedule ahead across all tasks (`ax_core::task::schedule_load` decides; this reads the tasks).

use std::collections::HashMap;

use chrono::{DateTime, DurationRound, TimeDelta, Utc};

use super::error::{Result, ServiceError};
use super::Service;
use crate::actors::store::boxed;
use ax_core::calendar::schedule::Schedule;
use ax_core::calendar::CalendarBook;
use ax_core::task::schedule_load::{load, Load, Planned};
use ax_cron::{CronSchedule, Zone};
use ax_store::queries::calendars;
use ax_store::queries::overview::{self, FiringTask};

/// How long a computed schedule ahead is shown again.
pub const LOAD_FRESH_SECS: i64 = 15;

impl Service {
    /// The runs every firing task will have in the next `hours` hours, from the next second,
    /// as computed at most [`LOAD_FRESH_SECS`] ago: reading 100,000 tasks' schedules takes a
    /// quarter of a second, and the day ahead changes little in seconds.
    pub async fn schedule_load(&self, hours: i64) -> Result<Load> {
        let now = self.clock.now();
        let from = now.duration_trunc(TimeDelta::seconds(1)).unwrap_or(now) + TimeDelta::seconds(1);
        let fresh = |load: &Load| {
            load.to - load.from == TimeDelta::hours(hours)
                && load.from <= from
                && from - load.from < TimeDelta::seconds(LOAD_FRESH_SECS)
        };
        let cached = self.schedule_load.lock().ok().and_then(|last| last.clone());
        if let Some(load) = cached.filter(fresh) {
            return Ok(load);
        }
        let load = self.compute_schedule_load(from, hours).await?;
        if let Ok(mut last) = self.schedule_load.lock() {
            *last = Some(load.clone());
        }
        Ok(load)
    }

    async fn compute_schedule_load(&self, from: DateTime<Utc>, hours: i64) -> Result<Load> {
        let (rows, book) = self
            .store
            .query(|conn| {
                boxed(async move {
                    let rows = overview::firing_tasks(conn).await?;
                    let named = rows.iter().any(|row| row.4.is_some());
                    let book = match named {
                        true => calendars::all(conn)
                            .await?
                            .into_iter()
                            .map(|r| (r.name, r.calendar))
                            .collect(),
                        false => CalendarBook::default(),
                    };
                    Ok((rows, book))
                })
            })
            .await?;
        // Reading 100,000 schedules and counting them over a day is CPU work: off the async
        // threads.
        actix_web::web::block(move || load(&planned(rows, &book), from, hours))
            .await
            .map_err(|_| ServiceError::ShuttingDown)
    }
}

/// The firing tasks' schedules, each distinct expression and zone parsed once (most tasks
/// share a few), as stored (see [`CronSchedule::parse_stored`]), less their calendars' days
/// (in `book`). A stored task's cron and zone were validated; one that no longer parses (an
/// older version's) has no fires to count.
fn planned(rows: Vec<FiringTask>, book: &CalendarBook) -> Vec<Planned> {
    let mut parsed: HashMap<(String, String), Option<CronSchedule>> = HashMap::new();
    rows.into_iter()
        .filter_map(|(id, cron, zone, jitter_secs, calendars)| {
            let schedule = parsed
                .entry((cron, zone))
                .or_insert_with_key(|(cron, zone)| {
                    Some(
                        CronSchedule::parse_stored(cron)
                            .ok()?
                            .in_zone(Zone::parse(zone).ok()?),
                    )
                })
                .clone()?;
            Some(Planned {
                id,
                schedule: Schedule::new(schedule, book.days_off(calendars.as_ref())),
                jitter_secs,
            })
        })
        .collect()
}
