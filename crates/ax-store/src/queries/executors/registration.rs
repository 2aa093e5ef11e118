//! Members that register themselves: joining, renewing (a heartbeat), unregistering, and who
//! may act on which member.

use ax_core::ids::GroupName;
use chrono::NaiveDateTime;
use diesel::prelude::*;
use diesel_async::RunQueryDsl;

use super::gone::{back, remove_member, Gone};
use super::groups::{ensure_group, insert_member, GroupSettings};
use crate::queries::alerts;
use crate::rows::schema::ax_executor_member::dsl as m;
use crate::with_conn;
use crate::{from_db, Conn, StoreError};
use ax_core::alerting::{member_subject, AlertEvent};

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
    pub group: &'a GroupName,
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
        joining.group.clone(),
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
async fn holder(
    conn: &mut Conn,
    group: &GroupName,
    url: &str,
) -> Result<Option<Holder>, StoreError> {
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
    group: &GroupName,
    url: &str,
    by: Registrant<'_>,
    now: NaiveDateTime,
) -> Result<Unregistered, StoreError> {
    let (group, url, token) = (group.clone(), url.to_string(), by.token.to_string());
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
