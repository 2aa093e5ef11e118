//! A hashed timing wheel in virtual time.
//!
//! Time is never read here: every call takes the current time as unix seconds
//! (`i64`), so the wheel is pure logic and fully testable without a clock.
//!
//! Layout: `slots` buckets of one second each, indexed by
//! `due_sec.rem_euclid(slots)`, plus one extra "overdue" bucket for entries
//! inserted at or behind the position. Each entry keeps its absolute
//! `due_sec`, so the round counter is implicit: visiting a slot takes only the
//! entries whose `due_sec` has been reached and leaves later laps in place.
//! A `HashMap<K, Loc>` gives O(1) insert/remove; removal from a bucket is a
//! `swap_remove` that patches the moved entry's location.

use std::collections::HashMap;
use std::hash::Hash;

pub mod pace;
#[cfg(test)]
mod tests;

/// Upper bound on the slot count, so a wild `slots` argument cannot make
/// `new` abort on allocation. Only memory/perf changes: results are the same
/// for any slot count, because entries carry their absolute `due_sec`.
pub const MAX_SLOTS: usize = 1 << 20;

/// An entry returned by [`TimeWheel::advance`] or [`TimeWheel::remove`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Due<K, V> {
    /// The entry's key.
    pub key: K,
    /// The second (unix time) the entry was due at.
    pub due_sec: i64,
    /// The payload stored with the entry.
    pub value: V,
}

/// Where an entry lives: bucket index (`slots.len()` = overdue bucket) and
/// index inside that bucket's `Vec`.
#[derive(Debug, Clone, Copy)]
struct Loc {
    bucket: usize,
    idx: usize,
}

/// A hashed timing wheel: `slots` slots of one second each; entries more than
/// `slots` seconds ahead carry a round count.
///
/// The round count is implicit: each entry stores its absolute `due_sec` and a
/// slot visit only takes entries whose due second has been reached.
#[derive(Debug, Clone)]
pub struct TimeWheel<K, V> {
    /// `n + 1` buckets: `0..n` are the wheel slots, `n` holds overdue entries.
    buckets: Vec<Vec<Due<K, V>>>,
    /// Per-slot lower bound on the `due_sec` of its entries (`i64::MAX` when
    /// empty). Lets a visit skip a slot that only holds later laps without
    /// scanning it. Removals leave it stale-low, which only costs one scan.
    min_due: Vec<i64>,
    index: HashMap<K, Loc>,
    /// Last processed second.
    position: i64,
    /// Slot visits so far; lets tests check the one-pass bound on big jumps.
    #[cfg(test)]
    visits: usize,
}

impl<K: Eq + Hash + Clone, V> TimeWheel<K, V> {
    /// Creates an empty wheel.
    ///
    /// `now_sec`: the wheel's position; seconds <= now_sec count as already
    /// processed. `slots == 0` is treated as 1; `slots` above [`MAX_SLOTS`] is
    /// clamped to it.
    pub fn new(slots: usize, now_sec: i64) -> Self {
        let n = slots.clamp(1, MAX_SLOTS);
        let mut buckets = Vec::with_capacity(n + 1);
        buckets.resize_with(n + 1, Vec::new);
        TimeWheel {
            buckets,
            min_due: vec![i64::MAX; n],
            index: HashMap::new(),
            position: now_sec,
            #[cfg(test)]
            visits: 0,
        }
    }

    /// Number of one-second slots (after the 0 → 1 and [`MAX_SLOTS`] clamps).
    pub fn slots(&self) -> usize {
        self.min_due.len()
    }

    /// Inserts or replaces the entry for `key` (returns the replaced value). O(1).
    ///
    /// An entry due at or before the current position is returned by the next
    /// `advance`, whatever its argument.
    pub fn insert(&mut self, key: K, due_sec: i64, value: V) -> Option<V> {
        let bucket = self.bucket_for(due_sec);
        if let Some(loc) = self.index.get(&key).copied() {
            if loc.bucket == bucket {
                // Same bucket: update in place, no relinking needed.
                self.note_min(bucket, due_sec);
                let e = &mut self.buckets[bucket][loc.idx];
                e.due_sec = due_sec;
                return Some(std::mem::replace(&mut e.value, value));
            }
            let old = self.take_at(loc);
            self.push(bucket, key, due_sec, value);
            return Some(old.value);
        }
        self.push(bucket, key, due_sec, value);
        None
    }

    /// Removes the entry for `key`. O(1).
    pub fn remove(&mut self, key: &K) -> Option<Due<K, V>> {
        let loc = self.index.remove(key)?;
        Some(self.swap_out(loc))
    }

    /// Gives back the room of entries removed (a share of the tasks gone to another process).
    pub fn shrink_to_fit(&mut self) {
        self.index.shrink_to_fit();
        for bucket in &mut self.buckets {
            bucket.shrink_to_fit();
        }
    }

    /// The due second of `key`'s entry, if present.
    pub fn due_of(&self, key: &K) -> Option<i64> {
        let loc = self.index.get(key)?;
        Some(self.buckets[loc.bucket][loc.idx].due_sec)
    }

    /// Whether an entry for `key` is present.
    pub fn contains(&self, key: &K) -> bool {
        self.index.contains_key(key)
    }

    /// Every entry, in no order.
    pub fn entries(&self) -> impl Iterator<Item = &Due<K, V>> {
        self.buckets.iter().flatten()
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.index.len()
    }

    /// Whether the wheel holds no entries.
    pub fn is_empty(&self) -> bool {
        self.index.is_empty()
    }

    /// The last processed second.
    pub fn position(&self) -> i64 {
        self.position
    }

    /// Processes every second from position+1 through `now_sec` (late ticks
    /// are caught up: nothing due in a skipped second is lost), returns all
    /// entries due at or before `now_sec` (plus overdue ones inserted behind
    /// the position), ordered by `due_sec` ascending, and moves the position
    /// to `now_sec`. If `now_sec <= position` it only returns overdue entries
    /// and the position stays.
    ///
    /// A jump of `slots` seconds or more does a single pass over all slots
    /// instead of stepping through the gap. Entries with equal `due_sec` come
    /// out in no particular order.
    pub fn advance(&mut self, now_sec: i64) -> Vec<Due<K, V>> {
        let mut out = Vec::new();
        self.advance_into(now_sec, &mut out);
        out
    }

    /// Like [`advance`](Self::advance) but appends into a caller-provided
    /// `Vec` (to avoid allocation per tick on hot paths). Existing contents of
    /// `out` are left untouched; only the appended part is sorted.
    pub fn advance_into(&mut self, now_sec: i64, out: &mut Vec<Due<K, V>>) {
        let start = out.len();
        self.drain_overdue(out);
        if now_sec <= self.position {
            out[start..].sort_by_key(|d| d.due_sec);
            return;
        }
        let n = self.slots();
        // i128: the gap between two arbitrary i64s may not fit in an i64.
        let gap = i128::from(now_sec) - i128::from(self.position);
        if gap >= n as i128 {
            // Every slot is touched at least once by the gap: one pass over
            // all of them instead of stepping through the whole gap.
            for slot in 0..n {
                self.visit(slot, now_sec, out);
            }
        } else {
            // Fewer seconds than slots: each visited slot yields only entries
            // due exactly at that second (invariant: slot entries are due
            // after the old position), so this part comes out in order.
            let first = self.position + 1; // no overflow: position < now_sec
            for s in first..=now_sec {
                self.visit(self.slot_of(s), now_sec, out);
            }
        }
        // Orders the overdue prefix and the full-pass case; on the stepped
        // path with no overdue entries the input is sorted and this is a
        // linear check.
        out[start..].sort_by_key(|d| d.due_sec);
        self.position = now_sec;
    }

    // ---- internals ----

    fn slot_of(&self, sec: i64) -> usize {
        // rem_euclid of a positive modulus is in 0..n, never panics; n <= MAX_SLOTS fits i64.
        sec.rem_euclid(self.slots() as i64) as usize
    }

    fn bucket_for(&self, due_sec: i64) -> usize {
        if due_sec <= self.position {
            self.slots() // overdue bucket
        } else {
            self.slot_of(due_sec)
        }
    }

    fn note_min(&mut self, bucket: usize, due_sec: i64) {
        if let Some(m) = self.min_due.get_mut(bucket) {
            *m = (*m).min(due_sec);
        }
    }

    fn push(&mut self, bucket: usize, key: K, due_sec: i64, value: V) {
        let b = &mut self.buckets[bucket];
        self.index.insert(
            key.clone(),
            Loc {
                bucket,
                idx: b.len(),
            },
        );
        b.push(Due {
            key,
            due_sec,
            value,
        });
        self.note_min(bucket, due_sec);
    }

    /// Removes the entry at `loc` whose index entry is still present.
    fn take_at(&mut self, loc: Loc) -> Due<K, V> {
        let e = self.swap_out(loc);
        self.index.remove(&e.key);
        e
    }

    /// Swap-removes `loc` from its bucket and patches the location of the
    /// entry moved into the hole. Does not touch the removed key's index entry.
    fn swap_out(&mut self, loc: Loc) -> Due<K, V> {
        let b = &mut self.buckets[loc.bucket];
        let e = b.swap_remove(loc.idx);
        if let Some(moved) = b.get(loc.idx) {
            if let Some(l) = self.index.get_mut(&moved.key) {
                l.idx = loc.idx;
            }
        }
        e
    }

    /// Moves every overdue entry to `out` (unsorted).
    fn drain_overdue(&mut self, out: &mut Vec<Due<K, V>>) {
        let n = self.slots();
        for e in std::mem::take(&mut self.buckets[n]) {
            self.index.remove(&e.key);
            out.push(e);
        }
    }

    /// Moves entries of `slot` with `due_sec <= limit` to `out`; keeps the
    /// rest (later laps) and recomputes the slot's minimum.
    fn visit(&mut self, slot: usize, limit: i64, out: &mut Vec<Due<K, V>>) {
        #[cfg(test)]
        {
            self.visits += 1;
        }
        if self.min_due[slot] > limit {
            return; // nothing due here: only later laps, or empty
        }
        // Walk backwards and swap_remove due entries: the element moved into
        // the hole comes from the already-examined tail (a keeper), so each
        // fired entry costs at most one index patch and keepers are not
        // moved or rehashed. When the whole slot fires (the common case), no
        // entry moves at all.
        let bucket = &mut self.buckets[slot];
        let mut min = i64::MAX;
        let mut i = bucket.len();
        while i > 0 {
            i -= 1;
            if bucket[i].due_sec <= limit {
                let e = bucket.swap_remove(i);
                if let Some(moved) = bucket.get(i) {
                    if let Some(l) = self.index.get_mut(&moved.key) {
                        l.idx = i;
                    }
                }
                self.index.remove(&e.key);
                out.push(e);
            } else {
                min = min.min(bucket[i].due_sec);
            }
        }
        // An emptied slot gives its room back: otherwise every slot keeps the room of the
        // busiest second it ever held, and a wheel takes `slots` times a second's fires.
        if bucket.is_empty() {
            *bucket = Vec::new();
        }
        self.min_due[slot] = min;
    }
}
