//! Claims and admission: what every dispatcher shares. Each attempt taken in gets a slot of
//! its executor host or group member (or waits for one), and is held with this process's
//! claim on it, kept renewed until its outcome is recorded.

use ax_core::ids::ProcessId;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use futures_util::future::AbortHandle;

use super::job::DispatchJob;
use super::record::RECORD_BACKOFF_MAX;
use crate::actors::groups::{ExecutorGroups, Route};
use crate::actors::store::{RunEvent, StoreHandle};
use ax_core::cluster::fencing::SendGate;
use ax_core::dispatch::host_slots::{host_key, HostCaps, HostLoad, HostSlots, Lane};
use ax_core::dispatch::routing::member_url;
use ax_core::metrics::metrics;
use ax_core::run::{claim_covers, renewed_claim, Decided, Event, RequestId, Shard, TaskId};
use ax_core::time::clock::SharedClock;

/// What every dispatcher shares: the executor hosts' slots, and each attempt held (waiting for
/// a slot, in flight, or with its reply on the way to the store) with this process's claim on
/// it, kept renewed so that none is claimed again or sent twice while it is held.
pub(super) struct Shared {
    pub(super) state: Mutex<Held>,
    pub(super) caps: HostCaps,
    /// The executor groups, routed over by attempts of tasks that name one.
    pub(super) groups: Arc<ExecutorGroups>,
    /// This process, as the claims it holds name it.
    pub(super) claimant: ProcessId,
    /// The cluster's clock, which claims are written and compared by.
    pub(super) clock: SharedClock,
    /// This process's promises: a claim from before it was fenced or paused is checked again.
    pub(super) gate: SendGate,
    pub(super) store: StoreHandle,
    /// The hosts last shown in `ax_dispatch_queued`.
    pub(super) shown: Mutex<Vec<Arc<str>>>,
}

/// Jobs taken in: those with a slot now, by slot, and those no member can take, with why.
#[derive(Default)]
pub(super) struct Admitted {
    pub(super) now: Vec<(Arc<str>, DispatchJob, Lane)>,
    pub(super) unroutable: Vec<(DispatchJob, String)>,
}

pub(super) struct Held {
    pub(super) slots: HostSlots<DispatchJob>,
    pub(super) attempts: HashMap<RequestId, HeldAttempt>,
}

pub(super) struct HeldAttempt {
    pub(super) task_id: TaskId,
    attempt: i32,
    timeout_ms: i64,
    /// When this process's claim on the attempt lapses.
    claimed_until: DateTime<Utc>,
    /// The fencing generation its claim was taken or last renewed in.
    generation: u64,
    /// A renewal of its claim is under way.
    renewing: bool,
    /// Set while its request is in flight: ends it (its task was deleted).
    pub(super) abort: Option<AbortHandle>,
}

/// A claim to renew: what the store needs to know of the attempt.
#[derive(Clone)]
pub(super) struct Renewal {
    request_id: RequestId,
    task_id: TaskId,
    attempt: i32,
    timeout_ms: i64,
}

impl Renewal {
    pub(super) fn of(job: &DispatchJob) -> Renewal {
        Renewal {
            request_id: job.request_id.clone(),
            task_id: job.task_id,
            attempt: job.attempt,
            timeout_ms: job.timeout_ms,
        }
    }
}

/// What the sender is to do with an attempt whose turn came.
pub(super) enum Claim {
    /// Its claim covers the exchange: send it.
    Covered,
    /// Its claim is (nearly) lapsed, as when ax itself is far behind: renew it first.
    Lapsing,
    /// It is no longer held (its task was deleted while it waited).
    Gone,
}

impl Shared {
    pub(super) fn held(&self) -> std::sync::MutexGuard<'_, Held> {
        // A panic while the lock was held cannot leave the bookkeeping half-written in a way
        // that matters more than stopping dispatch would.
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Takes `jobs` in: each gets a slot of its host or group member now (answered, to
    /// send) or waits; one whose group has no member to take it is answered apart.
    pub(super) fn admit(&self, jobs: Vec<DispatchJob>) -> Admitted {
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
            .groups
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
    pub(super) fn claim(&self, id: &RequestId, generation: u64) -> Claim {
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
    pub(super) fn in_flight(&self, id: &RequestId, abort: AbortHandle) -> bool {
        match self.held().attempts.get_mut(id) {
            Some(held) => {
                held.abort = Some(abort);
                true
            }
            None => false,
        }
    }

    pub(super) fn release(&self, id: &RequestId) {
        self.held().attempts.remove(id);
    }

    /// Drops the waiting attempts `drop` picks; answers how many.
    pub(super) fn drop_waiting(&self, mut drop: impl FnMut(&DispatchJob) -> bool) -> usize {
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
    pub(super) async fn renew(&self, renewal: &Renewal) -> bool {
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
    pub(super) async fn look_after_held(self: Arc<Self>) {
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
            self.groups.show(|member| held.slots.in_flight(member));
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
