//! Members' health as the ax processes share it.

use chrono::NaiveDateTime;
use diesel::prelude::*;
use diesel_async::RunQueryDsl;

use crate::rows::schema::ax_member_health::dsl as h;
use crate::with_conn;
use crate::{Conn, StoreError};

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
    // Another process may have inserted it meanwhile: its row stands.
    with_conn!(conn, |c| diesel::insert_into(h::ax_member_health)
        .values(&row)
        .on_conflict_do_nothing()
        .execute(c)
        .await)?;
    Ok(())
}
