//! A yearly `RRULE` (RFC 5545 section 3.3.10) of an all-day event, and the days it gives.
//! Only `FREQ=YEARLY` with `INTERVAL`, `COUNT`, `UNTIL`, `BYMONTH`, `BYMONTHDAY` and `BYDAY`
//! (counted within a month) is read: the shapes holiday calendars use. Anything else is
//! refused, so a rule is never expanded into the wrong days.

use chrono::{Datelike, Days, Months, NaiveDate, Weekday};

use super::error::Problem;
use super::values::{date, date_time};

/// The parts of a rule that are read; the rest are refused.
const READ: &str =
    "a yearly rule is read with INTERVAL, COUNT, UNTIL, BYMONTH, BYMONTHDAY and BYDAY";

/// The most of one weekday a month has.
const MAX_IN_A_MONTH: i32 = 5;

/// A yearly recurrence rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Rule {
    /// Every how many years.
    interval: usize,
    /// How many occurrences, the event's own start counted.
    count: Option<usize>,
    /// The last day an occurrence may start on.
    until: Option<NaiveDate>,
    months: Vec<u32>,
    /// Negative counts back from the month's last day.
    month_days: Vec<i32>,
    /// The weekdays, each with its ordinal in the month (`4TH`, `-1MO`) or without (every one).
    weekdays: Vec<(Option<i32>, Weekday)>,
}

impl Rule {
    /// Reads an `RRULE` value.
    pub fn parse(text: &str) -> Result<Rule, Problem> {
        let parts = parts(text)?;
        match parts.iter().find(|(name, _)| name == "FREQ") {
            Some((_, freq)) if freq == "YEARLY" => {}
            Some((_, freq)) => {
                return Err(Problem::unsupported(
                    format!("FREQ={freq}"),
                    "only yearly rules (FREQ=YEARLY) are read; list the days, or use the \
                     calendar's weekdays",
                ))
            }
            None => return Err(Problem::invalid("the RRULE has no FREQ")),
        }
        let mut rule = Rule {
            interval: 1,
            count: None,
            until: None,
            months: Vec::new(),
            month_days: Vec::new(),
            weekdays: Vec::new(),
        };
        for (name, value) in &parts {
            rule.set(name, value)?;
        }
        rule.check()?;
        Ok(rule)
    }

    /// Reads one part into the rule.
    fn set(&mut self, name: &str, value: &str) -> Result<(), Problem> {
        match name {
            "FREQ" => {}
            "INTERVAL" => self.interval = positive(name, value)?,
            "COUNT" => self.count = Some(positive(name, value)?),
            "UNTIL" => self.until = Some(until(value)?),
            "BYMONTH" => {
                let months = numbers(name, value, |n| (1..=12).contains(&n))?;
                self.months = months.into_iter().map(i32::unsigned_abs).collect();
            }
            "BYMONTHDAY" => {
                self.month_days = numbers(name, value, |n| n != 0 && n.abs() <= 31)?;
            }
            "BYDAY" => self.weekdays = weekdays(value)?,
            // WKST changes only weekly rules and BYWEEKNO, neither of which is read.
            "WKST" => {
                weekday(value)
                    .ok_or_else(|| Problem::invalid(format!("WKST={value} is not a weekday")))?;
            }
            _ => return Err(Problem::unsupported(format!("{name} in an RRULE"), READ)),
        }
        Ok(())
    }

    /// The combinations that are refused.
    fn check(&self) -> Result<(), Problem> {
        if self.count.is_some() && self.until.is_some() {
            return Err(Problem::invalid(
                "the RRULE gives both COUNT and UNTIL (RFC 5545 allows one)",
            ));
        }
        let Some(nth) = self.weekdays.iter().find_map(|(nth, _)| *nth) else {
            return Ok(());
        };
        if self.months.is_empty() {
            return Err(Problem::unsupported(
                format!("BYDAY={nth}… without BYMONTH (a weekday counted through the year)"),
                "give BYMONTH, so the weekday is counted within the month",
            ));
        }
        if !self.month_days.is_empty() {
            return Err(Problem::unsupported(
                "BYDAY with an ordinal together with BYMONTHDAY",
                READ,
            ));
        }
        if nth.abs() > MAX_IN_A_MONTH {
            return Err(Problem::invalid(format!(
                "BYDAY={nth}…: a month has at most {MAX_IN_A_MONTH} of a weekday"
            )));
        }
        Ok(())
    }

    /// The days the rule gives for an event starting on `start`, in order, through `last`:
    /// `start` first (it always counts as the first occurrence), then the rule's days after it.
    pub fn occurrences(
        &self,
        start: NaiveDate,
        last: NaiveDate,
    ) -> impl Iterator<Item = NaiveDate> + '_ {
        let last = self.until.map_or(last, |until| until.min(last));
        let years = (start.year()..=last.year()).step_by(self.interval);
        let later = years
            .flat_map(move |year| self.days_of(year, start))
            .filter(move |day| *day > start);
        std::iter::once(start)
            .chain(later)
            .take(self.count.unwrap_or(usize::MAX))
            .take_while(move |day| *day <= last)
    }

    /// The rule's days in a year, in order. What the rule does not say comes from the start:
    /// its month unless BYMONTH (or a day rule alone, which takes every month), its day of the
    /// month unless BYMONTHDAY or BYDAY.
    fn days_of(&self, year: i32, start: NaiveDate) -> Vec<NaiveDate> {
        let by_day = !self.month_days.is_empty() || !self.weekdays.is_empty();
        let months = match (self.months.is_empty(), by_day) {
            (false, _) => self.months.clone(),
            (true, true) => (1..=12).collect(),
            (true, false) => vec![start.month()],
        };
        let mut days: Vec<NaiveDate> = months
            .into_iter()
            .flat_map(|month| self.days_in(year, month, start))
            .collect();
        days.sort();
        days.dedup();
        days
    }

    /// The rule's days in one month: BYMONTHDAY (kept to BYDAY's weekdays when both are given),
    /// else BYDAY, else the start's day of the month (none in a month too short for it).
    fn days_in(&self, year: i32, month: u32, start: NaiveDate) -> Vec<NaiveDate> {
        let Some(first) = NaiveDate::from_ymd_opt(year, month, 1) else {
            return Vec::new();
        };
        let length = month_length(first);
        if !self.month_days.is_empty() {
            return self
                .month_days
                .iter()
                .map(|&day| if day > 0 { day } else { length + 1 + day })
                .filter_map(|day| nth_day(first, length, day))
                .filter(|date| {
                    self.weekdays.is_empty()
                        || self.weekdays.iter().any(|(_, w)| *w == date.weekday())
                })
                .collect();
        }
        if !self.weekdays.is_empty() {
            return self
                .weekdays
                .iter()
                .flat_map(|&(nth, weekday)| weekdays_in(first, length, nth, weekday))
                .collect();
        }
        nth_day(first, length, start.day() as i32)
            .into_iter()
            .collect()
    }
}

/// The rule's `NAME=VALUE` parts, upper-cased; a part given twice is refused.
fn parts(text: &str) -> Result<Vec<(String, String)>, Problem> {
    let mut parts: Vec<(String, String)> = Vec::new();
    for part in text.split(';').filter(|part| !part.is_empty()) {
        let (name, value) = part
            .split_once('=')
            .ok_or_else(|| Problem::invalid(format!("RRULE part `{part}` is not NAME=VALUE")))?;
        let name = name.trim().to_ascii_uppercase();
        if parts.iter().any(|(seen, _)| *seen == name) {
            return Err(Problem::invalid(format!("the RRULE gives {name} twice")));
        }
        parts.push((name, value.trim().to_ascii_uppercase()));
    }
    Ok(parts)
}

fn positive(name: &str, value: &str) -> Result<usize, Problem> {
    value
        .parse::<usize>()
        .ok()
        .filter(|n| *n > 0)
        .ok_or_else(|| Problem::invalid(format!("{name}={value} is not a whole number from 1")))
}

/// `UNTIL`'s day: a date, or the date of a date-time (an all-day occurrence starts at the
/// day's midnight, so it is within UNTIL exactly when its day is at most UNTIL's).
fn until(value: &str) -> Result<NaiveDate, Problem> {
    date(value).or_else(|| date_time(value)).ok_or_else(|| {
        Problem::invalid(format!(
            "UNTIL={value} is not a date YYYYMMDD or a date-time YYYYMMDDTHHMMSS[Z]"
        ))
    })
}

/// A comma-separated list of numbers that `fits` accepts.
fn numbers(name: &str, value: &str, fits: impl Fn(i32) -> bool) -> Result<Vec<i32>, Problem> {
    value
        .split(',')
        .map(|item| {
            item.parse::<i32>()
                .ok()
                .filter(|n| fits(*n))
                .ok_or_else(|| Problem::invalid(format!("{name}: `{item}` is out of range")))
        })
        .collect()
}

/// `BYDAY`'s list: `MO`, `4TH`, `-1MO`, `+2SU`.
fn weekdays(value: &str) -> Result<Vec<(Option<i32>, Weekday)>, Problem> {
    value
        .split(',')
        .map(|item| {
            let bad = || {
                Problem::invalid(format!(
                    "BYDAY: `{item}` is not a weekday like MO, 4TH or -1MO"
                ))
            };
            let split = item.len().checked_sub(2).ok_or_else(bad)?;
            let (nth, day) = item.split_at_checked(split).ok_or_else(bad)?;
            let weekday = weekday(day).ok_or_else(bad)?;
            let nth = match nth {
                "" => None,
                nth => Some(
                    nth.parse::<i32>()
                        .ok()
                        .filter(|n| *n != 0)
                        .ok_or_else(bad)?,
                ),
            };
            Ok((nth, weekday))
        })
        .collect()
}

fn weekday(text: &str) -> Option<Weekday> {
    const NAMES: [&str; 7] = ["MO", "TU", "WE", "TH", "FR", "SA", "SU"];
    let at = NAMES.iter().position(|name| *name == text)?;
    Weekday::try_from(at as u8).ok()
}

/// How many days the month starting on `first` has.
fn month_length(first: NaiveDate) -> i32 {
    first
        .checked_add_months(Months::new(1))
        .map_or(31, |next| (next - first).num_days() as i32)
}

/// The month's `day`th day (from 1), if it has one.
fn nth_day(first: NaiveDate, length: i32, day: i32) -> Option<NaiveDate> {
    let offset = u64::try_from(day - 1).ok()?;
    (1..=length)
        .contains(&day)
        .then(|| first.checked_add_days(Days::new(offset)))
        .flatten()
}

/// The month's days on `weekday`: all of them, or the `nth` (from the end when negative).
fn weekdays_in(
    first: NaiveDate,
    length: i32,
    nth: Option<i32>,
    weekday: Weekday,
) -> Vec<NaiveDate> {
    let from_first = (7 + weekday.num_days_from_monday() as i32
        - first.weekday().num_days_from_monday() as i32)
        % 7;
    let all: Vec<NaiveDate> = (from_first + 1..=length)
        .step_by(7)
        .filter_map(|day| nth_day(first, length, day))
        .collect();
    let picked = match nth {
        None => return all,
        Some(nth) if nth > 0 => usize::try_from(nth - 1).ok(),
        Some(nth) => all.len().checked_sub(nth.unsigned_abs() as usize),
    };
    picked
        .and_then(|at| all.get(at).copied())
        .into_iter()
        .collect()
}
