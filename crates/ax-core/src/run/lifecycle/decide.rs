//! `on_event`: what each event does to a run whose row was read.

use crate::ids::ProcessId;
use chrono::{DateTime, Utc};

use super::changes::{cancelled, deleted, finish, released, replaced};
use super::event::{Event, Outcome, Report};
use super::report::on_report;
use super::row::{Change, Expect, Refusal, RunState, Write};
use crate::run::codes::{
    BUFFER_MESSAGE, DEPENDENCY_TIMEOUT_CODE, DEPENDENCY_TIMEOUT_MESSAGE, OVERLAP_CODE,
    TIMEOUT_CODE, TIMEOUT_MESSAGE, UPSTREAM_FAILED_CODE, UPSTREAM_FAILED_MESSAGE,
};
use crate::run::status::RunStatus;

/// Decides what `event` does to `run`.
pub fn on_event(run: &RunState, event: &Event) -> Result<Write, Refusal> {
    if run.status.is_final() {
        return Err(Refusal::Final(run.status));
    }
    match event {
        Event::Claim {
            attempt,
            claimant,
            until,
            at,
        } => claim(run, *attempt, claimant, *until, *at),
        Event::Renewed {
            attempt,
            claimant,
            until,
        } => renew(run, *attempt, claimant, *until),
        Event::Report(report) => on_report(run, report),
        Event::TimedOut { attempt, at } if run.status == RunStatus::Running => {
            let report = Report {
                attempt: Some(*attempt),
                outcome: Outcome::Failed {
                    code: Some(TIMEOUT_CODE.into()),
                    message: Some(TIMEOUT_MESSAGE.into()),
                    retry: true,
                },
                at: *at,
                sent_at: None,
                member: None,
            };
            on_report(run, &report)
        }
        Event::TimedOut { .. } => Err(Refusal::Superseded),
        Event::Released { at } => pending(run).map(|expect| Write {
            expect,
            change: released(*at),
        }),
        Event::UpstreamFailed { at } => pending(run).map(|expect| Write {
            expect,
            change: finish(
                RunStatus::Failed,
                Some(UPSTREAM_FAILED_CODE.into()),
                Some(UPSTREAM_FAILED_MESSAGE.into()),
                *at,
            ),
        }),
        Event::DependencyTimedOut { at } => pending(run).map(|expect| Write {
            expect,
            change: finish(
                RunStatus::Failed,
                Some(DEPENDENCY_TIMEOUT_CODE.into()),
                Some(DEPENDENCY_TIMEOUT_MESSAGE.into()),
                *at,
            ),
        }),
        Event::Recovered { claimant, at } if run.claimant == *claimant => lapse(run, *at),
        Event::Fenced {
            claimant,
            unsent_from,
            at,
        } if run.claimant == *claimant && run.scheduled_at >= *unsent_from => lapse(run, *at),
        Event::Recovered { .. } | Event::Fenced { .. } => Err(Refusal::NotApplicable),
        Event::TaskDeleted { at } => Ok(Write {
            expect: Expect::seen(run),
            change: deleted(*at),
        }),
        Event::Cancelled { at } => Ok(Write {
            expect: Expect::seen(run),
            change: cancelled(*at),
        }),
        Event::Replaced { at } => Ok(Write {
            expect: Expect::seen(run),
            change: replaced(*at),
        }),
        Event::Skipped { message, at } => first_attempt_due(run).map(|expect| Write {
            expect,
            change: finish(
                RunStatus::Skipped,
                Some(OVERLAP_CODE.into()),
                Some((*message).into()),
                *at,
            ),
        }),
        Event::Buffered { .. } => first_attempt_due(run).map(|expect| Write {
            expect,
            change: Change {
                status: Some(RunStatus::Pending),
                code: Some(Some(OVERLAP_CODE.into())),
                message: Some(Some(BUFFER_MESSAGE.into())),
                next_attempt_at: Some(None),
                ..Change::default()
            },
        }),
        Event::EarlierFinished {
            waits_for_upstreams,
            at,
        } => pending(run).map(|expect| Write {
            expect,
            change: Change {
                code: Some(None),
                message: Some(None),
                ..if *waits_for_upstreams {
                    Change::default()
                } else {
                    released(*at)
                }
            },
        }),
    }
}

/// A run whose first attempt is due and not yet handed to a dispatcher.
fn first_attempt_due(run: &RunState) -> Result<Expect, Refusal> {
    if run.status == RunStatus::Ready && run.attempt == 1 && run.dispatched == 0 {
        Ok(Expect::seen(run))
    } else {
        Err(Refusal::NotApplicable)
    }
}

fn claim(
    run: &RunState,
    attempt: i32,
    claimant: &ProcessId,
    until: DateTime<Utc>,
    at: DateTime<Utc>,
) -> Result<Write, Refusal> {
    if run.status != RunStatus::Ready || run.attempt != attempt {
        return Err(Refusal::Superseded);
    }
    let due = run.dispatched < run.attempt && run.next_attempt_at.is_some_and(|due| due <= at);
    let lapsed = run.dispatched == run.attempt && run.claimed_until.is_some_and(|c| c <= at);
    if !(due || lapsed) {
        return Err(Refusal::NotApplicable);
    }
    Ok(Write {
        expect: Expect {
            // A lapsed claim is taken by the one who saw it lapse, and only once.
            claimed_until: run.claimed_until.filter(|_| lapsed),
            next_attempt_at: run.next_attempt_at.filter(|_| due),
            ..Expect::seen(run)
        },
        change: Change {
            dispatched: Some(attempt),
            next_attempt_at: Some(None),
            claimed_until: Some(Some(until)),
            claimant: Some(claimant.clone()),
            ..Change::default()
        },
    })
}

/// A claim kept by the one holding it: the attempt is still its to send, however long it
/// waited. Refused once the run moved on (final, another attempt) or another process took the
/// lapsed claim — the waiting attempt is then not sent.
fn renew(
    run: &RunState,
    attempt: i32,
    claimant: &ProcessId,
    until: DateTime<Utc>,
) -> Result<Write, Refusal> {
    if run.status != RunStatus::Ready || run.attempt != attempt || run.dispatched != attempt {
        return Err(Refusal::Superseded);
    }
    if run.claimant != *claimant {
        return Err(Refusal::NotApplicable);
    }
    Ok(Write {
        expect: Expect {
            claimant: Some(run.claimant.clone()),
            ..Expect::seen(run)
        },
        change: Change {
            claimed_until: Some(Some(until)),
            ..Change::default()
        },
    })
}

/// Dependency events apply to PENDING runs only.
fn pending(run: &RunState) -> Result<Expect, Refusal> {
    if run.status == RunStatus::Pending {
        Ok(Expect::seen(run))
    } else {
        Err(Refusal::NotApplicable)
    }
}

/// A dispatched attempt whose claimant is gone is due again at once — or at its scheduled
/// time, for a run committed ahead of it: a reclaimed run never goes out early.
fn lapse(run: &RunState, at: DateTime<Utc>) -> Result<Write, Refusal> {
    // A claim already lapsed to the run's own time (committed ahead) is left as it is.
    let due = at.max(run.scheduled_at);
    let held = run.status == RunStatus::Ready
        && run.dispatched == run.attempt
        && run.claimed_until.is_some_and(|until| until > due);
    if !held {
        return Err(Refusal::NotApplicable);
    }
    Ok(Write {
        expect: Expect {
            claimed_until: run.claimed_until,
            claimant: Some(run.claimant.clone()),
            ..Expect::seen(run)
        },
        change: Change {
            claimed_until: Some(Some(due)),
            ..Change::default()
        },
    })
}
