//! The schedule ahead across all tasks (`crate::schedule_load` decides; this reads the tasks).

use std::collections::HashMap;

use chrono::{DurationRound, TimeDelta};

use super::error::{Result, ServiceError};
use super::Service;
use crate::actors::store::boxed;
use crate::cron::{CronSchedule, Zone};
use crate::run::TaskId;
use crate::schedule_load::{load, Load, Planned};
use crate::store::queries::overview;

impl Service {
    /// The runs every firing task will have in the next `hours` hours, from the next second.
    pub async fn schedule_load(&self, hours: i64) -> Result<Load> {
        let now = self.clock.now();
        let from = now.duration_trunc(TimeDelta::seconds(1)).unwrap_or(now) + TimeDelta::seconds(1);
        let rows = self
            .store
            .query(|conn| boxed(overview::firing_tasks(conn)))
            .await?;
        // Reading 100,000 schedules and counting them over a day is CPU work: off the async
        // threads.
        actix_web::web::block(move || load(&planned(rows), from, hours))
            .await
            .map_err(|_| ServiceError::ShuttingDown)
    }
}

/// The firing tasks' schedules, each distinct expression and zone parsed once (most tasks
/// share a few). A stored task's cron and zone were validated; one that no longer parses (an
/// older version's) has no fires to count.
fn planned(rows: Vec<(TaskId, String, String, i32)>) -> Vec<Planned> {
    let mut parsed: HashMap<(String, String), Option<CronSchedule>> = HashMap::new();
    rows.into_iter()
        .filter_map(|(id, cron, zone, jitter_secs)| {
            let schedule = parsed
                .entry((cron, zone))
                .or_insert_with_key(|(cron, zone)| {
                    Some(
                        CronSchedule::parse(cron)
                            .ok()?
                            .in_zone(Zone::parse(zone).ok()?),
                    )
                })
                .clone()?;
            Some(Planned {
                id,
                schedule,
                jitter_secs,
            })
        })
        .collect()
}
