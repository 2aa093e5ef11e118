//! Calendars: named sets of days off (dates, date ranges, weekdays), and what a task's schedule
//! does with a fire whose day is off (leave it out, or move it to the nearest open day). The
//! days are matched in the task's time zone; the schedule that applies them is
//! [`schedule::Schedule`], `ics` reads iCalendar files into a calendar.

pub mod ics;
pub mod schedule;
#[cfg(test)]
mod tests;

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use chrono::{Datelike, NaiveDate, Weekday};
use serde::{Deserialize, Serialize};

use crate::ids::CalendarName;

/// Longest calendar name.
pub const MAX_NAME_CHARS: usize = 64;
/// Most single dates a calendar holds.
pub const MAX_DATES: usize = 5_000;
/// Most date ranges a calendar holds.
pub const MAX_RANGES: usize = 1_000;
/// Most calendars a task excludes.
pub const MAX_EXCLUDED: usize = 16;
/// The first and last years a calendar's days may be in.
pub const YEARS: (i32, i32) = (1970, 9999);

crate::text_enum! {
    /// What a task does with a fire whose day is off: `SKIP` leaves it out (no run);
    /// `PREVIOUS_OPEN_DAY` and `NEXT_OPEN_DAY` fire it at the same wall-clock time on the
    /// nearest open day before or after, once however many fires move onto one time.
    CalendarPolicy {
        Skip => "SKIP",
        PreviousOpenDay => "PREVIOUS_OPEN_DAY",
        NextOpenDay => "NEXT_OPEN_DAY",
    }
}

/// Why a calendar or a task's calendars are refused, naming the part at fault.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CalendarError {
    #[error("{field}: {message}")]
    Invalid { field: String, message: String },
}

impl CalendarError {
    fn invalid(field: impl Into<String>, message: impl Into<String>) -> Self {
        CalendarError::Invalid {
            field: field.into(),
            message: message.into(),
        }
    }

    /// The part of the body at fault (`dates[2]`, `exclude`).
    pub fn field(&self) -> &str {
        match self {
            CalendarError::Invalid { field, .. } => field,
        }
    }

    /// What is wrong with it.
    pub fn message(&self) -> &str {
        match self {
            CalendarError::Invalid { message, .. } => message,
        }
    }
}

/// A calendar's name, checked: 1 to 64 of `a-z 0-9 _ . -`.
pub fn name(text: &str) -> Result<CalendarName, CalendarError> {
    // `.` and `..` would be path segments in `/api/calendars/{name}`.
    let fits = !text.is_empty()
        && !text.bytes().all(|b| b == b'.')
        && text.chars().count() <= MAX_NAME_CHARS
        && text
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"_.-".contains(&b));
    if fits {
        Ok(CalendarName::from(text))
    } else {
        Err(CalendarError::invalid(
            "name",
            format!(
                "a calendar's name is 1 to {MAX_NAME_CHARS} of a-z 0-9 _ . -, not dots alone \
                 (got `{text}`)"
            ),
        ))
    }
}

/// From one date to another, both included.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct DateRange {
    pub from: NaiveDate,
    pub to: NaiveDate,
}

/// The days a calendar holds: single dates, ranges and days of the week. Its JSON is the API's
/// body: `{"dates": ["2026-12-25"], "ranges": [{"from": …, "to": …}], "weekdays": ["SAT"]}`.
#[derive(
    Debug,
    Clone,
    Default,
    PartialEq,
    Eq,
    Serialize,
    Deserialize,
    diesel::expression::AsExpression,
    diesel::deserialize::FromSqlRow,
)]
#[diesel(sql_type = diesel::sql_types::Text)]
#[serde(deny_unknown_fields)]
pub struct Calendar {
    #[serde(default)]
    pub dates: BTreeSet<NaiveDate>,
    #[serde(default)]
    pub ranges: Vec<DateRange>,
    #[serde(default, with = "weekday_names")]
    pub weekdays: BTreeSet<Weekday3>,
}

/// A day of the week, ordered Monday first, named by its three letters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Weekday3(pub Weekday);

impl Weekday3 {
    pub const NAMES: [&'static str; 7] = ["MON", "TUE", "WED", "THU", "FRI", "SAT", "SUN"];

    pub fn name(self) -> &'static str {
        Self::NAMES[self.0.num_days_from_monday() as usize]
    }

    pub fn parse(text: &str) -> Option<Self> {
        let at = Self::NAMES
            .iter()
            .position(|name| name.eq_ignore_ascii_case(text))?;
        Some(Weekday3(Weekday::try_from(at as u8).ok()?))
    }
}

impl PartialOrd for Weekday3 {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Weekday3 {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0
            .num_days_from_monday()
            .cmp(&other.0.num_days_from_monday())
    }
}

mod weekday_names {
    use std::collections::BTreeSet;

    use serde::de::Error;
    use serde::{Deserialize, Deserializer, Serializer};

    use super::Weekday3;

    pub fn serialize<S: Serializer>(days: &BTreeSet<Weekday3>, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(days.iter().map(|day| day.name()))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<BTreeSet<Weekday3>, D::Error> {
        Vec::<String>::deserialize(d)?
            .iter()
            .map(|name| {
                Weekday3::parse(name).ok_or_else(|| {
                    D::Error::custom(format!(
                        "`{name}` is not a weekday: MON, TUE, WED, THU, FRI, SAT or SUN"
                    ))
                })
            })
            .collect()
    }
}

crate::json_text!(Calendar, "calendar");

impl Calendar {
    /// The stored text: its JSON.
    pub fn to_text(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// Reads a calendar's JSON body, naming the part at fault.
    pub fn from_json(body: &serde_json::Value) -> Result<Calendar, CalendarError> {
        let Some(object) = body.as_object() else {
            return Err(CalendarError::invalid(
                "body",
                "a calendar is a JSON object",
            ));
        };
        for key in object.keys() {
            if !["dates", "ranges", "weekdays"].contains(&key.as_str()) {
                return Err(CalendarError::invalid(
                    key.as_str(),
                    "unknown field: a calendar has dates, ranges and weekdays",
                ));
            }
        }
        for key in ["dates", "ranges", "weekdays"] {
            let value = object.get(key).unwrap_or(&serde_json::Value::Null);
            if !value.is_null() && !value.is_array() {
                return Err(CalendarError::invalid(key, "must be a list"));
            }
            for (at, item) in value.as_array().into_iter().flatten().enumerate() {
                check_item(key, at, item)?;
            }
        }
        let calendar: Calendar = serde_json::from_value(serde_json::Value::Object(
            object
                .iter()
                .filter(|(_, value)| !value.is_null())
                .map(|(key, value)| (key.clone(), value.clone()))
                .collect(),
        ))
        .map_err(|err| CalendarError::invalid("body", err.to_string()))?;
        calendar.check()?;
        Ok(calendar)
    }

    /// Checks the bounds: counts, years, ranges in order.
    pub fn check(&self) -> Result<(), CalendarError> {
        if self.dates.len() > MAX_DATES {
            return Err(CalendarError::invalid(
                "dates",
                format!("at most {MAX_DATES} dates"),
            ));
        }
        if self.ranges.len() > MAX_RANGES {
            return Err(CalendarError::invalid(
                "ranges",
                format!("at most {MAX_RANGES} ranges"),
            ));
        }
        if let Some(date) = self.dates.iter().find(|date| !in_years(**date)) {
            return Err(CalendarError::invalid("dates", out_of_years(*date)));
        }
        for (at, range) in self.ranges.iter().enumerate() {
            let field = format!("ranges[{at}]");
            if let Some(outside) = [range.from, range.to]
                .into_iter()
                .find(|day| !in_years(*day))
            {
                return Err(CalendarError::invalid(field, out_of_years(outside)));
            }
            if range.from > range.to {
                return Err(CalendarError::invalid(
                    field,
                    format!("from {} is after to {}", range.from, range.to),
                ));
            }
        }
        Ok(())
    }

    /// Whether `day` is off in this calendar.
    pub fn holds(&self, day: NaiveDate) -> bool {
        self.weekdays.contains(&Weekday3(day.weekday()))
            || self.dates.contains(&day)
            || self.range_holding(day).is_some()
    }

    /// The last day of a range holding `day`, the furthest if several do.
    fn range_holding(&self, day: NaiveDate) -> Option<NaiveDate> {
        self.ranges
            .iter()
            .filter(|range| range.from <= day && day <= range.to)
            .map(|range| range.to)
            .max()
    }

    /// The first day of a range holding `day`, the earliest if several do.
    fn range_start_holding(&self, day: NaiveDate) -> Option<NaiveDate> {
        self.ranges
            .iter()
            .filter(|range| range.from <= day && day <= range.to)
            .map(|range| range.from)
            .min()
    }

    /// How many days it names, for lists: dates, plus the days of its ranges.
    pub fn day_count(&self) -> i64 {
        let ranged: i64 = self
            .ranges
            .iter()
            .map(|range| (range.to - range.from).num_days() + 1)
            .sum();
        self.dates.len() as i64 + ranged
    }
}

fn in_years(date: NaiveDate) -> bool {
    (YEARS.0..=YEARS.1).contains(&date.year())
}

fn out_of_years(date: NaiveDate) -> String {
    format!("{date} is outside the years {} to {}", YEARS.0, YEARS.1)
}

/// Names the first bad item of a list, with what it should be.
fn check_item(key: &str, at: usize, item: &serde_json::Value) -> Result<(), CalendarError> {
    let field = format!("{key}[{at}]");
    let date = |value: Option<&serde_json::Value>| {
        value
            .and_then(|v| v.as_str())
            .is_some_and(|text| text.parse::<NaiveDate>().is_ok())
    };
    let fits = match key {
        "dates" => date(Some(item)),
        "ranges" => item
            .as_object()
            .is_some_and(|o| o.len() == 2 && date(o.get("from")) && date(o.get("to"))),
        _ => item.as_str().and_then(Weekday3::parse).is_some(),
    };
    if fits {
        return Ok(());
    }
    let expected = match key {
        "dates" => "a date, YYYY-MM-DD",
        "ranges" => "{\"from\": YYYY-MM-DD, \"to\": YYYY-MM-DD}",
        _ => "a weekday: MON, TUE, WED, THU, FRI, SAT or SUN",
    };
    Err(CalendarError::invalid(
        field,
        format!("must be {expected} (got {item})"),
    ))
}

/// A task's calendars: the ones whose days it does not fire on, and what it does instead. Its
/// JSON is the task field `calendars`: `{"exclude": ["de-holidays"], "policy": "SKIP"}`.
#[derive(
    Debug,
    Clone,
    PartialEq,
    Eq,
    Serialize,
    Deserialize,
    diesel::expression::AsExpression,
    diesel::deserialize::FromSqlRow,
)]
#[diesel(sql_type = diesel::sql_types::Text)]
pub struct TaskCalendars {
    pub exclude: Vec<CalendarName>,
    pub policy: CalendarPolicy,
}

crate::json_text!(TaskCalendars, "calendars");

impl TaskCalendars {
    /// The stored text.
    pub fn to_text(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// Reads the task field, naming the part at fault (`calendars.exclude[1]`); `null` and an
    /// empty `exclude` are no calendars.
    pub fn from_json(value: &serde_json::Value) -> Result<Option<TaskCalendars>, CalendarError> {
        const FIELD: &str = "calendars";
        if value.is_null() {
            return Ok(None);
        }
        let Some(object) = value.as_object() else {
            return Err(CalendarError::invalid(
                FIELD,
                "must be an object {\"exclude\": [names], \"policy\": SKIP, PREVIOUS_OPEN_DAY or NEXT_OPEN_DAY}",
            ));
        };
        if let Some(key) = object
            .keys()
            .find(|key| !["exclude", "policy"].contains(&key.as_str()))
        {
            return Err(CalendarError::invalid(
                format!("{FIELD}.{key}"),
                "unknown field: calendars has exclude and policy",
            ));
        }
        let policy = match object.get("policy") {
            None | Some(serde_json::Value::Null) => CalendarPolicy::Skip,
            Some(value) => value
                .as_str()
                .and_then(CalendarPolicy::parse)
                .ok_or_else(|| {
                    CalendarError::invalid(
                        format!("{FIELD}.policy"),
                        format!("must be {} (got {value})", CalendarPolicy::choices()),
                    )
                })?,
        };
        let names = match object.get("exclude") {
            None | Some(serde_json::Value::Null) => Vec::new(),
            Some(serde_json::Value::Array(names)) => names.clone(),
            Some(_) => {
                return Err(CalendarError::invalid(
                    format!("{FIELD}.exclude"),
                    "must be a list of calendar names",
                ))
            }
        };
        if names.len() > MAX_EXCLUDED {
            return Err(CalendarError::invalid(
                format!("{FIELD}.exclude"),
                format!("at most {MAX_EXCLUDED} calendars"),
            ));
        }
        let mut exclude: Vec<CalendarName> = Vec::new();
        for (at, item) in names.iter().enumerate() {
            let field = format!("{FIELD}.exclude[{at}]");
            let text = item
                .as_str()
                .ok_or_else(|| CalendarError::invalid(&field, "must be a calendar's name"))?;
            let checked =
                name(text).map_err(|err| CalendarError::invalid(&field, err.message()))?;
            if !exclude.contains(&checked) {
                exclude.push(checked);
            }
        }
        Ok((!exclude.is_empty()).then_some(TaskCalendars { exclude, policy }))
    }
}

/// A task's days off, resolved: the calendars it excludes, with their days, and its policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DaysOff {
    pub calendars: Vec<(CalendarName, Arc<Calendar>)>,
    pub policy: CalendarPolicy,
}

/// Calendars by name, as read for some tasks: what resolves a task's `calendars` to its days
/// off.
#[derive(Debug, Clone, Default)]
pub struct CalendarBook(HashMap<CalendarName, Arc<Calendar>>);

impl FromIterator<(CalendarName, Calendar)> for CalendarBook {
    fn from_iter<I: IntoIterator<Item = (CalendarName, Calendar)>>(items: I) -> Self {
        CalendarBook(
            items
                .into_iter()
                .map(|(name, calendar)| (name, Arc::new(calendar)))
                .collect(),
        )
    }
}

impl CalendarBook {
    /// The days off of a task with these calendars. One deleted under the task (a delete
    /// racing the task's write, which both check) holds no day.
    pub fn days_off(&self, calendars: Option<&TaskCalendars>) -> Option<Arc<DaysOff>> {
        let calendars = calendars?;
        let found = calendars
            .exclude
            .iter()
            .filter_map(|name| Some((name.clone(), self.0.get(name)?.clone())))
            .collect();
        Some(Arc::new(DaysOff {
            calendars: found,
            policy: calendars.policy,
        }))
    }

    /// The first calendar of `calendars` the book does not hold, with its place in `exclude`.
    pub fn first_missing<'a>(
        &self,
        calendars: &'a TaskCalendars,
    ) -> Option<(usize, &'a CalendarName)> {
        calendars
            .exclude
            .iter()
            .enumerate()
            .find(|(_, name)| !self.0.contains_key(*name))
    }
}

/// Longest run of days off the search walks through: a fire whose nearest open day is
/// further is left out, and a schedule whose days are all off this long stops.
pub const MAX_DAYS_OFF_IN_A_ROW: i64 = 3_660;

impl DaysOff {
    /// The first calendar holding `day`, if it is off.
    pub fn holder(&self, day: NaiveDate) -> Option<&CalendarName> {
        self.calendars
            .iter()
            .find(|(_, calendar)| calendar.holds(day))
            .map(|(name, _)| name)
    }

    pub fn is_off(&self, day: NaiveDate) -> bool {
        self.holder(day).is_some()
    }

    /// `day` if it is open, else the nearest open day after it (`None` past the search).
    pub fn open_from(&self, day: NaiveDate) -> Option<NaiveDate> {
        self.walk(day, Direction::Forward)
    }

    /// `day` if it is open, else the nearest open day before it.
    pub fn open_until(&self, day: NaiveDate) -> Option<NaiveDate> {
        self.walk(day, Direction::Back)
    }

    /// The nearest open day from `day` on in `direction`, jumping over ranges whole.
    fn walk(&self, mut day: NaiveDate, direction: Direction) -> Option<NaiveDate> {
        let start = day;
        loop {
            if (day - start).num_days().abs() > MAX_DAYS_OFF_IN_A_ROW {
                return None;
            }
            let ranged = self
                .calendars
                .iter()
                .filter_map(|(_, calendar)| match direction {
                    Direction::Forward => calendar.range_holding(day),
                    Direction::Back => calendar.range_start_holding(day),
                });
            let jump = match direction {
                Direction::Forward => ranged.max(),
                Direction::Back => ranged.min(),
            };
            day = match (jump, direction) {
                (Some(end), Direction::Forward) => end.succ_opt()?,
                (Some(start), Direction::Back) => start.pred_opt()?,
                (None, _) if self.is_off(day) => match direction {
                    Direction::Forward => day.succ_opt()?,
                    Direction::Back => day.pred_opt()?,
                },
                (None, _) => return Some(day),
            };
        }
    }
}

#[derive(Debug, Clone, Copy)]
enum Direction {
    Forward,
    Back,
}
