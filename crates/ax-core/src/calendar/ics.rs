//! Reads iCalendar text (RFC 5545, a holiday calendar's `.ics` file) into a [`Calendar`]: each
//! all-day `VEVENT` gives its days, a one-day event a date, a longer one a range, and a yearly
//! `RRULE` repeats them (see [`rule`]) through the last year asked for. `EXDATE` leaves
//! occurrences out; an event with a `RECURRENCE-ID` moves one (or, cancelled, drops it).
//!
//! What cannot be read exactly is refused, naming the event and its line: events at a time of
//! day, other rules than yearly ones, `RDATE`. A calendar read is never wrong in silence.

mod error;
mod lines;
mod rule;
#[cfg(test)]
mod tests;
mod values;

use std::collections::{BTreeMap, BTreeSet};

use chrono::{Days, NaiveDate};

use super::{Calendar, DateRange, MAX_DATES, MAX_RANGES, YEARS};
pub use error::{IcsError, Problem};
use lines::ContentLine;
use rule::Rule;
use values::{date, date_time};

/// The days off of an iCalendar text, from each event's start through December 31 of
/// `until_year` (days before [`YEARS`]`.0` left out).
pub fn read(text: &str, until_year: i32) -> Result<Calendar, IcsError> {
    let mut calendar = CalendarBuilder::through(until_year)?;
    let blocks = event_blocks(lines::content_lines(text)?)?;
    if blocks.is_empty() {
        return Err(IcsError::NoEvents);
    }
    let events = blocks
        .iter()
        .map(Event::read)
        .collect::<Result<Vec<_>, _>>()?;
    let moved = moved_occurrences(&events);
    for event in events.iter().filter(|event| !event.cancelled) {
        // A series loses the occurrences replaced; the events replacing them keep their day.
        let moved = match (&event.replaces, &event.uid) {
            (None, Some(uid)) => moved.get(uid.as_str()),
            _ => None,
        };
        calendar.add_event(event, moved)?;
    }
    calendar.build()
}

/// The occurrences that events with a `RECURRENCE-ID` replace, by the `UID` of their series.
fn moved_occurrences(events: &[Event]) -> BTreeMap<&str, BTreeSet<NaiveDate>> {
    let mut moved: BTreeMap<&str, BTreeSet<NaiveDate>> = BTreeMap::new();
    for event in events {
        if let (Some(day), Some(uid)) = (event.replaces, &event.uid) {
            moved.entry(uid.as_str()).or_default().insert(day);
        }
    }
    moved
}

/// The lines of one `VEVENT` (not those of a component inside it, such as a `VALARM`).
struct Block {
    /// The line of its `BEGIN:VEVENT`.
    line: usize,
    lines: Vec<ContentLine>,
}

/// The `VEVENT`s of the text, its components checked to open and close in order (that it
/// starts with `BEGIN:VCALENDAR` is checked as its lines are read).
fn event_blocks(lines: Vec<ContentLine>) -> Result<Vec<Block>, IcsError> {
    let mut open: Vec<(String, usize)> = Vec::new();
    let mut blocks: Vec<Block> = Vec::new();
    for line in lines {
        match line.name.as_str() {
            "BEGIN" => begin(&mut open, &mut blocks, &line)?,
            "END" => end(&mut open, &line)?,
            _ if in_event(&open) => {
                if let Some(block) = blocks.last_mut() {
                    block.lines.push(line);
                }
            }
            _ => {}
        }
    }
    match open.last() {
        Some((name, line)) => Err(IcsError::Line {
            line: *line,
            problem: format!("BEGIN:{name} has no END:{name}"),
        }),
        None => Ok(blocks),
    }
}

fn in_event(open: &[(String, usize)]) -> bool {
    open.last().is_some_and(|(name, _)| name == "VEVENT")
}

/// Opens a component; a `VEVENT` only directly in a `VCALENDAR`.
fn begin(
    open: &mut Vec<(String, usize)>,
    blocks: &mut Vec<Block>,
    line: &ContentLine,
) -> Result<(), IcsError> {
    let name = line.value.trim().to_ascii_uppercase();
    if name == "VEVENT" {
        let parent = open.last().map(|(parent, _)| parent.as_str());
        if parent != Some("VCALENDAR") {
            return Err(IcsError::Line {
                line: line.line,
                problem: format!(
                    "BEGIN:VEVENT inside {}: an event is a part of a VCALENDAR",
                    parent.map_or("nothing".to_string(), |parent| format!("BEGIN:{parent}"))
                ),
            });
        }
        blocks.push(Block {
            line: line.line,
            lines: Vec::new(),
        });
    }
    open.push((name, line.line));
    Ok(())
}

/// Closes the component opened last.
fn end(open: &mut Vec<(String, usize)>, line: &ContentLine) -> Result<(), IcsError> {
    let name = line.value.trim().to_ascii_uppercase();
    match open.pop() {
        Some((opened, _)) if opened == name => Ok(()),
        Some((opened, at)) => Err(IcsError::Line {
            line: line.line,
            problem: format!("END:{name}, but BEGIN:{opened} at line {at} is still open"),
        }),
        None => Err(IcsError::Line {
            line: line.line,
            problem: format!("END:{name} without its BEGIN"),
        }),
    }
}

/// An all-day event, read.
#[derive(Debug)]
struct Event {
    uid: Option<String>,
    start: NaiveDate,
    /// In days, from 1.
    length: u64,
    rule: Option<Rule>,
    /// Its `EXDATE`s.
    except: BTreeSet<NaiveDate>,
    /// The occurrence of its series (same `UID`) it takes the place of: its `RECURRENCE-ID`.
    replaces: Option<NaiveDate>,
    cancelled: bool,
}

impl Event {
    fn read(block: &Block) -> Result<Event, IcsError> {
        let reader = EventReader::new(block);
        reader.refuse_unread()?;
        let start_line = reader
            .once("DTSTART")?
            .ok_or_else(|| reader.fail(block.line, Problem::invalid("the event has no DTSTART")))?;
        let start = reader.day(start_line, &start_line.value)?;
        let event = Event {
            uid: reader
                .once("UID")?
                .map(|line| line.value.trim().to_string()),
            start,
            length: reader.length(start)?,
            rule: reader.rule()?,
            except: reader.except()?,
            replaces: reader.replaces()?,
            cancelled: reader
                .once("STATUS")?
                .is_some_and(|line| line.value.trim().eq_ignore_ascii_case("CANCELLED")),
        };
        reader.check_replacement(&event)?;
        Ok(event)
    }

    /// The days its occurrences start on, in order, through `last`.
    fn days(&self, last: NaiveDate) -> Box<dyn Iterator<Item = NaiveDate> + '_> {
        match &self.rule {
            Some(rule) => Box::new(rule.occurrences(self.start, last)),
            None => Box::new(std::iter::once(self.start)),
        }
    }
}

/// Reads the properties of one event, naming it in every error.
struct EventReader<'a> {
    block: &'a Block,
    summary: Option<String>,
}

impl<'a> EventReader<'a> {
    fn new(block: &'a Block) -> Self {
        let summary = block
            .lines
            .iter()
            .find(|line| line.name == "SUMMARY")
            .map(|line| lines::unescape(&line.value));
        EventReader { block, summary }
    }

    fn fail(&self, line: usize, problem: Problem) -> IcsError {
        IcsError::Event {
            line,
            summary: self.summary.clone(),
            problem,
        }
    }

    /// The property, if given; given twice is an error.
    fn once(&self, name: &str) -> Result<Option<&'a ContentLine>, IcsError> {
        let mut given = self.block.lines.iter().filter(|line| line.name == name);
        let first = given.next();
        match (first, given.next()) {
            (Some(first), Some(second)) => Err(self.fail(
                second.line,
                Problem::invalid(format!(
                    "{name} is given twice (first at line {})",
                    first.line
                )),
            )),
            (first, _) => Ok(first),
        }
    }

    /// Refuses the properties that add days in ways not read.
    fn refuse_unread(&self) -> Result<(), IcsError> {
        let refused = |line: &ContentLine| match line.name.as_str() {
            "RDATE" => Some("list the extra days as events of their own"),
            "EXRULE" => Some("list the days left out with EXDATE"),
            _ => None,
        };
        match self
            .block
            .lines
            .iter()
            .find_map(|line| Some((line, refused(line)?)))
        {
            Some((line, hint)) => {
                Err(self.fail(line.line, Problem::unsupported(line.name.clone(), hint)))
            }
            None => Ok(()),
        }
    }

    /// The day of a date value of `line` (one item of its list in `text`).
    fn day(&self, line: &ContentLine, text: &str) -> Result<NaiveDate, IcsError> {
        let text = text.trim();
        let kind = line.param("VALUE").map(str::to_ascii_uppercase);
        let problem = match (kind.as_deref(), date(text), date_time(text).is_some()) {
            (Some("DATE") | None, Some(day), _) => return Ok(day),
            (Some("DATE-TIME") | None, None, true) if line.name == "DTSTART" => {
                Problem::unsupported(
                    format!("an event at a time of day (DTSTART:{text})"),
                    "only all-day events (DTSTART;VALUE=DATE:YYYYMMDD) are read as days off",
                )
            }
            (Some("DATE-TIME") | None, None, true) => Problem::invalid(format!(
                "{}:{text} has a time of day, but the event's DTSTART is a date",
                line.name
            )),
            (Some(kind), _, _) if kind != "DATE" && kind != "DATE-TIME" => Problem::unsupported(
                format!("{};VALUE={kind}", line.name),
                "a day is given as VALUE=DATE:YYYYMMDD",
            ),
            _ => Problem::invalid(format!("{}: `{text}` is not a date YYYYMMDD", line.name)),
        };
        Err(self.fail(line.line, problem))
    }

    /// How many days each occurrence lasts: to `DTEND` (the day after the last), for
    /// `DURATION`, or one day.
    fn length(&self, start: NaiveDate) -> Result<u64, IcsError> {
        match (self.once("DTEND")?, self.once("DURATION")?) {
            (Some(_), Some(duration)) => Err(self.fail(
                duration.line,
                Problem::invalid("both DTEND and DURATION are given (RFC 5545 allows one)"),
            )),
            (Some(end), None) => {
                let end_day = self.day(end, &end.value)?;
                let days = (end_day - start).num_days();
                u64::try_from(days)
                    .ok()
                    .filter(|days| *days > 0)
                    .ok_or_else(|| {
                        self.fail(
                            end.line,
                            Problem::invalid(format!(
                            "DTEND {end_day} is not after DTSTART {start} (DTEND is the day after \
                             the last: a one-day event on {start} ends on {})",
                            start.succ_opt().unwrap_or(start)
                        )),
                        )
                    })
            }
            (None, Some(duration)) => {
                duration_days(duration.value.trim()).map_err(|p| self.fail(duration.line, p))
            }
            (None, None) => Ok(1),
        }
    }

    fn rule(&self) -> Result<Option<Rule>, IcsError> {
        self.once("RRULE")?
            .map(|line| Rule::parse(line.value.trim()).map_err(|p| self.fail(line.line, p)))
            .transpose()
    }

    /// The days of every `EXDATE` (each may list several).
    fn except(&self) -> Result<BTreeSet<NaiveDate>, IcsError> {
        let mut days = BTreeSet::new();
        for line in self.block.lines.iter().filter(|line| line.name == "EXDATE") {
            for item in line.value.split(',') {
                days.insert(self.day(line, item)?);
            }
        }
        Ok(days)
    }

    /// The `RECURRENCE-ID`: the occurrence this event replaces, only that one.
    fn replaces(&self) -> Result<Option<NaiveDate>, IcsError> {
        let Some(line) = self.once("RECURRENCE-ID")? else {
            return Ok(None);
        };
        if let Some(range) = line.param("RANGE") {
            return Err(self.fail(
                line.line,
                Problem::unsupported(
                    format!("RECURRENCE-ID;RANGE={range}"),
                    "an event with a RECURRENCE-ID is read as replacing one occurrence",
                ),
            ));
        }
        self.day(line, &line.value).map(Some)
    }

    /// A replacing event names its series by `UID`, and repeats no rule of its own.
    fn check_replacement(&self, event: &Event) -> Result<(), IcsError> {
        let Some(line) = self.once("RECURRENCE-ID")? else {
            return Ok(());
        };
        let problem = match (&event.uid, &event.rule) {
            (None, _) => {
                Problem::invalid("RECURRENCE-ID without a UID: which series it changes is unknown")
            }
            (_, Some(_)) => Problem::unsupported(
                "an RRULE in an event with a RECURRENCE-ID",
                "an event with a RECURRENCE-ID is read as replacing one occurrence",
            ),
            _ => return Ok(()),
        };
        Err(self.fail(line.line, problem))
    }
}

/// `P3D` or `P2W`: an all-day event lasts whole days.
fn duration_days(text: &str) -> Result<u64, Problem> {
    let bad = || {
        Problem::invalid(format!(
            "DURATION:{text} is not a number of days or weeks from 1 (P3D, P1W)"
        ))
    };
    let body = text
        .strip_prefix('+')
        .unwrap_or(text)
        .strip_prefix('P')
        .ok_or_else(bad)?;
    if body.contains('T') {
        return Err(Problem::unsupported(
            format!("DURATION:{text} (hours, minutes or seconds)"),
            "an all-day event lasts whole days (P1D, P1W)",
        ));
    }
    let split = body.len().checked_sub(1).ok_or_else(bad)?;
    let (count, unit) = body.split_at_checked(split).ok_or_else(bad)?;
    let count: u64 = count.parse().ok().filter(|n| *n > 0).ok_or_else(bad)?;
    match unit {
        "D" => Ok(count),
        "W" => count.checked_mul(7).ok_or_else(bad),
        _ => Err(bad()),
    }
}

/// The days read so far, kept within the years read and the bounds of a calendar.
struct CalendarBuilder {
    first: NaiveDate,
    last: NaiveDate,
    until_year: i32,
    dates: BTreeSet<NaiveDate>,
    ranges: BTreeSet<DateRange>,
}

impl CalendarBuilder {
    /// From the first year a calendar holds through December 31 of `until_year`.
    fn through(until_year: i32) -> Result<Self, IcsError> {
        let first = NaiveDate::from_ymd_opt(YEARS.0, 1, 1);
        let last = NaiveDate::from_ymd_opt(until_year, 12, 31);
        match (first, last) {
            (Some(first), Some(last)) if (YEARS.0..=YEARS.1).contains(&until_year) => Ok(Self {
                first,
                last,
                until_year,
                dates: BTreeSet::new(),
                ranges: BTreeSet::new(),
            }),
            _ => Err(IcsError::Year(until_year)),
        }
    }

    /// Adds the days of an event's occurrences, but for its `EXDATE`s and those `moved` by
    /// events with a `RECURRENCE-ID`.
    fn add_event(
        &mut self,
        event: &Event,
        moved: Option<&BTreeSet<NaiveDate>>,
    ) -> Result<(), IcsError> {
        for day in event.days(self.last) {
            let left_out = event.except.contains(&day) || moved.is_some_and(|m| m.contains(&day));
            if !left_out {
                self.add(day, event.length)?;
            }
        }
        Ok(())
    }

    /// Adds the `length` days from `from`, cut to the years read: one day as a date, more as a
    /// range.
    fn add(&mut self, from: NaiveDate, length: u64) -> Result<(), IcsError> {
        let to = from
            .checked_add_days(Days::new(length - 1))
            .unwrap_or(NaiveDate::MAX);
        let (from, to) = (from.max(self.first), to.min(self.last));
        if from > to {
            return Ok(());
        }
        if from == to {
            self.dates.insert(from);
        } else {
            self.ranges.insert(DateRange { from, to });
        }
        self.check_size()
    }

    /// Stops as soon as there are more days than a calendar holds, before reading on.
    fn check_size(&self) -> Result<(), IcsError> {
        let too_many = |what, limit| IcsError::TooMany {
            what,
            limit,
            until_year: self.until_year,
        };
        if self.dates.len() > MAX_DATES {
            return Err(too_many("dates", MAX_DATES));
        }
        if self.ranges.len() > MAX_RANGES {
            return Err(too_many("ranges", MAX_RANGES));
        }
        Ok(())
    }

    fn build(self) -> Result<Calendar, IcsError> {
        let calendar = Calendar {
            dates: self.dates,
            ranges: self.ranges.into_iter().collect(),
            weekdays: BTreeSet::new(),
        };
        calendar.check()?;
        Ok(calendar)
    }
}
