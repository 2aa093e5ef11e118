//! A run's transitions, applied: read the run's state, ask the lifecycle (`crate::run`), and
//! write what it returns under its compare-and-set condition. Nothing here decides what a run
//! becomes.

use std::collections::HashMap;

use chrono::{DateTime, NaiveDateTime, Utc};
use diesel::prelude::*;
use diesel::sql_types::{Integer, Nullable, Text, Timestamp};
use diesel_async::RunQueryDsl;

use super::attempts;
use super::overlap::DueRun;
use crate::run::{
    ended_attempt, jittered, on_event, Change, EndedAttempt, Event, Expect, OpenRun, Overlap,
    OverlapPolicy, Refusal, RequestId, RetryLimits, RetryPolicy, RunState, RunStatus, TaskId,
    TriggerType, Write, OVERLAP_CODE,
};
use crate::store::schema::ax_instance::dsl as i;
use crate::store::schema::ax_task::dsl as t;
use crate::store::{from_db, to_db, Conn, StoreError};
use crate::with_conn;

/// How a transition went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decided {
    /// Written; the run is now as given.
    Applied(RunState),
    /// Nothing changed, for this reason; the run is as given.
    Refused(Refusal, RunState),
    /// No run has this request id.
    Unknown,
}

impl Decided {
    /// The run's status after the event, if the run exists.
    pub fn status(&self) -> Option<RunStatus> {
        match self {
            Decided::Applied(run) | Decided::Refused(_, run) => Some(run.status),
            Decided::Unknown => None,
        }
    }
}

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
    let (decided, ended) = decide_one(conn, id, event, defaults).await?;
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
                if apply(conn, &[(id, &write)]).await? == 1 {
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
/// one outcome per event, in order.
pub async fn decide_many(
    conn: &mut Conn,
    events: &[(RequestId, Event)],
    defaults: RetryPolicy,
) -> Result<Vec<Decided>, StoreError> {
    let ids: Vec<RequestId> = events.iter().map(|(id, _)| id.clone()).collect();
    let mut runs = states(conn, &ids, defaults).await?;
    let mut outcomes = Vec::with_capacity(events.len());
    let mut writes: Vec<(usize, Write)> = Vec::new();
    let mut ended: Vec<Option<EndedAttempt>> = vec![None; events.len()];
    for (n, (id, event)) in events.iter().enumerate() {
        let Some(run) = runs.get_mut(id) else {
            outcomes.push(Decided::Unknown);
            continue;
        };
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
    let mut redo = Vec::new();
    for group in by_shape(single.iter().map(|(n, w)| (*n, w))) {
        let batch: Vec<(&RequestId, &Write)> =
            group.iter().map(|(n, w)| (&events[*n].0, *w)).collect();
        if apply(conn, &batch).await? < batch.len() {
            redo.extend(group.iter().map(|(n, _)| *n));
        }
    }
    for (n, write) in chained {
        if apply(conn, &[(&events[*n].0, write)]).await? == 0 {
            redo.push(*n);
        }
    }
    // Lost compare-and-sets (another writer came first): those of a group are told apart by
    // deciding each again on the run as it is now; writes that did land find their condition
    // gone and report the state they left.
    for n in redo {
        let (id, event) = &events[n];
        let (decided, again) = decide_one(conn, id, event, defaults).await?;
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

/// Groups writes that one statement can apply together (same columns, same conditions).
fn by_shape<T, W: std::borrow::Borrow<Write>>(
    writes: impl IntoIterator<Item = (T, W)>,
) -> Vec<Vec<(T, W)>> {
    let mut groups: Vec<(Shape, Vec<(T, W)>)> = Vec::new();
    for (key, write) in writes {
        let shape = Shape::of(write.borrow());
        match groups.iter_mut().find(|(s, _)| *s == shape) {
            Some((_, group)) => group.push((key, write)),
            None => groups.push((shape, vec![(key, write)])),
        }
    }
    groups.into_iter().map(|(_, group)| group).collect()
}

/// Applies writes of any shapes, as few statements as their shapes allow; returns how many
/// runs changed.
pub async fn apply_all(
    conn: &mut Conn,
    writes: &[(&RequestId, &Write)],
) -> Result<usize, StoreError> {
    let mut changed = 0;
    for group in by_shape(writes.iter().copied()) {
        changed += apply(conn, &group).await?;
    }
    Ok(changed)
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

/// The state of these runs, with their tasks' retry settings (a run whose task was deleted
/// gets no retries).
pub async fn states(
    conn: &mut Conn,
    ids: &[RequestId],
    defaults: RetryPolicy,
) -> Result<HashMap<RequestId, RunState>, StoreError> {
    let mut found = HashMap::with_capacity(ids.len());
    for chunk in ids.chunks(1000) {
        let rows: Vec<StateRow> = with_conn!(conn, |c| i::ax_instance
            .left_join(t::ax_task.on(t::id.eq(i::task_id)))
            .filter(i::request_id.eq_any(chunk))
            .select(state_columns!())
            .load(c)
            .await)?;
        found.extend(rows.into_iter().map(|row| state_of(row, defaults)));
    }
    Ok(found)
}

type StateRow = (
    RequestId,
    RunStatus,
    i32,
    i32,
    i32,
    Option<NaiveDateTime>,
    Option<NaiveDateTime>,
    String,
    NaiveDateTime,
    TaskId,
    Option<i32>,
    Option<i32>,
    Option<i32>,
);

fn state_of(row: StateRow, defaults: RetryPolicy) -> (RequestId, RunState) {
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

/// A value bound into a write.
#[derive(Debug, Clone, PartialEq)]
enum Value {
    Int(i32),
    Status(RunStatus),
    Text(String),
    OptText(Option<String>),
    Time(NaiveDateTime),
    OptTime(Option<NaiveDateTime>),
}

fn opt_time(at: Option<DateTime<Utc>>) -> Value {
    Value::OptTime(at.map(to_db))
}

/// The columns a change sets (each with its `=`), in a fixed order.
fn set_columns(change: &Change) -> Vec<(&'static str, Value)> {
    let mut set = Vec::new();
    let mut put = |column, value: Option<Value>| {
        if let Some(value) = value {
            set.push((column, value));
        }
    };
    put("status =", change.status.map(Value::Status));
    put("attempt =", change.attempt.map(Value::Int));
    put("dispatched_attempt =", change.dispatched.map(Value::Int));
    put("retry_count =", change.retries_used.map(Value::Int));
    put("callback_code =", change.code.clone().map(Value::OptText));
    put(
        "callback_message =",
        change.message.clone().map(Value::OptText),
    );
    put("next_attempt_at =", change.next_attempt_at.map(opt_time));
    put("claimed_until =", change.claimed_until.map(opt_time));
    put("deadline_at =", change.deadline_at.map(opt_time));
    put(
        "finished_at =",
        change.finished_at.map(|at| Value::Time(to_db(at))),
    );
    put("fired_by =", change.claimant.clone().map(Value::Text));
    put(
        "dispatched_at =",
        change.dispatched_at.map(|at| Value::Time(to_db(at))),
    );
    set
}

/// The per-run conditions of a write (its status condition aside), each a column and its
/// comparison, in a fixed order.
fn expect_columns(expect: &Expect) -> Vec<(&'static str, Value)> {
    let mut cond = Vec::new();
    if let Some(attempt) = expect.attempt {
        cond.push(("attempt =", Value::Int(attempt)));
    }
    if let Some(dispatched) = expect.dispatched {
        cond.push(("dispatched_attempt =", Value::Int(dispatched)));
    }
    if let Some(dispatched) = expect.dispatched_at_least {
        cond.push(("dispatched_attempt >=", Value::Int(dispatched)));
    }
    if let Some(until) = expect.claimed_until {
        cond.push(("claimed_until =", Value::Time(to_db(until))));
    }
    if let Some(at) = expect.next_attempt_at {
        cond.push(("next_attempt_at =", Value::Time(to_db(at))));
    }
    if let Some(claimant) = &expect.claimant {
        cond.push(("fired_by =", Value::Text(claimant.clone())));
    }
    cond
}

/// What makes writes fit one statement.
#[derive(Debug, PartialEq, Eq)]
struct Shape {
    set: Vec<&'static str>,
    expect: Vec<&'static str>,
    status: &'static [RunStatus],
}

impl Shape {
    fn of(write: &Write) -> Shape {
        Shape {
            set: set_columns(&write.change)
                .into_iter()
                .map(|(c, _)| c)
                .collect(),
            expect: expect_columns(&write.expect)
                .into_iter()
                .map(|(c, _)| c)
                .collect(),
            status: write.expect.status,
        }
    }
}

/// Most runs one statement writes.
const ROWS_PER_STATEMENT: usize = 100;

/// Applies writes of one shape (see [`Shape`]), many to a statement; returns how many runs
/// changed. A run whose row no longer meets its write's condition is left as it is.
pub async fn apply(conn: &mut Conn, writes: &[(&RequestId, &Write)]) -> Result<usize, StoreError> {
    let mut changed = 0;
    for chunk in writes.chunks(ROWS_PER_STATEMENT) {
        let (sql, binds) = statement(chunk);
        changed += with_conn!(conn, |c| {
            let mut query = diesel::sql_query(sql.as_str()).into_boxed();
            for value in &binds {
                query = match value {
                    Value::Int(v) => query.bind::<Integer, _>(*v),
                    Value::Status(v) => query.bind::<Text, _>(*v),
                    Value::Text(v) => query.bind::<Text, _>(v.as_str()),
                    Value::OptText(v) => query.bind::<Nullable<Text>, _>(v.as_deref()),
                    Value::Time(v) => query.bind::<Timestamp, _>(*v),
                    Value::OptTime(v) => query.bind::<Nullable<Timestamp>, _>(*v),
                };
            }
            query.execute(c).await
        })?;
    }
    Ok(changed)
}

/// The SQL and binds of one statement for writes of one shape: `col = ?` for a value every run
/// shares, `col = CASE request_id WHEN ? THEN ? … END` for values that differ (and the same
/// with each condition's comparison).
fn statement(writes: &[(&RequestId, &Write)]) -> (String, Vec<Value>) {
    let Some((_, first)) = writes.first() else {
        return (String::new(), Vec::new());
    };
    let mut binds = Vec::new();
    let columns = |pick: &dyn Fn(&Write) -> Vec<(&'static str, Value)>, binds: &mut Vec<Value>| {
        let per_run: Vec<Vec<(&'static str, Value)>> =
            writes.iter().map(|(_, w)| pick(w)).collect();
        let names: Vec<&'static str> = per_run[0].iter().map(|(c, _)| *c).collect();
        let mut parts = Vec::new();
        for (k, name) in names.iter().enumerate() {
            let value = &per_run[0][k].1;
            // One value for every run (a status, a cleared column) is bound once.
            if per_run.iter().all(|values| values[k].1 == *value) {
                binds.push(value.clone());
                parts.push(format!("{name} ?"));
            } else {
                for ((id, _), values) in writes.iter().zip(&per_run) {
                    binds.push(Value::Text(id.to_string()));
                    binds.push(values[k].1.clone());
                }
                let whens = "WHEN ? THEN ? ".repeat(writes.len());
                parts.push(format!("{name} CASE request_id {whens}END"));
            }
        }
        parts
    };
    let set = columns(&|w| set_columns(&w.change), &mut binds).join(", ");
    let ids = vec!["?"; writes.len()].join(", ");
    binds.extend(writes.iter().map(|(id, _)| Value::Text(id.to_string())));
    let statuses = vec!["?"; first.expect.status.len()].join(", ");
    binds.extend(first.expect.status.iter().map(|s| Value::Status(*s)));
    let mut conditions = columns(&|w| expect_columns(&w.expect), &mut binds);
    conditions.insert(0, format!("status IN ({statuses})"));
    conditions.insert(0, format!("request_id IN ({ids})"));
    let sql = format!(
        "UPDATE ax_instance SET {set} WHERE {}",
        conditions.join(" AND ")
    );
    (sql, binds)
}

/// A run whose attempt is due: waiting for it, or held by a claim that lapsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DueAttempt {
    pub request_id: RequestId,
    pub task_id: TaskId,
    pub run: RunState,
    pub handler_url: String,
    pub params: String,
    pub timeout_ms: i64,
    pub trigger_type: TriggerType,
    /// The task's overlap policy: it decides the run's first attempt when claimed.
    pub overlap: OverlapPolicy,
    pub jitter_secs: i32,
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

    /// Whether the claim takes its first attempt: the overlap policy decides it then.
    fn first_attempt(&self) -> bool {
        self.run.attempt == 1 && self.run.dispatched == 0
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
        (TriggerType, OverlapPolicy, i32),
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
            (i::trigger_type, t::overlap, t::jitter_secs),
        ))
        .load(c)
        .await)?;
    let mut due: Vec<DueAttempt> = rows
        .into_iter()
        .map(
            |(
                state,
                (task_id, handler_url, params, timeout_ms),
                (trigger_type, overlap, jitter),
            )| {
                let (request_id, run) = state_of(state, RetryPolicy::default());
                DueAttempt {
                    request_id,
                    task_id,
                    run,
                    handler_url,
                    params,
                    timeout_ms,
                    trigger_type,
                    overlap,
                    jitter_secs: jitter,
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
    if attempt.first_attempt() && attempt.overlap != OverlapPolicy::Allow {
        if let Some(held) = overlapped(conn, attempt, event).await? {
            apply(conn, &[(&attempt.request_id, &held)]).await?;
            return Ok(false);
        }
    }
    Ok(apply(conn, &[(&attempt.request_id, &write)]).await? == 1)
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
    super::instances::lock_task_schedules(conn, &[attempt.task_id]).await?;
    let due = DueRun {
        task_id: attempt.task_id,
        policy: attempt.overlap,
        request_id: &attempt.request_id,
        scheduled_at: attempt.run.scheduled_at,
    };
    let decision = super::overlap::settle(conn, &[due], *at).await?;
    let event = match decision.as_slice() {
        [Overlap::Skip(message)] => Event::Skipped { message, at: *at },
        [Overlap::Buffer] => Event::Buffered { at: *at },
        _ => return Ok(None),
    };
    Ok(on_event(&attempt.run, &event).ok())
}

/// Applies a lapse event (`Recovered`, `Orphaned`) to these runs. Returns how many changed.
async fn lapse_claims(
    conn: &mut Conn,
    ids: Vec<RequestId>,
    event: &Event,
) -> Result<usize, StoreError> {
    let runs = states(conn, &ids, RetryPolicy::default()).await?;
    let writes: Vec<(RequestId, Write)> = runs
        .into_iter()
        .filter_map(|(id, run)| on_event(&run, event).ok().map(|w| (id, w)))
        .collect();
    // Every such write has one shape: one statement per page.
    let writes: Vec<(&RequestId, &Write)> = writes.iter().map(|(id, w)| (id, w)).collect();
    apply(conn, &writes).await
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
        ))
        .load(c)
        .await)?;
    let (mut released, mut failed) = (0, 0);
    for (request_id, task_id, scheduled_at, deadline, code) in pending {
        if code.as_deref() == Some(OVERLAP_CODE) {
            released += release_buffered(conn, &request_id, task_id, scheduled_at, now).await?;
            continue;
        }
        let upstreams = upstream_states(conn, task_id, scheduled_at).await?;
        let deadline = deadline.map_or(now, from_db);
        let Some(event) = crate::run::upstream_event(&upstreams, now, deadline) else {
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

/// A run the overlap policy holds back goes on once no earlier run of its task is open: to
/// its upstreams, if it has any, else to dispatch now. Returns 1 if it went on.
async fn release_buffered(
    conn: &mut Conn,
    request_id: &RequestId,
    task_id: TaskId,
    scheduled_at: NaiveDateTime,
    now: DateTime<Utc>,
) -> Result<usize, StoreError> {
    let open: Vec<(RequestId, NaiveDateTime, RunStatus)> = with_conn!(conn, |c| i::ax_instance
        .filter(i::task_id.eq(task_id))
        .filter(i::status.eq_any(crate::run::OPEN))
        .filter(i::scheduled_at.le(scheduled_at))
        .select((i::request_id, i::scheduled_at, i::status))
        .load(c)
        .await)?;
    let earlier = |(id, at, status): (RequestId, NaiveDateTime, RunStatus)| {
        OpenRun::of(id, from_db(at), status, None).is_before(from_db(scheduled_at), request_id)
    };
    if open.into_iter().any(earlier) {
        return Ok(0);
    }
    let upstreams = super::tasks::dependencies_of(conn, &[task_id]).await?;
    let event = Event::EarlierFinished {
        waits_for_upstreams: upstreams.get(&task_id).is_some_and(|u| !u.is_empty()),
        at: now,
    };
    let decided = decide(conn, request_id, &event, RetryPolicy::default()).await?;
    Ok(usize::from(matches!(decided, Decided::Applied(_))))
}

/// For each upstream of `task_id`, the status of its latest run scheduled at or before `at`.
async fn upstream_states(
    conn: &mut Conn,
    task_id: TaskId,
    at: NaiveDateTime,
) -> Result<Vec<Option<RunStatus>>, StoreError> {
    let upstreams = super::tasks::dependencies_of(conn, &[task_id]).await?;
    let mut states = Vec::new();
    for upstream in upstreams.get(&task_id).into_iter().flatten() {
        let latest: Option<RunStatus> = with_conn!(conn, |c| i::ax_instance
            .filter(i::task_id.eq(*upstream))
            .filter(i::scheduled_at.le(at))
            .order((i::scheduled_at.desc(), i::id.desc()))
            .select(i::status)
            .first(c)
            .await
            .optional())?;
        states.push(latest);
    }
    Ok(states)
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

/// Ends the open runs of a deleted task: nothing will dispatch them any more.
pub async fn cancel_open(
    conn: &mut Conn,
    task_id: TaskId,
    now: DateTime<Utc>,
) -> Result<usize, StoreError> {
    let open: Vec<RequestId> = with_conn!(conn, |c| i::ax_instance
        .filter(i::task_id.eq(task_id))
        .filter(i::status.eq_any(crate::run::OPEN))
        .select(i::request_id)
        .load(c)
        .await)?;
    let Some(write) = crate::run::blind(&Event::TaskDeleted { at: now }) else {
        return Ok(0);
    };
    let writes: Vec<(&RequestId, &Write)> = open.iter().map(|id| (id, &write)).collect();
    apply(conn, &writes).await
}
