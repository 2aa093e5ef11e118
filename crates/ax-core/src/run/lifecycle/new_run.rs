//! A new run's row, as it is born: fired, waiting, missed, skipped, buffered or due.

use chrono::{DateTime, Utc};

use crate::run::codes::{BUFFER_MESSAGE, OVERLAP_CODE};
use crate::run::status::RunStatus;

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
