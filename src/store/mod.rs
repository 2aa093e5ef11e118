//! Durable state: one source of queries for SQLite (embedded default) and MySQL/MariaDB.
//!
//! `Db` is an enum of pools; `with_conn!` expands one query body per backend, so every query
//! is written once and type-checked against both real backends.

mod migrate;
pub mod models;
pub mod queries;
pub mod schema;

pub use migrate::run_migrations;

use std::future::Future;
use std::pin::Pin;

use chrono::{DateTime, NaiveDateTime, Timelike, Utc};
use diesel::SqliteConnection;
use diesel_async::pooled_connection::bb8::{Pool, PooledConnection};
use diesel_async::pooled_connection::{AsyncDieselConnectionManager, ManagerConfig};
use diesel_async::sync_connection_wrapper::SyncConnectionWrapper;
use diesel_async::{AsyncConnection, AsyncMysqlConnection, SimpleAsyncConnection};
use futures_util::FutureExt;

/// The async SQLite connection: diesel's sync connection run on blocking threads.
pub type SqliteConn = SyncConnectionWrapper<SqliteConnection>;

/// SQLite settings applied to every connection: WAL so readers never block the writer, a busy
/// timeout so concurrent writers wait instead of failing, and full sync so a committed run
/// survives a crash.
const SQLITE_PRAGMAS: &str = "PRAGMA journal_mode = WAL; PRAGMA busy_timeout = 10000; \
     PRAGMA synchronous = FULL; PRAGMA foreign_keys = ON;";

/// Errors of the storage layer.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("unsupported store URL `{0}`: use sqlite://PATH or mysql://user:pass@host:port/db")]
    BadUrl(String),
    #[error("cannot connect to the store: {0}")]
    Connect(String),
    #[error("migration failed: {0}")]
    Migration(String),
    #[error("no database connection available: {0}")]
    Pool(String),
    #[error("database error: {0}")]
    Query(#[from] diesel::result::Error),
    #[error("the write was not committed: {0}")]
    Commit(String),
}

impl StoreError {
    /// The database could not be reached (no connection, or it broke), as opposed to a
    /// statement it refused: the same write may pass once it is back.
    pub fn is_unreachable(&self) -> bool {
        use diesel::result::{DatabaseErrorKind, Error};
        match self {
            StoreError::Pool(_) | StoreError::Connect(_) => true,
            StoreError::Query(Error::DatabaseError(kind, _)) => matches!(
                kind,
                DatabaseErrorKind::ClosedConnection | DatabaseErrorKind::UnableToSendCommand
            ),
            _ => false,
        }
    }

    /// The write would give a scene two tasks of one name (`uq_ax_task_scene_name`).
    pub fn is_name_taken(&self) -> bool {
        use diesel::result::{DatabaseErrorKind, Error};
        match self {
            StoreError::Query(Error::DatabaseError(DatabaseErrorKind::UniqueViolation, info)) => {
                let message = info.message();
                // MySQL names the index, SQLite the columns.
                message.contains("uq_ax_task_scene_name") || message.contains("ax_task.scene")
            }
            _ => false,
        }
    }

    /// A failure that rolled the transaction back and may pass on a second try: a deadlock
    /// or lock wait timeout (MySQL: "try restarting transaction"), or a busy SQLite file.
    pub fn is_transient(&self) -> bool {
        match self {
            StoreError::Query(diesel::result::Error::DatabaseError(_, info)) => {
                let message = info.message();
                message.contains("try restarting transaction")
                    || message.contains("database is locked")
            }
            _ => false,
        }
    }
}

impl<E: std::error::Error + 'static> From<bb8::RunError<E>> for StoreError {
    fn from(err: bb8::RunError<E>) -> Self {
        StoreError::Pool(err.to_string())
    }
}

/// Which database a store URL names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreUrl {
    /// A file path for the embedded store.
    Sqlite(String),
    /// A `mysql://` URL, as ax connects to it: over TCP to its host and port, unless it names
    /// a socket itself (`socket=`, or `prefer_socket=true`).
    Mysql(String),
}

impl StoreUrl {
    /// Parses `sqlite://PATH` or `mysql://user:pass@host:port/db`.
    pub fn parse(url: &str) -> Result<Self, StoreError> {
        if let Some(path) = url.strip_prefix("sqlite://") {
            if path.is_empty() {
                return Err(StoreError::BadUrl(url.to_string()));
            }
            Ok(StoreUrl::Sqlite(path.to_string()))
        } else if url.starts_with("mysql://") {
            let parsed = url::Url::parse(url).map_err(|_| StoreError::BadUrl(url.to_string()))?;
            if parsed.host_str().is_none() || database_name(&parsed).is_none() {
                return Err(StoreError::BadUrl(url.to_string()));
            }
            Ok(StoreUrl::Mysql(tcp_unless_socket(parsed)))
        } else {
            Err(StoreError::BadUrl(url.to_string()))
        }
    }
}

/// Adds `prefer_socket=false` unless the URL chooses `socket` or `prefer_socket` itself.
///
/// mysql_async prefers a socket by default: after connecting over TCP it asks the server for
/// its socket path and, when that path exists here, reconnects through it. A local server
/// reached through a proxy, tunnel or port forward would then be talked to past the address
/// the URL names, so ax connects exactly where the URL says.
fn tcp_unless_socket(mut url: url::Url) -> String {
    let chosen = url
        .query_pairs()
        .any(|(key, _)| key == "socket" || key == "prefer_socket");
    if !chosen {
        url.query_pairs_mut().append_pair("prefer_socket", "false");
    }
    url.into()
}

fn database_name(url: &url::Url) -> Option<String> {
    let name = url.path().trim_start_matches('/');
    (!name.is_empty()).then(|| name.to_string())
}

/// A pool of connections to one backend.
#[derive(Clone)]
pub enum Db {
    Mysql(Pool<AsyncMysqlConnection>),
    Sqlite(Pool<SqliteConn>),
}

/// One connection taken from a `Db` pool.
pub enum Conn {
    Mysql(PooledConnection<'static, AsyncMysqlConnection>),
    Sqlite(PooledConnection<'static, SqliteConn>),
}

/// Runs one query body against whichever backend `conn` is, binding `$c` to the concrete
/// connection so the body is type-checked for each backend.
#[macro_export]
macro_rules! with_conn {
    ($conn:expr, |$c:ident| $body:expr) => {
        match $conn {
            $crate::store::Conn::Mysql(pooled) => {
                let $c: &mut diesel_async::AsyncMysqlConnection = &mut *pooled;
                $body
            }
            $crate::store::Conn::Sqlite(pooled) => {
                let $c: &mut $crate::store::SqliteConn = &mut *pooled;
                $body
            }
        }
    };
}

/// A boxed future borrowing a connection, as taken by [`Conn::transaction`].
pub type ConnFuture<'c, T> = Pin<Box<dyn Future<Output = Result<T, StoreError>> + Send + 'c>>;

impl Conn {
    /// Runs `body` in one transaction: committed if it returns `Ok`, rolled back otherwise.
    /// SQLite takes the write lock up front (`BEGIN IMMEDIATE`) so that a transaction never
    /// fails half-way for want of it.
    pub async fn transaction<T, F>(&mut self, body: F) -> Result<T, StoreError>
    where
        F: for<'c> FnOnce(&'c mut Conn) -> ConnFuture<'c, T>,
    {
        self.begin().await?;
        match body(self).await {
            Ok(value) => {
                self.commit().await?;
                Ok(value)
            }
            Err(err) => {
                if let Err(rollback) = self.rollback().await {
                    log::warn!("rollback failed after `{err}`: {rollback}");
                }
                Err(err)
            }
        }
    }

    async fn begin(&mut self) -> Result<(), StoreError> {
        let sql = match self {
            Conn::Mysql(_) => "BEGIN",
            Conn::Sqlite(_) => "BEGIN IMMEDIATE",
        };
        self.execute(sql).await
    }

    async fn commit(&mut self) -> Result<(), StoreError> {
        self.execute("COMMIT").await
    }

    async fn rollback(&mut self) -> Result<(), StoreError> {
        self.execute("ROLLBACK").await
    }

    async fn execute(&mut self, sql: &str) -> Result<(), StoreError> {
        with_conn!(self, |c| c.batch_execute(sql).await)?;
        Ok(())
    }
}

impl Db {
    /// Connects to the store named by `url`, creating the SQLite file (and its folder) or the
    /// MySQL database when missing, and applies pending migrations.
    pub async fn connect(url: &str, pool_size: u32) -> Result<Db, StoreError> {
        let parsed = StoreUrl::parse(url)?;
        run_migrations(parsed.clone()).await?;
        let db = match parsed {
            StoreUrl::Mysql(url) => {
                let mut config = ManagerConfig::default();
                config.custom_setup = Box::new(|url| establish_mysql(url.to_string()).boxed());
                let manager = AsyncDieselConnectionManager::<AsyncMysqlConnection>::new_with_config(
                    url, config,
                );
                Db::Mysql(
                    pool_builder(pool_size)
                        .build(manager)
                        .await
                        .map_err(connect_error)?,
                )
            }
            StoreUrl::Sqlite(path) => {
                let mut config = ManagerConfig::default();
                config.custom_setup = Box::new(|path| establish_sqlite(path.to_string()).boxed());
                let manager =
                    AsyncDieselConnectionManager::<SqliteConn>::new_with_config(path, config);
                Db::Sqlite(
                    pool_builder(pool_size)
                        .build(manager)
                        .await
                        .map_err(connect_error)?,
                )
            }
        };
        // Fail at start-up, not at the first request, when the store is unreachable.
        db.conn().await?;
        Ok(db)
    }

    /// Takes a connection from the pool.
    pub async fn conn(&self) -> Result<Conn, StoreError> {
        Ok(match self {
            Db::Mysql(pool) => Conn::Mysql(pool.get_owned().await?),
            Db::Sqlite(pool) => Conn::Sqlite(pool.get_owned().await?),
        })
    }

    /// The backend's name, for logs.
    pub fn backend(&self) -> &'static str {
        match self {
            Db::Mysql(_) => "mysql",
            Db::Sqlite(_) => "sqlite",
        }
    }
}

fn pool_builder<M: bb8::ManageConnection>(size: u32) -> bb8::Builder<M> {
    bb8::Pool::builder()
        .max_size(size.max(1))
        .connection_timeout(std::time::Duration::from_secs(10))
}

fn connect_error(err: impl std::fmt::Display) -> StoreError {
    StoreError::Connect(err.to_string())
}

/// MySQL sessions read committed data: ax's writes are guarded by row locks and
/// compare-and-set, so REPEATABLE READ's gap locks would only add deadlocks between
/// concurrent batches.
async fn establish_mysql(url: String) -> diesel::ConnectionResult<AsyncMysqlConnection> {
    let mut conn = AsyncMysqlConnection::establish(&url).await?;
    conn.batch_execute("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED")
        .await
        .map_err(diesel::ConnectionError::CouldntSetupConfiguration)?;
    Ok(conn)
}

async fn establish_sqlite(path: String) -> diesel::ConnectionResult<SqliteConn> {
    let mut conn = SqliteConn::establish(&path).await?;
    conn.batch_execute(SQLITE_PRAGMAS)
        .await
        .map_err(diesel::ConnectionError::CouldntSetupConfiguration)?;
    Ok(conn)
}

/// A store URL fit to print: its password, if any, replaced by `***`.
pub fn redacted(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(mut parsed) if parsed.password().is_some() => {
            let _ = parsed.set_password(Some("***"));
            parsed.to_string()
        }
        _ => url.to_string(),
    }
}

/// A time as stored: UTC, truncated to milliseconds (MySQL `DATETIME(3)` would round the rest,
/// and compare-and-set on `next_run_at` needs the exact stored value).
pub fn to_db(time: DateTime<Utc>) -> NaiveDateTime {
    let naive = time.naive_utc();
    let millis = naive.nanosecond() / 1_000_000 * 1_000_000;
    naive.with_nanosecond(millis).unwrap_or(naive)
}

/// A stored time, read back as UTC.
pub fn from_db(time: NaiveDateTime) -> DateTime<Utc> {
    time.and_utc()
}

#[cfg(test)]
mod tests {
    use super::*;
    use diesel::result::{DatabaseErrorKind, Error};

    fn database_error(message: &str) -> StoreError {
        StoreError::Query(Error::DatabaseError(
            DatabaseErrorKind::Unknown,
            Box::new(message.to_string()),
        ))
    }

    fn mysql_url(url: &str) -> String {
        match StoreUrl::parse(url) {
            Ok(StoreUrl::Mysql(url)) => url,
            other => panic!("{url}: {other:?}"),
        }
    }

    #[test]
    fn mysql_urls_connect_over_tcp_unless_they_choose() {
        assert_eq!(
            mysql_url("mysql://root@127.0.0.1:3307/ax"),
            "mysql://root@127.0.0.1:3307/ax?prefer_socket=false"
        );
        assert_eq!(
            mysql_url("mysql://u:p%40ss@db.example:3306/ax?pool_min=1"),
            "mysql://u:p%40ss@db.example:3306/ax?pool_min=1&prefer_socket=false"
        );
        for chosen in [
            "mysql://root@localhost/ax?socket=%2Frun%2Fmysqld%2Fmysqld.sock",
            "mysql://root@127.0.0.1:3306/ax?prefer_socket=true",
            "mysql://root@127.0.0.1:3306/ax?prefer_socket=false",
        ] {
            assert_eq!(mysql_url(chosen), chosen);
        }
    }

    #[test]
    fn printed_store_urls_hide_the_password() {
        assert_eq!(
            redacted("mysql://ax:s3cret@db:3306/ax"),
            "mysql://ax:***@db:3306/ax"
        );
        assert_eq!(redacted("sqlite://ax.db"), "sqlite://ax.db");
        assert_eq!(redacted("mysql://root@db/ax"), "mysql://root@db/ax");
    }

    #[test]
    fn deadlocks_and_busy_locks_are_transient() {
        for message in [
            "Deadlock found when trying to get lock; try restarting transaction",
            "Lock wait timeout exceeded; try restarting transaction",
            "database is locked",
        ] {
            assert!(database_error(message).is_transient(), "{message}");
        }
        assert!(!database_error("Duplicate entry 'x' for key 'uq'").is_transient());
        assert!(!StoreError::Pool("timed out".into()).is_transient());
    }
}
