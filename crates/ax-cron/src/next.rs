//! Next-fire search: field-by-field jumps over plain integers.
//!
//! The search works on wall-clock `(year, month, day, hour, minute, second)`
//! plus the weekday of January 1st, tracked incrementally, so the hot loop
//! does no day-number conversions; chrono is touched once to read the start
//! and once to build the result. In UTC the wall clock is the answer; other
//! zones map it to instants in `zoned.rs`.

use chrono::{DateTime, Datelike, NaiveDate, NaiveDateTime, Timelike, Utc};

use super::{days, CronSchedule};

/// Years searched after the start year. The Gregorian calendar, weekdays
/// included, repeats every 400 years (146097 days = 20871 weeks), so a
/// window this long contains every (month, day, weekday) combination that
/// can ever occur: anything that fires at all is found within it.
const SEARCH_YEARS: i32 = 400;

/// Day of year (0-based) of the 1st of each month in a common year,
/// indexed by month 1..=12.
const MONTH_START: [u32; 13] = [0, 0, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334];

/// A broken-down UTC time; fields may overflow by one (e.g. second 60,
/// day 32) and the search carries them into the next-coarser field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Cursor {
    year: i32,
    month: u32,
    day: u32,
    hour: u32,
    minute: u32,
    second: u32,
}

/// See [`CronSchedule::next_after`], for a schedule in UTC.
pub(super) fn next_after_utc(s: &CronSchedule, after: DateTime<Utc>) -> Option<DateTime<Utc>> {
    // Wall-clock time is UTC time, so the search result is the answer. `naive_utc` is a plain
    // field read; `date_naive`/`time` would go through the (zero) offset arithmetic.
    Some(first_match(s, after.naive_utc(), 1)?.and_utc())
}

/// First wall-clock time matching the fields at or after `naive` plus
/// `skip` seconds (0 or 1; the sub-second part of `naive` is ignored).
#[inline(always)]
pub(super) fn first_match(
    s: &CronSchedule,
    naive: NaiveDateTime,
    skip: u32,
) -> Option<NaiveDateTime> {
    let date = naive.date();
    // Whole seconds only (a leap second's extra nanoseconds are ignored too).
    let sod = naive.time().num_seconds_from_midnight();
    let start = Cursor {
        year: date.year(),
        month: date.month(),
        day: date.day(),
        hour: sod / 3600,
        minute: sod / 60 % 60,
        // May be 60, which the search carries over.
        second: sod % 60 + skip,
    };
    let wd = date.weekday().num_days_from_sunday();
    let jan1_wd = (wd + 7 - date.ordinal0() % 7) % 7;
    let c = search(s, start, jan1_wd)?;
    // Year + ordinal is chrono's native date layout: cheaper than from_ymd.
    let ordinal = month_start(c.year, c.month) + c.day;
    NaiveDate::from_yo_opt(c.year, ordinal)?.and_hms_opt(c.hour, c.minute, c.second)
}

/// Whether the schedule fires at all (used by the parser). Any start works,
/// see [`SEARCH_YEARS`]; this is 2000-01-01T00:00:00Z, a Saturday.
pub(super) fn fires_at_all(s: &CronSchedule) -> bool {
    let start = Cursor {
        year: 2000,
        month: 1,
        day: 1,
        hour: 0,
        minute: 0,
        second: 0,
    };
    search(s, start, 6).is_some()
}

/// First fire at or after `c`; `jan1_wd` is the weekday (0 = Sunday) of
/// January 1st of `c.year`.
#[inline(always)]
fn search(s: &CronSchedule, mut c: Cursor, mut jan1_wd: u32) -> Option<Cursor> {
    let last_year = c.year + SEARCH_YEARS;

    // Each level either finds a value at or after its lower bound or bumps the
    // next-coarser field and resets the finer ones to their minimum.
    'month: loop {
        match next_bit(u64::from(s.months), c.month) {
            Some(m) => {
                if m != c.month {
                    c.month = m;
                    (c.day, c.hour, c.minute, c.second) = (1, 0, 0, 0);
                }
            }
            None => {
                jan1_wd = (jan1_wd + if is_leap(c.year) { 366 } else { 365 }) % 7;
                c.year += 1;
                if c.year > last_year {
                    return None;
                }
                c.month = s.months.trailing_zeros();
                (c.day, c.hour, c.minute, c.second) = (1, 0, 0, 0);
            }
        }
        let first_wd = (jan1_wd + month_start(c.year, c.month)) % 7;
        let len = days_in_month(is_leap(c.year), c.month);
        // Only bits 1..=len are ever set for a month of `len` days.
        let month_mask =
            u64::from(s.day_masks[first_wd as usize][(len - days::MIN_MONTH_LEN) as usize]);

        'day: loop {
            match next_bit(month_mask, c.day) {
                Some(d) => {
                    if d != c.day {
                        c.day = d;
                        (c.hour, c.minute, c.second) = (0, 0, 0);
                    }
                }
                None => {
                    // Month exhausted; `month` may become 13, which the month
                    // lookup treats as "none left this year".
                    c.month += 1;
                    (c.day, c.hour, c.minute, c.second) = (1, 0, 0, 0);
                    continue 'month;
                }
            }
            'hour: loop {
                match next_bit(u64::from(s.hours), c.hour) {
                    Some(h) => {
                        if h != c.hour {
                            c.hour = h;
                            (c.minute, c.second) = (0, 0);
                        }
                    }
                    None => {
                        c.day += 1;
                        (c.hour, c.minute, c.second) = (0, 0, 0);
                        continue 'day;
                    }
                }
                loop {
                    match next_bit(s.minutes, c.minute) {
                        Some(m) => {
                            if m != c.minute {
                                c.minute = m;
                                c.second = 0;
                            }
                        }
                        None => {
                            c.hour += 1;
                            (c.minute, c.second) = (0, 0);
                            continue 'hour;
                        }
                    }
                    match next_bit(s.seconds, c.second) {
                        Some(sec) => {
                            c.second = sec;
                            return Some(c);
                        }
                        None => {
                            c.minute += 1;
                            c.second = 0;
                        }
                    }
                }
            }
        }
    }
}

/// Lowest set bit of `mask` at position `>= from`.
#[inline]
fn next_bit(mask: u64, from: u32) -> Option<u32> {
    if from >= 64 {
        return None;
    }
    let m = mask & (u64::MAX << from);
    if m == 0 {
        None
    } else {
        Some(m.trailing_zeros())
    }
}

/// Day of year (0-based) of the 1st of `month` (1..=12).
fn month_start(year: i32, month: u32) -> u32 {
    MONTH_START[month as usize] + u32::from(month > 2 && is_leap(year))
}

fn is_leap(year: i32) -> bool {
    year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
}

fn days_in_month(leap: bool, month: u32) -> u32 {
    match month {
        2 if leap => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{Datelike, NaiveDate};

    #[test]
    fn month_tables_match_chrono() {
        for year in [1900, 1999, 2000, 2023, 2024, 2100, -4, -1] {
            for month in 1..=12u32 {
                let first = NaiveDate::from_ymd_opt(year, month, 1).unwrap();
                let leap = is_leap(year);
                assert_eq!(month_start(year, month), first.ordinal0(), "{year}-{month}");
                let next = first.checked_add_months(chrono::Months::new(1)).unwrap();
                assert_eq!(
                    i64::from(days_in_month(leap, month)),
                    (next - first).num_days()
                );
            }
        }
        // The parse-time reference start assumes 2000-01-01 is a Saturday.
        let y2k = NaiveDate::from_ymd_opt(2000, 1, 1).unwrap();
        assert_eq!(y2k.weekday().num_days_from_sunday(), 6);
    }

    #[test]
    fn leap_years() {
        assert!(is_leap(2000));
        assert!(is_leap(2024));
        assert!(!is_leap(1900));
        assert!(!is_leap(2100));
        assert!(!is_leap(2023));
        assert_eq!(days_in_month(is_leap(2000), 2), 29);
        assert_eq!(days_in_month(is_leap(1900), 2), 28);
        assert_eq!(days_in_month(is_leap(2100), 2), 28);
        assert_eq!(days_in_month(is_leap(2024), 2), 29);
    }

    #[test]
    fn next_bit_edges() {
        assert_eq!(next_bit(0b1010, 0), Some(1));
        assert_eq!(next_bit(0b1010, 2), Some(3));
        assert_eq!(next_bit(0b1010, 4), None);
        assert_eq!(next_bit(u64::MAX, 63), Some(63));
        assert_eq!(next_bit(u64::MAX, 64), None);
        assert_eq!(next_bit(u64::MAX, 200), None);
    }
}
