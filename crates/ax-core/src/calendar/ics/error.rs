//! Why an iCalendar text is not read: the line at fault, and the event and what of it.

use crate::calendar::{CalendarError, YEARS};

/// Why a file cannot be read as a calendar, with the line at fault.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IcsError {
    /// The text is not iCalendar there: no content line, a component left open.
    #[error("line {line}: {problem}")]
    Line { line: usize, problem: String },
    /// An event whose days cannot be read, or not exactly.
    #[error("line {line}: {}: {problem}", event_name(summary))]
    Event {
        line: usize,
        summary: Option<String>,
        problem: Problem,
    },
    #[error("no VEVENT: the file has no events to take days from")]
    NoEvents,
    #[error(
        "the last year to read, {0}, is outside the years {first} to {last}",
        first = YEARS.0,
        last = YEARS.1
    )]
    Year(i32),
    #[error(
        "more than {limit} {what} through {until_year}: a calendar holds at most {limit}; \
         read fewer years"
    )]
    TooMany {
        what: &'static str,
        limit: usize,
        until_year: i32,
    },
    #[error("the days read do not make a calendar: {0}")]
    Calendar(#[from] CalendarError),
}

impl IcsError {
    /// The line of the file at fault, if one is.
    pub fn line(&self) -> Option<usize> {
        match self {
            IcsError::Line { line, .. } | IcsError::Event { line, .. } => Some(*line),
            _ => None,
        }
    }
}

/// What is wrong with an event.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Problem {
    /// Valid iCalendar that is not read, so as not to read it wrong.
    #[error("{what} is not supported: {hint}")]
    Unsupported { what: String, hint: &'static str },
    /// Not valid iCalendar.
    #[error("{0}")]
    Invalid(String),
}

impl Problem {
    pub(super) fn unsupported(what: impl Into<String>, hint: &'static str) -> Problem {
        Problem::Unsupported {
            what: what.into(),
            hint,
        }
    }

    pub(super) fn invalid(message: impl Into<String>) -> Problem {
        Problem::Invalid(message.into())
    }
}

fn event_name(summary: &Option<String>) -> String {
    match summary {
        Some(summary) => format!("event `{summary}`"),
        None => "an event without SUMMARY".into(),
    }
}
