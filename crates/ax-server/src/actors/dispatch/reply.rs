//! Reply classification: what a handler's reply (or a failure to get one) makes of the
//! attempt's outcome. Plain code over the status and body; it stays beside the dispatchers,
//! not in `ax_core`, as it cuts code and message to the store's columns.

use chrono::{DateTime, Utc};

use ax_core::run::logs::cut_output;
use ax_core::run::{http_code, Outcome, ReportedStatus, HANDLER_NOT_ALLOWED_CODE};
use ax_core::text::{clean_message, result_code, result_message};
use ax_store::rows::models::{cut, MAX_CODE_CHARS, MAX_MESSAGE_CHARS};

pub(super) fn failed(code: &str, message: impl Into<String>) -> Outcome {
    Outcome::Failed {
        code: Some(code.to_string()),
        message: Some(cut(message.into(), MAX_MESSAGE_CHARS)),
        retry: true,
    }
}

/// An attempt ax refused to send: its handler's host is not allowed. Not retried, as every
/// retry would be refused the same way.
pub(super) fn not_allowed(message: impl Into<String>) -> Outcome {
    Outcome::Failed {
        code: Some(HANDLER_NOT_ALLOWED_CODE.to_string()),
        message: Some(cut(message.into(), MAX_MESSAGE_CHARS)),
        retry: false,
    }
}

/// A handler's reply: the attempt's outcome, and the `output` its body carried (kept with the
/// attempt's log).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    pub outcome: Outcome,
    pub output: Option<String>,
}

impl From<Outcome> for Reply {
    fn from(outcome: Outcome) -> Self {
        Reply {
            outcome,
            output: None,
        }
    }
}

/// Classifies a handler's reply as HTTP defines its status codes: a 2xx whose JSON body has
/// `"status": "SUCCESS"|"FAILED"` is the result, whatever the code (`"retry": false` stops
/// retries of a failure); otherwise `202 Accepted` means the executor will call back by
/// `deadline`, and any other 2xx (200, 201, 204 …) is a success; anything else failed.
pub fn classify_reply(status: u16, body: &[u8], deadline: DateTime<Utc>) -> Reply {
    if !(200..300).contains(&status) {
        let text = String::from_utf8_lossy(body);
        return failed(&http_code(status), clean_message(text.trim())).into();
    }
    let by_code = if status == 202 {
        Outcome::Accepted { deadline }
    } else {
        Outcome::Succeeded {
            code: None,
            message: None,
        }
    };
    let Ok(serde_json::Value::Object(reply)) = serde_json::from_slice(body) else {
        return by_code.into();
    };
    // The code and message are read as a callback's are, and brought within their columns.
    // One a callback would have refused (a code of another type or with control characters,
    // a message not a string) is dropped, not the attempt: the status is the executor's
    // result, and a reported success turned into a failure would run the job again.
    let text = |field: &str, read: fn(&serde_json::Value) -> Result<Option<String>, _>| {
        reply
            .get(field)
            .and_then(|value| read(value).ok().flatten())
    };
    let code = text("code", result_code).map(|code| cut(code, MAX_CODE_CHARS));
    let message = text("message", result_message).map(|message| cut(message, MAX_MESSAGE_CHARS));
    let output = match reply.get("output") {
        Some(serde_json::Value::String(output)) => Some(cut_output(output).to_string()),
        _ => None,
    };
    let status = reply.get("status").and_then(|s| s.as_str());
    let outcome = match status.and_then(ReportedStatus::parse) {
        Some(ReportedStatus::Success) => Outcome::Succeeded { code, message },
        Some(ReportedStatus::Failed) => Outcome::Failed {
            code,
            message,
            // `"stopRetry": true`, the protocol's word, or `"retry": false`, ax's first.
            retry: reply.get("retry") != Some(&serde_json::Value::Bool(false))
                && reply.get("stopRetry") != Some(&serde_json::Value::Bool(true)),
        },
        None => by_code,
    };
    Reply { outcome, output }
}

#[cfg(test)]
mod tests;
