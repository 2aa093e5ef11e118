//! The audit log's summaries: who changed what, and how, in words an operator reads. Pure:
//! the service records the entries (`store::models::Entry`), the store keeps them.

use serde_json::Value;

use ax_core::task::fields;
use ax_store::rows::models::Task;

/// Longest summary kept (the rest is cut, with an ellipsis).
pub const MAX_SUMMARY_CHARS: usize = 2000;

/// `task 7 (reports/nightly)`: how a task is named in the log.
pub fn task_target(task: &Task) -> String {
    format!("task {} ({}/{})", task.id, task.scene, task.name)
}

/// The fields a user sets in which `before` and `after` differ, as `field: old → new`, each
/// named by its column (`status`, not `enabled`) in the API's case; upstreams are not in the
/// row (the service adds theirs).
pub fn task_changes(before: &Task, after: &Task) -> String {
    let row = |task: &Task| serde_json::to_value(task).unwrap_or(Value::Null);
    let (before, after) = (row(before), row(after));
    let changes: Vec<String> = fields::ALL
        .iter()
        .filter_map(|field| field.column)
        .filter_map(|column| {
            let (old, new) = (shown(&before[column]), shown(&after[column]));
            (old != new).then(|| format!("{}: {old} → {new}", camel_case(column)))
        })
        .collect();
    match changes.is_empty() {
        true => "no change".into(),
        false => cut(changes.join("; ")),
    }
}

/// A stored value as the log shows it: text as it is, `default` for none (the server's).
fn shown(value: &Value) -> String {
    match value {
        Value::Null => "default".into(),
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

/// `time_zone` → `timeZone`.
fn camel_case(column: &str) -> String {
    let mut words = column.split('_');
    let mut name = words.next().unwrap_or_default().to_string();
    for word in words {
        let mut chars = word.chars();
        if let Some(first) = chars.next() {
            name.push(first.to_ascii_uppercase());
            name.extend(chars);
        }
    }
    name
}

/// A new task's definition, briefly.
pub fn task_created(task: &Task) -> String {
    cut(format!(
        "cron {} ({}), handler {}, {}",
        task.cron, task.time_zone, task.handler_url, task.status
    ))
}

/// `text` within `MAX_SUMMARY_CHARS`.
fn cut(text: String) -> String {
    match text.char_indices().nth(MAX_SUMMARY_CHARS) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ax_core::run::{OverlapPolicy, TaskId};
    use ax_store::rows::models::{AuditAction, TaskStatus};

    fn task() -> Task {
        let at = chrono::DateTime::UNIX_EPOCH.naive_utc();
        Task {
            id: TaskId(7),
            name: "nightly".into(),
            scene: "reports".into(),
            cron: "0 0 2 * * *".into(),
            handler_url: "http://h/run".into(),
            params: "{}".into(),
            max_retry: 3,
            timeout_ms: 30_000,
            status: TaskStatus::Enabled,
            next_run_at: None,
            created_at: at,
            updated_at: at,
            retry_backoff_secs: None,
            retry_factor: None,
            misfire_threshold_secs: None,
            dependency_timeout_secs: None,
            time_zone: "UTC".into(),
            overlap: OverlapPolicy::Allow,
            jitter_secs: 0,
            version: 1,
            labels: Default::default(),
            executor: None,
            alerts: None,
            alert_lag_ms: None,
            calendars: None,
        }
    }

    #[test]
    fn changes_name_each_field_that_moved() {
        let before = task();
        let mut after = task();
        assert_eq!(task_changes(&before, &after), "no change");
        after.cron = "0 30 2 * * *".into();
        after.time_zone = "Europe/Berlin".into();
        after.retry_factor = Some(2);
        after.status = TaskStatus::Paused;
        assert_eq!(
            task_changes(&before, &after),
            "cron: 0 0 2 * * * → 0 30 2 * * *; timeZone: UTC → Europe/Berlin; \
             status: ENABLED → PAUSED; retryFactor: default → 2"
        );
        assert_eq!(task_target(&before), "task 7 (reports/nightly)");
        assert!(task_created(&before).contains("0 0 2 * * * (UTC)"));
    }

    #[test]
    fn long_summaries_are_cut() {
        let before = task();
        let mut after = task();
        after.params = format!("{{\"k\":\"{}\"}}", "x".repeat(5000));
        let summary = task_changes(&before, &after);
        assert_eq!(summary.chars().count(), MAX_SUMMARY_CHARS + 1);
        assert!(summary.ends_with('…'));
        assert_eq!(
            AuditAction::parse("run.cancel"),
            Some(AuditAction::RunCancel)
        );
    }
}
