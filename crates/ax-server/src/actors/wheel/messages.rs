//! The messages the rest of ax sends the wheel: tasks' next runs and due attempts put in or
//! taken out, what it holds, its gauges, and the stop at shutdown.

use std::collections::HashMap;
use std::sync::Arc;

use actix::prelude::*;
use chrono::{DateTime, Utc};

use super::plan::at_second;
use super::{Batch, WheelActor, WheelEntry, WheelKey};
use ax_core::metrics::WheelStats;
use ax_core::plan::sync::Held;
use ax_core::plan::TaskSpec;
use ax_core::run::TaskId;
use ax_store::queries::due::DueAttempt;

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
    /// Runs nobody fired, of any process's share (the overdue scan), or of partitions this
    /// process just took over: as `Fill`, and each overdue run is fired, late, rather than
    /// folded by the missed-run policy (up to [`RESCUE_LATE_SECS`](super::RESCUE_LATE_SECS)):
    /// a process gone costs its runs time, not runs. Of several processes that fire one, the
    /// lock and the compare-and-set let one record it, and its next run goes to its owner's
    /// wheel only.
    Overdue,
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
        let share = self.share();
        for (spec, due) in msg.entries {
            let key = WheelKey::Task(spec.id);
            if msg.mode != ScheduleMode::Overdue && !share.owns(spec.id) {
                // Another process's task: what the wheel held of it goes too.
                self.wheel.remove(&key);
                self.deferred.remove(&spec.id);
                continue;
            }
            let held = self
                .wheel
                .due_of(&key)
                .or_else(|| self.deferred.get(&spec.id).map(|(entry, _)| entry.due_sec));
            let ahead = held.is_some_and(|held| held >= due.timestamp());
            if msg.mode != ScheduleMode::Replace && ahead {
                continue;
            }
            self.deferred.remove(&spec.id);
            if msg.mode == ScheduleMode::Overdue && due < self.clock.now() {
                self.rescued.insert(spec.id);
            } else {
                self.rescued.remove(&spec.id);
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
        self.deferred.remove(&msg.0);
        self.rescued.remove(&msg.0);
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

impl WheelActor {
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
