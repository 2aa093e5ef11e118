//! Fencing: what keeps a process that paused, or whose writes stalled, from sending a run that
//! another process took over meanwhile.
//!
//! Before the runs fired for a second go out, a process promises in the store that it may
//! have sent fired runs up to that second and none after (`ax_process.sent_through`), under
//! the epoch it holds. Another process that finds the promise older than [`STALE_AFTER`]
//! fences it: it raises the epoch and, in the same transaction, takes the runs fired for later
//! seconds, which were never sent. A run that may have been sent keeps its claim until the
//! claim expires. The fenced process's next promise fails; it takes the new epoch, and every
//! claim it held from before is checked again with a compare-and-set before it is sent. So is
//! every claim of a process that finds its own last promise older than [`LEASE`]: it was
//! paused, and what it holds may have been taken by claim expiry.
//!
//! The rules are here, pure; the store writes the promises and fences
//! (`store::queries::processes`), the wheel makes a promise each second, and the dispatchers
//! check a claim's generation before sending it.

use std::time::{Duration, Instant};

use tokio::sync::watch;

/// A process whose promise is older than this is fenced by the others. Over the promise's
/// one-second pace with room for a slow write and the clocks' allowed difference.
pub const STALE_AFTER: Duration = Duration::from_secs(3);

/// How long before its second a second is promised, so that its runs need not wait for the
/// write. A process killed in between leaves that second's runs to their claims' expiry (they
/// may have been sent, as far as the others can tell).
pub const PROMISE_AHEAD: Duration = Duration::from_millis(10);

/// A process whose own last promise is older than this was paused (or its store stalled): the
/// claims it holds are checked again before they are sent. Shorter than the part of a claim
/// the dispatchers keep ahead (over 5 s), so a pause long enough for a claim to expire is
/// always seen.
pub const LEASE: Duration = Duration::from_secs(3);

/// The last promise this process made: the second it may send through, and the generation of
/// its claims (raised when it was fenced or paused: claims from before are checked again).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Promise {
    pub second: i64,
    pub generation: u64,
    /// When it was made; `None` before the first.
    pub at: Option<Instant>,
}

impl Promise {
    /// Before the first promise: nothing may be sent.
    pub fn initial() -> Promise {
        Promise {
            second: i64::MIN,
            generation: 0,
            at: None,
        }
    }

    /// The promise after one for `second` was written at `now`; `fenced`: this process had
    /// been fenced and took the new epoch first.
    pub fn next(self, second: i64, fenced: bool, now: Instant) -> Promise {
        let paused = self
            .at
            .is_some_and(|at| now.saturating_duration_since(at) > LEASE);
        Promise {
            second: self.second.max(second),
            generation: self.generation + u64::from(fenced || paused),
            at: Some(now),
        }
    }

    /// Whether it still stands at `now`: a promise older than the lease says nothing of what
    /// happened since.
    pub fn fresh(&self, now: Instant) -> bool {
        self.at
            .is_some_and(|at| now.saturating_duration_since(at) <= LEASE)
    }
}

/// This process's promises, shared by the wheel that makes them and the dispatchers that send
/// by them.
#[derive(Clone)]
pub struct SendGate {
    promise: watch::Sender<Promise>,
}

impl Default for SendGate {
    fn default() -> Self {
        SendGate {
            promise: watch::Sender::new(Promise::initial()),
        }
    }
}

impl SendGate {
    /// A promise for `second` is written (see [`Promise::next`]).
    pub fn promised(&self, second: i64, fenced: bool) {
        self.promise
            .send_modify(|promise| *promise = promise.next(second, fenced, Instant::now()));
    }

    /// The generation claims taken now are taken in.
    pub fn generation(&self) -> u64 {
        self.promise.borrow().generation
    }

    /// Waits until this process has promised `second`.
    pub async fn reached(&self, second: i64) {
        let mut promises = self.promise.subscribe();
        let _ = promises.wait_for(|promise| promise.second >= second).await;
    }

    /// The generation of a promise that stands now, once there is one: a claim of an older
    /// generation is checked again before it is sent.
    pub async fn confirmed(&self) -> u64 {
        let mut promises = self.promise.subscribe();
        let confirmed = promises
            .wait_for(|promise| promise.fresh(Instant::now()))
            .await
            .map(|promise| promise.generation);
        confirmed.unwrap_or_else(|_| self.generation())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn after(start: Instant, millis: u64) -> Instant {
        start + Duration::from_millis(millis)
    }

    #[test]
    fn promises_each_second_keep_the_generation() {
        let start = Instant::now();
        let mut promise = Promise::initial();
        for second in 0..10 {
            promise = promise.next(second, false, after(start, second as u64 * 1_000));
        }
        assert_eq!((promise.second, promise.generation), (9, 0));
        assert!(promise.fresh(after(start, 9_000 + LEASE.as_millis() as u64)));
        assert!(!promise.fresh(after(start, 9_001 + LEASE.as_millis() as u64)));
    }

    #[test]
    fn a_fence_or_a_pause_raises_the_generation() {
        let start = Instant::now();
        let promise = Promise::initial().next(10, false, start);
        assert_eq!(promise.generation, 0, "the first promise is no pause");
        let fenced = promise.next(11, true, after(start, 1_000));
        assert_eq!(fenced.generation, 1);
        let paused = fenced.next(30, false, after(start, 21_000));
        assert_eq!((paused.second, paused.generation), (30, 2));
        let on_time = paused.next(31, false, after(start, 22_000));
        assert_eq!(on_time.generation, 2);
    }

    #[test]
    fn the_second_never_goes_back() {
        let start = Instant::now();
        let promise = Promise::initial()
            .next(10, false, start)
            .next(9, false, start);
        assert_eq!(promise.second, 10);
    }

    #[test]
    fn nothing_stands_before_the_first_promise() {
        assert!(!Promise::initial().fresh(Instant::now()));
    }

    #[actix_rt::test]
    async fn a_sender_waits_for_a_promise_that_stands() {
        let gate = SendGate::default();
        let waiting = {
            let gate = gate.clone();
            actix_rt::spawn(async move { gate.confirmed().await })
        };
        gate.promised(5, true);
        assert_eq!(waiting.await.expect("confirmed"), 1);
        gate.reached(5).await;
    }
}
