//! Recording: an attempt's outcome handed to the store until it is committed, and the output
//! its reply carried kept with its log.

use std::time::Duration;

use chrono::Utc;

use super::job::DispatchJob;
use crate::actors::store::{boxed, RunEvent, StoreHandle};
use ax_core::run::{failed_attempt, Decided, Event, Outcome, Report};
use ax_store::queries::run_log;

/// Longest pause between two tries of recording a reply.
pub(super) const RECORD_BACKOFF_MAX: Duration = Duration::from_secs(5);
/// Tries of a reply the database refuses (not one it cannot be reached for).
const RECORD_TRIES: usize = 3;

/// Records an attempt's reply; answers once it is committed. A reply is not dropped for a store
/// out of reach: it is tried again (with back-off) until the store takes it, holding its result
/// slot, so an outage slows dispatch instead of losing what executors answered. One the
/// database refuses is tried a few times, then left: the attempt's claim lapses and the run
/// is delivered again.
pub(super) async fn record(store: &StoreHandle, job: &DispatchJob, event: RunEvent) {
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
pub(super) async fn keep_output(store: &StoreHandle, job: &DispatchJob, output: String) {
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
