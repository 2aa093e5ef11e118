//! What the tests of every view of a task share: bodies with each field at its example, and
//! the task they are stored as (for the tests of this crate and of `ax apply`'s, through the
//! `test-support` feature).

use super::task_input;
use crate::service::task_details::TaskDetails;
use crate::service::task_input::TaskInput;
use ax_core::calendar::CalendarBook;
use ax_core::security::Allowlist;
use ax_core::task::fields::{Default, Field, ALL, CRON, HANDLER_URL, NAME};
use ax_store::rows::models::{Task, TaskFields};
use serde_json::{json, Value};

/// The smallest valid body: each required field at a value other than its example (a
/// required field without one here is at its example, and the tests of its changes fail).
pub fn required() -> Value {
    let others = [
        (NAME.name, json!("base")),
        (CRON.name, json!("0 0 1 * * *")),
        (HANDLER_URL.name, json!("http://base.internal/run")),
    ];
    let mut body = serde_json::Map::new();
    let given = |field: &Field| match field.default {
        Default::Required => true,
        // Of two alternatives, the one declared first.
        Default::Either(other) => {
            ALL.iter().position(|f| f.name == field.name) < ALL.iter().position(|f| f.name == other)
        }
        _ => false,
    };
    for field in ALL.iter().filter(|f| given(f)) {
        let other = others.iter().find(|(name, _)| *name == field.name);
        let value = other.map_or_else(|| field.example_json(), |(_, value)| value.clone());
        body.insert(field.name.into(), value);
    }
    Value::Object(body)
}

pub fn input(body: Value) -> TaskInput {
    task_input(body, &Allowlist::default()).expect("a valid body")
}

/// The smallest body, with `field` at its example (instead of the field it is an
/// alternative to).
pub fn with_example(field: &Field) -> Value {
    let mut body = required();
    if let Default::Either(other) = field.default {
        if let Some(members) = body.as_object_mut() {
            members.remove(other);
        }
    }
    body[field.name] = field.example_json();
    body
}

/// A stored task with these fields (the row's other columns made up).
pub fn stored(fields: TaskFields) -> Task {
    let TaskFields {
        name,
        scene,
        cron,
        handler_url,
        params,
        max_retry,
        timeout_ms,
        status,
        next_run_at,
        updated_at,
        retry_backoff_secs,
        retry_factor,
        misfire_threshold_secs,
        dependency_timeout_secs,
        time_zone,
        overlap,
        jitter_secs,
        labels,
        executor,
        alerts,
        alert_lag_ms,
        calendars,
    } = fields;
    Task {
        id: ax_core::run::TaskId(1),
        name,
        scene,
        cron,
        handler_url,
        params,
        max_retry,
        timeout_ms,
        status,
        next_run_at,
        created_at: updated_at,
        updated_at,
        retry_backoff_secs,
        retry_factor,
        misfire_threshold_secs,
        dependency_timeout_secs,
        time_zone,
        overlap,
        jitter_secs,
        version: 1,
        labels,
        executor,
        alerts,
        alert_lag_ms,
        calendars,
    }
}

/// The task a definition is stored as, with its upstreams.
pub fn details(input: &TaskInput) -> TaskDetails {
    TaskDetails {
        task: stored(input.fields(chrono::DateTime::UNIX_EPOCH, &CalendarBook::default())),
        depends_on: input.depends_on.clone(),
        scene_paused: false,
    }
}
/// A definition as JSON: two are the same definition when these are equal.
pub fn as_json(input: &TaskInput) -> Value {
    serde_json::to_value(input).expect("a definition serializes")
}

#[cfg(test)]
mod tests {
    use super::*;
    use ax_core::task::fields::{named, JITTER_SECS};

    #[test]
    fn every_example_is_valid_and_not_the_default() {
        for field in ALL {
            assert_ne!(
                Some(field.example_json()),
                field.default_json(),
                "{}",
                field.name
            );
            assert_ne!(field.example_json(), Value::Null, "{}", field.name);
            input(with_example(field));
        }
        assert_eq!(named("jitterSecs"), Some(&JITTER_SECS));
    }
}
