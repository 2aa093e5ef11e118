//! Cron expression parsing and next-fire computation (UTC).
//!
//! Expressions have 6 fields (`sec min hour day-of-month month day-of-week`)
//! or 5 (seconds omitted, meaning second 0), or are one of the macros
//! `@yearly`, `@annually`, `@monthly`, `@weekly`, `@daily`, `@midnight`,
//! `@hourly`. Each field accepts `*`, values, ranges `a-b`, steps `*/n`,
//! `a-b/n`, `a/n`, and comma lists of these; months and weekdays also accept
//! three-letter English names in any case, and `?` means `*` in the two day
//! fields.
//!
//! Unlike Vixie cron, when both day-of-month and day-of-week are restricted a
//! time must match *both* (intersection), so `0 0 0 13 * FRI` fires only on
//! Friday the 13th.
//!
//! ```
//! use ax::cron::CronSchedule;
//! use chrono::{TimeZone, Utc};
//!
//! let s: CronSchedule = "0 30 9 * * MON-FRI".parse().unwrap();
//! let after = Utc.with_ymd_and_hms(2024, 1, 5, 10, 0, 0).unwrap(); // a Friday
//! assert_eq!(s.next_after(after), Some(Utc.with_ymd_and_hms(2024, 1, 8, 9, 30, 0).unwrap()));
//! ```

mod error;
mod next;
mod parse;
#[cfg(test)]
mod tests;

use std::fmt;
use std::str::FromStr;

use chrono::{DateTime, Utc};

pub use error::CronError;

/// A parsed, validated cron schedule evaluated in UTC.
///
/// Each field is stored as a bitmask (bit `n` set means value `n` matches),
/// so finding the next matching value is a mask plus `trailing_zeros`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CronSchedule {
    /// The trimmed expression as given by the user.
    expr: String,
    /// Bits 0..=59.
    seconds: u64,
    /// Bits 0..=59.
    minutes: u64,
    /// Bits 0..=23.
    hours: u32,
    /// Bits 1..=12.
    months: u16,
    /// Matching days of a month (bits 1..=31) for a month whose first day
    /// falls on weekday `w` (0 = Sunday), indexed by `w`. This folds the
    /// day-of-month and day-of-week intersection into one precomputed mask,
    /// so the hot loop needs a single lookup per month.
    day_masks: [u32; 7],
}

impl CronSchedule {
    /// Parses and validates; rejects expressions that never fire.
    pub fn parse(expr: &str) -> Result<CronSchedule, CronError> {
        parse::parse(expr)
    }

    /// First fire time strictly after `after` (sub-second part of `after`
    /// ignored; result has whole seconds, UTC).
    ///
    /// Returns `None` only if nothing fires within one 400-year Gregorian
    /// cycle after `after` (or chrono's representable range ends).
    pub fn next_after(&self, after: DateTime<Utc>) -> Option<DateTime<Utc>> {
        next::next_after(self, after)
    }

    /// The expression as given by the user (trimmed).
    pub fn expression(&self) -> &str {
        &self.expr
    }
}

impl FromStr for CronSchedule {
    type Err = CronError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        CronSchedule::parse(s)
    }
}

impl fmt::Display for CronSchedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.expr)
    }
}
