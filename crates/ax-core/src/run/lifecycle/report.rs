//! A result reported for an attempt: which attempt it counts for, what it does to the run,
//! and the attempt it ends without ending the run.

use crate::ids::ProcessId;
use chrono::{DateTime, Utc};

use super::changes::{finish, running};
use super::event::{Event, Outcome, Report};
use super::failure::failure;
use super::row::{Change, Expect, Refusal, RunState, Write};
use crate::run::codes::RESULT_REJECTED_CODE;
use crate::run::status::RunStatus;

/// A result the store refused to write, as the failure of the attempt it reported on, with
/// `message` saying why: not retried, since every retry's result would be refused alike, and
/// recorded so that the run neither waits for its claim to lapse nor is delivered again.
pub fn rejected_result(report: &Report, message: String) -> Report {
    Report {
        outcome: Outcome::Failed {
            code: Some(RESULT_REJECTED_CODE.into()),
            message: Some(message),
            retry: false,
        },
        ..report.clone()
    }
}

/// An attempt that ended without ending its run: it failed, and a retry is due.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndedAttempt {
    pub attempt: i32,
    pub at: DateTime<Utc>,
    pub code: Option<String>,
    pub message: Option<String>,
    /// The ax process that had claimed (and so dispatched) it.
    pub process: ProcessId,
    /// The executor group member that served it, as its reply said.
    pub member: Option<String>,
}

/// The attempt `write` (what `event` does to `run`) ends without ending the run, if any: the
/// run's timeline keeps it, since the run's row keeps only the last outcome.
pub fn ended_attempt(run: &RunState, event: &Event, write: &Write) -> Option<EndedAttempt> {
    let next = write.change.attempt?;
    let (at, member) = match event {
        Event::Report(report) => (report.at, report.member.clone()),
        Event::TimedOut { at, .. } => (*at, None),
        _ => return None,
    };
    (next > run.attempt).then(|| EndedAttempt {
        attempt: run.attempt,
        at,
        code: write.change.code.clone().flatten(),
        message: write.change.message.clone().flatten(),
        process: run.claimant.clone(),
        member,
    })
}

/// A result that comes while the acceptance of its attempt (a dispatcher's reply) is still
/// waiting to be written makes that write moot: the result alone, carrying when and to whom
/// the attempt was sent, ends the run as the two in order would (a result is decided the same
/// on the READY row as on the RUNNING one). So a quick callback is one write, not two, and
/// does not wait for the acceptance's commit. `None`: both are written, in order.
pub fn supersede(earlier: &Event, later: &Event) -> Option<Event> {
    let (Event::Report(accepted), Event::Report(result)) = (earlier, later) else {
        return None;
    };
    let Report {
        attempt: Some(attempt),
        outcome: Outcome::Accepted { .. },
        ..
    } = accepted
    else {
        return None;
    };
    let for_that_attempt = result.attempt.is_none_or(|named| named == *attempt);
    if matches!(result.outcome, Outcome::Accepted { .. }) || !for_that_attempt {
        return None;
    }
    Some(Event::Report(Report {
        sent_at: result.sent_at.or(accepted.sent_at),
        member: result.member.clone().or_else(|| accepted.member.clone()),
        ..result.clone()
    }))
}

/// A result: it belongs to the attempt it names, or to the one dispatched last. An attempt
/// never dispatched is refused; one whose result was counted changes nothing. A SUCCESS of an
/// earlier attempt still ends an open run (its retry is not needed); a failure or acceptance
/// counts only for the attempt in flight.
pub(super) fn on_report(run: &RunState, report: &Report) -> Result<Write, Refusal> {
    let attempt = report.attempt.unwrap_or(run.dispatched);
    if attempt < 1 || attempt > run.dispatched {
        return Err(Refusal::NotDispatched {
            attempt,
            dispatched: run.dispatched,
        });
    }
    let current = attempt == run.attempt && run.in_flight();
    let change = match &report.outcome {
        Outcome::Succeeded { code, message } => {
            finish(RunStatus::Success, code.clone(), message.clone(), report.at)
        }
        Outcome::Accepted { deadline } if current && run.status == RunStatus::Ready => {
            running(*deadline)
        }
        Outcome::Failed {
            code,
            message,
            retry,
        } if current => failure(run, code.clone(), message.clone(), *retry, report.at),
        Outcome::Accepted { .. } | Outcome::Failed { .. } => return Err(Refusal::Superseded),
    };
    Ok(Write {
        expect: Expect::seen(run),
        change: Change {
            dispatched_at: report.first_dispatch(attempt),
            member: report.member.clone(),
            ..change
        },
    })
}
