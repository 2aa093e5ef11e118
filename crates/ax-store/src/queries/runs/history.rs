//! The run history: a run, a task's runs, pages of runs by filter and cursor, the stats' rows,
//! and the retention that deletes old ones.

use ax_core::ids::SceneName;
use chrono::NaiveDateTime;
use diesel::prelude::*;
use diesel_async::RunQueryDsl;

use crate::queries::{run_log, Page};
use crate::rows::models::Run;
use crate::rows::schema::ax_instance::dsl as i;
use crate::rows::schema::ax_task::dsl as t;
use crate::with_conn;
use crate::{Conn, StoreError};
use ax_core::run::{RequestId, RunStatus, TaskId, TriggerType};

/// The shards of `task_id`'s broadcast fire at `scheduled_at`, in shard order (none for a
/// run without siblings).
pub async fn shards_of(
    conn: &mut Conn,
    task_id: TaskId,
    scheduled_at: NaiveDateTime,
) -> Result<Vec<Run>, StoreError> {
    Ok(with_conn!(conn, |c| i::ax_instance
        .filter(i::task_id.eq(task_id))
        .filter(i::scheduled_at.eq(scheduled_at))
        .filter(i::trigger_type.eq(TriggerType::Schedule))
        .filter(i::shard_total.gt(1))
        .order(i::shard_index.asc())
        .select(Run::as_select())
        .load(c)
        .await)?)
}

/// The run with this request id.
pub async fn find_by_request_id(
    conn: &mut Conn,
    request_id: &RequestId,
) -> Result<Option<Run>, StoreError> {
    Ok(with_conn!(conn, |c| i::ax_instance
        .filter(i::request_id.eq(request_id))
        .select(Run::as_select())
        .first(c)
        .await
        .optional())?)
}

/// A task's runs, newest scheduled first, with their total count.
pub async fn list_for_task(
    conn: &mut Conn,
    task_id: TaskId,
    page: Page,
) -> Result<(Vec<Run>, i64), StoreError> {
    Ok(with_conn!(conn, |c| {
        let total: i64 = i::ax_instance
            .filter(i::task_id.eq(task_id))
            .count()
            .get_result(c)
            .await?;
        let rows = i::ax_instance
            .filter(i::task_id.eq(task_id))
            .order((i::scheduled_at.desc(), i::id.desc()))
            .limit(page.limit)
            .offset(page.offset)
            .select(Run::as_select())
            .load(c)
            .await?;
        (rows, total)
    }))
}

/// Filters of the run history.
#[derive(Debug, Clone, Default)]
pub struct RunFilter {
    pub task_id: Option<TaskId>,
    /// Runs of any of these tasks (those a name names); none when it is empty.
    pub task_ids: Option<Vec<TaskId>>,
    pub scene: Option<SceneName>,
    /// Runs in any of these statuses; every status when it is empty.
    pub statuses: Vec<RunStatus>,
    /// Scheduled at or after.
    pub from: Option<NaiveDateTime>,
    /// Scheduled before.
    pub to: Option<NaiveDateTime>,
}

/// Where a page of the history ends: the (scheduled time, id) of its last run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cursor {
    pub scheduled_at: NaiveDateTime,
    pub id: i64,
}

impl Cursor {
    /// The cursor as clients see it: `<scheduled ms>.<id>`, opaque to them.
    pub fn to_text(self) -> String {
        format!(
            "{}.{}",
            self.scheduled_at.and_utc().timestamp_millis(),
            self.id
        )
    }

    /// A cursor read back from its text; `None` unless it is one.
    pub fn from_text(text: &str) -> Option<Cursor> {
        let (millis, id) = text.split_once('.')?;
        let id = id.parse::<i64>().ok().filter(|id| *id > 0)?;
        let at = chrono::DateTime::from_timestamp_millis(millis.parse().ok()?)?;
        Some(Cursor {
            scheduled_at: at.naive_utc(),
            id,
        })
    }
}

/// The first slice of time a scene's history is read in; each next one is longer.
const SCENE_SLICE_SECS: i64 = 3600;
/// How many times longer each next slice is.
const SCENE_SLICE_GROWTH: i32 = 4;
/// The most tasks a scene may have for its history to be read by their ids.
const SCENE_BY_IDS: i64 = 5000;

/// Runs matching the filter, newest scheduled first, after `cursor`; at most `limit`.
///
/// A scene's runs are read over the newest slice of time first, then over ever longer ones
/// until a page is full: asked at once, the database joins every run of the scene's tasks and
/// sorts them (millions for a large scene), where the page lies in the latest hour or so. The
/// page is the same either way, since each slice holds every run newer than its start.
pub async fn history(
    conn: &mut Conn,
    filter: &RunFilter,
    cursor: Option<Cursor>,
    limit: i64,
) -> Result<Vec<Run>, StoreError> {
    let by_task = filter.task_id.is_some() || filter.task_ids.is_some();
    let Some(scene) = filter.scene.clone().filter(|_| !by_task) else {
        return history_since(conn, filter, cursor, None, None, limit).await;
    };
    // A small scene's tasks are named by id: each task's runs of a slice are then one range of
    // `idx_ax_instance_task (task_id, scheduled_at)`, where the subquery would have the
    // database read every run of every task of the scene.
    let tasks: Vec<TaskId> = with_conn!(conn, |c| t::ax_task
        .filter(t::scene.eq(&scene))
        .select(t::id)
        .limit(SCENE_BY_IDS + 1)
        .load(c)
        .await)?;
    if tasks.is_empty() {
        return Ok(Vec::new());
    }
    let tasks = (tasks.len() as i64 <= SCENE_BY_IDS).then_some(tasks);
    let tasks = tasks.as_deref();
    let (first, last): (Option<NaiveDateTime>, Option<NaiveDateTime>) =
        with_conn!(conn, |c| i::ax_instance
            .select((
                diesel::dsl::min(i::scheduled_at),
                diesel::dsl::max(i::scheduled_at)
            ))
            .first(c)
            .await)?;
    let (Some(first), Some(last)) = (first, last) else {
        return Ok(Vec::new());
    };
    let newest = [cursor.map(|c| c.scheduled_at), filter.to]
        .into_iter()
        .flatten()
        .fold(last, NaiveDateTime::min);
    let oldest = filter.from.map_or(first, |from| from.max(first));
    let mut slice = chrono::Duration::seconds(SCENE_SLICE_SECS);
    loop {
        let since = newest - slice;
        if since <= oldest {
            return history_since(conn, filter, cursor, tasks, None, limit).await;
        }
        let runs = history_since(conn, filter, cursor, tasks, Some(since), limit).await?;
        if runs.len() as i64 == limit {
            return Ok(runs);
        }
        slice = slice * SCENE_SLICE_GROWTH;
    }
}

/// [`history`] over the runs scheduled at or after `since` (all when `None`); the scene's
/// tasks are `scene_tasks` when given.
async fn history_since(
    conn: &mut Conn,
    filter: &RunFilter,
    cursor: Option<Cursor>,
    scene_tasks: Option<&[TaskId]>,
    since: Option<NaiveDateTime>,
    limit: i64,
) -> Result<Vec<Run>, StoreError> {
    Ok(with_conn!(conn, |c| {
        let mut query = i::ax_instance.into_boxed();
        if let Some(since) = since {
            query = query.filter(i::scheduled_at.ge(since));
        }
        if let Some(task_id) = filter.task_id {
            query = query.filter(i::task_id.eq(task_id));
        }
        match (scene_tasks, &filter.scene) {
            (Some(ids), _) => query = query.filter(i::task_id.eq_any(ids)),
            (None, Some(scene)) => {
                let ids = t::ax_task.filter(t::scene.eq(scene.clone())).select(t::id);
                query = query.filter(i::task_id.eq_any(ids));
            }
            (None, None) => {}
        }
        if let Some(ids) = &filter.task_ids {
            query = query.filter(i::task_id.eq_any(ids.clone()));
        }
        if !filter.statuses.is_empty() {
            query = query.filter(i::status.eq_any(filter.statuses.clone()));
        }
        if let Some(from) = filter.from {
            query = query.filter(i::scheduled_at.ge(from));
        }
        if let Some(to) = filter.to {
            query = query.filter(i::scheduled_at.lt(to));
        }
        if let Some(cursor) = cursor {
            query = query.filter(
                i::scheduled_at.lt(cursor.scheduled_at).or(i::scheduled_at
                    .eq(cursor.scheduled_at)
                    .and(i::id.lt(cursor.id))),
            );
        }
        query
            .order((i::scheduled_at.desc(), i::id.desc()))
            .limit(limit)
            .select(Run::as_select())
            .load(c)
            .await
    })?)
}

/// What the stats read of a run: (status, trigger, code, scheduled, first dispatched).
pub type StatsRow = (
    RunStatus,
    TriggerType,
    Option<String>,
    NaiveDateTime,
    Option<NaiveDateTime>,
);

/// The stats rows of a task's runs scheduled in `[from, to)`.
pub async fn for_stats(
    conn: &mut Conn,
    task_id: TaskId,
    from: NaiveDateTime,
    to: NaiveDateTime,
) -> Result<Vec<StatsRow>, StoreError> {
    Ok(with_conn!(conn, |c| i::ax_instance
        .filter(i::task_id.eq(task_id))
        .filter(i::scheduled_at.ge(from))
        .filter(i::scheduled_at.lt(to))
        .select((
            i::status,
            i::trigger_type,
            i::callback_code,
            i::scheduled_at,
            i::dispatched_at,
        ))
        .load(c)
        .await)?)
}

/// Deletes up to `limit` final runs that finished before `before`, with their logs; returns
/// how many runs. Small batches keep each statement short, so firing never waits behind
/// retention.
pub async fn delete_finished_before(
    conn: &mut Conn,
    before: NaiveDateTime,
    limit: i64,
) -> Result<usize, StoreError> {
    let found: Vec<(i64, String)> = with_conn!(conn, |c| i::ax_instance
        .filter(i::finished_at.lt(before))
        .order(i::finished_at.asc())
        .limit(limit)
        .select((i::id, i::request_id))
        .load(c)
        .await)?;
    if found.is_empty() {
        return Ok(0);
    }
    let (ids, runs): (Vec<i64>, Vec<String>) = found.into_iter().unzip();
    run_log::delete_of_runs(conn, &runs).await?;
    Ok(with_conn!(conn, |c| diesel::delete(
        i::ax_instance.filter(i::id.eq_any(&ids))
    )
    .execute(c)
    .await)?)
}

/// How many runs of a task are open (`PENDING`, `READY`, `RUNNING`).
pub async fn count_open(conn: &mut Conn, task_id: TaskId) -> Result<i64, StoreError> {
    Ok(with_conn!(conn, |c| i::ax_instance
        .filter(i::task_id.eq(task_id))
        .filter(i::status.eq_any(ax_core::run::OPEN))
        .count()
        .get_result(c)
        .await)?)
}
