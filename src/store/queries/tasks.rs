//! Task rows: CRUD for the API and the preload window for the scheduler.

use std::collections::HashMap;
use std::sync::Arc;

use chrono::{DateTime, NaiveDateTime, Utc};
use diesel::dsl::sql;
use diesel::prelude::*;
use diesel::sql_types::BigInt;
use diesel_async::RunQueryDsl;

use super::{meta, runs, Page};
use crate::plan::{dependency_cycle, TaskSpec};
use crate::run::TaskId;
use crate::store::models::{Task, TaskFields, TaskStatus};
use crate::store::schema::ax_task::dsl as t;
use crate::store::schema::ax_task_dependency::dsl as d;
use crate::store::{to_db, Conn, StoreError};
use crate::with_conn;

/// Filters of a task listing.
#[derive(Debug, Clone, Default)]
pub struct TaskFilter {
    pub scene: Option<String>,
    pub status: Option<TaskStatus>,
    /// Names matching this SQL `LIKE` pattern (`\` escapes).
    pub name_like: Option<String>,
    /// Only tasks after this id are listed (a keyset page, which reads no skipped rows); the
    /// total counts them all.
    pub after: Option<TaskId>,
}

/// Why a task's upstreams cannot be what was asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UpstreamProblem {
    /// These tasks do not exist.
    Unknown(Vec<TaskId>),
    /// They would close this cycle: a path from the task back to itself.
    Cycle(Vec<TaskId>),
}

/// Checks a task's new upstreams in the caller's transaction, and keeps them so until it
/// commits: the upstream rows are locked (a concurrent delete waits), and so is the graph (a
/// concurrent change cannot close the other half of a cycle).
async fn check_upstreams(
    conn: &mut Conn,
    task: Option<TaskId>,
    depends_on: &[TaskId],
) -> Result<Option<UpstreamProblem>, StoreError> {
    Ok(check_all_upstreams(conn, &[(task, depends_on)])
        .await?
        .map(|(_, problem)| problem))
}

/// Checks the new upstreams of several tasks (`None` for a new task) as `check_upstreams`
/// does, each on the graph the earlier ones leave: the first problem, with its index.
async fn check_all_upstreams(
    conn: &mut Conn,
    tasks: &[(Option<TaskId>, &[TaskId])],
) -> Result<Option<(usize, UpstreamProblem)>, StoreError> {
    let mut wanted: Vec<TaskId> = tasks
        .iter()
        .flat_map(|(_, up)| up.iter().copied())
        .collect();
    if wanted.is_empty() {
        return Ok(None);
    }
    wanted.sort_unstable();
    wanted.dedup();
    meta::lock_dependency_graph(conn).await?;
    let query = t::ax_task.filter(t::id.eq_any(&wanted)).select(t::id);
    let found: Vec<TaskId> = match conn {
        Conn::Mysql(c) => query.for_update().load(&mut **c).await?,
        Conn::Sqlite(c) => query.load(&mut **c).await?,
    };
    // A new task has no downstreams yet: only changed ones can close a cycle.
    let mut edges = match tasks.iter().any(|(task, _)| task.is_some()) {
        true => all_dependencies(conn).await?,
        false => Vec::new(),
    };
    for (index, &(task, depends_on)) in tasks.iter().enumerate() {
        let unknown: Vec<TaskId> = depends_on
            .iter()
            .copied()
            .filter(|id| !found.contains(id))
            .collect();
        if !unknown.is_empty() {
            return Ok(Some((index, UpstreamProblem::Unknown(unknown))));
        }
        let Some(task) = task else { continue };
        if let Some(cycle) = dependency_cycle(&edges, task, depends_on) {
            return Ok(Some((index, UpstreamProblem::Cycle(cycle))));
        }
        edges.retain(|(from, _)| *from != task);
        edges.extend(depends_on.iter().map(|&up| (task, up)));
    }
    Ok(None)
}

/// Inserts a task with its upstreams and returns it as stored, or why its upstreams are
/// refused (nothing is written then).
pub async fn insert(
    conn: &mut Conn,
    fields: TaskFields,
    depends_on: Vec<TaskId>,
) -> Result<Result<Task, UpstreamProblem>, StoreError> {
    conn.transaction(|conn| {
        Box::pin(async move {
            if let Some(problem) = check_upstreams(conn, None, &depends_on).await? {
                return Ok(Err(problem));
            }
            let id = with_conn!(conn, |c| {
                diesel::insert_into(t::ax_task)
                    .values((&fields, t::created_at.eq(fields.updated_at)))
                    .execute(c)
                    .await?;
                TaskId(last_insert_id(c).await?)
            });
            set_dependencies(conn, id, &depends_on).await?;
            find(conn, id)
                .await?
                .map(Ok)
                .ok_or(StoreError::Query(diesel::NotFound))
        })
    })
    .await
}

/// Replaces a task's upstreams.
async fn set_dependencies(
    conn: &mut Conn,
    id: TaskId,
    depends_on: &[TaskId],
) -> Result<(), StoreError> {
    with_conn!(conn, |c| {
        diesel::delete(d::ax_task_dependency.filter(d::task_id.eq(id)))
            .execute(c)
            .await?;
        // One row at a time: the async SQLite wrapper has no multi-row insert.
        for upstream in depends_on {
            diesel::insert_into(d::ax_task_dependency)
                .values((d::task_id.eq(id), d::depends_on.eq(*upstream)))
                .execute(c)
                .await?;
        }
    });
    Ok(())
}

/// The upstreams of these tasks, by task.
pub async fn dependencies_of(
    conn: &mut Conn,
    ids: &[TaskId],
) -> Result<HashMap<TaskId, Vec<TaskId>>, StoreError> {
    let edges: Vec<(TaskId, TaskId)> = with_conn!(conn, |c| d::ax_task_dependency
        .filter(d::task_id.eq_any(ids))
        .order((d::task_id, d::depends_on))
        .select((d::task_id, d::depends_on))
        .load(c)
        .await)?;
    let mut by_task: HashMap<TaskId, Vec<TaskId>> = HashMap::new();
    for (task, upstream) in edges {
        by_task.entry(task).or_default().push(upstream);
    }
    Ok(by_task)
}

/// Every dependency edge (task, upstream), for cycle checks.
pub async fn all_dependencies(conn: &mut Conn) -> Result<Vec<(TaskId, TaskId)>, StoreError> {
    Ok(with_conn!(conn, |c| d::ax_task_dependency
        .select((d::task_id, d::depends_on))
        .load(c)
        .await)?)
}

/// The wheel entries of these tasks (see `TaskSpec::wheel_entry`).
pub async fn wheel_entries(
    conn: &mut Conn,
    tasks: Vec<Task>,
) -> Result<Vec<(Arc<TaskSpec>, DateTime<Utc>)>, StoreError> {
    let ids: Vec<TaskId> = tasks.iter().map(|task| task.id).collect();
    let upstreams = dependencies_of(conn, &ids).await?;
    Ok(tasks
        .iter()
        .filter_map(|task| TaskSpec::wheel_entry(task, upstreams.contains_key(&task.id)))
        .collect())
}

/// The id the connection's last insert generated. The one backend-specific query: MySQL has no
/// `RETURNING`, and each backend names this function differently.
async fn last_insert_id<C>(conn: &mut C) -> QueryResult<i64>
where
    C: diesel_async::AsyncConnection,
    C::Backend: LastInsertId,
    diesel::dsl::select<diesel::expression::SqlLiteral<BigInt>>:
        diesel_async::methods::LoadQuery<'static, C, i64>,
{
    diesel::select(sql::<BigInt>(C::Backend::LAST_INSERT_ID))
        .get_result(conn)
        .await
}

/// How a backend spells "the id of the last insert on this connection".
pub trait LastInsertId {
    const LAST_INSERT_ID: &'static str;
}

impl LastInsertId for diesel::mysql::Mysql {
    const LAST_INSERT_ID: &'static str = "CAST(LAST_INSERT_ID() AS SIGNED)";
}

impl LastInsertId for diesel::sqlite::Sqlite {
    const LAST_INSERT_ID: &'static str = "last_insert_rowid()";
}

/// The task with this id.
pub async fn find(conn: &mut Conn, id: TaskId) -> Result<Option<Task>, StoreError> {
    Ok(with_conn!(conn, |c| t::ax_task
        .find(id)
        .select(Task::as_select())
        .first(c)
        .await
        .optional())?)
}

/// The tasks with these ids (those that exist).
pub async fn find_many(conn: &mut Conn, ids: Vec<TaskId>) -> Result<Vec<Task>, StoreError> {
    Ok(with_conn!(conn, |c| t::ax_task
        .filter(t::id.eq_any(&ids))
        .select(Task::as_select())
        .load(c)
        .await)?)
}

/// The tasks of these (scene, name) pairs that exist.
pub async fn find_named(
    conn: &mut Conn,
    pairs: &[(String, String)],
) -> Result<Vec<Task>, StoreError> {
    let mut scenes: Vec<&str> = pairs.iter().map(|(scene, _)| scene.as_str()).collect();
    let mut names: Vec<&str> = pairs.iter().map(|(_, name)| name.as_str()).collect();
    scenes.sort_unstable();
    scenes.dedup();
    names.sort_unstable();
    names.dedup();
    let wanted: std::collections::HashSet<(&str, &str)> = pairs
        .iter()
        .map(|(scene, name)| (scene.as_str(), name.as_str()))
        .collect();
    // Scenes × names covers every pair asked for (and maybe more, dropped here).
    let rows: Vec<Task> = with_conn!(conn, |c| t::ax_task
        .filter(t::scene.eq_any(&scenes))
        .filter(t::name.eq_any(&names))
        .select(Task::as_select())
        .load(c)
        .await)?;
    Ok(rows
        .into_iter()
        .filter(|task| wanted.contains(&(task.scene.as_str(), task.name.as_str())))
        .collect())
}

/// Up to `limit` names of a scene's tasks, in order (the `(scene, name)` index reads them).
pub async fn names_in_scene(
    conn: &mut Conn,
    scene: &str,
    limit: i64,
) -> Result<Vec<String>, StoreError> {
    Ok(with_conn!(conn, |c| t::ax_task
        .filter(t::scene.eq(scene))
        .order(t::name.asc())
        .limit(limit)
        .select(t::name)
        .load(c)
        .await)?)
}

/// Tasks by id, oldest first, with the total count matching the filter.
pub async fn list(
    conn: &mut Conn,
    filter: &TaskFilter,
    page: Page,
) -> Result<(Vec<Task>, i64), StoreError> {
    Ok(with_conn!(conn, |c| {
        // Built inside the body: a boxed query is tied to one backend.
        let query = || {
            let mut query = t::ax_task.into_boxed();
            if let Some(scene) = &filter.scene {
                query = query.filter(t::scene.eq(scene.clone()));
            }
            if let Some(status) = filter.status {
                query = query.filter(t::status.eq(status));
            }
            if let Some(pattern) = &filter.name_like {
                query = query.filter(t::name.like(pattern.clone()).escape('\\'));
            }
            query
        };
        if filter.name_like.is_none() {
            let total: i64 = query().count().get_result(c).await?;
            let mut rows = query();
            if let Some(after) = filter.after {
                rows = rows.filter(t::id.gt(after));
            }
            let rows = rows
                .order(t::id.asc())
                .limit(page.limit)
                .offset(page.offset)
                .select(Task::as_select())
                .load(c)
                .await?;
            (rows, total)
        } else {
            // A name search reads every name (a pattern that starts with a wildcard narrows no
            // index): the matching ids in one pass over `(scene, name)`, which holds them,
            // rather than one pass to count and another over the whole rows to page.
            let mut ids: Vec<TaskId> = query().select(t::id).load(c).await?;
            ids.sort_unstable();
            let total = ids.len() as i64;
            let start = usize::try_from(page.offset).unwrap_or(usize::MAX);
            let wanted: Vec<TaskId> = ids
                .into_iter()
                .filter(|id| filter.after.is_none_or(|after| *id > after))
                .skip(start)
                .take(usize::try_from(page.limit).unwrap_or(0))
                .collect();
            let rows = t::ax_task
                .filter(t::id.eq_any(&wanted))
                .order(t::id.asc())
                .select(Task::as_select())
                .load(c)
                .await?;
            (rows, total)
        }
    }))
}

/// Replaces a task's fields and upstreams; `None` when there is no such task.
pub async fn update(
    conn: &mut Conn,
    id: TaskId,
    fields: TaskFields,
    depends_on: Vec<TaskId>,
) -> Result<Option<Result<Task, UpstreamProblem>>, StoreError> {
    conn.transaction(|conn| {
        Box::pin(async move {
            if find(conn, id).await?.is_none() {
                return Ok(None);
            }
            if let Some(problem) = check_upstreams(conn, Some(id), &depends_on).await? {
                return Ok(Some(Err(problem)));
            }
            with_conn!(conn, |c| diesel::update(t::ax_task.find(id))
                .set(&fields)
                .execute(c)
                .await)?;
            set_dependencies(conn, id, &depends_on).await?;
            Ok(find(conn, id).await?.map(Ok))
        })
    })
    .await
}

/// Deletes a task; `false` when there was none. Its run history stays; its open runs end
/// FAILED (`TASK_DELETED`).
pub async fn delete(conn: &mut Conn, id: TaskId, now: DateTime<Utc>) -> Result<bool, StoreError> {
    conn.transaction(|conn| {
        Box::pin(async move {
            let deleted = with_conn!(conn, |c| {
                // The task's row first: a task being given it as an upstream holds that row
                // locked, so its dependency is committed before this removes it.
                let deleted = diesel::delete(t::ax_task.find(id)).execute(c).await?;
                // Its downstreams stop waiting on it too.
                diesel::delete(
                    d::ax_task_dependency.filter(d::task_id.eq(id).or(d::depends_on.eq(id))),
                )
                .execute(c)
                .await?;
                deleted
            });
            if deleted > 0 {
                runs::cancel_open(conn, id, now).await?;
            }
            Ok(deleted > 0)
        })
    })
    .await
}

/// Pauses a task (no next run); `false` if it is not enabled (or not there).
pub async fn pause(conn: &mut Conn, id: TaskId, now: NaiveDateTime) -> Result<bool, StoreError> {
    let changed = with_conn!(conn, |c| diesel::update(
        t::ax_task
            .filter(t::id.eq(id))
            .filter(t::status.eq(TaskStatus::Enabled))
    )
    .set(paused(now))
    .execute(c)
    .await)?;
    Ok(changed > 0)
}

/// Pauses every enabled task of a scene in one statement; returns how many.
pub async fn pause_scene(
    conn: &mut Conn,
    scene: &str,
    now: NaiveDateTime,
) -> Result<usize, StoreError> {
    Ok(with_conn!(conn, |c| diesel::update(
        t::ax_task
            .filter(t::scene.eq(scene))
            .filter(t::status.eq(TaskStatus::Enabled))
    )
    .set(paused(now))
    .execute(c)
    .await)?)
}

type Paused = (
    diesel::dsl::Eq<t::status, TaskStatus>,
    diesel::dsl::Eq<t::next_run_at, Option<NaiveDateTime>>,
    diesel::dsl::Eq<t::updated_at, NaiveDateTime>,
);

fn paused(now: NaiveDateTime) -> Paused {
    (
        t::status.eq(TaskStatus::Paused),
        t::next_run_at.eq(None),
        t::updated_at.eq(now),
    )
}

/// Resumes the paused tasks among `ids` (or of `scene`): enables them in one statement, then
/// gives each its next run computed from `now`, so no run that fell in the pause fires.
/// Returns the resumed tasks.
pub async fn resume(
    conn: &mut Conn,
    which: Resume,
    now: DateTime<Utc>,
) -> Result<Vec<Task>, StoreError> {
    conn.transaction(|conn| {
        Box::pin(async move {
            let paused: Vec<Task> = with_conn!(conn, |c| {
                let query = match &which {
                    Resume::Task(id) => t::ax_task.filter(t::id.eq(*id)).into_boxed(),
                    Resume::Scene(scene) => {
                        t::ax_task.filter(t::scene.eq(scene.clone())).into_boxed()
                    }
                };
                query
                    .filter(t::status.eq(TaskStatus::Paused))
                    .select(Task::as_select())
                    .load(c)
                    .await
            })?;
            let ids: Vec<TaskId> = paused.iter().map(|task| task.id).collect();
            with_conn!(conn, |c| diesel::update(
                t::ax_task.filter(t::id.eq_any(&ids))
            )
            .set((
                t::status.eq(TaskStatus::Enabled),
                t::updated_at.eq(to_db(now)),
            ))
            .execute(c)
            .await)?;
            let mut resumed = Vec::with_capacity(paused.len());
            for mut task in paused {
                let next = task
                    .schedule()
                    .ok()
                    .and_then(|cron| cron.next_after(now))
                    .map(to_db);
                with_conn!(conn, |c| diesel::update(t::ax_task.find(task.id))
                    .set(t::next_run_at.eq(next))
                    .execute(c)
                    .await)?;
                task.status = TaskStatus::Enabled;
                task.next_run_at = next;
                task.updated_at = to_db(now);
                resumed.push(task);
            }
            Ok(resumed)
        })
    })
    .await
}

/// Which paused tasks to resume.
#[derive(Debug, Clone)]
pub enum Resume {
    Task(TaskId),
    Scene(String),
}

/// Task counts by scene and status.
pub async fn scene_counts(conn: &mut Conn) -> Result<Vec<(String, TaskStatus, i64)>, StoreError> {
    Ok(with_conn!(conn, |c| t::ax_task
        .group_by((t::scene, t::status))
        .select((t::scene, t::status, diesel::dsl::count_star()))
        .order((t::scene, t::status))
        .load(c)
        .await)?)
}

/// Where a scan of due tasks has got to: the (next run, id) of the last task seen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DueCursor {
    pub next_run_at: NaiveDateTime,
    pub id: TaskId,
}

impl DueCursor {
    /// Before every task due after `at` (and after every task due at or before it).
    pub fn after(at: NaiveDateTime) -> Self {
        DueCursor {
            next_run_at: at,
            id: TaskId(i64::MAX),
        }
    }

    /// Before every task (no task runs before 1970; MySQL cannot store chrono's minimum).
    pub fn start() -> Self {
        DueCursor {
            next_run_at: DateTime::UNIX_EPOCH.naive_utc(),
            id: TaskId(i64::MIN),
        }
    }

    /// The cursor after `task`.
    pub fn past(task: &Task) -> Self {
        DueCursor {
            next_run_at: task.next_run_at.unwrap_or(DateTime::UNIX_EPOCH.naive_utc()),
            id: task.id,
        }
    }
}

/// Enabled tasks due at or before `until`, after `cursor`, by (next run, id): one page of a
/// window scan. The keyset follows the (status, next_run_at) index, so a large window streams
/// in bounded pages and a narrow one (the overdue scan) costs an index probe.
pub async fn due_until(
    conn: &mut Conn,
    cursor: DueCursor,
    until: NaiveDateTime,
    limit: i64,
) -> Result<Vec<Task>, StoreError> {
    Ok(with_conn!(conn, |c| t::ax_task
        .filter(t::status.eq(TaskStatus::Enabled))
        .filter(t::next_run_at.le(until))
        .filter(
            t::next_run_at.gt(cursor.next_run_at).or(t::next_run_at
                .eq(cursor.next_run_at)
                .and(t::id.gt(cursor.id))),
        )
        .order((t::next_run_at.asc(), t::id.asc()))
        .limit(limit)
        .select(Task::as_select())
        .load(c)
        .await)?)
}

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
/// left alone when its definition and upstreams are the same, replaced otherwise. The items'
/// `(scene, name)` must differ from each other (the caller checks).
pub async fn register(
    conn: &mut Conn,
    items: Vec<BulkItem>,
    upsert: bool,
) -> Result<Result<BulkOutcome, BulkRefusal>, StoreError> {
    conn.transaction(|conn| {
        Box::pin(async move {
            let existing = by_scene_and_name(conn, &items).await?;
            let ids: Vec<TaskId> = existing.values().map(|task| task.id).collect();
            let upstreams = dependencies_of(conn, &ids).await?;
            // The items to write, in order: `None` to insert, the task's id to replace.
            let mut writes: Vec<(usize, Option<TaskId>)> = Vec::new();
            let mut unchanged = 0;
            for (index, item) in items.iter().enumerate() {
                let key = (item.fields.scene.clone(), item.fields.name.clone());
                match existing.get(&key) {
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
            let new = writes.iter().filter(|(_, id)| id.is_none());
            insert_all(conn, new.map(|&(n, _)| &items[n].fields)).await?;
            let stored = by_scene_and_name(conn, &items).await?;
            let (mut created, mut updated) = (Vec::new(), Vec::new());
            for &(index, existed) in &writes {
                let item = &items[index];
                let key = (item.fields.scene.clone(), item.fields.name.clone());
                let id = stored
                    .get(&key)
                    .map(|task| task.id)
                    .ok_or(StoreError::Query(diesel::NotFound))?;
                if existed.is_some() {
                    with_conn!(conn, |c| diesel::update(t::ax_task.find(id))
                        .set(&item.fields)
                        .execute(c)
                        .await)?;
                    updated.push(id);
                } else {
                    created.push(id);
                }
                if existed.is_some() || !item.depends_on.is_empty() {
                    set_dependencies(conn, id, &item.depends_on).await?;
                }
            }
            Ok(Ok(BulkOutcome {
                created: find_many(conn, created).await?,
                updated: find_many(conn, updated).await?,
                unchanged,
            }))
        })
    })
    .await
}

/// The stored tasks that have the `(scene, name)` of one of `items`.
async fn by_scene_and_name(
    conn: &mut Conn,
    items: &[BulkItem],
) -> Result<HashMap<(String, String), Task>, StoreError> {
    let pairs: Vec<(String, String)> = items
        .iter()
        .map(|i| (i.fields.scene.clone(), i.fields.name.clone()))
        .collect();
    Ok(find_named(conn, &pairs)
        .await?
        .into_iter()
        .map(|task| ((task.scene.clone(), task.name.clone()), task))
        .collect())
}

/// Inserts tasks (on MySQL in one statement).
async fn insert_all<'a>(
    conn: &mut Conn,
    fields: impl Iterator<Item = &'a TaskFields>,
) -> Result<(), StoreError> {
    let rows: Vec<_> = fields
        .map(|f| (f.clone(), t::created_at.eq(f.updated_at)))
        .collect();
    if rows.is_empty() {
        return Ok(());
    }
    match conn {
        Conn::Mysql(c) => {
            diesel::insert_into(t::ax_task)
                .values(&rows)
                .execute(&mut **c)
                .await?;
        }
        // The async SQLite wrapper has no multi-row insert; rows of an in-process file are
        // cheap one at a time.
        Conn::Sqlite(c) => {
            for row in &rows {
                diesel::insert_into(t::ax_task)
                    .values(row)
                    .execute(&mut **c)
                    .await?;
            }
        }
    }
    Ok(())
}
