//! Keeping a process's wheel in step with the store, whichever process changed a task: the
//! change feed's cursor (which rows of `ax_task_change` this process applied) and the minute's
//! reconcile (which tasks the wheel holds otherwise than the store). Pure: time is an argument.

use std::collections::{BTreeMap, HashMap};

use crate::run::TaskId;

/// How long an id below one already read may still be committed: a change row's id is taken
/// when its transaction writes it, so a longer transaction commits a lower id after a shorter
/// one's higher id. Past this the cursor moves on and the minute's reconcile has the rest.
pub const GAP_WAIT_MS: i64 = 10_000;
/// Most id ranges one read of the gaps names; past it the highest gaps are read as one range,
/// ids already applied in it read again (a bulk registration's transactions, committing in
/// turn, leave a gap at every other id).
pub const MAX_GAPS: usize = 64;

/// Where a process is in the change feed. Ids are taken in order but may commit out of it, so
/// the cursor holds a floor (every id at or below it applied, or waited on long enough) and the
/// ids above it applied so far; the gaps between them are read again until they fill.
#[derive(Debug, Clone, Default)]
pub struct ChangeCursor {
    floor: i64,
    /// Ids above the floor, applied, each with when it was first read.
    seen: BTreeMap<i64, i64>,
}

/// What the next read of the feed asks for: the ids in the gaps, and every id past `after`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wanted {
    /// Inclusive ranges of ids not read yet below the highest id read (at most [`MAX_GAPS`],
    /// the last of which may hold ids read already).
    pub gaps: Vec<(i64, i64)>,
    pub after: i64,
}

impl ChangeCursor {
    /// A cursor past every change up to `floor` (read at start, before the wheel is filled).
    pub fn new(floor: i64) -> Self {
        ChangeCursor {
            floor,
            seen: BTreeMap::new(),
        }
    }

    /// Every id at or below this was applied or given up.
    pub fn floor(&self) -> i64 {
        self.floor
    }

    pub fn wanted(&self) -> Wanted {
        let mut gaps: Vec<(i64, i64)> = self.gaps().into_iter().map(|(gap, _)| gap).collect();
        if gaps.len() > MAX_GAPS {
            let last = gaps[gaps.len() - 1].1;
            gaps.truncate(MAX_GAPS);
            gaps[MAX_GAPS - 1].1 = last;
        }
        Wanted {
            gaps,
            after: self.seen.keys().next_back().copied().unwrap_or(self.floor),
        }
    }

    /// Takes the ids one read found (read `now_ms`); answers, in order, whether each is new,
    /// to apply now. The floor then moves over every id read and every gap waited on long
    /// enough.
    pub fn take(&mut self, ids: &[i64], now_ms: i64) -> Vec<bool> {
        let fresh = ids
            .iter()
            .map(|&id| {
                let new = id > self.floor && !self.seen.contains_key(&id);
                if new {
                    self.seen.insert(id, now_ms);
                }
                new
            })
            .collect();
        self.settle(now_ms);
        fresh
    }

    /// The gaps between the floor and the highest id read, lowest first, each with when the
    /// first id above it was read (how long it has been waited on).
    fn gaps(&self) -> Vec<((i64, i64), i64)> {
        let mut gaps = Vec::new();
        let mut below = self.floor;
        for &id in self.seen.keys() {
            if id > below + 1 {
                gaps.push(((below + 1, id - 1), 0));
            }
            below = id;
        }
        // A gap has waited since the earliest read of any id above it.
        let mut earliest = i64::MAX;
        let mut above = self.seen.iter().rev().peekable();
        for (gap, noticed) in gaps.iter_mut().rev() {
            while let Some((_, &at)) = above.next_if(|(&id, _)| id > gap.1) {
                earliest = earliest.min(at);
            }
            *noticed = earliest;
        }
        gaps
    }

    fn settle(&mut self, now_ms: i64) {
        self.lift();
        // Lowest first: a lower gap has waited at least as long as any above it.
        for ((_, end), noticed) in self.gaps() {
            if now_ms - noticed < GAP_WAIT_MS {
                break;
            }
            self.floor = end;
            self.lift();
        }
    }

    /// Moves the floor over the ids read right above it.
    fn lift(&mut self) {
        while self.seen.remove(&(self.floor + 1)).is_some() {
            self.floor += 1;
        }
    }
}

/// A task as the wheel or the store holds it: its next run's second and its version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Held {
    pub second: i64,
    pub version: i64,
}

/// The tasks whose wheel entry differs from the store's row, of those the store has due by the
/// window read: to read again and put in the wheel as the store has them. Around now a task
/// may be firing, its entry moving while the store moves, so there only a version that differs
/// counts (the overdue scan finds a task nobody fired); a task the wheel holds and the store
/// does not (deleted, paused, moved) counts past `settled_after`.
pub fn drifted(
    wheel: &HashMap<TaskId, Held>,
    store: &HashMap<TaskId, Held>,
    settled_after: i64,
) -> Vec<TaskId> {
    let mut drifted: Vec<TaskId> = store
        .iter()
        .filter(|(id, stored)| match wheel.get(id) {
            Some(held) if held.version != stored.version => true,
            _ if stored.second <= settled_after => false,
            Some(held) => held.second != stored.second,
            None => true,
        })
        .map(|(id, _)| *id)
        .collect();
    drifted.extend(
        wheel
            .iter()
            .filter(|(id, held)| held.second > settled_after && !store.contains_key(id))
            .map(|(id, _)| *id),
    );
    drifted.sort();
    drifted
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn ids_in_order_move_the_floor() {
        let mut cursor = ChangeCursor::new(10);
        assert_eq!(cursor.take(&[11, 12, 13], 0), vec![true, true, true]);
        assert_eq!(cursor.floor(), 13);
        assert_eq!(
            cursor.wanted(),
            Wanted {
                gaps: vec![],
                after: 13
            }
        );
        assert_eq!(cursor.take(&[13, 14], 5), vec![false, true]);
    }

    #[test]
    fn a_gap_is_read_again_until_it_fills() {
        let mut cursor = ChangeCursor::new(0);
        assert_eq!(cursor.take(&[1, 4, 5], 0), vec![true, true, true]);
        assert_eq!(cursor.floor(), 1);
        assert_eq!(
            cursor.wanted(),
            Wanted {
                gaps: vec![(2, 3)],
                after: 5
            }
        );
        // A later read finds the ids committed late, and ids read before are not new again.
        assert_eq!(cursor.take(&[3, 5, 6], 1_000), vec![true, false, true]);
        assert_eq!(cursor.wanted().gaps, vec![(2, 2)]);
        assert_eq!(cursor.take(&[2], 2_000), vec![true]);
        assert_eq!(cursor.floor(), 6);
    }

    #[test]
    fn a_gap_is_given_up_after_the_wait() {
        let mut cursor = ChangeCursor::new(0);
        cursor.take(&[3], 0);
        assert_eq!(cursor.floor(), 0);
        cursor.take(&[], GAP_WAIT_MS - 1);
        assert_eq!(cursor.floor(), 0);
        cursor.take(&[], GAP_WAIT_MS);
        assert_eq!(cursor.floor(), 3);
        // Given up: a late id below the floor is not applied by the feed.
        assert_eq!(cursor.take(&[2], GAP_WAIT_MS + 1), vec![false]);
    }

    #[test]
    fn a_gap_waits_from_the_first_read_above_it() {
        let mut cursor = ChangeCursor::new(0);
        cursor.take(&[5], 0);
        // 3 fills the middle later: the gap below it has waited since 5 was read.
        cursor.take(&[3], 8_000);
        cursor.take(&[], GAP_WAIT_MS);
        assert_eq!(cursor.floor(), 5);
    }

    #[test]
    fn many_gaps_are_waited_on_the_highest_read_as_one_range() {
        // Two transactions taking every other id: the first committed, the second not yet.
        let mut cursor = ChangeCursor::new(0);
        let ids: Vec<i64> = (1..=(MAX_GAPS as i64 + 3)).map(|k| 2 * k).collect();
        assert!(cursor.take(&ids, 0).into_iter().all(|fresh| fresh));
        let wanted = cursor.wanted();
        assert_eq!(wanted.gaps.len(), MAX_GAPS);
        assert_eq!(wanted.gaps[0], (1, 1));
        assert_eq!(
            wanted.gaps[MAX_GAPS - 1],
            (2 * MAX_GAPS as i64 - 1, 2 * MAX_GAPS as i64 + 5)
        );
        assert_eq!(cursor.floor(), 0);
        // The second commits: every one of its ids is applied, none of the first's again.
        let all: Vec<i64> = (1..=2 * (MAX_GAPS as i64 + 3)).collect();
        let fresh = cursor.take(&all, 1_000);
        assert!(all
            .iter()
            .zip(fresh)
            .all(|(id, fresh)| fresh == (id % 2 == 1)));
        assert_eq!(cursor.floor(), 2 * (MAX_GAPS as i64 + 3));
    }

    fn held(second: i64, version: i64) -> Held {
        Held { second, version }
    }

    #[test]
    fn drift_is_a_version_anywhere_and_a_time_or_presence_past_the_settled_second() {
        let store = HashMap::from([
            (TaskId(1), held(100, 1)), // same
            (TaskId(2), held(100, 2)), // changed definition
            (TaskId(3), held(100, 1)), // wheel lacks it
            (TaskId(4), held(100, 1)), // wheel at another second
            (TaskId(5), held(10, 1)),  // firing now: the wheel moved on
            (TaskId(6), held(10, 1)),  // firing now: not in the wheel
            (TaskId(7), held(10, 3)),  // firing now, but another version
        ]);
        let wheel = HashMap::from([
            (TaskId(1), held(100, 1)),
            (TaskId(2), held(100, 1)),
            (TaskId(4), held(160, 1)),
            (TaskId(5), held(11, 1)),
            (TaskId(7), held(10, 2)),
            (TaskId(8), held(100, 1)), // gone from the store
            (TaskId(9), held(10, 1)),  // gone from the store, but firing now
        ]);
        assert_eq!(
            drifted(&wheel, &store, 20),
            vec![TaskId(2), TaskId(3), TaskId(4), TaskId(7), TaskId(8)]
        );
    }

    proptest! {
        /// Whatever order ids commit in, every id is applied exactly once, and once none is
        /// missing the floor is the highest.
        #[test]
        fn every_id_is_applied_once(order in Just((1..=300i64).collect::<Vec<_>>()).prop_shuffle(),
                                    cut in 1usize..300) {
            let mut cursor = ChangeCursor::new(0);
            let mut applied = Vec::new();
            let mut committed: Vec<i64> = Vec::new();
            for (step, chunk) in order.chunks(cut).enumerate() {
                committed.extend(chunk);
                // Each read returns what it asks for among the committed ids.
                let wanted = cursor.wanted();
                let mut read: Vec<i64> = committed
                    .iter()
                    .copied()
                    .filter(|id| {
                        *id > wanted.after
                            || wanted.gaps.iter().any(|(a, b)| (a..=b).contains(&id))
                    })
                    .collect();
                read.sort();
                let fresh = cursor.take(&read, step as i64);
                applied.extend(read.iter().zip(fresh).filter(|(_, f)| *f).map(|(id, _)| *id));
            }
            applied.sort();
            prop_assert_eq!(applied, (1..=300).collect::<Vec<_>>());
            prop_assert_eq!(cursor.floor(), 300);
        }
    }
}
