//! The overlap policy: what a run that is due becomes while an earlier run of its task is open.
//! Pure: the store asks it with the task's open runs, read under the task's row lock, so every
//! ax process sharing the store decides alike.

use std::collections::HashMap;

use chrono::{DateTime, Utc};

use super::codes::{BUFFER_FULL_MESSAGE, OVERLAP_CODE, SKIP_MESSAGE};
use super::lifecycle::{Event, NewRun, RunState};
use super::status::RunStatus;
use crate::ids::{RequestId, TaskId};

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
    /// One of several shards of its fire (see `crate::run::sharded`).
    pub sharded: bool,
}

impl OpenRun {
    /// An open run of the task, from its row's status and code.
    pub fn of(
        request_id: RequestId,
        scheduled_at: DateTime<Utc>,
        status: RunStatus,
        code: Option<&str>,
        sharded: bool,
    ) -> OpenRun {
        OpenRun {
            request_id,
            scheduled_at,
            buffered: held_by_overlap(status, code),
            sharded,
        }
    }

    /// Whether it is earlier than the run `(scheduled_at, request_id, sharded)`: scheduled
    /// before it, ties broken by request id, so two runs never both count as the other's
    /// earlier one. Shards of one fire are one run: none is earlier than another.
    pub fn is_before(
        &self,
        scheduled_at: DateTime<Utc>,
        request_id: &RequestId,
        sharded: bool,
    ) -> bool {
        let siblings = self.sharded && sharded && self.scheduled_at == scheduled_at;
        !siblings && (self.scheduled_at, &self.request_id) < (scheduled_at, request_id)
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

/// Whether a run's row was written as the overlap policy left it, skipped or held back: by its
/// code, the one mark both leave.
pub fn left_by_overlap(code: Option<&str>) -> bool {
    code == Some(OVERLAP_CODE)
}

/// Whether a run is one the overlap policy holds back (`BUFFER_ONE`): PENDING, code `OVERLAP`.
pub fn held_by_overlap(status: RunStatus, code: Option<&str>) -> bool {
    status == RunStatus::Pending && left_by_overlap(code)
}

/// Whether a run the overlap policy holds back may go on: no earlier run of its task (among
/// the task's open runs, `open`) is open any more.
pub fn buffer_released(
    open: &[OpenRun],
    scheduled_at: DateTime<Utc>,
    request_id: &RequestId,
    sharded: bool,
) -> bool {
    !open
        .iter()
        .any(|run| run.is_before(scheduled_at, request_id, sharded))
}

/// Whether claiming a run's attempt asks the overlap policy first: the first attempt, not yet
/// dispatched, under a policy other than `ALLOW`.
pub fn claim_asks_overlap(run: &RunState, policy: OverlapPolicy) -> bool {
    run.attempt == 1 && run.dispatched == 0 && policy != OverlapPolicy::Allow
}

/// A run whose first attempt is due, and its task's policy.
#[derive(Debug, Clone, Copy)]
pub struct DueRun<'a> {
    pub task_id: TaskId,
    pub policy: OverlapPolicy,
    pub request_id: &'a RequestId,
    pub scheduled_at: DateTime<Utc>,
    /// One of several shards of its fire.
    pub sharded: bool,
}

/// The tasks whose open runs deciding `due` needs, each once: those of the runs whose policy
/// is not `ALLOW` (none when every policy is, and nothing need be read).
pub fn tasks_to_settle(due: &[DueRun<'_>]) -> Vec<TaskId> {
    let mut tasks: Vec<TaskId> = due
        .iter()
        .filter(|run| run.policy != OverlapPolicy::Allow)
        .map(|run| run.task_id)
        .collect();
    tasks.sort_unstable();
    tasks.dedup();
    tasks
}

/// What the overlap policy decided for a batch of due runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settled {
    /// One decision per due run, in the batch's order.
    pub decisions: Vec<Overlap>,
    /// The earlier runs the decisions replace, to end.
    pub replaced: Vec<RequestId>,
}

/// Decides each due run in order, each against its task's open runs earlier than it, the
/// batch's runs before it that stay open included. `open` holds the open runs of the tasks
/// [`tasks_to_settle`] names.
pub fn on_due_runs(due: &[DueRun<'_>], mut open: HashMap<TaskId, Vec<OpenRun>>) -> Settled {
    let mut replaced = Vec::new();
    let decisions = due
        .iter()
        .map(|run| {
            let open = open.entry(run.task_id).or_default();
            let earlier: Vec<OpenRun> = open
                .iter()
                .filter(|other| other.is_before(run.scheduled_at, run.request_id, run.sharded))
                .cloned()
                .collect();
            let decision = on_due(run.policy, &earlier);
            if let Overlap::Replace(ids) = &decision {
                replaced.extend(ids.iter().cloned());
                open.retain(|other| !ids.contains(&other.request_id));
            }
            open.retain(|other| other.request_id != *run.request_id);
            if decision.keeps_open() {
                open.push(OpenRun {
                    request_id: run.request_id.clone(),
                    scheduled_at: run.scheduled_at,
                    buffered: decision == Overlap::Buffer,
                    sharded: run.sharded,
                });
            }
            decision
        })
        .collect();
    Settled {
        decisions,
        replaced,
    }
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

    /// The event of a claimed first attempt the decision does not let go out now: skipped, or
    /// held back; `None` when it may go (it then replaced the earlier runs, if it says so).
    pub fn held_claim(&self, at: DateTime<Utc>) -> Option<Event> {
        match self {
            Overlap::Skip(message) => Some(Event::Skipped { message, at }),
            Overlap::Buffer => Some(Event::Buffered { at }),
            Overlap::Proceed | Overlap::Replace(_) => None,
        }
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
            sharded: false,
        }
    }

    #[test]
    fn earlier_is_by_time_then_request_id() {
        let (a, b) = (open(1, false), open(2, false));
        let t = DateTime::UNIX_EPOCH;
        assert!(a.is_before(t, &b.request_id, false));
        assert!(!b.is_before(t, &a.request_id, false));
        assert!(
            !a.is_before(t, &a.request_id, false),
            "a run is not before itself"
        );
        assert!(b.is_before(t + chrono::Duration::seconds(1), &a.request_id, false));
    }

    #[test]
    fn shards_of_one_fire_are_not_each_others_earlier_run() {
        let shard = OpenRun {
            sharded: true,
            ..open(1, false)
        };
        let t = DateTime::UNIX_EPOCH;
        let sibling = RequestId::from(uuid::Uuid::from_u128(2));
        assert!(!shard.is_before(t, &sibling, true));
        assert!(
            shard.is_before(t, &sibling, false),
            "a manual run at that second"
        );
        let next_fire = t + chrono::Duration::seconds(1);
        assert!(shard.is_before(next_fire, &sibling, true));
        let earlier = open(9, false);
        let due = DueRun {
            task_id: TaskId(1),
            policy: OverlapPolicy::Skip,
            request_id: &sibling,
            scheduled_at: t,
            sharded: true,
        };
        let open_runs = HashMap::from([(TaskId(1), vec![shard.clone()])]);
        assert_eq!(
            on_due_runs(&[due], open_runs).decisions,
            vec![Overlap::Proceed]
        );
        let open_runs = HashMap::from([(TaskId(1), vec![shard, earlier])]);
        let later = DueRun {
            scheduled_at: next_fire,
            ..due
        };
        assert_eq!(
            on_due_runs(&[later], open_runs).decisions,
            vec![Overlap::Skip(SKIP_MESSAGE)]
        );
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
        assert!(OpenRun::of(id.clone(), at, buffered.status, buffered.code, false).buffered);
        assert!(!OpenRun::of(id, at, RunStatus::Pending, None, false).buffered);
    }
}
