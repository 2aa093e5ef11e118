//! Which queued writes a store lane commits next, and when: natural group commit.
//!
//! A natural lane commits as soon as it has work and no commit of its own is in flight; what
//! arrives meanwhile joins the next commit, at most `max_rows` rows. A second commit starts
//! beside a running one only for a full batch, or for a write that has waited `max_wait`: so
//! an idle server commits each write at once, a busy one commits few, full transactions, and a
//! slow commit holds nothing back past `max_wait`. An eager lane commits whenever a commit slot
//! is free (fires: each write is already a batch, and dispatch waits on it).
//!
//! Writes to one run keep their order: a write never commits beside an earlier one to the same
//! run, nor ahead of it. A write that makes the run's last queued write moot is folded into
//! it instead ([`Queued::absorb`]), taking its place in the queue.

use std::collections::{HashMap, HashSet, VecDeque};
use std::time::{Duration, Instant};

use crate::run::RequestId;

/// What a lane needs to know of a queued write.
pub trait Queued {
    fn rows(&self) -> usize;
    /// The run it changes, when its order against that run's other writes matters.
    fn run(&self) -> Option<&RequestId>;
    /// Folds `later`, the next write to the same run, into this queued one when it makes this
    /// one moot; gives it back when both are to be written.
    fn absorb(&mut self, later: Self) -> Result<(), Self>
    where
        Self: Sized;
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    Eager,
    Natural { max_wait: Duration },
}

/// Writes taken for one commit; give `runs` back to [`Lane::done`] when it ends.
pub struct Taken<T> {
    pub writes: Vec<T>,
    pub runs: Vec<RequestId>,
}

pub struct Lane<T> {
    /// Queued writes with their sequence numbers (ascending) and arrival times.
    queue: VecDeque<(u64, T, Instant)>,
    next_seq: u64,
    /// The sequence number of each run's last queued write.
    last_queued: HashMap<RequestId, u64>,
    commits: usize,
    max_commits: usize,
    max_rows: usize,
    policy: Policy,
    /// Runs with a write in a running commit, and how many such commits.
    in_flight: HashMap<RequestId, usize>,
}

impl<T: Queued> Lane<T> {
    pub fn new(policy: Policy, max_commits: usize, max_rows: usize) -> Self {
        Lane {
            queue: VecDeque::new(),
            next_seq: 0,
            last_queued: HashMap::new(),
            commits: 0,
            max_commits: max_commits.max(1),
            max_rows: max_rows.max(1),
            policy,
            in_flight: HashMap::new(),
        }
    }

    pub fn push(&mut self, write: T, now: Instant) {
        let queued = write
            .run()
            .and_then(|run| self.last_queued.get(run))
            .and_then(|seq| self.queue.binary_search_by_key(seq, |(s, ..)| *s).ok());
        let write = match queued {
            Some(n) => match self.queue[n].1.absorb(write) {
                Ok(()) => return,
                Err(write) => write,
            },
            None => write,
        };
        let seq = self.next_seq;
        self.next_seq += 1;
        if let Some(run) = write.run() {
            self.last_queued.insert(run.clone(), seq);
        }
        self.queue.push_back((seq, write, now));
    }

    pub fn is_idle(&self) -> bool {
        self.commits == 0 && self.queue.is_empty()
    }

    /// When the oldest write that may commit now (none to a run being written) starts a commit
    /// beside the running ones, for a natural lane with a commit running and a slot free: the
    /// moment to look again. Any other change comes with a push or a commit's end.
    pub fn deadline(&self) -> Option<Instant> {
        let Policy::Natural { max_wait } = self.policy else {
            return None;
        };
        if self.commits == 0 || self.commits >= self.max_commits {
            return None;
        }
        let (picked, _) = self.pick();
        picked.first().map(|&n| self.queue[n].2 + max_wait)
    }

    /// The writes to commit now, if the policy starts a commit; the commit counts as running
    /// until [`Lane::done`].
    pub fn next_batch(&mut self, now: Instant) -> Option<Taken<T>> {
        if self.commits >= self.max_commits || self.queue.is_empty() {
            return None;
        }
        let (picked, rows) = self.pick();
        let starts = match self.policy {
            Policy::Eager => true,
            Policy::Natural { max_wait } => {
                self.commits == 0
                    || rows >= self.max_rows
                    || picked
                        .first()
                        .is_some_and(|&n| now >= self.queue[n].2 + max_wait)
            }
        };
        if picked.is_empty() || !starts {
            return None;
        }
        let mut writes = Vec::with_capacity(picked.len());
        for n in picked.into_iter().rev() {
            if let Some((seq, write, _)) = self.queue.remove(n) {
                if let Some(run) = write.run() {
                    if self.last_queued.get(run) == Some(&seq) {
                        self.last_queued.remove(run);
                    }
                }
                writes.push(write);
            }
        }
        writes.reverse();
        let runs: Vec<RequestId> = writes.iter().filter_map(|w| w.run().cloned()).collect();
        for run in &runs {
            *self.in_flight.entry(run.clone()).or_default() += 1;
        }
        self.commits += 1;
        Some(Taken { writes, runs })
    }

    /// A commit taken by [`Lane::next_batch`] ended.
    pub fn done(&mut self, runs: &[RequestId]) {
        self.commits = self.commits.saturating_sub(1);
        for run in runs {
            if let Some(count) = self.in_flight.get_mut(run) {
                *count -= 1;
                if *count == 0 {
                    self.in_flight.remove(run);
                }
            }
        }
    }

    /// Queue positions of the next commit's writes, in order, and their rows: at most
    /// `max_rows` (at least one write), none to a run another commit is writing or that an
    /// earlier queued write (left behind) goes to.
    fn pick(&self) -> (Vec<usize>, usize) {
        let mut held: HashSet<&RequestId> = HashSet::new();
        let (mut picked, mut rows) = (Vec::new(), 0);
        for (n, (_, write, _)) in self.queue.iter().enumerate() {
            if let Some(run) = write.run() {
                if held.contains(run) || self.in_flight.contains_key(run) {
                    held.insert(run);
                    continue;
                }
            }
            if !picked.is_empty() && rows + write.rows() > self.max_rows {
                break;
            }
            rows += write.rows();
            picked.push(n);
        }
        (picked, rows)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::TaskId;
    use chrono::{TimeZone, Utc};

    #[derive(Debug, PartialEq)]
    struct W(usize, Option<RequestId>);

    impl Queued for W {
        fn rows(&self) -> usize {
            1
        }
        fn run(&self) -> Option<&RequestId> {
            self.1.as_ref()
        }
        /// Writes numbered from [`MOOTING`] make the run's queued write moot.
        fn absorb(&mut self, later: Self) -> Result<(), Self> {
            if later.0 < MOOTING {
                return Err(later);
            }
            *self = later;
            Ok(())
        }
    }

    const MOOTING: usize = 100;

    #[test]
    fn a_write_making_a_queued_one_moot_takes_its_place() {
        let (mut lane, now) = (natural(1, 100), Instant::now());
        lane.push(W(0, None), now);
        let running = lane.next_batch(now).expect("a commit");
        lane.push(W(1, Some(run(1))), now);
        lane.push(W(2, Some(run(2))), now);
        lane.push(W(MOOTING + 1, Some(run(1))), now);
        // Not folded: the run's queued write is the folded one, and this one is ordinary.
        lane.push(W(3, Some(run(1))), now);
        lane.done(&running.runs);
        let next = lane.next_batch(now).expect("the next");
        assert_eq!(ids(&next), [MOOTING + 1, 2, 3], "in the first one's place");
        lane.done(&next.runs);
        // A run whose write is committing has nothing queued to fold into.
        lane.push(W(4, Some(run(4))), now);
        let taken = lane.next_batch(now).expect("taken");
        lane.push(W(MOOTING + 4, Some(run(4))), now);
        lane.done(&taken.runs);
        assert_eq!(ids(&lane.next_batch(now).expect("after it")), [MOOTING + 4]);
    }

    fn run(n: i64) -> RequestId {
        RequestId::scheduled(TaskId(n), Utc.timestamp_opt(0, 0).unwrap())
    }

    const WAIT: Duration = Duration::from_millis(500);

    fn natural(max_commits: usize, max_rows: usize) -> Lane<W> {
        Lane::new(Policy::Natural { max_wait: WAIT }, max_commits, max_rows)
    }

    fn ids(taken: &Taken<W>) -> Vec<usize> {
        taken.writes.iter().map(|w| w.0).collect()
    }

    #[test]
    fn an_idle_natural_lane_commits_the_first_write_at_once() {
        let (mut lane, now) = (natural(4, 100), Instant::now());
        lane.push(W(1, None), now);
        let taken = lane.next_batch(now).expect("a commit");
        assert_eq!(ids(&taken), [1]);
        assert!(!lane.is_idle());
        lane.done(&taken.runs);
        assert!(lane.is_idle());
    }

    #[test]
    fn writes_arriving_during_a_commit_join_the_next_one() {
        let (mut lane, now) = (natural(4, 100), Instant::now());
        lane.push(W(1, None), now);
        let first = lane.next_batch(now).expect("a commit");
        for n in 2..=5 {
            lane.push(W(n, None), now);
            assert!(lane.next_batch(now).is_none(), "a part batch waits");
        }
        lane.done(&first.runs);
        assert_eq!(ids(&lane.next_batch(now).expect("the next")), [2, 3, 4, 5]);
    }

    #[test]
    fn a_full_batch_commits_beside_a_running_commit_up_to_the_slots() {
        let (mut lane, now) = (natural(2, 3), Instant::now());
        lane.push(W(0, None), now);
        lane.next_batch(now).expect("first");
        (1..=7).for_each(|n| lane.push(W(n, None), now));
        assert_eq!(ids(&lane.next_batch(now).expect("a full batch")), [1, 2, 3]);
        assert!(lane.next_batch(now).is_none(), "both slots are busy");
    }

    #[test]
    fn a_write_waiting_past_max_wait_starts_a_commit_of_its_own() {
        let (mut lane, t0) = (natural(2, 100), Instant::now());
        lane.push(W(0, None), t0);
        lane.next_batch(t0).expect("first");
        lane.push(W(1, None), t0);
        assert_eq!(lane.deadline(), Some(t0 + WAIT));
        assert!(lane.next_batch(t0 + WAIT / 2).is_none());
        assert_eq!(ids(&lane.next_batch(t0 + WAIT).expect("due")), [1]);
    }

    #[test]
    fn writes_to_one_run_never_commit_side_by_side_nor_out_of_order() {
        let (mut lane, now) = (natural(4, 2), Instant::now());
        lane.push(W(1, Some(run(1))), now);
        let first = lane.next_batch(now).expect("first");
        lane.push(W(2, Some(run(1))), now);
        lane.push(W(3, Some(run(2))), now);
        lane.push(W(4, Some(run(1))), now);
        lane.push(W(5, Some(run(3))), now);
        // Run 1 is being written: its two writes wait, the others make a full batch.
        let second = lane.next_batch(now).expect("a full batch of other runs");
        assert_eq!(ids(&second), [3, 5]);
        assert_eq!(
            lane.deadline(),
            None,
            "run 1 cannot go beside its running commit"
        );
        lane.done(&first.runs);
        lane.done(&second.runs);
        // Both writes to run 1 may now go, in their order, in one commit.
        assert_eq!(ids(&lane.next_batch(now).expect("run 1")), [2, 4]);
    }

    #[test]
    fn an_eager_lane_commits_whenever_a_slot_is_free() {
        let (mut lane, now) = (Lane::new(Policy::Eager, 2, 100), Instant::now());
        (1..=3).for_each(|n| lane.push(W(n, None), now));
        assert_eq!(ids(&lane.next_batch(now).expect("first")), [1, 2, 3]);
        lane.push(W(4, None), now);
        assert_eq!(ids(&lane.next_batch(now).expect("second")), [4]);
        lane.push(W(5, None), now);
        assert!(lane.next_batch(now).is_none(), "no slot");
        assert_eq!(lane.deadline(), None);
    }
}
