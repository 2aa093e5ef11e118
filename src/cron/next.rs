//! Next-fire search: field-by-field jumps over plain integers.
//!
//! The search works on `(year, month, day, hour, minute, second)` with our
//! own calendar arithmetic and converts to `DateTime<Utc>` once at the end;
//! chrono's calendar types are comparatively slow in a hot loop.

use chrono::{DateTime, Utc};

use super::CronSchedule;

const SECS_PER_DAY: i64 = 86_400;

/// Years searched after the start year. The Gregorian calendar, weekdays
/// included, repeats every 400 years (146097 days = 20871 weeks), so a
/// window this long contains every (month, day, weekday) combination that
/// can ever occur: anything that fires at all is found within it.
const SEARCH_YEARS: i64 = 400;

/// Reference start for the parse-time "does it ever fire" check:
/// 2000-01-01T00:00:00Z (any instant works, see [`SEARCH_YEARS`]).
const REFERENCE_SECS: i64 = 946_684_800;

/// See [`CronSchedule::next_after`].
pub(super) fn next_after(s: &CronSchedule, after: DateTime<Utc>) -> Option<DateTime<Utc>> {
    // `timestamp()` floors, so the sub-second part is dropped and +1 gives
    // the first whole second strictly after `after`.
    next_from_secs(s, after.timestamp().checked_add(1)?)
}

/// Whether the schedule fires at all (used by the parser).
pub(super) fn first_fire_from_reference(s: &CronSchedule) -> Option<()> {
    search(s, REFERENCE_SECS).map(|_| ())
}

/// First fire at or after Unix second `t`.
fn next_from_secs(s: &CronSchedule, t: i64) -> Option<DateTime<Utc>> {
    let secs = search(s, t)?;
    DateTime::from_timestamp(secs, 0)
}

/// First fire at or after Unix second `t`, as Unix seconds.
fn search(s: &CronSchedule, t: i64) -> Option<i64> {
    let days = t.div_euclid(SECS_PER_DAY);
    let sod = t.rem_euclid(SECS_PER_DAY) as u32;
    let (mut year, mut month, mut day) = civil_from_days(days);
    let mut hour = sod / 3600;
    let mut minute = sod / 60 % 60;
    let mut second = sod % 60;
    let last_year = year + SEARCH_YEARS;

    // Each level either finds a value at or after its lower bound or bumps the
    // next-coarser field and resets the finer ones to their minimum.
    'month: loop {
        match next_bit(u64::from(s.months), month) {
            Some(m) => {
                if m != month {
                    month = m;
                    (day, hour, minute, second) = (1, 0, 0, 0);
                }
            }
            None => {
                year += 1;
                if year > last_year {
                    return None;
                }
                month = s.months.trailing_zeros();
                (day, hour, minute, second) = (1, 0, 0, 0);
            }
        }
        let first_day = days_from_civil(year, month, 1);
        let first_wd = weekday(first_day);
        // Bits 1..=days_in_month; bit 0 is never set in day_masks.
        let month_mask =
            u64::from(s.day_masks[first_wd as usize]) & ((2u64 << days_in_month(year, month)) - 1);

        'day: loop {
            match next_bit(month_mask, day) {
                Some(d) => {
                    if d != day {
                        day = d;
                        (hour, minute, second) = (0, 0, 0);
                    }
                }
                None => {
                    // Month exhausted; `month` may become 13, which the month
                    // lookup treats as "none left this year".
                    month += 1;
                    (day, hour, minute, second) = (1, 0, 0, 0);
                    continue 'month;
                }
            }
            'hour: loop {
                match next_bit(u64::from(s.hours), hour) {
                    Some(h) => {
                        if h != hour {
                            hour = h;
                            (minute, second) = (0, 0);
                        }
                    }
                    None => {
                        day += 1;
                        (hour, minute, second) = (0, 0, 0);
                        continue 'day;
                    }
                }
                loop {
                    match next_bit(s.minutes, minute) {
                        Some(m) => {
                            if m != minute {
                                minute = m;
                                second = 0;
                            }
                        }
                        None => {
                            hour += 1;
                            (minute, second) = (0, 0);
                            continue 'hour;
                        }
                    }
                    match next_bit(s.seconds, second) {
                        Some(sec) => {
                            let secs_of_day = i64::from(hour * 3600 + minute * 60 + sec);
                            return Some(
                                (first_day + i64::from(day) - 1) * SECS_PER_DAY + secs_of_day,
                            );
                        }
                        None => {
                            minute += 1;
                            second = 0;
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

fn is_leap(year: i64) -> bool {
    year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
}

fn days_in_month(year: i64, month: u32) -> u32 {
    match month {
        2 if is_leap(year) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Weekday of a day number (days since 1970-01-01), 0 = Sunday.
fn weekday(days: i64) -> u32 {
    // 1970-01-01 was a Thursday.
    (days + 4).rem_euclid(7) as u32
}

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm).
fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    // Shift the year to start in March so the leap day is last.
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = i64::from((month + 9) % 12);
    let doy = (153 * mp + 2) / 5 + i64::from(day) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Inverse of [`days_from_civil`].
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{Datelike, NaiveDate};

    #[test]
    fn calendar_math_matches_chrono() {
        let epoch = NaiveDate::from_ymd_opt(1970, 1, 1).unwrap();
        // Every day over a bit more than one 400-year cycle, plus far dates.
        let ranges = [
            (-200_000i64, -50_000i64),
            (-1000, 150_000),
            (3_000_000, 3_001_000),
        ];
        for (lo, hi) in ranges {
            for days in lo..hi {
                let date = epoch + chrono::Duration::days(days);
                let (y, m, d) = civil_from_days(days);
                assert_eq!(
                    (y, m, d),
                    (i64::from(date.year()), date.month(), date.day())
                );
                assert_eq!(days_from_civil(y, m, d), days);
                assert_eq!(weekday(days), date.weekday().num_days_from_sunday());
                if d == 1 {
                    let next = if m == 12 {
                        NaiveDate::from_ymd_opt(date.year() + 1, 1, 1)
                    } else {
                        NaiveDate::from_ymd_opt(date.year(), m + 1, 1)
                    }
                    .unwrap();
                    assert_eq!(i64::from(days_in_month(y, m)), (next - date).num_days());
                }
            }
        }
    }

    #[test]
    fn leap_years() {
        assert!(is_leap(2000));
        assert!(is_leap(2024));
        assert!(!is_leap(1900));
        assert!(!is_leap(2100));
        assert!(!is_leap(2023));
        assert_eq!(days_in_month(2000, 2), 29);
        assert_eq!(days_in_month(1900, 2), 28);
        assert_eq!(days_in_month(2100, 2), 28);
        assert_eq!(days_in_month(2024, 2), 29);
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
