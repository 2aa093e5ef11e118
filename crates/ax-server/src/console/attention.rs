//! What needs an operator now, decided from the runs the dashboard reads: failures folded
//! into one line a task, and the runs that are late or stuck, each with why. Time spent
//! waiting on upstreams or on the overlap policy is waiting, not ax's lag.

use std::collections::HashMap;

use chrono::{DateTime, Duration, Utc};

use ax_core::run::{held_by_overlap, RunStatus, TaskId};
use ax_store::from_db;
use ax_store::rows::models::Run;

/// A PENDING run waiting this long on its upstreams or the overlap policy is shown.
pub const LONG_WAIT: Duration = Duration::minutes(1);
/// A run due this long and not dispatched yet is late: ax's own lag.
pub const LATE_DISPATCH: Duration = Duration::seconds(10);

/// A task's failures, folded.
#[derive(Debug, Clone)]
pub struct FailingTask {
    pub task_id: TaskId,
    pub failures: usize,
    /// The earliest failure read.
    pub since: DateTime<Utc>,
    /// The latest failure: its error and link.
    pub latest: Run,
    /// What the task is doing now, by its latest run.
    pub now: TaskNow,
}

/// What a task with failures is doing now, told by its latest run: it has recovered only once
/// a run succeeded; a run under way or waiting for its next attempt is not a recovery yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskNow {
    /// Its latest run failed (or it has none any more).
    Failing,
    /// Its latest run is being run: sent, and no result yet.
    Running,
    /// Its latest run failed an attempt; the next one is due then.
    Retrying { due: DateTime<Utc> },
    /// Its latest run is in this status, neither under way nor ended in success or failure:
    /// due and not sent yet, waiting, missed, skipped or cancelled.
    Latest(RunStatus),
    /// Its latest run succeeded.
    Recovered,
}

impl TaskNow {
    /// What `latest`, a task's latest run, says of it.
    pub fn of(latest: Option<&Run>) -> TaskNow {
        let Some(run) = latest else {
            return TaskNow::Failing;
        };
        match run.status {
            RunStatus::Success => TaskNow::Recovered,
            RunStatus::Failed => TaskNow::Failing,
            RunStatus::Running => TaskNow::Running,
            RunStatus::Ready if run.dispatched_attempt >= run.attempt => TaskNow::Running,
            RunStatus::Ready => match run.next_attempt_at {
                Some(due) if run.attempt > 1 => TaskNow::Retrying { due: from_db(due) },
                _ => TaskNow::Latest(run.status),
            },
            status => TaskNow::Latest(status),
        }
    }

    /// Failing first, recovered last, the rest between.
    fn rank(self) -> u8 {
        match self {
            TaskNow::Failing => 0,
            TaskNow::Running | TaskNow::Retrying { .. } | TaskNow::Latest(_) => 1,
            TaskNow::Recovered => 2,
        }
    }
}

/// Folds failed runs by task: still failing first, recovered last, then the most failures,
/// then the latest. `latest`: each task's latest run, when known.
pub fn failing_tasks(failures: Vec<Run>, latest: &HashMap<TaskId, Run>) -> Vec<FailingTask> {
    let mut by_task: HashMap<TaskId, FailingTask> = HashMap::new();
    for run in failures {
        let at = from_db(run.scheduled_at);
        match by_task.get_mut(&run.task_id) {
            Some(task) => {
                task.failures += 1;
                task.since = task.since.min(at);
                if run.scheduled_at > task.latest.scheduled_at {
                    task.latest = run;
                }
            }
            None => {
                let now = TaskNow::of(latest.get(&run.task_id));
                by_task.insert(
                    run.task_id,
                    FailingTask {
                        task_id: run.task_id,
                        failures: 1,
                        since: at,
                        latest: run,
                        now,
                    },
                );
            }
        }
    }
    let mut tasks: Vec<FailingTask> = by_task.into_values().collect();
    tasks.sort_by(|a, b| {
        (a.now.rank(), b.failures, b.latest.scheduled_at, a.task_id.0).cmp(&(
            b.now.rank(),
            a.failures,
            a.latest.scheduled_at,
            b.task_id.0,
        ))
    });
    tasks
}

/// Why a run is shown as late or stuck.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trouble {
    /// Dispatched, with no result past its deadline.
    PastDeadline { by: Duration },
    /// Failed an attempt; the next one is due then.
    RetryWaiting { attempt: i32, due: DateTime<Utc> },
    /// Due and not dispatched yet: ax's own lag.
    NotDispatched { lag: Duration },
    /// PENDING on its upstreams this long.
    WaitingOnUpstreams { waited: Duration },
    /// PENDING behind an earlier run of its task (overlap policy) this long.
    WaitingOnOverlap { waited: Duration },
    /// Found too late to run; the run's message says how late.
    Missed,
}

impl Trouble {
    /// Waiting is the task's design (upstreams, overlap), not something ax does late.
    pub fn is_waiting(self) -> bool {
        matches!(
            self,
            Trouble::WaitingOnUpstreams { .. } | Trouble::WaitingOnOverlap { .. }
        )
    }
}

/// Why an open run needs attention at `now`, if it does.
pub fn trouble(run: &Run, now: DateTime<Utc>) -> Option<Trouble> {
    let scheduled = from_db(run.scheduled_at);
    let due = from_db(run.trigger_at);
    let past = |at: Option<chrono::NaiveDateTime>| at.map(from_db).filter(|at| *at < now);
    match run.status {
        RunStatus::Missed => Some(Trouble::Missed),
        RunStatus::Pending if now - scheduled < LONG_WAIT => None,
        RunStatus::Pending if held_by_overlap(run.status, run.callback_code.as_deref()) => {
            Some(Trouble::WaitingOnOverlap {
                waited: now - scheduled,
            })
        }
        RunStatus::Pending => Some(Trouble::WaitingOnUpstreams {
            waited: now - scheduled,
        }),
        RunStatus::Ready | RunStatus::Running => {
            if let Some(deadline) = past(run.deadline_at) {
                return Some(Trouble::PastDeadline { by: now - deadline });
            }
            let next = run.next_attempt_at.map(from_db);
            match next {
                Some(next) if run.attempt > 1 && next > now && run.status == RunStatus::Ready => {
                    Some(Trouble::RetryWaiting {
                        attempt: run.attempt,
                        due: next,
                    })
                }
                _ if run.dispatched_attempt == 0 && now - due >= LATE_DISPATCH => {
                    Some(Trouble::NotDispatched { lag: now - due })
                }
                _ => None,
            }
        }
        _ => None,
    }
}

/// The runs among `runs` that need attention at `now`, the longest-standing first.
pub fn troubled(runs: Vec<Run>, now: DateTime<Utc>) -> Vec<(Run, Trouble)> {
    let mut found: Vec<(Run, Trouble)> = runs
        .into_iter()
        .filter_map(|run| trouble(&run, now).map(|why| (run, why)))
        .collect();
    found.sort_by_key(|(run, why)| (why.is_waiting(), run.scheduled_at, run.id));
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use ax_core::run::{RequestId, TriggerType};
    use ax_store::to_db;

    fn at(secs: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(1_800_000_000 + secs, 0).expect("a time")
    }

    fn run(id: i64, task: i64, status: RunStatus, scheduled: i64) -> Run {
        Run {
            id,
            task_id: TaskId(task),
            request_id: RequestId::scheduled(TaskId(task), at(scheduled)),
            trigger_type: TriggerType::Schedule,
            scheduled_at: to_db(at(scheduled)),
            trigger_at: to_db(at(scheduled)),
            status,
            attempt: 1,
            retry_count: 0,
            callback_code: None,
            callback_message: None,
            deadline_at: None,
            fired_by: "ax-1".into(),
            created_at: to_db(at(scheduled)),
            finished_at: None,
            next_attempt_at: None,
            params: None,
            dispatched_attempt: 0,
            claimed_until: None,
            dispatched_at: None,
            member: None,
            shard_index: None,
            shard_total: None,
        }
    }

    #[test]
    fn failures_fold_by_task_still_failing_first() {
        let failed = |id, task, secs| {
            let mut r = run(id, task, RunStatus::Failed, secs);
            r.callback_code = Some(format!("HTTP_{id}"));
            r
        };
        let runs = vec![
            failed(1, 7, 10),
            failed(2, 7, 30),
            failed(3, 7, 20),
            failed(4, 8, 40),
        ];
        let latest = HashMap::from([
            (TaskId(7), run(9, 7, RunStatus::Success, 50)),
            (TaskId(8), run(10, 8, RunStatus::Failed, 40)),
        ]);
        let tasks = failing_tasks(runs, &latest);
        assert_eq!(tasks.len(), 2);
        assert_eq!(
            (tasks[0].task_id, tasks[0].failures, tasks[0].now),
            (TaskId(8), 1, TaskNow::Failing)
        );
        let recovered = &tasks[1];
        assert_eq!((recovered.failures, recovered.since), (3, at(10)));
        assert_eq!(recovered.latest.callback_code.as_deref(), Some("HTTP_2"));
        assert_eq!(recovered.now, TaskNow::Recovered);
    }

    #[test]
    fn only_a_success_is_a_recovery() {
        let of = |run: &Run| TaskNow::of(Some(run));
        assert_eq!(TaskNow::of(None), TaskNow::Failing, "no latest run known");
        assert_eq!(of(&run(1, 1, RunStatus::Failed, 0)), TaskNow::Failing);
        assert_eq!(of(&run(1, 1, RunStatus::Success, 0)), TaskNow::Recovered);
        // Answered 202: under way until its callback.
        assert_eq!(of(&run(1, 1, RunStatus::Running, 0)), TaskNow::Running);
        // Sent, no reply yet.
        let mut sent = run(1, 1, RunStatus::Ready, 0);
        sent.dispatched_attempt = 1;
        assert_eq!(of(&sent), TaskNow::Running);
        // Its first attempt failed; the second is due at 4.
        let mut retrying = run(1, 1, RunStatus::Ready, 0);
        retrying.attempt = 2;
        retrying.dispatched_attempt = 1;
        retrying.next_attempt_at = Some(to_db(at(4)));
        assert_eq!(of(&retrying), TaskNow::Retrying { due: at(4) });
        // Due and not sent yet; waiting; ended neither way.
        for status in [
            RunStatus::Ready,
            RunStatus::Pending,
            RunStatus::Missed,
            RunStatus::Skipped,
            RunStatus::Cancelled,
        ] {
            assert_eq!(of(&run(1, 1, status, 0)), TaskNow::Latest(status));
        }
    }

    #[test]
    fn failing_tasks_come_first_and_recovered_ones_last() {
        let failed = |id, task| run(id, task, RunStatus::Failed, 10);
        let mut running = run(13, 2, RunStatus::Running, 20);
        running.dispatched_attempt = 1;
        let latest = HashMap::from([
            (TaskId(1), run(11, 1, RunStatus::Success, 20)),
            (TaskId(2), running),
            (TaskId(3), run(12, 3, RunStatus::Failed, 20)),
        ]);
        let order: Vec<TaskId> =
            failing_tasks(vec![failed(1, 1), failed(2, 2), failed(3, 3)], &latest)
                .iter()
                .map(|task| task.task_id)
                .collect();
        assert_eq!(order, vec![TaskId(3), TaskId(2), TaskId(1)]);
    }

    #[test]
    fn a_run_past_its_deadline_is_stuck() {
        let mut r = run(1, 1, RunStatus::Running, 0);
        r.dispatched_attempt = 1;
        r.deadline_at = Some(to_db(at(30)));
        assert_eq!(trouble(&r, at(29)), None);
        assert_eq!(
            trouble(&r, at(45)),
            Some(Trouble::PastDeadline {
                by: Duration::seconds(15)
            })
        );
    }

    #[test]
    fn a_retry_waits_for_its_time() {
        let mut r = run(1, 1, RunStatus::Ready, 0);
        r.attempt = 2;
        r.dispatched_attempt = 1;
        r.next_attempt_at = Some(to_db(at(60)));
        assert_eq!(
            trouble(&r, at(20)),
            Some(Trouble::RetryWaiting {
                attempt: 2,
                due: at(60)
            })
        );
    }

    #[test]
    fn waiting_counts_from_the_schedule_and_lag_from_the_release() {
        let pending = run(1, 1, RunStatus::Pending, 0);
        assert_eq!(trouble(&pending, at(59)), None, "under a minute");
        assert_eq!(
            trouble(&pending, at(90)),
            Some(Trouble::WaitingOnUpstreams {
                waited: Duration::seconds(90)
            })
        );
        let mut held = run(2, 1, RunStatus::Pending, 0);
        held.callback_code = Some(ax_core::run::OVERLAP_CODE.into());
        assert!(matches!(
            trouble(&held, at(90)),
            Some(Trouble::WaitingOnOverlap { .. })
        ));
        // Released at 80 after waiting: its lag counts from then.
        let mut released = run(3, 1, RunStatus::Ready, 0);
        released.trigger_at = to_db(at(80));
        assert_eq!(trouble(&released, at(85)), None);
        assert_eq!(
            trouble(&released, at(95)),
            Some(Trouble::NotDispatched {
                lag: Duration::seconds(15)
            })
        );
    }

    #[test]
    fn late_runs_come_before_waiting_ones() {
        let mut late = run(1, 1, RunStatus::Ready, 50);
        late.trigger_at = to_db(at(50));
        let waiting = run(2, 2, RunStatus::Pending, 0);
        let fine = run(3, 3, RunStatus::Ready, 99);
        let found = troubled(vec![waiting, fine, late], at(100));
        let ids: Vec<i64> = found.iter().map(|(r, _)| r.id).collect();
        assert_eq!(ids, vec![1, 2]);
    }
}
