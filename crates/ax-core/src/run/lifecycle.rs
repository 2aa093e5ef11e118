//! Every change of a run's row, decided here: one function per event, each returning the write
//! to make — with the compare-and-set condition that makes it safe against every other writer —
//! or a typed refusal. The store applies writes; it decides nothing.
//!
//! Attempts: `attempt` is the current one (in flight, or due next); `dispatched` is the highest
//! attempt handed to a dispatcher. An attempt is in flight while the run is open and
//! `dispatched == attempt`; its first result counts, any later one for it changes nothing.

use chrono::{DateTime, Duration, Utc};

use super::codes::{
    BUFFER_MESSAGE, CANCELLED_CODE, CANCELLED_MESSAGE, DEPENDENCY_TIMEOUT_CODE,
    DEPENDENCY_TIMEOUT_MESSAGE, OVERLAP_CODE, REPLACED_CODE, REPLACED_MESSAGE,
    RESULT_REJECTED_CODE, TASK_DELETED_CODE, TASK_DELETED_MESSAGE, TIMEOUT_CODE, TIMEOUT_MESSAGE,
    UPSTREAM_FAILED_CODE, UPSTREAM_FAILED_MESSAGE,
};
use super::ids::TaskId;
use super::retry::{RetryLimits, RetryPolicy};
use super::status::{RunStatus, DISPATCHABLE, OPEN};

/// A run as the lifecycle sees it: the fields of its row that decisions depend on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunState {
    /// The run's task (for what reports on the run; no decision depends on it).
    pub task_id: TaskId,
    pub status: RunStatus,
    /// The current attempt: in flight, or due next.
    pub attempt: i32,
    /// The highest attempt handed to a dispatcher; 0 before the first.
    pub dispatched: i32,
    pub retries_used: i32,
    /// A waiting run: when its next attempt is due.
    pub next_attempt_at: Option<DateTime<Utc>>,
    /// A dispatched READY run: when the dispatcher's claim lapses.
    pub claimed_until: Option<DateTime<Utc>>,
    /// The process that fired the run or last claimed its attempt.
    pub claimant: String,
    pub scheduled_at: DateTime<Utc>,
    /// The task's retry settings.
    pub retry: RetryLimits,
}

impl RunState {
    /// Whether an attempt is out with a dispatcher or handler, its result not yet counted.
    pub fn in_flight(&self) -> bool {
        DISPATCHABLE.contains(&self.status) && self.dispatched == self.attempt
    }

    /// The row after `change`: the same rule the store's SQL applies.
    pub fn apply(&mut self, change: &Change) {
        if let Some(status) = change.status {
            self.status = status;
        }
        if let Some(attempt) = change.attempt {
            self.attempt = attempt;
        }
        if let Some(dispatched) = change.dispatched {
            self.dispatched = dispatched;
        }
        if let Some(retries) = change.retries_used {
            self.retries_used = retries;
        }
        if let Some(at) = change.next_attempt_at {
            self.next_attempt_at = at;
        }
        if let Some(until) = change.claimed_until {
            self.claimed_until = until;
        }
        if let Some(claimant) = &change.claimant {
            self.claimant = claimant.clone();
        }
    }
}

/// What happened to a run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// A dispatcher takes the current attempt, due or with a lapsed claim, until `until`.
    Claim {
        attempt: i32,
        claimant: String,
        until: DateTime<Utc>,
        at: DateTime<Utc>,
    },
    /// The claimant still holds the attempt, waiting to send it (its executor's host is at
    /// its cap): its claim now lasts until `until`.
    Renewed {
        attempt: i32,
        claimant: String,
        until: DateTime<Utc>,
    },
    /// A handler's reply, a dispatch failure, or an executor's callback.
    Report(Report),
    /// A RUNNING attempt reached its deadline with no result.
    TimedOut { attempt: i32, at: DateTime<Utc> },
    /// Every upstream's run succeeded: a PENDING run is due.
    Released { at: DateTime<Utc> },
    /// An upstream's run did not succeed.
    UpstreamFailed { at: DateTime<Utc> },
    /// The upstreams took longer than the dependency timeout.
    DependencyTimedOut { at: DateTime<Utc> },
    /// `claimant` restarted: nothing of its previous life is in flight, its claims lapse now.
    Recovered { claimant: String, at: DateTime<Utc> },
    /// The claimant was fenced (its promise went stale, see `crate::cluster::fencing`) having sent
    /// no run fired for `unsent_from` or later: its claims on such runs lapse now. A run it
    /// may have sent keeps its claim until the claim expires.
    Fenced {
        claimant: String,
        unsent_from: DateTime<Utc>,
        at: DateTime<Utc>,
    },
    /// The run's task was deleted: nothing will dispatch it any more.
    TaskDeleted { at: DateTime<Utc> },
    /// A user cancelled the run.
    Cancelled { at: DateTime<Utc> },
    /// A later run of the task replaced it (overlap `REPLACE`).
    Replaced { at: DateTime<Utc> },
    /// Its first attempt came due while an earlier run was open (overlap `SKIP`, or
    /// `BUFFER_ONE` with a run waiting already); the message says which.
    Skipped {
        message: &'static str,
        at: DateTime<Utc>,
    },
    /// Its first attempt came due while an earlier run was open (overlap `BUFFER_ONE`).
    Buffered { at: DateTime<Utc> },
    /// No earlier run of its task is open any more: a buffered run goes on, to its upstreams
    /// if it has any, else to dispatch now.
    EarlierFinished {
        waits_for_upstreams: bool,
        at: DateTime<Utc>,
    },
}

/// A result reported for an attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    /// The attempt reported on; `None`: the one dispatched last.
    pub attempt: Option<i32>,
    pub outcome: Outcome,
    pub at: DateTime<Utc>,
    /// When ax sent the attempt: set on a dispatcher's reply, not on a callback.
    pub sent_at: Option<DateTime<Utc>>,
    /// The executor group member that served the attempt: set on a dispatcher's reply.
    pub member: Option<String>,
}

impl Report {
    /// The first attempt's sending time, which its reply records.
    fn first_dispatch(&self, attempt: i32) -> Option<DateTime<Utc>> {
        self.sent_at.filter(|_| attempt == 1)
    }
}

/// What an attempt came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The handler took the attempt; its result comes by callback before `deadline`.
    Accepted { deadline: DateTime<Utc> },
    Succeeded {
        code: Option<String>,
        message: Option<String>,
    },
    /// `retry: false` when the executor said not to retry.
    Failed {
        code: Option<String>,
        message: Option<String>,
        retry: bool,
    },
}

/// The condition a write holds on: the row must still be as the decision saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expect {
    /// The row's status is one of these.
    pub status: &'static [RunStatus],
    pub attempt: Option<i32>,
    pub dispatched: Option<i32>,
    /// The row's `dispatched` is at least this: the attempt was handed to a dispatcher.
    pub dispatched_at_least: Option<i32>,
    pub claimed_until: Option<DateTime<Utc>>,
    /// The row's attempt is due at exactly this time: a due attempt claimed on a stale read
    /// must not be taken once the run was held back and released again (its due time moved).
    pub next_attempt_at: Option<DateTime<Utc>>,
    pub claimant: Option<String>,
}

impl Expect {
    /// The row is in these states, whatever else.
    pub fn status(status: &'static [RunStatus]) -> Expect {
        Expect {
            status,
            attempt: None,
            dispatched: None,
            dispatched_at_least: None,
            claimed_until: None,
            next_attempt_at: None,
            claimant: None,
        }
    }

    /// The row's status and attempts are as read.
    fn seen(run: &RunState) -> Expect {
        Expect {
            attempt: Some(run.attempt),
            dispatched: Some(run.dispatched),
            ..Expect::status(run.status.only())
        }
    }

    /// Whether `run` meets the condition.
    pub fn holds(&self, run: &RunState) -> bool {
        self.status.contains(&run.status)
            && self.attempt.is_none_or(|a| a == run.attempt)
            && self.dispatched.is_none_or(|d| d == run.dispatched)
            && self.dispatched_at_least.is_none_or(|d| run.dispatched >= d)
            && self
                .claimed_until
                .is_none_or(|until| run.claimed_until == Some(until))
            && self
                .next_attempt_at
                .is_none_or(|at| run.next_attempt_at == Some(at))
            && self.claimant.as_ref().is_none_or(|c| *c == run.claimant)
    }
}

/// The columns a write sets; `None` leaves a column as it is (`Some(None)` clears it).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Change {
    pub status: Option<RunStatus>,
    pub attempt: Option<i32>,
    pub dispatched: Option<i32>,
    pub retries_used: Option<i32>,
    pub code: Option<Option<String>>,
    pub message: Option<Option<String>>,
    pub next_attempt_at: Option<Option<DateTime<Utc>>>,
    pub claimed_until: Option<Option<DateTime<Utc>>>,
    pub deadline_at: Option<Option<DateTime<Utc>>>,
    /// Set when a waiting run is released: from then on it is due, so time before it was
    /// spent waiting (on upstreams or the overlap policy), not ax's lag.
    pub due_at: Option<DateTime<Utc>>,
    pub finished_at: Option<DateTime<Utc>>,
    pub claimant: Option<String>,
    /// Set by the first attempt's reply: when it was sent.
    pub dispatched_at: Option<DateTime<Utc>>,
    /// Set by a reply from an executor group's member: which one.
    pub member: Option<String>,
}

/// One change of a run's row and the condition it holds on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Write {
    pub expect: Expect,
    pub change: Change,
}

/// Why an event changes nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// The run is final already.
    Final(RunStatus),
    /// The attempt's result was counted already, or another attempt is the current one.
    Superseded,
    /// The result names an attempt that was never dispatched.
    NotDispatched { attempt: i32, dispatched: i32 },
    /// The event does not apply to the run as it is (a claim of a held attempt, …).
    NotApplicable,
}

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
    pub process: String,
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

fn released(at: DateTime<Utc>) -> Change {
    Change {
        status: Some(RunStatus::Ready),
        next_attempt_at: Some(Some(at)),
        deadline_at: Some(None),
        due_at: Some(at),
        ..Change::default()
    }
}

fn cancelled(at: DateTime<Utc>) -> Change {
    finish(
        RunStatus::Cancelled,
        Some(CANCELLED_CODE.into()),
        Some(CANCELLED_MESSAGE.into()),
        at,
    )
}

fn replaced(at: DateTime<Utc>) -> Change {
    finish(
        RunStatus::Cancelled,
        Some(REPLACED_CODE.into()),
        Some(REPLACED_MESSAGE.into()),
        at,
    )
}

/// The write of an event that needs no read of the row: its condition says when it applies,
/// and wherever it holds the write is exactly what [`on_event`] decides. Used to apply many
/// dispatch replies, or a deleted task's open runs, in one statement.
pub fn blind(event: &Event) -> Option<Write> {
    match event {
        // A SUCCESS ends any open run it was dispatched for (see `on_report`); one for an
        // attempt never dispatched is refused there, so it must not hold here either.
        Event::Report(
            report @ Report {
                attempt: Some(attempt),
                outcome: Outcome::Succeeded { code, message },
                at,
                ..
            },
        ) if *attempt >= 1 => Some(Write {
            expect: Expect {
                dispatched_at_least: Some(*attempt),
                ..Expect::status(DISPATCHABLE)
            },
            change: Change {
                dispatched_at: report.first_dispatch(*attempt),
                member: report.member.clone(),
                ..finish(RunStatus::Success, code.clone(), message.clone(), *at)
            },
        }),
        Event::Report(
            report @ Report {
                attempt: Some(attempt),
                outcome: Outcome::Accepted { deadline },
                ..
            },
        ) => Some(Write {
            expect: Expect {
                attempt: Some(*attempt),
                dispatched: Some(*attempt),
                ..Expect::status(RunStatus::Ready.only())
            },
            change: Change {
                dispatched_at: report.first_dispatch(*attempt),
                member: report.member.clone(),
                ..running(*deadline)
            },
        }),
        // A deleted task's runs, and replaced ones, end the same way in every open state.
        Event::TaskDeleted { at } => Some(Write {
            expect: Expect::status(OPEN),
            change: deleted(*at),
        }),
        Event::Replaced { at } => Some(Write {
            expect: Expect::status(OPEN),
            change: replaced(*at),
        }),
        _ => None,
    }
}

fn deleted(at: DateTime<Utc>) -> Change {
    finish(
        RunStatus::Failed,
        Some(TASK_DELETED_CODE.into()),
        Some(TASK_DELETED_MESSAGE.into()),
        at,
    )
}

fn claim(
    run: &RunState,
    attempt: i32,
    claimant: &str,
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
            claimant: Some(claimant.to_string()),
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
    claimant: &str,
    until: DateTime<Utc>,
) -> Result<Write, Refusal> {
    if run.status != RunStatus::Ready || run.attempt != attempt || run.dispatched != attempt {
        return Err(Refusal::Superseded);
    }
    if run.claimant != claimant {
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
fn on_report(run: &RunState, report: &Report) -> Result<Write, Refusal> {
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

/// A failed attempt: the next one is due after the back-off, or the run ends FAILED.
fn failure(
    run: &RunState,
    code: Option<String>,
    message: Option<String>,
    retry_allowed: bool,
    at: DateTime<Utc>,
) -> Change {
    if !retry_allowed || run.retries_used >= run.retry.max_retry {
        return finish(RunStatus::Failed, code, message, at);
    }
    let retry = run.retries_used + 1;
    Change {
        status: Some(RunStatus::Ready),
        attempt: Some(run.attempt + 1),
        retries_used: Some(retry),
        code: Some(code),
        message: Some(message),
        next_attempt_at: Some(Some(retry_at(run.retry.policy, retry, at))),
        claimed_until: Some(None),
        deadline_at: Some(None),
        ..Change::default()
    }
}

fn retry_at(policy: RetryPolicy, retry: i32, at: DateTime<Utc>) -> DateTime<Utc> {
    at.checked_add_signed(policy.delay(retry))
        .unwrap_or(DateTime::<Utc>::MAX_UTC)
}

fn running(deadline: DateTime<Utc>) -> Change {
    Change {
        status: Some(RunStatus::Running),
        deadline_at: Some(Some(deadline)),
        claimed_until: Some(None),
        ..Change::default()
    }
}

/// The run ends in `status`.
fn finish(
    status: RunStatus,
    code: Option<String>,
    message: Option<String>,
    at: DateTime<Utc>,
) -> Change {
    Change {
        status: Some(status),
        code: Some(code),
        message: Some(message),
        finished_at: Some(at),
        next_attempt_at: Some(None),
        claimed_until: Some(None),
        deadline_at: Some(None),
        ..Change::default()
    }
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

/// A new run's row, as it is born.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewRun {
    pub status: RunStatus,
    pub dispatched: i32,
    pub next_attempt_at: Option<DateTime<Utc>>,
    pub claimed_until: Option<DateTime<Utc>>,
    pub deadline_at: Option<DateTime<Utc>>,
    pub finished_at: Option<DateTime<Utc>>,
    /// Why a run born final or held back is so.
    pub code: Option<&'static str>,
    pub message: Option<&'static str>,
}

impl NewRun {
    /// A scheduled run, fired: committed with its first attempt claimed by the firing
    /// process, which dispatches it at its second (a fire and its claim are one write).
    pub fn fired(claim_until: DateTime<Utc>) -> NewRun {
        NewRun {
            status: RunStatus::Ready,
            dispatched: 1,
            next_attempt_at: None,
            claimed_until: Some(claim_until),
            deadline_at: None,
            finished_at: None,
            code: None,
            message: None,
        }
    }

    /// A scheduled run that waits for its upstreams until `deadline`.
    pub fn waiting_for_upstreams(deadline: DateTime<Utc>) -> NewRun {
        NewRun {
            status: RunStatus::Pending,
            dispatched: 0,
            next_attempt_at: None,
            claimed_until: None,
            deadline_at: Some(deadline),
            finished_at: None,
            code: None,
            message: None,
        }
    }

    /// A run too late for the misfire threshold: recorded, never dispatched.
    pub fn missed(at: DateTime<Utc>) -> NewRun {
        NewRun {
            status: RunStatus::Missed,
            dispatched: 0,
            next_attempt_at: None,
            claimed_until: None,
            deadline_at: None,
            finished_at: Some(at),
            code: None,
            message: None,
        }
    }

    /// A run the overlap policy skipped: recorded final, never dispatched.
    pub fn skipped(at: DateTime<Utc>, message: &'static str) -> NewRun {
        NewRun {
            code: Some(OVERLAP_CODE),
            message: Some(message),
            status: RunStatus::Skipped,
            ..NewRun::missed(at)
        }
    }

    /// A run the overlap policy holds back until no earlier run is open; then it goes on to
    /// its upstreams (waiting for them until `deadline`, if it has any) or to dispatch.
    pub fn buffered(deadline: Option<DateTime<Utc>>) -> NewRun {
        NewRun {
            status: RunStatus::Pending,
            dispatched: 0,
            next_attempt_at: None,
            claimed_until: None,
            deadline_at: deadline,
            finished_at: None,
            code: Some(OVERLAP_CODE),
            message: Some(BUFFER_MESSAGE),
        }
    }

    /// A run whose first attempt is due at `at`, claimed and dispatched like any due attempt:
    /// a manual run (due now), a backfilled one (paced), a jittered one (at its offset).
    pub fn due(at: DateTime<Utc>) -> NewRun {
        NewRun {
            status: RunStatus::Ready,
            dispatched: 0,
            next_attempt_at: Some(at),
            claimed_until: None,
            deadline_at: None,
            finished_at: None,
            code: None,
            message: None,
        }
    }
}

/// The deadline of a run waiting for its upstreams.
pub fn dependency_deadline(scheduled_at: DateTime<Utc>, timeout_secs: i64) -> DateTime<Utc> {
    scheduled_at
        .checked_add_signed(Duration::seconds(timeout_secs))
        .unwrap_or(DateTime::<Utc>::MAX_UTC)
}

/// What a run waiting for its upstreams does now, given each upstream's latest run scheduled
/// at or before it (`None`: no such run yet): released once every one succeeded, failed as
/// soon as one did not, timed out at its deadline; `None` while it keeps waiting.
pub fn upstream_event(
    upstreams: &[Option<RunStatus>],
    now: DateTime<Utc>,
    deadline: DateTime<Utc>,
) -> Option<Event> {
    let failed = |s: &Option<RunStatus>| s.is_some_and(|s| s.is_final() && s != RunStatus::Success);
    if upstreams.iter().any(failed) {
        Some(Event::UpstreamFailed { at: now })
    } else if upstreams.iter().all(|s| *s == Some(RunStatus::Success)) {
        Some(Event::Released { at: now })
    } else if now >= deadline {
        Some(Event::DependencyTimedOut { at: now })
    } else {
        None
    }
}
