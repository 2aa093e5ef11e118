//! Copying a deployment from one store to another, whatever their backends (`ax copy`): the
//! definitions (calendars, tasks and their dependencies, scenes, executor groups and their
//! members), the audit log, and the runs scheduled since a given time with their attempts, log
//! lines and alerts. Rows keep their ids, so a run still names its task. The target must be empty, or
//! hold an unfinished copy of the same source: a copy that failed half-way is run again, and
//! what it wrote already is skipped.

use chrono::{DateTime, NaiveDateTime, Utc};
use diesel::prelude::*;
use diesel_async::{RunQueryDsl, SimpleAsyncConnection};

use crate::rows::schema::{
    ax_alert, ax_alert_event, ax_attempt, ax_audit, ax_calendar, ax_executor_group,
    ax_executor_member, ax_instance, ax_meta, ax_run_log, ax_run_log_attempt, ax_scene, ax_task,
    ax_task_dependency,
};
use crate::{server_or_sqlite, to_db, with_conn, Conn, Db, StoreError};

/// Rows read from the source at a time.
const PAGE: i64 = 500;
/// Rows a statement inserts into the target: within every backend's limit on parameters.
const ROWS_PER_INSERT: usize = 500;
/// The target's `ax_meta` row that names the copy it holds and whether it is complete.
const COPY_MARK: &str = "copied_from";

/// Why a copy cannot be made.
#[derive(Debug, thiserror::Error)]
pub enum CopyError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("the target already holds {0}: ax copy writes only into an empty store")]
    TargetNotEmpty(String),
    #[error("the target is already a complete copy of {0}")]
    AlreadyCopied(String),
}

/// How many rows of each kind a copy wrote (or found already there, on a re-run).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Counts {
    pub calendars: u64,
    pub tasks: u64,
    pub dependencies: u64,
    pub scenes: u64,
    pub groups: u64,
    pub members: u64,
    pub audit: u64,
    pub runs: u64,
    pub attempts: u64,
    pub log_lines: u64,
    pub log_attempts: u64,
    pub alerts: u64,
}

impl Counts {
    /// Each kind's name and count, in the order they are copied.
    pub fn listed(&self) -> [(&'static str, u64); 12] {
        [
            ("calendars", self.calendars),
            ("tasks", self.tasks),
            ("dependencies", self.dependencies),
            ("scenes", self.scenes),
            ("groups", self.groups),
            ("members", self.members),
            ("audit", self.audit),
            ("runs", self.runs),
            ("attempts", self.attempts),
            ("log lines", self.log_lines),
            ("log attempts", self.log_attempts),
            ("alerts", self.alerts),
        ]
    }
}

/// Declares the row of a copied table: every column, read and written as it is.
macro_rules! copied_row {
    ($row:ident, $table:ident { $($field:ident: $ty:ty),+ $(,)? }) => {
        #[derive(Queryable, Selectable, Insertable, Clone)]
        #[diesel(table_name = $table)]
        #[diesel(treat_none_as_default_value = false)]
        struct $row {
            $($field: $ty),+
        }
    };
}

copied_row!(TaskRow, ax_task {
    id: i64, name: String, scene: String, cron: String, handler_url: String, params: String,
    max_retry: i32, timeout_ms: i64, status: String, next_run_at: Option<NaiveDateTime>,
    created_at: NaiveDateTime, updated_at: NaiveDateTime, retry_backoff_secs: Option<i32>,
    retry_factor: Option<i32>, misfire_threshold_secs: Option<i32>,
    dependency_timeout_secs: Option<i32>, time_zone: String, overlap: String, jitter_secs: i32,
    version: i64, labels: String, executor: Option<String>, alerts: Option<String>,
    alert_lag_ms: Option<i64>, paused_at: Option<NaiveDateTime>, paused_by: Option<String>,
    calendars: Option<String>,
});
copied_row!(
    DependencyRow,
    ax_task_dependency {
        task_id: i64,
        depends_on: i64
    }
);
copied_row!(SceneRow, ax_scene {
    scene: String, paused_at: Option<NaiveDateTime>, alerts: Option<String>,
    paused_by: Option<String>,
});
copied_row!(
    CalendarRow,
    ax_calendar {
        name: String,
        days: String,
        updated_at: NaiveDateTime,
    }
);
copied_row!(
    GroupRow,
    ax_executor_group {
        name: String,
        routing: String,
        max_in_flight: i32,
        updated_at: NaiveDateTime,
    }
);
copied_row!(MemberRow, ax_executor_member {
    group_name: String, url: String, position: i64, capacity: Option<i32>,
    registered_at: NaiveDateTime, last_seen_at: Option<NaiveDateTime>,
    registered_by: Option<String>,
});
copied_row!(
    AuditRow,
    ax_audit {
        id: i64,
        at: NaiveDateTime,
        actor: String,
        action: String,
        target: String,
        summary: String,
    }
);
copied_row!(RunRow, ax_instance {
    id: i64, task_id: i64, request_id: String, trigger_type: String,
    scheduled_at: NaiveDateTime, trigger_at: NaiveDateTime, status: String, attempt: i32,
    retry_count: i32, callback_code: Option<String>, callback_message: Option<String>,
    deadline_at: Option<NaiveDateTime>, fired_by: String, created_at: NaiveDateTime,
    finished_at: Option<NaiveDateTime>, next_attempt_at: Option<NaiveDateTime>,
    params: Option<String>, dispatched_attempt: i32, claimed_until: Option<NaiveDateTime>,
    dispatched_at: Option<NaiveDateTime>, member: Option<String>, shard_index: Option<i32>,
    shard_total: Option<i32>,
});
copied_row!(AttemptRow, ax_attempt {
    id: i64, request_id: String, attempt: i32, ended_at: NaiveDateTime, code: Option<String>,
    message: Option<String>, process: String, member: Option<String>,
});
copied_row!(
    LogLineRow,
    ax_run_log {
        id: i64,
        request_id: String,
        attempt: i32,
        at: NaiveDateTime,
        text: String,
        bytes: i32,
    }
);
copied_row!(LogAttemptRow, ax_run_log_attempt {
    request_id: String, attempt: i32, progress: Option<i32>, line_count: i32, byte_count: i64,
    dropped: i64, output: Option<String>, updated_at: NaiveDateTime,
});
copied_row!(AlertRow, ax_alert {
    id: String, channel: String, event: String, subject: String, task_id: Option<i64>,
    scene: Option<String>, request_id: Option<String>, code: Option<String>,
    message: Option<String>, count: i32, folded: i32, folded_since: Option<NaiveDateTime>,
    at: NaiveDateTime, status: String, tries: i32, next_try_at: Option<NaiveDateTime>,
    claimant: Option<String>, claimed_until: Option<NaiveDateTime>, sent_at: Option<NaiveDateTime>,
    last_error: Option<String>, created_at: NaiveDateTime,
});

/// Inserts `$rows` (a `Vec`) into `$table` on `$conn` in one transaction, skipping those
/// already there (a re-run); returns how many it was given. A database server takes
/// [`ROWS_PER_INSERT`] a statement, SQLite (no round trip, and no batch insert that skips
/// duplicates in diesel) one.
macro_rules! insert_new {
    ($conn:expr, $table:path, $rows:expr) => {{
        let rows = $rows;
        let count = rows.len() as u64;
        $conn
            .transaction(move |conn| {
                Box::pin(async move {
                    server_or_sqlite!(
                        conn,
                        |c| for chunk in rows.chunks(ROWS_PER_INSERT) {
                            diesel::insert_into($table)
                                .values(chunk)
                                .on_conflict_do_nothing()
                                .execute(c)
                                .await?;
                        },
                        |c| for row in &rows {
                            diesel::insert_into($table)
                                .values(row)
                                .on_conflict_do_nothing()
                                .execute(c)
                                .await?;
                        }
                    );
                    Ok(())
                })
            })
            .await?;
        count
    }};
}

/// Copies every row of the small `$table` (each a `$row`) from `$from` into `$to`; how many.
macro_rules! whole {
    (($from:expr, $to:expr), $table:ident, $row:ty) => {{
        let rows: Vec<$row> = with_conn!($from, |c| $table::table
            .select(<$row>::as_select())
            .load(c)
            .await)?;
        insert_new!($to, $table::table, rows)
    }};
}

/// Copies every row of `$table` (each a `$row`) from `$from` into `$to`, [`PAGE`] rows at a
/// time in the order of their ids; how many.
macro_rules! in_id_pages {
    (($from:expr, $to:expr), $table:ident, $row:ty) => {{
        let (mut after, mut copied) = (i64::MIN, 0);
        loop {
            let rows: Vec<$row> = with_conn!($from, |c| $table::table
                .filter($table::id.gt(after))
                .order($table::id)
                .limit(PAGE)
                .select(<$row>::as_select())
                .load(c)
                .await)?;
            let Some(last) = rows.last() else { break };
            after = last.id;
            copied += insert_new!($to, $table::table, rows);
        }
        copied
    }};
}

/// Copies the rows of `$table` (each a `$row`) of the runs `$ids` from `$from` into `$to`;
/// how many.
macro_rules! of_runs {
    (($from:expr, $to:expr), $table:ident, $row:ty, $ids:expr) => {{
        let rows: Vec<$row> = with_conn!($from, |c| $table::table
            .filter($table::request_id.eq_any($ids))
            .select(<$row>::as_select())
            .load(c)
            .await)?;
        insert_new!($to, $table::table, rows)
    }};
}

/// Copies the deployment in `from` into `to`, with the runs scheduled since `runs_since`;
/// `source` names the source in the target's mark (its URL without a password).
pub async fn copy(
    (from, source): (&Db, &str),
    to: &Db,
    runs_since: DateTime<Utc>,
) -> Result<Counts, CopyError> {
    let (mut from, mut to) = (from.conn().await?, to.conn().await?);
    claim_target(&mut to, source).await?;
    let mut counts = Counts::default();
    copy_definitions(&mut from, &mut to, &mut counts).await?;
    copy_runs(&mut from, &mut to, to_db(runs_since), &mut counts).await?;
    settle_target(&mut to).await?;
    mark(&mut to, source, "done").await?;
    Ok(counts)
}

/// The store `to` is a complete copy of, if it is one.
pub async fn complete_copy_of(to: &Db) -> Result<Option<String>, StoreError> {
    let mut conn = to.conn().await?;
    let marked: Option<String> = with_conn!(&mut conn, |c| ax_meta::table
        .filter(ax_meta::name.eq(COPY_MARK))
        .select(ax_meta::value)
        .first(c)
        .await
        .optional())?;
    Ok(marked
        .as_deref()
        .and_then(|mark| mark.strip_prefix("done "))
        .map(str::to_string))
}

/// Checks that the target is empty (or holds an unfinished copy of `source`) and marks it
/// as being a copy of `source`.
async fn claim_target(to: &mut Conn, source: &str) -> Result<(), CopyError> {
    let marked: Option<String> = with_conn!(to, |c| ax_meta::table
        .filter(ax_meta::name.eq(COPY_MARK))
        .select(ax_meta::value)
        .first(c)
        .await
        .optional())
    .map_err(StoreError::from)?;
    match marked.as_deref().and_then(|mark| mark.split_once(' ')) {
        Some(("done", of)) => return Err(CopyError::AlreadyCopied(of.to_string())),
        Some(("copying", of)) if of == source => return Ok(()),
        Some((_, of)) => {
            return Err(CopyError::TargetNotEmpty(format!(
                "an unfinished copy of {of}"
            )))
        }
        None => {}
    }
    let tasks: i64 =
        with_conn!(to, |c| ax_task::table.count().get_result(c).await).map_err(StoreError::from)?;
    let runs: i64 = with_conn!(to, |c| ax_instance::table.count().get_result(c).await)
        .map_err(StoreError::from)?;
    let audit: i64 = with_conn!(to, |c| ax_audit::table.count().get_result(c).await)
        .map_err(StoreError::from)?;
    if tasks + runs + audit > 0 {
        return Err(CopyError::TargetNotEmpty(format!(
            "{tasks} tasks, {runs} runs and {audit} audit entries"
        )));
    }
    mark(to, source, "copying").await?;
    Ok(())
}

/// Writes the target's mark: `state` (`copying` or `done`) and the source.
async fn mark(to: &mut Conn, source: &str, state: &str) -> Result<(), StoreError> {
    let value = format!("{state} {source}");
    with_conn!(to, |c| diesel::delete(
        ax_meta::table.filter(ax_meta::name.eq(COPY_MARK))
    )
    .execute(c)
    .await)?;
    with_conn!(to, |c| diesel::insert_into(ax_meta::table)
        .values((ax_meta::name.eq(COPY_MARK), ax_meta::value.eq(&value)))
        .execute(c)
        .await)?;
    Ok(())
}

/// Calendars, tasks, their dependencies, scenes, groups, members and the audit log: all of them.
async fn copy_definitions(
    from: &mut Conn,
    to: &mut Conn,
    counts: &mut Counts,
) -> Result<(), StoreError> {
    counts.calendars += whole!((from, to), ax_calendar, CalendarRow);
    counts.tasks += in_id_pages!((from, to), ax_task, TaskRow);
    counts.dependencies += whole!((from, to), ax_task_dependency, DependencyRow);
    counts.scenes += whole!((from, to), ax_scene, SceneRow);
    counts.groups += whole!((from, to), ax_executor_group, GroupRow);
    counts.members += whole!((from, to), ax_executor_member, MemberRow);
    counts.audit += in_id_pages!((from, to), ax_audit, AuditRow);
    Ok(())
}

/// The runs scheduled since `since`, a page at a time, each page with its attempts, log
/// lines, log summaries and alerts.
async fn copy_runs(
    from: &mut Conn,
    to: &mut Conn,
    since: NaiveDateTime,
    counts: &mut Counts,
) -> Result<(), StoreError> {
    let mut after = i64::MIN;
    loop {
        let runs: Vec<RunRow> = with_conn!(from, |c| ax_instance::table
            .filter(ax_instance::id.gt(after))
            .filter(ax_instance::scheduled_at.ge(since))
            .order(ax_instance::id)
            .limit(PAGE)
            .select(RunRow::as_select())
            .load(c)
            .await)?;
        let Some(last) = runs.last() else { break };
        after = last.id;
        let ids: Vec<String> = runs.iter().map(|run| run.request_id.clone()).collect();
        counts.runs += insert_new!(to, ax_instance::table, runs);
        counts.attempts += of_runs!((from, to), ax_attempt, AttemptRow, &ids);
        counts.log_lines += of_runs!((from, to), ax_run_log, LogLineRow, &ids);
        counts.log_attempts += of_runs!((from, to), ax_run_log_attempt, LogAttemptRow, &ids);
        counts.alerts += of_runs!((from, to), ax_alert, AlertRow, &ids);
    }
    Ok(())
}

/// What the copied rows leave behind in the target: the alert events its triggers queued
/// for runs that ended long ago (told already, by the source), and on PostgreSQL identity
/// counters behind the ids copied in (MySQL and SQLite move theirs on by themselves) and a
/// planner that knows nothing of the rows yet (a list of 5,000,000 runs by status took 1.3 s
/// instead of 43 ms until autovacuum came by).
async fn settle_target(to: &mut Conn) -> Result<(), StoreError> {
    with_conn!(to, |c| diesel::delete(ax_alert_event::table)
        .execute(c)
        .await)?;
    if let Conn::Postgres(c) = to {
        let tables = [
            "ax_task",
            "ax_instance",
            "ax_audit",
            "ax_attempt",
            "ax_run_log",
        ];
        let sql: String = tables
            .iter()
            .map(|table| {
                format!(
                    "SELECT setval(pg_get_serial_sequence('{table}', 'id'), \
                     COALESCE((SELECT MAX(id) FROM {table}), 0) + 1, false);"
                )
            })
            .collect();
        c.batch_execute(&format!("{sql} ANALYZE;")).await?;
    }
    Ok(())
}
