//! How a run's outcomes read in the log: one wording for a dispatcher's reply, a callback and a
//! timeout, naming the task and the request.

use super::lifecycle::RunState;
use super::status::RunStatus;
use crate::ids::RequestId;
use crate::text::Escaped;
use crate::time::clock::rfc3339;

/// The line of a failed attempt, once its failure is recorded (`after`: the run then): the
/// handler's code and message, and whether a retry follows or the failure is final.
pub fn failed_attempt(
    request_id: &RequestId,
    attempt: i32,
    code: Option<&str>,
    message: Option<&str>,
    after: &RunState,
) -> String {
    // The handler's words are quoted escaped: a message's newline cannot forge a log line.
    let reason = match (code, message) {
        (Some(code), Some(message)) => format!("{}: {}", Escaped(code), Escaped(message)),
        (Some(text), None) | (None, Some(text)) => Escaped(text).to_string(),
        (None, None) => "no code or message".into(),
    };
    let next = match after.status {
        RunStatus::Ready => format!(
            "retry {} of {} at {}",
            after.retries_used,
            after.retry.max_retry,
            after.next_attempt_at.map_or("once due".into(), rfc3339)
        ),
        RunStatus::Failed if after.retries_used >= after.retry.max_retry => {
            "final: no retry left, the run FAILED".into()
        }
        RunStatus::Failed => "final: the executor said not to retry, the run FAILED".into(),
        other => format!("the run is {other}"),
    };
    format!(
        "task {} request {request_id}: attempt {attempt} failed ({reason}); {next}",
        after.task_id
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::{RetryLimits, RetryPolicy, TaskId};
    use chrono::{TimeZone, Utc};

    fn run(status: RunStatus, retries_used: i32) -> RunState {
        RunState {
            task_id: TaskId(7),
            status,
            attempt: retries_used + 1,
            dispatched: retries_used,
            retries_used,
            next_attempt_at: Some(Utc.timestamp_opt(1_800_000_000, 0).unwrap()),
            claimed_until: None,
            claimant: "a".into(),
            scheduled_at: Utc.timestamp_opt(1_799_999_990, 0).unwrap(),
            retry: RetryLimits {
                max_retry: 2,
                policy: RetryPolicy::default(),
            },
        }
    }

    #[test]
    fn a_failure_says_what_the_handler_said_and_what_follows() {
        let id = RequestId::scheduled(TaskId(7), Utc.timestamp_opt(1_799_999_990, 0).unwrap());
        let line = failed_attempt(
            &id,
            1,
            Some("E42"),
            Some("disk full"),
            &run(RunStatus::Ready, 1),
        );
        assert_eq!(
            line,
            format!(
                "task 7 request {id}: attempt 1 failed (E42: disk full); retry 1 of 2 at \
                 2027-01-15T08:00:00.000Z"
            )
        );
        let last = failed_attempt(&id, 3, None, Some("HTTP 500"), &run(RunStatus::Failed, 2));
        assert!(
            last.ends_with("(HTTP 500); final: no retry left, the run FAILED"),
            "{last}"
        );
        let forged = failed_attempt(
            &id,
            1,
            Some("E1"),
            Some("boom\n[2027-01-01T00:00:00.000Z INFO ax] all fine\u{1b}[2K"),
            &run(RunStatus::Ready, 1),
        );
        assert!(
            forged.contains("(E1: boom\\n[2027-01-01T00:00:00.000Z INFO ax] all fine\\u{1b}[2K)"),
            "{forged}"
        );
        assert!(!forged.chars().any(char::is_control), "{forged}");
        let refused = failed_attempt(&id, 1, None, None, &run(RunStatus::Failed, 0));
        assert!(
            refused.ends_with(
                "(no code or message); final: the executor said not to retry, the run FAILED"
            ),
            "{refused}"
        );
    }
}
