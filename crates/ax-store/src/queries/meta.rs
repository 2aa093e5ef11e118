//! Settings ax keeps in its own database.

use chrono::{DateTime, NaiveDateTime, Utc};
use diesel::dsl::sql;
use diesel::prelude::*;
use diesel::result::Error as DieselError;
use diesel::sql_types::Timestamp;
use diesel_async::{RunQueryDsl, SimpleAsyncConnection};

use crate::rows::schema::ax_meta::dsl as m;
use crate::{from_db, Conn, StoreError};
use crate::{server_or_sqlite, with_conn};

const SIGNING_SECRET: &str = "signing_secret";
/// The key of a host's default instance id; the host name follows it.
const INSTANCE_ID_OF: &str = "instance_id:";
/// `ax_meta.name` holds at most 64 characters.
const MAX_NAME_CHARS: usize = 64;

/// The signing secret every ax process on this database shares: the stored one, or
/// `generated` stored now.
pub async fn signing_secret(conn: &mut Conn, generated: String) -> Result<String, StoreError> {
    stored_or_insert(conn, SIGNING_SECRET, generated).await
}

/// The default instance id of the host `host`: the stored one, or `generated` stored now.
/// A host name too long for the key is cut; two hosts that then share a key share an id, and
/// the second to start is refused while the first runs (see `ax_server::cluster::identity`).
pub async fn instance_id_of(
    conn: &mut Conn,
    host: &str,
    generated: String,
) -> Result<String, StoreError> {
    let name: String = format!("{INSTANCE_ID_OF}{host}")
        .chars()
        .take(MAX_NAME_CHARS)
        .collect();
    stored_or_insert(conn, &name, generated).await
}

/// The row that serialises changes of the dependency graph.
const DEPENDENCY_GRAPH: &str = "dependency_graph";

/// Locks the dependency graph for the rest of the caller's transaction, so that two changes
/// cannot each close half of a cycle. SQLite's `BEGIN IMMEDIATE` already holds its only write
/// lock; a database server locks one `ax_meta` row.
pub async fn lock_dependency_graph(conn: &mut Conn) -> Result<(), StoreError> {
    let locked: Option<String> = server_or_sqlite!(
        conn,
        |c| m::ax_meta
            .filter(m::name.eq(DEPENDENCY_GRAPH))
            .select(m::value)
            .for_update()
            .first(c)
            .await
            .optional()?,
        |_c| return Ok(())
    );
    if locked.is_none() {
        stored_or_insert(conn, DEPENDENCY_GRAPH, String::new()).await?;
        return Box::pin(lock_dependency_graph(conn)).await;
    }
    Ok(())
}

/// The database's clock: the cluster's reference clock, which every process checks its own
/// against.
pub async fn reference_time(conn: &mut Conn) -> Result<DateTime<Utc>, StoreError> {
    let now: NaiveDateTime = match conn {
        Conn::Mysql(c) => {
            diesel::select(sql::<Timestamp>("UTC_TIMESTAMP(6)"))
                .get_result(&mut **c)
                .await?
        }
        Conn::Postgres(c) => {
            diesel::select(sql::<Timestamp>("clock_timestamp() AT TIME ZONE 'utc'"))
                .get_result(&mut ***c)
                .await?
        }
        Conn::Sqlite(c, _) => {
            diesel::select(sql::<Timestamp>("strftime('%Y-%m-%d %H:%M:%f', 'now')"))
                .get_result(&mut **c)
                .await?
        }
    };
    Ok(from_db(now))
}

/// Whether the database answers: the cheapest statement there is.
pub async fn ping(conn: &mut Conn) -> Result<(), StoreError> {
    with_conn!(conn, |c| c.batch_execute("SELECT 1").await)?;
    Ok(())
}

/// The value stored under `name`, or `generated` stored now (if two processes race, the first
/// insert wins and both read it).
async fn stored_or_insert(
    conn: &mut Conn,
    name: &str,
    generated: String,
) -> Result<String, StoreError> {
    if let Some(value) = read(conn, name).await? {
        return Ok(value);
    }
    // Of two processes storing one, the first one's stays (a failed insert would end a
    // PostgreSQL transaction).
    with_conn!(conn, |c| diesel::insert_into(m::ax_meta)
        .values((m::name.eq(name), m::value.eq(&generated)))
        .on_conflict_do_nothing()
        .execute(c)
        .await)?;
    read(conn, name)
        .await?
        .ok_or(StoreError::Query(DieselError::NotFound))
}

async fn read(conn: &mut Conn, name: &str) -> Result<Option<String>, StoreError> {
    Ok(with_conn!(conn, |c| m::ax_meta
        .filter(m::name.eq(name))
        .select(m::value)
        .first(c)
        .await
        .optional())?)
}
