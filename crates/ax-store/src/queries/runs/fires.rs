//! Recording fires: each advances its task's next run and inserts its run, a batch in a few
//! statements.

use std::collections::{BTreeMap, HashMap, HashSet};

use chrono::NaiveDateTime;
use diesel::prelude::*;
use diesel::result::{DatabaseErrorKind, Error as DieselError};
use diesel::sql_types::{BigInt, Integer, Nullable, Text, Timestamp};
use diesel_async::RunQueryDsl;

use crate::pool::prepared::{chunks, padded, Kept};
use crate::queries::overlap;
use crate::queries::task_locks::lock_task_schedules;
use crate::rows::models::{NewRunRow, TaskStatus};
use crate::rows::schema::ax_instance::dsl as i;
use crate::rows::schema::ax_task::dsl as t;
use crate::with_conn;
use crate::{from_db, Conn, StoreError};
use ax_core::run::{left_by_overlap, DueRun, OverlapPolicy};
use ax_core::run::{RunStatus, TaskId};

/// A due run to record: advance the task from `scheduled_at` to `next_run_at` and insert the run.
#[derive(Debug, Clone)]
pub struct FireRecord {
    pub scheduled_at: NaiveDateTime,
    pub next_run_at: Option<NaiveDateTime>,
    pub instance: NewRunRow,
    /// A broadcast fire's other shards (`instance` is shard 0): recorded, and left by the
    /// overlap policy, with it.
    pub siblings: Vec<NewRunRow>,
    /// The task's overlap policy: it decides a run dispatched as it fires.
    pub overlap: OverlapPolicy,
    /// The task's version the fire was planned from: it is fresh only while the task is still
    /// at it (a changed definition fires from its own version, in whichever process has it).
    pub version: i64,
}

impl FireRecord {
    /// Its runs as the overlap policy left them (`overlapped`: shard 0's row, if changed).
    fn runs<'a>(
        &'a self,
        overlapped: Option<&'a NewRunRow>,
    ) -> Vec<std::borrow::Cow<'a, NewRunRow>> {
        use std::borrow::Cow;
        let Some(first) = overlapped else {
            return std::iter::once(&self.instance)
                .chain(&self.siblings)
                .map(Cow::Borrowed)
                .collect();
        };
        let mut runs = vec![Cow::Borrowed(first)];
        runs.extend(self.siblings.iter().map(|sibling| {
            Cow::Owned(NewRunRow {
                request_id: sibling.request_id.clone(),
                member: sibling.member.clone(),
                shard_index: sibling.shard_index,
                ..first.clone()
            })
        }));
        runs
    }
}

/// What became of one fire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FireOutcome {
    /// The run's row is committed; it may be dispatched.
    Fired,
    /// The run's row is committed as the overlap policy left it (`SKIPPED`, or `PENDING` until
    /// the earlier run is final): not to dispatch now.
    Overlapped(RunStatus),
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
fn chains(fires: &[FireRecord]) -> Option<BTreeMap<TaskId, Vec<usize>>> {
    let mut chains: BTreeMap<TaskId, Vec<usize>> = BTreeMap::new();
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
    chains: BTreeMap<TaskId, Vec<usize>>,
) -> Result<Vec<FireOutcome>, StoreError> {
    let ids: Vec<TaskId> = chains.keys().copied().collect();
    let current = lock_task_schedules(conn, &ids).await?;
    let mut fresh = vec![false; fires.len()];
    let mut advances = Vec::new();
    for (task_id, chain) in &chains {
        let (Some(&first), Some(&last)) = (chain.iter().next(), chain.iter().last()) else {
            continue;
        };
        if current.get(task_id) == Some(&(Some(fires[first].scheduled_at), fires[first].version)) {
            advances.push((*task_id, fires[last].next_run_at));
            chain.iter().for_each(|&i| fresh[i] = true);
        }
    }
    let fresh_fires: Vec<&FireRecord> = fires
        .iter()
        .zip(&fresh)
        .filter(|(_, fresh)| **fresh)
        .map(|(fire, _)| fire)
        .collect();
    let overlapped = overlapped(conn, &fresh_fires).await?;
    let fire_runs: Vec<_> = fresh_fires
        .iter()
        .enumerate()
        .map(|(k, fire)| fire.runs(overlapped.get(&k)))
        .collect();
    let rows: Vec<&NewRunRow> = fire_runs.iter().flatten().map(|run| &**run).collect();
    let duplicates = if rows.is_empty() {
        HashSet::new()
    } else {
        advance_tasks(conn, &advances).await?;
        match conn {
            // PostgreSQL finds the duplicates in the insert itself, with no savepoint to take
            // the batch back to (a failed statement would end its transaction).
            Conn::Postgres(_) => insert_new_fires(conn, &rows, &fire_runs).await?,
            _ => match insert_runs(conn, &rows).await {
                Ok(()) => HashSet::new(),
                // Some run exists already: insert fire by fire to find which.
                Err(StoreError::Query(DieselError::DatabaseError(
                    DatabaseErrorKind::UniqueViolation,
                    _,
                ))) => {
                    let mut duplicates = HashSet::new();
                    for runs in &fire_runs {
                        if insert_fire(conn, runs).await? == FireOutcome::Duplicate {
                            duplicates.insert(runs[0].request_id.as_str());
                        }
                    }
                    duplicates
                }
                Err(err) => return Err(err),
            },
        }
    };
    let mut fire_runs = fire_runs.iter();
    Ok(fresh
        .into_iter()
        .map(|fresh| match fresh.then(|| fire_runs.next()).flatten() {
            None => FireOutcome::Stale,
            Some(runs) if duplicates.contains(runs[0].request_id.as_str()) => {
                FireOutcome::Duplicate
            }
            Some(runs) => FireOutcome::recorded(&runs[0]),
        })
        .collect())
}

/// Binds each of `$runs` (`&[&NewRunRow]`) into the boxed `$query`, in the order of
/// [`insert_statement`]'s columns.
macro_rules! bind_runs {
    ($query:expr, $runs:expr) => {{
        let mut query = $query;
        for run in $runs {
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
                .bind::<Nullable<Text>, _>(&run.params)
                .bind::<Integer, _>(run.dispatched_attempt)
                .bind::<Nullable<Timestamp>, _>(run.claimed_until)
                .bind::<Nullable<Text>, _>(&run.callback_code)
                .bind::<Nullable<Text>, _>(&run.callback_message)
                .bind::<Nullable<Text>, _>(&run.member)
                .bind::<Nullable<Integer>, _>(run.shard_index)
                .bind::<Nullable<Integer>, _>(run.shard_total);
        }
        query
    }};
}

/// PostgreSQL: inserts the fires' runs (`rows`, all of `fire_runs`) but those whose request id
/// exists already (`ON CONFLICT DO NOTHING RETURNING`), and answers the fires that were
/// duplicates (by their first run's id). A duplicate fire is recorded not at all: any of its
/// other shards that were new are taken out again.
async fn insert_new_fires<'f>(
    conn: &mut Conn,
    rows: &[&NewRunRow],
    fire_runs: &'f [Vec<std::borrow::Cow<'_, NewRunRow>>],
) -> Result<HashSet<&'f str>, StoreError> {
    let mut inserted = HashSet::new();
    for chunk in chunks(rows, RUNS_PER_INSERT) {
        let sql = conn.binds(format!(
            "{} ON CONFLICT (request_id) DO NOTHING RETURNING request_id",
            insert_statement(chunk.len())
        ));
        let ids: Vec<InsertedId> = with_conn!(conn, |c| {
            let query = bind_runs!(diesel::sql_query(sql.as_str()).into_boxed(), chunk);
            Kept(query).load(c).await
        })?;
        inserted.extend(ids.into_iter().map(|id| id.request_id));
    }
    let mut duplicates = HashSet::new();
    let mut strays = Vec::new();
    for runs in fire_runs {
        if !inserted.contains(runs[0].request_id.as_str()) {
            duplicates.insert(runs[0].request_id.as_str());
            strays.extend(
                runs[1..]
                    .iter()
                    .map(|run| run.request_id.as_str())
                    .filter(|id| inserted.contains(*id)),
            );
        }
    }
    if !strays.is_empty() {
        with_conn!(conn, |c| diesel::delete(
            i::ax_instance.filter(i::request_id.eq_any(&strays))
        )
        .execute(c)
        .await)?;
    }
    Ok(duplicates)
}

/// A run's id, as an insert returns it.
#[derive(QueryableByName)]
struct InsertedId {
    #[diesel(sql_type = Text)]
    request_id: String,
}

/// Inserts a fire's runs (its shards), the first alone first: a fire recorded already is a
/// duplicate as a whole, and none of its shards is added.
async fn insert_fire(
    conn: &mut Conn,
    runs: &[std::borrow::Cow<'_, NewRunRow>],
) -> Result<FireOutcome, StoreError> {
    let Some((first, siblings)) = runs.split_first() else {
        return Ok(FireOutcome::Stale);
    };
    let outcome = insert_run(conn, first).await?;
    if outcome == FireOutcome::Fired && !siblings.is_empty() {
        let siblings: Vec<&NewRunRow> = siblings.iter().map(|run| &**run).collect();
        insert_runs(conn, &siblings).await?;
    }
    Ok(outcome)
}

impl FireOutcome {
    /// The outcome of a run inserted as `run`.
    fn recorded(run: &NewRunRow) -> FireOutcome {
        if left_by_overlap(run.callback_code.as_deref()) {
            FireOutcome::Overlapped(run.status)
        } else {
            FireOutcome::Fired
        }
    }
}

/// The runs among `fires` (fresh, their tasks locked) that the overlap policy changes, by
/// position, as it leaves them. Only a run dispatched as it fires is decided here; the others
/// are decided when their first attempt is claimed (`runs::claim`).
async fn overlapped(
    conn: &mut Conn,
    fires: &[&FireRecord],
) -> Result<HashMap<usize, NewRunRow>, StoreError> {
    let Some(first) = fires.first() else {
        return Ok(HashMap::new());
    };
    let due: Vec<(usize, DueRun)> = fires
        .iter()
        .enumerate()
        .filter(|(_, fire)| fire.instance.dispatched_attempt == 1)
        .map(|(k, fire)| {
            let run = DueRun {
                task_id: fire.instance.task_id,
                policy: fire.overlap,
                request_id: &fire.instance.request_id,
                scheduled_at: from_db(fire.instance.scheduled_at),
                sharded: fire.instance.sharded(),
            };
            (k, run)
        })
        .collect();
    let runs: Vec<DueRun> = due.iter().map(|(_, run)| *run).collect();
    let at = from_db(first.instance.trigger_at);
    let decisions = overlap::settle(conn, &runs, at).await?;
    let mut changed = HashMap::new();
    for ((k, _), decision) in due.into_iter().zip(decisions) {
        let fire = fires[k];
        let planned_deadline = fire.instance.deadline_at.map(from_db);
        if let Some(birth) = decision.birth(planned_deadline, from_db(fire.instance.trigger_at)) {
            let mut instance = fire.instance.clone();
            instance.set_state(&birth);
            changed.insert(k, instance);
        }
    }
    Ok(changed)
}

/// Moves each task's `next_run_at` on, in one statement: (task id, new `next_run_at`).
async fn advance_tasks(
    conn: &mut Conn,
    advances: &[(TaskId, Option<NaiveDateTime>)],
) -> Result<(), StoreError> {
    let advances = padded(advances);
    let sql = format!(
        "UPDATE ax_task SET next_run_at = CASE id {} END WHERE id IN ({})",
        "WHEN ? THEN ? ".repeat(advances.len()),
        placeholders(advances.len(), 1)
    );
    let sql = conn.binds(sql);
    with_conn!(conn, |c| {
        let mut query = diesel::sql_query(sql.as_str()).into_boxed();
        for &(task_id, next_run_at) in &advances {
            query = query
                .bind::<BigInt, _>(task_id)
                .bind::<Nullable<Timestamp>, _>(next_run_at);
        }
        for &(task_id, _) in &advances {
            query = query.bind::<BigInt, _>(task_id);
        }
        Kept(query).execute(c).await
    })?;
    Ok(())
}

/// The most runs one kept insert statement takes: a commit's batch (`store.batch_size`, 100 by
/// default) in two or three statements, with few parameters kept per connection (see
/// [`chunks`]).
const RUNS_PER_INSERT: usize = 64;

/// Inserts the runs in a statement for each of their [`chunks`]; fails whole on a duplicate
/// request id (in the caller's transaction: a later statement's failure takes back the
/// earlier ones, to a savepoint).
pub(super) async fn insert_runs(conn: &mut Conn, runs: &[&NewRunRow]) -> Result<(), StoreError> {
    let chunks = chunks(runs, RUNS_PER_INSERT);
    // A failed statement ends a PostgreSQL transaction: there even one statement is taken back
    // to a savepoint, so that the caller can go on.
    if let ([only], false) = (chunks.as_slice(), matches!(conn, Conn::Postgres(_))) {
        return insert_chunk(conn, only).await;
    }
    conn.execute("SAVEPOINT ax_insert").await?;
    for chunk in chunks {
        if let Err(err) = insert_chunk(conn, chunk).await {
            conn.execute("ROLLBACK TO SAVEPOINT ax_insert; RELEASE SAVEPOINT ax_insert")
                .await?;
            return Err(err);
        }
    }
    conn.execute("RELEASE SAVEPOINT ax_insert").await
}

async fn insert_chunk(conn: &mut Conn, runs: &[&NewRunRow]) -> Result<(), StoreError> {
    let sql = conn.binds(insert_statement(runs.len()));
    with_conn!(conn, |c| {
        let query = bind_runs!(diesel::sql_query(sql.as_str()).into_boxed(), runs);
        Kept(query).execute(c).await
    })?;
    Ok(())
}

/// The `INSERT` of `n` runs, with `?` placeholders.
fn insert_statement(n: usize) -> String {
    format!(
        "INSERT INTO ax_instance (task_id, request_id, trigger_type, scheduled_at, trigger_at, \
         status, fired_by, created_at, finished_at, next_attempt_at, deadline_at, params, \
         dispatched_attempt, claimed_until, callback_code, callback_message, member, \
         shard_index, shard_total) VALUES {}",
        vec![format!("({})", placeholders(19, 1)); n].join(", ")
    )
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
                .filter(t::status.eq(TaskStatus::Enabled))
                .filter(t::next_run_at.eq(fire.scheduled_at))
                .filter(t::version.eq(fire.version))
        )
        .set(t::next_run_at.eq(fire.next_run_at))
        .execute(c)
        .await)?;
        if advanced == 0 {
            outcomes.push(FireOutcome::Stale);
            continue;
        }
        let overlapped = overlapped(conn, &[fire]).await?;
        let runs = fire.runs(overlapped.get(&0));
        outcomes.push(match insert_fire(conn, &runs).await? {
            FireOutcome::Fired => FireOutcome::recorded(&runs[0]),
            outcome => outcome,
        });
    }
    Ok(outcomes)
}

/// Inserts a run; a duplicate request id is an outcome, not an error (the unique key is the
/// last guard against a second row for one run).
pub async fn insert_run(conn: &mut Conn, instance: &NewRunRow) -> Result<FireOutcome, StoreError> {
    // A failed statement would end a PostgreSQL transaction: there the duplicate is skipped.
    if let Conn::Postgres(c) = conn {
        let inserted = diesel::insert_into(i::ax_instance)
            .values(instance)
            .on_conflict_do_nothing()
            .execute(&mut ***c)
            .await?;
        return Ok(match inserted {
            0 => FireOutcome::Duplicate,
            _ => FireOutcome::Fired,
        });
    }
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
