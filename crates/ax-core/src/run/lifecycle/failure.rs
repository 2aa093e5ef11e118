//! A failed attempt: retried after the task's back-off while retries remain, else the end.

use chrono::{DateTime, Utc};

use super::changes::finish;
use super::row::{Change, RunState};
use crate::run::retry::RetryPolicy;
use crate::run::status::RunStatus;

/// A failed attempt: the next one is due after the back-off, or the run ends FAILED.
pub(super) fn failure(
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
