//! Task rows: CRUD for the API and the preload window for the scheduler.

use std::collections::{HashMap, HashSet};

use chrono::{DateTime, NaiveDateTime, Utc};
use diesel::dsl::sql;
use diesel::mysql::Mysql;
use diesel::prelude::*;
use diesel::query_builder::{BoxedSqlQuery, SqlQuery};
use diesel::sql_types::{BigInt, Nullable, Text, Timestamp};
use diesel_async::RunQueryDsl;

use super::{meta, success_watch, transitions, Page};
use crate::pool::prepared::{chunks, padded, Kept};
use crate::rows::models::{Task, TaskFields, TaskStatus};
use crate::rows::schema::ax_scene::dsl as sc;
use crate::rows::schema::ax_task::dsl as t;
use crate::rows::schema::ax_task_dependency::dsl as d;
use crate::with_conn;
use crate::{to_db, Conn, StoreError};
use ax_core::run::TaskId;
use ax_core::task::dependencies::dependency_cycle;

diesel::define_sql_function! {
    /// Where `needle` starts in `haystack` (1-based), 0 if it is not in it; on both stores
    /// (on MySQL by the column's binary collation: case counts, as on SQLite).
    fn instr(haystack: Text, needle: Text) -> Integer;
}

/// Filters of a task listing.
#[derive(Debug, Clone, Default)]
pub struct TaskFilter {
    pub scene: Option<String>,
    pub status: Option<TaskStatus>,
    /// Names matching this SQL `LIKE` pattern (`\` escapes).
    pub name_like: Option<String>,
    /// Only tasks with this label (key, value).
    pub label: Option<(String, String)>,
}

/// The tasks matching a [`TaskFilter`] as a boxed query of the connection's backend (a boxed
/// query is tied to one backend: expand it inside a `with_conn!` body).
macro_rules! filtered {
    ($filter:expr) => {{
        let filter: &$crate::queries::tasks::TaskFilter = $filter;
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
        if let Some((key, value)) = &filter.label {
            // A scan of the labels column: the stored form holds a label as this text.
            query = query.filter(
                $crate::queries::tasks::instr(
                    t::labels,
                    ax_core::task::labels::Labels::needle(key, value),
                )
                .gt(0),
            );
        }
        query
    }};
}
pub(crate) use filtered;

/// Why a task's upstreams cannot be what was asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UpstreamProblem {
    /// These tasks do not exist.
    Unknown(Vec<TaskId>),
    /// They would close this cycle: a path from the task back to itself.
    Cycle(Vec<TaskId>),
}

/// Which versions of a task a change applies to: any (no `If-Match`), or one of these.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Versions {
    #[default]
    Any,
    OneOf(Vec<i64>),
}

impl Versions {
    pub fn allows(&self, version: i64) -> bool {
        match self {
            Versions::Any => true,
            Versions::OneOf(versions) => versions.contains(&version),
        }
    }
}

/// What a change of a task under [`Versions`] found.
#[derive(Debug, Clone)]
pub enum Conditional<T> {
    Done(T),
    NotFound,
    /// The task is at a version the change does not apply to: the task as it is now.
    Stale(Box<Task>),
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
        Conn::Sqlite(c, _) => query.load(&mut **c).await?,
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
    mut fields: TaskFields,
    depends_on: Vec<TaskId>,
) -> Result<Result<Task, UpstreamProblem>, StoreError> {
    conn.transaction(|conn| {
        Box::pin(async move {
            hold_if_scene_paused(conn, vec![&mut fields]).await?;
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
            watch_if_lag_bound(conn, [&fields]).await?;
            find(conn, id)
                .await?
                .map(Ok)
                .ok_or(StoreError::Query(diesel::NotFound))
        })
    })
    .await
}

/// A task given an `alertLagMs` has its successes watched from now on (see
/// [`success_watch`]).
async fn watch_if_lag_bound<'f>(
    conn: &mut Conn,
    written: impl IntoIterator<Item = &'f TaskFields>,
) -> Result<(), StoreError> {
    if written
        .into_iter()
        .any(|fields| fields.alert_lag_ms.is_some())
    {
        success_watch::bump(conn).await?;
    }
    Ok(())
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

/// Each of these tasks with whether it has upstreams (what its wheel entry needs, see
/// `models::wheel_entries`).
pub async fn with_upstreams_known(
    conn: &mut Conn,
    tasks: Vec<Task>,
) -> Result<Vec<(Task, bool)>, StoreError> {
    let ids: Vec<TaskId> = tasks.iter().map(|task| task.id).collect();
    let flags: Vec<(TaskId, bool)> = with_conn!(conn, |c| t::ax_task
        .filter(t::id.eq_any(&ids))
        .select((t::id, has_upstreams()))
        .load(c)
        .await)?;
    let with_upstreams: HashSet<TaskId> = flags
        .into_iter()
        .filter_map(|(id, has)| has.then_some(id))
        .collect();
    Ok(tasks
        .into_iter()
        .map(|task| {
            let has = with_upstreams.contains(&task.id);
            (task, has)
        })
        .collect())
}

type HasUpstreams = diesel::dsl::exists<
    diesel::dsl::Filter<d::ax_task_dependency, diesel::dsl::Eq<d::task_id, t::id>>,
>;

/// Whether the task of the row at hand depends on others: the one definition of the flag that
/// a task's wheel entry needs.
fn has_upstreams() -> HasUpstreams {
    diesel::dsl::exists(d::ax_task_dependency.filter(d::task_id.eq(t::id)))
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
    // Scenes × names covers every pair asked for (and maybe more, dropped here). The lists
    // are padded so that a registration's statement is prepared once per connection.
    let (scenes, names) = (padded(&scenes), padded(&names));
    let rows: Vec<Task> = with_conn!(conn, |c| Kept(
        t::ax_task
            .filter(t::scene.eq_any(&scenes))
            .filter(t::name.eq_any(&names))
            .select(Task::as_select())
    )
    .load(c)
    .await)?;
    Ok(rows
        .into_iter()
        .filter(|task| wanted.contains(&(task.scene.as_str(), task.name.as_str())))
        .collect())
}

/// The tasks a name given alone names: the one of that exact name if there is one, else up to
/// `limit` whose name starts with it; read in one range of the name index.
pub async fn named(conn: &mut Conn, name: &str, limit: i64) -> Result<Vec<TaskId>, StoreError> {
    // Every name starting with `name` sorts from it to it followed by the last code point.
    let end = format!("{name}{}", char::MAX);
    let rows: Vec<(TaskId, String)> = with_conn!(conn, |c| t::ax_task
        .filter(t::name.ge(name))
        .filter(t::name.lt(&end))
        .order((t::name.asc(), t::id.asc()))
        .limit(limit)
        .select((t::id, t::name))
        .load(c)
        .await)?;
    let exact: Vec<TaskId> = rows
        .iter()
        .filter(|(_, each)| each == name)
        .map(|(id, _)| *id)
        .collect();
    Ok(match exact.is_empty() {
        true => rows.into_iter().map(|(id, _)| id).collect(),
        false => exact,
    })
}

/// Up to `limit` scenes that have tasks, in order (read from the scene index alone).
pub async fn scene_names(conn: &mut Conn, limit: i64) -> Result<Vec<String>, StoreError> {
    Ok(with_conn!(conn, |c| t::ax_task
        .select(t::scene)
        .distinct()
        .order(t::scene.asc())
        .limit(limit)
        .load(c)
        .await)?)
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

/// Tasks by id, oldest first (the JSON API's offset pages), with the total count matching the
/// filter. The console pages by keyset instead (see [`super::task_pages`]).
pub async fn list(
    conn: &mut Conn,
    filter: &TaskFilter,
    page: Page,
) -> Result<(Vec<Task>, i64), StoreError> {
    Ok(with_conn!(conn, |c| {
        let total: i64 = filtered!(filter).count().get_result(c).await?;
        let rows = filtered!(filter)
            .order(t::id.asc())
            .limit(page.limit)
            .offset(page.offset)
            .select(Task::as_select())
            .load(c)
            .await?;
        (rows, total)
    }))
}

/// Replaces a task's fields and upstreams, if it is at one of `versions`, and raises its
/// version. The version is compared in the UPDATE itself: of two changes made from one
/// version, one finds the other's.
pub async fn update(
    conn: &mut Conn,
    id: TaskId,
    versions: Versions,
    mut fields: TaskFields,
    depends_on: Vec<TaskId>,
) -> Result<Conditional<Result<Task, UpstreamProblem>>, StoreError> {
    conn.transaction(|conn| {
        Box::pin(async move {
            match find(conn, id).await? {
                None => return Ok(Conditional::NotFound),
                Some(task) if !versions.allows(task.version) => {
                    return Ok(Conditional::Stale(Box::new(task)))
                }
                Some(_) => {}
            }
            hold_if_scene_paused(conn, vec![&mut fields]).await?;
            if let Some(problem) = check_upstreams(conn, Some(id), &depends_on).await? {
                return Ok(Conditional::Done(Err(problem)));
            }
            let changes = (&fields, t::version.eq(t::version + 1));
            let task = t::ax_task.filter(t::id.eq(id));
            let changed = with_conn!(conn, |c| match &versions {
                Versions::Any => diesel::update(task).set(changes).execute(c).await,
                Versions::OneOf(versions) => {
                    let at = task.filter(t::version.eq_any(versions));
                    diesel::update(at).set(changes).execute(c).await
                }
            })?;
            if changed == 0 {
                return stale_or_gone(conn, id).await;
            }
            set_dependencies(conn, id, &depends_on).await?;
            watch_if_lag_bound(conn, [&fields]).await?;
            Ok(match find(conn, id).await? {
                Some(task) => Conditional::Done(Ok(task)),
                None => Conditional::NotFound,
            })
        })
    })
    .await
}

/// Why a change of task `id` under its versions changed no row.
async fn stale_or_gone<T>(conn: &mut Conn, id: TaskId) -> Result<Conditional<T>, StoreError> {
    Ok(match find(conn, id).await? {
        Some(task) => Conditional::Stale(Box::new(task)),
        None => Conditional::NotFound,
    })
}

/// Deletes a task if it is at one of `versions`. Its run history stays; its open runs end
/// FAILED (`TASK_DELETED`).
pub async fn delete(
    conn: &mut Conn,
    id: TaskId,
    versions: Versions,
    now: DateTime<Utc>,
) -> Result<Conditional<()>, StoreError> {
    conn.transaction(|conn| {
        Box::pin(async move {
            let deleted = with_conn!(conn, |c| {
                // The task's row first: a task being given it as an upstream holds that row
                // locked, so its dependency is committed before this removes it.
                let task = t::ax_task.filter(t::id.eq(id));
                match &versions {
                    Versions::Any => diesel::delete(task).execute(c).await?,
                    Versions::OneOf(versions) => {
                        let at = task.filter(t::version.eq_any(versions));
                        diesel::delete(at).execute(c).await?
                    }
                }
            });
            if deleted == 0 {
                return stale_or_gone(conn, id).await;
            }
            // Its downstreams stop waiting on it too.
            with_conn!(conn, |c| diesel::delete(
                d::ax_task_dependency.filter(d::task_id.eq(id).or(d::depends_on.eq(id))),
            )
            .execute(c)
            .await)?;
            transitions::cancel_open(conn, id, now).await?;
            Ok(Conditional::Done(()))
        })
    })
    .await
}

/// Pauses a task (no next run) and raises its version; `false` if it is not enabled (or not
/// there).
pub async fn pause(conn: &mut Conn, id: TaskId, now: NaiveDateTime) -> Result<bool, StoreError> {
    let changed = with_conn!(conn, |c| diesel::update(
        t::ax_task
            .filter(t::id.eq(id))
            .filter(t::status.eq(TaskStatus::Enabled))
    )
    .set((
        t::status.eq(TaskStatus::Paused),
        t::next_run_at.eq(None::<NaiveDateTime>),
        t::updated_at.eq(now),
        t::version.eq(t::version + 1),
    ))
    .execute(c)
    .await)?;
    Ok(changed > 0)
}

/// Resumes a paused task and raises its version: enabled, its next run computed from `now`
/// (none while its scene is paused), so no run that fell in the pause fires. `None` if it is
/// not paused (or not there).
pub async fn resume(
    conn: &mut Conn,
    id: TaskId,
    now: DateTime<Utc>,
) -> Result<Option<Task>, StoreError> {
    conn.transaction(|conn| {
        Box::pin(async move {
            let Some(mut task) = find(conn, id)
                .await?
                .filter(|task| task.status == TaskStatus::Paused)
            else {
                return Ok(None);
            };
            let scene_paused = !lock_scenes(conn, &[task.scene.as_str()], SceneLock::Shared)
                .await?
                .is_empty();
            let next = (!scene_paused).then(|| next_run(&task, now)).flatten();
            // Guarded by what was read: a task paused again, or moved to another scene, since.
            let changed = with_conn!(conn, |c| diesel::update(
                t::ax_task
                    .filter(t::id.eq(id))
                    .filter(t::status.eq(TaskStatus::Paused))
                    .filter(t::scene.eq(&task.scene))
            )
            .set((
                t::status.eq(TaskStatus::Enabled),
                t::next_run_at.eq(next),
                t::updated_at.eq(to_db(now)),
                t::version.eq(t::version + 1),
            ))
            .execute(c)
            .await)?;
            if changed == 0 {
                return Ok(None);
            }
            task.status = TaskStatus::Enabled;
            task.next_run_at = next;
            task.updated_at = to_db(now);
            task.version += 1;
            Ok(Some(task))
        })
    })
    .await
}

/// The task's next fire strictly after `now`, as stored.
fn next_run(task: &Task, now: DateTime<Utc>) -> Option<NaiveDateTime> {
    task.schedule()
        .ok()
        .and_then(|cron| cron.next_after(now))
        .map(to_db)
}

/// Pauses a scene: none of its tasks fires until it is resumed, whatever their own state,
/// which stays as it is (their versions too: a scene's pause is not theirs). Returns how many
/// of its tasks stop firing (its enabled ones); 0 if it was paused already.
pub async fn pause_scene(
    conn: &mut Conn,
    scene: &str,
    now: NaiveDateTime,
    by: &str,
) -> Result<usize, StoreError> {
    let (scene, by) = (scene.to_string(), author(by));
    conn.transaction(|conn| {
        Box::pin(async move {
            if !lock_scenes(conn, &[scene.as_str()], SceneLock::Exclusive)
                .await?
                .is_empty()
            {
                return Ok(0);
            }
            set_scene_pause(conn, &scene, Some((now, by))).await?;
            Ok(with_conn!(conn, |c| diesel::update(
                t::ax_task
                    .filter(t::scene.eq(&scene))
                    .filter(t::status.eq(TaskStatus::Enabled))
            )
            .set(t::next_run_at.eq(None::<NaiveDateTime>))
            .execute(c)
            .await)?)
        })
    })
    .await
}

/// Resumes a paused scene: each of its enabled tasks gets its next run computed from `now`;
/// those paused one by one stay paused. Returns the tasks that fire again (empty if the scene
/// was not paused).
pub async fn resume_scene(
    conn: &mut Conn,
    scene: &str,
    now: DateTime<Utc>,
) -> Result<Vec<Task>, StoreError> {
    let scene = scene.to_string();
    conn.transaction(|conn| {
        Box::pin(async move {
            if lock_scenes(conn, &[scene.as_str()], SceneLock::Exclusive)
                .await?
                .is_empty()
            {
                return Ok(Vec::new());
            }
            set_scene_pause(conn, &scene, None).await?;
            let enabled: Vec<Task> = with_conn!(conn, |c| t::ax_task
                .filter(t::scene.eq(&scene))
                .filter(t::status.eq(TaskStatus::Enabled))
                .select(Task::as_select())
                .load(c)
                .await)?;
            let mut resumed = Vec::with_capacity(enabled.len());
            for mut task in enabled {
                let next = next_run(&task, now);
                let changed = with_conn!(conn, |c| diesel::update(
                    t::ax_task
                        .filter(t::id.eq(task.id))
                        .filter(t::status.eq(TaskStatus::Enabled))
                )
                .set(t::next_run_at.eq(next))
                .execute(c)
                .await)?;
                if changed > 0 {
                    task.next_run_at = next;
                    resumed.push(task);
                }
            }
            Ok(resumed)
        })
    })
    .await
}

/// Sets a scene's pause, when and by whom (`None`: not paused), keeping the rest of its row
/// (its alert rule).
async fn set_scene_pause(
    conn: &mut Conn,
    scene: &str,
    pause: Option<(NaiveDateTime, String)>,
) -> Result<(), StoreError> {
    let (paused_at, paused_by) = pause.unzip();
    let updated = with_conn!(conn, |c| diesel::update(
        sc::ax_scene.filter(sc::scene.eq(scene))
    )
    .set((sc::paused_at.eq(paused_at), sc::paused_by.eq(&paused_by)))
    .execute(c)
    .await)?;
    if updated == 0 {
        with_conn!(conn, |c| diesel::insert_into(sc::ax_scene)
            .values((
                sc::scene.eq(scene),
                sc::paused_at.eq(paused_at),
                sc::paused_by.eq(&paused_by),
            ))
            .execute(c)
            .await)?;
    }
    Ok(())
}

/// Who paused something, as its column holds it: the token's name, as the audit log has it.
fn author(name: &str) -> String {
    crate::rows::models::cut(name.to_string(), MAX_AUTHOR_CHARS)
}

/// The longest name `paused_by` holds.
const MAX_AUTHOR_CHARS: usize = 64;

/// Notes since when and by whom these tasks are paused: each one paused and not noted yet is
/// paused since `at` by `by` (a task paused again keeps when it was first paused); each one
/// enabled forgets it. Called after any write that may change a task's status (create,
/// update, register, pause, resume), it holds whatever the status is now.
pub async fn note_pauses(
    conn: &mut Conn,
    ids: &[TaskId],
    at: NaiveDateTime,
    by: &str,
) -> Result<(), StoreError> {
    if ids.is_empty() {
        return Ok(());
    }
    let by = author(by);
    with_conn!(conn, |c| diesel::update(
        t::ax_task
            .filter(t::id.eq_any(ids))
            .filter(t::status.eq(TaskStatus::Paused))
            .filter(t::paused_at.is_null())
    )
    .set((t::paused_at.eq(at), t::paused_by.eq(&by)))
    .execute(c)
    .await)?;
    with_conn!(conn, |c| diesel::update(
        t::ax_task
            .filter(t::id.eq_any(ids))
            .filter(t::status.ne(TaskStatus::Paused))
            .filter(t::paused_at.is_not_null())
    )
    .set((
        t::paused_at.eq(None::<NaiveDateTime>),
        t::paused_by.eq(None::<String>),
    ))
    .execute(c)
    .await)?;
    Ok(())
}

/// How a transaction holds the pause of the scenes it names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SceneLock {
    /// A writer of tasks: the pause cannot change until it commits; other writers of the same
    /// scenes go on beside it.
    Shared,
    /// A pause or resume of the scene: it waits for the writers and they wait for it.
    Exclusive,
}

/// Locks the pause of these scenes for the rest of the transaction and returns the paused
/// ones. A scene's pause and every write of a task's next run take this lock before any task
/// row, so a task written while its scene pauses cannot keep a next run, and the two never wait
/// on each other in a cycle. On MySQL the lock is the scene's row, made when first needed: an
/// exclusive lock is an upsert, which takes it at once (a read then a write would deadlock two
/// pauses); a shared one is an insert that skips an existing row, then a read in share mode.
/// SQLite's `BEGIN IMMEDIATE` already holds its only write lock.
pub(crate) async fn lock_scenes(
    conn: &mut Conn,
    scenes: &[&str],
    lock: SceneLock,
) -> Result<HashSet<String>, StoreError> {
    let mut scenes = scenes.to_vec();
    // In one order: two writers of several scenes lock them alike.
    scenes.sort_unstable();
    scenes.dedup();
    if scenes.is_empty() {
        return Ok(HashSet::new());
    }
    if let Conn::Mysql(c) = conn {
        let rows = vec!["(?)"; scenes.len()].join(", ");
        let insert = match lock {
            SceneLock::Exclusive => format!(
                "INSERT INTO ax_scene (scene) VALUES {rows} ON DUPLICATE KEY UPDATE scene = scene"
            ),
            SceneLock::Shared => format!("INSERT IGNORE INTO ax_scene (scene) VALUES {rows}"),
        };
        bind_scenes(diesel::sql_query(insert).into_boxed(), &scenes)
            .execute(&mut **c)
            .await?;
        if lock == SceneLock::Shared {
            // Every named row is read (and so locked), paused or not.
            let read = format!(
                "SELECT scene, paused_at FROM ax_scene WHERE scene IN ({}) LOCK IN SHARE MODE",
                vec!["?"; scenes.len()].join(", ")
            );
            let rows: Vec<ScenePause> = bind_scenes(diesel::sql_query(read).into_boxed(), &scenes)
                .load(&mut **c)
                .await?;
            let paused = rows.into_iter().filter(|row| row.paused_at.is_some());
            return Ok(paused.map(|row| row.scene).collect());
        }
    }
    Ok(paused_scenes(conn, Some(&scenes))
        .await?
        .into_keys()
        .collect())
}

/// A scene's pause, as [`lock_scenes`] reads it.
#[derive(QueryableByName)]
struct ScenePause {
    #[diesel(sql_type = Text)]
    scene: String,
    #[diesel(sql_type = Nullable<Timestamp>)]
    paused_at: Option<NaiveDateTime>,
}

/// A raw MySQL statement, its parameters bound one by one.
type MysqlSql<'a> = BoxedSqlQuery<'a, Mysql, SqlQuery>;

/// `query` with each scene bound, in order.
fn bind_scenes<'a>(mut query: MysqlSql<'a>, scenes: &[&'a str]) -> MysqlSql<'a> {
    for scene in scenes {
        query = query.bind::<Text, _>(*scene);
    }
    query
}

/// Clears the next runs of the tasks whose scene is paused, and locks those scenes' pause (see
/// [`lock_scenes`]): what is written next keeps no next run in a paused scene.
async fn hold_if_scene_paused(
    conn: &mut Conn,
    fields: Vec<&mut TaskFields>,
) -> Result<(), StoreError> {
    let scenes: Vec<&str> = fields.iter().map(|f| f.scene.as_str()).collect();
    let paused = lock_scenes(conn, &scenes, SceneLock::Shared).await?;
    for fields in fields.into_iter().filter(|f| paused.contains(&f.scene)) {
        fields.next_run_at = None;
    }
    Ok(())
}

/// The paused scenes (of `among`, or all), with when each was paused.
pub async fn paused_scenes(
    conn: &mut Conn,
    among: Option<&[&str]>,
) -> Result<HashMap<String, NaiveDateTime>, StoreError> {
    let rows: Vec<(String, Option<NaiveDateTime>)> = with_conn!(conn, |c| {
        let mut query = sc::ax_scene
            .filter(sc::paused_at.is_not_null())
            .select((sc::scene, sc::paused_at))
            .into_boxed();
        if let Some(among) = among {
            let among: Vec<String> = among.iter().map(|scene| scene.to_string()).collect();
            query = query.filter(sc::scene.eq_any(among));
        }
        query.load(c).await
    })?;
    Ok(rows
        .into_iter()
        .filter_map(|(scene, at)| Some((scene, at?)))
        .collect())
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
/// window scan, each with whether it has upstreams (what its wheel entry needs). The keyset
/// follows the (status, next_run_at) index, so a large window streams in bounded pages and a
/// narrow one (the overdue scan) costs an index probe.
pub async fn due_until(
    conn: &mut Conn,
    cursor: DueCursor,
    until: NaiveDateTime,
    limit: i64,
) -> Result<Vec<(Task, bool)>, StoreError> {
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
        .select((Task::as_select(), has_upstreams()))
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
            let pairs: Vec<(String, String)> =
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
fn name_key(fields: &TaskFields) -> (String, String) {
    (fields.scene.clone(), fields.name.clone())
}

/// The stored tasks of these `(scene, name)` pairs, by pair.
async fn by_scene_and_name(
    conn: &mut Conn,
    pairs: &[(String, String)],
) -> Result<HashMap<(String, String), Task>, StoreError> {
    Ok(find_named(conn, pairs)
        .await?
        .into_iter()
        .map(|task| ((task.scene.clone(), task.name.clone()), task))
        .collect())
}

/// Inserts tasks and returns them as stored, in order (on MySQL a statement per [`chunks`],
/// each kept prepared: the database parses a thousand rows' text once per connection, not on
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
            for chunk in chunks(&rows) {
                Kept(diesel::insert_into(t::ax_task).values(chunk))
                    .execute(&mut **c)
                    .await?;
                // A multi-row insert's id is its first row's.
                if first.is_none() {
                    first = Some(last_insert_id(&mut **c).await?);
                }
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
    let keys: Vec<(String, String)> = fields.iter().map(|f| name_key(f)).collect();
    let mut stored = by_scene_and_name(conn, &keys).await?;
    keys.into_iter()
        .map(|key| {
            stored
                .remove(&key)
                .ok_or(StoreError::Query(diesel::NotFound))
        })
        .collect()
}
