//! What executors send about a run besides its result: the attempt a call names, log lines,
//! progress and output.

use serde_json::Value;

use crate::error::ApiError;
use ax_core::run::logs::{lines_of, MAX_OUTPUT_BYTES, PROGRESS};

/// `attempt`: a positive integer, or absent (the attempt dispatched last).
pub fn attempt(value: Option<Value>) -> Result<Option<i32>, ApiError> {
    let wrong = || ApiError::invalid("attempt", "attempt must be a positive integer");
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => n
            .as_i64()
            .and_then(|n| i32::try_from(n).ok())
            .filter(|n| *n >= 1)
            .map(Some)
            .ok_or_else(wrong),
        Some(_) => Err(wrong()),
    }
}

/// `lines`: strings of up to [`ax_core::run::logs::MAX_LINES_PER_CALL`] lines in all (a line per newline), as
/// the log keeps them.
pub fn log_lines(value: Option<Value>) -> Result<Vec<String>, ApiError> {
    let sent = match value {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Array(items)) => items,
        Some(_) => {
            return Err(ApiError::invalid(
                "lines",
                "lines must be an array of strings",
            ))
        }
    };
    let texts = sent
        .into_iter()
        .map(|item| match item {
            Value::String(text) => Ok(text),
            _ => Err(ApiError::invalid(
                "lines",
                "lines must be an array of strings",
            )),
        })
        .collect::<Result<Vec<String>, ApiError>>()?;
    lines_of(&texts).map_err(|too_many| ApiError::invalid("lines", too_many.to_string()))
}

/// `progress`: an integer 0-100, or absent.
pub fn progress(value: Option<Value>) -> Result<Option<i32>, ApiError> {
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => n
            .as_i64()
            .and_then(|n| i32::try_from(n).ok())
            .filter(|n| PROGRESS.contains(n))
            .map(Some)
            .ok_or_else(|| ApiError::invalid("progress", "progress must be an integer 0-100")),
        Some(_) => Err(ApiError::invalid(
            "progress",
            "progress must be an integer 0-100",
        )),
    }
}

/// A callback's `output`: a string of at most [`MAX_OUTPUT_BYTES`] bytes, or absent.
pub fn output(value: Option<Value>) -> Result<Option<String>, ApiError> {
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) if text.len() <= MAX_OUTPUT_BYTES => Ok(Some(text)),
        Some(Value::String(_)) => Err(ApiError::invalid(
            "output",
            format!("output is longer than {MAX_OUTPUT_BYTES} bytes"),
        )),
        Some(_) => Err(ApiError::invalid("output", "output must be a string")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ax_core::run::logs::MAX_LINES_PER_CALL;
    use serde_json::json;

    #[test]
    fn each_field_is_checked_and_named() {
        assert_eq!(attempt(Some(json!(2))).unwrap(), Some(2));
        assert_eq!(attempt(None).unwrap(), None);
        assert_eq!(progress(Some(json!(100))).unwrap(), Some(100));
        assert_eq!(log_lines(Some(json!(["a\nb"]))).unwrap(), ["a", "b"]);
        let too_many = Value::Array(vec![json!("x"); MAX_LINES_PER_CALL + 1]);
        let newlines = json!(["\n".repeat(MAX_LINES_PER_CALL)]);
        let long = "x".repeat(MAX_OUTPUT_BYTES + 1);
        for (field, refused) in [
            ("attempt", attempt(Some(json!(0))).err()),
            ("attempt", attempt(Some(json!("1"))).err()),
            ("progress", progress(Some(json!(101))).err()),
            ("progress", progress(Some(json!(-1))).err()),
            ("progress", progress(Some(json!(2.5))).err()),
            ("lines", log_lines(Some(json!("one"))).err()),
            ("lines", log_lines(Some(json!([1]))).err()),
            ("lines", log_lines(Some(too_many)).err()),
            ("lines", log_lines(Some(newlines)).err()),
            ("output", output(Some(json!(long))).err()),
            ("output", output(Some(json!(["x"]))).err()),
        ] {
            let refused = refused.unwrap_or_else(|| panic!("{field} taken"));
            assert_eq!(refused.field(), Some(field));
        }
    }
}
