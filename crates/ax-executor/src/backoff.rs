//! How long to wait before sending a callback again: 0.5 s doubling to 30 s, each wait drawn
//! from its upper half (jitter, so executors that lost ax together do not return together),
//! for up to a total time (10 minutes by default).

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::time::Duration;

/// The retry schedule of callbacks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    pub first: Duration,
    pub max: Duration,
    /// Give up once this much time has passed since the first try.
    pub give_up_after: Duration,
}

impl Default for Backoff {
    fn default() -> Backoff {
        Backoff {
            first: Duration::from_millis(500),
            max: Duration::from_secs(30),
            give_up_after: Duration::from_secs(600),
        }
    }
}

impl Backoff {
    /// The wait after failed try number `tries` (1 for the first), with `jitter` in `[0, 1)`:
    /// between half and all of `first * 2^(tries-1)`, capped at `max`.
    pub fn delay(&self, tries: u32, jitter: f64) -> Duration {
        let exponent = tries.saturating_sub(1).min(30);
        let full = self.first.saturating_mul(1 << exponent).min(self.max);
        full.mul_f64(0.5 + 0.5 * jitter.clamp(0.0, 1.0))
    }

    /// The wait after try number `tries` when `elapsed` has passed since the first, or `None`
    /// when the next try would come after `give_up_after`.
    pub fn next(&self, tries: u32, elapsed: Duration, jitter: f64) -> Option<Duration> {
        let delay = self.delay(tries, jitter);
        (elapsed + delay <= self.give_up_after).then_some(delay)
    }
}

/// A number in `[0, 1)`, different on every call: std's randomly keyed hasher is enough for
/// spreading retries, without a random-number crate.
pub(crate) fn jitter() -> f64 {
    let mut hasher = RandomState::new().build_hasher();
    hasher.write_u64(0);
    (hasher.finish() >> 11) as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_double_from_half_a_second_to_thirty() {
        let backoff = Backoff::default();
        let full: Vec<u64> = (1..=9)
            .map(|tries| backoff.delay(tries, 1.0).as_millis() as u64)
            .collect();
        assert_eq!(
            full,
            [500, 1000, 2000, 4000, 8000, 16000, 30000, 30000, 30000]
        );
        assert_eq!(backoff.delay(1, 0.0), Duration::from_millis(250));
        assert_eq!(backoff.delay(u32::MAX, 0.0), Duration::from_secs(15));
    }

    #[test]
    fn jitter_stays_within_the_upper_half() {
        let backoff = Backoff::default();
        for _ in 0..1000 {
            let j = jitter();
            assert!((0.0..1.0).contains(&j));
            let delay = backoff.delay(3, j);
            assert!(delay >= Duration::from_millis(1000) && delay <= Duration::from_millis(2000));
        }
        let draws: std::collections::HashSet<u64> = (0..50).map(|_| jitter().to_bits()).collect();
        assert!(draws.len() > 40, "jitter should vary");
    }

    #[test]
    fn it_gives_up_after_the_total_time() {
        let backoff = Backoff::default();
        let mut elapsed = Duration::ZERO;
        let mut tries = 0;
        while let Some(delay) = backoff.next(tries + 1, elapsed, 1.0) {
            tries += 1;
            elapsed += delay;
        }
        assert!(elapsed <= Duration::from_secs(600));
        assert!(elapsed > Duration::from_secs(570), "{elapsed:?}");
        // 0.5+1+2+4+8+16 = 31.5 s, then 30 s waits: 18 more fit in 600 s.
        assert_eq!(tries, 6 + 18);
        assert_eq!(backoff.next(1, Duration::from_secs(600), 0.0), None);
    }
}
