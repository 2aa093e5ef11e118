//! Each ax process's promise of what it may have sent (`ax_process`; see `ax_core::cluster::fencing`):
//! the epoch it holds, the second it may have sent fired runs through, when it last said so.

use ax_core::ids::ProcessId;
use chrono::{DateTime, Utc};
use diesel::prelude::*;
use diesel_async::RunQueryDsl;

use crate::rows::schema::ax_process::dsl as p;
use crate::with_conn;
use crate::{from_db, to_db, Conn, StoreError};

/// A process's promise as another process read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    pub instance_id: ProcessId,
    pub epoch: i64,
    pub sent_through: i64,
    pub renewed_at: DateTime<Utc>,
}

/// Takes a new epoch for `instance_id`: at start, and after it was fenced. Its promise becomes
/// `second` (or stays the later one it had). Answers the epoch.
pub async fn begin_epoch(
    conn: &mut Conn,
    instance_id: &ProcessId,
    second: i64,
    now: DateTime<Utc>,
) -> Result<i64, StoreError> {
    with_conn!(conn, |c| diesel::insert_into(p::ax_process)
        .values((
            p::instance_id.eq(instance_id),
            p::epoch.eq(0_i64),
            p::sent_through.eq(second),
            p::renewed_at.eq(to_db(now)),
        ))
        .on_conflict_do_nothing()
        .execute(c)
        .await)?;
    loop {
        let (epoch, sent_through): (i64, i64) = with_conn!(conn, |c| p::ax_process
            .filter(p::instance_id.eq(instance_id))
            .select((p::epoch, p::sent_through))
            .first(c)
            .await)?;
        // Raised under the epoch read: a fence between the read and the write is seen again.
        let taken = with_conn!(conn, |c| diesel::update(
            p::ax_process
                .filter(p::instance_id.eq(instance_id))
                .filter(p::epoch.eq(epoch))
        )
        .set((
            p::epoch.eq(epoch + 1),
            p::sent_through.eq(sent_through.max(second)),
            p::renewed_at.eq(to_db(now)),
            p::fenced_at.eq(None::<chrono::NaiveDateTime>),
        ))
        .execute(c)
        .await)?;
        if taken == 1 {
            return Ok(epoch + 1);
        }
    }
}

/// Promises that `instance_id` may send fired runs through `second`, under `epoch`. `false`:
/// it was fenced and holds the epoch no longer.
pub async fn promise(
    conn: &mut Conn,
    instance_id: &ProcessId,
    epoch: i64,
    second: i64,
    now: DateTime<Utc>,
) -> Result<bool, StoreError> {
    let made = with_conn!(conn, |c| diesel::update(
        p::ax_process
            .filter(p::instance_id.eq(instance_id))
            .filter(p::epoch.eq(epoch))
    )
    .set((p::sent_through.eq(second), p::renewed_at.eq(to_db(now))))
    .execute(c)
    .await)?;
    Ok(made == 1)
}

/// The processes other than `me` whose last promise is older than `before` and that were
/// not fenced since.
pub async fn stale(
    conn: &mut Conn,
    me: &ProcessId,
    before: DateTime<Utc>,
) -> Result<Vec<Seen>, StoreError> {
    let rows: Vec<(ProcessId, i64, i64, chrono::NaiveDateTime)> = with_conn!(conn, |c| {
        p::ax_process
            .filter(p::instance_id.ne(me))
            .filter(p::renewed_at.lt(to_db(before)))
            .filter(p::fenced_at.is_null())
            .select((p::instance_id, p::epoch, p::sent_through, p::renewed_at))
            .load(c)
            .await
    })?;
    Ok(rows
        .into_iter()
        .map(|(instance_id, epoch, sent_through, renewed_at)| Seen {
            instance_id,
            epoch,
            sent_through,
            renewed_at: from_db(renewed_at),
        })
        .collect())
}

/// Fences the process `seen`, if its promise is still the one seen: its next promise fails.
/// In the caller's transaction, which takes its unsent runs.
pub async fn fence(conn: &mut Conn, seen: &Seen, now: DateTime<Utc>) -> Result<bool, StoreError> {
    let fenced = with_conn!(conn, |c| diesel::update(
        p::ax_process
            .filter(p::instance_id.eq(&seen.instance_id))
            .filter(p::epoch.eq(seen.epoch))
            .filter(p::sent_through.eq(seen.sent_through))
            .filter(p::renewed_at.eq(to_db(seen.renewed_at)))
    )
    .set((
        p::epoch.eq(seen.epoch + 1),
        p::fenced_at.eq(Some(to_db(now)))
    ))
    .execute(c)
    .await)?;
    Ok(fenced == 1)
}
