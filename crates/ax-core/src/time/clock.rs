//! The time source of the scheduler. Actors read time only through a `Clock`, so the decisions
//! they delegate to the pure modules can be driven in virtual time.

use std::sync::{Arc, Mutex};

use chrono::{DateTime, Duration, Utc};

/// A time as ax shows it to people, in logs and the API: RFC 3339, UTC, milliseconds, `Z`.
pub fn rfc3339(at: DateTime<Utc>) -> String {
    at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// `#[serde(serialize_with = "rfc3339_serde")]`: a time in the [`rfc3339`] form.
pub fn rfc3339_serde<S: serde::Serializer>(at: &DateTime<Utc>, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&rfc3339(*at))
}

/// A source of the current UTC time.
pub trait Clock: Send + Sync + 'static {
    fn now(&self) -> DateTime<Utc>;
}

/// The wall clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> DateTime<Utc> {
        Utc::now()
    }
}

/// A clock that moves only when told to.
#[derive(Debug, Clone)]
pub struct ManualClock(Arc<Mutex<DateTime<Utc>>>);

impl ManualClock {
    pub fn new(start: DateTime<Utc>) -> Self {
        ManualClock(Arc::new(Mutex::new(start)))
    }

    pub fn advance(&self, by: Duration) {
        let mut now = self
            .0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        *now += by;
    }

    pub fn set(&self, to: DateTime<Utc>) {
        *self
            .0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = to;
    }
}

impl Clock for ManualClock {
    fn now(&self) -> DateTime<Utc> {
        *self
            .0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// A shared clock handle.
pub type SharedClock = Arc<dyn Clock>;

/// One reading of this process's clock against the cluster's reference clock (the
/// database's): how far the reference is ahead, and how sure that is (half the round trip).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reading {
    pub offset_ms: i64,
    pub uncertainty_ms: i64,
}

impl Reading {
    /// The reference's time `reference`, read between `before` and `after` by this clock.
    pub fn of(before: DateTime<Utc>, reference: DateTime<Utc>, after: DateTime<Utc>) -> Reading {
        let round_trip = (after - before).num_milliseconds().max(0);
        let midpoint = before + Duration::milliseconds(round_trip / 2);
        Reading {
            offset_ms: (reference - midpoint).num_milliseconds(),
            uncertainty_ms: round_trip / 2 + 1,
        }
    }

    /// The part of the offset that is sure: the offset brought towards 0 by the uncertainty.
    /// A clock is moved by this much only, so that a reading's noise never moves a run's
    /// second earlier than the reference's (on one host, the sure part is 0).
    pub fn sure_offset_ms(&self) -> i64 {
        let sure = self
            .offset_ms
            .abs()
            .saturating_sub(self.uncertainty_ms)
            .max(0);
        sure * self.offset_ms.signum()
    }

    /// Whether this clock is surely more than `max_ms` from the reference.
    pub fn beyond(&self, max_ms: u64) -> bool {
        let surely = self
            .offset_ms
            .unsigned_abs()
            .saturating_sub(self.uncertainty_ms as u64);
        surely > max_ms
    }
}

/// This process's clock moved by its offset from the reference clock at the last check: the
/// cluster's clock, by which claims, next runs and manual runs are written and compared. Only
/// the check itself reads the local clock.
pub struct ReferenceClock {
    pub local: SharedClock,
    pub check: Arc<ClockCheck>,
}

impl Clock for ReferenceClock {
    fn now(&self) -> DateTime<Utc> {
        self.local.now() + Duration::milliseconds(self.check.shift_ms())
    }
}

/// This process's clock as last checked against the reference clock, shared by what must not
/// act on a skewed clock (firing, claiming) and what reports it (`/healthz`, `/metrics`).
#[derive(Debug, Default)]
pub struct ClockCheck {
    offset_ms: std::sync::atomic::AtomicI64,
    /// The sure part of the offset (see [`Reading::sure_offset_ms`]).
    shift_ms: std::sync::atomic::AtomicI64,
    skewed: std::sync::atomic::AtomicBool,
}

impl ClockCheck {
    /// Records a reading against the allowed skew; answers `Some(skewed)` when the verdict
    /// changed.
    /// With `max_ms` 0 nothing is checked: the local clock stays the process's clock.
    pub fn record(&self, reading: Reading, max_ms: u64) -> Option<bool> {
        use std::sync::atomic::Ordering;
        if max_ms == 0 {
            return None;
        }
        self.offset_ms.store(reading.offset_ms, Ordering::Relaxed);
        self.shift_ms
            .store(reading.sure_offset_ms(), Ordering::Relaxed);
        let skewed = reading.beyond(max_ms);
        (self.skewed.swap(skewed, Ordering::Relaxed) != skewed).then_some(skewed)
    }

    /// How far the reference clock was ahead of this one at the last reading, in ms.
    pub fn offset_ms(&self) -> i64 {
        self.offset_ms.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// How far this process's clock is moved to the reference's.
    pub fn shift_ms(&self) -> i64 {
        self.shift_ms.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Whether the last reading was past the allowed skew: nothing is fired or claimed then.
    pub fn is_skewed(&self) -> bool {
        self.skewed.load(std::sync::atomic::Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(ms: i64) -> DateTime<Utc> {
        DateTime::from_timestamp_millis(1_800_000_000_000 + ms).expect("time")
    }

    #[test]
    fn a_reading_is_taken_at_the_round_trips_midpoint() {
        let reading = Reading::of(at(0), at(30_010), at(20));
        assert_eq!(
            reading,
            Reading {
                offset_ms: 30_000,
                uncertainty_ms: 11
            }
        );
        assert_eq!(Reading::of(at(0), at(-29_990), at(20)).offset_ms, -30_000);
    }

    #[test]
    fn skew_counts_only_past_the_uncertainty() {
        let reading = |offset_ms, uncertainty_ms| Reading {
            offset_ms,
            uncertainty_ms,
        };
        assert!(!reading(600, 200).beyond(500), "maybe 400 ms off");
        assert!(reading(-800, 200).beyond(500));
    }

    #[test]
    fn a_check_tells_when_its_verdict_changes() {
        let check = ClockCheck::default();
        let off = Reading {
            offset_ms: 30_000,
            uncertainty_ms: 1,
        };
        let on = Reading {
            offset_ms: 3,
            uncertainty_ms: 1,
        };
        assert_eq!(check.record(on, 500), None);
        assert_eq!(check.record(off, 500), Some(true));
        assert!(check.is_skewed());
        assert_eq!(check.offset_ms(), 30_000);
        assert_eq!(check.record(off, 500), None);
        assert_eq!(check.record(on, 500), Some(false));
        assert!(!check.is_skewed());
    }

    #[test]
    fn the_reference_clock_is_the_local_one_moved_by_the_offset() {
        let local = ManualClock::new(at(0));
        let check = Arc::new(ClockCheck::default());
        let clock = ReferenceClock {
            local: Arc::new(local),
            check: check.clone(),
        };
        let behind = Reading {
            offset_ms: 30_000,
            uncertainty_ms: 1,
        };
        check.record(behind, 0);
        assert_eq!(clock.now(), at(0), "0: not checked, the local clock stands");
        check.record(behind, 500);
        assert_eq!(clock.now(), at(29_999), "by the sure part of the offset");
        check.record(
            Reading {
                offset_ms: -3,
                uncertainty_ms: 4,
            },
            500,
        );
        assert_eq!(clock.now(), at(0), "noise moves nothing");
    }

    #[test]
    fn only_the_sure_part_of_an_offset_counts() {
        let reading = |offset_ms, uncertainty_ms| Reading {
            offset_ms,
            uncertainty_ms,
        };
        assert_eq!(reading(30_000, 11).sure_offset_ms(), 29_989);
        assert_eq!(reading(-30_000, 11).sure_offset_ms(), -29_989);
        assert_eq!(reading(2, 3).sure_offset_ms(), 0);
        assert_eq!(reading(-3, 3).sure_offset_ms(), 0);
    }
}
