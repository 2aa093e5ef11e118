//! Runs whose attempt is due: found (with what their dispatch needs), and claimed for dispatch,
//! the overlap policy applied to a first attempt as it is claimed.

use chrono::{DateTime, Utc};
use diesel::prelude::*;
use diesel::sql_types::Text;
use diesel_async::RunQueryDsl;

use super::overlap;
use super::run_writes::{apply, Target};
use super::task_locks::lock_task_schedules;
use super::transitions::{state_columns, state_of, StateRow};
use crate::rows::schema::ax_instance::dsl as i;
use crate::rows::schema::ax_task::dsl as t;
use crate::with_conn;
use crate::{to_db, Conn, StoreError};
use ax_core::run::{
    claim_asks_overlap, jittered, on_event, sharded, DueRun, Event, OverlapPolicy, RequestId,
    RetryPolicy, RunState, RunStatus, Shard, TaskId, TriggerType, Write,
};
use ax_core::task::executor::TaskExecutor;

/// A run whose attempt is due: waiting for it, or held by a claim that lapsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DueAttempt {
    pub request_id: RequestId,
    pub task_id: TaskId,
    pub run: RunState,
    pub handler_url: String,
    pub executor: Option<TaskExecutor>,
    pub params: String,
    pub timeout_ms: i64,
    pub trigger_type: TriggerType,
    /// The task's overlap policy: it decides the run's first attempt when claimed.
    pub overlap: OverlapPolicy,
    pub jitter_secs: i32,
    /// A broadcast shard's, and the member it was given at fire time.
    pub shard: Option<Shard>,
    pub member: Option<String>,
}

impl DueAttempt {
    /// When its first attempt was due: its time, plus its jitter offset for a scheduled run.
    pub fn first_due_at(&self) -> DateTime<Utc> {
        match self.trigger_type {
            TriggerType::Schedule => {
                jittered(self.task_id, self.run.scheduled_at, self.jitter_secs)
            }
            TriggerType::Manual | TriggerType::Backfill => self.run.scheduled_at,
        }
    }

    /// When it is due.
    pub fn due_at(&self) -> DateTime<Utc> {
        self.run
            .next_attempt_at
            .or(self.run.claimed_until)
            .unwrap_or(self.run.scheduled_at)
    }
}

/// READY runs whose attempt is due by `until`: retries, released and manual runs, and runs
/// whose dispatcher's claim lapsed (it died before recording an outcome). At most `limit` of
/// each kind, earliest first.
pub async fn due_attempts(
    conn: &mut Conn,
    until: DateTime<Utc>,
    limit: i64,
) -> Result<Vec<DueAttempt>, StoreError> {
    let until = to_db(until);
    let waiting: Vec<RequestId> = with_conn!(conn, |c| i::ax_instance
        .filter(i::status.eq(RunStatus::Ready))
        .filter(i::next_attempt_at.le(until))
        .order(i::next_attempt_at.asc())
        .limit(limit)
        .select(i::request_id)
        .load(c)
        .await)?;
    let lapsed: Vec<RequestId> = with_conn!(conn, |c| i::ax_instance
        .filter(i::status.eq(RunStatus::Ready))
        .filter(i::claimed_until.le(until))
        .order(i::claimed_until.asc())
        .limit(limit)
        .select(i::request_id)
        .load(c)
        .await)?;
    let ids: Vec<RequestId> = waiting.into_iter().chain(lapsed).collect();
    attempts_of(conn, &ids).await
}

/// These runs with what their dispatch needs (runs of deleted tasks left out), earliest due
/// first. Their states carry the default retry settings: a claim needs none.
pub async fn attempts_of(
    conn: &mut Conn,
    ids: &[RequestId],
) -> Result<Vec<DueAttempt>, StoreError> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    type Row = (
        StateRow,
        (TaskId, String, String, i64),
        (TriggerType, OverlapPolicy, i32, Option<TaskExecutor>),
        (Option<i32>, Option<i32>, Option<String>),
    );
    let rows: Vec<Row> = with_conn!(conn, |c| i::ax_instance
        .inner_join(t::ax_task.on(t::id.eq(i::task_id)))
        .filter(i::request_id.eq_any(ids))
        .select((
            state_columns!(),
            (
                i::task_id,
                t::handler_url,
                // A manual run's own params win over the task's.
                diesel::dsl::sql::<Text>("COALESCE(ax_instance.params, ax_task.params)"),
                t::timeout_ms,
            ),
            (i::trigger_type, t::overlap, t::jitter_secs, t::executor),
            (i::shard_index, i::shard_total, i::member),
        ))
        .load(c)
        .await)?;
    let mut due: Vec<DueAttempt> = rows
        .into_iter()
        .map(
            |(
                state,
                (task_id, handler_url, params, timeout_ms),
                (trigger_type, overlap, jitter, executor),
                (shard_index, shard_total, member),
            )| {
                let (request_id, run) = state_of(state, RetryPolicy::default());
                DueAttempt {
                    request_id,
                    task_id,
                    run,
                    handler_url,
                    executor,
                    params,
                    timeout_ms,
                    trigger_type,
                    overlap,
                    jitter_secs: jitter,
                    shard: Shard::of_row(shard_index, shard_total),
                    member,
                }
            },
        )
        .collect();
    due.sort_by_key(DueAttempt::due_at);
    Ok(due)
}

/// Claims an attempt for dispatch (see `Event::Claim`); of several ax processes racing, one
/// wins. Returns whether this claim did.
pub async fn claim(
    conn: &mut Conn,
    attempt: &DueAttempt,
    event: &Event,
) -> Result<bool, StoreError> {
    let Ok(write) = on_event(&attempt.run, event) else {
        return Ok(false);
    };
    let target = Target {
        run: &attempt.request_id,
        task: Some(attempt.run.task_id),
    };
    if claim_asks_overlap(&attempt.run, attempt.overlap) {
        if let Some(held) = overlapped(conn, attempt, event).await? {
            apply(conn, &[(target, &held)], None).await?;
            return Ok(false);
        }
    }
    Ok(apply(conn, &[(target, &write)], None).await? == 1)
}

/// The write that skips or holds back a first attempt the overlap policy does not let go out
/// now; `None` when it may (it then replaced the earlier runs, if its policy says so).
async fn overlapped(
    conn: &mut Conn,
    attempt: &DueAttempt,
    claim: &Event,
) -> Result<Option<Write>, StoreError> {
    let Event::Claim { at, .. } = claim else {
        return Ok(None);
    };
    lock_task_schedules(conn, &[attempt.task_id]).await?;
    let due = DueRun {
        task_id: attempt.task_id,
        policy: attempt.overlap,
        request_id: &attempt.request_id,
        scheduled_at: attempt.run.scheduled_at,
        sharded: sharded(attempt.shard.map(|shard| shard.total)),
    };
    let decision = overlap::settle(conn, &[due], *at).await?;
    let [decision] = decision.as_slice() else {
        return Ok(None);
    };
    let Some(event) = decision.held_claim(*at) else {
        return Ok(None);
    };
    Ok(on_event(&attempt.run, &event).ok())
}
