//! What fires when: the plan for a task whose time came, including the missed-run policy.
//! Pure logic, no I/O: time is always an argument.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use chrono::{DateTime, Duration, Utc};

use crate::cron::{CronError, CronSchedule};
use crate::store::models::{InstanceStatus, Task, TaskStatus};

/// What the scheduler needs to fire a task, parsed once when the task enters the wheel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskSpec {
    pub id: i64,
    pub cron: CronSchedule,
    pub handler_url: String,
    /// The task's params as JSON text, sent as they are.
    pub params: Arc<str>,
    pub timeout_ms: i64,
    /// The task's own misfire threshold, if it has one.
    pub misfire_threshold_secs: Option<i64>,
    /// Whether its runs wait for upstream tasks (PENDING) before dispatch.
    pub has_dependencies: bool,
    /// The task's own dependency timeout, if it has one.
    pub dependency_timeout_secs: Option<i64>,
}

impl TaskSpec {
    /// The spec of a stored task.
    pub fn from_task(task: &Task, has_dependencies: bool) -> Result<TaskSpec, CronError> {
        Ok(TaskSpec {
            id: task.id,
            cron: CronSchedule::parse(&task.cron)?,
            handler_url: task.handler_url.clone(),
            params: task.params.as_str().into(),
            timeout_ms: task.timeout_ms,
            misfire_threshold_secs: task.misfire_threshold_secs.map(i64::from),
            has_dependencies,
            dependency_timeout_secs: task.dependency_timeout_secs.map(i64::from),
        })
    }

    /// What a stored task puts in the wheel: its spec and next run, if it is enabled and has
    /// one. A stored cron that no longer parses is logged and left out.
    pub fn wheel_entry(
        task: &Task,
        has_dependencies: bool,
    ) -> Option<(Arc<TaskSpec>, DateTime<Utc>)> {
        if task.status != TaskStatus::Enabled.as_str() {
            return None;
        }
        let next = task.next_run_at?.and_utc();
        match TaskSpec::from_task(task, has_dependencies) {
            Ok(spec) => Some((Arc::new(spec), next)),
            Err(err) => {
                log::error!("task {}: stored cron is invalid: {err}", task.id);
                None
            }
        }
    }

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

/// Slack beyond a task's timeout before a dispatcher's claim on an attempt lapses: time to
/// record the outcome. A claim that lapses means the dispatcher died; the attempt is redone.
pub const CLAIM_MARGIN_SECS: i64 = 10;

/// When a claim on an attempt started at `now` lapses.
pub fn claim_until(now: DateTime<Utc>, timeout_ms: i64) -> DateTime<Utc> {
    now + Duration::milliseconds(timeout_ms) + Duration::seconds(CLAIM_MARGIN_SECS)
}

/// Longest wait between two attempts, whatever the back-off says.
pub const MAX_RETRY_DELAY_SECS: i64 = 7 * 24 * 60 * 60;

/// Exponential back-off: retry n waits `backoff_secs · factor^(n-1)` (5 s, 25 s, 125 s … by
/// default).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    pub backoff_secs: i64,
    pub factor: i64,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            backoff_secs: 5,
            factor: 5,
        }
    }
}

impl RetryPolicy {
    /// The policy of a task: its own values where set, else these.
    pub fn with_overrides(self, backoff_secs: Option<i32>, factor: Option<i32>) -> Self {
        RetryPolicy {
            backoff_secs: backoff_secs.map_or(self.backoff_secs, i64::from),
            factor: factor.map_or(self.factor, i64::from),
        }
    }

    /// How long retry number `retry` (1-based) waits after the failed attempt.
    pub fn delay(&self, retry: i32) -> Duration {
        let mut secs = self.backoff_secs.max(0);
        for _ in 1..retry.max(1) {
            secs = secs.saturating_mul(self.factor.max(1));
            if secs >= MAX_RETRY_DELAY_SECS {
                break;
            }
        }
        Duration::seconds(secs.min(MAX_RETRY_DELAY_SECS))
    }
}

/// What a failed attempt leads to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureDecision {
    /// Attempt again at `at`; this is retry number `retry`.
    Retry { at: DateTime<Utc>, retry: i32 },
    /// The run is FAILED for good.
    GiveUp,
}

/// Decides what follows a failed attempt of a run that has used `retries_used` of `max_retry`
/// retries. `retry_allowed` is false when the executor said not to retry.
pub fn on_failure(
    retries_used: i32,
    max_retry: i32,
    retry_allowed: bool,
    policy: RetryPolicy,
    failed_at: DateTime<Utc>,
) -> FailureDecision {
    if !retry_allowed || retries_used >= max_retry {
        return FailureDecision::GiveUp;
    }
    let retry = retries_used + 1;
    FailureDecision::Retry {
        at: failed_at + policy.delay(retry),
        retry,
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

/// Where a run stands when a report about it arrives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunState {
    pub status: InstanceStatus,
    pub attempt: i32,
    pub retries_used: i32,
    pub max_retry: i32,
}

/// A report about a run: the dispatcher's (RUNNING or a reply's result), an executor's callback,
/// or an expiry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Report {
    /// RUNNING, SUCCESS or FAILED.
    pub status: InstanceStatus,
    /// The attempt reported on; `None` means the current one.
    pub attempt: Option<i32>,
    /// False when the executor said not to retry.
    pub retry_allowed: bool,
    pub at: DateTime<Utc>,
}

/// What a report does to a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReportDecision {
    /// The run is final already: nothing changes.
    AlreadyFinal(InstanceStatus),
    /// The report is about an attempt that was already dealt with: nothing changes.
    Superseded,
    /// The handler accepted the attempt; its result comes by callback.
    Running,
    /// The run ends in this state.
    Finish(InstanceStatus),
    /// The attempt failed; attempt `attempt` is due at `at`.
    Retry {
        at: DateTime<Utc>,
        attempt: i32,
        retry: i32,
    },
}

/// Decides what a report does to a run. A SUCCESS counts whenever the run is open, even for an
/// attempt that timed out (it ends the run and cancels the pending retry); a failure of an
/// earlier attempt was already counted when that attempt ended, so it changes nothing.
pub fn decide_report(run: RunState, report: Report, policy: RetryPolicy) -> ReportDecision {
    if run.status.is_final() {
        return ReportDecision::AlreadyFinal(run.status);
    }
    let current = report.attempt.is_none_or(|attempt| attempt == run.attempt);
    match report.status {
        InstanceStatus::Success => ReportDecision::Finish(InstanceStatus::Success),
        InstanceStatus::Running if current && run.status == InstanceStatus::Ready => {
            ReportDecision::Running
        }
        InstanceStatus::Failed if current => {
            match on_failure(
                run.retries_used,
                run.max_retry,
                report.retry_allowed,
                policy,
                report.at,
            ) {
                FailureDecision::GiveUp => ReportDecision::Finish(InstanceStatus::Failed),
                FailureDecision::Retry { at, retry } => ReportDecision::Retry {
                    at,
                    attempt: run.attempt + 1,
                    retry,
                },
            }
        }
        _ => ReportDecision::Superseded,
    }
}

/// The cycle that giving `task` these upstreams would close, if any (as a path from `task`
/// back to itself). `edges` are the existing (task, upstream) pairs; `task`'s own are replaced.
pub fn dependency_cycle(edges: &[(i64, i64)], task: i64, depends_on: &[i64]) -> Option<Vec<i64>> {
    let mut upstreams: HashMap<i64, Vec<i64>> = HashMap::new();
    for &(from, to) in edges.iter().filter(|(from, _)| *from != task) {
        upstreams.entry(from).or_default().push(to);
    }
    upstreams.insert(task, depends_on.to_vec());
    // Depth-first from `task`; a path that comes back to it is the cycle.
    let mut stack = vec![(task, vec![task])];
    let mut seen = HashSet::new();
    while let Some((node, path)) = stack.pop() {
        for &next in upstreams.get(&node).map(Vec::as_slice).unwrap_or(&[]) {
            if next == task {
                let mut cycle = path.clone();
                cycle.push(task);
                return Some(cycle);
            }
            if seen.insert(next) {
                let mut longer = path.clone();
                longer.push(next);
                stack.push((next, longer));
            }
        }
    }
    None
}

/// What a run waiting for its upstreams does now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DependencyDecision {
    /// Every upstream's latest run at or before the run's time succeeded: dispatch it.
    Release,
    /// Keep waiting.
    Wait,
    /// End the run FAILED with this code, without retries.
    Fail(&'static str),
}

/// Decides for a run waiting on upstreams, given each upstream's latest run scheduled at or
/// before it (`None`: no such run yet) and the run's dependency deadline.
pub fn dependency_decision(
    upstreams: &[Option<InstanceStatus>],
    now: DateTime<Utc>,
    deadline: DateTime<Utc>,
) -> DependencyDecision {
    let failed = |s: &Option<InstanceStatus>| {
        s.is_some_and(|s| s.is_final() && s != InstanceStatus::Success)
    };
    if upstreams.iter().any(failed) {
        DependencyDecision::Fail("UPSTREAM_FAILED")
    } else if upstreams
        .iter()
        .all(|s| *s == Some(InstanceStatus::Success))
    {
        DependencyDecision::Release
    } else if now >= deadline {
        DependencyDecision::Fail("DEPENDENCY_TIMEOUT")
    } else {
        DependencyDecision::Wait
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
    fn backoff_is_five_times_longer_each_retry() {
        let policy = RetryPolicy::default();
        let delays: Vec<i64> = (1..=5).map(|n| policy.delay(n).num_seconds()).collect();
        assert_eq!(delays, vec![5, 25, 125, 625, 3125]);
        let custom = policy.with_overrides(Some(2), Some(3));
        assert_eq!(custom.delay(3).num_seconds(), 18);
        assert_eq!(
            policy.with_overrides(None, Some(1)).delay(9).num_seconds(),
            5
        );
        assert_eq!(policy.delay(1000).num_seconds(), MAX_RETRY_DELAY_SECS);
    }

    #[test]
    fn failures_retry_until_max_retry_is_used() {
        let t = at(1, 0, 0);
        let policy = RetryPolicy::default();
        assert_eq!(
            on_failure(0, 3, true, policy, t),
            FailureDecision::Retry {
                at: at(1, 0, 5),
                retry: 1
            }
        );
        assert_eq!(
            on_failure(2, 3, true, policy, t),
            FailureDecision::Retry {
                at: at(1, 2, 5),
                retry: 3
            }
        );
        assert_eq!(on_failure(3, 3, true, policy, t), FailureDecision::GiveUp);
        assert_eq!(on_failure(0, 0, true, policy, t), FailureDecision::GiveUp);
    }

    #[test]
    fn the_executor_can_stop_retries() {
        let policy = RetryPolicy::default();
        assert_eq!(
            on_failure(0, 10, false, policy, at(1, 0, 0)),
            FailureDecision::GiveUp
        );
    }

    #[test]
    fn a_task_threshold_overrides_the_global_one() {
        let mut spec = TaskSpec {
            id: 1,
            cron: cron("* * * * * *"),
            handler_url: "http://h/".into(),
            params: "{}".into(),
            timeout_ms: 1000,
            misfire_threshold_secs: Some(10),
            has_dependencies: false,
            dependency_timeout_secs: None,
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
    }

    fn run(status: InstanceStatus, attempt: i32) -> RunState {
        RunState {
            status,
            attempt,
            retries_used: attempt - 1,
            max_retry: 3,
        }
    }

    fn report(status: InstanceStatus, attempt: Option<i32>) -> Report {
        Report {
            status,
            attempt,
            retry_allowed: true,
            at: at(1, 0, 0),
        }
    }

    #[test]
    fn a_failed_attempt_schedules_the_next_one() {
        let decision = decide_report(
            run(InstanceStatus::Running, 1),
            report(InstanceStatus::Failed, Some(1)),
            RetryPolicy::default(),
        );
        assert_eq!(
            decision,
            ReportDecision::Retry {
                at: at(1, 0, 5),
                attempt: 2,
                retry: 1
            }
        );
        let last = RunState {
            retries_used: 3,
            ..run(InstanceStatus::Running, 4)
        };
        let decision = decide_report(
            last,
            report(InstanceStatus::Failed, None),
            RetryPolicy::default(),
        );
        assert_eq!(decision, ReportDecision::Finish(InstanceStatus::Failed));
    }

    #[test]
    fn a_late_success_ends_a_run_waiting_for_its_retry() {
        // Attempt 1 timed out; the run waits (READY) for attempt 2; attempt 1's SUCCESS comes.
        let waiting = run(InstanceStatus::Ready, 2);
        let decision = decide_report(
            waiting,
            report(InstanceStatus::Success, Some(1)),
            RetryPolicy::default(),
        );
        assert_eq!(decision, ReportDecision::Finish(InstanceStatus::Success));
    }

    #[test]
    fn a_late_failure_of_an_earlier_attempt_changes_nothing() {
        let waiting = run(InstanceStatus::Ready, 2);
        let decision = decide_report(
            waiting,
            report(InstanceStatus::Failed, Some(1)),
            RetryPolicy::default(),
        );
        assert_eq!(decision, ReportDecision::Superseded);
        let running_late = decide_report(
            waiting,
            report(InstanceStatus::Running, Some(1)),
            RetryPolicy::default(),
        );
        assert_eq!(running_late, ReportDecision::Superseded);
    }

    #[test]
    fn a_result_after_the_run_is_final_changes_nothing() {
        for status in [
            InstanceStatus::Success,
            InstanceStatus::Failed,
            InstanceStatus::Missed,
        ] {
            for reported in [
                InstanceStatus::Success,
                InstanceStatus::Failed,
                InstanceStatus::Running,
            ] {
                let decision = decide_report(
                    run(status, 1),
                    report(reported, None),
                    RetryPolicy::default(),
                );
                assert_eq!(decision, ReportDecision::AlreadyFinal(status));
            }
        }
    }

    #[test]
    fn running_only_follows_ready() {
        let policy = RetryPolicy::default();
        let ready = run(InstanceStatus::Ready, 1);
        assert_eq!(
            decide_report(ready, report(InstanceStatus::Running, Some(1)), policy),
            ReportDecision::Running
        );
        let running = run(InstanceStatus::Running, 1);
        assert_eq!(
            decide_report(running, report(InstanceStatus::Running, None), policy),
            ReportDecision::Superseded
        );
    }

    #[test]
    fn no_retry_from_the_executor_ends_the_run() {
        let decision = decide_report(
            run(InstanceStatus::Running, 1),
            Report {
                retry_allowed: false,
                ..report(InstanceStatus::Failed, None)
            },
            RetryPolicy::default(),
        );
        assert_eq!(decision, ReportDecision::Finish(InstanceStatus::Failed));
    }

    #[test]
    fn cycles_are_found_however_long() {
        // 1 waits on 2, 2 on 3.
        let edges = [(1, 2), (2, 3)];
        assert_eq!(dependency_cycle(&edges, 3, &[1]), Some(vec![3, 1, 2, 3]));
        assert_eq!(dependency_cycle(&edges, 2, &[1]), Some(vec![2, 1, 2]));
        assert_eq!(dependency_cycle(&edges, 4, &[4]), Some(vec![4, 4]));
        assert_eq!(dependency_cycle(&edges, 4, &[1, 3]), None);
        // Replacing 2's upstreams removes the edge 2 → 3.
        assert_eq!(dependency_cycle(&edges, 2, &[]), None);
        assert_eq!(dependency_cycle(&[(1, 2), (2, 1)], 1, &[3]), None);
    }

    #[test]
    fn a_waiting_run_is_released_only_when_every_upstream_succeeded() {
        use InstanceStatus::*;
        let (now, deadline) = (at(1, 0, 0), at(2, 0, 0));
        let decide = |ups: &[Option<InstanceStatus>]| dependency_decision(ups, now, deadline);
        assert_eq!(
            decide(&[Some(Success), Some(Success)]),
            DependencyDecision::Release
        );
        assert_eq!(
            decide(&[Some(Success), Some(Running)]),
            DependencyDecision::Wait
        );
        assert_eq!(decide(&[Some(Success), None]), DependencyDecision::Wait);
        assert_eq!(
            decide(&[Some(Ready), Some(Failed)]),
            DependencyDecision::Fail("UPSTREAM_FAILED")
        );
        assert_eq!(
            decide(&[Some(Missed)]),
            DependencyDecision::Fail("UPSTREAM_FAILED")
        );
        assert_eq!(
            dependency_decision(&[None], deadline, deadline),
            DependencyDecision::Fail("DEPENDENCY_TIMEOUT")
        );
        assert_eq!(
            dependency_decision(&[Some(Success)], deadline, deadline),
            DependencyDecision::Release
        );
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
