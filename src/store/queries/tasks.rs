//! Task rows: CRUD for the API and the preload window for the scheduler.

use chrono::NaiveDateTime;
use diesel::dsl::sql;
use diesel::prelude::*;
use diesel::sql_types::BigInt;
use diesel_async::RunQueryDsl;

use super::{instances, Page};
use crate::store::models::{Task, TaskFields, TaskStatus};
use crate::store::schema::ax_task::dsl as t;
use crate::store::{Conn, StoreError};
use crate::with_conn;

/// Filters of a task listing.
#[derive(Debug, Clone, Default)]
pub struct TaskFilter {
    pub scene: Option<String>,
    pub status: Option<TaskStatus>,
}

/// Inserts a task and returns it as stored.
pub async fn insert(conn: &mut Conn, fields: TaskFields) -> Result<Task, StoreError> {
    conn.transaction(|conn| {
        Box::pin(async move {
            let id = with_conn!(conn, |c| {
                diesel::insert_into(t::ax_task)
                    .values((&fields, t::created_at.eq(fields.updated_at)))
                    .execute(c)
                    .await?;
                last_insert_id(c).await?
            });
            find(conn, id)
                .await?
                .ok_or(StoreError::Query(diesel::NotFound))
        })
    })
    .await
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
pub async fn find(conn: &mut Conn, id: i64) -> Result<Option<Task>, StoreError> {
    Ok(with_conn!(conn, |c| t::ax_task
        .find(id)
        .select(Task::as_select())
        .first(c)
        .await
        .optional())?)
}

/// The tasks with these ids (those that exist).
pub async fn find_many(conn: &mut Conn, ids: Vec<i64>) -> Result<Vec<Task>, StoreError> {
    Ok(with_conn!(conn, |c| t::ax_task
        .filter(t::id.eq_any(&ids))
        .select(Task::as_select())
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
                query = query.filter(t::status.eq(status.as_str()));
            }
            query
        };
        let total: i64 = query().count().get_result(c).await?;
        let rows = query()
            .order(t::id.asc())
            .limit(page.limit)
            .offset(page.offset)
            .select(Task::as_select())
            .load(c)
            .await?;
        (rows, total)
    }))
}

/// Replaces a task's fields; `None` when there is no such task.
pub async fn update(
    conn: &mut Conn,
    id: i64,
    fields: TaskFields,
) -> Result<Option<Task>, StoreError> {
    conn.transaction(|conn| {
        Box::pin(async move {
            let changed = with_conn!(conn, |c| diesel::update(t::ax_task.find(id))
                .set(&fields)
                .execute(c)
                .await)?;
            if changed == 0 {
                return Ok(None);
            }
            find(conn, id).await
        })
    })
    .await
}

/// Deletes a task; `false` when there was none. Its run history stays; its open runs end
/// FAILED (`TASK_DELETED`).
pub async fn delete(conn: &mut Conn, id: i64, now: NaiveDateTime) -> Result<bool, StoreError> {
    conn.transaction(|conn| {
        Box::pin(async move {
            let deleted = with_conn!(conn, |c| diesel::delete(t::ax_task.find(id))
                .execute(c)
                .await)?;
            if deleted > 0 {
                instances::cancel_open(conn, id, now).await?;
            }
            Ok(deleted > 0)
        })
    })
    .await
}

/// Enabled tasks due at or before `until`, by id after `after_id`: one page of the preload
/// window, read with a keyset so a large window streams in bounded pages.
pub async fn due_until(
    conn: &mut Conn,
    until: NaiveDateTime,
    after_id: i64,
    limit: i64,
) -> Result<Vec<Task>, StoreError> {
    Ok(with_conn!(conn, |c| t::ax_task
        .filter(t::status.eq(TaskStatus::Enabled.as_str()))
        .filter(t::next_run_at.le(until))
        .filter(t::id.gt(after_id))
        .order(t::id.asc())
        .limit(limit)
        .select(Task::as_select())
        .load(c)
        .await)?)
}
