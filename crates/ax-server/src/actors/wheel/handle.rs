//! The handle the rest of ax calls the wheel through, not actix.

use std::collections::HashMap;
use std::sync::Arc;

use actix::prelude::*;
use chrono::{DateTime, Utc};

use super::messages::{
    GetWheelStats, HeldTasks, Schedule, ScheduleAttempts, ScheduleMode, StopTicking, Unschedule,
};
use super::WheelActor;
use crate::actors::fire::Reschedule;
use ax_core::metrics::WheelStats;
use ax_core::plan::sync::Held;
use ax_core::plan::TaskSpec;
use ax_core::run::TaskId;
use ax_store::queries::due::DueAttempt;

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
