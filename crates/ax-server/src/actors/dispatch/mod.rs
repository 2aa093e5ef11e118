//! DispatchActor pool: POSTs each committed run to its handler and records the outcome. An
//! attempt is taken in with a slot and a claim (`admit`), sent (`send`, `deliver`), its reply
//! classified (`reply`) and its outcome recorded (`record`); this module is the actors' shell
//! and the handle the rest of ax calls.

mod admit;
mod deliver;
mod job;
mod record;
mod reply;
mod send;

use ax_core::ids::ProcessId;
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use actix::prelude::*;
use tokio::sync::Semaphore;

use self::admit::{Held, Shared};
use self::deliver::Envelope;
use self::send::Sender;
use super::groups::{ExecutorGroups, GroupSettings, MemberState};
use super::resolver::guarded_client;
use super::store::StoreHandle;
use super::InFlight;
use ax_core::cluster::fencing::SendGate;
use ax_core::dispatch::host_slots::{HostCaps, HostLoad, HostSlots, LaneSettings};
use ax_core::run::{RequestId, TaskId};
use ax_core::security::Security;
use ax_core::task::executor::TaskExecutor;
use ax_core::time::clock::SharedClock;

pub use job::DispatchJob;
pub use reply::{classify_reply, Reply};

/// One dispatcher: an HTTP client on its own thread, with at most `max_in_flight` requests
/// at a time, sharing the hosts' slots with the others.
pub struct DispatchActor {
    shared: Arc<Shared>,
    envelope: Envelope,
    max_in_flight: usize,
    /// The first dispatcher also keeps the held attempts' claims.
    looks_after_held: bool,
    sender: Option<Rc<Sender>>,
}

/// How many results may wait for their commit per request slot: enough to ride out a slow
/// commit, few enough that an overloaded store holds the dispatchers back instead of queueing
/// without bound.
const RESULTS_PER_REQUEST: usize = 8;

impl Actor for DispatchActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        let client = guarded_client(
            self.envelope.allowlist.clone(),
            self.max_in_flight,
            Duration::from_secs(5),
            None,
        );
        self.sender = Some(Rc::new(Sender {
            shared: self.shared.clone(),
            client,
            envelope: self.envelope.clone(),
            permits: Arc::new(Semaphore::new(self.max_in_flight)),
            recording: InFlight::default(),
            recording_permits: Arc::new(Semaphore::new(self.max_in_flight * RESULTS_PER_REQUEST)),
            serving: InFlight::default(),
        }));
        if self.looks_after_held {
            let busy = Rc::new(std::cell::Cell::new(false));
            let mut tick = 0u64;
            ctx.run_interval(Duration::from_secs(1), move |act, _| {
                if busy.replace(true) {
                    return;
                }
                tick += 1;
                let (shared, busy) = (act.shared.clone(), busy.clone());
                actix::spawn(async move {
                    shared.groups.refresh(&shared.store, tick).await;
                    shared.look_after_held().await;
                    busy.set(false);
                });
            });
        }
    }
}

/// Delivers runs: each goes to a slot of its executor's host, or waits in that host's queue.
/// Answers once every run with a slot has a request slot too (so senders feel the in-flight
/// bound); a run waiting for its host holds nothing.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Dispatch(pub Vec<DispatchJob>);

impl Handler<Dispatch> for DispatchActor {
    type Result = ResponseFuture<()>;

    fn handle(&mut self, msg: Dispatch, _: &mut Context<Self>) -> Self::Result {
        let sender = self.sender.clone();
        Box::pin(async move {
            if let Some(sender) = sender {
                sender.take(msg.0).await;
            }
        })
    }
}

/// Waits until every request in flight has finished and its result is recorded; runs still
/// waiting for their host are not sent (their claims lapse when this process restarts).
#[derive(Message)]
#[rtype(result = "()")]
pub struct Drain;

impl Handler<Drain> for DispatchActor {
    type Result = ResponseFuture<()>;

    fn handle(&mut self, _: Drain, _: &mut Context<Self>) -> Self::Result {
        let dropped = self.shared.drop_waiting(|_| true);
        if dropped > 0 {
            log::warn!("shutdown: {dropped} runs waiting for their executor host not sent");
        }
        let sender = self.sender.clone();
        Box::pin(async move {
            if let Some(sender) = sender {
                sender.serving.idle().await;
                sender.recording.idle().await;
            }
        })
    }
}

/// The dispatcher pool: each worker on its own thread, jobs handed out in turn.
#[derive(Clone)]
pub struct DispatchHandle {
    workers: Arc<[Addr<DispatchActor>]>,
    next: Arc<AtomicUsize>,
    shared: Arc<Shared>,
}

/// How the dispatchers are set up.
pub struct DispatchSettings {
    pub workers: usize,
    /// Requests in flight per worker.
    pub max_in_flight: usize,
    pub host_caps: HostCaps,
    /// How each host's slots are shared between quick and slow tasks.
    pub lanes: LaneSettings,
    /// How executor group members are kept.
    pub groups: GroupSettings,
    /// This process, as its claims name it.
    pub claimant: ProcessId,
    /// The cluster's clock (see `ax_core::time::clock::ReferenceClock`).
    pub clock: SharedClock,
    /// ax's API as executors reach it (`executors.callback_url`).
    pub reply_to: String,
    /// This process's promises (see `ax_core::cluster::fencing`).
    pub gate: SendGate,
}

impl DispatchHandle {
    /// Starts the dispatchers, each on its own arbiter.
    pub fn start(settings: DispatchSettings, store: StoreHandle, security: &Security) -> Self {
        let shared = Arc::new(Shared {
            state: Mutex::new(Held {
                slots: HostSlots::new(settings.lanes),
                attempts: HashMap::new(),
            }),
            caps: settings.host_caps,
            groups: Arc::new(ExecutorGroups::new(settings.groups)),
            claimant: settings.claimant,
            clock: settings.clock,
            gate: settings.gate,
            store,
            shown: Mutex::default(),
        });
        let max_in_flight = settings.max_in_flight.max(1);
        let envelope = Envelope::new(security, &settings.reply_to);
        let workers: Vec<_> = (0..settings.workers.max(1))
            .map(|n| {
                let (shared, envelope) = (shared.clone(), envelope.clone());
                DispatchActor::start_in_arbiter(&Arbiter::new().handle(), move |_| DispatchActor {
                    shared,
                    envelope,
                    max_in_flight,
                    looks_after_held: n == 0,
                    sender: None,
                })
            })
            .collect();
        DispatchHandle {
            workers: workers.into(),
            next: Arc::new(AtomicUsize::new(0)),
            shared,
        }
    }

    /// Hands runs to the dispatchers, spread evenly, one message each; waits while they are
    /// at their in-flight bound.
    pub async fn dispatch(&self, jobs: Vec<DispatchJob>) {
        let workers = self.workers.len();
        let first = self.next.fetch_add(jobs.len(), Ordering::Relaxed);
        let mut shares: Vec<Vec<DispatchJob>> = (0..workers).map(|_| Vec::new()).collect();
        for (k, job) in jobs.into_iter().enumerate() {
            shares[(first + k) % workers].push(job);
        }
        let sends = shares
            .into_iter()
            .zip(self.workers.iter())
            .filter(|(share, _)| !share.is_empty())
            .map(|(share, worker)| async move {
                let count = share.len();
                if let Err(err) = worker.send(Dispatch(share)).await {
                    log::error!("{count} runs not dispatched: dispatcher unavailable: {err}");
                }
            });
        futures_util::future::join_all(sends).await;
    }

    /// Whether this process holds the run's attempt (waiting for its host, or in flight): a
    /// scan that finds it due must not claim it again.
    pub fn holds(&self, id: &RequestId) -> bool {
        self.shared.held().attempts.contains_key(id)
    }

    /// Ends what the dispatchers hold of a deleted task's runs: waiting attempts are dropped,
    /// requests in flight ended (their connections closed). Answers how many.
    pub fn forget_task(&self, task_id: TaskId) -> usize {
        let waiting = self.shared.drop_waiting(|job| job.task_id == task_id);
        let mut held = self.shared.held();
        let mut ended = 0;
        held.attempts.retain(|_, attempt| {
            if attempt.task_id != task_id {
                return true;
            }
            if let Some(abort) = &attempt.abort {
                abort.abort();
                ended += 1;
            }
            false
        });
        waiting + ended
    }

    /// Reads the executor groups from the store now (at start-up, and after a change here,
    /// rather than at the next second's refresh).
    pub async fn refresh_groups(&self) {
        self.shared.groups.refresh(&self.shared.store, 1).await;
    }

    /// The members a fire of a broadcast task is sharded over now; `None` when its runs are
    /// not broadcast (see `ExecutorGroups::broadcast_members`).
    pub fn broadcast_members(&self, executor: &TaskExecutor) -> Option<Vec<Arc<str>>> {
        self.shared.groups.broadcast_members(executor)
    }

    /// Each executor group member's health and load in this process, by URL.
    pub fn member_states(&self) -> HashMap<String, MemberState> {
        let held = self.shared.held();
        self.shared
            .groups
            .states(|member| held.slots.in_flight(member))
    }

    /// Each executor host's load in this process (its slots in both lanes), by name, and how
    /// many handlers are slow.
    pub fn host_loads(&self) -> (Vec<HostLoad>, usize) {
        let held = self.shared.held();
        (held.slots.loads(), held.slots.slow_handlers())
    }

    /// The dispatchers, for health checks and for stopping them after a failed start-up.
    pub fn workers(&self) -> &[Addr<DispatchActor>] {
        &self.workers
    }

    /// Waits, at most `timeout`, for every request in flight to finish.
    pub async fn drain(&self, timeout: Duration) {
        let all = futures_util::future::join_all(self.workers.iter().map(|w| w.send(Drain)));
        if tokio::time::timeout(timeout, all).await.is_err() {
            log::warn!("shutdown: dispatches still in flight after {timeout:?}");
        }
    }
}
