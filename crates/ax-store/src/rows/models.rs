//! Rows as stored, and the status vocabulary of tasks (a run's is in `ax_core::run`).

use std::sync::Arc;

use chrono::{DateTime, NaiveDateTime, Utc};
use diesel::prelude::*;

use super::schema::{ax_instance, ax_task};
use super::time::{from_db, to_db};
use ax_core::alerting::AlertRule;
use ax_core::calendar::schedule::Schedule;
use ax_core::calendar::{CalendarBook, TaskCalendars};
use ax_core::ids::{ProcessId, SceneName};
use ax_core::plan::TaskSpec;
use ax_core::run::{NewRun, OverlapPolicy, RequestId, RunStatus, Shard, TaskId, TriggerType};
use ax_core::task::executor::TaskExecutor;
use ax_core::task::labels::Labels;
use ax_cron::{CronError, CronSchedule, Zone};

/// Longest task name (`name VARCHAR(128)`: characters).
pub const MAX_NAME_CHARS: usize = ax_core::task::fields::NAME.max();
/// Longest result `code` a run stores (`callback_code VARCHAR(64)`).
pub const MAX_CODE_CHARS: usize = 64;
/// Longest result `message` a run stores.
pub const MAX_MESSAGE_CHARS: usize = 1024;

/// `text` cut to at most `max` characters, on a character boundary: a value from outside
/// brought within its column.
pub fn cut(mut text: String, max: usize) -> String {
    if let Some((end, _)) = text.char_indices().nth(max) {
        text.truncate(end);
    }
    text
}

ax_core::text_enum! {
    /// Whether a task is scheduled: `PAUSED` tasks keep their definition but never fire.
    TaskStatus { Enabled => "ENABLED", Paused => "PAUSED" }
}

/// A task row. Serialized, it is the row by column (the audit log compares two).
#[derive(Debug, Clone, Queryable, Selectable, Identifiable, serde::Serialize)]
#[diesel(table_name = ax_task)]
#[diesel(check_for_backend(diesel::mysql::Mysql, diesel::sqlite::Sqlite))]
pub struct Task {
    pub id: TaskId,
    pub name: String,
    pub scene: SceneName,
    pub cron: String,
    pub handler_url: String,
    pub params: String,
    pub max_retry: i32,
    pub timeout_ms: i64,
    pub status: TaskStatus,
    pub next_run_at: Option<NaiveDateTime>,
    pub created_at: NaiveDateTime,
    pub updated_at: NaiveDateTime,
    pub retry_backoff_secs: Option<i32>,
    pub retry_factor: Option<i32>,
    pub misfire_threshold_secs: Option<i32>,
    pub dependency_timeout_secs: Option<i32>,
    /// The IANA zone its cron fields match local time in.
    pub time_zone: String,
    pub overlap: OverlapPolicy,
    /// Each run's dispatch is delayed by up to this many seconds (see `ax_core::run::jitter`).
    pub jitter_secs: i32,
    /// Raised by every change of its definition (not by its next run moving on): its ETag.
    pub version: i64,
    pub labels: Labels,
    /// The group it is dispatched to, when it has no handler URL.
    pub executor: Option<TaskExecutor>,
    /// Its own alert rule, over its scene's and the default.
    pub alerts: Option<AlertRule>,
    /// A first dispatch later than this after the run was due is a LAG alert event.
    pub alert_lag_ms: Option<i64>,
    /// The calendars whose days it does not fire on, and what it does instead.
    pub calendars: Option<TaskCalendars>,
}

impl Task {
    /// Its cron expression (as stored, perhaps by an earlier ax), matched in its time zone.
    pub fn cron(&self) -> Result<CronSchedule, CronError> {
        Ok(CronSchedule::parse_stored(&self.cron)?.in_zone(Zone::parse(&self.time_zone)?))
    }

    /// Its schedule: its cron, less the days off of its calendars (read into `book`).
    pub fn schedule(&self, book: &CalendarBook) -> Result<Schedule, CronError> {
        Ok(Schedule::new(
            self.cron()?,
            book.days_off(self.calendars.as_ref()),
        ))
    }
}

/// The wheel entries of these tasks, each with whether it has upstreams: the enabled ones
/// with a next run; `book` holds their calendars.
pub fn wheel_entries(
    tasks: &[(Task, bool)],
    book: &CalendarBook,
) -> Vec<(Arc<TaskSpec>, DateTime<Utc>)> {
    tasks
        .iter()
        .filter_map(|(task, has_dependencies)| task.wheel_entry(*has_dependencies, book))
        .collect()
}

impl Task {
    /// The spec the wheel fires this task by.
    pub fn spec(&self, has_dependencies: bool, book: &CalendarBook) -> Result<TaskSpec, CronError> {
        Ok(TaskSpec {
            id: self.id,
            cron: self.schedule(book)?,
            handler_url: self.handler_url.clone(),
            executor: self.executor.clone().map(Arc::new),
            params: self.params.as_str().into(),
            timeout_ms: self.timeout_ms,
            misfire_threshold_secs: self.misfire_threshold_secs.map(i64::from),
            has_dependencies,
            dependency_timeout_secs: self.dependency_timeout_secs.map(i64::from),
            overlap: self.overlap,
            jitter_secs: self.jitter_secs,
            version: self.version,
        })
    }

    /// What a stored task puts in the wheel: its spec and next run, if it is enabled and has
    /// one. A stored cron that no longer parses is logged and left out.
    pub fn wheel_entry(
        &self,
        has_dependencies: bool,
        book: &CalendarBook,
    ) -> Option<(Arc<TaskSpec>, DateTime<Utc>)> {
        if self.status != TaskStatus::Enabled {
            return None;
        }
        let next = self.next_run_at?.and_utc();
        match self.spec(has_dependencies, book) {
            Ok(spec) => Some((Arc::new(spec), next)),
            Err(err) => {
                log::error!("task {}: stored cron is invalid: {err}", self.id);
                None
            }
        }
    }
}

/// The fields a user sets on a task; used for insert and full update. Serialized, they are
/// the row by column, as `Task`'s.
#[derive(Debug, Clone, PartialEq, Insertable, AsChangeset, serde::Serialize)]
#[diesel(table_name = ax_task)]
#[diesel(treat_none_as_null = true)]
pub struct TaskFields {
    pub name: String,
    pub scene: SceneName,
    pub cron: String,
    pub handler_url: String,
    pub params: String,
    pub max_retry: i32,
    pub timeout_ms: i64,
    pub status: TaskStatus,
    pub next_run_at: Option<NaiveDateTime>,
    pub updated_at: NaiveDateTime,
    pub retry_backoff_secs: Option<i32>,
    pub retry_factor: Option<i32>,
    pub misfire_threshold_secs: Option<i32>,
    pub dependency_timeout_secs: Option<i32>,
    /// The IANA zone its cron fields match local time in.
    pub time_zone: String,
    pub overlap: OverlapPolicy,
    /// Each run's dispatch is delayed by up to this many seconds (see `ax_core::run::jitter`).
    pub jitter_secs: i32,
    pub labels: Labels,
    pub executor: Option<TaskExecutor>,
    pub alerts: Option<AlertRule>,
    pub alert_lag_ms: Option<i64>,
    pub calendars: Option<TaskCalendars>,
}

impl TaskFields {
    /// Whether `task` already has this definition: every declared field's column (the status
    /// included; not its next run or the time of the last change).
    pub fn defines(&self, task: &Task) -> bool {
        let (Ok(mine), Ok(stored)) = (serde_json::to_value(self), serde_json::to_value(task))
        else {
            return false;
        };
        ax_core::task::fields::ALL
            .iter()
            .filter_map(|field| field.column)
            .all(|column| mine.get(column) == stored.get(column))
    }
}

/// An instance row.
#[derive(Debug, Clone, Queryable, Selectable, Identifiable)]
#[diesel(table_name = ax_instance)]
#[diesel(check_for_backend(diesel::mysql::Mysql, diesel::sqlite::Sqlite))]
pub struct Run {
    pub id: i64,
    pub task_id: TaskId,
    pub request_id: RequestId,
    pub trigger_type: TriggerType,
    pub scheduled_at: NaiveDateTime,
    pub trigger_at: NaiveDateTime,
    pub status: RunStatus,
    pub attempt: i32,
    pub retry_count: i32,
    pub callback_code: Option<String>,
    pub callback_message: Option<String>,
    pub deadline_at: Option<NaiveDateTime>,
    pub fired_by: ProcessId,
    pub created_at: NaiveDateTime,
    pub finished_at: Option<NaiveDateTime>,
    /// READY and waiting: when its next attempt is due.
    pub next_attempt_at: Option<NaiveDateTime>,
    /// Params of a manual run that overrode the task's.
    pub params: Option<String>,
    /// The highest attempt handed to a dispatcher (0: none yet).
    pub dispatched_attempt: i32,
    /// READY and dispatched: when the dispatcher's claim lapses.
    pub claimed_until: Option<NaiveDateTime>,
    /// When the first attempt was sent to the handler.
    pub dispatched_at: Option<NaiveDateTime>,
    /// The executor group member that served its last attempt (a broadcast shard's: its own).
    pub member: Option<String>,
    /// A broadcast run's shard of its fire, `0..shard_total`.
    pub shard_index: Option<i32>,
    pub shard_total: Option<i32>,
}

/// A new run, inserted when it fires.
#[derive(Debug, Clone, Insertable)]
#[diesel(table_name = ax_instance)]
pub struct NewRunRow {
    pub task_id: TaskId,
    pub request_id: RequestId,
    pub trigger_type: TriggerType,
    pub scheduled_at: NaiveDateTime,
    pub trigger_at: NaiveDateTime,
    pub status: RunStatus,
    pub fired_by: ProcessId,
    pub created_at: NaiveDateTime,
    /// Set for runs final at birth (`MISSED`).
    pub finished_at: Option<NaiveDateTime>,
    /// For a manual run: when it is due.
    pub next_attempt_at: Option<NaiveDateTime>,
    /// For PENDING runs: when waiting for upstreams gives up.
    pub deadline_at: Option<NaiveDateTime>,
    /// A manual run's params, when they override the task's.
    pub params: Option<String>,
    pub dispatched_attempt: i32,
    /// For a fired run: when the firing process's claim on its dispatch lapses.
    pub claimed_until: Option<NaiveDateTime>,
    /// Why a run born final or held back is so (`SKIPPED`, `PENDING` by the overlap policy).
    pub callback_code: Option<String>,
    pub callback_message: Option<String>,
    /// A broadcast shard's member, chosen at fire time.
    pub member: Option<String>,
    pub shard_index: Option<i32>,
    pub shard_total: Option<i32>,
}

/// Who a new run is and when: everything of its row but its state.
#[derive(Debug, Clone)]
pub struct RunOrigin {
    pub task_id: TaskId,
    pub request_id: RequestId,
    pub trigger_type: TriggerType,
    pub scheduled_at: DateTime<Utc>,
    /// When it fires (dispatch is due).
    pub trigger_at: DateTime<Utc>,
    /// When it was planned.
    pub created_at: DateTime<Utc>,
    pub fired_by: ProcessId,
    /// A manual run's params, when they override the task's.
    pub params: Option<String>,
}

impl NewRunRow {
    /// The row of a run born as `run` (see `ax_core::run::NewRun`).
    pub fn new(origin: RunOrigin, run: &NewRun) -> NewRunRow {
        let mut instance = NewRunRow {
            task_id: origin.task_id,
            request_id: origin.request_id,
            trigger_type: origin.trigger_type,
            scheduled_at: to_db(origin.scheduled_at),
            trigger_at: to_db(origin.trigger_at),
            status: run.status,
            fired_by: origin.fired_by,
            created_at: to_db(origin.created_at),
            finished_at: None,
            next_attempt_at: None,
            deadline_at: None,
            params: origin.params,
            dispatched_attempt: 0,
            claimed_until: None,
            callback_code: None,
            callback_message: None,
            member: None,
            shard_index: None,
            shard_total: None,
        };
        instance.set_state(run);
        instance
    }

    /// The row of `shard` of this (broadcast) run, for `member`: its own request id, the
    /// fire's state.
    pub fn shard(&self, shard: Shard, member: Option<&str>) -> NewRunRow {
        let scheduled_at = from_db(self.scheduled_at);
        NewRunRow {
            request_id: shard.request_id(self.task_id, scheduled_at),
            member: member.map(str::to_string),
            shard_index: Some(shard.index),
            shard_total: Some(shard.total),
            ..self.clone()
        }
    }

    /// Whether it is one of several shards of its fire.
    pub fn sharded(&self) -> bool {
        ax_core::run::sharded(self.shard_total)
    }

    /// The run is born as `run` instead (the overlap policy's decision).
    pub fn set_state(&mut self, run: &NewRun) {
        self.status = run.status;
        self.finished_at = run.finished_at.map(to_db);
        self.next_attempt_at = run.next_attempt_at.map(to_db);
        self.deadline_at = run.deadline_at.map(to_db);
        self.dispatched_attempt = run.dispatched;
        self.claimed_until = run.claimed_until.map(to_db);
        self.callback_code = run.code.map(str::to_string);
        self.callback_message = run.message.map(str::to_string);
    }
}

ax_core::text_enum! {
    /// What a change did.
    AuditAction {
        TaskCreate => "task.create",
        TaskUpdate => "task.update",
        TaskDelete => "task.delete",
        TaskPause => "task.pause",
        TaskResume => "task.resume",
        TaskTrigger => "task.trigger",
        TaskBackfill => "task.backfill",
        TasksBulk => "tasks.bulk",
        ScenePause => "scene.pause",
        SceneResume => "scene.resume",
        RunCancel => "run.cancel",
        ExecutorGroupPut => "executor.put",
        ExecutorGroupDelete => "executor.delete",
        ExecutorMemberJoin => "executor.join",
        ExecutorMemberLeave => "executor.leave",
        CalendarPut => "calendar.put",
        CalendarDelete => "calendar.delete",
    }
}

/// One change, as the audit log keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The token's name, or `anonymous`.
    pub actor: String,
    pub action: AuditAction,
    /// What it changed: `task 7`, `scene reports`, `run <requestId>`.
    pub target: String,
    /// What it was before and after, briefly.
    pub summary: String,
}
