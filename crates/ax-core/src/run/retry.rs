//! How long a failed attempt waits for the next one, and when a dispatcher's claim lapses.

use chrono::{DateTime, Duration, Utc};

/// Longest wait between two attempts, whatever the back-off says.
pub const MAX_RETRY_DELAY_SECS: i64 = 7 * 24 * 60 * 60;

/// Exponential back-off: retry n waits `backoff_secs · factor^(n-1)` (5 s, 25 s, 125 s … by
/// default).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    pub backoff_secs: i64,
    pub factor: i64,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            backoff_secs: 5,
            factor: 5,
        }
    }
}

impl RetryPolicy {
    /// The policy of a task: its own values where set, else these.
    pub fn with_overrides(self, backoff_secs: Option<i32>, factor: Option<i32>) -> Self {
        RetryPolicy {
            backoff_secs: backoff_secs.map_or(self.backoff_secs, i64::from),
            factor: factor.map_or(self.factor, i64::from),
        }
    }

    /// How long retry number `retry` (1-based) waits after the failed attempt.
    pub fn delay(&self, retry: i32) -> Duration {
        let mut secs = self.backoff_secs.clamp(0, MAX_RETRY_DELAY_SECS);
        for _ in 1..retry.max(1) {
            secs = secs.saturating_mul(self.factor.max(1));
            if secs >= MAX_RETRY_DELAY_SECS {
                break;
            }
        }
        Duration::seconds(secs.min(MAX_RETRY_DELAY_SECS))
    }
}

/// A task's retry settings, as a run's failure needs them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RetryLimits {
    /// Retries allowed after the first attempt (0 for a run whose task was deleted).
    pub max_retry: i32,
    pub policy: RetryPolicy,
}

/// Slack beyond a task's timeout before a dispatcher's claim on an attempt lapses: time to
/// record the outcome. A claim that lapses means the dispatcher died; the attempt is redone.
pub const CLAIM_MARGIN_SECS: i64 = 10;

/// When a claim on an attempt started at `now` lapses.
pub fn claim_until(now: DateTime<Utc>, timeout_ms: i64) -> DateTime<Utc> {
    now + Duration::milliseconds(timeout_ms) + Duration::seconds(CLAIM_MARGIN_SECS)
}

/// How far beyond a fresh claim a renewed one reaches: an attempt waiting for a slot of its
/// executor's host is renewed about this often, not every second.
const RENEWAL_SLACK_SECS: i64 = 30;

/// Whether an attempt claimed until `claimed_until` may be sent at `now` as it is: its claim
/// must have half the margin left. Not the whole timeout: the claim of an attempt held by a
/// dispatcher (waiting, in flight or being recorded) is renewed in the background before it
/// gets shorter than that, so it covers the exchange however long it lasts, without a store
/// round trip in front of the send.
pub fn claim_covers(claimed_until: DateTime<Utc>, now: DateTime<Utc>) -> bool {
    claimed_until >= now + Duration::seconds(CLAIM_MARGIN_SECS / 2)
}

/// The claim an attempt still waiting to be sent at `now` is renewed to.
pub fn renewed_claim(now: DateTime<Utc>, timeout_ms: i64) -> DateTime<Utc> {
    claim_until(now, timeout_ms) + Duration::seconds(RENEWAL_SLACK_SECS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_claim_covers_a_send_only_with_half_its_margin_left() {
        let now = DateTime::<Utc>::UNIX_EPOCH + Duration::seconds(1000);
        let fresh = claim_until(now, 2_000);
        assert!(claim_covers(fresh, now));
        assert!(claim_covers(fresh, now + Duration::seconds(7)));
        assert!(!claim_covers(fresh, now + Duration::milliseconds(7_001)));
        let renewed = renewed_claim(now + Duration::seconds(20), 2_000);
        assert!(claim_covers(renewed, now + Duration::seconds(57)));
        assert!(!claim_covers(renewed, now + Duration::seconds(58)));
    }

    #[test]
    fn backoff_is_five_times_longer_each_retry() {
        let policy = RetryPolicy::default();
        let delays: Vec<i64> = (1..=5).map(|n| policy.delay(n).num_seconds()).collect();
        assert_eq!(delays, vec![5, 25, 125, 625, 3125]);
        let custom = policy.with_overrides(Some(2), Some(3));
        assert_eq!(custom.delay(3).num_seconds(), 18);
        assert_eq!(
            policy.with_overrides(None, Some(1)).delay(9).num_seconds(),
            5
        );
        assert_eq!(policy.delay(1000).num_seconds(), MAX_RETRY_DELAY_SECS);
        let huge = RetryPolicy {
            backoff_secs: i64::MAX,
            factor: i64::MAX,
        };
        assert_eq!(huge.delay(i32::MAX).num_seconds(), MAX_RETRY_DELAY_SECS);
    }
}
