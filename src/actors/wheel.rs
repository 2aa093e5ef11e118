//! WheelActor: holds the next window of due runs in the time wheel and ticks: each tick
//! releases the runs committed for this second and hands what is due up to `commit_ahead` from
//! now to the fire pipeline (`actors::fire`), which commits them ahead and dispatches each at
//! its second.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;
use chrono::{DateTime, TimeZone, Utc};
use tokio::sync::watch;

use super::fire::{attempt_batch, fire_batch, FireContext, PlannedFire, Release};
use super::InFlight;
use crate::clock::SharedClock;
use crate::plan::{plan_fires, FirePlan, MissedRunPolicy, RunDecision, TaskSpec};
use crate::run::{RequestId, TaskId};
use crate::store::queries::runs::DueAttempt;
use crate::wheel::{Due, TimeWheel};

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
    Task(TaskId),
    Attempt(RequestId),
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
            let wheel = WheelHandle::new(ctx.address());
            let batch = fire_batch(self.fire.clone(), wheel, chunk, self.release());
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
pub struct Unschedule(pub TaskId);

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
            // At the second it is due in, rounded up: an attempt never goes out early.
            let due = attempt.due_at();
            let second = due.timestamp() + i64::from(due.timestamp_subsec_nanos() > 0);
            let key = WheelKey::Attempt(attempt.request_id.clone());
            self.schedule(
                key,
                WheelEntry::Attempt(Arc::new(attempt)),
                at_second(second),
            );
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

/// A handle to the WheelActor: the rest of ax calls these methods, not actix.
#[derive(Clone)]
pub struct WheelHandle {
    addr: Addr<WheelActor>,
}

impl WheelHandle {
    pub fn new(addr: Addr<WheelActor>) -> Self {
        WheelHandle { addr }
    }

    /// Puts tasks' next runs in the wheel as the database has them now (a scan's `Fill`, or a
    /// change's `Replace`).
    pub async fn schedule(
        &self,
        entries: Vec<(Arc<TaskSpec>, DateTime<Utc>)>,
        mode: ScheduleMode,
    ) -> Result<(), MailboxError> {
        self.addr.send(Schedule { entries, mode }).await
    }

    /// Replaces the wheel's entries of `task_ids` with `entries`: tasks without one (deleted,
    /// paused, never firing again) leave the wheel.
    pub fn replace(&self, task_ids: &[TaskId], entries: Vec<(Arc<TaskSpec>, DateTime<Utc>)>) {
        for id in task_ids {
            if !entries.iter().any(|(spec, _)| spec.id == *id) {
                self.addr.do_send(Unschedule(*id));
            }
        }
        self.addr.do_send(Schedule::replace(entries));
    }

    /// Takes a task out of the wheel.
    pub fn unschedule(&self, task_id: TaskId) {
        self.addr.do_send(Unschedule(task_id));
    }

    /// Puts due attempts in the wheel.
    pub fn schedule_attempts(&self, attempts: Vec<DueAttempt>) {
        if !attempts.is_empty() {
            self.addr.do_send(ScheduleAttempts(attempts));
        }
    }

    /// How many entries the wheel holds; `None` if the wheel is gone.
    pub async fn size(&self) -> Option<usize> {
        self.addr.send(WheelSize).await.ok()
    }

    /// Stops ticking; resolves when nothing fires any more (see [`StopTicking`]).
    pub async fn stop(&self) {
        let _ = self.addr.send(StopTicking).await;
    }
}
