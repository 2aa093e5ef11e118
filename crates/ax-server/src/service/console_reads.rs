//! Reads of the web console.

use ax_core::ids::SceneName;
use std::collections::HashMap;

use chrono::{DateTime, Duration, Utc};

use super::error::Result;
use super::Counted;
use super::Service;
use crate::actors::store::boxed;
use ax_core::run::{RequestId, RunStatus, TaskId};
use ax_store::queries::attempts::{self, AttemptRow};
use ax_store::queries::executors::HealthRow;
use ax_store::queries::overview::{self, PausedScene, PausedTask};
use ax_store::queries::runs;
use ax_store::queries::tasks;
use ax_store::rows::models::{Run, Task};
use ax_store::to_db;

/// How long the counts of the last day's runs older than an hour are used before they are
/// counted again.
pub const DAY_COUNTS_SECS: i64 = 15;

/// Runs of the last hour and of the last day by status, read so that the hour's count of a
/// status is never more than the day's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunCounts {
    pub last_hour: HashMap<RunStatus, i64>,
    pub last_day: HashMap<RunStatus, i64>,
    /// When the day's runs older than an hour were counted: at most [`DAY_COUNTS_SECS`] ago.
    pub older_counted_at: DateTime<Utc>,
}

/// What the dashboard's attention list shows of pauses.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Pauses {
    /// Every paused scene, the latest paused first.
    pub scenes: Vec<PausedScene>,
    /// How many tasks are paused on their own.
    pub task_count: i64,
    /// The latest paused of them.
    pub tasks: Vec<PausedTask>,
}

/// Reads of the web console (`crate::console`): the pages call these and the service's other
/// methods, never the database directly.
impl Service {
    /// Runs scheduled in the last hour and in the last day, up to now, by status. The day's
    /// runs older than an hour are counted every [`DAY_COUNTS_SECS`] at most (a third of a
    /// million at 1,000 fires a second … of a busy hour, too many for every view of a
    /// dashboard); the rest, in one statement with the hour's, on every call. The hour is part
    /// of the day in that one statement, so it can never count more than the day, whatever
    /// ends or starts in between.
    pub async fn run_counts(&self) -> Result<RunCounts> {
        let now = self.clock.now();
        let hour = Duration::hours(1);
        let (counted_at, older) = self.older_counts(now).await?;
        let (since, recent, until) = (to_db(counted_at - hour), to_db(now - hour), to_db(now));
        let newer = self
            .store
            .query(move |conn| boxed(overview::run_counts(conn, since, recent, until)))
            .await?;
        let last_hour = newer
            .iter()
            .map(|(status, count)| (*status, count.recent))
            .collect();
        let mut last_day = older;
        for (status, count) in newer {
            *last_day.entry(status).or_insert(0) += count.all;
        }
        Ok(RunCounts {
            last_hour,
            last_day,
            older_counted_at: counted_at,
        })
    }

    /// The runs scheduled from a day to an hour before `counted_at` by status, with
    /// `counted_at`: counted at `now`, or up to [`DAY_COUNTS_SECS`] before.
    async fn older_counts(&self, now: DateTime<Utc>) -> Result<Counted> {
        let fresh = |at: DateTime<Utc>| at <= now && now - at < Duration::seconds(DAY_COUNTS_SECS);
        let cached = self.day_counts.lock().ok().and_then(|cache| cache.clone());
        if let Some((at, counts)) = cached.filter(|(at, _)| fresh(*at)) {
            return Ok((at, counts));
        }
        let (since, hour_ago) = (
            to_db(now - Duration::days(1)),
            to_db(now - Duration::hours(1)),
        );
        let counts = self
            .store
            .query(move |conn| boxed(overview::run_counts(conn, since, hour_ago, hour_ago)))
            .await?;
        // Those scheduled exactly an hour ago are the newer part's.
        let counts: HashMap<RunStatus, i64> = counts
            .into_iter()
            .map(|(status, count)| (status, count.all - count.recent))
            .collect();
        if let Ok(mut cache) = self.day_counts.lock() {
            *cache = Some((now, counts.clone()));
        }
        Ok((now, counts))
    }

    /// The paused scenes, how many tasks are paused on their own and the `limit` paused last,
    /// each with since when and by whom.
    pub async fn pauses(&self, limit: i64) -> Result<Pauses> {
        Ok(self
            .store
            .query(move |conn| {
                boxed(async move {
                    let scenes = overview::paused_scenes(conn).await?;
                    let (task_count, tasks) = overview::paused_tasks(conn, limit).await?;
                    Ok(Pauses {
                        scenes,
                        task_count,
                        tasks,
                    })
                })
            })
            .await?)
    }

    /// The executor members healthy again after being set aside, recovered since `since`.
    pub async fn members_recovered_since(&self, since: DateTime<Utc>) -> Result<Vec<HealthRow>> {
        let since = to_db(since);
        Ok(self
            .store
            .query(move |conn| boxed(overview::members_recovered_since(conn, since)))
            .await?)
    }

    /// The names of these tasks; a deleted task has none.
    pub async fn task_names(&self, ids: Vec<TaskId>) -> Result<HashMap<TaskId, String>> {
        Ok(self
            .store
            .query(move |conn| boxed(overview::task_names(conn, ids)))
            .await?)
    }

    /// The tasks of these (scene, name) pairs that exist.
    pub async fn tasks_named(&self, pairs: Vec<(SceneName, String)>) -> Result<Vec<Task>> {
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
    pub async fn names_in_scene(&self, scene: SceneName, limit: i64) -> Result<Vec<String>> {
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
            .query(move |conn| boxed(runs::count_open(conn, task_id)))
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
    pub async fn shards(&self, run: &Run) -> Result<Vec<Run>> {
        if !ax_core::run::sharded(run.shard_total) {
            return Ok(Vec::new());
        }
        let (task_id, scheduled_at) = (run.task_id, run.scheduled_at);
        Ok(self
            .store
            .query(move |conn| boxed(runs::shards_of(conn, task_id, scheduled_at)))
            .await?)
    }

    /// Each task's latest run that is due (the one scheduled last).
    pub async fn last_runs(&self, ids: Vec<TaskId>) -> Result<HashMap<TaskId, Run>> {
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
    pub async fn oldest_open(&self, limit: i64) -> Result<Vec<Run>> {
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
