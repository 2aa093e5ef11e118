//! What a parsed schedule holds: the expression's fields as bitmasks, and its zone. Parsing
//! (`parse.rs`), the next-fire search (`next.rs`, `zoned.rs`) and the description
//! (`describe.rs`) read it; `mod.rs` gives it its methods.

use chrono::{DateTime, FixedOffset, Utc};

use super::days;
use super::zone::Zone;

/// A parsed, validated cron schedule, evaluated in a time zone (UTC unless
/// set with [`CronSchedule::in_zone`]).
///
/// Each field is stored as a bitmask (bit `n` set means value `n` matches),
/// so finding the next matching value is a mask plus `trailing_zeros`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CronSchedule {
    /// The trimmed expression as given by the user.
    pub(super) expr: String,
    /// Bits 0..=59.
    pub(super) seconds: u64,
    /// Bits 0..=59.
    pub(super) minutes: u64,
    /// Bits 0..=23.
    pub(super) hours: u32,
    /// Bits 1..=12.
    pub(super) months: u16,
    /// Matching days of a month (bits 1..=31), indexed by the weekday of its
    /// 1st (0 = Sunday) and its length minus 28. This folds the day-of-month
    /// and day-of-week intersection, Quartz forms included, into one
    /// precomputed mask, so the hot loop needs a single lookup per month.
    pub(super) day_masks: days::DayMasks,
    /// The day fields as parsed, for [`CronSchedule::describe`].
    pub(super) dom: days::DomSpec,
    pub(super) dow: days::DowSpec,
    /// See [`parse::Masks::interval`].
    pub(super) interval: bool,
    /// The fields match wall-clock time in this zone.
    pub(super) zone: Zone,
}

/// One fire of a schedule, for previews.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fire {
    /// The instant.
    pub utc: DateTime<Utc>,
    /// The same instant in the schedule's zone, with the offset in force.
    pub local: DateTime<FixedOffset>,
    /// Why the fire is not where the expression reads, for a DST change:
    /// `moved from 02:30 (DST gap)` (the earliest skipped wall-clock time it
    /// stands for) or `repeated 02:00 (DST overlap)` (the second copy of a
    /// repeated time); `None` for an ordinary fire.
    pub note: Option<String>,
}
