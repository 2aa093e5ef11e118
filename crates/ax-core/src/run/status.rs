//! The stored states of a run.

crate::text_enum! {
    /// The lifecycle of one run: `PENDING → READY → RUNNING → SUCCESS | FAILED`, or `MISSED`
    /// (too late), `SKIPPED` (an earlier run was open) or `CANCELLED` (by a user, or replaced by
    /// a later run). READY covers a run due for its next attempt and one whose attempt a
    /// dispatcher holds.
    RunStatus {
        Pending => "PENDING",
        Ready => "READY",
        Running => "RUNNING",
        Success => "SUCCESS",
        Failed => "FAILED",
        Missed => "MISSED",
        Skipped => "SKIPPED",
        Cancelled => "CANCELLED",
    }
}

/// The states a run can still leave.
pub const OPEN: &[RunStatus] = &[RunStatus::Pending, RunStatus::Ready, RunStatus::Running];

/// The states an attempt can be in flight in.
pub const DISPATCHABLE: &[RunStatus] = &[RunStatus::Ready, RunStatus::Running];

impl RunStatus {
    /// Final states never change again.
    pub fn is_final(self) -> bool {
        !OPEN.contains(&self)
    }

    /// This status alone, as a condition.
    pub fn only(self) -> &'static [RunStatus] {
        match self {
            Self::Pending => &[Self::Pending],
            Self::Ready => &[Self::Ready],
            Self::Running => &[Self::Running],
            Self::Success => &[Self::Success],
            Self::Failed => &[Self::Failed],
            Self::Missed => &[Self::Missed],
            Self::Skipped => &[Self::Skipped],
            Self::Cancelled => &[Self::Cancelled],
        }
    }
}

crate::text_enum! {
    /// Why a run exists.
    TriggerType { Schedule => "SCHEDULE", Manual => "MANUAL", Backfill => "BACKFILL" }
}

crate::text_enum! {
    /// The result an executor reports, in a reply body or a callback's `status`.
    ReportedStatus { Success => "SUCCESS", Failed => "FAILED" }
}
