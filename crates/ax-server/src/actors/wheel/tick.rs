//! Ticking: each tick releases the runs committed for its second, and the wheel's seconds up
//! to `commit_ahead` from now are taken and their batches put into the fire pipeline while it
//! has room; a wheel behind the clock catches up in order.

use std::time::Duration;

use actix::prelude::*;
use chrono::{DateTime, Utc};

use super::handle::WheelHandle;
use super::plan::Stalls;
use super::{Batch, WheelActor, WheelEntry, WheelKey};
use crate::actors::fire::{claim_attempts, commit_fires, Committed, Release};
use ax_core::cluster::fencing::PROMISE_AHEAD;
use ax_core::run::TaskId;
use ax_core::wheel::pace::{self, LagNote};
use ax_core::wheel::Due;

impl WheelActor {
    /// Schedules the next tick on the next whole second, when that second's runs are released,
    /// or `commit_ahead` before it, when they are committed, whichever is sooner (or sooner
    /// still, for a shorter interval): the time is always read from the clock, so late ticks
    /// never drift.
    pub(super) fn schedule_tick(&self, ctx: &mut Context<Self>) {
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
        self.share();
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
    pub(super) fn behind_secs(&self) -> i64 {
        pace::behind_secs(self.wheel.position(), self.reach(self.clock.now()))
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
}
