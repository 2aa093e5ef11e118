//! Executor groups and their members: defined by `PUT /api/executors/{group}`, joined by
//! executors registering themselves, read by every ax process's dispatchers.

use chrono::NaiveDateTime;
use diesel::prelude::*;
use diesel_async::RunQueryDsl;

use super::alerts;
use crate::rows::schema::ax_executor_group::dsl as g;
use crate::rows::schema::ax_executor_member::dsl as m;
use crate::rows::schema::ax_member_gone::dsl as x;
use crate::rows::schema::ax_member_health::dsl as h;
use crate::rows::schema::ax_task::dsl as t;
use crate::with_conn;
use crate::{from_db, Conn, StoreError};
use ax_core::alerting::{member_subject, AlertEvent};
use ax_core::task::executor::TaskExecutor;

/// A group's row.
#[derive(Debug, Clone, PartialEq, Eq, Queryable, Selectable)]
#[diesel(table_name = crate::rows::schema::ax_executor_group)]
#[diesel(check_for_backend(diesel::mysql::Mysql, diesel::sqlite::Sqlite))]
pub struct GroupRow {
    pub name: String,
    pub routing: String,
    pub max_in_flight: i32,
    pub updated_at: NaiveDateTime,
}

/// A member's row.
#[derive(Debug, Clone, PartialEq, Eq, Queryable, Selectable)]
#[diesel(table_name = crate::rows::schema::ax_executor_member)]
#[diesel(check_for_backend(diesel::mysql::Mysql, diesel::sqlite::Sqlite))]
pub struct MemberRow {
    pub group_name: String,
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
    name: &str,
    settings: GroupSettings<'_>,
    members: &[String],
    now: NaiveDateTime,
) -> Result<bool, StoreError> {
    let (name, routing, members) = (
        name.to_string(),
        settings.routing.to_string(),
        members.to_vec(),
    );
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
async fn ensure_group(
    conn: &mut Conn,
    name: &str,
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
        let found: Option<String> = match conn {
            Conn::Mysql(c) => query.for_update().first(&mut **c).await.optional()?,
            Conn::Sqlite(c, _) => query.first(&mut **c).await.optional()?,
        };
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
async fn insert_member(
    conn: &mut Conn,
    group: &str,
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

/// Who registers or removes a member: the token, by its configured name (never the token
/// itself), and whether it acts on members it did not register (an admin).
#[derive(Debug, Clone, Copy)]
pub struct Registrant<'a> {
    pub token: &'a str,
    pub acts_on_any: bool,
}

/// Who holds a member that a registrant may not act on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Holder {
    /// An admin defined it (`PUT /api/executors/{group}`).
    Admin,
    /// It registered itself with another token.
    OtherToken,
}

/// What a registration did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Registered {
    /// A new member (and, `group_created`, a new group with the defaults).
    Joined { group_created: bool },
    /// A heartbeat of a member already there.
    Renewed,
    /// Nothing: the member registered itself with another token.
    Held,
    /// Nothing: the group holds `max` live registered members already.
    Full { max: usize },
}

/// A member registering itself, as [`register`] writes it.
#[derive(Debug, Clone, Copy)]
pub struct Joining<'a> {
    pub group: &'a str,
    pub url: &'a str,
    pub capacity: Option<i32>,
    pub by: Registrant<'a>,
}

/// The cap [`register`] holds a group's registered members to.
#[derive(Debug, Clone, Copy)]
pub struct MemberCap {
    /// Most live registered members of one group.
    pub max: usize,
    /// A registered member heard from at or after this is live.
    pub live_since: NaiveDateTime,
}

/// Registers (or renews) a member at `now`, creating its group with `defaults` when it does
/// not exist, unless the group holds `cap.max` live registered members already. A member is
/// renewed by the token that registered it (or by an admin); one registered before ax recorded
/// tokens is taken by the first token to renew it; a defined member takes only its capacity.
/// A heartbeat is one statement.
pub async fn register(
    conn: &mut Conn,
    joining: Joining<'_>,
    defaults: GroupSettings<'_>,
    cap: MemberCap,
    now: NaiveDateTime,
) -> Result<Registered, StoreError> {
    if renew(conn, joining, now).await? {
        return Ok(Registered::Renewed);
    }
    if holder(conn, joining.group, joining.url).await?.is_some() {
        return Ok(Registered::Held);
    }
    let (group, url, token, routing) = (
        joining.group.to_string(),
        joining.url.to_string(),
        joining.by.token.to_string(),
        defaults.routing.to_string(),
    );
    let (capacity, max_in_flight) = (joining.capacity, defaults.max_in_flight);
    let joined = conn
        .transaction(move |conn| {
            Box::pin(async move {
                let settings = GroupSettings {
                    routing: &routing,
                    max_in_flight,
                };
                let existed = ensure_group(conn, &group, settings, now, false).await?;
                let live: i64 = with_conn!(conn, |c| m::ax_executor_member
                    .filter(m::group_name.eq(&group))
                    .filter(m::last_seen_at.ge(cap.live_since))
                    .count()
                    .get_result(c)
                    .await)?;
                if usize::try_from(live).unwrap_or(usize::MAX) >= cap.max {
                    return Ok(Registered::Full { max: cap.max });
                }
                insert_member(conn, &group, &url, capacity, now, Some(&token)).await?;
                back(conn, &group, &url).await?;
                // A member back after it was dropped resolves the alert about it.
                let subject = member_subject(&group, &url);
                alerts::record(conn, &subject, AlertEvent::Resolved, None, from_db(now)).await?;
                Ok(Registered::Joined {
                    group_created: !existed,
                })
            })
        })
        .await;
    match joined {
        // Another process (or a quick second heartbeat) registered it meanwhile.
        Err(err) if err.is_unique_violation() => Ok(Registered::Renewed),
        other => other,
    }
}

/// Renews a member the registrant may renew: its heartbeat and capacity if it registered
/// itself (taking one that has no token yet), its capacity if it is defined (it stays without
/// expiry); answers whether it did.
async fn renew(
    conn: &mut Conn,
    joining: Joining<'_>,
    now: NaiveDateTime,
) -> Result<bool, StoreError> {
    let Joining {
        group,
        url,
        capacity,
        by,
    } = joining;
    let member = || {
        m::ax_executor_member
            .filter(m::group_name.eq(group))
            .filter(m::url.eq(url))
    };
    let own = m::registered_by.eq(by.token).or(m::registered_by.is_null());
    let renewed = with_conn!(conn, |c| diesel::update(
        member().filter(m::last_seen_at.is_not_null()).filter(own)
    )
    .set((
        m::last_seen_at.eq(Some(now)),
        m::capacity.eq(capacity),
        m::registered_by.eq(Some(by.token)),
    ))
    .execute(c)
    .await)?;
    if renewed > 0 {
        return Ok(true);
    }
    if by.acts_on_any {
        // An admin's renewal leaves the member with the token that registered it.
        let renewed = with_conn!(conn, |c| diesel::update(
            member().filter(m::last_seen_at.is_not_null())
        )
        .set((m::last_seen_at.eq(Some(now)), m::capacity.eq(capacity)))
        .execute(c)
        .await)?;
        if renewed > 0 {
            return Ok(true);
        }
    }
    let defined = with_conn!(conn, |c| diesel::update(
        member().filter(m::last_seen_at.is_null())
    )
    .set(m::capacity.eq(capacity))
    .execute(c)
    .await)?;
    Ok(defined > 0)
}

/// Who holds member `url` of `group`, if it is there: an admin (defined) or a token.
async fn holder(conn: &mut Conn, group: &str, url: &str) -> Result<Option<Holder>, StoreError> {
    let seen: Option<Option<NaiveDateTime>> = with_conn!(conn, |c| m::ax_executor_member
        .filter(m::group_name.eq(group))
        .filter(m::url.eq(url))
        .select(m::last_seen_at)
        .first(c)
        .await
        .optional())?;
    Ok(seen.map(|seen| match seen {
        None => Holder::Admin,
        Some(_) => Holder::OtherToken,
    }))
}

/// What removing a member did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unregistered {
    Removed,
    NotFound,
    /// Nothing: the member is not the registrant's to remove.
    Held(Holder),
}

/// Removes member `url` from `group` if the registrant may: one it registered itself, or any
/// for an admin. It is listed as gone (it left).
pub async fn unregister(
    conn: &mut Conn,
    group: &str,
    url: &str,
    by: Registrant<'_>,
    now: NaiveDateTime,
) -> Result<Unregistered, StoreError> {
    let (group, url, token) = (group.to_string(), url.to_string(), by.token.to_string());
    let acts_on_any = by.acts_on_any;
    conn.transaction(move |conn| {
        Box::pin(async move {
            let registered_by: Option<Option<String>> =
                with_conn!(conn, |c| m::ax_executor_member
                    .filter(m::group_name.eq(&group))
                    .filter(m::url.eq(&url))
                    .select(m::registered_by)
                    .first(c)
                    .await
                    .optional())?;
            let Some(registered_by) = registered_by else {
                return Ok(Unregistered::NotFound);
            };
            if !acts_on_any && registered_by.as_deref() != Some(token.as_str()) {
                let holder = holder(conn, &group, &url).await?;
                return Ok(holder.map_or(Unregistered::NotFound, Unregistered::Held));
            }
            let removed = remove_member(conn, (&group, &url), Gone::Left, now, now).await?;
            Ok(if removed {
                Unregistered::Removed
            } else {
                Unregistered::NotFound
            })
        })
    })
    .await
}

/// Why a member is gone from its group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gone {
    /// It unregistered itself (a graceful shutdown).
    Left,
    /// A registered member not heard from within the member TTL.
    Expired,
    /// Its group's definition no longer names it.
    Undefined,
}

impl Gone {
    /// Why, as stored and shown.
    pub fn reason(self) -> &'static str {
        match self {
            Gone::Left => "left: unregistered itself",
            Gone::Expired => "expired: not heard from within the member TTL",
            Gone::Undefined => "removed from its group's definition",
        }
    }
}

/// A member gone from its group, listed as GONE for [`GONE_SHOWN_SECS`].
#[derive(Debug, Clone, PartialEq, Eq, Queryable, Selectable)]
#[diesel(table_name = crate::rows::schema::ax_member_gone)]
#[diesel(check_for_backend(diesel::mysql::Mysql, diesel::sqlite::Sqlite))]
pub struct GoneRow {
    pub group_name: String,
    pub url: String,
    pub gone_at: NaiveDateTime,
    pub reason: String,
}

/// How long a gone member stays listed.
pub const GONE_SHOWN_SECS: i64 = 3600;

/// Deletes member `url` of `group` and notes it gone, with why; answers whether it was there.
/// An expired one is deleted only while it is still last heard from before `before` (a
/// heartbeat may have come meanwhile). Inside the caller's transaction.
async fn remove_member(
    conn: &mut Conn,
    (group, url): (&str, &str),
    why: Gone,
    now: NaiveDateTime,
    before: NaiveDateTime,
) -> Result<bool, StoreError> {
    let member = m::ax_executor_member
        .filter(m::group_name.eq(group))
        .filter(m::url.eq(url));
    let removed = match why {
        Gone::Expired => with_conn!(conn, |c| diesel::delete(
            member.filter(m::last_seen_at.lt(before))
        )
        .execute(c)
        .await)?,
        Gone::Left | Gone::Undefined => {
            with_conn!(conn, |c| diesel::delete(member).execute(c).await)?
        }
    };
    if removed == 0 {
        return Ok(false);
    }
    back(conn, group, url).await?;
    with_conn!(conn, |c| diesel::insert_into(x::ax_member_gone)
        .values((
            x::group_name.eq(group),
            x::url.eq(url),
            x::gone_at.eq(now),
            x::reason.eq(why.reason()),
        ))
        .execute(c)
        .await)?;
    Ok(true)
}

/// Member `url` of `group` is (back) in its group: no longer listed as gone.
async fn back(conn: &mut Conn, group: &str, url: &str) -> Result<(), StoreError> {
    with_conn!(conn, |c| diesel::delete(
        x::ax_member_gone
            .filter(x::group_name.eq(group))
            .filter(x::url.eq(url))
    )
    .execute(c)
    .await)?;
    Ok(())
}

/// The members gone from every group or from one since `since`, by group and newest first.
pub async fn gone(
    conn: &mut Conn,
    group: Option<&str>,
    since: NaiveDateTime,
) -> Result<Vec<GoneRow>, StoreError> {
    Ok(with_conn!(conn, |c| {
        let mut query = x::ax_member_gone
            .filter(x::gone_at.ge(since))
            .order((x::group_name, x::gone_at.desc()))
            .select(GoneRow::as_select())
            .into_boxed();
        if let Some(group) = group {
            query = query.filter(x::group_name.eq(group));
        }
        query.load(c).await
    })?)
}

/// Drops the registered members last heard from before `before`, each noted gone and with a
/// `MEMBER_UNHEALTHY` alert event in the same transaction; answers how many. Of processes
/// dropping at once, the one whose delete takes a member records its event. Gone members
/// listed longer than [`GONE_SHOWN_SECS`] are forgotten.
pub async fn expire(
    conn: &mut Conn,
    before: NaiveDateTime,
    now: NaiveDateTime,
) -> Result<usize, StoreError> {
    let forgotten = now - chrono::Duration::seconds(GONE_SHOWN_SECS);
    with_conn!(conn, |c| diesel::delete(
        x::ax_member_gone.filter(x::gone_at.lt(forgotten))
    )
    .execute(c)
    .await)?;
    let stale: Vec<(String, String)> = with_conn!(conn, |c| m::ax_executor_member
        .filter(m::last_seen_at.lt(before))
        .select((m::group_name, m::url))
        .load(c)
        .await)?;
    if stale.is_empty() {
        return Ok(0);
    }
    conn.transaction(move |conn| {
        Box::pin(async move {
            let mut gone = 0;
            for (group, url) in stale {
                let member = (group.as_str(), url.as_str());
                if remove_member(conn, member, Gone::Expired, now, before).await? {
                    gone += 1;
                    let why = "not heard from within the member TTL; dropped from its group";
                    let (subject, at) = (member_subject(&group, &url), from_db(now));
                    alerts::record(
                        conn,
                        &subject,
                        AlertEvent::MemberUnhealthy,
                        Some(why.into()),
                        at,
                    )
                    .await?;
                }
            }
            Ok(gone)
        })
    })
    .await
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
pub async fn group(conn: &mut Conn, name: &str) -> Result<Option<GroupRow>, StoreError> {
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
    group: Option<&str>,
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
pub async fn delete_group(conn: &mut Conn, name: &str) -> Result<bool, StoreError> {
    let name = name.to_string();
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
pub async fn tasks_using(conn: &mut Conn, name: &str) -> Result<Vec<String>, StoreError> {
    let rows: Vec<(String, String, Option<TaskExecutor>)> = with_conn!(conn, |c| t::ax_task
        .filter(t::executor.is_not_null())
        .order(t::id)
        .select((t::scene, t::name, t::executor))
        .load(c)
        .await)?;
    Ok(rows
        .into_iter()
        .filter(|(_, _, executor)| executor.as_ref().is_some_and(|e| e.group == name))
        .map(|(scene, task, _)| format!("{scene}/{task}"))
        .collect())
}

/// A member's shared health, as stored.
#[derive(Debug, Clone, PartialEq, Eq, Queryable, Selectable, Insertable)]
#[diesel(table_name = crate::rows::schema::ax_member_health)]
#[diesel(check_for_backend(diesel::mysql::Mysql, diesel::sqlite::Sqlite))]
pub struct HealthRow {
    pub url: String,
    /// Set while it is set aside.
    pub unhealthy_until: Option<NaiveDateTime>,
    pub last_failure_at: Option<NaiveDateTime>,
    pub last_error: Option<String>,
    pub changed_at: NaiveDateTime,
}

/// Every member's shared health.
pub async fn health(conn: &mut Conn) -> Result<Vec<HealthRow>, StoreError> {
    Ok(with_conn!(conn, |c| h::ax_member_health
        .select(HealthRow::as_select())
        .load(c)
        .await)?)
}

/// Writes what a process learnt of a member's health. `state`: its state changed, and the row
/// takes it unless a later change is already there; else only its last failure is noted
/// (never moving it back in time). A row another process inserts meanwhile is left as it is.
pub async fn share_health(conn: &mut Conn, row: HealthRow, state: bool) -> Result<(), StoreError> {
    let member = h::ax_member_health.filter(h::url.eq(&row.url));
    let updated = if state {
        with_conn!(conn, |c| diesel::update(
            member.filter(h::changed_at.le(row.changed_at))
        )
        .set((
            h::unhealthy_until.eq(row.unhealthy_until),
            h::last_failure_at.eq(row.last_failure_at),
            h::last_error.eq(&row.last_error),
            h::changed_at.eq(row.changed_at),
        ))
        .execute(c)
        .await)?
    } else {
        let earlier = h::last_failure_at
            .is_null()
            .or(h::last_failure_at.lt(row.last_failure_at));
        with_conn!(conn, |c| diesel::update(member.filter(earlier))
            .set((
                h::last_failure_at.eq(row.last_failure_at),
                h::last_error.eq(&row.last_error),
            ))
            .execute(c)
            .await)?
    };
    if updated > 0 {
        return Ok(());
    }
    let exists: i64 = with_conn!(conn, |c| h::ax_member_health
        .filter(h::url.eq(&row.url))
        .count()
        .get_result(c)
        .await)?;
    if exists > 0 {
        return Ok(());
    }
    let inserted = with_conn!(conn, |c| diesel::insert_into(h::ax_member_health)
        .values(&row)
        .execute(c)
        .await);
    match inserted.map_err(StoreError::from) {
        Err(err) if err.is_unique_violation() => Ok(()),
        other => other.map(drop),
    }
}
