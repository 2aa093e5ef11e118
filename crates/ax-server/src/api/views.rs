//! The JSON shapes of tasks, runs and their logs.

use chrono::NaiveDateTime;
use serde::Serialize;

use std::collections::HashMap;

use crate::service::scenes::SceneCounts;
use crate::service::stats::{OverlapCounts, TaskStats};
use crate::service::task_details::TaskDetails;
use ax_core::alerting::AlertRule;
use ax_core::calendar::TaskCalendars;
use ax_core::run::logs::{dropped_marker, Limits};
use ax_core::run::{OverlapPolicy, RequestId, RunStatus, TaskId, TriggerType};
use ax_core::task::executor::TaskExecutor;
use ax_core::task::labels::Labels;
use ax_core::time::clock::rfc3339;
use ax_store::from_db;
use ax_store::queries::attempts::AttemptRow;
use ax_store::queries::run_log::AttemptLog;
use ax_store::rows::models::{Run, TaskStatus};

fn time(at: NaiveDateTime) -> String {
    rfc3339(from_db(at))
}

/// A task as the API shows it.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskView {
    id: TaskId,
    name: String,
    scene: String,
    cron: String,
    /// `null` for a task dispatched to an executor group.
    handler_url: Option<String>,
    executor: Option<TaskExecutor>,
    params: serde_json::Value,
    max_retry: i32,
    timeout_ms: i64,
    status: TaskStatus,
    enabled: bool,
    /// Whether its scene is paused: it fires when neither it (`status`) nor its scene is.
    scene_paused: bool,
    /// Raised by every change of its definition; its `ETag`.
    version: i64,
    retry_backoff_secs: Option<i32>,
    retry_factor: Option<i32>,
    misfire_threshold_secs: Option<i32>,
    dependency_timeout_secs: Option<i32>,
    depends_on: Vec<TaskId>,
    time_zone: String,
    calendars: Option<TaskCalendars>,
    overlap: OverlapPolicy,
    jitter_secs: i32,
    labels: Labels,
    alerts: Option<AlertRule>,
    alert_lag_ms: Option<i64>,
    next_run_at: Option<String>,
    created_at: String,
    updated_at: String,
}

impl From<TaskDetails> for TaskView {
    fn from(details: TaskDetails) -> Self {
        let task = details.task;
        TaskView {
            depends_on: details.depends_on,
            dependency_timeout_secs: task.dependency_timeout_secs,
            id: task.id,
            enabled: task.status == TaskStatus::Enabled,
            scene_paused: details.scene_paused,
            version: task.version,
            params: serde_json::from_str(&task.params).unwrap_or(serde_json::Value::Null),
            name: task.name,
            scene: task.scene.into(),
            cron: task.cron,
            handler_url: Some(task.handler_url).filter(|_| task.executor.is_none()),
            executor: task.executor,
            max_retry: task.max_retry,
            timeout_ms: task.timeout_ms,
            status: task.status,
            retry_backoff_secs: task.retry_backoff_secs,
            retry_factor: task.retry_factor,
            misfire_threshold_secs: task.misfire_threshold_secs,
            time_zone: task.time_zone,
            calendars: task.calendars,
            overlap: task.overlap,
            jitter_secs: task.jitter_secs,
            labels: task.labels,
            alerts: task.alerts,
            alert_lag_ms: task.alert_lag_ms,
            next_run_at: task.next_run_at.map(time),
            created_at: time(task.created_at),
            updated_at: time(task.updated_at),
        }
    }
}

/// One run with its earlier attempts (`GET /api/instances/{requestId}`).
#[derive(Serialize)]
pub struct RunDetailView {
    #[serde(flatten)]
    run: RunView,
    /// Attempts that failed and were retried, in order; the last attempt's outcome is the run's.
    attempts: Vec<AttemptView>,
    /// A broadcast shard's fire: every shard, in order (itself among them).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    shards: Vec<ShardView>,
}

impl RunDetailView {
    pub fn new(run: Run, attempts: Vec<AttemptRow>, shards: Vec<Run>) -> RunDetailView {
        RunDetailView {
            run: run.into(),
            attempts: attempts.into_iter().map(AttemptView::from).collect(),
            shards: shards.into_iter().map(ShardView::from).collect(),
        }
    }
}

/// One shard of a broadcast fire, in a run's detail.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ShardView {
    request_id: RequestId,
    shard_index: Option<i32>,
    status: RunStatus,
    member: Option<String>,
}

impl From<Run> for ShardView {
    fn from(run: Run) -> Self {
        ShardView {
            request_id: run.request_id,
            shard_index: run.shard_index,
            status: run.status,
            member: run.member,
        }
    }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct AttemptView {
    attempt: i32,
    ended_at: String,
    code: Option<String>,
    message: Option<String>,
    /// The ax process that dispatched it.
    process: String,
    /// The executor group member that served it.
    member: Option<String>,
}

impl From<AttemptRow> for AttemptView {
    fn from(row: AttemptRow) -> Self {
        AttemptView {
            attempt: row.attempt,
            ended_at: time(row.ended_at),
            code: row.code,
            message: row.message,
            process: row.process,
            member: row.member,
        }
    }
}

/// A run as the API shows it.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RunView {
    id: i64,
    task_id: TaskId,
    request_id: RequestId,
    trigger_type: TriggerType,
    scheduled_at: String,
    trigger_at: String,
    status: RunStatus,
    attempt: i32,
    retry_count: i32,
    code: Option<String>,
    message: Option<String>,
    deadline_at: Option<String>,
    fired_by: String,
    created_at: String,
    finished_at: Option<String>,
    next_attempt_at: Option<String>,
    /// A manual run's own params, when they overrode the task's.
    params: Option<serde_json::Value>,
    /// The highest attempt handed to a dispatcher (0: none yet).
    dispatched_attempt: i32,
    /// While a dispatcher holds the current attempt: when its claim lapses.
    claimed_until: Option<String>,
    /// When the first attempt was sent to the handler (its lag: this minus `scheduledAt`).
    dispatched_at: Option<String>,
    /// The executor group member that served its last attempt.
    member: Option<String>,
    /// A broadcast run's shard of its fire, `0..shardTotal`.
    shard_index: Option<i32>,
    shard_total: Option<i32>,
}

impl From<Run> for RunView {
    fn from(run: Run) -> Self {
        RunView {
            id: run.id,
            task_id: run.task_id,
            request_id: run.request_id,
            trigger_type: run.trigger_type,
            scheduled_at: time(run.scheduled_at),
            trigger_at: time(run.trigger_at),
            status: run.status,
            attempt: run.attempt,
            retry_count: run.retry_count,
            code: run.callback_code,
            message: run.callback_message,
            deadline_at: run.deadline_at.map(time),
            fired_by: run.fired_by.into(),
            created_at: time(run.created_at),
            finished_at: run.finished_at.map(time),
            next_attempt_at: run.next_attempt_at.map(time),
            params: run.params.and_then(|p| serde_json::from_str(&p).ok()),
            dispatched_attempt: run.dispatched_attempt,
            claimed_until: run.claimed_until.map(time),
            dispatched_at: run.dispatched_at.map(time),
            member: run.member,
            shard_index: run.shard_index,
            shard_total: run.shard_total,
        }
    }
}

/// One page of a listing.
#[derive(Serialize)]
pub struct PageView<T> {
    pub items: Vec<T>,
    pub total: i64,
    pub limit: i64,
    pub offset: i64,
}

/// A scene and its tasks by status.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SceneView {
    scene: String,
    total: i64,
    tasks: HashMap<String, i64>,
    /// The scene's own pause: none of its tasks fires while it is paused.
    paused: bool,
    paused_at: Option<String>,
}

impl From<SceneCounts> for SceneView {
    fn from(counts: SceneCounts) -> Self {
        SceneView {
            scene: counts.scene,
            total: counts.by_status.values().sum(),
            tasks: counts.by_status,
            paused: counts.paused_at.is_some(),
            paused_at: counts.paused_at.map(rfc3339),
        }
    }
}

/// A task's run statistics over a window.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StatsView {
    task_id: TaskId,
    from: String,
    to: String,
    total: i64,
    by_status: HashMap<String, i64>,
    overlap: OverlapCounts,
    /// Trigger lag (due → first dispatched) in milliseconds.
    lag_ms: Option<LagView>,
}

#[derive(Serialize)]
pub struct LagView {
    p50: i64,
    p90: i64,
    p99: i64,
    max: i64,
}

impl StatsView {
    pub fn new(task_id: TaskId, stats: TaskStats) -> Self {
        StatsView {
            task_id,
            from: rfc3339(stats.from),
            to: rfc3339(stats.to),
            total: stats.by_status.values().sum(),
            by_status: stats.by_status,
            overlap: stats.overlap,
            lag_ms: stats
                .lag_ms
                .map(|[p50, p90, p99, max]| LagView { p50, p90, p99, max }),
        }
    }
}

/// One page of the run history, with the cursor of the next.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HistoryView {
    pub items: Vec<RunView>,
    pub next_cursor: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::validate::task_body;
    use crate::api::validate::task_examples::{as_json, details, input, required, with_example};
    use crate::service::task_input::TaskInput;
    use ax_core::task::fields::{Default, Field, ALL, DEPENDS_ON, EXECUTOR, HANDLER_URL};
    use serde_json::Value;

    fn view(input: &TaskInput) -> Value {
        serde_json::to_value(TaskView::from(details(input))).expect("a view")
    }

    #[test]
    fn every_field_is_stored_and_shown_as_given() {
        for field in ALL {
            let view = view(&input(with_example(field)));
            assert_eq!(
                view[field.name],
                field.example_json(),
                "{}: {view}",
                field.name
            );
        }
        let defaults = view(&input(required()));
        let given = |f: &&&Field| matches!(f.default, Default::Required | Default::Either(_));
        for field in ALL.iter().filter(|f| !given(f)) {
            assert_eq!(
                Some(defaults[field.name].clone()),
                field.default_json(),
                "{}",
                field.name
            );
        }
    }

    #[test]
    fn a_view_sent_back_reads_as_the_same_task() {
        // Each of the two alternatives, handlerUrl and executor.
        for left_out in [EXECUTOR.name, HANDLER_URL.name] {
            let mut body = required();
            if let Some(fields) = body.as_object_mut() {
                fields.remove(left_out);
            }
            for field in ALL
                .iter()
                .filter(|f| ![DEPENDS_ON.name, left_out].contains(&f.name))
            {
                body[field.name] = field.example_json();
            }
            let first = input(body);
            let again = input(task_body(view(&first)));
            // Every field comes back as it was, upstreams included.
            assert_eq!(as_json(&first), as_json(&again));
            let now = chrono::DateTime::UNIX_EPOCH;
            let book = ax_core::calendar::CalendarBook::default();
            assert_eq!(first.fields(now, &book), again.fields(now, &book));
        }
    }
}

/// A run's log, by attempt (`GET /api/instances/{requestId}/log`).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RunLogView {
    request_id: RequestId,
    attempts: Vec<AttemptLogView>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct AttemptLogView {
    attempt: i32,
    progress: Option<i32>,
    /// Lines gone from the log, the oldest first (a marker line stands for them).
    dropped_lines: i64,
    output: Option<String>,
    lines: Vec<LogLineView>,
}

#[derive(Serialize)]
struct LogLineView {
    at: String,
    text: String,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    marker: bool,
}

impl RunLogView {
    pub fn new(request_id: RequestId, logs: Vec<AttemptLog>, limits: Limits) -> Self {
        let attempts = logs
            .into_iter()
            .map(|log| {
                let mut lines = Vec::with_capacity(log.lines.len() + 1);
                if let (true, Some((first, _))) = (log.dropped > 0, log.lines.first()) {
                    lines.push(LogLineView {
                        at: time(*first),
                        text: dropped_marker(log.dropped, limits),
                        marker: true,
                    });
                }
                lines.extend(log.lines.into_iter().map(|(at, text)| LogLineView {
                    at: time(at),
                    text,
                    marker: false,
                }));
                AttemptLogView {
                    attempt: log.attempt,
                    progress: log.progress,
                    dropped_lines: log.dropped,
                    output: log.output,
                    lines,
                }
            })
            .collect();
        RunLogView {
            request_id,
            attempts,
        }
    }
}
