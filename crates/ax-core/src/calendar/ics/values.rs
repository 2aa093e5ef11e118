//! iCalendar's date values.

use chrono::{NaiveDate, NaiveTime};

/// A date `YYYYMMDD`.
pub(super) fn date(text: &str) -> Option<NaiveDate> {
    if text.len() != 8 || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    NaiveDate::parse_from_str(text, "%Y%m%d").ok()
}

/// The date of a date-time `YYYYMMDDTHHMMSS`, UTC (`Z`) or not.
pub(super) fn date_time(text: &str) -> Option<NaiveDate> {
    let (day, time) = text.split_once(['T', 't'])?;
    let time = time.strip_suffix(['Z', 'z']).unwrap_or(time);
    let time_fits = time.len() == 6
        && time.bytes().all(|b| b.is_ascii_digit())
        && NaiveTime::parse_from_str(time, "%H%M%S").is_ok();
    date(day).filter(|_| time_fits)
}
