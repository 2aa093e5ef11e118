//! How an event for a run went, once the store applied what the lifecycle decided.

use super::lifecycle::{Refusal, RunState};
use super::status::RunStatus;

/// How a transition went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decided {
    /// Written; the run is now as given.
    Applied(RunState),
    /// Nothing changed, for this reason; the run is as given.
    Refused(Refusal, RunState),
    /// No run has this request id.
    Unknown,
}

impl Decided {
    /// The run's status after the event, if the run exists.
    pub fn status(&self) -> Option<RunStatus> {
        match self {
            Decided::Applied(run) | Decided::Refused(_, run) => Some(run.status),
            Decided::Unknown => None,
        }
    }
}
