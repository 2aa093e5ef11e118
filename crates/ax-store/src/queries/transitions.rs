//! A run's transitions, applied: read the run's state, ask the lifecycle (`ax_core::run`), and
//! write what it returns under its compare-and-set condition. Nothing here decides what a run
//! becomes.

use std::collections::HashMap;

use chrono::{DateTime, NaiveDateTime, Utc};
use diesel::prelude::*;
use diesel_async::RunQueryDsl;

use super::attempts;
use super::run_writes::{apply, by_shape, Target};
use super::success_watch::SuccessWatch;
use crate::pool::prepared::{padded, Kept};
use crate::rows::schema::ax_instance::dsl as i;
use crate::rows::schema::ax_task::dsl as t;
use crate::with_conn;
use crate::{from_db, Conn, StoreError};
use ax_core::ids::ProcessId;
use ax_core::run::{
    ended_attempt, on_event, Change, Decided, EndedAttempt, Event, RequestId, RetryLimits,
    RetryPolicy, RunState, RunStatus, TaskId, Write,
};

/// How often a transition is decided again when another writer changed the run in between.
const CAS_TRIES: usize = 5;

/// Decides `event` for one run and writes it; a lost compare-and-set is decided again on the
/// run as it is now, so a result is never dropped because something else moved first.
pub async fn decide(
    conn: &mut Conn,
    id: &RequestId,
    event: &Event,
    defaults: RetryPolicy,
) -> Result<Decided, StoreError> {
    let (decided, ended) = decide_one(conn, id, event, defaults, None).await?;
    if let Some(ended) = ended {
        attempts::record(conn, &[(id.clone(), ended)]).await?;
    }
    Ok(decided)
}

/// [`decide`], with the attempt the write ended (to record), if any.
async fn decide_one(
    conn: &mut Conn,
    id: &RequestId,
    event: &Event,
    defaults: RetryPolicy,
    watch: Option<&SuccessWatch>,
) -> Result<(Decided, Option<EndedAttempt>), StoreError> {
    for _ in 0..CAS_TRIES {
        let Some(run) = states(conn, std::slice::from_ref(id), defaults)
            .await?
            .remove(id)
        else {
            return Ok((Decided::Unknown, None));
        };
        match on_event(&run, event) {
            Err(refusal) => return Ok((Decided::Refused(refusal, run), None)),
            Ok(write) => {
                let target = Target {
                    run: id,
                    task: Some(run.task_id),
                };
                if apply(conn, &[(target, &write)], watch).await? == 1 {
                    let ended = ended_attempt(&run, event, &write);
                    return Ok((Decided::Applied(after(run, &write.change)), ended));
                }
            }
        }
    }
    Err(StoreError::Commit(format!(
        "run {id} kept changing while an event for it was applied"
    )))
}

/// Decides many events in one read and as few statements as their shapes allow; several
/// events for one run are decided in order, each on the state the previous one left. Returns
/// one outcome per event, in order. `watch`: the writer's watched set (see
/// [`super::success_watch`]).
pub async fn decide_many(
    conn: &mut Conn,
    events: &[(RequestId, Event)],
    defaults: RetryPolicy,
    watch: Option<&SuccessWatch>,
) -> Result<Vec<Decided>, StoreError> {
    let ids: Vec<RequestId> = events.iter().map(|(id, _)| id.clone()).collect();
    let mut runs = states(conn, &ids, defaults).await?;
    let mut outcomes = Vec::with_capacity(events.len());
    let mut writes: Vec<(usize, Write)> = Vec::new();
    let mut tasks: Vec<Option<TaskId>> = vec![None; events.len()];
    let mut ended: Vec<Option<EndedAttempt>> = vec![None; events.len()];
    for (n, (id, event)) in events.iter().enumerate() {
        let Some(run) = runs.get_mut(id) else {
            outcomes.push(Decided::Unknown);
            continue;
        };
        tasks[n] = Some(run.task_id);
        match on_event(run, event) {
            Err(refusal) => outcomes.push(Decided::Refused(refusal, run.clone())),
            Ok(write) => {
                ended[n] = ended_attempt(run, event, &write);
                run.apply(&write.change);
                outcomes.push(Decided::Applied(run.clone()));
                writes.push((n, write));
            }
        }
    }
    // A run with two writes here needs them in order, each on the last one's result: those
    // go one by one. The rest go by shape, many to a statement.
    let mut per_run: HashMap<&RequestId, usize> = HashMap::new();
    for (n, _) in &writes {
        *per_run.entry(&events[*n].0).or_default() += 1;
    }
    let (single, chained): (Vec<&(usize, Write)>, Vec<_>) = writes
        .iter()
        .partition(|(n, _)| per_run[&events[*n].0] == 1);
    let target = |n: usize| Target {
        run: &events[n].0,
        task: tasks[n],
    };
    let mut redo = Vec::new();
    for group in by_shape(single.iter().map(|(n, w)| (*n, w))) {
        let batch: Vec<(Target, &Write)> = group.iter().map(|(n, w)| (target(*n), *w)).collect();
        if apply(conn, &batch, watch).await? < batch.len() {
            redo.extend(group.iter().map(|(n, _)| *n));
        }
    }
    for (n, write) in chained {
        if apply(conn, &[(target(*n), write)], watch).await? == 0 {
            redo.push(*n);
        }
    }
    // Lost compare-and-sets (another writer came first): those of a group are told apart by
    // deciding each again on the run as it is now; writes that did land find their condition
    // gone and report the state they left.
    for n in redo {
        let (id, event) = &events[n];
        let (decided, again) = decide_one(conn, id, event, defaults, watch).await?;
        outcomes[n] = match decided {
            // It landed after all: the attempt it ended is the one seen first.
            Decided::Refused(_, run) if outcomes[n] == Decided::Applied(run.clone()) => {
                Decided::Applied(run)
            }
            decided => {
                ended[n] = again;
                decided
            }
        };
    }
    let ended: Vec<(RequestId, EndedAttempt)> = ended
        .into_iter()
        .enumerate()
        .filter_map(|(n, attempt)| Some((events[n].0.clone(), attempt?)))
        .collect();
    attempts::record(conn, &ended).await?;
    Ok(outcomes)
}

fn after(mut run: RunState, change: &Change) -> RunState {
    run.apply(change);
    run
}

/// The columns of a run's state (`StateRow`), its task's retry settings last.
macro_rules! state_columns {
    () => {
        (
            i::request_id,
            i::status,
            i::attempt,
            i::dispatched_attempt,
            i::retry_count,
            i::next_attempt_at,
            i::claimed_until,
            i::fired_by,
            i::scheduled_at,
            i::task_id,
            t::max_retry.nullable(),
            t::retry_backoff_secs.nullable(),
            t::retry_factor.nullable(),
        )
    };
}
pub(super) use state_columns;

/// The state of these runs, with their tasks' retry settings (a run whose task was deleted
/// gets no retries).
pub async fn states(
    conn: &mut Conn,
    ids: &[RequestId],
    defaults: RetryPolicy,
) -> Result<HashMap<RequestId, RunState>, StoreError> {
    let mut found = HashMap::with_capacity(ids.len());
    for chunk in ids.chunks(1024) {
        let chunk = padded(chunk);
        let rows: Vec<StateRow> = with_conn!(conn, |c| Kept(
            i::ax_instance
                .left_join(t::ax_task.on(t::id.eq(i::task_id)))
                .filter(i::request_id.eq_any(&chunk))
                .select(state_columns!())
        )
        .load(c)
        .await)?;
        found.extend(rows.into_iter().map(|row| state_of(row, defaults)));
    }
    Ok(found)
}

pub(super) type StateRow = (
    RequestId,
    RunStatus,
    i32,
    i32,
    i32,
    Option<NaiveDateTime>,
    Option<NaiveDateTime>,
    ProcessId,
    NaiveDateTime,
    TaskId,
    Option<i32>,
    Option<i32>,
    Option<i32>,
);

pub(super) fn state_of(row: StateRow, defaults: RetryPolicy) -> (RequestId, RunState) {
    let (id, status, attempt, dispatched, retries, next, claimed, claimant, scheduled) = (
        row.0, row.1, row.2, row.3, row.4, row.5, row.6, row.7, row.8,
    );
    let run = RunState {
        task_id: row.9,
        status,
        attempt,
        dispatched,
        retries_used: retries,
        next_attempt_at: next.map(from_db),
        claimed_until: claimed.map(from_db),
        claimant,
        scheduled_at: from_db(scheduled),
        retry: RetryLimits {
            max_retry: row.10.unwrap_or(0),
            policy: defaults.with_overrides(row.11, row.12),
        },
    };
    (id, run)
}

/// Ends the open runs of a deleted task: nothing will dispatch them any more.
pub async fn cancel_open(
    conn: &mut Conn,
    task_id: TaskId,
    now: DateTime<Utc>,
) -> Result<usize, StoreError> {
    let open: Vec<RequestId> = with_conn!(conn, |c| i::ax_instance
        .filter(i::task_id.eq(task_id))
        .filter(i::status.eq_any(ax_core::run::OPEN))
        .select(i::request_id)
        .load(c)
        .await)?;
    let Some(write) = ax_core::run::blind(&Event::TaskDeleted { at: now }) else {
        return Ok(0);
    };
    let writes: Vec<(Target, &Write)> = open
        .iter()
        .map(|run| {
            let task = Some(task_id);
            (Target { run, task }, &write)
        })
        .collect();
    apply(conn, &writes, None).await
}
