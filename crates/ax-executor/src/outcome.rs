//! A run's result as the protocol carries it (a reply's or a callback's `status`, `code`,
//! `message`, `output`, `stopRetry`), and the ways a handler says it.

use std::fmt;

use serde::{Deserialize, Serialize};

/// Longest `message` ax keeps; a longer one is cut here so it is never refused.
pub const MAX_MESSAGE_CHARS: usize = 1024;
/// Longest `code` ax takes.
pub const MAX_CODE_CHARS: usize = 64;

/// `SUCCESS` or `FAILED`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Status {
    Success,
    Failed,
}

/// What a run came to: the body of a result reply, and what a callback reports.
///
/// A handler returns anything `Into<Outcome>`: `()`, a `&str` or `String` (the `message`), or
/// an `Outcome` built with [`Outcome::success`] and its setters.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Outcome {
    pub status: Status,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// What the job printed or produced (ax keeps up to 64 KiB with the attempt's log).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<String>,
    /// A failure that must not be retried.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub stop_retry: bool,
}

impl Outcome {
    /// `SUCCESS`, nothing more.
    pub fn success() -> Outcome {
        Outcome {
            status: Status::Success,
            code: None,
            message: None,
            output: None,
            stop_retry: false,
        }
    }

    /// `FAILED` with a code and message (retried by ax unless [`Outcome::stop_retry`]).
    pub fn failed(code: impl Into<String>, message: impl Into<String>) -> Outcome {
        Outcome {
            status: Status::Failed,
            ..Outcome::success()
        }
        .code(code)
        .message(message)
    }

    pub fn code(mut self, code: impl Into<String>) -> Outcome {
        self.code = Some(cut(code.into(), MAX_CODE_CHARS));
        self
    }

    pub fn message(mut self, message: impl Into<String>) -> Outcome {
        self.message = Some(cut(message.into(), MAX_MESSAGE_CHARS));
        self
    }

    pub fn output(mut self, output: impl Into<String>) -> Outcome {
        self.output = Some(output.into());
        self
    }

    /// Makes a failure final: ax does not try again.
    pub fn stop_retry(mut self) -> Outcome {
        self.stop_retry = true;
        self
    }

    pub fn is_success(&self) -> bool {
        self.status == Status::Success
    }
}

/// An outcome as replies and callbacks carry it: a final failure says `"stopRetry": true`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Wire<'a> {
    status: Status,
    #[serde(skip_serializing_if = "Option::is_none")]
    code: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    message: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    output: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    stop_retry: Option<bool>,
}

impl Outcome {
    /// The body of a result reply, and the result fields of a callback.
    pub(crate) fn wire(&self) -> Wire<'_> {
        Wire {
            status: self.status,
            code: self.code.as_deref(),
            message: self.message.as_deref(),
            output: self.output.as_deref(),
            stop_retry: self.stop_retry.then_some(true),
        }
    }
}

impl From<()> for Outcome {
    fn from(_: ()) -> Outcome {
        Outcome::success()
    }
}

impl From<&str> for Outcome {
    fn from(message: &str) -> Outcome {
        Outcome::success().message(message)
    }
}

impl From<String> for Outcome {
    fn from(message: String) -> Outcome {
        Outcome::success().message(message)
    }
}

impl From<Failed> for Outcome {
    fn from(failed: Failed) -> Outcome {
        let outcome = Outcome::failed(failed.code, failed.message);
        if failed.stop_retry {
            outcome.stop_retry()
        } else {
            outcome
        }
    }
}

/// A handler's failure: `Err(Failed::new("UPSTREAM_DOWN", "billing API 503"))`.
///
/// Any `std::error::Error` converts into one (code `ERROR`, its text as the message), so `?`
/// works in a handler; ax retries those. [`Failed::stop_retry`] makes a failure final.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failed {
    pub code: String,
    pub message: String,
    pub stop_retry: bool,
}

/// The code of a handler's error that is not a [`Failed`] (a `?` on another error, a panic).
pub const ERROR_CODE: &str = "ERROR";

impl Failed {
    pub fn new(code: impl Into<String>, message: impl Into<String>) -> Failed {
        Failed {
            code: code.into(),
            message: message.into(),
            stop_retry: false,
        }
    }

    /// Code `ERROR`: what an error that is not a `Failed` becomes.
    pub fn error(message: impl fmt::Display) -> Failed {
        Failed::new(ERROR_CODE, message.to_string())
    }

    /// Makes the failure final: ax does not try again.
    pub fn stop_retry(mut self) -> Failed {
        self.stop_retry = true;
        self
    }
}

impl fmt::Display for Failed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

// `Failed` is not itself an `Error`, so this blanket conversion does not overlap `From<T> for T`.
impl<E: std::error::Error> From<E> for Failed {
    fn from(err: E) -> Failed {
        Failed::error(err)
    }
}

/// `text` cut to at most `max` characters (on a character boundary).
pub(crate) fn cut(text: String, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((end, _)) => text[..end].to_string(),
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn results_serialize_as_the_protocol_reads_them() {
        let cases = [
            (Outcome::from(()), json!({"status": "SUCCESS"})),
            (
                Outcome::from("42 rows"),
                json!({"status": "SUCCESS", "message": "42 rows"}),
            ),
            (
                Outcome::success().code("0").output("ok\n"),
                json!({"status": "SUCCESS", "code": "0", "output": "ok\n"}),
            ),
            (
                Failed::new("BAD", "no").stop_retry().into(),
                json!({"status": "FAILED", "code": "BAD", "message": "no", "stopRetry": true}),
            ),
            (
                Failed::new("BUSY", "later").into(),
                json!({"status": "FAILED", "code": "BUSY", "message": "later"}),
            ),
        ];
        for (outcome, want) in cases {
            assert_eq!(serde_json::to_value(&outcome).ok(), Some(want.clone()));
            let back: Outcome = serde_json::from_value(want).expect("round trip");
            assert_eq!(back, outcome);
        }
    }

    #[test]
    fn a_final_failure_says_so_on_the_wire() {
        let outcome = Outcome::from(Failed::new("BAD", "no").stop_retry());
        assert_eq!(
            serde_json::to_value(outcome.wire()).ok(),
            Some(json!({"status": "FAILED", "code": "BAD", "message": "no", "stopRetry": true}))
        );
        let retried = Outcome::failed("BUSY", "later").output("log");
        assert_eq!(
            serde_json::to_value(retried.wire()).ok(),
            Some(json!({"status": "FAILED", "code": "BUSY", "message": "later", "output": "log"}))
        );
    }

    #[test]
    fn any_error_is_a_retried_failure_with_its_text() {
        fn parse() -> Result<i32, Failed> {
            Ok("x".parse::<i32>()?)
        }
        let failed = parse().expect_err("not a number");
        assert_eq!(failed.code, ERROR_CODE);
        assert_eq!(failed.message, "invalid digit found in string");
        assert!(!failed.stop_retry);
    }

    #[test]
    fn long_messages_and_codes_are_cut_on_characters() {
        let outcome = Outcome::failed("é".repeat(100), "ü".repeat(2000));
        assert_eq!(outcome.code.map(|c| c.chars().count()), Some(64));
        assert_eq!(outcome.message.map(|m| m.chars().count()), Some(1024));
        assert_eq!(cut("short".into(), 1024), "short");
    }
}
