//! The reads of a look for the run feed (see `ax_core::run::feed`): open runs, and the runs
//! ended and the attempt logs updated since a time, each with its task's scene.

use chrono::NaiveDateTime;
use diesel::prelude::*;
use diesel_async::RunQueryDsl;

use crate::rows::schema::ax_instance::dsl as i;
use crate::rows::schema::ax_run_log_attempt::dsl as s;
use crate::rows::schema::ax_task::dsl as t;
use crate::with_conn;
use crate::{Conn, StoreError};
use ax_core::run::feed::{Look, SeenLog, SeenRun};
use ax_core::run::{RunStatus, TaskId, OPEN};

/// Most rows of each kind one look reads: past it, a look tells the newest and drops the rest.
pub const MAX_ROWS: i64 = 20_000;

type RunRow = (
    String,
    i64,
    Option<String>,
    RunStatus,
    Option<NaiveDateTime>,
);
/// request id, attempt, progress, lines kept, lines dropped, updated at, task, scene.
type LogRow = (
    String,
    i32,
    Option<i32>,
    i32,
    i64,
    NaiveDateTime,
    i64,
    Option<String>,
);

fn seen_run((request_id, task_id, scene, status, finished_at): RunRow) -> SeenRun {
    SeenRun {
        request_id,
        task_id: TaskId(task_id),
        scene: scene.unwrap_or_default(),
        status,
        finished_at,
    }
}

/// The open runs, and what ended or logged at or after `since`.
pub async fn look(conn: &mut Conn, since: NaiveDateTime) -> Result<Look, StoreError> {
    let columns = (
        i::request_id,
        i::task_id,
        t::scene.nullable(),
        i::status,
        i::finished_at,
    );
    let open: Vec<RunRow> = with_conn!(conn, |c| i::ax_instance
        .left_join(t::ax_task.on(t::id.eq(i::task_id)))
        .filter(i::status.eq_any(OPEN))
        .order(i::id.desc())
        .limit(MAX_ROWS)
        .select(columns)
        .load(c)
        .await)?;
    let ended: Vec<RunRow> = with_conn!(conn, |c| i::ax_instance
        .left_join(t::ax_task.on(t::id.eq(i::task_id)))
        .filter(i::finished_at.ge(since))
        .order(i::finished_at.asc())
        .limit(MAX_ROWS)
        .select(columns)
        .load(c)
        .await)?;
    let logs: Vec<LogRow> = with_conn!(conn, |c| s::ax_run_log_attempt
        .inner_join(i::ax_instance.on(i::request_id.eq(s::request_id)))
        .left_join(t::ax_task.on(t::id.eq(i::task_id)))
        .filter(s::updated_at.ge(since))
        .order(s::updated_at.asc())
        .limit(MAX_ROWS)
        .select((
            s::request_id,
            s::attempt,
            s::progress,
            s::line_count,
            s::dropped,
            s::updated_at,
            i::task_id,
            t::scene.nullable(),
        ))
        .load(c)
        .await)?;
    Ok(Look {
        open: open.into_iter().map(seen_run).collect(),
        ended: ended.into_iter().map(seen_run).collect(),
        logs: logs
            .into_iter()
            .map(
                |(request_id, attempt, progress, kept, dropped, updated_at, task, scene)| SeenLog {
                    request_id,
                    task_id: TaskId(task),
                    scene: scene.unwrap_or_default(),
                    attempt,
                    progress,
                    lines: i64::from(kept) + dropped,
                    updated_at,
                },
            )
            .collect(),
        since,
    })
}
