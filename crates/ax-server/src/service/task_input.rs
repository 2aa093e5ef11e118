//! A task's definition as the user gives it, validated.

use ax_core::ids::SceneName;
use chrono::{DateTime, Utc};

use ax_core::alerting::AlertRule;
use ax_core::calendar::schedule::Schedule;
use ax_core::calendar::{CalendarBook, TaskCalendars};
use ax_core::run::{OverlapPolicy, TaskId};
use ax_core::task::executor::TaskExecutor;
use ax_core::task::fields;
use ax_core::task::labels::Labels;
use ax_cron::CronSchedule;
use ax_store::rows::models::{TaskFields, TaskStatus};
use ax_store::to_db;

/// A task as the user defines it, validated. Serialized, it is the definition by field name
/// (`ax_core::task::fields`), as a body gives it (`ax apply` compares two).
#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskInput {
    pub name: String,
    pub scene: SceneName,
    /// The expression and the zone it is matched in: `cron` and `timeZone`.
    #[serde(flatten, serialize_with = "schedule_fields")]
    pub cron: CronSchedule,
    /// Where each run is POSTed, or (`executor`) the group whose members take them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub handler_url: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub executor: Option<TaskExecutor>,
    /// A JSON object, as text.
    pub params: String,
    pub max_retry: i32,
    pub timeout_ms: i64,
    pub enabled: bool,
    /// Overrides of the global retry back-off, misfire threshold and dependency timeout.
    pub retry_backoff_secs: Option<i32>,
    pub retry_factor: Option<i32>,
    pub misfire_threshold_secs: Option<i32>,
    pub dependency_timeout_secs: Option<i32>,
    /// Tasks whose runs must succeed first (one level).
    pub depends_on: Vec<TaskId>,
    /// What a run due while an earlier one is open does.
    pub overlap: OverlapPolicy,
    /// Each run's dispatch is spread over this many seconds after its time.
    pub jitter_secs: i32,
    pub labels: Labels,
    /// Its own alert rule (the scene's, else the default, without).
    pub alerts: Option<AlertRule>,
    pub alert_lag_ms: Option<i64>,
    /// The calendars whose days it does not fire on, and what it does instead.
    pub calendars: Option<TaskCalendars>,
}

/// A schedule as the fields `cron` and `timeZone`.
fn schedule_fields<S: serde::Serializer>(
    cron: &CronSchedule,
    serializer: S,
) -> std::result::Result<S::Ok, S::Error> {
    use serde::ser::SerializeMap;
    let mut fields = serializer.serialize_map(Some(2))?;
    fields.serialize_entry(fields::CRON.name, cron.expression())?;
    fields.serialize_entry(fields::TIME_ZONE.name, cron.zone().name())?;
    fields.end()
}

impl TaskInput {
    /// Its schedule: its cron less the days off of its calendars (read into `book`).
    pub fn schedule(&self, book: &CalendarBook) -> Schedule {
        Schedule::new(self.cron.clone(), book.days_off(self.calendars.as_ref()))
    }

    /// The stored fields of the task, its next run computed from `now`; `book` holds its
    /// calendars.
    pub fn fields(&self, now: DateTime<Utc>, book: &CalendarBook) -> TaskFields {
        let next_run_at = self
            .enabled
            .then(|| self.schedule(book).next_after(now))
            .flatten()
            .map(to_db);
        let status = if self.enabled {
            TaskStatus::Enabled
        } else {
            TaskStatus::Paused
        };
        TaskFields {
            name: self.name.clone(),
            scene: self.scene.clone(),
            cron: self.cron.expression().to_string(),
            handler_url: self.handler_url.clone().unwrap_or_default(),
            params: self.params.clone(),
            max_retry: self.max_retry,
            timeout_ms: self.timeout_ms,
            status,
            next_run_at,
            updated_at: to_db(now),
            retry_backoff_secs: self.retry_backoff_secs,
            retry_factor: self.retry_factor,
            misfire_threshold_secs: self.misfire_threshold_secs,
            dependency_timeout_secs: self.dependency_timeout_secs,
            time_zone: self.cron.zone().name().to_string(),
            overlap: self.overlap,
            jitter_secs: self.jitter_secs,
            labels: self.labels.clone(),
            executor: self.executor.clone(),
            alerts: self.alerts.clone(),
            alert_lag_ms: self.alert_lag_ms,
            calendars: self.calendars.clone(),
        }
    }
}
