//! A run's row as the lifecycle reads it, and the write it decides: the columns set and the
//! compare-and-set condition they hold on, or why nothing is written.

use chrono::{DateTime, Utc};

use crate::ids::{ProcessId, TaskId};
use crate::run::retry::RetryLimits;
use crate::run::status::{RunStatus, DISPATCHABLE};

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
    pub claimant: ProcessId,
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
    pub claimant: Option<ProcessId>,
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
    pub(super) fn seen(run: &RunState) -> Expect {
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
    pub claimant: Option<ProcessId>,
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
