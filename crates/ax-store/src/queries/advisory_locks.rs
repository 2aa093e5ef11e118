//! PostgreSQL advisory locks: a session's, each on a connection of its own outside the pool,
//! which the server frees when the session ends, as an instance id's lock needs (the PostgreSQL
//! form of `named_locks`); and a transaction's, which its commit frees.

use std::time::{Duration, Instant};

use diesel::sql_types::{BigInt, Bool, Text};
use diesel::QueryableByName;
use diesel_async::{AsyncPgConnection, RunQueryDsl};

use super::named_locks::Taken;
use crate::StoreError;

/// How often a wait for a held lock tries again.
const TRY_INTERVAL: Duration = Duration::from_millis(100);

#[derive(QueryableByName)]
struct Key {
    #[diesel(sql_type = BigInt)]
    key: i64,
}

#[derive(QueryableByName)]
struct Locked {
    #[diesel(sql_type = Bool)]
    locked: bool,
}

/// The lock key of instance id `id`. Advisory locks are global to the server, so the key
/// covers the database too.
pub async fn key_of(conn: &mut AsyncPgConnection, id: &str) -> Result<i64, StoreError> {
    let row = diesel::sql_query(
        "SELECT hashtextextended('ax_instance:' || current_database() || '/' || $1, 0) AS key",
    )
    .bind::<Text, _>(id)
    .get_result::<Key>(conn)
    .await?;
    Ok(row.key)
}

/// Takes the lock `key`, waiting up to `wait` for its holder to let it go.
pub async fn take(
    conn: &mut AsyncPgConnection,
    key: i64,
    wait: Duration,
) -> Result<Taken, StoreError> {
    let deadline = Instant::now() + wait;
    loop {
        let taken = diesel::sql_query("SELECT pg_try_advisory_lock($1) AS locked")
            .bind::<BigInt, _>(key)
            .get_result::<Locked>(conn)
            .await?;
        if taken.locked {
            return Ok(Taken::Yes);
        }
        if Instant::now() >= deadline {
            return Ok(Taken::InUse);
        }
        tokio::time::sleep(TRY_INTERVAL).await;
    }
}

/// Whether this session holds the lock `key`, taking it if it is free. Taking a lock twice
/// would need two unlocks: it is taken only when the session does not hold it already.
pub async fn still_held(conn: &mut AsyncPgConnection, key: i64) -> Result<bool, StoreError> {
    let locked = diesel::sql_query(
        "SELECT CASE WHEN EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' \
         AND pid = pg_backend_pid() AND granted AND objsubid = 1 \
         AND ((classid::bigint << 32) | objid::bigint) = $1) \
         THEN true ELSE pg_try_advisory_lock($1) END AS locked",
    )
    .bind::<BigInt, _>(key)
    .get_result::<Locked>(conn)
    .await?;
    Ok(locked.locked)
}

/// Releases the lock `key` held by this session.
pub async fn release(conn: &mut AsyncPgConnection, key: i64) -> Result<(), StoreError> {
    diesel::sql_query("SELECT pg_advisory_unlock($1) AS locked")
        .bind::<BigInt, _>(key)
        .get_result::<Locked>(conn)
        .await?;
    Ok(())
}

/// Takes the lock named `name` for the rest of the transaction if no other transaction holds
/// it; whether it did.
pub async fn try_for_transaction(
    conn: &mut AsyncPgConnection,
    name: &str,
) -> Result<bool, StoreError> {
    let taken = diesel::sql_query("SELECT pg_try_advisory_xact_lock(hashtext($1)) AS locked")
        .bind::<Text, _>(name)
        .get_result::<Locked>(conn)
        .await?;
    Ok(taken.locked)
}
