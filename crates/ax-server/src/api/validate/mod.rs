//! Input validation: every rule of the HTTP contract, each failure naming its field.

mod alert_rule;
mod body;
pub mod executor;
mod handler_url;
mod ids;
mod query;
#[cfg(test)]
mod refused;
mod run_report;
mod runs;
mod task;
#[cfg(any(test, feature = "test-support"))]
pub mod task_examples;

pub use alert_rule::alert_rule;
pub use body::object;
pub use ids::{request_id, task_id};
pub use query::{
    alerts_query, audit_query, cron_preview, encode_cursor, events_query, exact_like,
    history_query, next_alert_cursor, page, prefix_query, schedule_hours, stats_window,
};
pub use run_report::{attempt, log_lines, output, progress};
pub use runs::{backfill_range, trigger_params};
pub use task::{
    bulk, merge_patch, scene, task_body, task_input, DEFAULT_MAX_RETRY, DEFAULT_SCENE,
    DEFAULT_TIMEOUT_MS,
};
