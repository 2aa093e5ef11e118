//! What fires when: the plan for a task whose time came, including the missed-run policy.
//! Pure logic, no I/O: time is always an argument.

use std::sync::Arc;

use chrono::{DateTime, Duration, Utc};

use crate::cron::{CronError, CronSchedule};
use crate::store::models::Task;

/// What the scheduler needs to fire a task, parsed once when the task enters the wheel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskSpec {
    pub id: i64,
    pub cron: CronSchedule,
    pub handler_url: String,
    /// The task's params as JSON text, sent as they are.
    pub params: Arc<str>,
    pub timeout_ms: i64,
    pub max_retry: i32,
}

impl TaskSpec {
    /// The spec of a stored task.
    pub fn from_task(task: &Task) -> Result<TaskSpec, CronError> {
        Ok(TaskSpec {
            id: task.id,
            cron: CronSchedule::parse(&task.cron)?,
            handler_url: task.handler_url.clone(),
            params: task.params.as_str().into(),
            timeout_ms: task.timeout_ms,
            max_retry: task.max_retry,
        })
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
}

/// Plans the runs of a task due at `due`, seen at `now`.
pub fn plan_fires(
    cron: &CronSchedule,
    due: DateTime<Utc>,
    now: DateTime<Utc>,
    policy: MissedRunPolicy,
) -> FirePlan {
    let lateness = (now - due).num_seconds();
    if lateness <= policy.grace_secs {
        // On time, or a tick came a little late: every run up to now fires by itself.
        let mut decisions = vec![RunDecision::Fire(due)];
        let mut next = cron.next_after(due);
        while let Some(at) = next.filter(|at| *at <= now) {
            decisions.push(RunDecision::Fire(at));
            next = cron.next_after(at);
        }
        return FirePlan { decisions, next };
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

    fn cron(expr: &str) -> CronSchedule {
        CronSchedule::parse(expr).expect("valid cron")
    }

    const POLICY: MissedRunPolicy = MissedRunPolicy {
        grace_secs: 2,
        misfire_threshold_secs: 300,
    };

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
