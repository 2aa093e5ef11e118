//! The task change feed (`ax_task_change`, written by the database's triggers in the statement
//! that changes a task) and the window of due tasks the minute's reconcile compares with the
//! wheel (see `ax_server::plan::sync`, which decides what to read and what differs).

use chrono::NaiveDateTime;
use diesel::dsl::max;
use diesel::prelude::*;
use diesel_async::RunQueryDsl;

use crate::queries::shares;
use crate::rows::models::TaskStatus;
use crate::rows::schema::ax_task::dsl as t;
use crate::rows::schema::ax_task_change::dsl as c;
use crate::with_conn;
use crate::{from_db, Conn, StoreError};
use ax_core::cluster::shares::Share;
use ax_core::run::TaskId;

/// Most change rows one read takes; the next read, a second later, takes the rest.
pub const PAGE: i64 = 5_000;

/// The newest change's id (0 before any): where a process starting now begins the feed.
pub async fn latest(conn: &mut Conn) -> Result<i64, StoreError> {
    let latest: Option<i64> = with_conn!(conn, |c| c::ax_task_change
        .select(max(c::id))
        .first(c)
        .await)?;
    Ok(latest.unwrap_or(0))
}

/// The changes past `after` and in the `gaps` (inclusive ranges of ids), by id, from the
/// first past `from` (a page of a read that goes on past the last page): (change id, task id).
pub async fn read(
    conn: &mut Conn,
    (gaps, after): (&[(i64, i64)], i64),
    from: i64,
) -> Result<Vec<(i64, TaskId)>, StoreError> {
    let rows: Vec<(i64, i64)> = with_conn!(conn, |c| {
        let mut wanted = c::ax_task_change
            .select((c::id, c::task_id))
            .filter(c::id.gt(after))
            .into_boxed();
        for &(low, high) in gaps {
            wanted = wanted.or_filter(c::id.between(low, high));
        }
        wanted
            .filter(c::id.gt(from))
            .order(c::id)
            .limit(PAGE)
            .load(c)
            .await
    })?;
    Ok(rows
        .into_iter()
        .map(|(id, task)| (id, TaskId(task)))
        .collect())
}

/// Deletes the changes written before `before`, always keeping the newest, so that ids go on
/// rising after a database restart and a cursor never meets an id again.
pub async fn prune(conn: &mut Conn, before: NaiveDateTime) -> Result<usize, StoreError> {
    let newest = latest(conn).await?;
    Ok(with_conn!(conn, |c| diesel::delete(
        c::ax_task_change
            .filter(c::at.lt(before))
            .filter(c::id.lt(newest))
    )
    .execute(c)
    .await)?)
}

/// The enabled tasks of `share` due by `until`, as the store holds them: (task, its next
/// run's second, its version).
pub async fn due_by(
    conn: &mut Conn,
    until: NaiveDateTime,
    share: Share,
) -> Result<Vec<(TaskId, i64, i64)>, StoreError> {
    let partitions = shares::filter_of(share);
    let rows: Vec<(i64, i64, Option<NaiveDateTime>)> = with_conn!(conn, |c| {
        let mut query = t::ax_task
            .select((t::id, t::version, t::next_run_at))
            .filter(t::status.eq(TaskStatus::Enabled))
            .filter(t::next_run_at.le(until))
            .into_boxed();
        if let Some(partitions) = &partitions {
            query = query.filter(shares::partition().eq_any(partitions));
        }
        query.load(c).await
    })?;
    Ok(rows
        .into_iter()
        .filter_map(|(id, version, next)| {
            let second = from_db(next?).timestamp();
            Some((TaskId(id), second, version))
        })
        .collect())
}
