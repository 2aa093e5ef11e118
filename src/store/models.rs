//! Rows as stored, and the status vocabularies of tasks and instances.

use chrono::NaiveDateTime;
use diesel::prelude::*;
use serde::{Deserialize, Serialize};

use super::schema::{ax_instance, ax_task};

macro_rules! string_enum {
    ($(#[$meta:meta])* $name:ident { $($variant:ident => $text:literal),+ $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
        pub enum $name {
            $(#[serde(rename = $text)] $variant),+
        }

        impl $name {
            /// The stored and serialized name.
            pub fn as_str(self) -> &'static str {
                match self { $(Self::$variant => $text),+ }
            }

            /// Parses the stored name; `None` for anything else.
            pub fn parse(text: &str) -> Option<Self> {
                match text { $($text => Some(Self::$variant),)+ _ => None }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

string_enum! {
    /// Whether a task is scheduled: `PAUSED` tasks keep their definition but never fire.
    TaskStatus { Enabled => "ENABLED", Paused => "PAUSED" }
}

string_enum! {
    /// The lifecycle of one run: `PENDING → READY → RUNNING → SUCCESS | FAILED`, or `MISSED`.
    InstanceStatus {
        Pending => "PENDING",
        Ready => "READY",
        Running => "RUNNING",
        Success => "SUCCESS",
        Failed => "FAILED",
        Missed => "MISSED",
    }
}

impl InstanceStatus {
    /// Final states never change again.
    pub fn is_final(self) -> bool {
        matches!(self, Self::Success | Self::Failed | Self::Missed)
    }
}

string_enum! {
    /// Why a run exists.
    TriggerType { Schedule => "SCHEDULE", Manual => "MANUAL" }
}

/// A task row.
#[derive(Debug, Clone, Queryable, Selectable, Identifiable)]
#[diesel(table_name = ax_task)]
#[diesel(check_for_backend(diesel::mysql::Mysql, diesel::sqlite::Sqlite))]
pub struct Task {
    pub id: i64,
    pub name: String,
    pub scene: String,
    pub cron: String,
    pub handler_url: String,
    pub params: String,
    pub max_retry: i32,
    pub timeout_ms: i64,
    pub status: String,
    pub next_run_at: Option<NaiveDateTime>,
    pub created_at: NaiveDateTime,
    pub updated_at: NaiveDateTime,
    pub retry_backoff_secs: Option<i32>,
    pub retry_factor: Option<i32>,
    pub misfire_threshold_secs: Option<i32>,
    pub dependency_timeout_secs: Option<i32>,
}

/// The fields a user sets on a task; used for insert and full update.
#[derive(Debug, Clone, Insertable, AsChangeset)]
#[diesel(table_name = ax_task)]
#[diesel(treat_none_as_null = true)]
pub struct TaskFields {
    pub name: String,
    pub scene: String,
    pub cron: String,
    pub handler_url: String,
    pub params: String,
    pub max_retry: i32,
    pub timeout_ms: i64,
    pub status: String,
    pub next_run_at: Option<NaiveDateTime>,
    pub updated_at: NaiveDateTime,
    pub retry_backoff_secs: Option<i32>,
    pub retry_factor: Option<i32>,
    pub misfire_threshold_secs: Option<i32>,
    pub dependency_timeout_secs: Option<i32>,
}

/// An instance row.
#[derive(Debug, Clone, Queryable, Selectable, Identifiable)]
#[diesel(table_name = ax_instance)]
#[diesel(check_for_backend(diesel::mysql::Mysql, diesel::sqlite::Sqlite))]
pub struct Instance {
    pub id: i64,
    pub task_id: i64,
    pub request_id: String,
    pub trigger_type: String,
    pub scheduled_at: NaiveDateTime,
    pub trigger_at: NaiveDateTime,
    pub status: String,
    pub attempt: i32,
    pub retry_count: i32,
    pub callback_code: Option<String>,
    pub callback_message: Option<String>,
    pub deadline_at: Option<NaiveDateTime>,
    pub fired_by: String,
    pub created_at: NaiveDateTime,
    pub finished_at: Option<NaiveDateTime>,
    /// READY: when it is to be (re)dispatched, or, once claimed, when the claim lapses.
    pub next_attempt_at: Option<NaiveDateTime>,
    /// Params of a manual run that overrode the task's.
    pub params: Option<String>,
}

/// A new run, inserted when it fires.
#[derive(Debug, Clone, Insertable)]
#[diesel(table_name = ax_instance)]
pub struct NewInstance {
    pub task_id: i64,
    pub request_id: String,
    pub trigger_type: String,
    pub scheduled_at: NaiveDateTime,
    pub trigger_at: NaiveDateTime,
    pub status: String,
    pub fired_by: String,
    pub created_at: NaiveDateTime,
    /// Set for runs final at birth (`MISSED`).
    pub finished_at: Option<NaiveDateTime>,
    /// For READY runs: when the firing process's claim on the dispatch lapses; for PENDING
    /// runs: when their upstreams are checked next.
    pub next_attempt_at: Option<NaiveDateTime>,
    /// For PENDING runs: when waiting for upstreams gives up.
    pub deadline_at: Option<NaiveDateTime>,
    /// A manual run's params, when they override the task's.
    pub params: Option<String>,
}
