//! What happens to a run: the events the lifecycle decides, and the results reported for an
//! attempt.

use crate::ids::ProcessId;
use chrono::{DateTime, Utc};

/// What happened to a run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// A dispatcher takes the current attempt, due or with a lapsed claim, until `until`.
    Claim {
        attempt: i32,
        claimant: ProcessId,
        until: DateTime<Utc>,
        at: DateTime<Utc>,
    },
    /// The claimant still holds the attempt, waiting to send it (its executor's host is at
    /// its cap): its claim now lasts until `until`.
    Renewed {
        attempt: i32,
        claimant: ProcessId,
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
    Recovered {
        claimant: ProcessId,
        at: DateTime<Utc>,
    },
    /// The claimant was fenced (its promise went stale, see `crate::cluster::fencing`) having sent
    /// no run fired for `unsent_from` or later: its claims on such runs lapse now. A run it
    /// may have sent keeps its claim until the claim expires.
    Fenced {
        claimant: ProcessId,
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
    pub(super) fn first_dispatch(&self, attempt: i32) -> Option<DateTime<Utc>> {
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
