//! Reading what an executor answered and sent back, against the protocol (`docs/protocol.md`):
//! pure functions over status codes and bodies, each saying what does not conform.

use serde_json::{Map, Value};

/// How a check came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    Ok,
    /// Conforms, but misses something the protocol recommends.
    Warn,
    Fail,
    /// Not tried (what it needs was not given, or did not happen).
    Skip,
}

/// A result, as a reply or a callback carries it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reported {
    pub status: String,
    pub code: Option<String>,
}

/// What a reply to a signed dispatch says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// A result, at once.
    Result(Reported),
    /// `202` without a result: a callback follows.
    Running,
    /// Another 2xx without a result: success.
    Done,
    /// Not a 2xx: the attempt failed with `HTTP_<status>`.
    Refused(u16),
}

const CALLBACK_FIELDS: &[&str] = &[
    "requestId",
    "callbackToken",
    "attempt",
    "status",
    "code",
    "message",
    "output",
    "stopRetry",
    "retry",
];
const LOG_FIELDS: &[&str] = &["callbackToken", "attempt", "lines", "progress"];
const MAX_CODE_CHARS: usize = 64;
const MAX_MESSAGE_CHARS: usize = 1024;
const MAX_OUTPUT_BYTES: usize = 64 * 1024;
const MAX_LOG_LINES: usize = 1000;

/// Reads a reply: its status code and body. `Err`: a body that claims a result but breaks the
/// reply schema (ax would drop the parts it cannot read).
pub fn read_reply(status: u16, body: &[u8]) -> Result<Answer, String> {
    if !(200..300).contains(&status) {
        return Ok(Answer::Refused(status));
    }
    let by_status = match status {
        202 => Answer::Running,
        _ => Answer::Done,
    };
    let Ok(Value::Object(reply)) = serde_json::from_slice::<Value>(body) else {
        return Ok(by_status);
    };
    if !reply.contains_key("status") {
        return Ok(by_status);
    }
    Ok(Answer::Result(result_of(&reply)?))
}

/// Reads a callback's body for the run `request_id` whose token is `token`, sent for
/// `attempt`.
pub fn read_callback(
    body: &Value,
    request_id: &str,
    token: &str,
    attempt: i64,
) -> Result<Reported, String> {
    let body = object(body, CALLBACK_FIELDS)?;
    if body.get("requestId").and_then(Value::as_str) != Some(request_id) {
        return Err(format!("requestId is not the dispatch's ({request_id})"));
    }
    if body.get("callbackToken").and_then(Value::as_str) != Some(token) {
        return Err("callbackToken is not the dispatch's".into());
    }
    match body.get("attempt") {
        None | Some(Value::Null) => {}
        Some(sent) if sent.as_i64() == Some(attempt) => {}
        Some(sent) => return Err(format!("attempt is {sent}, the dispatch's was {attempt}")),
    }
    result_of(body)
}

/// Reads a log call's body for the run whose token is `token`.
pub fn read_log(body: &Value, token: &str) -> Result<(), String> {
    let body = object(body, LOG_FIELDS)?;
    if body.get("callbackToken").and_then(Value::as_str) != Some(token) {
        return Err("callbackToken is not the dispatch's".into());
    }
    let lines = match body.get("lines") {
        None | Some(Value::Null) => None,
        Some(Value::Array(lines)) if lines.iter().all(Value::is_string) => Some(lines.len()),
        Some(_) => return Err("lines must be an array of strings".into()),
    };
    if lines.is_some_and(|n| n > MAX_LOG_LINES) {
        return Err(format!("more than {MAX_LOG_LINES} lines in one call"));
    }
    let progress = match body.get("progress") {
        None | Some(Value::Null) => None,
        Some(progress) => match progress.as_i64() {
            Some(p @ 0..=100) => Some(p),
            _ => return Err("progress must be an integer 0-100".into()),
        },
    };
    if lines.is_none() && progress.is_none() {
        return Err("neither lines nor progress".into());
    }
    Ok(())
}

fn object<'a>(body: &'a Value, fields: &[&str]) -> Result<&'a Map<String, Value>, String> {
    let Value::Object(body) = body else {
        return Err("the body is not a JSON object".into());
    };
    match body.keys().find(|key| !fields.contains(&key.as_str())) {
        Some(unknown) => Err(format!("unknown field `{unknown}` (ax refuses it: 400)")),
        None => Ok(body),
    }
}

/// The result fields of a reply or callback, checked as ax reads them.
fn result_of(body: &Map<String, Value>) -> Result<Reported, String> {
    let status = match body.get("status").and_then(Value::as_str) {
        Some(status @ ("SUCCESS" | "FAILED")) => status.to_string(),
        _ => return Err("status must be SUCCESS or FAILED".into()),
    };
    let code = match body.get("code") {
        None | Some(Value::Null) => None,
        Some(Value::Number(n)) if n.is_i64() || n.is_u64() => Some(n.to_string()),
        Some(Value::String(code))
            if code.chars().count() <= MAX_CODE_CHARS && !code.chars().any(char::is_control) =>
        {
            Some(code.clone())
        }
        Some(_) => {
            return Err(format!(
                "code must be an integer or a string of at most {MAX_CODE_CHARS} characters \
                 without control characters"
            ))
        }
    };
    match body.get("message") {
        None | Some(Value::Null) => {}
        Some(Value::String(message)) if message.chars().count() <= MAX_MESSAGE_CHARS => {}
        Some(_) => {
            return Err(format!(
                "message must be a string of at most {MAX_MESSAGE_CHARS} characters"
            ))
        }
    }
    match body.get("output") {
        None | Some(Value::Null) => {}
        Some(Value::String(output)) if output.len() <= MAX_OUTPUT_BYTES => {}
        Some(_) => return Err("output must be a string of at most 64 KiB".into()),
    }
    for flag in ["stopRetry", "retry"] {
        if !matches!(body.get(flag), None | Some(Value::Null | Value::Bool(_))) {
            return Err(format!("{flag} must be true or false"));
        }
    }
    Ok(Reported { status, code })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn reported(status: &str, code: Option<&str>) -> Reported {
        Reported {
            status: status.into(),
            code: code.map(str::to_string),
        }
    }

    #[test]
    fn a_reply_is_read_as_ax_reads_it() {
        let ok = br#"{"status":"SUCCESS","code":0,"message":"42 rows"}"#;
        assert_eq!(
            read_reply(200, ok),
            Ok(Answer::Result(reported("SUCCESS", Some("0"))))
        );
        assert_eq!(read_reply(202, b""), Ok(Answer::Running));
        assert_eq!(read_reply(202, b"{\"accepted\":true}"), Ok(Answer::Running));
        assert_eq!(read_reply(204, b""), Ok(Answer::Done));
        assert_eq!(read_reply(200, b"plain text"), Ok(Answer::Done));
        assert_eq!(read_reply(401, b"{}"), Ok(Answer::Refused(401)));
        for broken in [
            json!({"status": "DONE"}),
            json!({"status": "FAILED", "code": {"a": 1}}),
            json!({"status": "FAILED", "code": "x".repeat(65)}),
            json!({"status": "FAILED", "message": 3}),
            json!({"status": "FAILED", "stopRetry": "yes"}),
        ] {
            let body = broken.to_string();
            assert!(read_reply(200, body.as_bytes()).is_err(), "{broken}");
        }
    }

    #[test]
    fn a_callback_must_name_the_run_its_token_and_its_attempt() {
        let good = json!({"requestId": "r1", "callbackToken": "t", "attempt": 2,
                          "status": "FAILED", "code": "E", "stopRetry": true});
        assert_eq!(
            read_callback(&good, "r1", "t", 2),
            Ok(reported("FAILED", Some("E")))
        );
        let without_attempt = json!({"requestId": "r1", "callbackToken": "t", "status": "SUCCESS"});
        assert!(read_callback(&without_attempt, "r1", "t", 1).is_ok());
        assert!(read_callback(&good, "r2", "t", 2).is_err());
        assert!(read_callback(&good, "r1", "u", 2).is_err());
        assert!(read_callback(&good, "r1", "t", 1).is_err());
        let unknown =
            json!({"requestId": "r1", "callbackToken": "t", "status": "SUCCESS", "ok": 1});
        let err = read_callback(&unknown, "r1", "t", 1).expect_err("unknown field");
        assert!(err.contains("`ok`"), "{err}");
    }

    #[test]
    fn log_lines_are_checked_as_ax_takes_them() {
        assert!(read_log(
            &json!({"callbackToken": "t", "lines": ["a"], "progress": 5}),
            "t"
        )
        .is_ok());
        assert!(read_log(&json!({"callbackToken": "t", "progress": 100}), "t").is_ok());
        for broken in [
            json!({"callbackToken": "t"}),
            json!({"callbackToken": "t", "progress": 101}),
            json!({"callbackToken": "t", "lines": "a"}),
            json!({"callbackToken": "u", "lines": ["a"]}),
            json!({"callbackToken": "t", "lines": vec!["a"; 1001]}),
            json!({"callbackToken": "t", "lines": ["a"], "level": "info"}),
        ] {
            assert!(read_log(&broken, "t").is_err(), "{broken}");
        }
    }
}
