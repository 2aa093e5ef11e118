//! Runs whose holder is gone: claims of this process before a restart, and of processes no
//! longer alive, made to lapse; running runs whose deadline passed, found.

use chrono::{DateTime, Utc};
use diesel::prelude::*;
use diesel_async::RunQueryDsl;

use super::run_writes::{apply, Target};
use super::runs::states;
use crate::run::{on_event, Event, RequestId, RetryPolicy, RunStatus, TaskId, Write};
use crate::store::schema::ax_instance::dsl as i;
use crate::store::{to_db, Conn, StoreError};
use crate::with_conn;

/// Applies a lapse event (`Recovered`, `Orphaned`) to these runs. Returns how many changed.
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
    instance_id: &str,
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
        claimant: instance_id.to_string(),
        at: now,
    };
    let mut changed = 0;
    for chunk in ids.chunks(1000) {
        changed += lapse_claims(conn, chunk.to_vec(), &event).await?;
    }
    Ok(changed)
}

/// Makes the claims of processes that are no longer alive lapse now, instead of waiting for
/// them (one page of up to 1000).
pub async fn recover_orphans(
    conn: &mut Conn,
    live: &[String],
    now: DateTime<Utc>,
) -> Result<usize, StoreError> {
    let ids: Vec<RequestId> = with_conn!(conn, |c| i::ax_instance
        .filter(i::status.eq(RunStatus::Ready))
        .filter(i::claimed_until.gt(to_db(now)))
        .filter(i::fired_by.ne_all(live))
        .select(i::request_id)
        .limit(1000)
        .load(c)
        .await)?;
    let event = Event::Orphaned {
        live: live.to_vec(),
        at: now,
    };
    lapse_claims(conn, ids, &event).await
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
