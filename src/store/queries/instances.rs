//! Instance rows: recording fires, applying results, and the run history.

use std::collections::{BTreeMap, HashMap, HashSet};

use chrono::{DateTime, NaiveDateTime, Utc};
use diesel::prelude::*;
use diesel::result::{DatabaseErrorKind, Error as DieselError};
use diesel::sql_types::{BigInt, Integer, Nullable, Text, Timestamp};
use diesel_async::RunQueryDsl;

use super::Page;
use crate::schedule::{
    decide_report, dependency_decision, DependencyDecision, Report, ReportDecision, RetryPolicy,
    RunState,
};
use crate::store::models::{Instance, InstanceStatus, NewInstance, TaskStatus};
use crate::store::schema::ax_instance::dsl as i;
use crate::store::schema::ax_task::dsl as t;
use crate::store::{from_db, to_db, Conn, StoreError};
use crate::with_conn;

/// A due run to record: advance the task from `scheduled_at` to `next_run_at` and insert the run.
#[derive(Debug, Clone)]
pub struct FireRecord {
    pub scheduled_at: NaiveDateTime,
    pub next_run_at: Option<NaiveDateTime>,
    pub instance: NewInstance,
}

/// What became of one fire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FireOutcome {
    /// The run's row is committed; it may be dispatched.
    Fired,
    /// The task no longer holds the scheduled time (fired elsewhere, changed, paused, deleted).
    Stale,
    /// A row with this request id exists already.
    Duplicate,
}

/// Records a batch of fires in the caller's transaction: for each, compare-and-set the task's
/// `next_run_at` on the scheduled value, and insert the run only if that succeeded.
///
/// A batch takes three statements whatever its size: lock and read the tasks, advance the
/// fresh ones in one `UPDATE … CASE`, insert their runs in one multi-row `INSERT`. A task may
/// fire more than once in a batch when its fires form a chain (each advances the task to the
/// next one's time, as a late tick's catch-up does): the chain is fresh or stale as a whole.
/// Any other shape goes row by row.
pub async fn record_fires(
    conn: &mut Conn,
    fires: &[FireRecord],
) -> Result<Vec<FireOutcome>, StoreError> {
    match chains(fires) {
        Some(chains) if fires.len() > 1 => record_fires_at_once(conn, fires, chains).await,
        _ => record_fires_one_by_one(conn, fires).await,
    }
}

/// Each task's fires (positions in batch order), if every task's fires form a chain.
fn chains(fires: &[FireRecord]) -> Option<BTreeMap<i64, Vec<usize>>> {
    let mut chains: BTreeMap<i64, Vec<usize>> = BTreeMap::new();
    for (i, fire) in fires.iter().enumerate() {
        let chain = chains.entry(fire.instance.task_id).or_default();
        if let Some(&last) = chain.last() {
            if fires[last].next_run_at != Some(fire.scheduled_at) {
                return None;
            }
        }
        chain.push(i);
    }
    Some(chains)
}

async fn record_fires_at_once(
    conn: &mut Conn,
    fires: &[FireRecord],
    chains: BTreeMap<i64, Vec<usize>>,
) -> Result<Vec<FireOutcome>, StoreError> {
    let ids: Vec<i64> = chains.keys().copied().collect();
    let current = lock_task_schedules(conn, &ids).await?;
    let mut fresh = vec![false; fires.len()];
    let mut advances = Vec::new();
    for (task_id, chain) in &chains {
        let (Some(&first), Some(&last)) = (chain.iter().next(), chain.iter().last()) else {
            continue;
        };
        if current.get(task_id) == Some(&Some(fires[first].scheduled_at)) {
            advances.push((*task_id, fires[last].next_run_at));
            chain.iter().for_each(|&i| fresh[i] = true);
        }
    }
    let runs: Vec<&NewInstance> = fires
        .iter()
        .zip(&fresh)
        .filter(|(_, fresh)| **fresh)
        .map(|(fire, _)| &fire.instance)
        .collect();
    let inserted = if runs.is_empty() {
        Ok(())
    } else {
        advance_tasks(conn, &advances).await?;
        insert_instances(conn, &runs).await
    };
    let duplicates = match inserted {
        Ok(()) => HashSet::new(),
        // Some run exists already: insert one by one to find which.
        Err(StoreError::Query(DieselError::DatabaseError(
            DatabaseErrorKind::UniqueViolation,
            _,
        ))) => {
            let mut duplicates = HashSet::new();
            for run in &runs {
                if insert_instance(conn, run).await? == FireOutcome::Duplicate {
                    duplicates.insert(run.request_id.as_str());
                }
            }
            duplicates
        }
        Err(err) => return Err(err),
    };
    Ok(fires
        .iter()
        .zip(fresh)
        .map(|(fire, fresh)| {
            if !fresh {
                FireOutcome::Stale
            } else if duplicates.contains(fire.instance.request_id.as_str()) {
                FireOutcome::Duplicate
            } else {
                FireOutcome::Fired
            }
        })
        .collect())
}

/// The `next_run_at` of these tasks, locked for the rest of the transaction (enabled ones
/// only; a paused or deleted task is absent).
async fn lock_task_schedules(
    conn: &mut Conn,
    ids: &[i64],
) -> Result<HashMap<i64, Option<NaiveDateTime>>, StoreError> {
    // The rows must be found and locked through the primary key: read through the
    // (status, next_run_at) index, MySQL locks index entries that concurrent fire batches are
    // updating, and they deadlock. So the filter names only the key, and `updated_at`, outside
    // that index, keeps the index from covering the query.
    let query = t::ax_task.filter(t::id.eq_any(ids)).select((
        t::id,
        t::next_run_at,
        t::status,
        t::updated_at,
    ));
    // MySQL needs the row locks to keep another process from advancing a task in between;
    // SQLite's `BEGIN IMMEDIATE` already holds the only write lock.
    type Row = (i64, Option<NaiveDateTime>, String, NaiveDateTime);
    let rows: Vec<Row> = match conn {
        Conn::Mysql(c) => query.for_update().load(&mut **c).await?,
        Conn::Sqlite(c) => query.load(&mut **c).await?,
    };
    Ok(rows
        .into_iter()
        .filter(|(_, _, status, _)| status == TaskStatus::Enabled.as_str())
        .map(|(id, next_run_at, _, _)| (id, next_run_at))
        .collect())
}

/// Moves each task's `next_run_at` on, in one statement: (task id, new `next_run_at`).
async fn advance_tasks(
    conn: &mut Conn,
    advances: &[(i64, Option<NaiveDateTime>)],
) -> Result<(), StoreError> {
    let sql = format!(
        "UPDATE ax_task SET next_run_at = CASE id {} END WHERE id IN ({})",
        "WHEN ? THEN ? ".repeat(advances.len()),
        placeholders(advances.len(), 1)
    );
    with_conn!(conn, |c| {
        let mut query = diesel::sql_query(sql.as_str()).into_boxed();
        for &(task_id, next_run_at) in advances {
            query = query
                .bind::<BigInt, _>(task_id)
                .bind::<Nullable<Timestamp>, _>(next_run_at);
        }
        for &(task_id, _) in advances {
            query = query.bind::<BigInt, _>(task_id);
        }
        query.execute(c).await
    })?;
    Ok(())
}

/// Inserts the runs in one statement; fails whole on a duplicate request id.
async fn insert_instances(conn: &mut Conn, runs: &[&NewInstance]) -> Result<(), StoreError> {
    let sql = format!(
        "INSERT INTO ax_instance (task_id, request_id, trigger_type, scheduled_at, trigger_at, \
         status, fired_by, created_at, finished_at, next_attempt_at, deadline_at, params) \
         VALUES {}",
        vec![format!("({})", placeholders(12, 1)); runs.len()].join(", ")
    );
    with_conn!(conn, |c| {
        let mut query = diesel::sql_query(sql.as_str()).into_boxed();
        for run in runs {
            query = query
                .bind::<BigInt, _>(run.task_id)
                .bind::<Text, _>(&run.request_id)
                .bind::<Text, _>(&run.trigger_type)
                .bind::<Timestamp, _>(run.scheduled_at)
                .bind::<Timestamp, _>(run.trigger_at)
                .bind::<Text, _>(&run.status)
                .bind::<Text, _>(&run.fired_by)
                .bind::<Timestamp, _>(run.created_at)
                .bind::<Nullable<Timestamp>, _>(run.finished_at)
                .bind::<Nullable<Timestamp>, _>(run.next_attempt_at)
                .bind::<Nullable<Timestamp>, _>(run.deadline_at)
                .bind::<Nullable<Text>, _>(&run.params);
        }
        query.execute(c).await
    })?;
    Ok(())
}

/// `n` groups of `width` comma-separated placeholders.
fn placeholders(n: usize, width: usize) -> String {
    vec!["?"; n * width].join(", ")
}

async fn record_fires_one_by_one(
    conn: &mut Conn,
    fires: &[FireRecord],
) -> Result<Vec<FireOutcome>, StoreError> {
    let mut outcomes = Vec::with_capacity(fires.len());
    for fire in fires {
        let advanced = with_conn!(conn, |c| diesel::update(
            t::ax_task
                .filter(t::id.eq(fire.instance.task_id))
                .filter(t::status.eq(TaskStatus::Enabled.as_str()))
                .filter(t::next_run_at.eq(fire.scheduled_at))
        )
        .set(t::next_run_at.eq(fire.next_run_at))
        .execute(c)
        .await)?;
        if advanced == 0 {
            outcomes.push(FireOutcome::Stale);
            continue;
        }
        outcomes.push(insert_instance(conn, &fire.instance).await?);
    }
    Ok(outcomes)
}

/// Inserts a run; a duplicate request id is an outcome, not an error (the unique key is the
/// last guard against a second row for one run).
pub async fn insert_instance(
    conn: &mut Conn,
    instance: &NewInstance,
) -> Result<FireOutcome, StoreError> {
    let inserted = with_conn!(conn, |c| diesel::insert_into(i::ax_instance)
        .values(instance)
        .execute(c)
        .await);
    match inserted {
        Ok(_) => Ok(FireOutcome::Fired),
        Err(DieselError::DatabaseError(DatabaseErrorKind::UniqueViolation, _)) => {
            Ok(FireOutcome::Duplicate)
        }
        Err(err) => Err(err.into()),
    }
}

/// A reported state of a run: from the dispatcher (RUNNING, or a synchronous result), from
/// the executor's callback, or from the expiry of a RUNNING run.
#[derive(Debug, Clone)]
pub struct ResultRecord {
    pub request_id: String,
    pub status: InstanceStatus,
    pub code: Option<String>,
    pub message: Option<String>,
    pub at: NaiveDateTime,
    /// For RUNNING: when the run times out without a result.
    pub deadline: Option<NaiveDateTime>,
    /// The attempt this result is about; `None` means the current one.
    pub attempt: Option<i32>,
    /// False when the executor said not to retry a failure.
    pub retry_allowed: bool,
    /// True when the caller needs no exact outcome (the dispatcher's SUCCESS and RUNNING
    /// reports): such results are applied many to a statement.
    pub batchable: bool,
}

/// What became of one result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResultOutcome {
    /// The run is now in this state.
    Applied(InstanceStatus),
    /// The attempt failed; the next one is due at `at`.
    RetryScheduled {
        at: NaiveDateTime,
        attempt: i32,
    },
    /// The run had already reached this final state; nothing changed.
    AlreadyFinal(InstanceStatus),
    /// The report is about an earlier attempt, or RUNNING came after a result; nothing changed.
    Superseded,
    Unknown,
}

/// The state of a run that a result is applied to, and the retry settings of its task.
#[derive(Debug, Queryable)]
struct Current {
    status: String,
    attempt: i32,
    retry_count: i32,
    max_retry: Option<i32>,
    retry_backoff_secs: Option<i32>,
    retry_factor: Option<i32>,
}

/// Applies one result. The row is read, the decision made (`schedule::decide_report`), and
/// written with a compare-and-set on the status and attempt read, so a late or repeated report
/// never overwrites a newer state.
pub async fn apply_result(
    conn: &mut Conn,
    result: &ResultRecord,
    retry_defaults: RetryPolicy,
) -> Result<ResultOutcome, StoreError> {
    let current: Option<Current> = with_conn!(conn, |c| i::ax_instance
        .left_join(t::ax_task.on(t::id.eq(i::task_id)))
        .filter(i::request_id.eq(&result.request_id))
        .select((
            i::status,
            i::attempt,
            i::retry_count,
            t::max_retry.nullable(),
            t::retry_backoff_secs.nullable(),
            t::retry_factor.nullable(),
        ))
        .first(c)
        .await
        .optional())?;
    let Some(current) = current else {
        return Ok(ResultOutcome::Unknown);
    };
    let state = RunState {
        status: InstanceStatus::parse(&current.status).unwrap_or(InstanceStatus::Failed),
        attempt: current.attempt,
        retries_used: current.retry_count,
        // A run whose task was deleted is not retried.
        max_retry: current.max_retry.unwrap_or(0),
    };
    let report = Report {
        status: result.status,
        attempt: result.attempt,
        retry_allowed: result.retry_allowed,
        at: from_db(result.at),
    };
    let policy = retry_defaults.with_overrides(current.retry_backoff_secs, current.retry_factor);
    // Every write below is a compare-and-set on what was just read.
    let target = i::ax_instance
        .filter(i::request_id.eq(&result.request_id))
        .filter(i::status.eq(&current.status))
        .filter(i::attempt.eq(current.attempt));
    let (changed, outcome) = match decide_report(state, report, policy) {
        ReportDecision::AlreadyFinal(status) => return Ok(ResultOutcome::AlreadyFinal(status)),
        ReportDecision::Superseded => return Ok(ResultOutcome::Superseded),
        ReportDecision::Running => {
            let changed = with_conn!(conn, |c| diesel::update(target)
                .set((
                    i::status.eq(InstanceStatus::Running.as_str()),
                    i::deadline_at.eq(result.deadline),
                    i::next_attempt_at.eq(None::<NaiveDateTime>),
                ))
                .execute(c)
                .await)?;
            (changed, ResultOutcome::Applied(InstanceStatus::Running))
        }
        ReportDecision::Finish(status) => (
            finish(conn, target, result, status).await?,
            ResultOutcome::Applied(status),
        ),
        ReportDecision::Retry { at, attempt, retry } => {
            let at = to_db(at);
            let changed = with_conn!(conn, |c| diesel::update(target)
                .set((
                    i::status.eq(InstanceStatus::Ready.as_str()),
                    i::attempt.eq(attempt),
                    i::retry_count.eq(retry),
                    i::next_attempt_at.eq(at),
                    i::deadline_at.eq(None::<NaiveDateTime>),
                    i::callback_code.eq(&result.code),
                    i::callback_message.eq(&result.message),
                ))
                .execute(c)
                .await)?;
            (changed, ResultOutcome::RetryScheduled { at, attempt })
        }
    };
    // Lost the compare-and-set: another report changed the run in between.
    Ok(if changed > 0 {
        outcome
    } else {
        ResultOutcome::Superseded
    })
}

/// Applies many SUCCESS or many RUNNING reports (`batchable` ones) in one statement each:
/// SUCCESS to open READY or RUNNING runs, RUNNING to READY runs of the same attempt. Returns
/// how many runs changed; a report whose run had moved on changes nothing.
pub async fn apply_results_at_once(
    conn: &mut Conn,
    status: InstanceStatus,
    results: &[&ResultRecord],
) -> Result<usize, StoreError> {
    let n = results.len();
    let case = || format!("CASE request_id {}END", "WHEN ? THEN ? ".repeat(n));
    let ids = placeholders(n, 1);
    let running = status == InstanceStatus::Running;
    let sql = if running {
        format!(
            "UPDATE ax_instance SET status = 'RUNNING', next_attempt_at = NULL, deadline_at = {} \
             WHERE status = 'READY' AND request_id IN ({ids}) AND attempt = {}",
            case(),
            case()
        )
    } else {
        format!(
            "UPDATE ax_instance SET status = ?, next_attempt_at = NULL, callback_code = {}, \
             callback_message = {}, finished_at = {} \
             WHERE status IN ('READY', 'RUNNING') AND request_id IN ({ids})",
            case(),
            case(),
            case()
        )
    };
    Ok(with_conn!(conn, |c| {
        let mut query = diesel::sql_query(sql.as_str()).into_boxed();
        if running {
            for r in results {
                query = query
                    .bind::<Text, _>(&r.request_id)
                    .bind::<Nullable<Timestamp>, _>(r.deadline);
            }
        } else {
            query = query.bind::<Text, _>(status.as_str());
            for r in results {
                query = query
                    .bind::<Text, _>(&r.request_id)
                    .bind::<Nullable<Text>, _>(&r.code);
            }
            for r in results {
                query = query
                    .bind::<Text, _>(&r.request_id)
                    .bind::<Nullable<Text>, _>(&r.message);
            }
            for r in results {
                query = query
                    .bind::<Text, _>(&r.request_id)
                    .bind::<Timestamp, _>(r.at);
            }
        }
        for r in results {
            query = query.bind::<Text, _>(&r.request_id);
        }
        if running {
            for r in results {
                query = query
                    .bind::<Text, _>(&r.request_id)
                    .bind::<Integer, _>(r.attempt.unwrap_or(0));
            }
        }
        query.execute(c).await
    })?)
}

/// The status and finish time of these runs, by request id.
pub async fn states_of(
    conn: &mut Conn,
    request_ids: &[String],
) -> Result<HashMap<String, (InstanceStatus, Option<NaiveDateTime>)>, StoreError> {
    let rows: Vec<(String, String, Option<NaiveDateTime>)> = with_conn!(conn, |c| i::ax_instance
        .filter(i::request_id.eq_any(request_ids))
        .select((i::request_id, i::status, i::finished_at))
        .load(c)
        .await)?;
    Ok(rows
        .into_iter()
        .filter_map(|(id, status, finished)| {
            InstanceStatus::parse(&status).map(|status| (id, (status, finished)))
        })
        .collect())
}

/// The rows a result may change: this run, in the status and attempt it was read in.
type Target<'a> = diesel::dsl::Filter<
    diesel::dsl::Filter<
        diesel::dsl::Filter<i::ax_instance, diesel::dsl::Eq<i::request_id, &'a String>>,
        diesel::dsl::Eq<i::status, &'a String>,
    >,
    diesel::dsl::Eq<i::attempt, i32>,
>;

/// Ends a run in a final state.
async fn finish(
    conn: &mut Conn,
    target: Target<'_>,
    result: &ResultRecord,
    status: InstanceStatus,
) -> Result<usize, StoreError> {
    Ok(with_conn!(conn, |c| diesel::update(target)
        .set((
            i::status.eq(status.as_str()),
            i::callback_code.eq(&result.code),
            i::callback_message.eq(&result.message),
            i::finished_at.eq(result.at),
            i::next_attempt_at.eq(None::<NaiveDateTime>),
        ))
        .execute(c)
        .await)?)
}

/// A READY run due for (re)dispatch, with what its dispatch needs.
#[derive(Debug, Clone, PartialEq, Eq, Queryable)]
pub struct DueAttempt {
    pub request_id: String,
    pub task_id: i64,
    pub scheduled_at: NaiveDateTime,
    pub attempt: i32,
    pub next_attempt_at: NaiveDateTime,
    pub handler_url: String,
    pub params: String,
    pub timeout_ms: i64,
}

/// READY runs whose next attempt is due by `until`: retries, and runs whose dispatcher's claim
/// lapsed (it died before recording an outcome).
pub async fn due_attempts(
    conn: &mut Conn,
    until: NaiveDateTime,
    limit: i64,
) -> Result<Vec<DueAttempt>, StoreError> {
    Ok(with_conn!(conn, |c| i::ax_instance
        .inner_join(t::ax_task.on(t::id.eq(i::task_id)))
        .filter(i::status.eq(InstanceStatus::Ready.as_str()))
        .filter(i::next_attempt_at.le(until))
        .order(i::next_attempt_at.asc())
        .limit(limit)
        .select((
            i::request_id,
            i::task_id,
            i::scheduled_at,
            i::attempt,
            i::next_attempt_at.assume_not_null(),
            t::handler_url,
            // A manual run's own params win over the task's.
            diesel::dsl::sql::<diesel::sql_types::Text>(
                "COALESCE(ax_instance.params, ax_task.params)",
            ),
            t::timeout_ms,
        ))
        .load(c)
        .await)?)
}

/// A claim on the dispatch of one attempt.
#[derive(Debug, Clone)]
pub struct Claim {
    pub request_id: String,
    pub attempt: i32,
    /// The `next_attempt_at` the claimant saw; the claim fails if it moved.
    pub expected: NaiveDateTime,
    /// When the claim lapses if no outcome is recorded.
    pub until: NaiveDateTime,
    pub claimant: String,
}

/// Claims an attempt for dispatch; of several ax processes racing, one wins.
pub async fn claim(conn: &mut Conn, claim: &Claim) -> Result<bool, StoreError> {
    let changed = with_conn!(conn, |c| diesel::update(
        i::ax_instance
            .filter(i::request_id.eq(&claim.request_id))
            .filter(i::status.eq(InstanceStatus::Ready.as_str()))
            .filter(i::attempt.eq(claim.attempt))
            .filter(i::next_attempt_at.eq(claim.expected))
    )
    .set((
        i::next_attempt_at.eq(claim.until),
        i::fired_by.eq(&claim.claimant),
    ))
    .execute(c)
    .await)?;
    Ok(changed > 0)
}

/// Makes this process's own READY runs due now: after a restart nothing of its previous life
/// is in flight, so there is no reason to wait for those claims to lapse.
pub async fn reclaim_own(
    conn: &mut Conn,
    instance_id: &str,
    now: NaiveDateTime,
) -> Result<usize, StoreError> {
    let own: Vec<i64> = with_conn!(conn, |c| i::ax_instance
        .filter(i::status.eq(InstanceStatus::Ready.as_str()))
        .filter(i::fired_by.eq(instance_id))
        .filter(i::next_attempt_at.gt(now))
        .select(i::id)
        .load(c)
        .await)?;
    let mut reclaimed = 0;
    for ids in own.chunks(1000) {
        reclaimed += make_due(conn, ids, &[], now).await?;
    }
    Ok(reclaimed)
}

/// Makes the READY runs claimed by processes that are no longer alive due now, instead of
/// waiting for their claims to lapse.
pub async fn reclaim_orphans(
    conn: &mut Conn,
    live: &[String],
    now: NaiveDateTime,
) -> Result<usize, StoreError> {
    // Find them first, then update by id: a range update would lock the index range that
    // fires are inserting into.
    let orphans: Vec<i64> = with_conn!(conn, |c| i::ax_instance
        .filter(i::status.eq(InstanceStatus::Ready.as_str()))
        .filter(i::next_attempt_at.gt(now))
        .filter(i::fired_by.ne_all(live))
        .select(i::id)
        .limit(1000)
        .load(c)
        .await)?;
    make_due(conn, &orphans, live, now).await
}

/// Makes these READY runs (still not fired by one of `live`) due now, or at their scheduled
/// time for a run committed ahead of it: a reclaimed run never goes out early.
async fn make_due(
    conn: &mut Conn,
    ids: &[i64],
    live: &[String],
    now: NaiveDateTime,
) -> Result<usize, StoreError> {
    if ids.is_empty() {
        return Ok(0);
    }
    let runs = || {
        i::ax_instance
            .filter(i::id.eq_any(ids))
            .filter(i::status.eq(InstanceStatus::Ready.as_str()))
            .filter(i::fired_by.ne_all(live))
    };
    let due_now = with_conn!(conn, |c| diesel::update(
        runs().filter(i::scheduled_at.le(now))
    )
    .set(i::next_attempt_at.eq(now))
    .execute(c)
    .await)?;
    let ahead = with_conn!(conn, |c| diesel::update(
        runs().filter(i::scheduled_at.gt(now))
    )
    .set(i::next_attempt_at.eq(i::scheduled_at.nullable()))
    .execute(c)
    .await)?;
    Ok(due_now + ahead)
}

/// Decides every due PENDING run (up to `limit`, oldest first) whose upstreams allow it:
/// released runs become READY and due now (the attempt scan dispatches them); failed ones end
/// FAILED, without retries. Returns (released, failed).
pub async fn check_pending(
    conn: &mut Conn,
    now: DateTime<Utc>,
    limit: i64,
) -> Result<(usize, usize), StoreError> {
    let pending: Vec<(String, i64, NaiveDateTime, Option<NaiveDateTime>)> =
        with_conn!(conn, |c| i::ax_instance
            .filter(i::status.eq(InstanceStatus::Pending.as_str()))
            // A run committed ahead of its time waits for its time, whatever its upstreams.
            .filter(i::scheduled_at.le(to_db(now)))
            .order(i::scheduled_at.asc())
            .limit(limit)
            .select((i::request_id, i::task_id, i::scheduled_at, i::deadline_at))
            .load(c)
            .await)?;
    let (mut released, mut failed) = (0, 0);
    for (request_id, task_id, scheduled_at, deadline) in pending {
        let upstreams = upstream_states(conn, task_id, scheduled_at).await?;
        let deadline = deadline.map_or(now, from_db);
        let target = i::ax_instance
            .filter(i::request_id.eq(&request_id))
            .filter(i::status.eq(InstanceStatus::Pending.as_str()));
        match dependency_decision(&upstreams, now, deadline) {
            DependencyDecision::Wait => {}
            DependencyDecision::Release => {
                released += with_conn!(conn, |c| diesel::update(target)
                    .set((
                        i::status.eq(InstanceStatus::Ready.as_str()),
                        i::next_attempt_at.eq(to_db(now)),
                        i::deadline_at.eq(None::<NaiveDateTime>),
                    ))
                    .execute(c)
                    .await)?;
            }
            DependencyDecision::Fail(code) => {
                log::warn!("task {task_id} request {request_id}: {code}");
                failed += with_conn!(conn, |c| diesel::update(target)
                    .set((
                        i::status.eq(InstanceStatus::Failed.as_str()),
                        i::callback_code.eq(code),
                        i::callback_message.eq(dependency_message(code)),
                        i::finished_at.eq(to_db(now)),
                        i::deadline_at.eq(None::<NaiveDateTime>),
                    ))
                    .execute(c)
                    .await)?;
            }
        }
    }
    Ok((released, failed))
}

fn dependency_message(code: &str) -> &'static str {
    match code {
        "UPSTREAM_FAILED" => "an upstream task's run at or before this one did not succeed",
        _ => "upstream tasks did not succeed within the dependency timeout",
    }
}

/// For each upstream of `task_id`, the status of its latest run scheduled at or before `at`.
async fn upstream_states(
    conn: &mut Conn,
    task_id: i64,
    at: NaiveDateTime,
) -> Result<Vec<Option<InstanceStatus>>, StoreError> {
    let upstreams = super::tasks::dependencies_of(conn, &[task_id]).await?;
    let mut states = Vec::new();
    for upstream in upstreams.get(&task_id).into_iter().flatten() {
        let latest: Option<String> = with_conn!(conn, |c| i::ax_instance
            .filter(i::task_id.eq(*upstream))
            .filter(i::scheduled_at.le(at))
            .order((i::scheduled_at.desc(), i::id.desc()))
            .select(i::status)
            .first(c)
            .await
            .optional())?;
        states.push(latest.as_deref().and_then(InstanceStatus::parse));
    }
    Ok(states)
}

/// RUNNING runs whose deadline passed with no result: (request id, attempt).
pub async fn expired_running(
    conn: &mut Conn,
    now: NaiveDateTime,
    limit: i64,
) -> Result<Vec<(String, i32)>, StoreError> {
    Ok(with_conn!(conn, |c| i::ax_instance
        .filter(i::status.eq(InstanceStatus::Running.as_str()))
        .filter(i::deadline_at.lt(now))
        .order(i::deadline_at.asc())
        .limit(limit)
        .select((i::request_id, i::attempt))
        .load(c)
        .await)?)
}

/// Ends the open runs of a deleted task: nothing will dispatch them any more.
pub async fn cancel_open(
    conn: &mut Conn,
    task_id: i64,
    now: NaiveDateTime,
) -> Result<usize, StoreError> {
    Ok(with_conn!(conn, |c| diesel::update(
        i::ax_instance
            .filter(i::task_id.eq(task_id))
            .filter(i::status.eq_any(OPEN))
    )
    .set((
        i::status.eq(InstanceStatus::Failed.as_str()),
        i::callback_code.eq("TASK_DELETED"),
        i::callback_message.eq("the task was deleted before the run finished"),
        i::finished_at.eq(now),
        i::next_attempt_at.eq(None::<NaiveDateTime>),
    ))
    .execute(c)
    .await)?)
}

const OPEN: [&str; 3] = ["PENDING", "READY", "RUNNING"];

/// The run with this request id.
pub async fn find_by_request_id(
    conn: &mut Conn,
    request_id: &str,
) -> Result<Option<Instance>, StoreError> {
    Ok(with_conn!(conn, |c| i::ax_instance
        .filter(i::request_id.eq(request_id))
        .select(Instance::as_select())
        .first(c)
        .await
        .optional())?)
}

/// A task's runs, newest scheduled first, with their total count.
pub async fn list_for_task(
    conn: &mut Conn,
    task_id: i64,
    page: Page,
) -> Result<(Vec<Instance>, i64), StoreError> {
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
            .select(Instance::as_select())
            .load(c)
            .await?;
        (rows, total)
    }))
}

/// Filters of the run history.
#[derive(Debug, Clone, Default)]
pub struct InstanceFilter {
    pub task_id: Option<i64>,
    pub scene: Option<String>,
    pub status: Option<InstanceStatus>,
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

/// Runs matching the filter, newest scheduled first, after `cursor`; at most `limit`.
pub async fn history(
    conn: &mut Conn,
    filter: &InstanceFilter,
    cursor: Option<Cursor>,
    limit: i64,
) -> Result<Vec<Instance>, StoreError> {
    Ok(with_conn!(conn, |c| {
        let mut query = i::ax_instance.into_boxed();
        if let Some(task_id) = filter.task_id {
            query = query.filter(i::task_id.eq(task_id));
        }
        if let Some(scene) = &filter.scene {
            let ids = t::ax_task.filter(t::scene.eq(scene.clone())).select(t::id);
            query = query.filter(i::task_id.eq_any(ids));
        }
        if let Some(status) = filter.status {
            query = query.filter(i::status.eq(status.as_str()));
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
            .select(Instance::as_select())
            .load(c)
            .await
    })?)
}

/// (status, scheduled, triggered) of a task's runs scheduled in `[from, to)`.
pub async fn for_stats(
    conn: &mut Conn,
    task_id: i64,
    from: NaiveDateTime,
    to: NaiveDateTime,
) -> Result<Vec<(String, NaiveDateTime, NaiveDateTime)>, StoreError> {
    Ok(with_conn!(conn, |c| i::ax_instance
        .filter(i::task_id.eq(task_id))
        .filter(i::scheduled_at.ge(from))
        .filter(i::scheduled_at.lt(to))
        .select((i::status, i::scheduled_at, i::trigger_at))
        .load(c)
        .await)?)
}

/// Deletes up to `limit` final runs that finished before `before`; returns how many. Small
/// batches keep each statement short, so firing never waits behind retention.
pub async fn delete_finished_before(
    conn: &mut Conn,
    before: NaiveDateTime,
    limit: i64,
) -> Result<usize, StoreError> {
    let ids: Vec<i64> = with_conn!(conn, |c| i::ax_instance
        .filter(i::finished_at.lt(before))
        .order(i::finished_at.asc())
        .limit(limit)
        .select(i::id)
        .load(c)
        .await)?;
    if ids.is_empty() {
        return Ok(0);
    }
    Ok(with_conn!(conn, |c| diesel::delete(
        i::ax_instance.filter(i::id.eq_any(&ids))
    )
    .execute(c)
    .await)?)
}
