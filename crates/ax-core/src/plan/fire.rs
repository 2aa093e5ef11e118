//! Fire planning: the runs to record for a task whose time came, under the missed-run policy.

use std::sync::Arc;

use chrono::{DateTime, Duration, Utc};

use crate::calendar::schedule::Schedule;
use crate::run::{OverlapPolicy, TaskId};
use crate::task::executor::TaskExecutor;

/// What the scheduler needs to fire a task, parsed once when the task enters the wheel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskSpec {
    pub id: TaskId,
    pub cron: Schedule,
    pub handler_url: String,
    /// The executor group its runs go to, instead of `handler_url`.
    pub executor: Option<Arc<TaskExecutor>>,
    /// The task's params as JSON text, sent as they are.
    pub params: Arc<str>,
    pub timeout_ms: i64,
    /// The task's own misfire threshold, if it has one.
    pub misfire_threshold_secs: Option<i64>,
    /// Whether its runs wait for upstream tasks (PENDING) before dispatch.
    pub has_dependencies: bool,
    /// The task's own dependency timeout, if it has one.
    pub dependency_timeout_secs: Option<i64>,
    pub overlap: OverlapPolicy,
    /// Each run's dispatch is delayed by its offset in `[0, jitter_secs]`.
    pub jitter_secs: i32,
    /// The task's version it was read at: its fires are recorded only while the task is still
    /// at it, so a run is always sent with the definition it was committed with.
    pub version: i64,
}

impl TaskSpec {
    /// The missed-run policy for this task: the global one, with the task's threshold if set.
    pub fn missed_run_policy(&self, global: MissedRunPolicy) -> MissedRunPolicy {
        MissedRunPolicy {
            misfire_threshold_secs: self
                .misfire_threshold_secs
                .unwrap_or(global.misfire_threshold_secs),
            ..global
        }
    }
}

/// How late runs are treated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MissedRunPolicy {
    /// A run at most this late is on time: a late tick fires every such run by itself.
    pub grace_secs: i64,
    /// A stalled task (its first due run later than `grace_secs`) fires once if that run is at
    /// most this late, however many periods were missed; later than this, the run is recorded
    /// `MISSED` and not dispatched.
    pub misfire_threshold_secs: i64,
}

impl Default for MissedRunPolicy {
    fn default() -> Self {
        MissedRunPolicy {
            grace_secs: 2,
            misfire_threshold_secs: 300,
        }
    }
}

/// One run to record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunDecision {
    /// Record and dispatch the run scheduled at this time.
    Fire(DateTime<Utc>),
    /// Record the run scheduled at this time as `MISSED`; no dispatch.
    Missed(DateTime<Utc>),
}

impl RunDecision {
    /// The scheduled time of the run.
    pub fn scheduled_at(self) -> DateTime<Utc> {
        match self {
            RunDecision::Fire(at) | RunDecision::Missed(at) => at,
        }
    }
}

/// The runs to record for a task whose next run, `due`, has come, and where its schedule goes
/// next. Each decision advances the task's `next_run_at` from its own time to the following
/// decision's time (the last one to `next`), so a chain commits as compare-and-sets in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FirePlan {
    pub decisions: Vec<RunDecision>,
    /// The first time after the plan; `None` if the schedule never fires again.
    pub next: Option<DateTime<Utc>>,
    /// The schedule's times the plan covers: one per decision, or every period a stalled
    /// task's one run stands for (counted up to `MAX_COUNTED_PERIODS`).
    pub periods: u64,
}

/// Where counting a stalled task's missed periods stops: the log says "at least" beyond.
pub const MAX_COUNTED_PERIODS: u64 = 1_000_000;

/// The schedule's times from `due` through `through`, `due` included, counted up to
/// `MAX_COUNTED_PERIODS`.
pub fn periods(cron: &Schedule, due: DateTime<Utc>, through: DateTime<Utc>) -> u64 {
    let (mut count, mut at) = (1, due);
    while count < MAX_COUNTED_PERIODS {
        match cron.next_after(at).filter(|next| *next <= through) {
            Some(next) => (count, at) = (count + 1, next),
            None => break,
        }
    }
    count
}

/// Plans the runs of a task due at `due`, seen at `now`.
pub fn plan_fires(
    cron: &Schedule,
    due: DateTime<Utc>,
    now: DateTime<Utc>,
    policy: MissedRunPolicy,
) -> FirePlan {
    let lateness = (now - due).num_seconds();
    if lateness <= policy.grace_secs {
        // On time, or a tick came a little late.
        return plan_each(cron, due, now);
    }
    // Stalled: one run stands for every period missed, and the schedule resumes from now.
    let decision = if lateness <= policy.misfire_threshold_secs {
        RunDecision::Fire(due)
    } else {
        RunDecision::Missed(due)
    };
    FirePlan {
        decisions: vec![decision],
        next: cron.next_after(now - Duration::seconds(1)),
        periods: periods(cron, due, now),
    }
}

/// Every run from `due` through `through`, each by itself: a task on time, or one whose runs
/// ax itself held back (its own lag is no stall of the task's).
pub fn plan_each(cron: &Schedule, due: DateTime<Utc>, through: DateTime<Utc>) -> FirePlan {
    let mut decisions = vec![RunDecision::Fire(due)];
    let mut next = cron.next_after(due);
    while let Some(at) = next.filter(|at| *at <= through) {
        decisions.push(RunDecision::Fire(at));
        next = cron.next_after(at);
    }
    let periods = decisions.len() as u64;
    FirePlan {
        decisions,
        next,
        periods,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn at(h: u32, m: u32, s: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2027, 3, 1, h, m, s)
            .single()
            .expect("valid time")
    }

    fn cron(expr: &str) -> Schedule {
        ax_cron::CronSchedule::parse(expr)
            .expect("valid cron")
            .into()
    }

    const POLICY: MissedRunPolicy = MissedRunPolicy {
        grace_secs: 2,
        misfire_threshold_secs: 300,
    };

    #[test]
    fn a_task_threshold_overrides_the_global_one() {
        let mut spec = TaskSpec {
            id: TaskId(1),
            cron: cron("* * * * * *"),
            handler_url: "http://h/".into(),
            executor: None,
            params: "{}".into(),
            timeout_ms: 1000,
            misfire_threshold_secs: Some(10),
            has_dependencies: false,
            dependency_timeout_secs: None,
            overlap: OverlapPolicy::Allow,
            jitter_secs: 0,
            version: 1,
        };
        assert_eq!(spec.missed_run_policy(POLICY).misfire_threshold_secs, 10);
        assert_eq!(spec.missed_run_policy(POLICY).grace_secs, 2);
        spec.misfire_threshold_secs = None;
        assert_eq!(spec.missed_run_policy(POLICY), POLICY);
    }

    #[test]
    fn several_periods_missed_under_a_short_threshold_is_one_missed_row() {
        let policy = MissedRunPolicy {
            grace_secs: 2,
            misfire_threshold_secs: 1,
        };
        let plan = plan_fires(&cron("* * * * * *"), at(1, 0, 0), at(1, 0, 9), policy);
        assert_eq!(plan.decisions, vec![RunDecision::Missed(at(1, 0, 0))]);
        assert_eq!(plan.next, Some(at(1, 0, 9)));
        assert_eq!(plan.periods, 10, "01:00:00 through 01:00:09");
    }

    #[test]
    fn a_stalled_tasks_one_run_counts_the_periods_it_stands_for() {
        let plan = plan_fires(&cron("*/10 * * * * *"), at(1, 0, 0), at(1, 1, 0), POLICY);
        assert_eq!(plan.decisions, vec![RunDecision::Fire(at(1, 0, 0))]);
        assert_eq!(plan.periods, 7, "01:00:00, :10, … 01:01:00");
        let on_time = plan_fires(&cron("* * * * * *"), at(1, 0, 0), at(1, 0, 2), POLICY);
        assert_eq!((on_time.decisions.len(), on_time.periods), (3, 3));
        let huge = periods(
            &cron("* * * * * *"),
            at(0, 0, 0),
            at(23, 59, 59) + Duration::days(30),
        );
        assert_eq!(huge, MAX_COUNTED_PERIODS);
    }

    #[test]
    fn on_time_fires_once_and_moves_to_the_next_period() {
        let plan = plan_fires(&cron("*/10 * * * * *"), at(1, 0, 10), at(1, 0, 10), POLICY);
        assert_eq!(plan.decisions, vec![RunDecision::Fire(at(1, 0, 10))]);
        assert_eq!(plan.next, Some(at(1, 0, 20)));
    }

    #[test]
    fn a_late_tick_within_grace_fires_every_skipped_second() {
        let plan = plan_fires(&cron("* * * * * *"), at(1, 0, 10), at(1, 0, 12), POLICY);
        assert_eq!(
            plan.decisions,
            vec![
                RunDecision::Fire(at(1, 0, 10)),
                RunDecision::Fire(at(1, 0, 11)),
                RunDecision::Fire(at(1, 0, 12)),
            ]
        );
        assert_eq!(plan.next, Some(at(1, 0, 13)));
    }

    #[test]
    fn stalled_under_threshold_fires_once_however_many_periods_were_missed() {
        // 299 s late, 299 every-second periods missed: one run, for the first missed time.
        let plan = plan_fires(&cron("* * * * * *"), at(1, 0, 0), at(1, 4, 59), POLICY);
        assert_eq!(plan.decisions, vec![RunDecision::Fire(at(1, 0, 0))]);
        assert_eq!(plan.next, Some(at(1, 4, 59)));
    }

    #[test]
    fn stalled_exactly_at_threshold_still_fires() {
        let plan = plan_fires(&cron("0 * * * * *"), at(1, 0, 0), at(1, 5, 0), POLICY);
        assert_eq!(plan.decisions, vec![RunDecision::Fire(at(1, 0, 0))]);
        assert_eq!(plan.next, Some(at(1, 5, 0)));
    }

    #[test]
    fn stalled_over_threshold_is_missed_and_resumes_in_the_future() {
        let plan = plan_fires(&cron("0 * * * * *"), at(1, 0, 0), at(1, 5, 1), POLICY);
        assert_eq!(plan.decisions, vec![RunDecision::Missed(at(1, 0, 0))]);
        assert_eq!(plan.next, Some(at(1, 6, 0)));
    }
}
