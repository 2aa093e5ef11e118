//! Cron expression parsing and next-fire computation, in UTC or a time zone.
//!
//! Expressions have 6 fields (`sec min hour day-of-month month day-of-week`)
//! or 5 (seconds omitted, meaning second 0), or are one of the macros
//! `@yearly`, `@annually`, `@monthly`, `@weekly`, `@daily`, `@midnight`,
//! `@hourly`. Each field accepts `*`, values, ranges `a-b`, steps `*/n`,
//! `a-b/n`, `a/n` (a step at most the number of values the field's `*` holds:
//! `*/60` seconds, not `*/61`), and comma lists of these; months and weekdays also accept
//! three-letter English names in any case, and `?` means `*` in the two day
//! fields. Day-of-week runs 0-7, Sunday being both 0 and 7.
//!
//! The day fields also take Quartz's forms, as items of a comma list (not in
//! ranges or steps):
//! - day-of-month `L` (the last day), `L-n` (n days before the last day,
//!   n 0-30), `nW` (the Monday-Friday day nearest day n, staying in the
//!   month; no fire in a month without day n), `LW` (the last Monday-Friday
//!   day);
//! - day-of-week `nL` (the last weekday n of the month: `5L`, `FRIL`) and
//!   `n#k` (the k-th weekday n, k 1-5: `MON#2`, `1#2`).
//!
//! `H` is not supported.
//!
//! Unlike Vixie cron, when both day-of-month and day-of-week are restricted a
//! time must match *both* (intersection), so `0 0 0 13 * FRI` fires only on
//! Friday the 13th. An expression no date ever matches is rejected.
//!
//! # Time zones
//!
//! A schedule matches wall-clock time in its [`Zone`] (UTC by default); the
//! tz database is compiled in ([`TZDATA_RELEASE`]). Where clocks change:
//! - **gap** (clocks jump forward, a wall-clock hour does not exist): every
//!   fire that falls in it happens once, at the first instant after the gap
//!   (`0 30 2 * * *` in Europe/Berlin on 2027-03-28 fires at 03:00+02:00);
//! - **overlap** (clocks fall back, an hour happens twice): an *interval*
//!   expression, one whose second, minute or hour field holds `*`, a range
//!   or a step, fires in both copies; a *fixed* one (single values or lists
//!   there) fires once, in the first copy.
//!
//! Every fire is a distinct instant, and chaining `next_after` from any
//! instant yields exactly these fires in order.
//!
//! ```
//! use ax_cron::{CronSchedule, Zone};
//! use chrono::{TimeZone, Utc};
//!
//! let s: CronSchedule = "0 30 9 * * MON-FRI".parse().unwrap();
//! let after = Utc.with_ymd_and_hms(2024, 1, 5, 10, 0, 0).unwrap(); // a Friday
//! assert_eq!(s.next_after(after), Some(Utc.with_ymd_and_hms(2024, 1, 8, 9, 30, 0).unwrap()));
//!
//! let berlin = s.in_zone(Zone::parse("Europe/Berlin").unwrap());
//! assert_eq!(berlin.next_after(after), Some(Utc.with_ymd_and_hms(2024, 1, 8, 8, 30, 0).unwrap()));
//! ```

mod days;
mod describe;
mod error;
mod next;
mod parse;
mod schedule;
#[cfg(test)]
mod tests;
mod zone;
mod zoned;

use std::fmt;
use std::str::FromStr;

use chrono::{DateTime, FixedOffset, Utc};

/// The last time ax keeps or shows: the end of the year 9999, where a MySQL DATETIME ends (and
/// the tz rules of every zone but UTC).
pub const LAST_TIME: DateTime<Utc> = match DateTime::from_timestamp(253_402_300_799, 0) {
    Some(at) => at,
    None => panic!("9999-12-31T23:59:59Z"),
};

pub use error::CronError;
pub use schedule::{CronSchedule, Fire};
pub use zone::{Zone, TZDATA_RELEASE};

impl CronSchedule {
    /// Parses and validates; rejects expressions that never fire, and steps larger than
    /// their field's range (`*/99` seconds).
    pub fn parse(expr: &str) -> Result<CronSchedule, CronError> {
        parse::parse(expr, parse::Steps::Bounded)
    }

    /// Parses an expression stored by an earlier ax, which took a step larger than its
    /// field's range as the item's first value (`*/99` seconds fired at second 0): such a
    /// stored task keeps firing as it did. Anything else is parsed as [`CronSchedule::parse`]
    /// does; every expression taken from a user goes through that one.
    pub fn parse_stored(expr: &str) -> Result<CronSchedule, CronError> {
        parse::parse(expr, parse::Steps::AsStored)
    }

    /// The same schedule, matched against wall-clock time in `zone`.
    pub fn in_zone(self, zone: Zone) -> CronSchedule {
        CronSchedule { zone, ..self }
    }

    /// The zone the fields are matched in.
    pub fn zone(&self) -> &Zone {
        &self.zone
    }

    /// First fire time strictly after `after` (sub-second part of `after`
    /// ignored; result has whole seconds, UTC).
    ///
    /// The fields match wall-clock time in the schedule's zone, with the DST
    /// rule of the [module docs](self). Returns `None` only if nothing fires
    /// within one 400-year Gregorian cycle after `after`, or past the
    /// representable range (chrono's for UTC; years -9999 to 9999 in other
    /// zones).
    pub fn next_after(&self, after: DateTime<Utc>) -> Option<DateTime<Utc>> {
        match self.zone.rules() {
            None => next::next_after_utc(self, after),
            Some(tz) => zoned::next_after(self, tz, after),
        }
    }

    /// The next `count` fires strictly after `after` (fewer if the schedule
    /// ends, see [`CronSchedule::next_after`]), with local times and notes.
    /// The list stops at the end of the year 9999 ([`LAST_TIME`]) in every
    /// zone, UTC too: no time the API could not take back is shown.
    pub fn upcoming(&self, after: DateTime<Utc>, count: usize) -> Vec<Fire> {
        let mut fires = Vec::new();
        let mut at = after;
        while fires.len() < count {
            let next = self.next_after(at).filter(|utc| *utc <= LAST_TIME);
            let Some(fire) = next.and_then(|utc| self.fire_at(utc)) else {
                break;
            };
            at = fire.utc;
            fires.push(fire);
        }
        fires
    }

    /// `utc` (a fire time) as a [`Fire`], with its local time and its DST note.
    pub fn fire_at(&self, utc: DateTime<Utc>) -> Option<Fire> {
        let t = utc.timestamp();
        let offset = i32::try_from(self.zone.offset_at(t)?).ok()?;
        Some(Fire {
            utc,
            local: utc.with_timezone(&FixedOffset::east_opt(offset)?),
            note: self.zone.rules().and_then(|tz| zoned::note(self, tz, t)),
        })
    }

    /// The schedule in plain English, for previews, e.g. `0 30 9 * * MON-FRI`
    /// is "At 09:30, Monday through Friday"; a zone other than UTC is named
    /// at the end ("… (Europe/Berlin time)").
    pub fn describe(&self) -> String {
        describe::describe(self)
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
