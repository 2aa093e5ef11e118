//! SupervisorActor: fills the wheel at start-up with every enabled task of this process's share
//! due within the preload window (overdue ones included: the missed-run policy decides for
//! them), keeps the window topped up, loads the tasks of a share grown (a process gone), applies
//! every task change any process made (the change feed, each second, and a reconcile of the
//! wheel against the store each minute), finds tasks nobody fired (a dead ax, of any share),
//! offers due attempts (retries, and runs whose dispatcher died) to the wheel, and sends RUNNING
//! runs past their deadline to the retry path.

use ax_core::ids::ProcessId;
use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;
use chrono::{DateTime, Utc};
use futures_util::future::join_all;
use tokio::sync::watch;

use super::fire::reload;
use super::store::{boxed, StoreHandle};
use super::wheel::{ScheduleMode, WheelHandle};
use ax_core::cluster::shares::Share;
use ax_core::metrics::metrics;
use ax_core::plan::sync::{self, ChangeCursor};
use ax_core::run::TaskId;
use ax_core::run::{failed_attempt, Decided, Event, TIMEOUT_CODE, TIMEOUT_MESSAGE};
use ax_core::time::clock::{ClockCheck, SharedClock};
use ax_store::queries::runs;
use ax_store::queries::tasks::{self, DueCursor};
use ax_store::queries::{calendars, due, pending, recovery, task_changes};
use ax_store::rows::models;
use ax_store::{to_db, StoreError};

/// How often due attempts and expired runs are looked for.
const SCAN_INTERVAL: Duration = Duration::from_secs(1);
/// How often the task change feed is read: every process applies a change within this.
const CHANGES_INTERVAL: Duration = Duration::from_secs(1);
/// Most pages of the change feed one read takes; the next read, a second later, takes the rest.
const CHANGE_PAGES: usize = 20;
/// How often the wheel is compared with the store whole, for whatever the feed missed.
const RECONCILE_INTERVAL: Duration = Duration::from_secs(60);
/// Seconds from now within which a task may be firing, its entry and row moving (see
/// `plan::sync::drifted`).
const SETTLING_SECS: i64 = 3;
/// How long change rows are kept.
const CHANGES_KEPT: chrono::Duration = chrono::Duration::hours(1);
/// How often tasks that nobody fired are looked for: a dead or paused process's share goes
/// out within about this and [`OVERDUE_AFTER`] of its time, until the others take it over.
const OVERDUE_INTERVAL: Duration = Duration::from_secs(1);
/// How late a task's run must be for nobody to have fired it: its owner commits it ahead of its
/// second, and a run not committed a second after it is one a dead or paused process holds (or
/// a busy one, which the fire lock and the compare-and-set then settle with the rescuer).
const OVERDUE_AFTER: chrono::Duration = chrono::Duration::seconds(1);
/// How often processes whose promise went stale are looked for (see `ax_core::cluster::fencing`): a
/// run a dead process fired ahead goes out within a few seconds of its time.
const FENCE_INTERVAL: Duration = Duration::from_secs(1);
/// How often old finished runs are deleted, and how many per statement.
const RETENTION_INTERVAL: Duration = Duration::from_secs(60);
const RETENTION_BATCH: i64 = 1000;
/// Most retention batches per run, so one run stays short.
const RETENTION_BATCHES: usize = 20;
/// How far ahead the attempt scan looks, so the wheel holds an attempt before its second.
const ATTEMPT_LOOKAHEAD_SECS: i64 = 2;

/// Settings of the supervisor.
#[derive(Debug, Clone)]
pub struct SupervisorSettings {
    pub window_secs: i64,
    pub preload_interval: Duration,
    pub page_size: i64,
    /// Finished runs older than this are deleted.
    pub retention: chrono::Duration,
}

/// The supervisor's periodic jobs; each runs at most once at a time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Job {
    Preload,
    Overdue,
    Attempts,
    Expiry,
    Fences,
    Dependencies,
    Retention,
    Changes,
    Reconcile,
    /// Loading the tasks of partitions this process's share gained.
    Gain,
}

impl Job {
    /// Whether the job claims runs or compares times other processes wrote (due, overdue,
    /// expired, waited too long).
    fn reads_times(self) -> bool {
        matches!(
            self,
            Job::Overdue | Job::Attempts | Job::Expiry | Job::Fences | Job::Dependencies
        )
    }
}

/// The actor keeping the wheel filled and runs from waiting forever.
pub struct SupervisorActor {
    settings: SupervisorSettings,
    clock: SharedClock,
    /// This process's clock against the cluster's: nothing is claimed while it is skewed.
    clock_check: Arc<ClockCheck>,
    store: StoreHandle,
    wheel: WheelHandle,
    /// This process, which fences the others.
    instance_id: ProcessId,
    running: Vec<Job>,
    /// How far the window has been loaded.
    loaded_until: Option<DateTime<Utc>>,
    /// When the supervisor started: the start-up preload is timed from here.
    started: std::time::Instant,
    /// Where this process is in the task change feed; `None` until its start is read.
    changes: Option<ChangeCursor>,
    /// This process's share of the tasks, as the cluster decides it.
    share: watch::Receiver<Share>,
    /// The partitions whose tasks the wheel has been loaded with, over the window.
    loaded_share: Share,
}

impl SupervisorActor {
    pub fn new(
        settings: SupervisorSettings,
        (clock, clock_check): (SharedClock, Arc<ClockCheck>),
        store: StoreHandle,
        (wheel, share): (WheelHandle, watch::Receiver<Share>),
        instance_id: ProcessId,
    ) -> Self {
        SupervisorActor {
            loaded_share: Share::NONE,
            share,
            settings,
            clock,
            clock_check,
            store,
            wheel,
            instance_id,
            running: Vec::new(),
            loaded_until: None,
            started: std::time::Instant::now(),
            changes: None,
        }
    }

    /// Opens the change feed at the newest change, then calls `then` (at start-up: the
    /// preload, so that a change committed after that read is applied by the feed, and one
    /// before it is in what the preload reads).
    fn open_feed(&mut self, ctx: &mut Context<Self>, then: fn(&mut Self, &mut Context<Self>)) {
        let store = self.store.clone();
        self.running.push(Job::Changes);
        let latest = async move { store.query(|conn| boxed(task_changes::latest(conn))).await };
        ctx.spawn(latest.into_actor(self).map(move |latest, act, ctx| {
            act.running.retain(|job| *job != Job::Changes);
            match latest {
                Ok(floor) => act.changes = Some(ChangeCursor::new(floor)),
                // Opened at a later read; the reconcile covers what came between.
                Err(err) => log::error!("the task change feed did not open: {err}"),
            }
            then(act, ctx);
        }));
    }

    /// Applies the task changes written since the last read, by any process: each changed
    /// task is read again and put in the wheel as the store has it.
    fn changes(&mut self, ctx: &mut Context<Self>) {
        if self.running.contains(&Job::Changes) {
            return;
        }
        let Some(cursor) = self.changes.clone() else {
            self.open_feed(ctx, |_, _| {});
            return;
        };
        self.running.push(Job::Changes);
        let (store, wheel, clock) = (self.store.clone(), self.wheel.clone(), self.clock.clone());
        let share = self.share.clone();
        let work = async move {
            let mut cursor = cursor;
            // A full page means more are waiting (a bulk registration elsewhere): they are read
            // at once, since until then the tasks of this process's share they add fire late,
            // by the overdue scan. Each page goes on from the last id the one before read.
            let mut from = cursor.floor();
            for _ in 0..CHANGE_PAGES {
                let wanted = cursor.wanted();
                let read = store
                    .query(move |conn| {
                        boxed(async move {
                            let wanted = (wanted.gaps.as_slice(), wanted.after);
                            task_changes::read(conn, wanted, from).await
                        })
                    })
                    .await?;
                let ids: Vec<i64> = read.iter().map(|(id, _)| *id).collect();
                from = ids.last().copied().unwrap_or(from);
                let fresh = cursor.take(&ids, clock.now().timestamp_millis());
                let mut changed: Vec<TaskId> = read
                    .iter()
                    .zip(fresh)
                    .filter(|(_, fresh)| *fresh)
                    .map(|((_, task), _)| *task)
                    .collect();
                // Another process's tasks are its own to read again. The share is looked at
                // after the read: a partition gained since is loaded from what was committed
                // after the share changed, so a change read before that and dropped here would
                // be lost to the wheel.
                let share = *share.borrow();
                changed.retain(|task| share.owns(*task));
                changed.sort();
                changed.dedup();
                if !changed.is_empty() {
                    log::debug!("task changes: {} tasks read again", changed.len());
                    reload(&store, &wheel, changed).await?;
                }
                if (read.len() as i64) < task_changes::PAGE {
                    break;
                }
            }
            Ok::<_, StoreError>(cursor)
        };
        ctx.spawn(work.into_actor(self).map(|result, act, _| {
            act.running.retain(|job| *job != Job::Changes);
            match result {
                Ok(cursor) => act.changes = Some(cursor),
                // The same changes are read again next time.
                Err(err) => log::error!("task changes not applied, retrying: {err}"),
            }
        }));
    }

    /// Compares the wheel with the store over the loaded window and reads again each task they
    /// hold differently: whatever the change feed missed (a gap given up, a process that could
    /// not read) is right within a minute.
    fn reconcile(&mut self, ctx: &mut Context<Self>) {
        let Some(until) = self.loaded_until else {
            return;
        };
        let (store, wheel) = (self.store.clone(), self.wheel.clone());
        let settled_after = self.clock.now().timestamp() + SETTLING_SECS;
        let share = *self.share.borrow();
        self.run(Job::Reconcile, ctx, async move {
            let mut held = wheel
                .held_tasks(until)
                .await
                .map_err(|err| StoreError::Pool(format!("wheel unavailable: {err}")))?;
            // An overdue run of another process's task may be in the wheel for a moment.
            held.retain(|task, _| share.owns(*task));
            let stored = store
                .query(move |conn| boxed(task_changes::due_by(conn, to_db(until), share)))
                .await?;
            let stored = stored
                .into_iter()
                .map(|(id, second, version)| (id, sync::Held { second, version }))
                .collect();
            let drifted = sync::drifted(&held, &stored, settled_after);
            if !drifted.is_empty() {
                log::warn!(
                    "reconcile: the wheel held {} tasks otherwise than the store; read again: \
                     {drifted:?}",
                    drifted.len()
                );
                reload(&store, &wheel, drifted.clone()).await?;
            }
            Ok(drifted.len())
        });
    }

    /// Runs `work` unless the same job is still running (a slow database must not pile up
    /// scans).
    fn run<F>(&mut self, job: Job, ctx: &mut Context<Self>, work: F)
    where
        F: std::future::Future<Output = Result<usize, StoreError>> + 'static,
    {
        self.run_then(job, ctx, work, |_| {});
    }

    /// Like `run`, calling `done` on the actor when the job succeeded.
    fn run_then<F>(
        &mut self,
        job: Job,
        ctx: &mut Context<Self>,
        work: F,
        done: impl FnOnce(&mut Self) + 'static,
    ) where
        F: std::future::Future<Output = Result<usize, StoreError>> + 'static,
    {
        // A skewed clock claims nothing and judges no time another process wrote.
        if self.running.contains(&job) || (job.reads_times() && self.clock_check.is_skewed()) {
            return;
        }
        self.running.push(job);
        ctx.spawn(work.into_actor(self).map(move |result, act, _| {
            act.running.retain(|j| *j != job);
            match result {
                Ok(count) => {
                    if count > 0 {
                        log::debug!("{job:?}: {count} found");
                    }
                    done(act);
                }
                Err(err) => log::error!("{job:?} failed, retrying at the next interval: {err}"),
            }
        }));
    }

    /// Loads the window: all of it at start-up, then only the part the clock added since the
    /// last load (the wheel re-inserts what fires, and the overdue scan catches the rest).
    fn preload(&mut self, ctx: &mut Context<Self>) {
        let until = self.clock.now() + chrono::Duration::seconds(self.settings.window_secs);
        let from = self
            .loaded_until
            .map_or(DueCursor::start(), |at| DueCursor::after(to_db(at)));
        let share = self.follow_share();
        let work = preload(
            (self.store.clone(), self.wheel.clone()),
            (from, until),
            (share, ScheduleMode::Fill),
            self.settings.page_size,
        );
        self.run_then(Job::Preload, ctx, work, move |act| {
            if act.loaded_until.is_none() {
                act.loaded_share = share;
                let took = act.started.elapsed();
                metrics().startup_preload_done(took);
                log::info!(
                    "start-up preload: the next {window}s are in the wheel after {took:?}",
                    window = act.settings.window_secs
                );
            }
            act.loaded_until = Some(until)
        });
    }

    /// Puts in the wheel the tasks of every share that nobody fired in time: a process that
    /// died or paused has its share taken by the others only once its heartbeat expires, and
    /// its runs go out meanwhile, late by a second or two.
    fn overdue(&mut self, ctx: &mut Context<Self>) {
        // Until the start-up preload is done, this process's own tasks are not in the wheel
        // yet, and are its preload's, for the missed-run policy.
        if self.loaded_until.is_none() {
            return;
        }
        let until = self.clock.now() - OVERDUE_AFTER;
        let work = preload(
            (self.store.clone(), self.wheel.clone()),
            (DueCursor::start(), until),
            (Share::ALL, ScheduleMode::Overdue),
            self.settings.page_size,
        );
        self.run(Job::Overdue, ctx, work);
    }

    /// The share now; the partitions it lost since the last look count as not loaded any
    /// more, so that gaining one back loads it again.
    fn follow_share(&mut self) -> Share {
        let share = *self.share.borrow();
        self.loaded_share = self.loaded_share.minus(self.loaded_share.minus(share));
        share
    }

    /// Loads, over the loaded window, the tasks of the partitions the share gained: a process
    /// gone or stopped firing leaves its partitions to the others, overdue runs included.
    fn gain(&mut self, ctx: &mut Context<Self>) {
        let share = self.follow_share();
        let gained = share.minus(self.loaded_share);
        let Some(until) = self.loaded_until else {
            return;
        };
        if gained.is_empty() || self.running.contains(&Job::Gain) {
            return;
        }
        log::info!(
            "{} partitions joined this process's share: loading their tasks",
            gained.len()
        );
        let work = preload(
            (self.store.clone(), self.wheel.clone()),
            (DueCursor::start(), until),
            (gained, ScheduleMode::Overdue),
            self.settings.page_size,
        );
        self.run_then(Job::Gain, ctx, work, move |act| {
            act.loaded_share = act.loaded_share.union(gained);
        });
    }

    fn attempts(&mut self, ctx: &mut Context<Self>) {
        let offer = self.offer_due_attempts();
        self.run(Job::Attempts, ctx, offer);
    }

    /// Hands the attempts due within the lookahead to the wheel.
    fn offer_due_attempts(&self) -> impl std::future::Future<Output = Result<usize, StoreError>> {
        let until = self.clock.now() + chrono::Duration::seconds(ATTEMPT_LOOKAHEAD_SECS);
        let (store, wheel, limit) = (
            self.store.clone(),
            self.wheel.clone(),
            self.settings.page_size,
        );
        async move {
            let due = store
                .query(move |conn| boxed(due::due_attempts(conn, until, limit)))
                .await?;
            let count = due.len();
            wheel.schedule_attempts(due);
            Ok(count)
        }
    }

    /// Fences the processes whose promise went stale: the runs they fired ahead and never
    /// sent are due again at once; nothing waits on a dead or paused process.
    fn fences(&mut self, ctx: &mut Context<Self>) {
        let (store, me, now) = (
            self.store.clone(),
            self.instance_id.clone(),
            self.clock.now(),
        );
        let offer = self.offer_due_attempts();
        self.run(Job::Fences, ctx, async move {
            let taken = store
                .query(move |conn| {
                    boxed(async move { recovery::fence_stale(conn, &me, now).await })
                })
                .await?;
            // What was taken goes out now, not at the next scan for due attempts.
            if taken > 0 {
                offer.await?;
            }
            Ok(taken)
        });
    }

    /// Releases runs whose upstreams succeeded, fails those whose upstreams failed or took too
    /// long.
    fn dependencies(&mut self, ctx: &mut Context<Self>) {
        let (store, now, limit) = (
            self.store.clone(),
            self.clock.now(),
            self.settings.page_size,
        );
        self.run(Job::Dependencies, ctx, async move {
            let (released, failed) = store
                .query(move |conn| boxed(pending::check_pending(conn, now, limit)))
                .await?;
            if released > 0 {
                log::info!("{released} runs released: their upstreams succeeded");
            }
            Ok(released + failed)
        });
    }

    /// Deletes finished runs past the retention age, in small batches.
    fn retention(&mut self, ctx: &mut Context<Self>) {
        let before = to_db(self.clock.now() - self.settings.retention);
        let changes_before = to_db(self.clock.now() - CHANGES_KEPT);
        let store = self.store.clone();
        self.run(Job::Retention, ctx, async move {
            let mut deleted = 0;
            for _ in 0..RETENTION_BATCHES {
                let batch = store
                    .query(move |conn| {
                        boxed(runs::delete_finished_before(conn, before, RETENTION_BATCH))
                    })
                    .await?;
                deleted += batch;
                if batch < RETENTION_BATCH as usize {
                    break;
                }
            }
            if deleted > 0 {
                log::info!("retention: {deleted} finished runs deleted");
            }
            store
                .query(move |conn| boxed(task_changes::prune(conn, changes_before)))
                .await?;
            Ok(deleted)
        });
    }

    fn expiry(&mut self, ctx: &mut Context<Self>) {
        let now = self.clock.now();
        let (store, limit) = (self.store.clone(), self.settings.page_size);
        self.run(Job::Expiry, ctx, async move {
            let expired = store
                .query(move |conn| boxed(recovery::expired_running(conn, now, limit)))
                .await?;
            let count = expired.len();
            let timeouts = expired.into_iter().map(|(request_id, attempt)| {
                let store = store.clone();
                async move {
                    let event = Event::TimedOut { attempt, at: now };
                    match store.decide(request_id.clone(), event).await? {
                        Decided::Applied(run) => log::warn!(
                            "{}",
                            failed_attempt(
                                &request_id,
                                attempt,
                                Some(TIMEOUT_CODE),
                                Some(TIMEOUT_MESSAGE),
                                &run
                            )
                        ),
                        decided => {
                            log::debug!("request {request_id}: timeout not applied: {decided:?}")
                        }
                    }
                    Ok::<_, StoreError>(())
                }
            });
            for timed_out in join_all(timeouts).await {
                timed_out?;
            }
            Ok(count)
        });
    }
}

/// Streams the enabled tasks of `share` due after `from` and by `until` into the wheel, a page
/// at a time; the next page is read while the wheel takes the last one.
async fn preload(
    (store, wheel): (StoreHandle, WheelHandle),
    (from, until): (DueCursor, DateTime<Utc>),
    (share, mode): (Share, ScheduleMode),
    page_size: i64,
) -> Result<usize, StoreError> {
    let until = to_db(until);
    let read = |cursor| {
        store.query(move |conn| {
            boxed(async move {
                let page = tasks::due_until(conn, (cursor, until), share, page_size).await?;
                let book = calendars::book_for(conn, page.iter().map(|(task, _)| task)).await?;
                Ok((page, book))
            })
        })
    };
    let (mut page, mut book) = read(from).await?;
    let mut count = 0;
    loop {
        let Some((last, _)) = page.last() else {
            return Ok(count);
        };
        count += page.len();
        let next = (page.len() as i64 == page_size).then(|| read(DueCursor::past(last)));
        let scheduled = wheel.schedule(models::wheel_entries(&page, &book), mode);
        let (scheduled, next) = match next {
            Some(next) => futures_util::future::join(scheduled, next).await,
            None => return wheel_took(scheduled.await).map(|()| count),
        };
        wheel_took(scheduled)?;
        (page, book) = next?;
    }
}

/// The wheel's answer to a page of the preload, as the preload's error.
fn wheel_took<E: std::fmt::Display>(scheduled: Result<(), E>) -> Result<(), StoreError> {
    scheduled.map_err(|err| StoreError::Pool(format!("wheel unavailable: {err}")))
}

impl Actor for SupervisorActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        self.open_feed(ctx, |act, ctx| act.preload(ctx));
        self.attempts(ctx);
        ctx.run_interval(CHANGES_INTERVAL, |act, ctx| {
            act.changes(ctx);
            act.gain(ctx);
        });
        ctx.run_interval(RECONCILE_INTERVAL, |act, ctx| act.reconcile(ctx));
        ctx.run_interval(self.settings.preload_interval, |act, ctx| act.preload(ctx));
        ctx.run_interval(OVERDUE_INTERVAL, |act, ctx| act.overdue(ctx));
        ctx.run_interval(FENCE_INTERVAL, |act, ctx| act.fences(ctx));
        ctx.run_interval(RETENTION_INTERVAL, |act, ctx| act.retention(ctx));
        ctx.run_interval(SCAN_INTERVAL, |act, ctx| {
            act.dependencies(ctx);
            act.attempts(ctx);
            act.expiry(ctx);
        });
    }
}

/// Stops the supervisor's periodic work (shutdown).
#[derive(Message)]
#[rtype(result = "()")]
pub struct StopSupervisor;

impl Handler<StopSupervisor> for SupervisorActor {
    type Result = ();

    fn handle(&mut self, _: StopSupervisor, ctx: &mut Context<Self>) {
        ctx.stop();
    }
}
