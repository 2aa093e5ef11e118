//! Bulk registration: many tasks matched by `(scene, name)` and written in one transaction,
//! all or none.

use ax_core::ids::SceneName;
use std::collections::HashMap;

use diesel::prelude::*;
use diesel_async::RunQueryDsl;

use super::crud::{find_many, find_named, last_insert_id, watch_if_lag_bound};
use super::scene_lock::hold_if_scene_paused;
use super::upstreams::{check_all_upstreams, dependencies_of, set_dependencies, UpstreamProblem};
use crate::pool::prepared::{chunks, Kept};
use crate::rows::models::{Task, TaskFields};
use crate::rows::schema::ax_task::dsl as t;
use crate::with_conn;
use crate::{Conn, StoreError};
use ax_core::run::TaskId;

/// One task of a bulk registration: its fields and upstreams.
#[derive(Debug, Clone)]
pub struct BulkItem {
    pub fields: TaskFields,
    pub depends_on: Vec<TaskId>,
}

/// What a bulk registration did.
#[derive(Debug, Clone, Default)]
pub struct BulkOutcome {
    /// The created and changed tasks, as stored.
    pub created: Vec<Task>,
    pub updated: Vec<Task>,
    pub unchanged: usize,
}

/// Why a bulk registration wrote nothing: the item at `index` and its problem.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BulkRefusal {
    pub index: usize,
    pub problem: BulkProblem,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BulkProblem {
    /// Its `(scene, name)` is this task's, and the call does not upsert.
    Exists(TaskId),
    Upstreams(UpstreamProblem),
}

/// Registers tasks in one transaction, all or none. Each item is matched by `(scene, name)`:
/// a new one is inserted (all in one statement); an existing one is refused without `upsert`,
/// left alone when its definition and upstreams are the same, replaced (its version raised)
/// otherwise. The items'
/// `(scene, name)` must differ from each other (the caller checks).
///
/// A call that creates tasks without upstreams first tries [`register_new`], which skips the
/// look-up of the names. Two registrations that both find a name missing both insert it; the
/// one that loses (its insert waited for the other's commit) starts again on what the other
/// stored, so concurrent upserts of one set of tasks all succeed.
pub async fn register(
    conn: &mut Conn,
    items: Vec<BulkItem>,
    upsert: bool,
) -> Result<Result<BulkOutcome, BulkRefusal>, StoreError> {
    if !upsert && items.iter().all(|item| item.depends_on.is_empty()) {
        match register_new(conn, items.clone()).await {
            // A name exists: the general path finds which and refuses it.
            Err(err) if err.is_name_taken() => {}
            outcome => return outcome.map(Ok),
        }
    }
    let mut tries = 1;
    loop {
        match register_once(conn, items.clone(), upsert).await {
            Err(err) if err.is_name_taken() && tries < REGISTER_TRIES => tries += 1,
            outcome => return outcome,
        }
    }
}

/// How often [`register`] starts again after losing a race for a new name.
const REGISTER_TRIES: usize = 3;

/// Inserts tasks that are all new, without looking their names up first: the unique
/// `(scene, name)` key fails the insert (and the transaction) if one exists.
async fn register_new(
    conn: &mut Conn,
    mut items: Vec<BulkItem>,
) -> Result<BulkOutcome, StoreError> {
    conn.transaction(|conn| {
        Box::pin(async move {
            let fields = items.iter_mut().map(|item| &mut item.fields).collect();
            hold_if_scene_paused(conn, fields).await?;
            // In key order, as the general path locks new rows.
            let mut new: Vec<&TaskFields> = items.iter().map(|item| &item.fields).collect();
            new.sort_by_key(|fields| (&fields.scene, &fields.name));
            let created = insert_all(conn, new.iter().copied()).await?;
            watch_if_lag_bound(conn, new).await?;
            Ok(BulkOutcome {
                created,
                updated: Vec::new(),
                unchanged: 0,
            })
        })
    })
    .await
}

async fn register_once(
    conn: &mut Conn,
    mut items: Vec<BulkItem>,
    upsert: bool,
) -> Result<Result<BulkOutcome, BulkRefusal>, StoreError> {
    conn.transaction(|conn| {
        Box::pin(async move {
            let fields = items.iter_mut().map(|item| &mut item.fields).collect();
            hold_if_scene_paused(conn, fields).await?;
            let pairs: Vec<(SceneName, String)> =
                items.iter().map(|item| name_key(&item.fields)).collect();
            let existing = by_scene_and_name(conn, &pairs).await?;
            let ids: Vec<TaskId> = existing.values().map(|task| task.id).collect();
            let upstreams = dependencies_of(conn, &ids).await?;
            // The items to write, in order: `None` to insert, the task's id to replace.
            let mut writes: Vec<(usize, Option<TaskId>)> = Vec::new();
            let mut unchanged = 0;
            for (index, item) in items.iter().enumerate() {
                match existing.get(&name_key(&item.fields)) {
                    None => writes.push((index, None)),
                    Some(task) if !upsert => {
                        let problem = BulkProblem::Exists(task.id);
                        return Ok(Err(BulkRefusal { index, problem }));
                    }
                    Some(task)
                        if item.fields.defines(task)
                            && upstreams.get(&task.id).map_or(&[][..], Vec::as_slice)
                                == item.depends_on.as_slice() =>
                    {
                        unchanged += 1
                    }
                    Some(task) => writes.push((index, Some(task.id))),
                }
            }
            // Checked before anything is written: a refusal returns with nothing to undo.
            let checks: Vec<(Option<TaskId>, &[TaskId])> = writes
                .iter()
                .map(|&(n, id)| (id, items[n].depends_on.as_slice()))
                .collect();
            if let Some((at, problem)) = check_all_upstreams(conn, &checks).await? {
                let (index, problem) = (writes[at].0, BulkProblem::Upstreams(problem));
                return Ok(Err(BulkRefusal { index, problem }));
            }
            // Rows are locked in one order (new ones by scene and name, existing ones by id),
            // so concurrent registrations of the same tasks wait for each other, never in a
            // cycle.
            let mut new: Vec<usize> = writes
                .iter()
                .filter_map(|&(n, id)| id.is_none().then_some(n))
                .collect();
            new.sort_by_key(|&n| (&items[n].fields.scene, &items[n].fields.name));
            let mut existing: Vec<(usize, TaskId)> = writes
                .iter()
                .filter_map(|&(n, id)| Some((n, id?)))
                .collect();
            existing.sort_by_key(|&(_, id)| id);
            let created = insert_all(conn, new.iter().map(|&n| &items[n].fields)).await?;
            for (task, &index) in created.iter().zip(&new) {
                if !items[index].depends_on.is_empty() {
                    set_dependencies(conn, task.id, &items[index].depends_on).await?;
                }
            }
            let mut updated = Vec::with_capacity(existing.len());
            for &(index, id) in &existing {
                let item = &items[index];
                with_conn!(conn, |c| diesel::update(t::ax_task.find(id))
                    .set((&item.fields, t::version.eq(t::version + 1)))
                    .execute(c)
                    .await)?;
                set_dependencies(conn, id, &item.depends_on).await?;
                updated.push(id);
            }
            watch_if_lag_bound(conn, writes.iter().map(|&(n, _)| &items[n].fields)).await?;
            Ok(Ok(BulkOutcome {
                created,
                updated: find_many(conn, updated).await?,
                unchanged,
            }))
        })
    })
    .await
}

/// The `(scene, name)` that names a task uniquely.
fn name_key(fields: &TaskFields) -> (SceneName, String) {
    (fields.scene.clone(), fields.name.clone())
}

/// The stored tasks of these `(scene, name)` pairs, by pair.
async fn by_scene_and_name(
    conn: &mut Conn,
    pairs: &[(SceneName, String)],
) -> Result<HashMap<(SceneName, String), Task>, StoreError> {
    Ok(find_named(conn, pairs)
        .await?
        .into_iter()
        .map(|task| ((task.scene.clone(), task.name.clone()), task))
        .collect())
}

/// The most tasks one kept insert statement takes: each connection keeps its statements
/// (see [`chunks`]), and a registration's are of no use to the fire path.
const ROWS_PER_INSERT: usize = 64;

/// Inserts tasks and returns them as stored, in order (on MySQL a statement per [`chunks`],
/// each kept prepared: the database parses the rows' text once per connection, not on
/// every registration). A failing statement fails the caller's transaction.
async fn insert_all<'a>(
    conn: &mut Conn,
    fields: impl Iterator<Item = &'a TaskFields>,
) -> Result<Vec<Task>, StoreError> {
    let rows: Vec<_> = fields
        .map(|f| (f.clone(), t::created_at.eq(f.updated_at)))
        .collect();
    let mut first = None;
    match conn {
        Conn::Mysql(c) => {
            for chunk in chunks(&rows, ROWS_PER_INSERT) {
                Kept(diesel::insert_into(t::ax_task).values(chunk))
                    .execute(&mut **c)
                    .await?;
                // A multi-row insert's id is its first row's.
                if first.is_none() {
                    first = Some(last_insert_id(&mut **c).await?);
                }
            }
        }
        // A multi-row insert takes consecutive ids on PostgreSQL too, but answers the last.
        Conn::Postgres(c) => {
            for chunk in chunks(&rows, ROWS_PER_INSERT) {
                let ids: Vec<i64> = Kept(
                    diesel::insert_into(t::ax_task)
                        .values(chunk)
                        .returning(t::id),
                )
                .get_results(&mut ***c)
                .await?;
                first = first.or(<[i64]>::first(&ids).copied());
            }
        }
        // The async SQLite wrapper has no multi-row insert; rows of an in-process file are
        // cheap one at a time.
        Conn::Sqlite(c, _) => {
            for row in &rows {
                diesel::insert_into(t::ax_task)
                    .values(row)
                    .execute(&mut **c)
                    .await?;
                if first.is_none() {
                    first = Some(last_insert_id(&mut **c).await?);
                }
            }
        }
    }
    let Some(first) = first else {
        return Ok(Vec::new());
    };
    let fields: Vec<&TaskFields> = rows.iter().map(|(f, _)| f).collect();
    inserted(conn, TaskId(first), &fields).await
}

/// The tasks just inserted with these fields, in that order, the first given
/// `first` as its id. Read by id: the rows of a transaction's inserts take consecutive ids,
/// unless another transaction's inserts came in between (possible on MySQL between two
/// statements, or inside one with `innodb_autoinc_lock_mode = 2`); then by name.
async fn inserted(
    conn: &mut Conn,
    first: TaskId,
    fields: &[&TaskFields],
) -> Result<Vec<Task>, StoreError> {
    let count = i64::try_from(fields.len()).unwrap_or(i64::MAX);
    let by_id: Vec<Task> = with_conn!(conn, |c| t::ax_task
        .filter(t::id.ge(first))
        .order(t::id.asc())
        .limit(count)
        .select(Task::as_select())
        .load(c)
        .await)?;
    let consecutive = by_id.len() == fields.len()
        && by_id
            .iter()
            .zip(fields)
            .all(|(task, f)| task.scene == f.scene && task.name == f.name);
    if consecutive {
        return Ok(by_id);
    }
    let keys: Vec<(SceneName, String)> = fields.iter().map(|f| name_key(f)).collect();
    let mut stored = by_scene_and_name(conn, &keys).await?;
    keys.into_iter()
        .map(|key| {
            stored
                .remove(&key)
                .ok_or(StoreError::Query(diesel::NotFound))
        })
        .collect()
}
