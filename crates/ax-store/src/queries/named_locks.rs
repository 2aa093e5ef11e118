//! MySQL/MariaDB named locks (`GET_LOCK`), each on a connection of its own outside the pool: the
//! server frees a lock when its connection dies, which is what an instance id's lock needs.

use std::time::Duration;

use diesel::sql_types::{BigInt, Nullable, Text};
use diesel::QueryableByName;
use diesel_async::{AsyncMysqlConnection, RunQueryDsl};

use crate::StoreError;

/// How taking a named lock went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Taken {
    Yes,
    /// Another connection held it for the whole wait.
    InUse,
    /// The server could not take it (out of memory, a killed thread).
    Failed,
}

#[derive(QueryableByName)]
struct LockName {
    #[diesel(sql_type = Text)]
    name: String,
}

#[derive(QueryableByName)]
struct Locked {
    #[diesel(sql_type = Nullable<BigInt>)]
    locked: Option<i64>,
}

/// The lock name of instance id `id`. Lock names are global to the server, so the name covers
/// the database too (hashed: a name has at most 64 characters).
pub async fn name_of(conn: &mut AsyncMysqlConnection, id: &str) -> Result<String, StoreError> {
    let row = diesel::sql_query(
        "SELECT CONCAT('ax_instance:', SHA1(CONCAT(DATABASE(), '/', ?))) AS name",
    )
    .bind::<Text, _>(id)
    .get_result::<LockName>(conn)
    .await?;
    Ok(row.name)
}

/// Takes the lock `name`, waiting up to `wait` for its holder to let it go.
pub async fn take(
    conn: &mut AsyncMysqlConnection,
    name: &str,
    wait: Duration,
) -> Result<Taken, StoreError> {
    let waited = diesel::sql_query("SELECT GET_LOCK(?, ?) AS locked")
        .bind::<Text, _>(name)
        .bind::<BigInt, _>(wait.as_secs() as i64)
        .get_result::<Locked>(conn)
        .await?;
    Ok(match waited.locked {
        Some(1) => Taken::Yes,
        Some(_) => Taken::InUse,
        None => Taken::Failed,
    })
}

/// Whether this connection holds the lock `name`, taking it if it is free.
pub async fn still_held(conn: &mut AsyncMysqlConnection, name: &str) -> Result<bool, StoreError> {
    let locked = diesel::sql_query(
        "SELECT IF(IS_USED_LOCK(?) <=> CONNECTION_ID(), 1, GET_LOCK(?, 0)) AS locked",
    )
    .bind::<Text, _>(name)
    .bind::<Text, _>(name)
    .get_result::<Locked>(conn)
    .await?;
    Ok(locked.locked == Some(1))
}

/// Releases the lock `name` held by this connection.
pub async fn release(conn: &mut AsyncMysqlConnection, name: &str) -> Result<(), StoreError> {
    diesel::sql_query("SELECT RELEASE_LOCK(?) AS locked")
        .bind::<Text, _>(name)
        .get_result::<Locked>(conn)
        .await?;
    Ok(())
}
