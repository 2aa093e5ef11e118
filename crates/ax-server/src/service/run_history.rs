//! The history the console's task and scene pages draw (timeline, stats, failure heat-maps)
//! and the reasons a run's page gives (the upstream run that failed, how late a missed run
//! was), each read in a bounded number of indexed queries.

use ax_core::ids::SceneName;
use chrono::{DateTime, Duration, Utc};

use super::error::Result;
use super::Service;
use crate::actors::store::boxed;
use ax_core::calendar::schedule::Schedule;
use ax_core::run::history::{MissedReason, Span};
use ax_core::run::{RequestId, RunStatus, TaskId, UPSTREAM_FAILED_CODE};
use ax_store::queries::run_history as queries;
use ax_store::queries::tasks;
use ax_store::rows::models::Run;
use ax_store::{from_db, to_db};

/// The runs a task's stats are taken over: those scheduled in the last 7 days, at most 1,000.
pub const STATS_DAYS: i64 = 7;
pub const STATS_RUNS: i64 = 1_000;
/// The runs a timeline draws: those scheduled in the last 24 hours, at most 200.
pub const TIMELINE_HOURS: i64 = 24;
pub const TIMELINE_RUNS: usize = 200;
/// The failures the heat-maps count: those of the last 90 days, at most 10,000.
pub const FAILURE_DAYS: i64 = 90;
pub const FAILURE_RUNS: i64 = 10_000;
/// The tasks of a scene its page draws, by name.
pub const SCENE_TASKS: i64 = 50;
/// The downstream tasks a task's page names.
pub const DOWNSTREAMS: i64 = 100;

/// Runs and failures of a task or of a scene's tasks, read at `now`.
#[derive(Debug, Clone)]
pub struct History {
    pub now: DateTime<Utc>,
    /// Newest first: a task's runs of its stats window, a scene's of its timeline.
    pub spans: Vec<Span>,
    /// When the failed runs of the last [`FAILURE_DAYS`] finished, newest first.
    pub failures: Vec<DateTime<Utc>>,
}

impl History {
    /// The runs its timeline draws, newest first.
    pub fn timeline(&self) -> impl Iterator<Item = &Span> {
        let since = self.now - Duration::hours(TIMELINE_HOURS);
        self.spans
            .iter()
            .filter(move |span| span.scheduled >= since)
            .take(TIMELINE_RUNS)
    }
}

/// A scene's history over its first [`SCENE_TASKS`] tasks by name; `more` when it has more.
#[derive(Debug, Clone)]
pub struct SceneHistory {
    pub tasks: Vec<(TaskId, String)>,
    pub more: bool,
    pub history: History,
}

/// An upstream's run that did not succeed, and made a downstream run fail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailedUpstream {
    pub task_id: TaskId,
    pub request_id: RequestId,
    pub status: RunStatus,
}

impl Service {
    /// A task's runs of the last [`STATS_DAYS`] and failures of the last [`FAILURE_DAYS`].
    pub async fn task_history(&self, id: TaskId) -> Result<History> {
        self.runs_and_failures(vec![id], Duration::days(STATS_DAYS), STATS_RUNS)
            .await
    }

    /// A scene's tasks' runs of the last [`TIMELINE_HOURS`] and failures of the last
    /// [`FAILURE_DAYS`], over its first [`SCENE_TASKS`] tasks.
    pub async fn scene_history(&self, scene: SceneName) -> Result<SceneHistory> {
        let mut tasks = self
            .store
            .query(move |conn| {
                boxed(async move { queries::scene_tasks(conn, &scene, SCENE_TASKS + 1).await })
            })
            .await?;
        let more = tasks.len() as i64 > SCENE_TASKS;
        tasks.truncate(SCENE_TASKS as usize);
        let ids = tasks.iter().map(|(id, _)| *id).collect();
        let window = Duration::hours(TIMELINE_HOURS);
        let history = self
            .runs_and_failures(ids, window, TIMELINE_RUNS as i64)
            .await?;
        Ok(SceneHistory {
            tasks,
            more,
            history,
        })
    }

    async fn runs_and_failures(
        &self,
        ids: Vec<TaskId>,
        window: Duration,
        runs: i64,
    ) -> Result<History> {
        let now = self.clock.now();
        let since = to_db(now - window);
        let failed_since = to_db(now - Duration::days(FAILURE_DAYS));
        let (spans, failures) = self
            .store
            .query(move |conn| {
                boxed(async move {
                    let spans = queries::spans(conn, &ids, since, runs).await?;
                    let failures =
                        queries::failure_times(conn, &ids, failed_since, FAILURE_RUNS).await?;
                    Ok((spans, failures))
                })
            })
            .await?;
        Ok(History {
            now,
            spans,
            failures: failures.into_iter().map(from_db).collect(),
        })
    }

    /// Up to [`DOWNSTREAMS`] tasks that wait on this one, by id.
    pub async fn downstreams(&self, id: TaskId) -> Result<Vec<TaskId>> {
        Ok(self
            .store
            .query(move |conn| boxed(queries::downstreams(conn, id, DOWNSTREAMS)))
            .await?)
    }

    /// The upstream runs that made this run fail `UPSTREAM_FAILED`: of each of its task's
    /// upstreams, the latest run scheduled at or before it, if that run ended without success
    /// (one indexed read per upstream). None for any other run.
    pub async fn failed_upstreams(&self, run: &Run) -> Result<Vec<FailedUpstream>> {
        if run.status != RunStatus::Failed
            || run.callback_code.as_deref() != Some(UPSTREAM_FAILED_CODE)
        {
            return Ok(Vec::new());
        }
        let (task_id, at) = (run.task_id, run.scheduled_at);
        Ok(self
            .store
            .query(move |conn| {
                boxed(async move {
                    let upstreams = tasks::dependencies_of(conn, &[task_id]).await?;
                    let mut failed = Vec::new();
                    for upstream in upstreams.get(&task_id).into_iter().flatten() {
                        let latest = queries::latest_at_or_before(conn, *upstream, at).await?;
                        if let Some((request_id, status)) =
                            latest.filter(|(_, s)| s.is_final() && *s != RunStatus::Success)
                        {
                            failed.push(FailedUpstream {
                                task_id: *upstream,
                                request_id,
                                status,
                            });
                        }
                    }
                    Ok(failed)
                })
            })
            .await?)
    }

    /// Why this run is MISSED: how late ax noticed it, and how many of its task's periods it
    /// stands for. None for any other run, or when its task or cron is gone.
    pub async fn missed_reason(&self, run: &Run) -> Result<Option<MissedReason>> {
        let (RunStatus::Missed, Some(noticed)) = (run.status, run.finished_at) else {
            return Ok(None);
        };
        let task = match self.task(run.task_id).await {
            Ok(details) => details.task,
            Err(super::error::ServiceError::TaskNotFound(_)) => return Ok(None),
            Err(err) => return Err(err),
        };
        Ok(self
            .schedule_of(&task)
            .await?
            .ok()
            .map(|schedule| missed_reason(&schedule, from_db(run.scheduled_at), from_db(noticed))))
    }
}

/// The reason of a run scheduled at `scheduled` and recorded MISSED at `noticed`.
fn missed_reason(
    schedule: &Schedule,
    scheduled: DateTime<Utc>,
    noticed: DateTime<Utc>,
) -> MissedReason {
    MissedReason {
        late: noticed - scheduled,
        periods: ax_core::plan::periods(schedule, scheduled, noticed),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(secs, 0).expect("a time")
    }

    #[test]
    fn a_missed_run_says_how_late_and_how_many_periods() {
        let cron = ax_cron::CronSchedule::parse("0 * * * * *").expect("every minute");
        let reason = missed_reason(&cron.into(), at(600), at(600 + 330));
        assert_eq!(reason.late, Duration::seconds(330));
        // 10:00, 11:00 … 15:00 of the minute hand: six periods.
        assert_eq!(reason.periods, 6);
    }
}
