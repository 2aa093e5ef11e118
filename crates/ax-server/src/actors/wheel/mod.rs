//! WheelActor: holds the next window of due runs in the time wheel and ticks: each tick
//! releases the runs committed for this second and hands what is due up to `commit_ahead` from
//! now to the fire pipeline (`actors::fire`), which commits them ahead and dispatches each at
//! its second. The wheel takes a second only while the pipeline has room
//! (`ax_core::wheel::pace`): past its ceiling ax falls behind and catches up in order.
//!
//! The actor's state is here; what it does is a module each: ticking and feeding the pipeline
//! (`tick`), planning the entries a tick takes into batches (`plan`), this process's fencing
//! promises (`promise`), the messages the rest of ax sends it (`messages`), and the handle
//! those go through (`handle`).

mod handle;
mod messages;
mod plan;
mod promise;
mod tick;

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;
use chrono::{DateTime, Utc};
use tokio::sync::watch;

use super::fire::{FireContext, PlannedFire};
use super::InFlight;
use ax_core::cluster::shares::Share;
use ax_core::plan::{MissedRunPolicy, TaskSpec};
use ax_core::run::{RequestId, TaskId};
use ax_core::time::clock::SharedClock;
use ax_core::wheel::pace::{LagLog, PipelineLimits, PipelineLoad};
use ax_core::wheel::{Due, TimeWheel};
use ax_store::queries::due::DueAttempt;

pub use handle::WheelHandle;
pub use messages::{
    GetWheelStats, HeldTasks, Schedule, ScheduleAttempts, ScheduleMode, StopTicking, Unschedule,
};

/// How late a run nobody fired may be and still go out by itself, rather than folded by the
/// missed-run policy (see [`ScheduleMode::Overdue`]): past the time the others take a dead
/// process's share over (its heartbeat's expiry, the overdue scan's interval and grace), with
/// room to spare.
pub const RESCUE_LATE_SECS: i64 = 30;

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
    /// This process's share of the tasks, as the cluster decides it: the wheel holds the next
    /// runs of those tasks only (and, for a moment, overdue ones of any task).
    share: watch::Receiver<Share>,
    /// Tasks whose entry is a run nobody fired (see [`ScheduleMode::Overdue`]).
    rescued: HashSet<TaskId>,
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
    /// The wheel of a process that took `epoch` at start (see `ax_core::cluster::fencing`),
    /// holding the tasks of `share`.
    pub fn new(
        settings: WheelSettings,
        clock: SharedClock,
        fire: FireContext,
        (epoch, share): (i64, watch::Receiver<Share>),
    ) -> Self {
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
            share,
            rescued: HashSet::new(),
        }
    }

    /// This process's share now. A share grown since the last look needs nothing here (the
    /// supervisor loads what it gained); the tasks of a share shrunk leave the wheel.
    fn share(&mut self) -> Share {
        if !self.share.has_changed().unwrap_or(false) {
            return *self.share.borrow();
        }
        let share = *self.share.borrow_and_update();
        let gone: Vec<WheelKey> = self
            .wheel
            .entries()
            .filter_map(|due| match &due.key {
                WheelKey::Task(task) if !share.owns(*task) => Some(due.key.clone()),
                _ => None,
            })
            .collect();
        for key in &gone {
            self.wheel.remove(key);
        }
        self.deferred.retain(|task, _| share.owns(*task));
        self.rescued.retain(|task| share.owns(*task));
        if !gone.is_empty() {
            self.wheel.shrink_to_fit();
            log::debug!("{} tasks left this process's share", gone.len());
        }
        share
    }

    /// The second of the last tick, for health checks.
    pub fn ticks(&self) -> watch::Receiver<i64> {
        self.reached.subscribe()
    }
}

impl Actor for WheelActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        self.schedule_tick(ctx);
    }
}
