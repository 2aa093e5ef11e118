//! Members gone from their groups: removed with why, listed as gone for a while, and the
//! registered ones not heard from dropped (with an alert event).

use ax_core::ids::GroupName;
use chrono::NaiveDateTime;
use diesel::prelude::*;
use diesel_async::RunQueryDsl;

use crate::queries::alerts;
use crate::rows::schema::ax_executor_member::dsl as m;
use crate::rows::schema::ax_member_gone::dsl as x;
use crate::with_conn;
use crate::{from_db, Conn, StoreError};
use ax_core::alerting::{member_subject, AlertEvent};

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
    pub group_name: GroupName,
    pub url: String,
    pub gone_at: NaiveDateTime,
    pub reason: String,
}

/// How long a gone member stays listed.
pub const GONE_SHOWN_SECS: i64 = 3600;

/// Deletes member `url` of `group` and notes it gone, with why; answers whether it was there.
/// An expired one is deleted only while it is still last heard from before `before` (a
/// heartbeat may have come meanwhile). Inside the caller's transaction.
pub(super) async fn remove_member(
    conn: &mut Conn,
    (group, url): (&GroupName, &str),
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
pub(super) async fn back(conn: &mut Conn, group: &GroupName, url: &str) -> Result<(), StoreError> {
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
    group: Option<&GroupName>,
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
    let stale: Vec<(GroupName, String)> = with_conn!(conn, |c| m::ax_executor_member
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
                let member = (&group, url.as_str());
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
