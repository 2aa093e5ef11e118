//! Value parsers of the client's flags and arguments: a bad value is a usage error (exit 2)
//! that clap reports naming the flag, before any request.

use chrono::{DateTime, SecondsFormat, Utc};

use ax_core::run::{RequestId, RequestIdPrefix, RunStatus};
use ax_store::rows::models::TaskStatus;

/// An RFC 3339 time, passed on in UTC.
pub fn time(text: &str) -> Result<String, String> {
    DateTime::parse_from_rfc3339(text)
        .map(|at| {
            at.with_timezone(&Utc)
                .to_rfc3339_opts(SecondsFormat::Millis, true)
        })
        .map_err(|_| "expected an RFC 3339 time like 2027-01-01T00:00:00Z".into())
}

/// A run's request id.
pub fn request_id(text: &str) -> Result<String, String> {
    RequestId::parse(text)
        .map(|id| id.as_str().to_string())
        .ok_or_else(|| "expected a UUID like 0b6f1c52-8a47-4cf5-9d3e-2f7c1a9e4b10".into())
}

/// A run's request id, or its start: 6 hex digits or more, with or without its dashes (which
/// run it names is asked of the server).
pub fn request_id_or_prefix(text: &str) -> Result<String, String> {
    match (RequestId::parse(text), RequestIdPrefix::parse(text)) {
        (Some(id), _) => Ok(id.as_str().to_string()),
        (None, Some(prefix)) => Ok(prefix.as_str().to_string()),
        (None, None) => Err(format!(
            "expected a request id, or its first {} hex digits or more",
            RequestIdPrefix::MIN_HEX
        )),
    }
}

/// A task's status, as the API names it.
pub fn task_status(text: &str) -> Result<String, String> {
    TaskStatus::parse(text)
        .map(|status| status.as_str().to_string())
        .ok_or_else(|| format!("expected {}", TaskStatus::choices()))
}

/// A run's status, as the API names it.
pub fn run_status(text: &str) -> Result<String, String> {
    RunStatus::parse(text)
        .map(|status| status.as_str().to_string())
        .ok_or_else(|| format!("expected {}", RunStatus::choices()))
}

/// A label filter, `KEY=VALUE`.
pub fn label(text: &str) -> Result<String, String> {
    ax_core::task::labels::filter(text).map(|_| text.to_string())
}

/// A JSON object (a run's params).
pub fn json_object(text: &str) -> Result<serde_json::Value, String> {
    match serde_json::from_str(text) {
        Ok(value @ serde_json::Value::Object(_)) => Ok(value),
        Ok(_) => Err("expected a JSON object, like '{\"region\": \"eu\"}'".into()),
        Err(err) => Err(format!("not JSON: {err}")),
    }
}

/// An executor group and the path on its members, `GROUP` or `GROUP:PATH`, as a task's
/// `executor` field (the server checks the path as it checks the field's).
pub fn executor(text: &str) -> Result<serde_json::Value, String> {
    let (group, path) = text.split_once(':').unwrap_or((text, ""));
    if path.starts_with("//") {
        return Err(format!(
            "expected GROUP or GROUP:PATH, like billing:/jobs/charge; `{}` is a URL: give it \
             with --handler",
            text.escape_debug()
        ));
    }
    if !ax_core::dispatch::routing::valid_group_name(group) {
        return Err(format!(
            "expected GROUP or GROUP:PATH, like billing:/jobs/charge, GROUP 1-64 of a-z 0-9 _ . - \
             (got `{}`)",
            group.escape_debug()
        ));
    }
    Ok(serde_json::json!({"group": group, "path": path}))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_passed_on_in_utc() {
        assert_eq!(
            time("2027-01-01T02:00:00+02:00").as_deref(),
            Ok("2027-01-01T00:00:00.000Z")
        );
        assert!(time("yesterday").unwrap_err().contains("RFC 3339"));
    }

    #[test]
    fn statuses_are_the_apis_names() {
        assert_eq!(task_status("PAUSED").as_deref(), Ok("PAUSED"));
        assert_eq!(
            task_status("paused").unwrap_err(),
            "expected ENABLED or PAUSED"
        );
        assert!(run_status("DONE").unwrap_err().contains("SUCCESS"));
        assert!(request_id("not-a-uuid").is_err());
        assert!(json_object("[1]").is_err());
        assert!(json_object("{\"a\": 1}").is_ok());
    }

    #[test]
    fn an_executor_is_a_group_and_a_path() {
        assert_eq!(
            executor("billing:/jobs/charge"),
            Ok(serde_json::json!({"group": "billing", "path": "/jobs/charge"}))
        );
        assert_eq!(
            executor("billing"),
            Ok(serde_json::json!({"group": "billing", "path": ""}))
        );
        // The path is all after the first colon.
        assert_eq!(
            executor("etl.eu:/run:now"),
            Ok(serde_json::json!({"group": "etl.eu", "path": "/run:now"}))
        );
        for bad in ["", ":/run", "Billing:/x", "a b", "http://host/run"] {
            let err = executor(bad).expect_err(bad);
            assert!(
                err.starts_with("expected GROUP or GROUP:PATH"),
                "{bad}: {err}"
            );
        }
    }
}
