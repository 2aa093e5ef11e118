//! DispatchActor pool: POSTs each committed run to its handler and records the outcome.

use std::collections::HashMap;
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use actix::prelude::*;
use chrono::{DateTime, Utc};
use futures_util::future::{abortable, AbortHandle};
use serde::Serialize;
use serde_json::value::RawValue;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::fleet::{Fleet, FleetSettings, MemberState, Route};
use super::resolver::{guarded_client, NotAllowed};
use super::store::{boxed, RunEvent, StoreHandle};
use super::InFlight;
use ax_core::cluster::fencing::SendGate;
use ax_core::dispatch::host_slots::{host_key, HostCaps, HostLoad, HostSlots, Lane, LaneSettings};
use ax_core::dispatch::routing::{member_url, Exchange};
use ax_core::metrics::{metrics, DispatchResult};
use ax_core::run::logs::cut_output;
use ax_core::run::{
    claim_covers, failed_attempt, http_code, renewed_claim, Decided, Event, Outcome, Report,
    ReportedStatus, RequestId, Shard, TaskId, BAD_PARAMS_CODE, BAD_REPLY_CODE, BAD_URI_MESSAGE,
    BODY_NOT_ENCODED_MESSAGE, CONNECT_ERROR_CODE, HANDLER_NOT_ALLOWED_CODE, NO_EXECUTOR_CODE,
    NO_REPLY_MESSAGE, PARAMS_NOT_JSON_MESSAGE, TIMEOUT_CODE,
};
use ax_core::security::{
    callback_token, sign_dispatch, Allowlist, Security, SIGNATURE_HEADER, TIMESTAMP_HEADER,
};
use ax_core::task::executor::TaskExecutor;
use ax_core::text::{clean_message, result_code, result_message};
use ax_core::time::clock::{rfc3339, SharedClock};
use ax_store::queries::run_log;
use ax_store::rows::models::{cut, MAX_CODE_CHARS, MAX_MESSAGE_CHARS};

/// Longest reply body read from a handler.
const MAX_REPLY_BYTES: usize = 64 * 1024;

/// One delivery of a run's attempt to its handler.
#[derive(Debug, Clone)]
pub struct DispatchJob {
    pub task_id: TaskId,
    pub request_id: RequestId,
    /// Where the attempt is sent: the task's handler URL, or its group member's URL + path.
    pub handler_url: String,
    /// The executor group the task's runs go to, instead of one handler URL.
    pub executor: Option<Arc<TaskExecutor>>,
    /// The group member the attempt goes to: a broadcast shard's own (given at fire time, or
    /// the one that served its last attempt) until routed, then the one routed to.
    pub member: Option<Arc<str>>,
    /// A broadcast run's shard, sent with the attempt.
    pub shard: Option<Shard>,
    /// The members this attempt could not connect to (it goes to another at once).
    pub tried: Vec<Arc<str>>,
    /// When it was offered a slot: its wait for one is measured from here.
    pub queued_at: Option<std::time::Instant>,
    /// The params as JSON text, sent as they are.
    pub params: Arc<str>,
    pub scheduled_at: DateTime<Utc>,
    /// When the first attempt was due: the scheduled time, plus the task's jitter offset for
    /// a scheduled run. Trigger lag counts from here.
    pub due_at: DateTime<Utc>,
    pub attempt: i32,
    pub timeout_ms: i64,
    /// When this process's claim on the attempt lapses, as handed over (the dispatchers renew
    /// it while they hold the attempt).
    pub claimed_until: DateTime<Utc>,
    /// The fencing generation its claim was taken in: a claim from before this process was
    /// fenced or paused is checked again before it is sent (see `ax_core::cluster::fencing`).
    pub generation: u64,
}

/// The body POSTed to a handler.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct DispatchBody<'a> {
    task_id: TaskId,
    request_id: &'a RequestId,
    params: &'a RawValue,
    scheduled_at: String,
    attempt: i32,
    /// The result callback must carry this token (see `security::callback_token`).
    callback_token: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    shard_index: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    shard_total: Option<i32>,
}

fn failed(code: &str, message: impl Into<String>) -> Outcome {
    Outcome::Failed {
        code: Some(code.to_string()),
        message: Some(cut(message.into(), MAX_MESSAGE_CHARS)),
        retry: true,
    }
}

/// An attempt ax refused to send: its handler's host is not allowed. Not retried, as every
/// retry would be refused the same way.
fn not_allowed(message: impl Into<String>) -> Outcome {
    Outcome::Failed {
        code: Some(HANDLER_NOT_ALLOWED_CODE.to_string()),
        message: Some(cut(message.into(), MAX_MESSAGE_CHARS)),
        retry: false,
    }
}

/// A handler's reply: the attempt's outcome, and the `output` its body carried (kept with the
/// attempt's log).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    pub outcome: Outcome,
    pub output: Option<String>,
}

impl From<Outcome> for Reply {
    fn from(outcome: Outcome) -> Self {
        Reply {
            outcome,
            output: None,
        }
    }
}

/// Classifies a handler's reply as HTTP defines its status codes: a 2xx whose JSON body has
/// `"status": "SUCCESS"|"FAILED"` is the result, whatever the code (`"retry": false` stops
/// retries of a failure); otherwise `202 Accepted` means the executor will call back by
/// `deadline`, and any other 2xx (200, 201, 204 …) is a success; anything else failed.
pub fn classify_reply(status: u16, body: &[u8], deadline: DateTime<Utc>) -> Reply {
    if !(200..300).contains(&status) {
        let text = String::from_utf8_lossy(body);
        return failed(&http_code(status), clean_message(text.trim())).into();
    }
    let by_code = if status == 202 {
        Outcome::Accepted { deadline }
    } else {
        Outcome::Succeeded {
            code: None,
            message: None,
        }
    };
    let Ok(serde_json::Value::Object(reply)) = serde_json::from_slice(body) else {
        return by_code.into();
    };
    // The code and message are read as a callback's are, and brought within their columns.
    // One a callback would have refused (a code of another type or with control characters,
    // a message not a string) is dropped, not the attempt: the status is the executor's
    // result, and a reported success turned into a failure would run the job again.
    let text = |field: &str, read: fn(&serde_json::Value) -> Result<Option<String>, _>| {
        reply
            .get(field)
            .and_then(|value| read(value).ok().flatten())
    };
    let code = text("code", result_code).map(|code| cut(code, MAX_CODE_CHARS));
    let message = text("message", result_message).map(|message| cut(message, MAX_MESSAGE_CHARS));
    let output = match reply.get("output") {
        Some(serde_json::Value::String(output)) => Some(cut_output(output).to_string()),
        _ => None,
    };
    let status = reply.get("status").and_then(|s| s.as_str());
    let outcome = match status.and_then(ReportedStatus::parse) {
        Some(ReportedStatus::Success) => Outcome::Succeeded { code, message },
        Some(ReportedStatus::Failed) => Outcome::Failed {
            code,
            message,
            retry: reply.get("retry") != Some(&serde_json::Value::Bool(false)),
        },
        None => by_code,
    };
    Reply { outcome, output }
}

/// What every dispatcher shares: the executor hosts' slots, and each attempt held (waiting for
/// a slot, in flight, or with its reply on the way to the store) with this process's claim on
/// it, kept renewed so that none is claimed again or sent twice while it is held.
struct Shared {
    state: Mutex<Held>,
    caps: HostCaps,
    /// The executor groups, routed over by attempts of tasks that name one.
    fleet: Arc<Fleet>,
    /// This process, as the claims it holds name it.
    claimant: String,
    /// The cluster's clock, which claims are written and compared by.
    clock: SharedClock,
    /// This process's promises: a claim from before it was fenced or paused is checked again.
    gate: SendGate,
    store: StoreHandle,
    /// The hosts last shown in `ax_dispatch_queued`.
    shown: Mutex<Vec<Arc<str>>>,
}

/// Jobs taken in: those with a slot now, by slot, and those no member can take, with why.
#[derive(Default)]
struct Admitted {
    now: Vec<(Arc<str>, DispatchJob, Lane)>,
    unroutable: Vec<(DispatchJob, String)>,
}

struct Held {
    slots: HostSlots<DispatchJob>,
    attempts: HashMap<RequestId, HeldAttempt>,
}

struct HeldAttempt {
    task_id: TaskId,
    attempt: i32,
    timeout_ms: i64,
    /// When this process's claim on the attempt lapses.
    claimed_until: DateTime<Utc>,
    /// The fencing generation its claim was taken or last renewed in.
    generation: u64,
    /// A renewal of its claim is under way.
    renewing: bool,
    /// Set while its request is in flight: ends it (its task was deleted).
    abort: Option<AbortHandle>,
}

/// A claim to renew: what the store needs to know of the attempt.
#[derive(Clone)]
struct Renewal {
    request_id: RequestId,
    task_id: TaskId,
    attempt: i32,
    timeout_ms: i64,
}

impl Renewal {
    fn of(job: &DispatchJob) -> Renewal {
        Renewal {
            request_id: job.request_id.clone(),
            task_id: job.task_id,
            attempt: job.attempt,
            timeout_ms: job.timeout_ms,
        }
    }
}

/// What the sender is to do with an attempt whose turn came.
enum Claim {
    /// Its claim covers the exchange: send it.
    Covered,
    /// Its claim is (nearly) lapsed, as when ax itself is far behind: renew it first.
    Lapsing,
    /// It is no longer held (its task was deleted while it waited).
    Gone,
}

impl Shared {
    fn held(&self) -> std::sync::MutexGuard<'_, Held> {
        // A panic while the lock was held cannot leave the bookkeeping half-written in a way
        // that matters more than stopping dispatch would.
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Takes `jobs` in: each gets a slot of its host or group member now (answered, to
    /// send) or waits; one whose group has no member to take it is answered apart.
    fn admit(&self, jobs: Vec<DispatchJob>) -> Admitted {
        let mut held = self.held();
        let mut admitted = Admitted::default();
        for mut job in jobs {
            // A job routed again (failover) keeps its claim as held.
            held.attempts
                .entry(job.request_id.clone())
                .or_insert_with(|| HeldAttempt {
                    task_id: job.task_id,
                    attempt: job.attempt,
                    timeout_ms: job.timeout_ms,
                    claimed_until: job.claimed_until,
                    generation: job.generation,
                    renewing: false,
                    abort: None,
                });
            let (slot, cap) = match self.slot_of(&held, &mut job) {
                Ok(slot) => slot,
                Err(why) => {
                    admitted.unroutable.push((job, why));
                    continue;
                }
            };
            job.queued_at = Some(std::time::Instant::now());
            let handler = job.handler_url.clone();
            if let Some((job, lane)) = held.slots.admit(&slot, cap, &handler, job) {
                admitted.now.push((slot, job, lane));
            }
        }
        admitted
    }

    /// The slot an attempt takes, with its cap: its handler's host, or the group member it is
    /// routed to now (its URL set to the member's); why none, for a group without a member.
    fn slot_of(&self, held: &Held, job: &mut DispatchJob) -> Result<(Arc<str>, usize), String> {
        let Some(executor) = job.executor.clone() else {
            let host: Arc<str> = host_key(&job.handler_url).unwrap_or_default().into();
            let cap = self.caps.of(&host);
            return Ok((host, cap));
        };
        let in_flight = |member: &str| held.slots.in_flight(member);
        let own = job.member.as_deref();
        match self
            .fleet
            .route(&executor, job.task_id, (&job.tried, own), in_flight)
        {
            Route::To {
                member,
                cap,
                broadcast,
            } => {
                job.handler_url = member_url(&member, &executor.path);
                job.member = Some(member.clone());
                if broadcast {
                    job.shard = Some(job.shard.unwrap_or(Shard::WHOLE));
                }
                Ok((member, cap))
            }
            Route::NoMember(why) => Err(why),
        }
    }

    /// Whether the held attempt `id` may be sent as its claim stands, in the fencing
    /// `generation` of a promise that stands now.
    fn claim(&self, id: &RequestId, generation: u64) -> Claim {
        match self.held().attempts.get(id) {
            Some(held)
                if held.generation == generation
                    && claim_covers(held.claimed_until, self.clock.now()) =>
            {
                Claim::Covered
            }
            Some(_) => Claim::Lapsing,
            None => Claim::Gone,
        }
    }

    /// Marks the attempt in flight, abortable; `false` if it is no longer held (its task was
    /// deleted while it waited).
    fn in_flight(&self, id: &RequestId, abort: AbortHandle) -> bool {
        match self.held().attempts.get_mut(id) {
            Some(held) => {
                held.abort = Some(abort);
                true
            }
            None => false,
        }
    }

    fn release(&self, id: &RequestId) {
        self.held().attempts.remove(id);
    }

    /// Drops the waiting attempts `drop` picks; answers how many.
    fn drop_waiting(&self, mut drop: impl FnMut(&DispatchJob) -> bool) -> usize {
        let mut held = self.held();
        let dropped = held.slots.remove_waiting(&mut drop);
        for job in &dropped {
            held.attempts.remove(&job.request_id);
        }
        dropped.len()
    }

    /// Asks the store to extend the claim on a held attempt, and notes the new one; answers
    /// whether the attempt is still this process's to send. A store out of reach is asked
    /// again.
    async fn renew(&self, renewal: &Renewal) -> bool {
        // Read before the write: a fence while it is under way makes it count for less.
        let generation = self.gate.generation();
        let until = renewed_claim(self.clock.now(), renewal.timeout_ms);
        let event = RunEvent {
            request_id: renewal.request_id.clone(),
            task_id: None,
            event: Event::Renewed {
                attempt: renewal.attempt,
                claimant: self.claimant.clone(),
                until,
            },
            blind: false,
        };
        let mut pause = Duration::from_millis(100);
        let renewed = loop {
            match self.store.record_event(event.clone()).await {
                Ok(Some(Decided::Applied(_))) => break true,
                Ok(decided) => {
                    log::info!(
                        "task {} request {}: claim on attempt {} not renewed, its run moved on \
                         (an attempt still waiting is not sent): {decided:?}",
                        renewal.task_id,
                        renewal.request_id,
                        renewal.attempt
                    );
                    break false;
                }
                Err(err) => {
                    log::warn!(
                        "task {} request {}: claim not renewed yet, trying again in {pause:?}: \
                         {err}",
                        renewal.task_id,
                        renewal.request_id
                    );
                    actix_rt::time::sleep(pause).await;
                    pause = (pause * 2).min(RECORD_BACKOFF_MAX);
                }
            }
        };
        // A run that moved on keeps its old claim and is not renewed again.
        if let Some(held) = self.held().attempts.get_mut(&renewal.request_id) {
            if renewed {
                held.claimed_until = until;
                held.generation = generation;
                held.renewing = false;
            }
        }
        renewed
    }

    /// Renews the claims of held attempts (waiting, in flight or being recorded) that would not
    /// cover a send in a moment, drops the waiting ones whose run moved on, and shows and warns
    /// about the hosts at their cap.
    async fn look_after_held(self: Arc<Self>) {
        let soon = self.clock.now() + chrono::Duration::seconds(2);
        let (due, loads, warnings) = {
            let mut held = self.held();
            let due: Vec<Renewal> = held
                .attempts
                .iter_mut()
                .filter(|(_, a)| !a.renewing && !claim_covers(a.claimed_until, soon))
                .map(|(id, a)| {
                    a.renewing = true;
                    Renewal {
                        request_id: id.clone(),
                        task_id: a.task_id,
                        attempt: a.attempt,
                        timeout_ms: a.timeout_ms,
                    }
                })
                .collect();
            let warnings = held
                .slots
                .warnings(Utc::now().timestamp(), HOST_WARNING_SECS);
            (due, held.slots.loads(), warnings)
        };
        self.show_hosts(&loads);
        {
            let held = self.held();
            self.fleet.show(|member| held.slots.in_flight(member));
        }
        for load in warnings {
            warn_waiting(&load);
        }
        let renewed =
            futures_util::future::join_all(due.iter().map(|renewal| self.renew(renewal))).await;
        let moved_on: std::collections::HashSet<&RequestId> = due
            .iter()
            .zip(renewed)
            .filter(|(_, renewed)| !renewed)
            .map(|(renewal, _)| &renewal.request_id)
            .collect();
        if !moved_on.is_empty() {
            self.drop_waiting(|job| moved_on.contains(&job.request_id));
        }
    }

    /// Shows each host's load in the dispatch metrics, and clears the hosts gone.
    fn show_hosts(&self, loads: &[HostLoad]) {
        let gone = {
            let mut shown_before = self
                .shown
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let now: Vec<Arc<str>> = loads.iter().map(|load| load.host.clone()).collect();
            let gone: Vec<Arc<str>> = shown_before
                .iter()
                .filter(|host| !now.contains(host))
                .cloned()
                .collect();
            *shown_before = now;
            gone
        };
        let slow_handlers = self.held().slots.slow_handlers();
        metrics().dispatch_hosts(&gone, loads, slow_handlers);
    }
}

/// Warns that runs wait for a slot of `load`'s host: it is at its cap, or its slow handlers hold
/// their share of it.
fn warn_waiting(load: &HostLoad) {
    if load.in_flight < load.cap {
        log::warn!(
            "executor {}: its slow handlers hold {} of its {} slots, their share \
             (dispatch.slow_share_percent); {} of their runs wait for a slot",
            load.host,
            load.slow_in_flight,
            load.cap,
            load.slow_waiting
        );
        return;
    }
    // A group member's slots are keyed by its URL, a handler host's by host:port.
    let cap_from = if load.host.contains("://") {
        "its group's maxInFlight or its registered capacity"
    } else {
        "dispatch.max_in_flight_per_host, dispatch.hosts"
    };
    log::warn!(
        "executor {} is at its cap of {} requests in flight; {} runs wait for a slot \
         ({cap_from})",
        load.host,
        load.in_flight,
        load.waiting
    );
}

/// A host at its cap is warned about at most this often.
const HOST_WARNING_SECS: i64 = 60;

/// One dispatcher: an HTTP client on its own thread, with at most `max_in_flight` requests
/// at a time, sharing the hosts' slots with the others.
pub struct DispatchActor {
    shared: Arc<Shared>,
    secret: Arc<[u8]>,
    allowlist: Allowlist,
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
            self.allowlist.clone(),
            self.max_in_flight,
            Duration::from_secs(5),
            None,
        );
        self.sender = Some(Rc::new(Sender {
            shared: self.shared.clone(),
            client,
            secret: self.secret.clone(),
            allowlist: self.allowlist.clone(),
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
                    shared.fleet.refresh(&shared.store, tick).await;
                    shared.look_after_held().await;
                    busy.set(false);
                });
            });
        }
    }
}

/// What sending needs, on one dispatcher's thread.
struct Sender {
    shared: Arc<Shared>,
    client: awc::Client,
    secret: Arc<[u8]>,
    allowlist: Allowlist,
    /// Requests in flight on this dispatcher, whatever their host.
    permits: Arc<Semaphore>,
    /// Outcomes on their way to the store, at most `RESULTS_PER_REQUEST` per request slot.
    recording: InFlight,
    recording_permits: Arc<Semaphore>,
    /// Hosts' slots being served from this dispatcher.
    serving: InFlight,
}

impl Sender {
    /// Serves one slot of `host`, taken in `lane`: sends `first`, then the host's waiting
    /// attempts the slot goes to, until none waits.
    async fn serve(
        self: Rc<Self>,
        host: Arc<str>,
        (first, lane): (DispatchJob, Lane),
        permit: OwnedSemaphorePermit,
    ) {
        let mut next = Some((first, lane, Some(permit)));
        while let Some((job, lane, permit)) = next.take() {
            if let Some(queued_at) = job.queued_at {
                metrics()
                    .slot_wait_seconds
                    .observe_duration(queued_at.elapsed());
            }
            let handler = job.handler_url.clone();
            let Sent { took, failover } = self.send(job, permit).await;
            let released = self
                .shared
                .held()
                .slots
                .release(&host, lane, (&handler, took));
            next = released.next.map(|(job, lane)| (job, lane, None));
            if !released.moved.is_empty() {
                // Not awaited: a request slot for them must not wait on this one.
                let moved = Box::pin(self.clone().serve_all(released.moved));
                actix::spawn(self.serving.track(moved));
            }
            if let Some(job) = failover {
                self.clone().take(vec![job]).await;
            }
        }
    }

    /// Serves each of `slots` (a host's slot given to a job, in its lane) once it has a request
    /// slot here.
    async fn serve_all(self: Rc<Self>, slots: Vec<(Arc<str>, DispatchJob, Lane)>) {
        for (host, job, lane) in slots {
            let Ok(permit) = self.permits.clone().acquire_owned().await else {
                return;
            };
            // Boxed: the task spawned stays small (the request's future is kilobytes, and a
            // large task was copied in and faulted fresh pages at every spawn).
            let serve = Box::pin(self.clone().serve(host, (job, lane), permit));
            actix::spawn(self.serving.track(serve));
        }
    }

    /// Takes jobs in: those with a slot are served (each once it has a request slot here),
    /// those no member can take fail their attempt at once.
    async fn take(self: Rc<Self>, jobs: Vec<DispatchJob>) {
        let admitted = self.shared.admit(jobs);
        for (job, why) in admitted.unroutable {
            let at = self.shared.clock.now();
            let event = not_sent(&job, failed(NO_EXECUTOR_CODE, why), (None, at));
            metrics().dispatch_result(DispatchResult::Failed);
            self.record_later(job, event, None, None).await;
        }
        self.serve_all(admitted.now).await;
    }

    /// Sends one attempt and hands its outcome to the store; returns once the request ended.
    async fn send(&self, job: DispatchJob, permit: Option<OwnedSemaphorePermit>) -> Sent {
        let mut sent = Sent {
            took: None,
            failover: None,
        };
        let Some((job, permit)) = self.cleared(job, permit).await else {
            return sent;
        };
        let started = std::time::Instant::now();
        let (request, abort) = abortable(deliver(
            &self.client,
            (&self.secret, &self.allowlist),
            &job,
            &self.shared.clock,
        ));
        if !self.shared.in_flight(&job.request_id, abort) {
            return sent;
        }
        let delivered = request.await;
        sent.took = Some(started.elapsed());
        let Ok(delivered) = delivered else {
            log::info!(
                "task {} request {}: attempt {} ended, its task was deleted",
                job.task_id,
                job.request_id,
                job.attempt
            );
            return sent;
        };
        sent.failover = self.settle(job, delivered, permit).await;
        sent
    }

    /// The attempt with a request slot, once it may be sent as its claim stands; `None` when
    /// it is no longer this process's to send.
    async fn cleared(
        &self,
        job: DispatchJob,
        permit: Option<OwnedSemaphorePermit>,
    ) -> Option<(DispatchJob, OwnedSemaphorePermit)> {
        // The background renewals keep a held attempt's claim covered; one whose claim lapsed
        // before it was renewed (ax itself far behind), or was taken before this process was
        // fenced or paused, is renewed first (a compare-and-set), and not sent if its run moved
        // on meanwhile (taken by another process).
        let generation = self.shared.gate.confirmed().await;
        match self.shared.claim(&job.request_id, generation) {
            Claim::Covered => {}
            Claim::Lapsing => {
                if !self.shared.renew(&Renewal::of(&job)).await {
                    self.shared.release(&job.request_id);
                    return None;
                }
            }
            Claim::Gone => return None,
        }
        let permit = match permit {
            Some(permit) => permit,
            None => self.permits.clone().acquire_owned().await.ok()?,
        };
        Some((job, permit))
    }

    /// Hands what sending an attempt came to to the store; answers the attempt again when its
    /// group member could not be connected to (to go to another member, as the same attempt).
    async fn settle(
        &self,
        mut job: DispatchJob,
        delivered: Delivered,
        permit: OwnedSemaphorePermit,
    ) -> Option<DispatchJob> {
        let mut output = None;
        let event = match (delivered, job.member.clone()) {
            (Delivered::Event(event, said, exchange), member) => {
                output = said;
                if let (Some(member), Some(executor)) = (member, &job.executor) {
                    self.shared
                        .fleet
                        .served(&executor.group, &member, &exchange);
                }
                event
            }
            (Delivered::NotSent { why, .. }, Some(member)) => {
                let group = job.executor.as_ref().map_or("", |e| e.group.as_str());
                log::info!(
                    "task {} request {}: attempt {} not sent to {member} of executor group \
                     `{group}` ({why}); trying another member",
                    job.task_id,
                    job.request_id,
                    job.attempt
                );
                let exchange = Exchange::Unreachable(why.clone());
                self.shared.fleet.served(group, &member, &exchange);
                job.tried.push(member);
                job.member = None;
                return Some(job);
            }
            (Delivered::NotSent { why, tried_at }, None) => {
                let at = self.shared.clock.now();
                let event = not_sent(&job, failed(CONNECT_ERROR_CODE, why), (Some(tried_at), at));
                metrics().dispatch_result(DispatchResult::Failed);
                event
            }
        };
        self.record_later(job, event, output, Some(permit)).await;
        None
    }

    /// Hands an attempt's outcome (and the output its reply carried) to the store, in the
    /// background: the write waits for a group commit, and holding the request slot through it
    /// would cap dispatch at the commit rate, so it takes a result slot instead.
    async fn record_later(
        &self,
        job: DispatchJob,
        event: RunEvent,
        output: Option<String>,
        permit: Option<OwnedSemaphorePermit>,
    ) {
        let Ok(recording_permit) = self.recording_permits.clone().acquire_owned().await else {
            return;
        };
        drop(permit);
        let (store, shared) = (self.shared.store.clone(), self.shared.clone());
        actix::spawn(self.recording.track(Box::pin(async move {
            record(&store, &job, event).await;
            if let Some(output) = output {
                keep_output(&store, &job, output).await;
            }
            shared.release(&job.request_id);
            drop(recording_permit);
        })));
    }
}

/// What sending an attempt came to, for its slot.
struct Sent {
    /// How long its request held the slot; `None` when nothing was sent.
    took: Option<Duration>,
    /// The attempt again, when its group member could not be connected to.
    failover: Option<DispatchJob>,
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

/// What sending an attempt came to.
enum Delivered {
    /// The reply (or its absence) as the event to record, the output the reply carried, and
    /// what the exchange says of the member.
    Event(RunEvent, Option<String>, Exchange),
    /// No connection could be made, so nothing was sent: why, and when it was tried.
    NotSent {
        why: String,
        tried_at: DateTime<Utc>,
    },
}

/// The event of an attempt that failed with `outcome` before it was sent (`tried_at`: when a
/// connection was tried), `at` the cluster's clock.
fn not_sent(
    job: &DispatchJob,
    outcome: Outcome,
    (tried_at, at): (Option<DateTime<Utc>>, DateTime<Utc>),
) -> RunEvent {
    RunEvent {
        request_id: job.request_id.clone(),
        task_id: Some(job.task_id),
        event: Event::Report(Report {
            attempt: Some(job.attempt),
            outcome,
            at,
            sent_at: tried_at,
            member: None,
        }),
        blind: true,
    }
}

/// POSTs one attempt and turns the reply into the event to record, timed by the cluster's
/// clock (another process compares its deadline).
async fn deliver(
    client: &awc::Client,
    (secret, allowlist): (&[u8], &Allowlist),
    job: &DispatchJob,
    clock: &SharedClock,
) -> Delivered {
    let started = clock.now();
    // An attempt gone to another member counted its lag when it was first sent.
    if job.attempt == 1 && job.tried.is_empty() {
        let lag = (started - job.due_at)
            .num_microseconds()
            .unwrap_or(i64::MAX);
        metrics().trigger_lag.observe(lag as f64 / 1e6);
    }
    let deadline = started + chrono::Duration::milliseconds(job.timeout_ms);
    let (Reply { outcome, output }, exchange) =
        match post(client, secret, allowlist, job, deadline).await {
            Ok(exchanged) => exchanged,
            Err(why) => {
                return Delivered::NotSent {
                    why,
                    tried_at: started,
                }
            }
        };
    let (result, code) = match &outcome {
        Outcome::Accepted { .. } => (DispatchResult::Accepted, None),
        Outcome::Succeeded { code, .. } => (DispatchResult::Success, code.as_deref()),
        Outcome::Failed { code, .. } => (DispatchResult::Failed, code.as_deref()),
    };
    metrics().dispatch_result(result);
    // A failure is logged once recorded, with what follows it (see `record`).
    if result != DispatchResult::Failed {
        log::info!(
            "task {} request {} attempt {}: {result:?}{}",
            job.task_id,
            job.request_id,
            job.attempt,
            code.map(|c| format!(" ({c})")).unwrap_or_default()
        );
    }
    Delivered::Event(
        RunEvent {
            request_id: job.request_id.clone(),
            task_id: Some(job.task_id),
            event: Event::Report(Report {
                attempt: Some(job.attempt),
                outcome,
                at: clock.now(),
                sent_at: Some(started),
                member: job.member.as_deref().map(str::to_string),
            }),
            // The dispatcher needs no exact outcome; which replies can be written without a read
            // is the lifecycle's to say (`run::blind`: not a failure, whose retry is decided on
            // the run as it is).
            blind: true,
        },
        output,
        exchange,
    )
}

/// Longest pause between two tries of recording a reply.
const RECORD_BACKOFF_MAX: Duration = Duration::from_secs(5);
/// Tries of a reply the database refuses (not one it cannot be reached for).
const RECORD_TRIES: usize = 3;

/// Records an attempt's reply; answers once it is committed. A reply is not dropped for a store
/// out of reach: it is tried again (with back-off) until the store takes it, holding its result
/// slot, so an outage slows dispatch instead of losing what executors answered. One the
/// database refuses is tried a few times, then left: the attempt's claim lapses and the run
/// is delivered again.
async fn record(store: &StoreHandle, job: &DispatchJob, event: RunEvent) {
    let mut pause = Duration::from_millis(100);
    let mut refused = 0;
    loop {
        let err = match store.record_event(event.clone()).await {
            Ok(decided) => return log_recorded(job, &event, decided),
            Err(err) => err,
        };
        if !err.is_unreachable() {
            refused += 1;
            if refused >= RECORD_TRIES {
                log::error!(
                    "task {} request {}: reply not recorded, the run will be delivered again: \
                     {err}",
                    job.task_id,
                    job.request_id
                );
                return;
            }
        }
        log::warn!(
            "task {} request {}: reply not recorded yet, trying again in {pause:?}: {err}",
            job.task_id,
            job.request_id
        );
        actix_rt::time::sleep(pause).await;
        pause = (pause * 2).min(RECORD_BACKOFF_MAX);
    }
}

/// Keeps the output of an attempt's reply with its log; one the store cannot take is logged
/// and left (the result it came with is recorded).
async fn keep_output(store: &StoreHandle, job: &DispatchJob, output: String) {
    let (run, attempt, at) = (job.request_id.clone(), job.attempt, Utc::now());
    let kept = store
        .query(move |conn| {
            boxed(async move { run_log::keep_output(conn, &run, attempt, &output, at).await })
        })
        .await;
    if let Err(err) = kept {
        log::warn!(
            "task {} request {}: the output of attempt {attempt} not kept: {err}",
            job.task_id,
            job.request_id
        );
    }
}

/// Logs a recorded reply: a failed attempt at WARN, with what follows it.
fn log_recorded(job: &DispatchJob, event: &RunEvent, decided: Option<Decided>) {
    match (&event.event, decided) {
        (
            Event::Report(Report {
                outcome: Outcome::Failed { code, message, .. },
                ..
            }),
            Some(Decided::Applied(run)),
        ) => log::warn!(
            "{}",
            failed_attempt(
                &job.request_id,
                job.attempt,
                code.as_deref(),
                message.as_deref(),
                &run
            )
        ),
        (_, decided) => log::debug!(
            "task {} request {}: reply recorded: {decided:?}",
            job.task_id,
            job.request_id
        ),
    }
}

/// POSTs one attempt, signed: `X-Ax-Timestamp` and `X-Ax-Signature` over exactly the bytes
/// sent. The handler's host is checked against the allowlist in force now, not only the one
/// the task was stored under: as written here, and as resolved by `GuardedResolver`.
/// Answers the reply with what the exchange says of the executor (see `routing::Exchange`);
/// `Err`: no connection could be made, so nothing was sent (why).
async fn post(
    client: &awc::Client,
    secret: &[u8],
    allowlist: &Allowlist,
    job: &DispatchJob,
    deadline: DateTime<Utc>,
) -> Result<(Reply, Exchange), String> {
    let unsent = |outcome: Outcome| Ok((outcome.into(), Exchange::Inconclusive));
    let Ok(uri) = job.handler_url.parse::<awc::http::Uri>() else {
        return unsent(failed(CONNECT_ERROR_CODE, BAD_URI_MESSAGE));
    };
    let host = uri.host().unwrap_or_default();
    if !allowlist.allows(host) {
        return unsent(not_allowed(format!(
            "host `{host}` is not allowed by security.handler_allowlist"
        )));
    }
    let Ok(params) = RawValue::from_string(job.params.to_string()) else {
        return unsent(failed(BAD_PARAMS_CODE, PARAMS_NOT_JSON_MESSAGE));
    };
    let body = DispatchBody {
        task_id: job.task_id,
        request_id: &job.request_id,
        params: &params,
        scheduled_at: rfc3339(job.scheduled_at),
        attempt: job.attempt,
        callback_token: callback_token(secret, job.request_id.as_str()),
        shard_index: job.shard.map(|shard| shard.index),
        shard_total: job.shard.map(|shard| shard.total),
    };
    let Ok(body) = serde_json::to_vec(&body) else {
        return unsent(failed(BAD_PARAMS_CODE, BODY_NOT_ENCODED_MESSAGE));
    };
    let timestamp = Utc::now().timestamp();
    let timeout = Duration::from_millis(job.timeout_ms.max(1) as u64);
    let signature = sign_dispatch(secret, timestamp, &body);
    let body = actix_web::web::Bytes::from(body);
    let request = || {
        client
            .post(uri.clone())
            .timeout(timeout)
            .content_type("application/json")
            .insert_header(("X-Ax-Request-Id", job.request_id.to_string()))
            .insert_header((TIMESTAMP_HEADER, timestamp.to_string()))
            .insert_header((SIGNATURE_HEADER, signature.clone()))
    };
    // `timeoutMs` bounds the whole exchange: connect, send, headers and body.
    let exchange = async {
        let mut tries = 0;
        let mut response = loop {
            tries += 1;
            match request().send_body(body.clone()).await {
                Ok(response) => break response,
                Err(awc::error::SendRequestError::Timeout) => return None,
                Err(awc::error::SendRequestError::Connect(awc::error::ConnectError::Resolver(
                    err,
                ))) if err.is::<NotAllowed>() => return Some(unsent(not_allowed(err.to_string()))),
                // A kept-alive connection the executor closed as it was reused (awc calls it
                // "connector has been disconnected"): the request was not answered, and a
                // new connection is tried at once rather than charging the executor with a
                // failed attempt. A server that closes every connection unanswered still
                // fails the attempt after a few tries.
                Err(awc::error::SendRequestError::Connect(
                    awc::error::ConnectError::Disconnected,
                )) if tries < CLOSED_CONNECTION_TRIES => {
                    log::debug!(
                        "task {} request {}: connection closed by the executor before its reply, \
                         sending again",
                        job.task_id,
                        job.request_id
                    );
                }
                // No connection (refused, reset, unreachable): the request was not sent.
                Err(err @ awc::error::SendRequestError::Connect(_)) => {
                    return Some(Err(err.to_string()))
                }
                Err(err) => {
                    let exchange = match closed_before_reply(&err) {
                        true => Exchange::Unreachable(err.to_string()),
                        false => Exchange::Inconclusive,
                    };
                    let outcome = failed(CONNECT_ERROR_CODE, err.to_string());
                    return Some(Ok((outcome.into(), exchange)));
                }
            }
        };
        // A status line came: whatever follows is the job's outcome, not the member's health.
        let status = response.status().as_u16();
        let reply = match read_capped(&mut response).await {
            Ok(bytes) => classify_reply(status, &bytes, deadline),
            Err(err) => failed(BAD_REPLY_CODE, err.to_string()).into(),
        };
        Some(Ok((reply, Exchange::Replied)))
    };
    // No reply within `timeoutMs` is the job's slowness (a connect timeout of the client's own
    // shows as a connect error above).
    tokio::time::timeout(timeout, exchange)
        .await
        .ok()
        .flatten()
        .unwrap_or_else(|| unsent(failed(TIMEOUT_CODE, NO_REPLY_MESSAGE)))
}

/// Whether a request that was (perhaps) sent failed in transport: the connection was reset or
/// closed before a reply came. Not retried on another member (the job may have run), but it
/// counts against the member as a refused connection does.
fn closed_before_reply(err: &awc::error::SendRequestError) -> bool {
    use awc::error::SendRequestError as E;
    match err {
        E::Send(_) | E::Connect(_) => true,
        E::Response(parse) => matches!(
            parse,
            actix_http::error::ParseError::Io(_) | actix_http::error::ParseError::Incomplete
        ),
        _ => false,
    }
}

/// Tries of a request whose connection the executor closed unanswered.
const CLOSED_CONNECTION_TRIES: usize = 4;

/// The reply body up to `MAX_REPLY_BYTES`; the rest is not read.
async fn read_capped<S>(response: &mut awc::ClientResponse<S>) -> Result<Vec<u8>, String>
where
    S: futures_util::Stream<Item = Result<actix_web::web::Bytes, awc::error::PayloadError>> + Unpin,
{
    use futures_util::StreamExt;
    let mut body = Vec::new();
    while let Some(chunk) = response.next().await {
        let chunk = chunk.map_err(|err| err.to_string())?;
        let room = MAX_REPLY_BYTES - body.len();
        body.extend_from_slice(&chunk[..chunk.len().min(room)]);
        if body.len() == MAX_REPLY_BYTES {
            break;
        }
    }
    Ok(body)
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
    pub fleet: FleetSettings,
    /// This process, as its claims name it.
    pub claimant: String,
    /// The cluster's clock (see `ax_core::time::clock::ReferenceClock`).
    pub clock: SharedClock,
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
            fleet: Arc::new(Fleet::new(settings.fleet)),
            claimant: settings.claimant,
            clock: settings.clock,
            gate: settings.gate,
            store,
            shown: Mutex::default(),
        });
        let max_in_flight = settings.max_in_flight.max(1);
        let workers: Vec<_> = (0..settings.workers.max(1))
            .map(|n| {
                let (shared, security) = (shared.clone(), security.clone());
                DispatchActor::start_in_arbiter(&Arbiter::new().handle(), move |_| DispatchActor {
                    shared,
                    secret: security.secret.clone(),
                    allowlist: security.allowlist.clone(),
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
    pub async fn refresh_fleet(&self) {
        self.shared.fleet.refresh(&self.shared.store, 1).await;
    }

    /// The members a fire of a broadcast task is sharded over now; `None` when its runs are
    /// not broadcast (see `Fleet::broadcast_members`).
    pub fn broadcast_members(&self, executor: &TaskExecutor) -> Option<Vec<Arc<str>>> {
        self.shared.fleet.broadcast_members(executor)
    }

    /// Each executor group member's health and load in this process, by URL.
    pub fn member_states(&self) -> HashMap<String, MemberState> {
        let held = self.shared.held();
        self.shared
            .fleet
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn deadline() -> DateTime<Utc> {
        DateTime::<Utc>::UNIX_EPOCH
    }

    fn outcome_of(status: u16, body: &[u8], deadline: DateTime<Utc>) -> Outcome {
        classify_reply(status, body, deadline).outcome
    }

    #[test]
    fn a_reply_may_carry_an_output_kept_to_its_end() {
        let long = format!("{}end", "x".repeat(ax_core::run::logs::MAX_OUTPUT_BYTES));
        let said = classify_reply(
            200,
            &reply(json!({"status": "SUCCESS", "output": long})),
            deadline(),
        );
        let output = said.output.unwrap();
        assert_eq!(output.len(), ax_core::run::logs::MAX_OUTPUT_BYTES);
        assert!(output.ends_with("end"));
        assert_eq!(classify_reply(200, b"{}", deadline()).output, None);
    }

    fn reply(body: serde_json::Value) -> Vec<u8> {
        body.to_string().into_bytes()
    }

    #[test]
    fn a_connection_reset_or_closed_before_the_reply_is_a_transport_failure() {
        use actix_http::error::ParseError;
        use awc::error::SendRequestError as E;
        let reset = std::io::Error::from(std::io::ErrorKind::ConnectionReset);
        assert!(closed_before_reply(&E::Send(reset)));
        assert!(closed_before_reply(&E::Response(ParseError::Incomplete)));
        let closed = std::io::Error::from(std::io::ErrorKind::UnexpectedEof);
        assert!(closed_before_reply(&E::Response(ParseError::Io(closed))));
        // A reply that came but is not HTTP, or a request timeout: the job's, not the member's.
        assert!(!closed_before_reply(&E::Response(ParseError::Status)));
        assert!(!closed_before_reply(&E::Timeout));
    }

    #[test]
    fn a_2xx_with_a_status_is_the_result() {
        assert_eq!(
            outcome_of(
                200,
                &reply(json!({"status": ReportedStatus::Success, "code": 0, "message": "ok"})),
                deadline()
            ),
            Outcome::Succeeded {
                code: Some("0".into()),
                message: Some("ok".into()),
            }
        );
        assert_eq!(
            outcome_of(
                200,
                &reply(json!({"status": ReportedStatus::Failed, "code": "E42", "retry": false})),
                deadline()
            ),
            Outcome::Failed {
                code: Some("E42".into()),
                message: None,
                retry: false,
            }
        );
    }

    #[test]
    fn without_a_result_202_means_a_callback_follows_and_other_2xx_success() {
        let accepted = Outcome::Accepted {
            deadline: deadline(),
        };
        assert_eq!(outcome_of(202, b"", deadline()), accepted);
        assert_eq!(
            outcome_of(202, br#"{"status":"DONE"}"#, deadline()),
            accepted
        );
        let succeeded = Outcome::Succeeded {
            code: None,
            message: None,
        };
        for (status, body) in [
            (200, &b""[..]),
            (200, b"ok"),
            (201, br#"{"id":7}"#),
            (200, br#"{"status":"DONE"}"#),
            (204, b""),
        ] {
            assert_eq!(outcome_of(status, body, deadline()), succeeded, "{status}");
        }
    }

    #[test]
    fn a_result_in_the_body_wins_over_the_code() {
        assert_eq!(
            outcome_of(
                202,
                &reply(json!({"status": ReportedStatus::Success, "code": "OK"})),
                deadline()
            ),
            Outcome::Succeeded {
                code: Some("OK".into()),
                message: None,
            }
        );
        assert!(matches!(
            outcome_of(
                201,
                &reply(json!({"status": ReportedStatus::Failed})),
                deadline()
            ),
            Outcome::Failed { retry: true, .. }
        ));
    }

    #[test]
    fn non_2xx_is_a_failed_attempt_with_the_reason() {
        assert_eq!(
            outcome_of(503, b" busy \n", deadline()),
            Outcome::Failed {
                code: Some("HTTP_503".into()),
                message: Some("busy".into()),
                retry: true,
            }
        );
    }

    #[test]
    fn a_reply_code_or_message_a_callback_would_refuse_is_dropped_not_the_result() {
        let result = |body: serde_json::Value| outcome_of(200, &reply(body), deadline());
        assert_eq!(
            result(json!({"status": ReportedStatus::Success, "code": "E\u{0}1", "message": ["m"]})),
            Outcome::Succeeded {
                code: None,
                message: None,
            }
        );
        for code in [json!(1.5), json!(true), json!({"a": 1}), json!([200])] {
            assert_eq!(
                result(
                    json!({"status": ReportedStatus::Failed, "code": code, "message": "a\r\n\tb\u{1b}[2J"})
                ),
                Outcome::Failed {
                    code: None,
                    message: Some("a\n\tb[2J".into()),
                    retry: true,
                },
                "{code}"
            );
        }
        assert_eq!(
            result(json!({"status": ReportedStatus::Success, "code": 200})),
            Outcome::Succeeded {
                code: Some("200".into()),
                message: None,
            }
        );
        assert_eq!(
            outcome_of(500, b"boom\x00\x1b[31m\nat line 2", deadline()),
            Outcome::Failed {
                code: Some("HTTP_500".into()),
                message: Some("boom[31m\nat line 2".into()),
                retry: true,
            }
        );
    }

    #[test]
    fn long_messages_are_cut_on_a_char_boundary() {
        let long = "é".repeat(MAX_MESSAGE_CHARS + 10);
        assert_eq!(
            cut(long, MAX_MESSAGE_CHARS).chars().count(),
            MAX_MESSAGE_CHARS
        );
    }
}
