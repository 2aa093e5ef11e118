//! What the timelines, the failure heat-maps and the run page's reasons read: each a bounded
//! range of one index, whatever the number of runs stored.

use ax_core::ids::SceneName;
use chrono::NaiveDateTime;
use diesel::prelude::*;
use diesel_async::RunQueryDsl;

use crate::rows::schema::ax_instance::dsl as i;
use crate::rows::schema::ax_task::dsl as t;
use crate::rows::schema::ax_task_dependency::dsl as d;
use crate::with_conn;
use crate::{from_db, Conn, StoreError};
use ax_core::run::history::{Span, FAILURES};
use ax_core::run::{RequestId, RunStatus, TaskId, TriggerType};

type SpanRow = (
    RequestId,
    TaskId,
    RunStatus,
    TriggerType,
    NaiveDateTime,
    Option<NaiveDateTime>,
    Option<NaiveDateTime>,
);

/// The latest `limit` runs of these tasks scheduled from `since`, newest first (read from
/// `idx_ax_instance_task (task_id, scheduled_at)`, one range a task).
pub async fn spans(
    conn: &mut Conn,
    tasks: &[TaskId],
    since: NaiveDateTime,
    limit: i64,
) -> Result<Vec<Span>, StoreError> {
    let rows: Vec<SpanRow> = with_conn!(conn, |c| i::ax_instance
        .filter(i::task_id.eq_any(tasks))
        .filter(i::scheduled_at.ge(since))
        .order((i::scheduled_at.desc(), i::id.desc()))
        .limit(limit)
        .select((
            i::request_id,
            i::task_id,
            i::status,
            i::trigger_type,
            i::scheduled_at,
            i::dispatched_at,
            i::finished_at,
        ))
        .load(c)
        .await)?;
    Ok(rows
        .into_iter()
        .map(
            |(request_id, task_id, status, trigger, scheduled, dispatched, finished)| Span {
                request_id,
                task_id,
                status,
                trigger,
                scheduled: from_db(scheduled),
                dispatched: dispatched.map(from_db),
                finished: finished.map(from_db),
            },
        )
        .collect())
}

/// When the latest `limit` failed runs of these tasks that finished from `since` finished,
/// newest first (read from `idx_ax_instance_task_status (task_id, status, finished_at)`).
pub async fn failure_times(
    conn: &mut Conn,
    tasks: &[TaskId],
    since: NaiveDateTime,
    limit: i64,
) -> Result<Vec<NaiveDateTime>, StoreError> {
    let rows: Vec<Option<NaiveDateTime>> = with_conn!(conn, |c| i::ax_instance
        .filter(i::task_id.eq_any(tasks))
        .filter(i::status.eq_any(FAILURES))
        .filter(i::finished_at.ge(since))
        .order(i::finished_at.desc())
        .limit(limit)
        .select(i::finished_at)
        .load(c)
        .await)?;
    Ok(rows.into_iter().flatten().collect())
}

/// Up to `limit` of a scene's tasks, `(id, name)` by name (the `(scene, name)` index).
pub async fn scene_tasks(
    conn: &mut Conn,
    scene: &SceneName,
    limit: i64,
) -> Result<Vec<(TaskId, String)>, StoreError> {
    Ok(with_conn!(conn, |c| t::ax_task
        .filter(t::scene.eq(scene))
        .order(t::name.asc())
        .limit(limit)
        .select((t::id, t::name))
        .load(c)
        .await)?)
}

/// Up to `limit` tasks that wait on `task` (`idx_ax_task_dependency_upstream`).
pub async fn downstreams(
    conn: &mut Conn,
    task: TaskId,
    limit: i64,
) -> Result<Vec<TaskId>, StoreError> {
    Ok(with_conn!(conn, |c| d::ax_task_dependency
        .filter(d::depends_on.eq(task))
        .order(d::task_id.asc())
        .limit(limit)
        .select(d::task_id)
        .load(c)
        .await)?)
}

/// The latest run of `task` scheduled at or before `at`: the one a downstream run scheduled
/// at `at` waited on (as `pending::upstream_states` reads it).
pub async fn latest_at_or_before(
    conn: &mut Conn,
    task: TaskId,
    at: NaiveDateTime,
) -> Result<Option<(RequestId, RunStatus)>, StoreError> {
    Ok(with_conn!(conn, |c| i::ax_instance
        .filter(i::task_id.eq(task))
        .filter(i::scheduled_at.le(at))
        .order((i::scheduled_at.desc(), i::id.desc()))
        .select((i::request_id, i::status))
        .first(c)
        .await
        .optional())?)
}
