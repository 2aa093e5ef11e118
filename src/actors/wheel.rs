//! WheelActor: holds the next window of due runs in the time wheel and fires them: lock →
//! store (commit, `commit_ahead` before the run's second) → dispatch (at the run's second).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;
use chrono::{DateTime, TimeZone, Utc};
use tokio::sync::watch;

use super::dispatch::{DispatchHandle, DispatchJob};
use super::lock::LockHandle;
use super::store::{boxed, StoreHandle};
use super::InFlight;
use crate::clock::SharedClock;
use crate::ids::scheduled_request_id;
use crate::metrics::{add, metrics};
use crate::schedule::{claim_until, plan_fires, FirePlan, MissedRunPolicy, RunDecision, TaskSpec};
use crate::store::models::{InstanceStatus, NewInstance, TriggerType};
use crate::store::queries::instances::{Claim, DueAttempt, FireOutcome, FireRecord};
use crate::store::queries::tasks;
use crate::store::{from_db, to_db};
use crate::wheel::{Due, TimeWheel};

/// What the firing pipeline needs, shared by every tick.
#[derive(Clone)]
pub struct FireContext {
    pub lock: LockHandle,
    pub store: StoreHandle,
    pub dispatch: DispatchHandle,
    pub instance_id: String,
    /// Most runs per store transaction.
    pub batch_size: usize,
    /// How long a run waits for its upstreams, unless its task says otherwise.
    pub dependency_timeout_secs: i64,
}

/// Settings of the wheel.
#[derive(Debug, Clone)]
pub struct WheelSettings {
    pub slots: usize,
    pub tick_interval: Duration,
    /// How far ahead runs are held.
    pub window_secs: i64,
    /// How long before its time a run is committed; it is dispatched at its time.
    pub commit_ahead: Duration,
    pub policy: MissedRunPolicy,
}

/// What the wheel holds: a task's next scheduled run, or a run's next attempt.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum WheelKey {
    Task(i64),
    Attempt(String),
}

/// The payload of a wheel entry.
#[derive(Debug, Clone)]
pub enum WheelEntry {
    Task(Arc<TaskSpec>),
    Attempt(Arc<DueAttempt>),
}

/// The actor holding the time wheel.
pub struct WheelActor {
    wheel: TimeWheel<WheelKey, WheelEntry>,
    settings: WheelSettings,
    clock: SharedClock,
    fire: FireContext,
    ticking: bool,
    in_flight: InFlight,
    /// The second the wheel has reached: runs committed ahead wait for it to be dispatched.
    reached: watch::Sender<i64>,
}

impl WheelActor {
    pub fn new(settings: WheelSettings, clock: SharedClock, fire: FireContext) -> Self {
        let now = clock.now().timestamp();
        WheelActor {
            // Start one second back so that a run due this very second still fires.
            wheel: TimeWheel::new(settings.slots, now - 1),
            settings,
            clock,
            fire,
            ticking: true,
            in_flight: InFlight::default(),
            reached: watch::Sender::new(now - 1),
        }
    }

    /// Schedules the next tick on the next whole second, when that second's runs are released,
    /// or `commit_ahead` before it, when they are committed, whichever is sooner (or sooner
    /// still, for a shorter interval): the time is always read from the clock, so late ticks
    /// never drift.
    fn schedule_tick(&self, ctx: &mut Context<Self>) {
        let now = self.clock.now();
        let to_next = |at: DateTime<Utc>| {
            Duration::from_millis(1_000 - u64::from(at.timestamp_subsec_millis().min(999)))
        };
        let delay = self
            .settings
            .tick_interval
            .min(to_next(now))
            .min(to_next(now + self.commit_ahead()));
        // Ticks go on after `StopTicking`: runs committed ahead still wait for their second.
        ctx.run_later(delay, |act, ctx| {
            act.tick(ctx);
            act.schedule_tick(ctx);
        });
    }

    /// Releases the runs committed for this second, then takes what is due up to
    /// `commit_ahead` from now and commits it; each run is dispatched at its second.
    fn tick(&mut self, ctx: &mut Context<Self>) {
        let now = self.clock.now();
        self.reached.send_replace(now.timestamp());
        if !self.ticking {
            return;
        }
        let reach = (now + self.commit_ahead()).timestamp();
        let mut due = self.wheel.advance(reach);
        let mut planned = Planned::default();
        while !due.is_empty() {
            self.plan(due, now, &mut planned);
            // A next run that falls within reach is planned now too, or it would lose its lead.
            due = self.wheel.advance(reach);
        }
        for chunk in chunks(planned.fires, self.fire.batch_size) {
            let batch = fire_batch(self.fire.clone(), ctx.address(), chunk, self.release());
            actix::spawn(self.in_flight.track(batch));
        }
        for chunk in chunks(planned.attempts, self.fire.batch_size) {
            let batch = attempt_batch(self.fire.clone(), chunk, self.release());
            actix::spawn(self.in_flight.track(batch));
        }
    }

    /// Plans due entries, each at the second it fires at (its own, or now if that passed), and
    /// puts each task's next run in the wheel.
    fn plan(
        &mut self,
        due: Vec<Due<WheelKey, WheelEntry>>,
        now: DateTime<Utc>,
        planned: &mut Planned,
    ) {
        let horizon = now.timestamp() + self.settings.window_secs;
        for entry in due {
            let fire_at = if entry.due_sec > now.timestamp() {
                at_second(entry.due_sec)
            } else {
                now
            };
            match entry.value {
                WheelEntry::Task(spec) => {
                    let policy = spec.missed_run_policy(self.settings.policy);
                    let plan = plan_fires(&spec.cron, at_second(entry.due_sec), fire_at, policy);
                    log_stall(&spec, &plan, fire_at, policy);
                    // The next run enters the wheel now; if this fire turns out stale, a
                    // refresh from the database corrects it.
                    if let Some(next) = plan.next.filter(|next| next.timestamp() <= horizon) {
                        let (key, value) =
                            (WheelKey::Task(spec.id), WheelEntry::Task(spec.clone()));
                        self.wheel.insert(key, next.timestamp(), value);
                    }
                    planned.add_fire(spec, plan, now, fire_at);
                }
                WheelEntry::Attempt(attempt) => planned.attempts.push((attempt, fire_at)),
            }
        }
    }

    /// The second of the last tick, for health checks.
    pub fn ticks(&self) -> watch::Receiver<i64> {
        self.reached.subscribe()
    }

    fn commit_ahead(&self) -> chrono::Duration {
        chrono::Duration::from_std(self.settings.commit_ahead).unwrap_or_default()
    }

    fn release(&self) -> Release {
        Release(self.reached.subscribe())
    }

    /// Puts an entry in the wheel if it is due within the window; otherwise takes the key out
    /// (a later top-up brings it back in time).
    fn schedule(&mut self, key: WheelKey, entry: WheelEntry, due: DateTime<Utc>) {
        let horizon = self.clock.now().timestamp() + self.settings.window_secs;
        if due.timestamp() <= horizon {
            self.wheel.insert(key, due.timestamp(), entry);
        } else {
            self.wheel.remove(&key);
        }
    }
}

impl Actor for WheelActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        self.schedule_tick(ctx);
    }
}

/// What one tick fires: each task once, with all its runs in order (one batch takes its lock
/// and advances it), and the attempts.
#[derive(Default)]
struct Planned {
    fires: Vec<PlannedFire>,
    index: HashMap<i64, usize>,
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

/// A task's fires as planned by a tick: each plan with the time its runs fire at.
struct PlannedFire {
    spec: Arc<TaskSpec>,
    plans: Vec<(FirePlan, DateTime<Utc>)>,
    /// When the tick planned it: the rows' `created_at`.
    planned_at: DateTime<Utc>,
}

/// Holds committed runs back until the wheel reaches their second.
struct Release(watch::Receiver<i64>);

impl Release {
    /// Hands the runs to the dispatchers, each once the wheel has reached its second.
    async fn dispatch_in_time(
        mut self,
        dispatch: &DispatchHandle,
        mut jobs: Vec<(DateTime<Utc>, DispatchJob)>,
    ) {
        jobs.sort_by_key(|(fire_at, _)| fire_at.timestamp());
        let mut jobs = jobs.into_iter().peekable();
        while let Some((fire_at, _)) = jobs.peek() {
            let second = fire_at.timestamp();
            // A wheel gone (shutdown) releases everything: the runs are committed and due.
            let _ = self.0.wait_for(|reached| *reached >= second).await;
            let now: Vec<DispatchJob> =
                std::iter::from_fn(|| jobs.next_if(|(at, _)| at.timestamp() == second))
                    .map(|(_, job)| job)
                    .collect();
            dispatch.dispatch(now).await;
        }
    }
}

/// Says why a stalled task fires once or records MISSED (the policy's decision).
fn log_stall(spec: &TaskSpec, plan: &FirePlan, now: DateTime<Utc>, policy: MissedRunPolicy) {
    if let [only] = plan.decisions.as_slice() {
        let late = (now - only.scheduled_at()).num_seconds();
        match only {
            RunDecision::Fire(at) if late > policy.grace_secs => log::warn!(
                "task {}: run scheduled at {at} is {late} s late: firing it once for every \
                 missed period",
                spec.id
            ),
            RunDecision::Missed(at) => log::warn!(
                "task {}: run scheduled at {at} is {late} s late, past the misfire threshold: \
                 recording MISSED",
                spec.id
            ),
            RunDecision::Fire(_) => {}
        }
    }
}

fn at_second(secs: i64) -> DateTime<Utc> {
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

/// The rows to record for one task's plan: each decision advances `next_run_at` from its own
/// time to the next decision's time, the last one to the plan's `next`.
fn fire_records(
    spec: &TaskSpec,
    (plan, fire_at): &(FirePlan, DateTime<Utc>),
    planned_at: DateTime<Utc>,
    fire: &FireContext,
) -> Vec<FireRecord> {
    let fired_by = fire.instance_id.as_str();
    let dependency_timeout_secs = spec
        .dependency_timeout_secs
        .unwrap_or(fire.dependency_timeout_secs);
    let mut records = Vec::with_capacity(plan.decisions.len());
    for (i, decision) in plan.decisions.iter().enumerate() {
        let advance_to = plan
            .decisions
            .get(i + 1)
            .map(|d| d.scheduled_at())
            .or(plan.next);
        let scheduled_at = decision.scheduled_at();
        let (status, finished_at, claimed_until, deadline) = match decision {
            // It waits for its upstreams; the supervisor releases it.
            RunDecision::Fire(_) if spec.has_dependencies => (
                InstanceStatus::Pending,
                None,
                None,
                Some(to_db(
                    scheduled_at + chrono::Duration::seconds(dependency_timeout_secs),
                )),
            ),
            RunDecision::Fire(_) => (
                InstanceStatus::Ready,
                None,
                Some(to_db(claim_until(*fire_at, spec.timeout_ms))),
                None,
            ),
            RunDecision::Missed(_) => (InstanceStatus::Missed, Some(to_db(*fire_at)), None, None),
        };
        records.push(FireRecord {
            scheduled_at: to_db(scheduled_at),
            next_run_at: advance_to.map(to_db),
            instance: NewInstance {
                task_id: spec.id,
                request_id: scheduled_request_id(spec.id, scheduled_at).to_string(),
                trigger_type: TriggerType::Schedule.as_str().into(),
                scheduled_at: to_db(scheduled_at),
                trigger_at: to_db(*fire_at),
                status: status.as_str().into(),
                fired_by: fired_by.to_string(),
                created_at: to_db(planned_at),
                finished_at,
                next_attempt_at: claimed_until,
                deadline_at: deadline,
                params: None,
            },
        });
    }
    records
}

/// A run being fired, kept beside its record for dispatch after the commit.
struct Run {
    spec: Arc<TaskSpec>,
    request_id: String,
    scheduled_at: DateTime<Utc>,
    fire_at: DateTime<Utc>,
    dispatch: bool,
    missed: bool,
}

/// Fires one batch: takes the locks, commits the runs, releases the locks, then dispatches
/// the committed runs — never before their rows are durable.
async fn fire_batch(
    fire: FireContext,
    wheel: Addr<WheelActor>,
    batch: Vec<PlannedFire>,
    release: Release,
) {
    let held = fire
        .lock
        .acquire(batch.iter().map(|planned| planned.spec.id).collect())
        .await;
    let mut locked = Vec::new();
    let mut records = Vec::new();
    let mut runs = Vec::new();
    for (planned, held) in batch.into_iter().zip(held) {
        let spec = &planned.spec;
        if !held {
            log::debug!("task {}: fire lock held elsewhere", spec.id);
            add(&metrics().lock_conflicts, 1);
            continue;
        }
        locked.push(spec.id);
        for plan in &planned.plans {
            for record in fire_records(spec, plan, planned.planned_at, &fire) {
                runs.push(Run {
                    spec: spec.clone(),
                    request_id: record.instance.request_id.clone(),
                    scheduled_at: from_db(record.scheduled_at),
                    fire_at: plan.1,
                    dispatch: record.instance.status == InstanceStatus::Ready.as_str(),
                    missed: record.instance.status == InstanceStatus::Missed.as_str(),
                });
                records.push(record);
            }
        }
    }
    if records.is_empty() {
        return;
    }
    let outcomes = fire.store.record_fires(records).await;
    // Off the dispatch path: the runs' rows are committed, the locks have done their work.
    let lock = fire.lock.clone();
    let to_release = locked.clone();
    actix::spawn(async move { lock.release(to_release).await });
    let outcomes = match outcomes {
        Ok(outcomes) => outcomes,
        Err(err) => {
            log::error!(
                "fires of {} tasks not recorded, will retry: {err}",
                locked.len()
            );
            refresh(&fire, &wheel, locked).await;
            return;
        }
    };
    let mut stale = Vec::new();
    let mut jobs = Vec::with_capacity(runs.len());
    for (run, outcome) in runs.into_iter().zip(outcomes) {
        let (task_id, request_id) = (run.spec.id, &run.request_id);
        match outcome {
            FireOutcome::Fired if run.dispatch => {
                add(&metrics().fires, 1);
                log::info!(
                    "task {task_id} request {request_id}: fired run scheduled at {}",
                    run.scheduled_at
                );
                jobs.push((
                    run.fire_at,
                    DispatchJob {
                        task_id,
                        request_id: run.request_id,
                        handler_url: run.spec.handler_url.clone(),
                        params: run.spec.params.clone(),
                        scheduled_at: run.scheduled_at,
                        attempt: 1,
                        timeout_ms: run.spec.timeout_ms,
                    },
                ));
            }
            FireOutcome::Fired => {
                let counter = if run.missed {
                    &metrics().missed
                } else {
                    &metrics().fires
                };
                add(counter, 1);
                log::info!(
                    "task {task_id} request {request_id}: run scheduled at {} recorded, not \
                 dispatched (MISSED, or waiting for its upstreams)",
                    run.scheduled_at
                );
            }
            FireOutcome::Duplicate => log::warn!(
                "task {task_id} request {request_id}: run exists already, not fired again"
            ),
            FireOutcome::Stale => stale.push(task_id),
        }
    }
    release.dispatch_in_time(&fire.dispatch, jobs).await;
    if !stale.is_empty() {
        stale.dedup();
        log::debug!("tasks {stale:?}: schedule changed elsewhere, refreshing");
        refresh(&fire, &wheel, stale).await;
    }
}

/// Dispatches runs whose next attempt is due: retries, and attempts whose dispatcher died.
/// Each is claimed first, so that of several ax processes holding it only one dispatches.
async fn attempt_batch(
    fire: FireContext,
    attempts: Vec<(Arc<DueAttempt>, DateTime<Utc>)>,
    release: Release,
) {
    let claims = attempts
        .iter()
        .map(|(a, fire_at)| Claim {
            request_id: a.request_id.clone(),
            attempt: a.attempt,
            expected: a.next_attempt_at,
            until: to_db(claim_until(*fire_at, a.timeout_ms)),
            claimant: fire.instance_id.clone(),
        })
        .collect();
    let won = match fire.store.record_claims(claims).await {
        Ok(won) => won,
        Err(err) => {
            // Unclaimed attempts stay due in the database; the next scan offers them again.
            log::error!("{} attempts not claimed: {err}", attempts.len());
            return;
        }
    };
    let mut jobs = Vec::new();
    for ((attempt, fire_at), won) in attempts.into_iter().zip(won) {
        if !won {
            continue;
        }
        log::info!(
            "task {} request {}: attempt {} of run scheduled at {}",
            attempt.task_id,
            attempt.request_id,
            attempt.attempt,
            attempt.scheduled_at
        );
        jobs.push((
            fire_at,
            DispatchJob {
                task_id: attempt.task_id,
                request_id: attempt.request_id.clone(),
                handler_url: attempt.handler_url.clone(),
                params: attempt.params.as_str().into(),
                scheduled_at: from_db(attempt.scheduled_at),
                attempt: attempt.attempt,
                timeout_ms: attempt.timeout_ms,
            },
        ));
    }
    release.dispatch_in_time(&fire.dispatch, jobs).await;
}

/// Re-reads tasks whose wheel entries may be wrong and reschedules them from the database.
async fn refresh(fire: &FireContext, wheel: &Addr<WheelActor>, task_ids: Vec<i64>) {
    let ids = task_ids.clone();
    let rows = fire
        .store
        .query(move |conn| {
            boxed(async move {
                let rows = tasks::find_many(conn, ids).await?;
                tasks::wheel_entries(conn, rows).await
            })
        })
        .await;
    let schedule = match rows {
        Ok(schedule) => schedule,
        Err(err) => {
            log::error!("tasks {task_ids:?} not refreshed: {err}");
            return;
        }
    };
    // Tasks deleted, paused or without a next run leave the wheel.
    for id in task_ids {
        if !schedule.iter().any(|(spec, _)| spec.id == id) {
            wheel.do_send(Unschedule(id));
        }
    }
    wheel.do_send(Schedule::replace(schedule));
}

/// Puts tasks' next runs in the wheel; runs beyond the window are left to the supervisor's
/// next top-up.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Schedule {
    pub entries: Vec<(Arc<TaskSpec>, DateTime<Utc>)>,
    pub mode: ScheduleMode,
}

/// How a scheduled run meets the wheel's entry for the same task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScheduleMode {
    /// The task changed, or a fire found the database ahead of the wheel: replace.
    Replace,
    /// A scan of the database: only add what the wheel lacks or has behind the database. A
    /// wheel ahead of the database is firing that task right now (its commit is under way);
    /// putting the old time back would fire it twice.
    Fill,
}

impl Schedule {
    pub fn replace(entries: Vec<(Arc<TaskSpec>, DateTime<Utc>)>) -> Self {
        Schedule {
            entries,
            mode: ScheduleMode::Replace,
        }
    }
}

impl Handler<Schedule> for WheelActor {
    type Result = ();

    fn handle(&mut self, msg: Schedule, _: &mut Context<Self>) {
        for (spec, due) in msg.entries {
            let key = WheelKey::Task(spec.id);
            let ahead = self
                .wheel
                .due_of(&key)
                .is_some_and(|held| held >= due.timestamp());
            if msg.mode == ScheduleMode::Fill && ahead {
                continue;
            }
            self.schedule(key, WheelEntry::Task(spec), due);
        }
    }
}

/// Takes a task out of the wheel.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Unschedule(pub i64);

impl Handler<Unschedule> for WheelActor {
    type Result = ();

    fn handle(&mut self, msg: Unschedule, _: &mut Context<Self>) {
        self.wheel.remove(&WheelKey::Task(msg.0));
    }
}

/// Puts due attempts in the wheel (each at its time, or now if that passed).
#[derive(Message)]
#[rtype(result = "()")]
pub struct ScheduleAttempts(pub Vec<DueAttempt>);

impl Handler<ScheduleAttempts> for WheelActor {
    type Result = ();

    fn handle(&mut self, msg: ScheduleAttempts, _: &mut Context<Self>) {
        for attempt in msg.0 {
            let due = from_db(attempt.next_attempt_at);
            let key = WheelKey::Attempt(attempt.request_id.clone());
            self.schedule(key, WheelEntry::Attempt(Arc::new(attempt)), due);
        }
    }
}

/// How many runs the wheel holds.
#[derive(Message)]
#[rtype(result = "usize")]
pub struct WheelSize;

impl Handler<WheelSize> for WheelActor {
    type Result = usize;

    fn handle(&mut self, _: WheelSize, _: &mut Context<Self>) -> usize {
        self.wheel.len()
    }
}

/// Stops ticking (shutdown) and answers once the batches already firing have committed and
/// handed their runs to the dispatchers: nothing fires after this answers.
#[derive(Message)]
#[rtype(result = "()")]
pub struct StopTicking;

impl Handler<StopTicking> for WheelActor {
    type Result = ResponseFuture<()>;

    fn handle(&mut self, _: StopTicking, _: &mut Context<Self>) -> Self::Result {
        self.ticking = false;
        let in_flight = self.in_flight.clone();
        Box::pin(async move { in_flight.idle().await })
    }
}
