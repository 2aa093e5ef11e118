//! Times as the store keeps them: UTC, to the millisecond.

use chrono::{DateTime, NaiveDateTime, Timelike, Utc};

/// A time as stored: UTC, truncated to milliseconds (MySQL `DATETIME(3)` would round the rest,
/// and compare-and-set on `next_run_at` needs the exact stored value).
pub fn to_db(time: DateTime<Utc>) -> NaiveDateTime {
    let naive = time.naive_utc();
    let millis = naive.nanosecond() / 1_000_000 * 1_000_000;
    naive.with_nanosecond(millis).unwrap_or(naive)
}

/// A stored time, read back as UTC.
pub fn from_db(time: NaiveDateTime) -> DateTime<Utc> {
    time.and_utc()
}
