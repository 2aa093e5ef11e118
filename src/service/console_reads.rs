//! Reads of the web console.

use std::collections::HashMap;

use chrono::{DateTime, Duration, Utc};

use super::error::Result;
use super::Counted;
use super::Service;
use crate::actors::store::boxed;
use crate::run::{RequestId, RunStatus, TaskId};
use crate::store::models::{Instance, Task};
use crate::store::queries::attempts::{self, AttemptRow};
use crate::store::queries::instances;
use crate::store::queries::overview;
use crate::store::queries::tasks;
use crate::store::to_db;

/// How long the last day's run counts are shown before they are counted again.
pub const DAY_COUNTS_SECS: i64 = 15;

/// Reads of the web console (`crate::console`): the pages call these and the service's other
/// methods, never the database directly.
impl Service {
    /// How many runs scheduled from `since` until now are in each status.
    pub async fn run_counts_since(&self, since: DateTime<Utc>) -> Result<HashMap<RunStatus, i64>> {
        let (since, until) = (to_db(since), to_db(self.clock.now()));
        Ok(self
            .store
            .query(move |conn| boxed(overview::run_counts(conn, since, until)))
            .await?)
    }

    /// The runs of the last day by status, with when they were counted: at most
    /// [`DAY_COUNTS_SECS`] ago. The day's count reads an index entry per run of the day (a
    /// third of a million at 1,000 fires a second … of a busy hour), too many for every view
    /// of a dashboard.
    pub async fn day_counts(&self) -> Result<Counted> {
        let now = self.clock.now();
        let fresh = |at: DateTime<Utc>| at <= now && now - at < Duration::seconds(DAY_COUNTS_SECS);
        let cached = self.day_counts.lock().ok().and_then(|cache| cache.clone());
        if let Some((at, counts)) = cached.filter(|(at, _)| fresh(*at)) {
            return Ok((at, counts));
        }
        let counts = self.run_counts_since(now - Duration::days(1)).await?;
        if let Ok(mut cache) = self.day_counts.lock() {
            *cache = Some((now, counts.clone()));
        }
        Ok((now, counts))
    }

    /// The names of these tasks; a deleted task has none.
    pub async fn task_names(&self, ids: Vec<TaskId>) -> Result<HashMap<TaskId, String>> {
        Ok(self
            .store
            .query(move |conn| boxed(overview::task_names(conn, ids)))
            .await?)
    }

    /// The tasks of these (scene, name) pairs that exist.
    pub async fn tasks_named(&self, pairs: Vec<(String, String)>) -> Result<Vec<Task>> {
        Ok(self
            .store
            .query(move |conn| boxed(async move { tasks::find_named(conn, &pairs).await }))
            .await?)
    }

    /// The tasks a name given alone names (see [`tasks::named`]), at most `limit`.
    pub async fn tasks_called(&self, name: String, limit: i64) -> Result<Vec<TaskId>> {
        Ok(self
            .store
            .query(move |conn| boxed(async move { tasks::named(conn, &name, limit).await }))
            .await?)
    }

    /// Up to `limit` scenes that have tasks, in order.
    pub async fn scene_names(&self, limit: i64) -> Result<Vec<String>> {
        Ok(self
            .store
            .query(move |conn| boxed(tasks::scene_names(conn, limit)))
            .await?)
    }

    /// The tasks with these ids that exist.
    pub async fn tasks_by_id(&self, ids: Vec<TaskId>) -> Result<Vec<Task>> {
        Ok(self
            .store
            .query(move |conn| boxed(tasks::find_many(conn, ids)))
            .await?)
    }

    /// Up to `limit` names of a scene's tasks, in order.
    pub async fn names_in_scene(&self, scene: String, limit: i64) -> Result<Vec<String>> {
        Ok(self
            .store
            .query(move |conn| {
                boxed(async move { tasks::names_in_scene(conn, &scene, limit).await })
            })
            .await?)
    }

    /// How many runs of a task are open.
    pub async fn open_runs(&self, task_id: TaskId) -> Result<i64> {
        Ok(self
            .store
            .query(move |conn| boxed(instances::count_open(conn, task_id)))
            .await?)
    }

    /// The attempts of a run that ended without ending it (failed, then retried), in order.
    pub async fn attempts(&self, request_id: RequestId) -> Result<Vec<AttemptRow>> {
        Ok(self
            .store
            .query(move |conn| boxed(async move { attempts::of_run(conn, &request_id).await }))
            .await?)
    }

    /// The shards of a broadcast run's fire, in shard order (the run among them); none for a
    /// run without siblings.
    pub async fn shards(&self, run: &Instance) -> Result<Vec<Instance>> {
        if !crate::run::sharded(run.shard_total) {
            return Ok(Vec::new());
        }
        let (task_id, scheduled_at) = (run.task_id, run.scheduled_at);
        Ok(self
            .store
            .query(move |conn| boxed(instances::shards_of(conn, task_id, scheduled_at)))
            .await?)
    }

    /// Each task's latest run that is due (the one scheduled last).
    pub async fn last_runs(&self, ids: Vec<TaskId>) -> Result<HashMap<TaskId, Instance>> {
        let now = to_db(self.clock.now());
        Ok(self
            .store
            .query(move |conn| boxed(overview::last_runs(conn, ids, now)))
            .await?)
    }

    /// The enabled tasks that fire next, soonest first: `(id, name, next run)`.
    pub async fn next_runs(&self, limit: i64) -> Result<Vec<(TaskId, String, DateTime<Utc>)>> {
        Ok(self
            .store
            .query(move |conn| boxed(overview::next_runs(conn, limit)))
            .await?)
    }

    /// The longest-standing open runs due now, up to `limit` a status.
    pub async fn oldest_open(&self, limit: i64) -> Result<Vec<Instance>> {
        let now = to_db(self.clock.now());
        Ok(self
            .store
            .query(move |conn| boxed(overview::oldest_open(conn, now, limit)))
            .await?)
    }

    /// When runs scheduled from `since` until now were scheduled, and ax's lag to their first
    /// dispatch in ms (waits on upstreams and the overlap policy left out), newest first,
    /// at most `limit`; backfilled runs are left out (they are late by design).
    pub async fn dispatch_times_since(
        &self,
        since: DateTime<Utc>,
        limit: i64,
    ) -> Result<Vec<(DateTime<Utc>, Option<i64>)>> {
        let (since, until) = (to_db(since), to_db(self.clock.now()));
        Ok(self
            .store
            .query(move |conn| boxed(overview::dispatch_times(conn, since, until, limit)))
            .await?)
    }
}
