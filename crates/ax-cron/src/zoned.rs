//! Schedules in a time zone: the wall-clock search of [`next`] mapped onto
//! instants, one constant-offset segment (between two transitions) at a time.
//!
//! The DST rule:
//! - a gap (wall-clock times that do not exist, clocks jump forward): every
//!   fire in it happens once, at the first instant after the gap;
//! - an overlap (wall-clock times that happen twice, clocks fall back): an
//!   interval schedule (`*`, a range or a step in the second, minute or hour
//!   field) fires in both copies; a fixed one only in the first.
//!
//! Each wall-clock time thus stands for at most one instant per copy, every
//! instant is found once, and chaining `next_after` yields them in order.

use chrono::{DateTime, Utc};
use jiff::tz::TimeZone;

use super::next;
use super::zone::{segment_after, segment_at, Segment};
use super::CronSchedule;

/// See [`CronSchedule::next_after`]; instants are Unix seconds.
pub(super) fn next_after(
    s: &CronSchedule,
    tz: &TimeZone,
    after: DateTime<Utc>,
) -> Option<DateTime<Utc>> {
    let after = after.timestamp();
    let mut search = LocalSearch::new(s);
    let mut seg = segment_at(tz, after.checked_add(1)?)?;
    loop {
        match fire_in(&mut search, &seg, after) {
            InSegment::Fire(t) => return DateTime::from_timestamp(t, 0),
            InSegment::Later => seg = segment_after(tz, &seg)?,
            InSegment::Never => return None,
        }
    }
}

/// Why a fire needs a note in a preview: it was moved out of a gap (the
/// earliest wall-clock time it stands for), or it is the second copy of a
/// repeated time. `None` for an ordinary fire.
pub(super) fn note(s: &CronSchedule, tz: &TimeZone, t: i64) -> Option<String> {
    let seg = segment_at(tz, t)?;
    let (offset, before) = (seg.offset, seg.before);
    if offset > before && t == seg.start {
        let first = LocalSearch::new(s).first_from(seg.start + before)?;
        return (first < seg.start + offset)
            .then(|| format!("moved from {} (DST gap)", clock(first)));
    }
    if offset < before && t < seg.start + (before - offset) {
        return Some(format!("repeated {} (DST overlap)", clock(t + offset)));
    }
    None
}

/// Where the first fire after some instant is, seen from one segment.
enum InSegment {
    Fire(i64),
    /// In a later segment, if anywhere.
    Later,
    /// Nothing matches within the search horizon.
    Never,
}

/// The first fire strictly after `after` within `seg`.
fn fire_in(search: &mut LocalSearch, seg: &Segment, after: i64) -> InSegment {
    let (offset, before) = (seg.offset, seg.before);
    if offset > before && seg.start > after {
        // The segment opens with a gap: wall-clock times
        // `start+before..start+offset` do not exist; any fire there happens
        // once, at the segment's first instant.
        match search.first_from(seg.start + before) {
            None => return InSegment::Never,
            Some(local) if local < seg.start + offset => return InSegment::Fire(seg.start),
            Some(_) => {}
        }
    }
    // `after + 1` cannot overflow: the caller computed it.
    let mut from = (after + 1).max(seg.start) + offset;
    if offset < before && !search.schedule.interval {
        // The segment opens with the second copy of the wall-clock times
        // `start+offset..start+before`; a fixed schedule fired in the first.
        from = from.max(seg.start + before);
    }
    match search.first_from(from) {
        None => InSegment::Never,
        Some(local) if local - offset < seg.end => InSegment::Fire(local - offset),
        Some(_) => InSegment::Later,
    }
}

/// The wall-clock search over "local seconds" (wall-clock time read as if it
/// were UTC), remembering its last answer: segments without a fire ask for
/// the same one again and again (a leap-day schedule crosses ~60
/// transitions between fires), and then it costs nothing.
struct LocalSearch<'a> {
    schedule: &'a CronSchedule,
    /// `(from, hit)`: the first match at or after `from` is `hit`.
    last: Option<(i64, i64)>,
}

impl<'a> LocalSearch<'a> {
    fn new(schedule: &'a CronSchedule) -> Self {
        LocalSearch {
            schedule,
            last: None,
        }
    }

    /// The first matching wall-clock time at or after `from`.
    fn first_from(&mut self, from: i64) -> Option<i64> {
        if let Some((lo, hit)) = self.last {
            if (lo..=hit).contains(&from) {
                return Some(hit);
            }
        }
        let naive = DateTime::from_timestamp(from, 0)?.naive_utc();
        let hit = next::first_match(self.schedule, naive, 0)?
            .and_utc()
            .timestamp();
        self.last = Some((from, hit));
        Some(hit)
    }
}

/// `HH:MM` of local seconds, or `HH:MM:SS` when the seconds are not zero.
fn clock(local: i64) -> String {
    let sod = local.rem_euclid(86_400);
    let (h, m, s) = (sod / 3600, sod / 60 % 60, sod % 60);
    if s == 0 {
        format!("{h:02}:{m:02}")
    } else {
        format!("{h:02}:{m:02}:{s:02}")
    }
}

#[cfg(test)]
mod tests {
    use super::clock;

    #[test]
    fn clock_shows_seconds_only_when_set() {
        assert_eq!(clock(2 * 3600 + 30 * 60), "02:30");
        assert_eq!(clock(86_400 + 2 * 3600 + 30 * 60 + 15), "02:30:15");
        assert_eq!(clock(-60), "23:59");
    }
}
