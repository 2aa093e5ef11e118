//! PENDING runs, moved on: released to dispatch, or failed, once their upstreams allow it, and
//! runs the overlap policy holds back released once no earlier run of their task is open.

use chrono::{DateTime, NaiveDateTime, Utc};
use diesel::prelude::*;
use diesel_async::RunQueryDsl;

use super::runs;
use super::tasks::dependencies_of;
use super::transitions::decide;
use crate::rows::schema::ax_instance::dsl as i;
use crate::with_conn;
use crate::{from_db, to_db, Conn, StoreError};
use ax_core::run::{
    buffer_released, fire_status, held_by_overlap, sharded, Decided, Event, OpenRun, RequestId,
    RetryPolicy, RunStatus, TaskId,
};

/// Decides every due PENDING run (up to `limit`, oldest first) whose upstreams allow it:
/// released runs become due now (the attempt scan dispatches them); failed ones end FAILED,
/// without retries. Returns (released, failed).
pub async fn check_pending(
    conn: &mut Conn,
    now: DateTime<Utc>,
    limit: i64,
) -> Result<(usize, usize), StoreError> {
    type Row = (
        RequestId,
        TaskId,
        NaiveDateTime,
        Option<NaiveDateTime>,
        Option<String>,
        Option<i32>,
    );
    let pending: Vec<Row> = with_conn!(conn, |c| i::ax_instance
        .filter(i::status.eq(RunStatus::Pending))
        // A run committed ahead of its time waits for its time, whatever its upstreams.
        .filter(i::scheduled_at.le(to_db(now)))
        .order(i::scheduled_at.asc())
        .limit(limit)
        .select((
            i::request_id,
            i::task_id,
            i::scheduled_at,
            i::deadline_at,
            i::callback_code,
            i::shard_total,
        ))
        .load(c)
        .await)?;
    let (mut released, mut failed) = (0, 0);
    for (request_id, task_id, scheduled_at, deadline, code, shards) in pending {
        if held_by_overlap(RunStatus::Pending, code.as_deref()) {
            let run = (&request_id, scheduled_at, sharded(shards));
            released += release_buffered(conn, run, task_id, now).await?;
            continue;
        }
        let upstreams = upstream_states(conn, task_id, scheduled_at).await?;
        let deadline = deadline.map_or(now, from_db);
        let Some(event) = ax_core::run::upstream_event(&upstreams, now, deadline) else {
            continue;
        };
        let decided = decide(conn, &request_id, &event, RetryPolicy::default()).await?;
        match (decided, &event) {
            (Decided::Applied(_), Event::Released { .. }) => released += 1,
            (Decided::Applied(run), event) => {
                let why = match event {
                    Event::DependencyTimedOut { .. } => {
                        "its upstreams took longer than the dependency timeout"
                    }
                    _ => "an upstream's run did not succeed",
                };
                log::warn!(
                    "task {task_id} request {request_id}: waited for upstreams, not dispatched: \
                     {why}; the run is {}",
                    run.status
                );
                failed += 1
            }
            _ => {}
        }
    }
    Ok((released, failed))
}

/// A run the overlap policy holds back, `(request id, scheduled at, sharded)`, goes on once
/// no earlier run of its task is open: to its upstreams, if it has any, else to dispatch now.
/// Returns 1 if it went on.
async fn release_buffered(
    conn: &mut Conn,
    (request_id, scheduled_at, is_shard): (&RequestId, NaiveDateTime, bool),
    task_id: TaskId,
    now: DateTime<Utc>,
) -> Result<usize, StoreError> {
    type Row = (RequestId, NaiveDateTime, RunStatus, Option<i32>);
    let open: Vec<Row> = with_conn!(conn, |c| i::ax_instance
        .filter(i::task_id.eq(task_id))
        .filter(i::status.eq_any(ax_core::run::OPEN))
        .filter(i::scheduled_at.le(scheduled_at))
        .select((i::request_id, i::scheduled_at, i::status, i::shard_total))
        .load(c)
        .await)?;
    let open: Vec<OpenRun> = open
        .into_iter()
        .map(|(id, at, status, shards)| OpenRun::of(id, from_db(at), status, None, sharded(shards)))
        .collect();
    if !buffer_released(&open, from_db(scheduled_at), request_id, is_shard) {
        return Ok(0);
    }
    let upstreams = dependencies_of(conn, &[task_id]).await?;
    let event = Event::EarlierFinished {
        waits_for_upstreams: upstreams.get(&task_id).is_some_and(|u| !u.is_empty()),
        at: now,
    };
    let decided = decide(conn, request_id, &event, RetryPolicy::default()).await?;
    Ok(usize::from(matches!(decided, Decided::Applied(_))))
}

/// For each upstream of `task_id`, the status of its latest run scheduled at or before `at`
/// (a broadcast fire's: its shards' together, see `ax_core::run::fire_status`).
async fn upstream_states(
    conn: &mut Conn,
    task_id: TaskId,
    at: NaiveDateTime,
) -> Result<Vec<Option<RunStatus>>, StoreError> {
    let upstreams = dependencies_of(conn, &[task_id]).await?;
    let mut states = Vec::new();
    for upstream in upstreams.get(&task_id).into_iter().flatten() {
        type Row = (RunStatus, NaiveDateTime, Option<i32>);
        let latest: Option<Row> = with_conn!(conn, |c| i::ax_instance
            .filter(i::task_id.eq(*upstream))
            .filter(i::scheduled_at.le(at))
            .order((i::scheduled_at.desc(), i::id.desc()))
            .select((i::status, i::scheduled_at, i::shard_total))
            .first(c)
            .await
            .optional())?;
        let state = match latest {
            Some((_, fired_at, shards)) if sharded(shards) => {
                let shards = runs::shards_of(conn, *upstream, fired_at).await?;
                fire_status(&shards.iter().map(|run| run.status).collect::<Vec<_>>())
            }
            latest => latest.map(|(status, ..)| status),
        };
        states.push(state);
    }
    Ok(states)
}
