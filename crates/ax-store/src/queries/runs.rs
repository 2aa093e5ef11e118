//! Run rows: recording fires (new runs), and the run history.

use std::collections::{BTreeMap, HashMap, HashSet};

use chrono::NaiveDateTime;
use diesel::prelude::*;
use diesel::result::{DatabaseErrorKind, Error as DieselError};
use diesel::sql_types::{BigInt, Integer, Nullable, Text, Timestamp};
use diesel_async::RunQueryDsl;

use super::overlap;
use super::task_locks::lock_task_schedules;
use super::Page;
use crate::pool::prepared::{chunks, padded, Kept};
use crate::rows::models::{NewRunRow, Run, TaskStatus};
use crate::rows::schema::ax_instance::dsl as i;
use crate::rows::schema::ax_task::dsl as t;
use crate::with_conn;
use crate::{from_db, Conn, StoreError};
use ax_core::run::{left_by_overlap, DueRun, NewRun, OverlapPolicy, TriggerType};
use ax_core::run::{RequestId, RunStatus, TaskId};

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
    let inserted = if rows.is_empty() {
        Ok(())
    } else {
        advance_tasks(conn, &advances).await?;
        insert_runs(conn, &rows).await
    };
    let duplicates = match inserted {
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

/// Inserts the runs in a statement for each of their [`chunks`]; fails whole on a duplicate
/// request id (in the caller's transaction: a later statement's failure takes back the
/// earlier ones, to a savepoint).
async fn insert_runs(conn: &mut Conn, runs: &[&NewRunRow]) -> Result<(), StoreError> {
    let chunks = chunks(runs);
    if let [only] = chunks.as_slice() {
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
    let sql = format!(
        "INSERT INTO ax_instance (task_id, request_id, trigger_type, scheduled_at, trigger_at, \
         status, fired_by, created_at, finished_at, next_attempt_at, deadline_at, params, \
         dispatched_attempt, claimed_until, callback_code, callback_message, member, \
         shard_index, shard_total) VALUES {}",
        vec![format!("({})", placeholders(19, 1)); runs.len()].join(", ")
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
                .bind::<Nullable<Text>, _>(&run.params)
                .bind::<Integer, _>(run.dispatched_attempt)
                .bind::<Nullable<Timestamp>, _>(run.claimed_until)
                .bind::<Nullable<Text>, _>(&run.callback_code)
                .bind::<Nullable<Text>, _>(&run.callback_message)
                .bind::<Nullable<Text>, _>(&run.member)
                .bind::<Nullable<Integer>, _>(run.shard_index)
                .bind::<Nullable<Integer>, _>(run.shard_total);
        }
        Kept(query).execute(c).await
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

/// The shards of `task_id`'s broadcast fire at `scheduled_at`, in shard order (none for a
/// run without siblings).
pub async fn shards_of(
    conn: &mut Conn,
    task_id: TaskId,
    scheduled_at: NaiveDateTime,
) -> Result<Vec<Run>, StoreError> {
    Ok(with_conn!(conn, |c| i::ax_instance
        .filter(i::task_id.eq(task_id))
        .filter(i::scheduled_at.eq(scheduled_at))
        .filter(i::trigger_type.eq(TriggerType::Schedule))
        .filter(i::shard_total.gt(1))
        .order(i::shard_index.asc())
        .select(Run::as_select())
        .load(c)
        .await)?)
}

/// The run with this request id.
pub async fn find_by_request_id(
    conn: &mut Conn,
    request_id: &RequestId,
) -> Result<Option<Run>, StoreError> {
    Ok(with_conn!(conn, |c| i::ax_instance
        .filter(i::request_id.eq(request_id))
        .select(Run::as_select())
        .first(c)
        .await
        .optional())?)
}

/// A task's runs, newest scheduled first, with their total count.
pub async fn list_for_task(
    conn: &mut Conn,
    task_id: TaskId,
    page: Page,
) -> Result<(Vec<Run>, i64), StoreError> {
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
            .select(Run::as_select())
            .load(c)
            .await?;
        (rows, total)
    }))
}

/// Filters of the run history.
#[derive(Debug, Clone, Default)]
pub struct RunFilter {
    pub task_id: Option<TaskId>,
    /// Runs of any of these tasks (those a name names); none when it is empty.
    pub task_ids: Option<Vec<TaskId>>,
    pub scene: Option<String>,
    /// Runs in any of these statuses; every status when it is empty.
    pub statuses: Vec<RunStatus>,
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

impl Cursor {
    /// The cursor as clients see it: `<scheduled ms>.<id>`, opaque to them.
    pub fn to_text(self) -> String {
        format!(
            "{}.{}",
            self.scheduled_at.and_utc().timestamp_millis(),
            self.id
        )
    }

    /// A cursor read back from its text; `None` unless it is one.
    pub fn from_text(text: &str) -> Option<Cursor> {
        let (millis, id) = text.split_once('.')?;
        let id = id.parse::<i64>().ok().filter(|id| *id > 0)?;
        let at = chrono::DateTime::from_timestamp_millis(millis.parse().ok()?)?;
        Some(Cursor {
            scheduled_at: at.naive_utc(),
            id,
        })
    }
}

/// The first slice of time a scene's history is read in; each next one is longer.
const SCENE_SLICE_SECS: i64 = 3600;
/// How many times longer each next slice is.
const SCENE_SLICE_GROWTH: i32 = 4;
/// The most tasks a scene may have for its history to be read by their ids.
const SCENE_BY_IDS: i64 = 5000;

/// Runs matching the filter, newest scheduled first, after `cursor`; at most `limit`.
///
/// A scene's runs are read over the newest slice of time first, then over ever longer ones
/// until a page is full: asked at once, the database joins every run of the scene's tasks and
/// sorts them (millions for a large scene), where the page lies in the latest hour or so. The
/// page is the same either way, since each slice holds every run newer than its start.
pub async fn history(
    conn: &mut Conn,
    filter: &RunFilter,
    cursor: Option<Cursor>,
    limit: i64,
) -> Result<Vec<Run>, StoreError> {
    let by_task = filter.task_id.is_some() || filter.task_ids.is_some();
    let Some(scene) = filter.scene.clone().filter(|_| !by_task) else {
        return history_since(conn, filter, cursor, None, None, limit).await;
    };
    // A small scene's tasks are named by id: each task's runs of a slice are then one range of
    // `idx_ax_instance_task (task_id, scheduled_at)`, where the subquery would have the
    // database read every run of every task of the scene.
    let tasks: Vec<TaskId> = with_conn!(conn, |c| t::ax_task
        .filter(t::scene.eq(&scene))
        .select(t::id)
        .limit(SCENE_BY_IDS + 1)
        .load(c)
        .await)?;
    if tasks.is_empty() {
        return Ok(Vec::new());
    }
    let tasks = (tasks.len() as i64 <= SCENE_BY_IDS).then_some(tasks);
    let tasks = tasks.as_deref();
    let (first, last): (Option<NaiveDateTime>, Option<NaiveDateTime>) =
        with_conn!(conn, |c| i::ax_instance
            .select((
                diesel::dsl::min(i::scheduled_at),
                diesel::dsl::max(i::scheduled_at)
            ))
            .first(c)
            .await)?;
    let (Some(first), Some(last)) = (first, last) else {
        return Ok(Vec::new());
    };
    let newest = [cursor.map(|c| c.scheduled_at), filter.to]
        .into_iter()
        .flatten()
        .fold(last, NaiveDateTime::min);
    let oldest = filter.from.map_or(first, |from| from.max(first));
    let mut slice = chrono::Duration::seconds(SCENE_SLICE_SECS);
    loop {
        let since = newest - slice;
        if since <= oldest {
            return history_since(conn, filter, cursor, tasks, None, limit).await;
        }
        let runs = history_since(conn, filter, cursor, tasks, Some(since), limit).await?;
        if runs.len() as i64 == limit {
            return Ok(runs);
        }
        slice = slice * SCENE_SLICE_GROWTH;
    }
}

/// [`history`] over the runs scheduled at or after `since` (all when `None`); the scene's
/// tasks are `scene_tasks` when given.
async fn history_since(
    conn: &mut Conn,
    filter: &RunFilter,
    cursor: Option<Cursor>,
    scene_tasks: Option<&[TaskId]>,
    since: Option<NaiveDateTime>,
    limit: i64,
) -> Result<Vec<Run>, StoreError> {
    Ok(with_conn!(conn, |c| {
        let mut query = i::ax_instance.into_boxed();
        if let Some(since) = since {
            query = query.filter(i::scheduled_at.ge(since));
        }
        if let Some(task_id) = filter.task_id {
            query = query.filter(i::task_id.eq(task_id));
        }
        match (scene_tasks, &filter.scene) {
            (Some(ids), _) => query = query.filter(i::task_id.eq_any(ids)),
            (None, Some(scene)) => {
                let ids = t::ax_task.filter(t::scene.eq(scene.clone())).select(t::id);
                query = query.filter(i::task_id.eq_any(ids));
            }
            (None, None) => {}
        }
        if let Some(ids) = &filter.task_ids {
            query = query.filter(i::task_id.eq_any(ids.clone()));
        }
        if !filter.statuses.is_empty() {
            query = query.filter(i::status.eq_any(filter.statuses.clone()));
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
            .select(Run::as_select())
            .load(c)
            .await
    })?)
}

/// What the stats read of a run: (status, trigger, code, scheduled, first dispatched).
pub type StatsRow = (
    RunStatus,
    TriggerType,
    Option<String>,
    NaiveDateTime,
    Option<NaiveDateTime>,
);

/// The stats rows of a task's runs scheduled in `[from, to)`.
pub async fn for_stats(
    conn: &mut Conn,
    task_id: TaskId,
    from: NaiveDateTime,
    to: NaiveDateTime,
) -> Result<Vec<StatsRow>, StoreError> {
    Ok(with_conn!(conn, |c| i::ax_instance
        .filter(i::task_id.eq(task_id))
        .filter(i::scheduled_at.ge(from))
        .filter(i::scheduled_at.lt(to))
        .select((
            i::status,
            i::trigger_type,
            i::callback_code,
            i::scheduled_at,
            i::dispatched_at,
        ))
        .load(c)
        .await)?)
}

/// Deletes up to `limit` final runs that finished before `before`, with their logs; returns
/// how many runs. Small batches keep each statement short, so firing never waits behind
/// retention.
pub async fn delete_finished_before(
    conn: &mut Conn,
    before: NaiveDateTime,
    limit: i64,
) -> Result<usize, StoreError> {
    let found: Vec<(i64, String)> = with_conn!(conn, |c| i::ax_instance
        .filter(i::finished_at.lt(before))
        .order(i::finished_at.asc())
        .limit(limit)
        .select((i::id, i::request_id))
        .load(c)
        .await)?;
    if found.is_empty() {
        return Ok(0);
    }
    let (ids, runs): (Vec<i64>, Vec<String>) = found.into_iter().unzip();
    super::run_log::delete_of_runs(conn, &runs).await?;
    Ok(with_conn!(conn, |c| diesel::delete(
        i::ax_instance.filter(i::id.eq_any(&ids))
    )
    .execute(c)
    .await)?)
}

/// What a backfill recorded: new runs, and runs that existed already (left alone).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backfilled {
    pub runs: usize,
    pub existing: usize,
}

/// Records a backfill's runs in the caller's transaction: each of `runs` whose task has no
/// scheduled or backfilled run of that second yet is inserted as it is, the `n`-th new one
/// due at `due(n)`; the others are left alone. Many rows to a statement. Runs are found by
/// (task, second), not by request id: a run recorded before scheduled ids sorted by time (a
/// UUID v5 then) counts too.
pub async fn backfill(
    conn: &mut Conn,
    mut runs: Vec<NewRunRow>,
    due: impl Fn(usize) -> NewRun,
) -> Result<Backfilled, StoreError> {
    let total = runs.len();
    let mut existing = HashSet::new();
    for chunk in runs.chunks(1000) {
        let tasks: HashSet<TaskId> = chunk.iter().map(|run| run.task_id).collect();
        let seconds: Vec<NaiveDateTime> = chunk.iter().map(|run| run.scheduled_at).collect();
        let found: Vec<(TaskId, NaiveDateTime)> = with_conn!(conn, |c| i::ax_instance
            .filter(i::task_id.eq_any(tasks.iter().copied()))
            .filter(i::scheduled_at.eq_any(&seconds))
            .filter(i::trigger_type.ne(TriggerType::Manual))
            .select((i::task_id, i::scheduled_at))
            .load(c)
            .await)?;
        existing.extend(found);
    }
    runs.retain(|run| !existing.contains(&(run.task_id, run.scheduled_at)));
    for (n, run) in runs.iter_mut().enumerate() {
        run.set_state(&due(n));
    }
    let mut inserted = 0;
    for chunk in runs.chunks(200) {
        let chunk: Vec<&NewRunRow> = chunk.iter().collect();
        inserted += match insert_runs(conn, &chunk).await {
            Ok(()) => chunk.len(),
            // The scheduler fired one of them meanwhile: the rest go one by one.
            Err(StoreError::Query(DieselError::DatabaseError(
                DatabaseErrorKind::UniqueViolation,
                _,
            ))) => {
                let mut added = 0;
                for run in chunk {
                    added += usize::from(insert_run(conn, run).await? == FireOutcome::Fired);
                }
                added
            }
            Err(err) => return Err(err),
        };
    }
    Ok(Backfilled {
        runs: inserted,
        existing: total - inserted,
    })
}

/// When the last backfilled run of the task still waiting for its first attempt is due: a
/// new backfill is paced after it, so two of them never go out faster together.
pub async fn last_backfill_due(
    conn: &mut Conn,
    task_id: TaskId,
) -> Result<Option<NaiveDateTime>, StoreError> {
    Ok(with_conn!(conn, |c| i::ax_instance
        .filter(i::task_id.eq(task_id))
        .filter(i::status.eq(RunStatus::Ready))
        .filter(i::trigger_type.eq(TriggerType::Backfill))
        .filter(i::dispatched_attempt.eq(0))
        .select(diesel::dsl::max(i::next_attempt_at))
        .first(c)
        .await)?)
}

/// How many runs of a task are open (`PENDING`, `READY`, `RUNNING`).
pub async fn count_open(conn: &mut Conn, task_id: TaskId) -> Result<i64, StoreError> {
    Ok(with_conn!(conn, |c| i::ax_instance
        .filter(i::task_id.eq(task_id))
        .filter(i::status.eq_any(ax_core::run::OPEN))
        .count()
        .get_result(c)
        .await)?)
}
