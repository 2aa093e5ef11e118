//! Jitter: a scheduled run's dispatch delayed by an offset fixed by the run itself, so that
//! every ax process, and every restart, computes the same one.

use chrono::{DateTime, Duration, Utc};

use crate::hash::splitmix64;
use crate::ids::TaskId;

/// The delay of the run of `task_id` scheduled at `scheduled_at` (whole seconds), in
/// `[0, jitter_secs]`; 0 without jitter.
pub fn jitter_offset(task_id: TaskId, scheduled_at: DateTime<Utc>, jitter_secs: i32) -> Duration {
    let Ok(span) = u64::try_from(jitter_secs) else {
        return Duration::zero();
    };
    if span == 0 {
        return Duration::zero();
    }
    let key = (task_id.0 as u64).rotate_left(32) ^ scheduled_at.timestamp() as u64;
    Duration::seconds((splitmix64(key) % (span + 1)) as i64)
}

/// When a scheduled run is due for dispatch: its time plus its offset.
pub fn jittered(task_id: TaskId, scheduled_at: DateTime<Utc>, jitter_secs: i32) -> DateTime<Utc> {
    scheduled_at
        .checked_add_signed(jitter_offset(task_id, scheduled_at, jitter_secs))
        .unwrap_or(scheduled_at)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(secs, 0).expect("valid time")
    }

    #[test]
    fn no_jitter_no_offset() {
        assert_eq!(
            jitter_offset(TaskId(7), at(1_800_000_000), 0),
            Duration::zero()
        );
        assert_eq!(
            jitter_offset(TaskId(7), at(1_800_000_000), -5),
            Duration::zero()
        );
    }

    #[test]
    fn offsets_stay_in_range_and_spread() {
        let mut seen = std::collections::HashSet::new();
        for n in 0..10_000 {
            let offset = jitter_offset(TaskId(n % 37), at(1_800_000_000 + n * 60), 59);
            assert!((0..=59).contains(&offset.num_seconds()), "{offset}");
            seen.insert(offset.num_seconds());
        }
        // Every second of the range comes up: the offsets spread the runs.
        assert_eq!(seen.len(), 60);
        for n in 0..1000 {
            let offset = jitter_offset(TaskId(1), at(n), 1).num_seconds();
            assert!(offset == 0 || offset == 1);
        }
    }

    #[test]
    fn the_offset_depends_on_the_run_alone() {
        let (task, time) = (TaskId(42), at(1_800_000_000));
        let first = jitter_offset(task, time, 3600);
        assert_eq!(jitter_offset(task, time, 3600), first);
        // Pinned: a change of the hash would move every jittered run of every deployment.
        assert_eq!(first, Duration::seconds(PINNED_OFFSET));
        assert_eq!(jittered(task, time, 3600), time + first);
        let others: Vec<_> = (1..20)
            .map(|n| jitter_offset(task, at(1_800_000_000 + n), 3600))
            .collect();
        assert!(others.iter().any(|o| *o != first));
    }

    const PINNED_OFFSET: i64 = 1424;
}
