//! What the console's overview pages read: counts and latest runs over many tasks, each in a
//! fixed number of statements whatever the number of tasks.

use std::collections::HashMap;

use chrono::{DateTime, NaiveDateTime, Utc};
use diesel::prelude::*;
use diesel_async::RunQueryDsl;

use crate::run::{RunStatus, TaskId, TriggerType};
use crate::store::models::Instance;
use crate::store::schema::ax_instance::dsl as i;
use crate::store::schema::ax_task::dsl as t;
use crate::store::{from_db, Conn, StoreError};
use crate::with_conn;

/// How many runs scheduled in `[since, until]` are in each status.
pub async fn run_counts(
    conn: &mut Conn,
    since: NaiveDateTime,
    until: NaiveDateTime,
) -> Result<HashMap<RunStatus, i64>, StoreError> {
    let rows: Vec<(RunStatus, i64)> = with_conn!(conn, |c| i::ax_instance
        .filter(i::scheduled_at.ge(since).and(i::scheduled_at.le(until)))
        .group_by(i::status)
        .select((i::status, diesel::dsl::count_star()))
        .load(c)
        .await)?;
    Ok(rows.into_iter().collect())
}

/// The names of these tasks; a deleted task has none.
pub async fn task_names(
    conn: &mut Conn,
    ids: Vec<TaskId>,
) -> Result<HashMap<TaskId, String>, StoreError> {
    let rows: Vec<(TaskId, String)> = with_conn!(conn, |c| t::ax_task
        .filter(t::id.eq_any(&ids))
        .select((t::id, t::name))
        .load(c)
        .await)?;
    Ok(rows.into_iter().collect())
}

/// Each task's latest run due by `now` (the one recorded last): two statements for all the
/// tasks, not one per task.
pub async fn last_runs(
    conn: &mut Conn,
    ids: Vec<TaskId>,
    now: NaiveDateTime,
) -> Result<HashMap<TaskId, Instance>, StoreError> {
    let latest: Vec<Option<i64>> = with_conn!(conn, |c| i::ax_instance
        .filter(i::task_id.eq_any(&ids).and(i::scheduled_at.le(now)))
        .group_by(i::task_id)
        .select(diesel::dsl::max(i::id))
        .load(c)
        .await)?;
    let latest: Vec<i64> = latest.into_iter().flatten().collect();
    let runs: Vec<Instance> = with_conn!(conn, |c| i::ax_instance
        .filter(i::id.eq_any(&latest))
        .select(Instance::as_select())
        .load(c)
        .await)?;
    Ok(runs.into_iter().map(|run| (run.task_id, run)).collect())
}

/// When runs scheduled in `[since, until]` were due and first dispatched, newest first, at most
/// `limit`; backfilled runs are left out (they are late by design).
pub async fn dispatch_times(
    conn: &mut Conn,
    since: NaiveDateTime,
    until: NaiveDateTime,
    limit: i64,
) -> Result<Vec<(DateTime<Utc>, Option<DateTime<Utc>>)>, StoreError> {
    let rows: Vec<(NaiveDateTime, Option<NaiveDateTime>)> = with_conn!(conn, |c| i::ax_instance
        .filter(i::scheduled_at.ge(since).and(i::scheduled_at.le(until)))
        .filter(i::trigger_type.ne(TriggerType::Backfill))
        .order(i::scheduled_at.desc())
        .limit(limit)
        .select((i::scheduled_at, i::dispatched_at))
        .load(c)
        .await)?;
    Ok(rows
        .into_iter()
        .map(|(scheduled, dispatched)| (from_db(scheduled), dispatched.map(from_db)))
        .collect())
}
