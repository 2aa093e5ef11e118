//! The request-id store: ax delivers at least once, so a run's `requestId` is claimed before
//! its handler runs, and its result kept, so that a second delivery never runs it twice.

use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::outcome::Outcome;

/// What a store knows of a `requestId` it was asked to claim.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claim {
    /// Not seen (or released): it is now claimed, the caller runs the handler.
    New,
    /// Claimed and not finished: a re-delivery while the first still works.
    Running,
    /// Finished with this result: answer it again, do not run.
    Done(Outcome),
}

/// A store that cannot answer; the dispatch gets `503` and ax delivers it again later.
#[derive(Debug, thiserror::Error)]
#[error("dedupe store: {0}")]
pub struct DedupeError(pub String);

impl DedupeError {
    pub fn new(reason: impl std::fmt::Display) -> DedupeError {
        DedupeError(reason.to_string())
    }
}

/// Where `requestId`s and their results are kept. [`MemoryDedupe`] is the default; implement
/// this to keep them in a database shared by the executor's replicas, so that a re-delivery to
/// another replica, or after a restart, is not run again.
///
/// The methods may be written `async fn` in an implementation.
pub trait DedupeStore: Send + Sync + 'static {
    /// Claims `request_id` atomically: `New` (now claimed), `Running` or `Done`.
    fn claim(&self, request_id: &str) -> impl Future<Output = Result<Claim, DedupeError>>;
    /// Keeps the result of a claimed run: later claims get `Done(outcome)`.
    fn finish(
        &self,
        request_id: &str,
        outcome: &Outcome,
    ) -> impl Future<Output = Result<(), DedupeError>>;
    /// Forgets a claim (a run interrupted by shutdown), so that a re-delivery runs it again.
    fn release(&self, request_id: &str) -> impl Future<Output = Result<(), DedupeError>>;
}

type LocalBoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + 'a>>;

/// [`DedupeStore`] with its futures boxed, so the executor can hold any store behind one `Arc`.
pub(crate) trait DynDedupe: Send + Sync {
    fn claim<'a>(&'a self, request_id: &'a str) -> LocalBoxFuture<'a, Result<Claim, DedupeError>>;
    fn finish<'a>(
        &'a self,
        request_id: &'a str,
        outcome: &'a Outcome,
    ) -> LocalBoxFuture<'a, Result<(), DedupeError>>;
    fn release<'a>(&'a self, request_id: &'a str) -> LocalBoxFuture<'a, Result<(), DedupeError>>;
}

impl<T: DedupeStore> DynDedupe for T {
    fn claim<'a>(&'a self, request_id: &'a str) -> LocalBoxFuture<'a, Result<Claim, DedupeError>> {
        Box::pin(DedupeStore::claim(self, request_id))
    }
    fn finish<'a>(
        &'a self,
        request_id: &'a str,
        outcome: &'a Outcome,
    ) -> LocalBoxFuture<'a, Result<(), DedupeError>> {
        Box::pin(DedupeStore::finish(self, request_id, outcome))
    }
    fn release<'a>(&'a self, request_id: &'a str) -> LocalBoxFuture<'a, Result<(), DedupeError>> {
        Box::pin(DedupeStore::release(self, request_id))
    }
}

/// No dedupe: every delivery runs the handler (`Executor::without_dedupe`).
pub(crate) struct NoDedupe;

impl DedupeStore for NoDedupe {
    async fn claim(&self, _: &str) -> Result<Claim, DedupeError> {
        Ok(Claim::New)
    }
    async fn finish(&self, _: &str, _: &Outcome) -> Result<(), DedupeError> {
        Ok(())
    }
    async fn release(&self, _: &str) -> Result<(), DedupeError> {
        Ok(())
    }
}

/// The default store, in this process's memory: results kept for `ttl` (24 h) and at most
/// `max_entries` (100,000) ids, the oldest finished dropped first. A restart forgets them.
pub struct MemoryDedupe {
    state: Mutex<Memory>,
}

impl Default for MemoryDedupe {
    fn default() -> MemoryDedupe {
        MemoryDedupe::new(Duration::from_secs(24 * 3600), 100_000)
    }
}

impl MemoryDedupe {
    pub fn new(ttl: Duration, max_entries: usize) -> MemoryDedupe {
        MemoryDedupe {
            state: Mutex::new(Memory {
                ttl,
                max_entries: max_entries.max(1),
                slots: HashMap::new(),
                finished: VecDeque::new(),
                next_seq: 0,
            }),
        }
    }

    fn with<R>(&self, f: impl FnOnce(&mut Memory) -> R) -> R {
        // A panic elsewhere while holding the lock leaves the map consistent (each change is
        // one insert or remove), so a poisoned lock is still usable.
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        f(&mut state)
    }
}

impl DedupeStore for MemoryDedupe {
    async fn claim(&self, request_id: &str) -> Result<Claim, DedupeError> {
        Ok(self.with(|memory| memory.claim(request_id, Instant::now())))
    }
    async fn finish(&self, request_id: &str, outcome: &Outcome) -> Result<(), DedupeError> {
        self.with(|memory| memory.finish(request_id, outcome.clone(), Instant::now()));
        Ok(())
    }
    async fn release(&self, request_id: &str) -> Result<(), DedupeError> {
        self.with(|memory| memory.slots.remove(request_id));
        Ok(())
    }
}

/// The memory store's state; pure, its clock passed in.
struct Memory {
    ttl: Duration,
    max_entries: usize,
    slots: HashMap<String, Slot>,
    /// Finished ids in the order they finished, with the `seq` they finished under (an id
    /// released and finished again has a newer one, so its older queue entry is skipped).
    finished: VecDeque<(String, u64)>,
    next_seq: u64,
}

enum Slot {
    Running,
    Done {
        outcome: Outcome,
        at: Instant,
        seq: u64,
    },
}

impl Memory {
    fn claim(&mut self, request_id: &str, now: Instant) -> Claim {
        self.evict(now);
        match self.slots.get(request_id) {
            Some(Slot::Running) => Claim::Running,
            Some(Slot::Done { outcome, .. }) => Claim::Done(outcome.clone()),
            None => {
                self.slots.insert(request_id.to_string(), Slot::Running);
                Claim::New
            }
        }
    }

    fn finish(&mut self, request_id: &str, outcome: Outcome, now: Instant) {
        let seq = self.next_seq;
        self.next_seq += 1;
        self.slots.insert(
            request_id.to_string(),
            Slot::Done {
                outcome,
                at: now,
                seq,
            },
        );
        self.finished.push_back((request_id.to_string(), seq));
        self.evict(now);
    }

    /// Drops finished results past their time, then the oldest finished while over the cap.
    /// Running claims are never dropped: their handler is still at work.
    fn evict(&mut self, now: Instant) {
        while let Some((id, seq)) = self.finished.front() {
            let current = match self.slots.get(id) {
                Some(Slot::Done { at, seq: done, .. }) if done == seq => Some(*at),
                _ => None,
            };
            let drop_it = match current {
                None => true, // released or finished again since: a stale queue entry
                Some(at) => {
                    now.saturating_duration_since(at) >= self.ttl
                        || self.slots.len() > self.max_entries
                }
            };
            if !drop_it {
                break;
            }
            if current.is_some() {
                self.slots.remove(id);
            }
            self.finished.pop_front();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn memory(ttl_secs: u64, max: usize) -> Memory {
        Memory {
            ttl: Duration::from_secs(ttl_secs),
            max_entries: max,
            slots: HashMap::new(),
            finished: VecDeque::new(),
            next_seq: 0,
        }
    }

    #[test]
    fn a_request_id_is_new_then_running_then_done() {
        let now = Instant::now();
        let mut m = memory(60, 10);
        assert_eq!(m.claim("a", now), Claim::New);
        assert_eq!(m.claim("a", now), Claim::Running);
        m.finish("a", Outcome::from("42 rows"), now);
        assert_eq!(m.claim("a", now), Claim::Done(Outcome::from("42 rows")));
        assert_eq!(m.claim("b", now), Claim::New);
    }

    #[test]
    fn a_released_claim_runs_again() {
        let now = Instant::now();
        let mut m = memory(60, 10);
        assert_eq!(m.claim("a", now), Claim::New);
        m.slots.remove("a");
        assert_eq!(m.claim("a", now), Claim::New);
    }

    #[test]
    fn results_expire_after_the_ttl() {
        let start = Instant::now();
        let mut m = memory(60, 10);
        m.claim("a", start);
        m.finish("a", Outcome::success(), start);
        let later = start + Duration::from_secs(59);
        assert_eq!(m.claim("a", later), Claim::Done(Outcome::success()));
        let past = start + Duration::from_secs(60);
        assert_eq!(m.claim("a", past), Claim::New);
    }

    #[test]
    fn over_the_cap_the_oldest_finished_go_first_and_running_ones_stay() {
        let now = Instant::now();
        let mut m = memory(3600, 3);
        m.claim("running", now);
        for id in ["one", "two", "three"] {
            m.claim(id, now);
            m.finish(id, Outcome::from(id), now);
        }
        // Four ids for a cap of three: "one", finished first, went.
        assert_eq!(m.slots.len(), 3);
        assert_eq!(m.claim("running", now), Claim::Running);
        assert_eq!(m.claim("three", now), Claim::Done(Outcome::from("three")));
        assert_eq!(m.claim("one", now), Claim::New);
    }

    #[test]
    fn an_id_finished_twice_keeps_its_newest_result() {
        let now = Instant::now();
        let mut m = memory(3600, 2);
        m.claim("a", now);
        m.finish("a", Outcome::from("first"), now);
        m.slots.remove("a");
        m.claim("a", now);
        m.finish("a", Outcome::from("second"), now);
        m.claim("b", now);
        m.finish("b", Outcome::from("b"), now);
        assert_eq!(m.claim("a", now), Claim::Done(Outcome::from("second")));
    }
}
