//! Broadcast shards: one run per live member of a group at fire time, the fire's shards
//! counted as one run by its dependants.

use super::status::RunStatus;
use crate::ids::{RequestId, TaskId};
use chrono::{DateTime, Utc};

/// A run's shard of its fire: `index` in `0..total`, sent to the executor as `shardIndex` and
/// `shardTotal`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    pub index: i32,
    pub total: i32,
}

impl Shard {
    /// The whole job on one member: a broadcast task's manual run or backfill, or a fire
    /// while its group has no member.
    pub const WHOLE: Shard = Shard { index: 0, total: 1 };

    /// A stored row's shard, if it is one.
    pub fn of_row(index: Option<i32>, total: Option<i32>) -> Option<Shard> {
        Some(Shard {
            index: index?,
            total: total?,
        })
    }

    /// Its request id: shard 0 has the id a run of that second has without shards (so a
    /// backfill finds the fire), the others one derived from (task, second, shard).
    pub fn request_id(self, task_id: TaskId, scheduled_at: DateTime<Utc>) -> RequestId {
        RequestId::scheduled_shard(task_id, scheduled_at, self.index)
    }
}

/// Whether a row of `shard_total` is one of several shards of its fire (its siblings are not
/// earlier runs of its task).
pub fn sharded(shard_total: Option<i32>) -> bool {
    shard_total.is_some_and(|total| total > 1)
}

/// The shards of a fire over `members` live members: one each; a group with none still gets
/// one run (it fails `NO_EXECUTOR`, retried, unless a member joins).
pub fn shards(members: usize) -> impl Iterator<Item = Shard> {
    let total = i32::try_from(members.max(1)).unwrap_or(i32::MAX);
    (0..total).map(move |index| Shard { index, total })
}

/// A fire's status as its dependants see it, from its shards' statuses: the first shard that
/// ended otherwise than `SUCCESS` decides (a failed shard fails the fire); else an open one
/// (the fire is still running); else `SUCCESS`. `None` for no shard.
pub fn fire_status(shards: &[RunStatus]) -> Option<RunStatus> {
    let failed = |s: &&RunStatus| s.is_final() && **s != RunStatus::Success;
    shards
        .iter()
        .find(failed)
        .or_else(|| shards.iter().find(|s| !s.is_final()))
        .or(shards.first())
        .copied()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_fire_over_n_members_has_n_shards_and_over_none_one() {
        let over_three: Vec<Shard> = shards(3).collect();
        assert_eq!(
            over_three,
            (0..3)
                .map(|index| Shard { index, total: 3 })
                .collect::<Vec<_>>()
        );
        assert_eq!(shards(0).collect::<Vec<_>>(), vec![Shard::WHOLE]);
        assert!(!sharded(Some(Shard::WHOLE.total)) && !sharded(None));
        assert!(sharded(Some(over_three[0].total)));
    }

    #[test]
    fn shard_ids_are_stable_distinct_and_shard_zero_is_the_plain_run_id() {
        let at = DateTime::from_timestamp(1_800_000_000, 0).expect("time");
        let task = TaskId(7);
        let ids: Vec<RequestId> = shards(4).map(|s| s.request_id(task, at)).collect();
        assert_eq!(ids[0], RequestId::scheduled(task, at));
        let again: Vec<RequestId> = shards(4).map(|s| s.request_id(task, at)).collect();
        assert_eq!(ids, again);
        let mut unique = ids.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), 4);
        let next_second = at + chrono::Duration::seconds(1);
        assert_ne!(
            shards(2).nth(1).map(|s| s.request_id(task, next_second)),
            Some(ids[1].clone())
        );
    }

    #[test]
    fn a_fire_succeeded_only_when_every_shard_did() {
        use RunStatus::*;
        assert_eq!(fire_status(&[Success, Success]), Some(Success));
        assert_eq!(fire_status(&[Success, Running]), Some(Running));
        assert_eq!(fire_status(&[Running, Failed, Success]), Some(Failed));
        assert_eq!(fire_status(&[Cancelled, Ready]), Some(Cancelled));
        assert_eq!(fire_status(&[]), None);
    }

    fn status() -> impl Strategy<Value = RunStatus> {
        prop::sample::select(RunStatus::ALL.to_vec())
    }

    proptest! {
        #[test]
        fn the_fire_status_is_a_shards_and_success_needs_all(shards in prop::collection::vec(status(), 1..8)) {
            let folded = fire_status(&shards).expect("some");
            prop_assert!(shards.contains(&folded));
            prop_assert_eq!(folded == RunStatus::Success, shards.iter().all(|s| *s == RunStatus::Success));
            let any_failed = shards.iter().any(|s| s.is_final() && *s != RunStatus::Success);
            prop_assert_eq!(folded.is_final() && folded != RunStatus::Success, any_failed);
        }
    }
}
