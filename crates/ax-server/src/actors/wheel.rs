//! WheelActor: holds the next window of due runs in the time wheel and ticks: each tick
//! releases the runs committed for this second and hands what is due up to `commit_ahead` from
//! now to the fire pipeline (`actors::fire`), which commits them ahead and dispatches each at
//! its second. The wheel takes a second only while the pipeline has room
//! (`ax_core::wheel::pace`): past its ceiling ax falls behind and catches up in order.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;
use chrono::{DateTime, TimeZone, Utc};
use tokio::sync::watch;

use super::fire::{
    claim_attempts, commit_fires, Committed, FireContext, PlannedFire, Release, Reschedule,
};
use super::store::boxed;
use super::InFlight;
use ax_core::cluster::fencing::PROMISE_AHEAD;
use ax_core::metrics::WheelStats;
use ax_core::plan::sync::Held;
use ax_core::plan::{
    plan_each, plan_fires, FirePlan, MissedRunPolicy, RunDecision, TaskSpec, MAX_COUNTED_PERIODS,
};
use ax_core::run::{RequestId, TaskId};
use ax_core::time::clock::rfc3339;
use ax_core::time::clock::SharedClock;
use ax_core::wheel::pace::{self, LagLog, LagNote, PipelineLimits, PipelineLoad};
use ax_core::wheel::{Due, TimeWheel};
use ax_store::queries::due::DueAttempt;
use ax_store::queries::processes;
use ax_store::StoreError;

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
    pub limits: PipelineLimits,
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
    /// The second of the last tick (for `/healthz`).
    reached: watch::Sender<i64>,
    /// This process's promises of what it may send (see `ax_core::cluster::fencing`).
    promises: Promises,
    /// Batches planned from the seconds taken, waiting for room in the pipeline.
    backlog: VecDeque<Batch>,
    /// Tasks in a batch not yet committed: a task's next run waits for its commit, since its
    /// runs commit in order, one batch at a time, under the task's fire lock.
    busy: HashSet<TaskId>,
    /// Entries of busy tasks, taken from the wheel, planned once their task's commit is done,
    /// each with the second the wheel took it at.
    deferred: HashMap<TaskId, (Due<WheelKey, WheelEntry>, i64)>,
    load: PipelineLoad,
    lag_log: LagLog,
}

/// One batch for the fire pipeline.
enum Batch {
    Fires(Vec<PlannedFire>),
    Attempts(Vec<(Arc<DueAttempt>, DateTime<Utc>)>),
}

impl Batch {
    /// The tasks it fires.
    fn tasks(&self) -> Vec<TaskId> {
        match self {
            Batch::Fires(fires) => fires.iter().map(|fire| fire.spec.id).collect(),
            Batch::Attempts(_) => Vec::new(),
        }
    }

    /// The runs it may hand to the dispatchers.
    fn runs(&self) -> usize {
        match self {
            Batch::Fires(fires) => fires
                .iter()
                .flat_map(|fire| &fire.plans)
                .map(|(plan, _)| plan.decisions.len())
                .sum(),
            Batch::Attempts(attempts) => attempts.len(),
        }
    }
}

/// The promise being written, and the next to write.
struct Promises {
    /// The epoch this process holds.
    epoch: i64,
    /// The latest second asked for: a tick within a second promises nothing new.
    asked: i64,
    writing: bool,
    /// The second to promise once the write under way is done: one at a time, so that a
    /// promise never goes back.
    next: Option<i64>,
}

impl WheelActor {
    /// The wheel of a process that took `epoch` at start (see `ax_core::cluster::fencing`).
    pub fn new(settings: WheelSettings, clock: SharedClock, fire: FireContext, epoch: i64) -> Self {
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
            promises: Promises {
                epoch,
                asked: i64::MIN,
                writing: false,
                next: None,
            },
            backlog: VecDeque::new(),
            busy: HashSet::new(),
            deferred: HashMap::new(),
            load: PipelineLoad::default(),
            lag_log: LagLog::default(),
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
            .min(to_next(now + self.commit_ahead()))
            .min(to_next(now + PROMISE_AHEAD));
        // Ticks go on after `StopTicking`: runs committed ahead still wait for their second.
        ctx.run_later(delay, |act, ctx| {
            act.tick(ctx);
            act.schedule_tick(ctx);
        });
    }

    /// Releases the runs committed for this second, then takes what is due up to
    /// `commit_ahead` from now, as far as the pipeline has room; each run is dispatched at its
    /// second.
    fn tick(&mut self, ctx: &mut Context<Self>) {
        let now = self.clock.now();
        self.reached.send_replace(now.timestamp());
        self.promise((now + PROMISE_AHEAD).timestamp(), ctx);
        // A skewed clock fires nothing: the other processes carry its tasks meanwhile, and the
        // seconds it leaves are caught up (and found fired) once its clock is right.
        if !self.ticking || self.fire.clock_check.is_skewed() {
            return;
        }
        self.pump(ctx);
        let behind = self.behind_secs();
        match self.lag_log.observe(now.timestamp(), behind) {
            Some(LagNote::Behind(secs)) => log::warn!(
                "overloaded: the wheel is {secs} s behind the clock; runs go out late, in order \
                 ({} runs between the wheel and the dispatchers, {} batches committing)",
                self.load.queued_runs,
                self.load.committing_batches
            ),
            Some(LagNote::CaughtUp) => log::info!("the wheel has caught up with the clock"),
            None => {}
        }
    }

    /// Promises in the store that this process may send the runs of `second`; they go out once
    /// it is written. A fenced process takes a new epoch first, and its claims from before are
    /// checked again before they are sent (see `ax_core::cluster::fencing`).
    fn promise(&mut self, second: i64, ctx: &mut Context<Self>) {
        if second <= self.promises.asked {
            return;
        }
        self.promises.asked = second;
        if self.promises.writing {
            self.promises.next = Some(second);
            return;
        }
        self.promises.writing = true;
        let (store, me) = (self.fire.store.clone(), self.fire.instance_id.clone());
        let (epoch, now) = (self.promises.epoch, self.clock.now());
        let write = async move {
            let me2 = me.clone();
            let made = store
                .query(move |conn| {
                    boxed(async move { processes::promise(conn, &me2, epoch, second, now).await })
                })
                .await?;
            if made {
                return Ok((epoch, false));
            }
            let epoch = store
                .query(move |conn| {
                    boxed(async move { processes::begin_epoch(conn, &me, second, now).await })
                })
                .await?;
            Ok::<_, StoreError>((epoch, true))
        };
        ctx.spawn(write.into_actor(self).map(move |written, act, ctx| {
            act.promises.writing = false;
            match written {
                Ok((epoch, fenced)) => {
                    if fenced {
                        log::warn!(
                            "this process was fenced by another (its promises were late: paused, \
                             or its store slow); the claims it holds are checked again before \
                             they are sent"
                        );
                    }
                    act.promises.epoch = epoch;
                    act.fire.gate.promised(second, fenced);
                }
                // The store's outage is told elsewhere; nothing goes out until it is back.
                Err(err) => log::debug!("the promise for {second} was not written: {err}"),
            }
            if let Some(next) = act.promises.next.take() {
                act.promises.asked = next - 1;
                act.promise(next, ctx);
            }
        }));
    }

    /// Feeds the pipeline from the backlog, and takes the next seconds from the wheel while
    /// there is room, up to `commit_ahead` from now.
    fn pump(&mut self, ctx: &mut Context<Self>) {
        if !self.ticking || self.fire.clock_check.is_skewed() {
            return;
        }
        let now = self.clock.now();
        let reach = self.reach(now);
        let mut stalls = Stalls::default();
        loop {
            while self.settings.limits.admit(self.load) {
                let Some(batch) = self.backlog.pop_front() else {
                    break;
                };
                self.start(batch, ctx);
            }
            if !self.backlog.is_empty() || !self.settings.limits.admit(self.load) {
                break;
            }
            let ready = self.ready_deferred();
            if !ready.is_empty() {
                self.plan(ready, now, self.wheel.position(), &mut stalls);
                continue;
            }
            let step = pace::next_step(self.wheel.position(), reach, self.wheel.slots());
            let due = self.wheel.advance(step);
            if due.is_empty() {
                if step >= reach {
                    break;
                }
                continue;
            }
            let taken = due.into_iter().map(|entry| (entry, step)).collect();
            self.plan(taken, now, step, &mut stalls);
        }
        stalls.log();
    }

    /// Puts one batch into the pipeline: committed first, then handed to the dispatchers at its
    /// second; the pipeline's load counts it until then.
    fn start(&mut self, batch: Batch, ctx: &mut Context<Self>) {
        let (runs, tasks) = (batch.runs(), batch.tasks());
        self.load.committing_batches += 1;
        self.load.queued_runs += runs;
        let (fire, wheel) = (self.fire.clone(), WheelHandle::new(ctx.address()));
        let commit = async move {
            match batch {
                Batch::Fires(fires) => commit_fires(fire, wheel, fires).await,
                Batch::Attempts(attempts) => claim_attempts(fire, attempts).await,
            }
        };
        let release = self.release();
        ctx.spawn(self.in_flight.track(commit).into_actor(self).map(
            move |committed: Committed, act, ctx| {
                act.load.committing_batches -= 1;
                let Committed {
                    jobs,
                    locked,
                    failed,
                } = committed;
                let dispatch = act.fire.dispatch.clone();
                let handed = async move { release.dispatch_in_time(&dispatch, jobs).await };
                ctx.spawn(
                    act.in_flight
                        .track(handed)
                        .into_actor(act)
                        .map(move |(), act, ctx| {
                            act.load.queued_runs -= runs;
                            act.pump(ctx);
                        }),
                );
                // A task's next batch takes its lock again: the task is busy until released.
                let lock = act.fire.lock.clone();
                let unlocked = async move { lock.release(locked).await };
                ctx.spawn(unlocked.into_actor(act).map(move |(), act, ctx| {
                    for task in tasks {
                        act.busy.remove(&task);
                        if failed {
                            act.put_back(task);
                        }
                    }
                    act.pump(ctx);
                }));
                act.pump(ctx);
            },
        ));
    }

    /// Puts a task's deferred entry back in the wheel, after its batch failed: its runs were
    /// not recorded, the store may be out, and the entry is then a stalled task's, for the
    /// missed-run policy, not one ax held back.
    fn put_back(&mut self, task: TaskId) {
        if let Some((entry, _)) = self.deferred.remove(&task) {
            self.wheel.insert(entry.key, entry.due_sec, entry.value);
        }
    }

    /// The deferred entries whose task's last batch is done with its lock.
    fn ready_deferred(&mut self) -> Vec<(Due<WheelKey, WheelEntry>, i64)> {
        let ready: Vec<TaskId> = self
            .deferred
            .keys()
            .filter(|task| !self.busy.contains(task))
            .copied()
            .collect();
        let mut entries: Vec<_> = ready
            .iter()
            .filter_map(|task| self.deferred.remove(task))
            .collect();
        entries.sort_by_key(|(entry, _)| entry.due_sec);
        entries
    }

    /// The last second the wheel takes now: `commit_ahead` from `now`.
    fn reach(&self, now: DateTime<Utc>) -> i64 {
        (now + self.commit_ahead()).timestamp()
    }

    /// How far behind its schedule the wheel is, in seconds.
    fn behind_secs(&self) -> i64 {
        pace::behind_secs(self.wheel.position(), self.reach(self.clock.now()))
    }

    /// Plans entries, each with the second the wheel took it at, through `step`: each run to
    /// fire at its own second (or now if that passed); puts each task's next run in the wheel,
    /// and queues the batches. An entry is late by how long it was due when the wheel took
    /// it: a wheel behind the clock is ax's own lag, and those runs go out late, each by itself
    /// (so do the ones held back while their task's previous batch committed); an entry put in
    /// behind the wheel is a stalled task's, for the missed-run policy.
    fn plan(
        &mut self,
        due: Vec<(Due<WheelKey, WheelEntry>, i64)>,
        now: DateTime<Utc>,
        step: i64,
        stalls: &mut Stalls,
    ) {
        let mut planned = Planned::default();
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
                    let plan = if late <= policy.grace_secs {
                        plan_each(&spec.cron, due, seen)
                    } else {
                        plan_fires(&spec.cron, due, seen, policy)
                    };
                    stalls.count(&spec, &plan, seen, policy);
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
        let batch_size = self.fire.batch_size;
        let fires = chunks(planned.fires, batch_size)
            .into_iter()
            .map(Batch::Fires);
        let attempts = chunks(planned.attempts, batch_size)
            .into_iter()
            .map(Batch::Attempts);
        self.backlog.extend(fires.chain(attempts));
    }

    /// The second of the last tick, for health checks.
    pub fn ticks(&self) -> watch::Receiver<i64> {
        self.reached.subscribe()
    }

    fn commit_ahead(&self) -> chrono::Duration {
        chrono::Duration::from_std(self.settings.commit_ahead).unwrap_or_default()
    }

    fn release(&self) -> Release {
        Release {
            reached: self.reached.subscribe(),
            gate: self.fire.gate.clone(),
        }
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

/// The stalled tasks one pump found, told in one line rather than one per task (a start-up
/// after downtime finds every task stalled).
#[derive(Default)]
struct Stalls {
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

    fn log(&self) {
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
            let held = self
                .wheel
                .due_of(&key)
                .or_else(|| self.deferred.get(&spec.id).map(|(entry, _)| entry.due_sec));
            let ahead = held.is_some_and(|held| held >= due.timestamp());
            if msg.mode == ScheduleMode::Fill && ahead {
                continue;
            }
            self.deferred.remove(&spec.id);
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
        self.deferred.remove(&msg.0);
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

/// The tasks the wheel holds (deferred ones too) due by `until` (unix seconds), each with its
/// second and version: what the reconcile compares with the store.
#[derive(Message)]
#[rtype(result = "HashMap<TaskId, Held>")]
pub struct HeldTasks {
    pub until: i64,
}

impl Handler<HeldTasks> for WheelActor {
    type Result = MessageResult<HeldTasks>;

    fn handle(&mut self, msg: HeldTasks, _: &mut Context<Self>) -> Self::Result {
        let held = self
            .wheel
            .entries()
            .chain(self.deferred.values().map(|(due, _)| due))
            .filter(|due| due.due_sec <= msg.until)
            .filter_map(|due| match &due.value {
                WheelEntry::Task(spec) => Some((
                    spec.id,
                    Held {
                        second: due.due_sec,
                        version: spec.version,
                    },
                )),
                WheelEntry::Attempt(_) => None,
            })
            .collect();
        MessageResult(held)
    }
}

#[derive(Message)]
#[rtype(result = "WheelStats")]
pub struct GetWheelStats;

impl Handler<GetWheelStats> for WheelActor {
    type Result = MessageResult<GetWheelStats>;

    fn handle(&mut self, _: GetWheelStats, _: &mut Context<Self>) -> Self::Result {
        MessageResult(WheelStats {
            entries: self.wheel.len() + self.deferred.len(),
            behind_secs: self.behind_secs(),
            queued_runs: self.load.queued_runs
                + self.backlog.iter().map(Batch::runs).sum::<usize>(),
        })
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
        // Planned batches not started hold no lock and no row: their runs fire after a restart.
        self.backlog.clear();
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

    /// The tasks the wheel holds due by `until` (see [`HeldTasks`]).
    pub async fn held_tasks(
        &self,
        until: DateTime<Utc>,
    ) -> Result<HashMap<TaskId, Held>, MailboxError> {
        self.addr
            .send(HeldTasks {
                until: until.timestamp(),
            })
            .await
    }

    /// The wheel's gauges; `None` if the wheel is gone.
    pub async fn stats(&self) -> Option<WheelStats> {
        self.addr.send(GetWheelStats).await.ok()
    }

    /// Stops ticking; resolves when nothing fires any more (see [`StopTicking`]).
    pub async fn stop(&self) {
        let _ = self.addr.send(StopTicking).await;
    }
}

impl Reschedule for WheelHandle {
    fn replace(&self, task_ids: &[TaskId], entries: Vec<(Arc<TaskSpec>, DateTime<Utc>)>) {
        WheelHandle::replace(self, task_ids, entries);
    }
}
