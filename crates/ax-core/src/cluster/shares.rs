//! Shares: which process of a cluster fires which tasks. A task belongs to one of
//! [`PARTITIONS`] partitions (its id modulo their number); each partition goes to the live,
//! firing process of highest rendezvous weight for it. So every process computes the same
//! owners from the same list of processes, and a process that joins or leaves moves only the
//! partitions it takes or took.
//!
//! Views of the list differ for a moment while a process joins or leaves (each process reads
//! it every heartbeat). A process therefore takes a partition at once and lets one go only
//! after [`HANDOFF`]: meanwhile two may fire it, which the fire lock and the database's
//! compare-and-set settle, but never none.

use std::time::Duration;

use crate::hash::rendezvous_weight;
use crate::ids::{ProcessId, TaskId};

/// How many partitions the tasks are spread over: enough to split them evenly between a few
/// dozen processes, few enough to name a share in one query.
pub const PARTITIONS: usize = 256;

/// How long a process keeps firing a partition it no longer owns: two heartbeats and a
/// margin, so the process that took it has read the list and loaded it.
pub const HANDOFF: Duration = Duration::from_secs(5);

const WORDS: usize = PARTITIONS / 64;

/// The partition of a task.
pub fn partition_of(task: TaskId) -> usize {
    task.0.rem_euclid(PARTITIONS as i64) as usize
}

/// The process of `processes` that owns `partition`; `None` when there is none.
pub fn owner(partition: usize, processes: &[ProcessId]) -> Option<&ProcessId> {
    processes
        .iter()
        .max_by_key(|process| weight(partition, process))
}

/// A process's weight for a partition; ties (of equal hashes) go to the greater id.
fn weight(partition: usize, process: &ProcessId) -> (u64, &ProcessId) {
    (
        rendezvous_weight(partition as u64, process.as_str()),
        process,
    )
}

/// A set of partitions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Share {
    bits: [u64; WORDS],
}

impl Share {
    /// Every partition: a process alone, or one that cannot see the others.
    pub const ALL: Share = Share {
        bits: [u64::MAX; WORDS],
    };
    pub const NONE: Share = Share { bits: [0; WORDS] };

    /// The partitions `me` owns among `processes`, `me` counted among them whether or not the
    /// list has it yet.
    pub fn of(me: &ProcessId, processes: &[ProcessId]) -> Share {
        let mut share = Share::NONE;
        for partition in 0..PARTITIONS {
            let mine = weight(partition, me);
            if processes
                .iter()
                .all(|other| other == me || weight(partition, other) < mine)
            {
                share.insert(partition);
            }
        }
        share
    }

    fn insert(&mut self, partition: usize) {
        self.bits[partition / 64] |= 1 << (partition % 64);
    }

    /// Whether the share holds `partition`.
    pub fn holds(&self, partition: usize) -> bool {
        partition < PARTITIONS && self.bits[partition / 64] & (1 << (partition % 64)) != 0
    }

    /// Whether the share holds `task`'s partition.
    pub fn owns(&self, task: TaskId) -> bool {
        self.holds(partition_of(task))
    }

    /// Its partitions, in order.
    pub fn partitions(&self) -> impl Iterator<Item = usize> + '_ {
        (0..PARTITIONS).filter(|p| self.holds(*p))
    }

    /// How many partitions it holds.
    pub fn len(&self) -> usize {
        self.bits
            .iter()
            .map(|word| word.count_ones() as usize)
            .sum()
    }

    pub fn is_empty(&self) -> bool {
        *self == Share::NONE
    }

    pub fn is_all(&self) -> bool {
        *self == Share::ALL
    }

    pub fn union(self, other: Share) -> Share {
        Share {
            bits: std::array::from_fn(|i| self.bits[i] | other.bits[i]),
        }
    }

    /// The partitions of `self` not in `other`.
    pub fn minus(self, other: Share) -> Share {
        Share {
            bits: std::array::from_fn(|i| self.bits[i] & !other.bits[i]),
        }
    }
}

/// A share is written as the hex digits of its partitions' bits (64 of them, partition 0 in
/// the last digit's lowest bit), in heartbeats.
impl serde::Serialize for Share {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let hex: String = self
            .bits
            .iter()
            .rev()
            .map(|word| format!("{word:016x}"))
            .collect();
        serializer.serialize_str(&hex)
    }
}

impl<'de> serde::Deserialize<'de> for Share {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let hex = String::deserialize(deserializer)?;
        let bad = || serde::de::Error::custom(format!("not a share: {hex}"));
        if hex.len() != WORDS * 16 || !hex.is_ascii() {
            return Err(bad());
        }
        let mut bits = [0; WORDS];
        for (i, word) in bits.iter_mut().rev().enumerate() {
            *word = u64::from_str_radix(&hex[i * 16..(i + 1) * 16], 16).map_err(|_| bad())?;
        }
        Ok(Share { bits })
    }
}

/// This process's share over time: what the list of processes gives it now, and what it gave
/// it until less than [`HANDOFF`] ago.
#[derive(Debug, Clone)]
pub struct ShareKeeper {
    me: ProcessId,
    /// What the latest list gives this process.
    owned: Share,
    /// Partitions let go of, each kept until the time (ms) beside it.
    releasing: Vec<(Share, i64)>,
    /// Whether a list has been read yet: until then the process has fired nothing the others
    /// wait for, and has nothing to hand over.
    heard: bool,
}

impl ShareKeeper {
    /// A process that knows of no other yet: it fires every partition until it reads the first
    /// list, which gives it its share at once (the others fire theirs already).
    pub fn new(me: ProcessId) -> Self {
        ShareKeeper {
            me,
            owned: Share::ALL,
            releasing: Vec::new(),
            heard: false,
        }
    }

    /// Takes a new list of the firing processes, read at `now_ms`; answers the share to fire.
    pub fn update(&mut self, processes: &[ProcessId], now_ms: i64) -> Share {
        let owned = Share::of(&self.me, processes);
        let lost = self.owned.minus(owned);
        let handing_over = std::mem::replace(&mut self.heard, true);
        if handing_over && !lost.is_empty() {
            self.releasing
                .push((lost, now_ms + HANDOFF.as_millis() as i64));
        }
        self.owned = owned;
        self.firing(now_ms)
    }

    /// The share to fire at `now_ms`: what this process owns, and what it let go of less than
    /// [`HANDOFF`] ago.
    pub fn firing(&mut self, now_ms: i64) -> Share {
        self.releasing.retain(|(_, until)| *until > now_ms);
        self.releasing
            .iter()
            .fold(self.owned, |share, (lost, _)| share.union(*lost))
    }

    /// What the latest list gives this process, without what it is still letting go of.
    pub fn owned(&self) -> Share {
        self.owned
    }
}

#[cfg(test)]
mod tests;
