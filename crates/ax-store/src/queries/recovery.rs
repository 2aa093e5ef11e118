//! Runs whose holder is gone: claims of this process before a restart, and the unsent runs of
//! processes fenced for a stale promise, made to lapse; running runs whose deadline passed,
//! found.

use chrono::{DateTime, TimeDelta, Utc};
use diesel::prelude::*;
use diesel_async::RunQueryDsl;

use super::processes::{self, Seen};
use super::run_writes::{apply, Target};
use super::transitions::states;
use crate::rows::schema::ax_instance::dsl as i;
use crate::with_conn;
use crate::{to_db, Conn, StoreError};
use ax_core::cluster::fencing::STALE_AFTER;
use ax_core::ids::ProcessId;
use ax_core::run::{on_event, Event, RequestId, RetryPolicy, RunStatus, TaskId, Write};

/// Applies a lapse event (`Recovered`, `Fenced`) to these runs. Returns how many changed.
async fn lapse_claims(
    conn: &mut Conn,
    ids: Vec<RequestId>,
    event: &Event,
) -> Result<usize, StoreError> {
    let runs = states(conn, &ids, RetryPolicy::default()).await?;
    let writes: Vec<(RequestId, TaskId, Write)> = runs
        .into_iter()
        .filter_map(|(id, run)| on_event(&run, event).ok().map(|w| (id, run.task_id, w)))
        .collect();
    // Every such write has one shape: one statement per page.
    let writes: Vec<(Target, &Write)> = writes
        .iter()
        .map(|(run, task, w)| {
            let task = Some(*task);
            (Target { run, task }, w)
        })
        .collect();
    apply(conn, &writes, None).await
}

/// Makes this process's own claims lapse now: after a restart nothing of its previous life is
/// in flight, so its runs are due at once (a run committed ahead, at its time) instead of when
/// the claims would have lapsed.
pub async fn recover_own(
    conn: &mut Conn,
    instance_id: &ProcessId,
    now: DateTime<Utc>,
) -> Result<usize, StoreError> {
    let ids: Vec<RequestId> = with_conn!(conn, |c| i::ax_instance
        .filter(i::status.eq(RunStatus::Ready))
        .filter(i::fired_by.eq(instance_id))
        .filter(i::claimed_until.gt(to_db(now)))
        .select(i::request_id)
        .load(c)
        .await)?;
    let event = Event::Recovered {
        claimant: instance_id.clone(),
        at: now,
    };
    let mut changed = 0;
    for chunk in ids.chunks(1000) {
        changed += lapse_claims(conn, chunk.to_vec(), &event).await?;
    }
    Ok(changed)
}

/// Fences the processes whose promise went stale (see `ax_core::cluster::fencing`), each in one
/// transaction with taking its claims on runs fired for a later second than it promised: those
/// were never sent, and are due again at once (or at their second). Answers how many runs it
/// took.
pub async fn fence_stale(
    conn: &mut Conn,
    me: &ProcessId,
    now: DateTime<Utc>,
) -> Result<usize, StoreError> {
    let before = now - TimeDelta::from_std(STALE_AFTER).unwrap_or_default();
    let mut taken = 0;
    for seen in processes::stale(conn, me, before).await? {
        taken += conn
            .transaction(move |conn| Box::pin(fence_one(conn, seen, now)))
            .await?;
    }
    Ok(taken)
}

async fn fence_one(conn: &mut Conn, seen: Seen, now: DateTime<Utc>) -> Result<usize, StoreError> {
    if !processes::fence(conn, &seen, now).await? {
        return Ok(0);
    }
    // Whatever was fired for a later second than the promise was never sent.
    let unsent_from = DateTime::from_timestamp(seen.sent_through + 1, 0).unwrap_or_default();
    let ids: Vec<RequestId> = with_conn!(conn, |c| i::ax_instance
        .filter(i::status.eq(RunStatus::Ready))
        .filter(i::fired_by.eq(&seen.instance_id))
        .filter(i::claimed_until.gt(to_db(now)))
        .filter(i::scheduled_at.ge(to_db(unsent_from)))
        .select(i::request_id)
        .load(c)
        .await)?;
    let event = Event::Fenced {
        claimant: seen.instance_id.clone(),
        unsent_from,
        at: now,
    };
    let mut taken = 0;
    for chunk in ids.chunks(1000) {
        taken += lapse_claims(conn, chunk.to_vec(), &event).await?;
    }
    if taken > 0 {
        log::warn!(
            "ax process {} was fenced (its last promise was at {}): {taken} runs it fired for \
             {} or later and never sent are due again",
            seen.instance_id,
            ax_core::time::clock::rfc3339(seen.renewed_at),
            ax_core::time::clock::rfc3339(unsent_from),
        );
    }
    Ok(taken)
}

/// RUNNING runs whose deadline passed with no result: (request id, attempt).
pub async fn expired_running(
    conn: &mut Conn,
    now: DateTime<Utc>,
    limit: i64,
) -> Result<Vec<(RequestId, i32)>, StoreError> {
    Ok(with_conn!(conn, |c| i::ax_instance
        .filter(i::status.eq(RunStatus::Running))
        .filter(i::deadline_at.lt(to_db(now)))
        .order(i::deadline_at.asc())
        .limit(limit)
        .select((i::request_id, i::attempt))
        .load(c)
        .await)?)
}
