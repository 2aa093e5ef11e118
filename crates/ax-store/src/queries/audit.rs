//! The audit log: entries appended, and read newest first a page at a time.

use chrono::{DateTime, NaiveDateTime, Utc};
use diesel::prelude::*;
use diesel_async::RunQueryDsl;

use crate::rows::models::{AuditAction, Entry};
use crate::rows::schema::ax_audit::dsl as a;
use crate::with_conn;
use crate::{to_db, Conn, StoreError};

/// An entry as stored.
#[derive(Debug, Clone, Queryable)]
pub struct AuditRow {
    pub id: i64,
    pub at: NaiveDateTime,
    pub actor: String,
    pub action: AuditAction,
    pub target: String,
    pub summary: String,
}

/// Appends an entry at `at`.
pub async fn record(conn: &mut Conn, at: DateTime<Utc>, entry: &Entry) -> Result<(), StoreError> {
    with_conn!(conn, |c| diesel::insert_into(a::ax_audit)
        .values((
            a::at.eq(to_db(at)),
            a::actor.eq(&entry.actor),
            a::action.eq(entry.action),
            a::target.eq(&entry.target),
            a::summary.eq(&entry.summary),
        ))
        .execute(c)
        .await)?;
    Ok(())
}

/// Up to `limit` entries older than the entry `before` (all when `None`), newest first.
pub async fn list(
    conn: &mut Conn,
    before: Option<i64>,
    limit: i64,
) -> Result<Vec<AuditRow>, StoreError> {
    Ok(with_conn!(conn, |c| {
        let mut query = a::ax_audit.into_boxed();
        if let Some(id) = before {
            query = query.filter(a::id.lt(id));
        }
        query
            .order(a::id.desc())
            .limit(limit)
            .select((a::id, a::at, a::actor, a::action, a::target, a::summary))
            .load(c)
            .await
    })?)
}
