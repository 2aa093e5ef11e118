//! The time source of the scheduler. Actors read time only through a `Clock`, so the decisions
//! they delegate to the pure modules can be driven in virtual time.

use std::sync::{Arc, Mutex};

use chrono::{DateTime, Duration, Utc};

/// The last time ax keeps or shows: the end of the year 9999, where a MySQL DATETIME ends (and
/// the tz rules of every zone but UTC).
pub const LAST_TIME: DateTime<Utc> = match DateTime::from_timestamp(253_402_300_799, 0) {
    Some(at) => at,
    None => panic!("9999-12-31T23:59:59Z"),
};

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
