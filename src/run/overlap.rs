//! The overlap policy: what a run that is due becomes while an earlier run of its task is open.
//! Pure: the store asks it with the task's open runs, read under the task's row lock, so every
//! ax process sharing the store decides alike.

use chrono::{DateTime, Utc};

use super::codes::{BUFFER_FULL_MESSAGE, OVERLAP_CODE, SKIP_MESSAGE};
use super::ids::RequestId;
use super::lifecycle::NewRun;
use super::status::RunStatus;

crate::text_enum! {
    /// What a run due while an earlier run of the same task is not final does.
    OverlapPolicy {
        Allow => "ALLOW",
        Skip => "SKIP",
        BufferOne => "BUFFER_ONE",
        Replace => "REPLACE",
    }
}

/// An open run of the task, as the decision sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenRun {
    pub request_id: RequestId,
    pub scheduled_at: DateTime<Utc>,
    /// Held back by `BUFFER_ONE` (PENDING, code `OVERLAP`).
    pub buffered: bool,
}

impl OpenRun {
    /// An open run of the task, from its row's status and code.
    pub fn of(
        request_id: RequestId,
        scheduled_at: DateTime<Utc>,
        status: RunStatus,
        code: Option<&str>,
    ) -> OpenRun {
        OpenRun {
            request_id,
            scheduled_at,
            buffered: status == RunStatus::Pending && code == Some(OVERLAP_CODE),
        }
    }

    /// Whether it is earlier than the run `(scheduled_at, request_id)`: scheduled before it,
    /// ties broken by request id, so two runs never both count as the other's earlier one.
    pub fn is_before(&self, scheduled_at: DateTime<Utc>, request_id: &RequestId) -> bool {
        (self.scheduled_at, &self.request_id) < (scheduled_at, request_id)
    }
}

/// What a due run does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Overlap {
    /// Dispatched as planned.
    Proceed,
    /// Recorded `SKIPPED`, never dispatched; the message says why.
    Skip(&'static str),
    /// Waits (PENDING) until no earlier run is open.
    Buffer,
    /// Dispatched; these earlier runs end `CANCELLED`.
    Replace(Vec<RequestId>),
}

/// Decides a due run of a task under `policy`, given the task's open runs earlier than it.
pub fn on_due(policy: OverlapPolicy, open: &[OpenRun]) -> Overlap {
    if open.is_empty() {
        return Overlap::Proceed;
    }
    match policy {
        OverlapPolicy::Allow => Overlap::Proceed,
        OverlapPolicy::Skip => Overlap::Skip(SKIP_MESSAGE),
        OverlapPolicy::BufferOne if open.iter().any(|run| run.buffered) => {
            Overlap::Skip(BUFFER_FULL_MESSAGE)
        }
        OverlapPolicy::BufferOne => Overlap::Buffer,
        OverlapPolicy::Replace => {
            Overlap::Replace(open.iter().map(|run| run.request_id.clone()).collect())
        }
    }
}

impl Overlap {
    /// Whether the run stays open after the decision (it then counts for the next one).
    pub fn keeps_open(&self) -> bool {
        !matches!(self, Overlap::Skip(_))
    }

    /// The new run as the decision leaves it, if it changes it: skipped at `at`, or held
    /// back (keeping the dependency deadline it was planned with).
    pub fn birth(&self, deadline: Option<DateTime<Utc>>, at: DateTime<Utc>) -> Option<NewRun> {
        match self {
            Overlap::Proceed | Overlap::Replace(_) => None,
            Overlap::Skip(message) => Some(NewRun::skipped(at, message)),
            Overlap::Buffer => Some(NewRun::buffered(deadline)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn open(n: u128, buffered: bool) -> OpenRun {
        OpenRun {
            request_id: RequestId::from(uuid::Uuid::from_u128(n)),
            scheduled_at: DateTime::UNIX_EPOCH,
            buffered,
        }
    }

    #[test]
    fn earlier_is_by_time_then_request_id() {
        let (a, b) = (open(1, false), open(2, false));
        let t = DateTime::UNIX_EPOCH;
        assert!(a.is_before(t, &b.request_id));
        assert!(!b.is_before(t, &a.request_id));
        assert!(!a.is_before(t, &a.request_id), "a run is not before itself");
        assert!(b.is_before(t + chrono::Duration::seconds(1), &a.request_id));
    }

    #[test]
    fn nothing_open_proceeds_under_every_policy() {
        for policy in OverlapPolicy::ALL {
            assert_eq!(on_due(*policy, &[]), Overlap::Proceed, "{policy}");
        }
    }

    #[test]
    fn each_policy_with_an_open_run() {
        let running = [open(1, false)];
        assert_eq!(on_due(OverlapPolicy::Allow, &running), Overlap::Proceed);
        assert_eq!(
            on_due(OverlapPolicy::Skip, &running),
            Overlap::Skip(SKIP_MESSAGE)
        );
        assert_eq!(on_due(OverlapPolicy::BufferOne, &running), Overlap::Buffer);
        assert_eq!(
            on_due(OverlapPolicy::Replace, &running),
            Overlap::Replace(vec![running[0].request_id.clone()])
        );
    }

    #[test]
    fn buffer_one_holds_one_run_and_skips_the_next() {
        let both = [open(1, false), open(2, true)];
        assert_eq!(
            on_due(OverlapPolicy::BufferOne, &both),
            Overlap::Skip(BUFFER_FULL_MESSAGE)
        );
        // Replace cancels the waiting one too: only the newest run goes out.
        assert_eq!(
            on_due(OverlapPolicy::Replace, &both),
            Overlap::Replace(vec![both[0].request_id.clone(), both[1].request_id.clone()])
        );
    }

    #[test]
    fn births_follow_the_decision() {
        let at = DateTime::UNIX_EPOCH;
        assert_eq!(Overlap::Proceed.birth(None, at), None);
        assert_eq!(Overlap::Replace(vec![]).birth(None, at), None);
        let skipped = Overlap::Skip(SKIP_MESSAGE)
            .birth(None, at)
            .expect("changed");
        assert_eq!(
            (skipped.status, skipped.code, skipped.finished_at),
            (RunStatus::Skipped, Some(OVERLAP_CODE), Some(at))
        );
        let deadline = Some(at + chrono::Duration::seconds(60));
        let buffered = Overlap::Buffer.birth(deadline, at).expect("changed");
        assert_eq!(
            (buffered.status, buffered.code, buffered.dispatched),
            (RunStatus::Pending, Some(OVERLAP_CODE), 0)
        );
        assert_eq!(
            (buffered.claimed_until, buffered.deadline_at),
            (None, deadline)
        );
        let id = RequestId::manual();
        assert!(OpenRun::of(id.clone(), at, buffered.status, buffered.code).buffered);
        assert!(!OpenRun::of(id, at, RunStatus::Pending, None).buffered);
    }
}
