//! What the console's overview pages read: counts and latest runs over many tasks, each in a
//! fixed number of statements whatever the number of tasks.

use std::collections::HashMap;

use chrono::{DateTime, NaiveDateTime, Utc};
use diesel::prelude::*;
use diesel::sql_types::{BigInt, Nullable, Timestamp};
use diesel_async::RunQueryDsl;

use super::executors::HealthRow;
use crate::rows::models::{Run, TaskStatus};
use crate::rows::schema::ax_instance::dsl as i;
use crate::rows::schema::ax_member_health::dsl as h;
use crate::rows::schema::ax_scene::dsl as sc;
use crate::rows::schema::ax_task::dsl as t;
use crate::with_conn;
use crate::{from_db, Conn, StoreError};
use ax_core::calendar::TaskCalendars;
use ax_core::run::{RunStatus, TaskId, TriggerType};

/// How many runs scheduled in `[since, until]` are in each status, and how many of them were
/// scheduled at or after `recent` (within the range): one statement, so one snapshot, and the
/// recent count is never more than the whole. Read from the index
/// `idx_ax_instance_status_scheduled (status, scheduled_at)` alone, one range a status (the
/// condition on every status lets the database use it): a day of runs at size is hundreds of
/// thousands of rows, and reading each of them would take seconds.
pub async fn run_counts(
    conn: &mut Conn,
    since: NaiveDateTime,
    recent: NaiveDateTime,
    until: NaiveDateTime,
) -> Result<HashMap<RunStatus, RunCount>, StoreError> {
    let rows: Vec<(RunStatus, i64, i64)> = with_conn!(conn, |c| i::ax_instance
        .filter(i::status.eq_any(RunStatus::ALL))
        .filter(i::scheduled_at.ge(since).and(i::scheduled_at.le(until)))
        .group_by(i::status)
        .select((
            i::status,
            diesel::dsl::count_star(),
            diesel::dsl::count(diesel::dsl::case_when(i::scheduled_at.ge(recent), i::id)),
        ))
        .load(c)
        .await)?;
    Ok(rows
        .into_iter()
        .map(|(status, all, recent)| (status, RunCount { all, recent }))
        .collect())
}

/// A status's count of [`run_counts`]: all the runs of the range, and the recent ones.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RunCount {
    pub all: i64,
    pub recent: i64,
}

/// A task paused on its own, with since when and by whom (`None`: not known, paused before ax
/// noted it).
#[derive(Debug, Clone, PartialEq, Eq, Queryable)]
pub struct PausedTask {
    pub id: TaskId,
    pub scene: String,
    pub name: String,
    pub paused_at: Option<NaiveDateTime>,
    pub paused_by: Option<String>,
}

/// How many tasks are paused on their own, and the `limit` paused last, latest first: one
/// range of `idx_ax_task_paused (status, paused_at)` each.
pub async fn paused_tasks(
    conn: &mut Conn,
    limit: i64,
) -> Result<(i64, Vec<PausedTask>), StoreError> {
    let paused = t::status.eq(TaskStatus::Paused);
    let count: i64 = with_conn!(conn, |c| t::ax_task
        .filter(paused)
        .count()
        .get_result(c)
        .await)?;
    let latest: Vec<PausedTask> = with_conn!(conn, |c| t::ax_task
        .filter(paused)
        .order((t::paused_at.desc(), t::id.desc()))
        .limit(limit)
        .select((t::id, t::scene, t::name, t::paused_at, t::paused_by))
        .load(c)
        .await)?;
    Ok((count, latest))
}

/// A paused scene, with since when and by whom (`None`: paused before ax noted who).
#[derive(Debug, Clone, PartialEq, Eq, Queryable)]
pub struct PausedScene {
    pub scene: String,
    pub paused_at: Option<NaiveDateTime>,
    pub paused_by: Option<String>,
}

/// Every paused scene, the latest paused first (a row a scene: a few).
pub async fn paused_scenes(conn: &mut Conn) -> Result<Vec<PausedScene>, StoreError> {
    Ok(with_conn!(conn, |c| sc::ax_scene
        .filter(sc::paused_at.is_not_null())
        .order((sc::paused_at.desc(), sc::scene))
        .select((sc::scene, sc::paused_at, sc::paused_by))
        .load(c)
        .await)?)
}

/// The executor members healthy again after being set aside, whose state changed at or after
/// `since`: recovered then (a row a member URL: a few).
pub async fn members_recovered_since(
    conn: &mut Conn,
    since: NaiveDateTime,
) -> Result<Vec<HealthRow>, StoreError> {
    Ok(with_conn!(conn, |c| h::ax_member_health
        .filter(h::unhealthy_until.is_null())
        .filter(h::changed_at.ge(since))
        .order(h::url)
        .select(HealthRow::as_select())
        .load(c)
        .await)?)
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

/// Each task's latest run due by `now`: the one scheduled last (of two at the same time, the
/// one recorded last). Two statements for all the tasks, each reading one index entry a task
/// however long its history: a subquery per task walks `idx_ax_instance_task (task_id,
/// scheduled_at)` backwards from `now`, then the runs are read by id.
pub async fn last_runs(
    conn: &mut Conn,
    ids: Vec<TaskId>,
    now: NaiveDateTime,
) -> Result<HashMap<TaskId, Run>, StoreError> {
    if ids.is_empty() {
        return Ok(HashMap::new());
    }
    // A correlated subquery, which the query builder does not express; the same text serves
    // every backend.
    let marks = vec!["?"; ids.len()].join(", ");
    let sql = format!(
        "SELECT (SELECT i.id FROM ax_instance i WHERE i.task_id = t.id AND i.scheduled_at <= ? \
                 ORDER BY i.scheduled_at DESC, i.id DESC LIMIT 1) AS run_id \
         FROM ax_task t WHERE t.id IN ({marks})"
    );
    let sql = conn.binds(sql);
    let latest: Vec<LastRun> = with_conn!(conn, |c| {
        let mut query = diesel::sql_query(&sql)
            .into_boxed()
            .bind::<Timestamp, _>(now);
        for id in &ids {
            query = query.bind::<BigInt, _>(id.0);
        }
        query.load(c).await
    })?;
    let latest: Vec<i64> = latest.into_iter().filter_map(|row| row.run_id).collect();
    let runs: Vec<Run> = with_conn!(conn, |c| i::ax_instance
        .filter(i::id.eq_any(&latest))
        .select(Run::as_select())
        .load(c)
        .await)?;
    Ok(runs.into_iter().map(|run| (run.task_id, run)).collect())
}

/// A row of [`last_runs`]' first statement.
#[derive(QueryableByName)]
struct LastRun {
    #[diesel(sql_type = Nullable<BigInt>)]
    run_id: Option<i64>,
}

/// When runs scheduled in `[since, until]` were scheduled, and ax's lag to their first dispatch
/// in ms (from when they were due: time spent waiting on upstreams or the overlap policy is
/// not lag), newest first, at most `limit`; backfilled runs are left out (late by design).
pub async fn dispatch_times(
    conn: &mut Conn,
    since: NaiveDateTime,
    until: NaiveDateTime,
    limit: i64,
) -> Result<Vec<(DateTime<Utc>, Option<i64>)>, StoreError> {
    type Row = (NaiveDateTime, NaiveDateTime, Option<NaiveDateTime>);
    let rows: Vec<Row> = with_conn!(conn, |c| i::ax_instance
        .filter(i::scheduled_at.ge(since).and(i::scheduled_at.le(until)))
        .filter(i::trigger_type.ne(TriggerType::Backfill))
        .order(i::scheduled_at.desc())
        .limit(limit)
        .select((i::scheduled_at, i::trigger_at, i::dispatched_at))
        .load(c)
        .await)?;
    Ok(rows
        .into_iter()
        .map(|(scheduled, due, dispatched)| {
            let lag = dispatched.map(|at| (at - due).num_milliseconds());
            (from_db(scheduled), lag)
        })
        .collect())
}

/// The longest-standing open runs due by `now`: up to `limit` of each open status, oldest
/// first, each status one range of `idx_ax_instance_status_scheduled`. Late and stuck runs are
/// among the oldest; a healthy system holds only the last seconds' runs open.
pub async fn oldest_open(
    conn: &mut Conn,
    now: NaiveDateTime,
    limit: i64,
) -> Result<Vec<Run>, StoreError> {
    let mut runs = Vec::new();
    for status in ax_core::run::OPEN {
        let mut oldest: Vec<Run> = with_conn!(conn, |c| i::ax_instance
            .filter(i::status.eq(*status))
            .filter(i::scheduled_at.le(now))
            .order(i::scheduled_at.asc())
            .limit(limit)
            .select(Run::as_select())
            .load(c)
            .await)?;
        runs.append(&mut oldest);
    }
    Ok(runs)
}

/// The enabled tasks that fire next, soonest first: `(id, name, next run)`, from
/// `idx_ax_task_next_run (status, next_run_at)`.
pub async fn next_runs(
    conn: &mut Conn,
    limit: i64,
) -> Result<Vec<(TaskId, String, DateTime<Utc>)>, StoreError> {
    let rows: Vec<(TaskId, String, Option<NaiveDateTime>)> = with_conn!(conn, |c| t::ax_task
        .filter(t::status.eq(TaskStatus::Enabled))
        .filter(t::next_run_at.is_not_null())
        .order(t::next_run_at.asc())
        .limit(limit)
        .select((t::id, t::name, t::next_run_at))
        .load(c)
        .await)?;
    Ok(rows
        .into_iter()
        .filter_map(|(id, name, next)| next.map(|at| (id, name, from_db(at))))
        .collect())
}

/// Every task that fires (enabled, its scene not paused: it has a next run), as
/// `(id, cron, time zone, jitter)`.
pub async fn firing_tasks(conn: &mut Conn) -> Result<Vec<FiringTask>, StoreError> {
    Ok(with_conn!(conn, |c| t::ax_task
        .filter(t::status.eq(TaskStatus::Enabled))
        .filter(t::next_run_at.is_not_null())
        .select((t::id, t::cron, t::time_zone, t::jitter_secs, t::calendars))
        .load(c)
        .await)?)
}

/// A firing task's schedule as stored: (id, cron, zone, jitter, calendars).
pub type FiringTask = (TaskId, String, String, i32, Option<TaskCalendars>);
