//! `ax calendars list|get|put|delete|import`: calendars of days off, and holiday calendars read
//! from iCalendar files.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use ax_core::calendar::{self, ics, Calendar, YEARS};
use ax_core::ids::CalendarName;
use chrono::Datelike;
use clap::Subcommand;
use serde_json::{json, Value};

use crate::api::error::ClientError;
use crate::api::http::{request, Call};
use crate::api::output::{self, Column, Format};
use crate::Connection;

/// How many years past this one `import` reads by default.
const YEARS_AHEAD: i32 = 10;

#[derive(Debug, Clone, Subcommand)]
pub enum CalendarsCommand {
    /// Every calendar: its counts of dates and ranges, its weekdays, how many tasks use it.
    List,
    /// One calendar: its days, and the tasks that use it.
    Get {
        #[arg(value_parser = calendar_name)]
        name: CalendarName,
    },
    /// Create or replace a calendar from a file (YAML or JSON): `{dates: [2026-12-25],
    /// ranges: [{from: 2026-12-24, to: 2027-01-01}], weekdays: [SAT, SUN]}`. The tasks that
    /// use it move their next runs at once.
    Put {
        #[arg(value_parser = calendar_name)]
        name: CalendarName,
        /// The calendar's file.
        file: PathBuf,
    },
    /// Delete a calendar; refused while tasks use it (they are named).
    Delete {
        #[arg(value_parser = calendar_name)]
        name: CalendarName,
    },
    /// Create or replace a calendar with the days of an iCalendar file (.ics, such as a holiday
    /// calendar): all-day events, yearly rules repeated through --until. Events at a time of
    /// day, other rules and RDATE are refused, naming the event and its line.
    Import {
        #[arg(value_parser = calendar_name)]
        name: CalendarName,
        /// The iCalendar file.
        file: PathBuf,
        /// The last year to read the days of (default: this year and 10 more).
        #[arg(long, value_name = "YEAR", value_parser = until_year)]
        until: Option<i32>,
        /// Print the calendar read (its JSON, or YAML with -o yaml); send nothing.
        #[arg(long)]
        dry_run: bool,
    },
}

/// A calendar's name, checked as the API checks it (it goes in a path as it is).
fn calendar_name(text: &str) -> Result<CalendarName, String> {
    calendar::name(text).map_err(|err| err.message().to_string())
}

/// A year a calendar may hold.
fn until_year(text: &str) -> Result<i32, String> {
    text.parse::<i32>()
        .ok()
        .filter(|year| (YEARS.0..=YEARS.1).contains(year))
        .ok_or_else(|| format!("expected a year from {} to {}", YEARS.0, YEARS.1))
}

const CALENDAR_COLUMNS: &[Column] = &[
    ("NAME", "name"),
    ("DATES", "dates"),
    ("RANGES", "ranges"),
    ("WEEKDAYS", "weekdays"),
    ("TASKS", "taskCount"),
    ("UPDATED", "updatedAt"),
];

/// The tasks using a calendar, under it.
const TASK_COLUMNS: &[Column] = &[("TASK ID", "id"), ("SCENE", "scene"), ("NAME", "name")];

/// Runs `ax calendars …`.
pub fn calendars(conn: Connection, command: CalendarsCommand) -> ExitCode {
    crate::finish(run(conn, command))
}

async fn run(conn: Connection, command: CalendarsCommand) -> Result<(), ClientError> {
    match command {
        CalendarsCommand::List => {
            let body = request(&conn, &Call::new("GET", "/api/calendars".into()))
                .await?
                .body;
            output::print(conn.format, &body, |body, _| calendars_table(body))
        }
        CalendarsCommand::Get { name } => {
            let call = Call::new("GET", format!("/api/calendars/{name}"));
            let body = request(&conn, &call).await?.body;
            output::print(conn.format, &body, |body, _| calendar_text(body))
        }
        CalendarsCommand::Put { name, file } => {
            put(&conn, &name, &read_calendar_file(&file)?).await
        }
        CalendarsCommand::Delete { name } => {
            request(
                &conn,
                &Call::new("DELETE", format!("/api/calendars/{name}")),
            )
            .await?;
            output::one_line(conn.format, &json!({"name": name, "deleted": true}), || {
                format!("deleted calendar {name}")
            })
        }
        CalendarsCommand::Import {
            name,
            file,
            until,
            dry_run,
        } => {
            let until = until.unwrap_or_else(default_until);
            let calendar = read_ics_file(&file, until)?;
            match dry_run {
                true => print_dry_run(conn.format, &name, &calendar, until),
                false => put(&conn, &name, &calendar).await,
            }
        }
    }
}

/// This year and [`YEARS_AHEAD`] more, within the years a calendar holds.
fn default_until() -> i32 {
    (chrono::Utc::now().year() + YEARS_AHEAD).min(YEARS.1)
}

/// A calendar's file, YAML or JSON, checked as the API checks a calendar: an error names the
/// file and the part at fault (`dates[2]`).
fn read_calendar_file(path: &Path) -> Result<Calendar, ClientError> {
    let body = crate::apply::read_yaml(path).map_err(|err| ClientError::usage(err.to_string()))?;
    Calendar::from_json(&body)
        .map_err(|err| ClientError::usage(format!("{}: {err}", path.display())))
}

/// The days of an iCalendar file through `until`: an error names the file and its line.
fn read_ics_file(path: &Path, until: i32) -> Result<Calendar, ClientError> {
    let text = std::fs::read_to_string(path)
        .map_err(|err| ClientError::usage(format!("cannot read {}: {err}", path.display())))?;
    ics::read(&text, until).map_err(|err| ClientError::usage(format!("{}: {err}", path.display())))
}

/// PUTs the calendar: one line, created or replaced, with what the server keeps.
async fn put(
    conn: &Connection,
    name: &CalendarName,
    calendar: &Calendar,
) -> Result<(), ClientError> {
    let body = serde_json::to_value(calendar)
        .map_err(|err| ClientError::Failed(format!("cannot write the calendar: {err}")))?;
    let call = Call::new("PUT", format!("/api/calendars/{name}")).body(body);
    let reply = request(conn, &call).await?;
    let done = match reply.status {
        201 => "created",
        _ => "replaced",
    };
    output::one_line(conn.format, &reply.body, || {
        format!("{done} calendar {name}: {}", counts(&reply.body))
    })
}

/// `--dry-run`: the calendar on stdout (JSON, or YAML with `-o yaml`), what it holds on stderr.
fn print_dry_run(
    format: Format,
    name: &CalendarName,
    calendar: &Calendar,
    until: i32,
) -> Result<(), ClientError> {
    let body = serde_json::to_value(calendar)
        .map_err(|err| ClientError::Failed(format!("cannot write the calendar: {err}")))?;
    let format = match format {
        Format::Yaml => Format::Yaml,
        _ => Format::Json,
    };
    output::print(format, &body, |_, _| String::new())?;
    eprintln!(
        "calendar {name} through {until}: {}; nothing sent (--dry-run)",
        counts(&body)
    );
    Ok(())
}

/// `3 dates, 1 range, 2 weekdays`.
fn counts(calendar: &Value) -> String {
    ["date", "range", "weekday"]
        .iter()
        .map(|what| {
            let n = list(calendar, &format!("{what}s")).len();
            format!("{n} {what}{}", if n == 1 { "" } else { "s" })
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn list<'a>(value: &'a Value, key: &str) -> &'a [Value] {
    value[key].as_array().map(Vec::as_slice).unwrap_or_default()
}

/// A line per calendar, its dates and ranges counted and its weekdays named.
fn calendars_table(body: &Value) -> String {
    let rows: Vec<Value> = output::items(body).iter().map(calendar_row).collect();
    output::table(CALENDAR_COLUMNS, &rows)
}

fn calendar_row(calendar: &Value) -> Value {
    let mut row = calendar.clone();
    row["dates"] = json!(list(calendar, "dates").len());
    row["ranges"] = json!(list(calendar, "ranges").len());
    row["weekdays"] = weekdays(calendar);
    row
}

/// The weekdays as one cell (`SAT,SUN`), null for none.
fn weekdays(calendar: &Value) -> Value {
    let names: Vec<String> = list(calendar, "weekdays")
        .iter()
        .map(output::text)
        .collect();
    match names.is_empty() {
        true => Value::Null,
        false => json!(names.join(",")),
    }
}

/// One calendar: its fields with the lists counted, its days one a line in order (a range as
/// `FROM … TO`), then the tasks that use it.
fn calendar_text(body: &Value) -> String {
    let mut fields = calendar_row(body);
    if let Some(object) = fields.as_object_mut() {
        object.remove("tasks");
    }
    let mut text = output::fields(&fields);
    text.push('\n');
    text.push_str(&output::table(&[("DAY", "day")], &days(body)));
    let tasks = list(body, "tasks");
    if !tasks.is_empty() {
        text.push('\n');
        text.push_str(&output::table(TASK_COLUMNS, tasks));
    }
    text
}

/// The dates and ranges of a calendar as rows of one `day` cell, by their first day.
fn days(calendar: &Value) -> Vec<Value> {
    let dates = list(calendar, "dates")
        .iter()
        .map(|date| (output::text(date), output::text(date)));
    let ranges = list(calendar, "ranges").iter().map(|range| {
        let from = output::text(&range["from"]);
        let cell = format!("{from} … {}", output::text(&range["to"]));
        (from, cell)
    });
    let mut days: Vec<(String, String)> = dates.chain(ranges).collect();
    days.sort();
    days.into_iter()
        .map(|(_, day)| json!({ "day": day }))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn holidays() -> Value {
        json!({"name": "de-holidays", "dates": ["2026-12-25", "2026-12-26"],
            "ranges": [{"from": "2026-12-24", "to": "2027-01-01"}], "weekdays": ["SAT", "SUN"],
            "taskCount": 2, "updatedAt": "2027-01-01T00:00:00.000Z",
            "tasks": [{"id": 3, "scene": "billing", "name": "nightly"}]})
    }

    #[test]
    fn a_calendar_a_line_with_its_days_counted() {
        let body = json!({"items": [holidays(),
            {"name": "weekends", "dates": [], "ranges": [], "weekdays": [], "taskCount": 0,
             "updatedAt": "2027-01-02T00:00:00.000Z"}]});
        assert_eq!(
            calendars_table(&body),
            "NAME         DATES  RANGES  WEEKDAYS  TASKS  UPDATED\n\
             de-holidays  2      1       SAT,SUN   2      2027-01-01T00:00:00.000Z\n\
             weekends     0      0       -         0      2027-01-02T00:00:00.000Z\n"
        );
    }

    #[test]
    fn one_calendar_is_its_fields_its_days_in_order_and_its_tasks() {
        assert_eq!(
            calendar_text(&holidays()),
            "dates      2\n\
             name       de-holidays\n\
             ranges     1\n\
             taskCount  2\n\
             updatedAt  2027-01-01T00:00:00.000Z\n\
             weekdays   SAT,SUN\n\
             \n\
             DAY\n\
             2026-12-24 … 2027-01-01\n\
             2026-12-25\n\
             2026-12-26\n\
             \n\
             TASK ID  SCENE    NAME\n\
             3        billing  nightly\n"
        );
    }

    #[test]
    fn counts_say_what_a_calendar_holds() {
        assert_eq!(counts(&holidays()), "2 dates, 1 range, 2 weekdays");
        assert_eq!(counts(&json!({})), "0 dates, 0 ranges, 0 weekdays");
    }

    #[test]
    fn names_and_years_are_checked_before_any_request() {
        assert!(calendar_name("de-holidays").is_ok());
        let bad = calendar_name("DE Holidays").expect_err("refused");
        assert!(bad.contains("a-z 0-9 _ . -"), "{bad}");
        assert_eq!(until_year("2036"), Ok(2036));
        assert!(until_year("10000").is_err());
        assert!(until_year("soon").is_err());
        assert!((YEARS.0..=YEARS.1).contains(&default_until()));
    }

    #[test]
    fn a_calendar_file_is_checked_naming_the_file_and_the_part() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let good = dir.path().join("days.yaml");
        std::fs::write(&good, "dates: [2026-12-25]\nweekdays: [sat, SUN]\n").expect("write");
        let calendar = read_calendar_file(&good).expect("read");
        assert_eq!(
            counts(&serde_json::to_value(&calendar).expect("json")),
            "1 date, 0 ranges, 2 weekdays"
        );
        let bad = dir.path().join("bad.json");
        std::fs::write(&bad, r#"{"dates": ["2026-13-01"]}"#).expect("write");
        let err = read_calendar_file(&bad).expect_err("refused");
        assert_eq!(err.exit_code(), 2);
        assert!(
            err.to_string()
                .contains("bad.json: dates[0]: must be a date"),
            "{err}"
        );
    }

    #[test]
    fn an_ics_file_is_read_through_the_year_given_or_refused_naming_its_line() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let path = dir.path().join("holidays.ics");
        let event = "BEGIN:VCALENDAR\r\nBEGIN:VEVENT\r\nSUMMARY:Christmas\r\n\
                     DTSTART;VALUE=DATE:20261225\r\nRRULE:FREQ=YEARLY\r\n\
                     END:VEVENT\r\nEND:VCALENDAR\r\n";
        std::fs::write(&path, event).expect("write");
        assert_eq!(read_ics_file(&path, 2030).expect("read").dates.len(), 5);
        std::fs::write(&path, event.replace("YEARLY", "MONTHLY")).expect("write");
        let err = read_ics_file(&path, 2030).expect_err("refused");
        assert_eq!(err.exit_code(), 2);
        assert!(
            err.to_string()
                .contains("holidays.ics: line 5: event `Christmas`: FREQ=MONTHLY"),
            "{err}"
        );
        let missing = read_ics_file(&dir.path().join("none.ics"), 2030).expect_err("refused");
        assert!(missing.to_string().starts_with("cannot read "), "{missing}");
    }
}
