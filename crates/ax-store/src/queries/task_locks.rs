//! The schedule locks: a task's row locked while its runs are decided, so of several ax
//! processes one decides at a time.

use std::collections::HashMap;

use chrono::NaiveDateTime;
use diesel::prelude::*;
use diesel_async::RunQueryDsl;

use crate::pool::prepared::{padded, Kept};
use crate::rows::models::TaskStatus;
use crate::rows::schema::ax_task::dsl as t;
use crate::{server_or_sqlite, Conn, StoreError};
use ax_core::run::TaskId;

/// The `next_run_at` and version of these tasks, locked for the rest of the transaction
/// (enabled ones only; a paused or deleted task is absent).
pub async fn lock_task_schedules(
    conn: &mut Conn,
    ids: &[TaskId],
) -> Result<HashMap<TaskId, (Option<NaiveDateTime>, i64)>, StoreError> {
    // The rows must be found and locked through the primary key: read through the
    // (status, next_run_at) index, MySQL locks index entries that concurrent fire batches are
    // updating, and they deadlock. So the filter names only the key, and `updated_at`, outside
    // that index, keeps the index from covering the query.
    let ids = padded(ids);
    let query = t::ax_task.filter(t::id.eq_any(&ids)).select((
        t::id,
        t::next_run_at,
        t::version,
        t::status,
        t::updated_at,
    ));
    // MySQL needs the row locks to keep another process from advancing a task in between;
    // SQLite's `BEGIN IMMEDIATE` already holds the only write lock.
    type Row = (
        TaskId,
        Option<NaiveDateTime>,
        i64,
        TaskStatus,
        NaiveDateTime,
    );
    let rows: Vec<Row> = server_or_sqlite!(
        conn,
        |c| Kept(query.for_update()).load(c).await?,
        |c| Kept(query).load(c).await?
    );
    Ok(rows
        .into_iter()
        .filter(|(_, _, _, status, _)| *status == TaskStatus::Enabled)
        .map(|(id, next_run_at, version, _, _)| (id, (next_run_at, version)))
        .collect())
}
