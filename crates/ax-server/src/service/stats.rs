//! Counts and trigger lags of a task's runs.

use std::collections::HashMap;

use chrono::{DateTime, Duration, Utc};

use super::error::Result;
use super::Service;
use crate::actors::store::boxed;
use ax_core::run::percentile::percentile;
use ax_core::run::{jittered, RunStatus, TaskId, TriggerType, OVERLAP_CODE, REPLACED_CODE};
use ax_store::queries::runs;
use ax_store::{from_db, to_db};

/// Counts and trigger lags of a task's runs over a window.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskStats {
    pub from: DateTime<Utc>,
    pub to: DateTime<Utc>,
    pub by_status: HashMap<String, i64>,
    /// What the overlap policy did: runs skipped, runs replaced, runs waiting now.
    pub overlap: OverlapCounts,
    /// Trigger lag (first dispatched minus due: the scheduled time plus the jitter offset)
    /// percentiles in milliseconds: p50, p90, p99, max; `None` when no run of the window was
    /// dispatched. Backfilled runs are not counted: they are late by design.
    pub lag_ms: Option<[i64; 4]>,
}

/// A task's runs the overlap policy acted on, over a stats window.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct OverlapCounts {
    pub skipped: i64,
    pub replaced: i64,
    pub waiting: i64,
}

impl Service {
    /// Counts by status and trigger-lag percentiles of a task's runs scheduled in the last
    /// `window`.
    pub async fn task_stats(&self, task_id: TaskId, window: Duration) -> Result<TaskStats> {
        let jitter_secs = self.task(task_id).await?.task.jitter_secs;
        let to = self.clock.now();
        let from = to - window;
        let (since, until) = (to_db(from), to_db(to));
        let rows = self
            .store
            .query(move |conn| boxed(runs::for_stats(conn, task_id, since, until)))
            .await?;
        let mut by_status: HashMap<String, i64> = HashMap::new();
        let mut overlap = OverlapCounts::default();
        let mut lags: Vec<i64> = Vec::with_capacity(rows.len());
        for (status, trigger, code, scheduled, dispatched) in rows {
            *by_status.entry(status.to_string()).or_default() += 1;
            match (status, code.as_deref()) {
                (RunStatus::Skipped, _) => overlap.skipped += 1,
                (RunStatus::Cancelled, Some(REPLACED_CODE)) => overlap.replaced += 1,
                (RunStatus::Pending, Some(OVERLAP_CODE)) => overlap.waiting += 1,
                _ => {}
            }
            let due = match trigger {
                TriggerType::Schedule => Some(jittered(task_id, from_db(scheduled), jitter_secs)),
                TriggerType::Manual => Some(from_db(scheduled)),
                TriggerType::Backfill => None,
            };
            if let (Some(due), Some(dispatched)) = (due, dispatched) {
                lags.push((from_db(dispatched) - due).num_milliseconds());
            }
        }
        lags.sort_unstable();
        let at = |p: f64| percentile(&lags, p);
        let lag_ms = match (at(50.0), at(90.0), at(99.0), lags.last()) {
            (Some(p50), Some(p90), Some(p99), Some(&max)) => Some([p50, p90, p99, max]),
            _ => None,
        };
        Ok(TaskStats {
            from,
            to,
            by_status,
            overlap,
            lag_ms,
        })
    }
}
