//! A task's CRUD: insert, find, list, update and delete, a change applying only to the
//! versions it names.

use ax_core::ids::SceneName;
use chrono::{DateTime, Utc};
use diesel::dsl::sql;
use diesel::prelude::*;
use diesel::sql_types::BigInt;
use diesel_async::RunQueryDsl;

use super::scene_lock::hold_if_scene_paused;
use super::upstreams::{check_upstreams, set_dependencies, UpstreamProblem};
use super::{filtered, TaskFilter};
use crate::pool::prepared::{padded, Kept};
use crate::queries::{success_watch, transitions, Page};
use crate::rows::models::{Task, TaskFields};
use crate::rows::schema::ax_task::dsl as t;
use crate::rows::schema::ax_task_dependency::dsl as d;
use crate::with_conn;
use crate::{Conn, StoreError};
use ax_core::run::TaskId;

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
pub(super) async fn watch_if_lag_bound<'f>(
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

/// The id the connection's last insert of a task generated. The one backend-specific query:
/// MySQL has no `RETURNING`, and each backend names this function differently.
pub(super) async fn last_insert_id<C>(conn: &mut C) -> QueryResult<i64>
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

/// The task's own sequence: `lastval()` would answer the change feed's, which the insert's
/// trigger took a value of after it.
impl LastInsertId for diesel::pg::Pg {
    const LAST_INSERT_ID: &'static str = "currval(pg_get_serial_sequence('ax_task', 'id'))";
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
    pairs: &[(SceneName, String)],
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
    scene: &SceneName,
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
/// filter. The console pages by keyset instead (see [`crate::queries::task_pages`]).
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
