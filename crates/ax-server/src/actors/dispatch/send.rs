//! Sending: one dispatcher's sender serves the slots its attempts were given, sends each once
//! its claim covers it, hands the outcome to recording, and sends an attempt its group member
//! refused to another member.

use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use futures_util::future::abortable;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::admit::{Claim, Renewal, Shared};
use super::deliver::{deliver, Delivered, Envelope};
use super::job::DispatchJob;
use super::record::{keep_output, record};
use super::reply::failed;
use crate::actors::store::RunEvent;
use crate::actors::InFlight;
use ax_core::dispatch::host_slots::Lane;
use ax_core::dispatch::routing::Exchange;
use ax_core::metrics::{metrics, DispatchResult};
use ax_core::run::{Event, Outcome, Report, CONNECT_ERROR_CODE, NO_EXECUTOR_CODE};

/// What sending needs, on one dispatcher's thread.
pub(super) struct Sender {
    pub(super) shared: Arc<Shared>,
    pub(super) client: awc::Client,
    pub(super) envelope: Envelope,
    /// Requests in flight on this dispatcher, whatever their host.
    pub(super) permits: Arc<Semaphore>,
    /// Outcomes on their way to the store, at most `RESULTS_PER_REQUEST` per request slot.
    pub(super) recording: InFlight,
    pub(super) recording_permits: Arc<Semaphore>,
    /// Hosts' slots being served from this dispatcher.
    pub(super) serving: InFlight,
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
    pub(super) async fn take(self: Rc<Self>, jobs: Vec<DispatchJob>) {
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
            &self.envelope,
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
                        .groups
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
                self.shared.groups.served(group, &member, &exchange);
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
