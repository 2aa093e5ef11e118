//! Planning what a tick took from the wheel: each task's runs by the missed-run policy, its
//! next run put back in the wheel, and the batches queued for the fire pipeline; stalled tasks
//! told in one line.

use std::collections::HashMap;
use std::sync::Arc;

use chrono::{DateTime, TimeZone, Utc};

use super::{Batch, WheelActor, WheelEntry, WheelKey, RESCUE_LATE_SECS};
use crate::actors::fire::PlannedFire;
use ax_core::plan::{
    plan_each, plan_fires, FirePlan, MissedRunPolicy, RunDecision, TaskSpec, MAX_COUNTED_PERIODS,
};
use ax_core::run::TaskId;
use ax_core::time::clock::rfc3339;
use ax_core::wheel::Due;
use ax_store::queries::due::DueAttempt;

impl WheelActor {
    /// Plans entries, each with the second the wheel took it at, through `step`: each run to
    /// fire at its own second (or now if that passed); puts each task's next run in the wheel,
    /// and queues the batches. An entry is late by how long it was due when the wheel took
    /// it: a wheel behind the clock is ax's own lag, and those runs go out late, each by itself
    /// (so do the ones held back while their task's previous batch committed); an entry put in
    /// behind the wheel is a stalled task's, for the missed-run policy.
    pub(super) fn plan(
        &mut self,
        due: Vec<(Due<WheelKey, WheelEntry>, i64)>,
        now: DateTime<Utc>,
        step: i64,
        stalls: &mut Stalls,
    ) {
        let mut planned = Planned::default();
        let share = self.share();
        let seen = at_second(step).min(now);
        let horizon = now.timestamp() + self.settings.window_secs;
        for (entry, taken) in due {
            let fire_at = if entry.due_sec > now.timestamp() {
                at_second(entry.due_sec)
            } else {
                now
            };
            match entry.value {
                WheelEntry::Task(ref spec) if self.busy.contains(&spec.id) => {
                    self.deferred.insert(spec.id, (entry, taken));
                }
                WheelEntry::Task(spec) => {
                    self.busy.insert(spec.id);
                    let policy = spec.missed_run_policy(self.settings.policy);
                    let due = at_second(entry.due_sec);
                    let late = (at_second(taken).min(now) - due).num_seconds();
                    let rescued = self.rescued.remove(&spec.id) && late <= RESCUE_LATE_SECS;
                    let plan = if late <= policy.grace_secs || rescued {
                        plan_each(&spec.cron, due, seen)
                    } else {
                        plan_fires(&spec.cron, due, seen, policy)
                    };
                    stalls.count(&spec, &plan, seen, policy);
                    // The next run enters the wheel now, if the task is this process's; if
                    // this fire turns out stale, a refresh from the database corrects it.
                    let next = plan.next.filter(|next| next.timestamp() <= horizon);
                    if let Some(next) = next.filter(|_| share.owns(spec.id)) {
                        let (key, value) =
                            (WheelKey::Task(spec.id), WheelEntry::Task(spec.clone()));
                        self.wheel.insert(key, next.timestamp(), value);
                    }
                    planned.add_fire(spec, plan, now, fire_at);
                }
                WheelEntry::Attempt(attempt) => planned.attempts.push((attempt, fire_at)),
            }
        }
        let batch_size = self.fire.batch_size;
        let fires = chunks(planned.fires, batch_size)
            .into_iter()
            .map(Batch::Fires);
        let attempts = chunks(planned.attempts, batch_size)
            .into_iter()
            .map(Batch::Attempts);
        self.backlog.extend(fires.chain(attempts));
    }
}

/// What one tick fires: each task once, with all its runs in order (one batch takes its lock
/// and advances it), and the attempts.
#[derive(Default)]
struct Planned {
    fires: Vec<PlannedFire>,
    index: HashMap<TaskId, usize>,
    attempts: Vec<(Arc<DueAttempt>, DateTime<Utc>)>,
}

impl Planned {
    fn add_fire(
        &mut self,
        spec: Arc<TaskSpec>,
        plan: FirePlan,
        planned_at: DateTime<Utc>,
        fire_at: DateTime<Utc>,
    ) {
        match self.index.get(&spec.id) {
            Some(&at) => self.fires[at].plans.push((plan, fire_at)),
            None => {
                self.index.insert(spec.id, self.fires.len());
                self.fires.push(PlannedFire {
                    spec,
                    plans: vec![(plan, fire_at)],
                    planned_at,
                });
            }
        }
    }
}

/// The stalled tasks one pump found, told in one line rather than one per task (a start-up
/// after downtime finds every task stalled).
#[derive(Default)]
pub(super) struct Stalls {
    fired_once: usize,
    missed: usize,
    /// Schedule periods the stalled tasks' runs stand for, all told; at least that many when
    /// one count stopped at `MAX_COUNTED_PERIODS`.
    periods: u64,
    capped: bool,
    /// The first stalled task: its id, run, lateness and periods.
    example: Option<(TaskId, DateTime<Utc>, i64, u64)>,
}

impl Stalls {
    /// Counts a plan of the missed-run policy: its one run stands for the periods missed.
    fn count(
        &mut self,
        spec: &TaskSpec,
        plan: &FirePlan,
        seen: DateTime<Utc>,
        policy: MissedRunPolicy,
    ) {
        let [only] = plan.decisions.as_slice() else {
            return;
        };
        let late = (seen - only.scheduled_at()).num_seconds();
        match only {
            RunDecision::Fire(_) if late > policy.grace_secs => self.fired_once += 1,
            RunDecision::Missed(_) => self.missed += 1,
            RunDecision::Fire(_) => return,
        }
        self.periods += plan.periods;
        self.capped |= plan.periods >= MAX_COUNTED_PERIODS;
        self.example
            .get_or_insert((spec.id, only.scheduled_at(), late, plan.periods));
    }

    pub(super) fn log(&self) {
        if let Some((task, at, late, periods)) = self.example {
            log::warn!(
                "{} stalled tasks fire once, {} past the misfire threshold are recorded MISSED: \
                 one run each for the {}{} periods they missed (e.g. task {task}: the run \
                 scheduled at {} is {late} s late and stands for {periods} periods)",
                self.fired_once,
                self.missed,
                if self.capped { "at least " } else { "" },
                self.periods,
                rfc3339(at),
            );
        }
    }
}

pub(super) fn at_second(secs: i64) -> DateTime<Utc> {
    Utc.timestamp_opt(secs, 0)
        .single()
        .unwrap_or(DateTime::<Utc>::MAX_UTC)
}

fn chunks<T>(items: Vec<T>, size: usize) -> Vec<Vec<T>> {
    let mut out = Vec::with_capacity(items.len().div_ceil(size.max(1)));
    let mut items = items.into_iter().peekable();
    while items.peek().is_some() {
        out.push(items.by_ref().take(size.max(1)).collect());
    }
    out
}
