//! Leases: rows that say who holds a name until when, for MariaDB Galera Cluster, which does
//! not replicate `GET_LOCK` (a named lock is one node's alone there). A lease is taken when
//! free, expired or already its holder's, renewed by its holder before it expires, and deleted on a clean stop; a holder that died leaves it to expire. Times are the
//! server's (`UTC_TIMESTAMP`), so the processes' clocks do not matter.
//!
//! The statements are built here once and run by the async code (the instance id's keeper)
//! and by the synchronous migration harness alike.

use std::time::Duration;

use diesel::mysql::Mysql;
use diesel::query_builder::{BoxedSqlQuery, SqlQuery};
use diesel::sql_types::{BigInt, Text};
use diesel::QueryableByName;
use diesel_async::{AsyncMysqlConnection, RunQueryDsl};

use crate::StoreError;

/// A lease statement, for either kind of connection.
pub type LeaseQuery = BoxedSqlQuery<'static, Mysql, SqlQuery>;

/// Takes the lease `name` for `holder` for `ttl` from now, or renews it: only if nobody holds
/// it, its holder's time is up, or `holder` holds it already. Otherwise it changes nothing;
/// [`held_by`] tells which it was. (MySQL applies the assignments left to right: the second
/// sees the holder the first left.)
pub fn take(name: &str, holder: &str, ttl: Duration) -> LeaseQuery {
    diesel::sql_query(
        "INSERT INTO ax_lease (name, holder, expires_at) \
         VALUES (?, ?, UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND) \
         ON DUPLICATE KEY UPDATE \
         holder = IF(holder = VALUES(holder) OR expires_at < UTC_TIMESTAMP(6), \
                     VALUES(holder), holder), \
         expires_at = IF(holder = VALUES(holder), VALUES(expires_at), expires_at)",
    )
    .into_boxed()
    .bind::<Text, _>(name.to_string())
    .bind::<Text, _>(holder.to_string())
    .bind::<BigInt, _>(ttl.as_micros() as i64)
}

/// Whether `holder` holds the lease `name` now: reads a [`Held`].
pub fn held_by(name: &str, holder: &str) -> LeaseQuery {
    diesel::sql_query(
        "SELECT COUNT(*) AS held FROM ax_lease \
         WHERE name = ? AND holder = ? AND expires_at > UTC_TIMESTAMP(6)",
    )
    .into_boxed()
    .bind::<Text, _>(name.to_string())
    .bind::<Text, _>(holder.to_string())
}

/// Gives the lease `name` up, if `holder` has it.
pub fn release(name: &str, holder: &str) -> LeaseQuery {
    diesel::sql_query("DELETE FROM ax_lease WHERE name = ? AND holder = ?")
        .into_boxed()
        .bind::<Text, _>(name.to_string())
        .bind::<Text, _>(holder.to_string())
}

/// The answer of [`held_by`].
#[derive(QueryableByName)]
pub struct Held {
    #[diesel(sql_type = BigInt)]
    pub held: i64,
}

/// Takes or renews the lease `name` for `holder` (see [`take`]); whether `holder` has it.
pub async fn hold(
    conn: &mut AsyncMysqlConnection,
    name: &str,
    holder: &str,
    ttl: Duration,
) -> Result<bool, StoreError> {
    take(name, holder, ttl).execute(conn).await?;
    let held: Held = held_by(name, holder).get_result(conn).await?;
    Ok(held.held > 0)
}

/// Gives the lease `name` up, if `holder` has it.
pub async fn give_up(
    conn: &mut AsyncMysqlConnection,
    name: &str,
    holder: &str,
) -> Result<(), StoreError> {
    release(name, holder).execute(conn).await?;
    Ok(())
}
