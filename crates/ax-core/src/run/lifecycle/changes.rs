//! The columns each step of a run sets: released to dispatch, running, ended.

use chrono::{DateTime, Utc};

use super::row::Change;
use crate::run::codes::{
    CANCELLED_CODE, CANCELLED_MESSAGE, REPLACED_CODE, REPLACED_MESSAGE, TASK_DELETED_CODE,
    TASK_DELETED_MESSAGE,
};
use crate::run::status::RunStatus;

pub(super) fn released(at: DateTime<Utc>) -> Change {
    Change {
        status: Some(RunStatus::Ready),
        next_attempt_at: Some(Some(at)),
        deadline_at: Some(None),
        due_at: Some(at),
        ..Change::default()
    }
}

pub(super) fn cancelled(at: DateTime<Utc>) -> Change {
    finish(
        RunStatus::Cancelled,
        Some(CANCELLED_CODE.into()),
        Some(CANCELLED_MESSAGE.into()),
        at,
    )
}

pub(super) fn replaced(at: DateTime<Utc>) -> Change {
    finish(
        RunStatus::Cancelled,
        Some(REPLACED_CODE.into()),
        Some(REPLACED_MESSAGE.into()),
        at,
    )
}

pub(super) fn deleted(at: DateTime<Utc>) -> Change {
    finish(
        RunStatus::Failed,
        Some(TASK_DELETED_CODE.into()),
        Some(TASK_DELETED_MESSAGE.into()),
        at,
    )
}

pub(super) fn running(deadline: DateTime<Utc>) -> Change {
    Change {
        status: Some(RunStatus::Running),
        deadline_at: Some(Some(deadline)),
        claimed_until: Some(None),
        ..Change::default()
    }
}

/// The run ends in `status`.
pub(super) fn finish(
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
