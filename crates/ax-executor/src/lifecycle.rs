//! A run's life in this process, from its claim to its reported result: the runs in flight,
//! a re-delivery joining its run, the result going to the waiting reply or by callback, and
//! the runs abandoned at shutdown.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::{oneshot, watch};

use crate::backoff::Backoff;
use crate::callback;
use crate::client::AxApi;
use crate::dedupe::DynDedupe;
use crate::dispatch::{Delivery, Dispatch};
use crate::handler::Handler;
use crate::logs::RunLog;
use crate::outcome::{cut, Failed, Outcome, MAX_MESSAGE_CHARS};
use crate::runner::Runner;

/// The code of a run still at work when the executor's shutdown grace ran out (retried).
pub const EXECUTOR_SHUTDOWN_CODE: &str = "EXECUTOR_SHUTDOWN";
const EXECUTOR_SHUTDOWN_MESSAGE: &str = "the executor shut down before the run ended";
/// How long the results of abandoned runs are tried at shutdown: the process is leaving.
const SHUTDOWN_REPORT_FOR: Duration = Duration::from_secs(10);

/// What a waiting reply is told.
#[derive(Debug)]
pub(crate) enum Answer {
    Done(Outcome),
    /// The run was abandoned at shutdown: answer 503, ax tries again.
    Shutdown,
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // Every critical section here is a plain read or assignment: a poisoned lock is consistent.
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// One run in flight.
struct Entry {
    request_id: String,
    first_attempt: u32,
    /// The newest delivery: where the result and log lines go.
    delivery: Arc<Mutex<Delivery>>,
    /// The first delivery's request, while it waits for the result (`reply_within`).
    waiter: Mutex<Option<oneshot::Sender<Answer>>>,
    /// Set once by whichever ends the run: the handler's end, or the shutdown abandoning it.
    ended: AtomicBool,
    log: Arc<RunLog>,
}

/// Every run in flight, and what a run needs to end.
pub(crate) struct Runs {
    store: Arc<dyn DynDedupe>,
    api: Arc<AxApi>,
    runner: Runner,
    stopping: watch::Sender<bool>,
    entries: Mutex<HashMap<u64, Arc<Entry>>>,
    next_id: AtomicU64,
    /// Runs started and not yet reported (their callbacks included).
    busy: watch::Sender<usize>,
}

/// Counts a run as busy while alive.
struct Busy(Arc<Runs>);

impl Drop for Busy {
    fn drop(&mut self) {
        self.0
            .busy
            .send_modify(|busy| *busy = busy.saturating_sub(1));
    }
}

impl Runs {
    pub fn new(store: Arc<dyn DynDedupe>, api: Arc<AxApi>, runner: Runner) -> Runs {
        Runs {
            store,
            api,
            runner,
            stopping: watch::Sender::new(false),
            entries: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(0),
            busy: watch::Sender::new(0),
        }
    }

    pub fn store(&self) -> &dyn DynDedupe {
        self.store.as_ref()
    }

    /// Starts a claimed run on a run thread. With `wait`, the returned receiver gets its
    /// result if the caller still waits when it ends; `None` when the runner has stopped.
    pub fn start(
        self: &Arc<Self>,
        handler: Arc<dyn Handler>,
        dispatch: Dispatch,
        wait: bool,
    ) -> Option<Option<oneshot::Receiver<Answer>>> {
        let delivery = Arc::new(Mutex::new(dispatch.delivery(&self.api)));
        let (tx, rx) = oneshot::channel();
        let entry = Arc::new(Entry {
            request_id: dispatch.request_id.clone(),
            first_attempt: dispatch.attempt,
            log: Arc::new(RunLog::new(
                dispatch.request_id.clone(),
                delivery.clone(),
                self.api.clone(),
            )),
            delivery,
            waiter: Mutex::new(wait.then_some(tx)),
            ended: AtomicBool::new(false),
        });
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        lock(&self.entries).insert(id, entry.clone());
        self.busy.send_modify(|busy| *busy += 1);
        let busy = Busy(self.clone());
        let runs = self.clone();
        let stopping = self.stopping.subscribe();
        let started = self.runner.spawn(Box::new(move || {
            Box::pin(async move {
                let _busy = busy;
                tokio::task::spawn_local(entry.log.clone().keep_flushing());
                let log = entry.log.clone();
                // Its own task, so that a panic in the handler is caught as its result.
                let work = tokio::task::spawn_local(async move {
                    handler.start(dispatch, log, stopping).await
                });
                let outcome = match work.await {
                    Ok(outcome) => outcome,
                    Err(err) => panicked(err),
                };
                runs.end(id, &entry, outcome).await;
            })
        }));
        if !started {
            lock(&self.entries).remove(&id);
            return None;
        }
        Some(wait.then_some(rx))
    }

    /// A re-delivery of a run in flight here: its result will go to this newest attempt.
    /// `false` when the run is not in flight in this process.
    pub fn redeliver(&self, dispatch: &Dispatch) -> bool {
        let entries = lock(&self.entries);
        let Some(entry) = entries
            .values()
            .find(|entry| entry.request_id == dispatch.request_id)
        else {
            return false;
        };
        let mut delivery = lock(&entry.delivery);
        if dispatch.attempt >= delivery.attempt {
            *delivery = dispatch.delivery(&self.api);
        }
        true
    }

    /// The handler ended: its log sent, its result kept, then answered or called back.
    async fn end(&self, id: u64, entry: &Entry, outcome: Outcome) {
        if entry.ended.swap(true, Ordering::AcqRel) {
            return; // abandoned at shutdown, and reported then
        }
        entry.log.end().await;
        if let Err(err) = self.store.finish(&entry.request_id, &outcome).await {
            log::error!("run {}: {err}", entry.request_id);
        }
        // Out of the map first, so that no re-delivery changes the delivery read below.
        let delivery = {
            let mut entries = lock(&self.entries);
            entries.remove(&id);
            lock(&entry.delivery).clone()
        };
        log::info!(
            "run {} attempt {}: {:?} {}",
            entry.request_id,
            delivery.attempt,
            outcome.status,
            outcome.message.as_deref().unwrap_or("")
        );
        let answered = lock(&entry.waiter)
            .take()
            .is_some_and(|waiter| waiter.send(Answer::Done(outcome.clone())).is_ok());
        // A reply carries the first attempt's result; a newer attempt's comes by callback.
        if !answered || delivery.attempt != entry.first_attempt {
            let backoff = self.api.callback_backoff;
            callback::report(&self.api, &backoff, &entry.request_id, &delivery, &outcome).await;
        }
    }

    /// Shutdown began: every run's `stopping()` turns true.
    pub fn begin_stopping(&self) {
        self.stopping.send_replace(true);
    }

    /// Waits until every run is reported, up to `grace`; whether they all were.
    pub async fn wait_idle(&self, grace: Duration) -> bool {
        let mut busy = self.busy.subscribe();
        let idle = tokio::time::timeout(grace, busy.wait_for(|busy| *busy == 0)).await;
        idle.is_ok()
    }

    /// The grace is over: each run still at work is reported `EXECUTOR_SHUTDOWN` (to its
    /// waiting reply, else by callback) and released, so a re-delivery runs it again.
    pub async fn abandon_all(&self) {
        let entries: Vec<Arc<Entry>> = lock(&self.entries).drain().map(|(_, e)| e).collect();
        let mut reports = tokio::task::JoinSet::new();
        for entry in entries {
            if entry.ended.swap(true, Ordering::AcqRel) {
                continue;
            }
            let store = self.store.clone();
            let api = self.api.clone();
            reports.spawn_local(async move {
                log::warn!(
                    "run {}: still at work past the shutdown grace",
                    entry.request_id
                );
                entry.log.end().await;
                if let Err(err) = store.release(&entry.request_id).await {
                    log::error!("run {}: {err}", entry.request_id);
                }
                let delivery = lock(&entry.delivery).clone();
                let answered = lock(&entry.waiter)
                    .take()
                    .is_some_and(|waiter| waiter.send(Answer::Shutdown).is_ok());
                if !answered || delivery.attempt != entry.first_attempt {
                    let outcome =
                        Outcome::failed(EXECUTOR_SHUTDOWN_CODE, EXECUTOR_SHUTDOWN_MESSAGE);
                    let backoff = Backoff {
                        give_up_after: SHUTDOWN_REPORT_FOR,
                        ..api.callback_backoff
                    };
                    callback::report(&api, &backoff, &entry.request_id, &delivery, &outcome).await;
                }
            });
        }
        while reports.join_next().await.is_some() {}
    }

    /// Ends the run threads, dropping whatever still runs there (already abandoned).
    pub fn stop_threads(&self) {
        self.runner.stop();
    }
}

/// The result of a handler that panicked: code `ERROR`, the panic's text, retried.
fn panicked(err: tokio::task::JoinError) -> Outcome {
    let text = match err.try_into_panic() {
        Ok(payload) => payload
            .downcast_ref::<&str>()
            .map(|text| text.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a panic without a message".to_string()),
        Err(err) => err.to_string(),
    };
    Failed::error(cut(
        format!("the handler panicked: {text}"),
        MAX_MESSAGE_CHARS,
    ))
    .into()
}
