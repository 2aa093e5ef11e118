//! The preload window: enabled tasks due within it, read page by page after a cursor.

use chrono::{DateTime, NaiveDateTime};
use diesel::prelude::*;
use diesel_async::RunQueryDsl;

use super::upstreams::has_upstreams;
use crate::queries::shares;
use crate::rows::models::{Task, TaskStatus};
use crate::rows::schema::ax_task::dsl as t;
use crate::with_conn;
use crate::{Conn, StoreError};
use ax_core::cluster::shares::Share;
use ax_core::run::TaskId;

/// Where a scan of due tasks has got to: the (next run, id) of the last task seen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DueCursor {
    pub next_run_at: NaiveDateTime,
    pub id: TaskId,
}

impl DueCursor {
    /// Before every task due after `at` (and after every task due at or before it).
    pub fn after(at: NaiveDateTime) -> Self {
        DueCursor {
            next_run_at: at,
            id: TaskId(i64::MAX),
        }
    }

    /// Before every task (no task runs before 1970; MySQL cannot store chrono's minimum).
    pub fn start() -> Self {
        DueCursor {
            next_run_at: DateTime::UNIX_EPOCH.naive_utc(),
            id: TaskId(i64::MIN),
        }
    }

    /// The cursor after `task`.
    pub fn past(task: &Task) -> Self {
        DueCursor {
            next_run_at: task.next_run_at.unwrap_or(DateTime::UNIX_EPOCH.naive_utc()),
            id: task.id,
        }
    }
}

/// Enabled tasks of `share` due at or before `until`, after `cursor`, by (next run, id): one
/// page of a window scan, each with whether it has upstreams (what its wheel entry needs). The
/// keyset follows the (status, next_run_at) index, so a large window streams in bounded pages
/// and a narrow one (the overdue scan) costs an index probe.
pub async fn due_until(
    conn: &mut Conn,
    (cursor, until): (DueCursor, NaiveDateTime),
    share: Share,
    limit: i64,
) -> Result<Vec<(Task, bool)>, StoreError> {
    let partitions = shares::filter_of(share);
    Ok(with_conn!(conn, |c| {
        let mut query = t::ax_task
            .filter(t::status.eq(TaskStatus::Enabled))
            .filter(t::next_run_at.le(until))
            .filter(
                t::next_run_at.gt(cursor.next_run_at).or(t::next_run_at
                    .eq(cursor.next_run_at)
                    .and(t::id.gt(cursor.id))),
            )
            .into_boxed();
        if let Some(partitions) = &partitions {
            query = query.filter(shares::partition().eq_any(partitions));
        }
        query
            .order((t::next_run_at.asc(), t::id.asc()))
            .limit(limit)
            .select((Task::as_select(), has_upstreams()))
            .load(c)
            .await
    })?)
}
