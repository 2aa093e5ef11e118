//! Executor groups as defined, and their members as read by the dispatchers.

use ax_core::ids::GroupName;
use chrono::NaiveDateTime;
use diesel::prelude::*;
use diesel_async::RunQueryDsl;

use super::gone::{back, remove_member, Gone};
use crate::rows::schema::ax_executor_group::dsl as g;
use crate::rows::schema::ax_executor_member::dsl as m;
use crate::rows::schema::ax_member_gone::dsl as x;
use crate::rows::schema::ax_task::dsl as t;
use crate::{server_or_sqlite, with_conn};
use crate::{Conn, StoreError};
use ax_core::task::executor::TaskExecutor;

/// A group's row.
#[derive(Debug, Clone, PartialEq, Eq, Queryable, Selectable)]
#[diesel(table_name = crate::rows::schema::ax_executor_group)]
#[diesel(check_for_backend(diesel::mysql::Mysql, diesel::sqlite::Sqlite))]
pub struct GroupRow {
    pub name: GroupName,
    pub routing: String,
    pub max_in_flight: i32,
    pub updated_at: NaiveDateTime,
}

/// A member's row.
#[derive(Debug, Clone, PartialEq, Eq, Queryable, Selectable)]
#[diesel(table_name = crate::rows::schema::ax_executor_member)]
#[diesel(check_for_backend(diesel::mysql::Mysql, diesel::sqlite::Sqlite))]
pub struct MemberRow {
    pub group_name: GroupName,
    pub url: String,
    pub position: i64,
    pub capacity: Option<i32>,
    pub registered_at: NaiveDateTime,
    /// `None`: given by the group's definition, never expires.
    pub last_seen_at: Option<NaiveDateTime>,
}

/// A group's settings as written.
#[derive(Debug, Clone, Copy)]
pub struct GroupSettings<'a> {
    pub routing: &'a str,
    pub max_in_flight: i32,
}

/// Creates or replaces group `name` with its defined members (in order), keeping the members
/// that registered themselves; answers whether it was created. One transaction.
pub async fn put_group(
    conn: &mut Conn,
    name: &GroupName,
    settings: GroupSettings<'_>,
    members: &[String],
    now: NaiveDateTime,
) -> Result<bool, StoreError> {
    let (name, routing, members) = (name.clone(), settings.routing.to_string(), members.to_vec());
    let max_in_flight = settings.max_in_flight;
    conn.transaction(move |conn| {
        Box::pin(async move {
            let created = !ensure_group(
                conn,
                &name,
                GroupSettings {
                    routing: &routing,
                    max_in_flight,
                },
                now,
                true,
            )
            .await?;
            let dropped: Vec<String> = with_conn!(conn, |c| m::ax_executor_member
                .filter(m::group_name.eq(&name))
                .filter(m::last_seen_at.is_null())
                .filter(m::url.ne_all(&members))
                .select(m::url)
                .load(c)
                .await)?;
            for url in &dropped {
                remove_member(conn, (&name, url), Gone::Undefined, now, now).await?;
            }
            for url in &members {
                // A defined member that had registered itself stays, now without expiry.
                let kept = with_conn!(conn, |c| diesel::update(
                    m::ax_executor_member
                        .filter(m::group_name.eq(&name))
                        .filter(m::url.eq(url))
                )
                .set((
                    m::last_seen_at.eq(None::<NaiveDateTime>),
                    m::registered_by.eq(None::<String>),
                ))
                .execute(c)
                .await)?;
                if kept == 0 {
                    insert_member(conn, &name, url, None, now, None).await?;
                    back(conn, &name, url).await?;
                }
            }
            Ok(created)
        })
    })
    .await
}

/// Makes sure group `name` exists: answers whether it did. `replace`: an existing group takes
/// `settings`; else it keeps its own.
pub(super) async fn ensure_group(
    conn: &mut Conn,
    name: &GroupName,
    settings: GroupSettings<'_>,
    now: NaiveDateTime,
    replace: bool,
) -> Result<bool, StoreError> {
    if replace {
        let updated = with_conn!(conn, |c| diesel::update(
            g::ax_executor_group.filter(g::name.eq(name))
        )
        .set((
            g::routing.eq(settings.routing),
            g::max_in_flight.eq(settings.max_in_flight),
            g::updated_at.eq(now),
        ))
        .execute(c)
        .await)?;
        if updated > 0 {
            return Ok(true);
        }
    } else {
        // Locked on MySQL to the end of the transaction, so that registrations into one group
        // count its members one after the other; SQLite's `BEGIN IMMEDIATE` already holds its
        // only write lock.
        let query = g::ax_executor_group
            .filter(g::name.eq(name))
            .select(g::name);
        let found: Option<String> = server_or_sqlite!(
            conn,
            |c| query.for_update().first(c).await.optional()?,
            |c| query.first(c).await.optional()?
        );
        if found.is_some() {
            return Ok(true);
        }
    }
    with_conn!(conn, |c| diesel::insert_into(g::ax_executor_group)
        .values((
            g::name.eq(name),
            g::routing.eq(settings.routing),
            g::max_in_flight.eq(settings.max_in_flight),
            g::updated_at.eq(now),
        ))
        .execute(c)
        .await)?;
    Ok(false)
}

/// Adds a member at the end of its group's order: defined (`registered` `None`), or
/// registered at `now` with the token named `registered`.
pub(super) async fn insert_member(
    conn: &mut Conn,
    group: &GroupName,
    url: &str,
    capacity: Option<i32>,
    now: NaiveDateTime,
    registered: Option<&str>,
) -> Result<(), StoreError> {
    let last: Option<i64> = with_conn!(conn, |c| m::ax_executor_member
        .filter(m::group_name.eq(group))
        .select(diesel::dsl::max(m::position))
        .first(c)
        .await)?;
    with_conn!(conn, |c| diesel::insert_into(m::ax_executor_member)
        .values((
            m::group_name.eq(group),
            m::url.eq(url),
            m::position.eq(last.map_or(0, |p| p + 1)),
            m::capacity.eq(capacity),
            m::registered_at.eq(now),
            m::last_seen_at.eq(registered.map(|_| now)),
            m::registered_by.eq(registered),
        ))
        .execute(c)
        .await)?;
    Ok(())
}

/// Every group, by name.
pub async fn groups(conn: &mut Conn) -> Result<Vec<GroupRow>, StoreError> {
    Ok(with_conn!(conn, |c| g::ax_executor_group
        .order(g::name)
        .select(GroupRow::as_select())
        .load(c)
        .await)?)
}

/// Group `name`, if it exists.
pub async fn group(conn: &mut Conn, name: &GroupName) -> Result<Option<GroupRow>, StoreError> {
    Ok(with_conn!(conn, |c| g::ax_executor_group
        .filter(g::name.eq(name))
        .select(GroupRow::as_select())
        .first(c)
        .await
        .optional())?)
}

/// The live members (defined, or heard from at or after `live_since`) of every group or of
/// one, by group and registration order.
pub async fn members(
    conn: &mut Conn,
    group: Option<&GroupName>,
    live_since: NaiveDateTime,
) -> Result<Vec<MemberRow>, StoreError> {
    let live = m::last_seen_at.is_null().or(m::last_seen_at.ge(live_since));
    Ok(with_conn!(conn, |c| {
        let mut query = m::ax_executor_member
            .filter(live)
            .order((m::group_name, m::position))
            .select(MemberRow::as_select())
            .into_boxed();
        if let Some(group) = group {
            query = query.filter(m::group_name.eq(group));
        }
        query.load(c).await
    })?)
}

/// Deletes group `name` and its members; answers whether it existed.
pub async fn delete_group(conn: &mut Conn, name: &GroupName) -> Result<bool, StoreError> {
    let name = name.clone();
    conn.transaction(move |conn| {
        Box::pin(async move {
            with_conn!(conn, |c| diesel::delete(
                m::ax_executor_member.filter(m::group_name.eq(&name))
            )
            .execute(c)
            .await)?;
            with_conn!(conn, |c| diesel::delete(
                x::ax_member_gone.filter(x::group_name.eq(&name))
            )
            .execute(c)
            .await)?;
            let deleted = with_conn!(conn, |c| diesel::delete(
                g::ax_executor_group.filter(g::name.eq(&name))
            )
            .execute(c)
            .await)?;
            Ok(deleted > 0)
        })
    })
    .await
}

/// The tasks dispatched to group `name`, as `scene/name`.
pub async fn tasks_using(conn: &mut Conn, name: &GroupName) -> Result<Vec<String>, StoreError> {
    let rows: Vec<(String, String, Option<TaskExecutor>)> = with_conn!(conn, |c| t::ax_task
        .filter(t::executor.is_not_null())
        .order(t::id)
        .select((t::scene, t::name, t::executor))
        .load(c)
        .await)?;
    Ok(rows
        .into_iter()
        .filter(|(_, _, executor)| executor.as_ref().is_some_and(|e| e.group == *name))
        .map(|(scene, task, _)| format!("{scene}/{task}"))
        .collect())
}
