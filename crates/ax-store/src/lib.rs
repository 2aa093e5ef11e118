//! Durable state: one source of queries for SQLite (embedded default), MySQL/MariaDB and
//! PostgreSQL.
//!
//! `Db` is an enum of pools; `with_conn!` expands one query body per backend, so every query
//! is written once and type-checked against every real backend.

pub mod copy;
pub mod pool;
pub mod queries;
pub mod rows;

pub use pool::backend::{redacted, MysqlHosts, PostgresUrl, StoreUrl};
use pool::backend::{sqlite_pragmas, BUSY_TIMEOUT};
pub use pool::error::StoreError;
pub use pool::hosts::Dialer;
pub use pool::migrate::run_migrations;
use pool::postgres;
pub use pool::write_turns::WriteTurns;
pub use rows::time::{from_db, to_db};

use std::future::Future;
use std::pin::Pin;

use diesel::SqliteConnection;
use diesel_async::pooled_connection::bb8::{Pool, PooledConnection};
use diesel_async::pooled_connection::{
    AsyncDieselConnectionManager, ManagerConfig, RecyclingMethod,
};
use diesel_async::sync_connection_wrapper::SyncConnectionWrapper;
use diesel_async::{
    AsyncConnection, AsyncMysqlConnection, AsyncPgConnection, SimpleAsyncConnection,
};
use futures_util::FutureExt;

/// The async SQLite connection: diesel's sync connection run on blocking threads.
pub type SqliteConn = SyncConnectionWrapper<SqliteConnection>;

/// A pool of connections to one backend; SQLite's with the turns of its one writer.
#[derive(Clone)]
pub enum Db {
    Mysql(Pool<AsyncMysqlConnection>),
    Postgres(Pool<AsyncPgConnection>),
    Sqlite(Pool<SqliteConn>, WriteTurns),
}

/// One connection taken from a `Db` pool.
pub enum Conn {
    Mysql(PooledConnection<'static, AsyncMysqlConnection>),
    /// Boxed: a PostgreSQL connection is three times a MySQL one's size.
    Postgres(Box<PooledConnection<'static, AsyncPgConnection>>),
    Sqlite(PooledConnection<'static, SqliteConn>, WriteTurns),
}

/// Runs one query body against whichever backend `conn` is, binding `$c` to the concrete
/// connection so the body is type-checked for each backend.
#[macro_export]
macro_rules! with_conn {
    ($conn:expr, |$c:ident| $body:expr) => {
        match $conn {
            $crate::Conn::Mysql(pooled) => {
                let $c: &mut diesel_async::AsyncMysqlConnection = &mut *pooled;
                $body
            }
            $crate::Conn::Postgres(pooled) => {
                let $c: &mut diesel_async::AsyncPgConnection = &mut **pooled;
                $body
            }
            $crate::Conn::Sqlite(pooled, _) => {
                let $c: &mut $crate::SqliteConn = &mut *pooled;
                $body
            }
        }
    };
}

/// Runs `$server` on MySQL and PostgreSQL and `$sqlite` on SQLite, binding `$c` to the concrete
/// connection: for the statements SQLite takes otherwise (no row locks, one row an insert).
#[macro_export]
macro_rules! server_or_sqlite {
    ($conn:expr, |$c:ident| $server:expr, |$s:ident| $sqlite:expr) => {
        match $conn {
            $crate::Conn::Mysql(pooled) => {
                let $c: &mut diesel_async::AsyncMysqlConnection = &mut *pooled;
                $server
            }
            $crate::Conn::Postgres(pooled) => {
                let $c: &mut diesel_async::AsyncPgConnection = &mut **pooled;
                $server
            }
            $crate::Conn::Sqlite(pooled, _) => {
                let $s: &mut $crate::SqliteConn = &mut *pooled;
                $sqlite
            }
        }
    };
}

/// A boxed future borrowing a connection, as taken by [`Conn::transaction`].
pub type ConnFuture<'c, T> = Pin<Box<dyn Future<Output = Result<T, StoreError>> + Send + 'c>>;

impl Conn {
    /// `sql` with its `?` placeholders as the backend writes them: numbered `$1, $2, …` on
    /// PostgreSQL, the text as it is elsewhere. (ax's SQL texts hold no `?` but placeholders.)
    pub fn binds(&self, sql: String) -> String {
        if !matches!(self, Conn::Postgres(_)) {
            return sql;
        }
        let mut numbered = String::with_capacity(sql.len() + sql.len() / 4);
        let mut next = 0;
        for ch in sql.chars() {
            if ch == '?' {
                next += 1;
                numbered.push('$');
                numbered.push_str(&next.to_string());
            } else {
                numbered.push(ch);
            }
        }
        numbered
    }

    /// Runs `body` in one transaction: committed if it returns `Ok`, rolled back otherwise.
    /// SQLite takes the write lock up front (`BEGIN IMMEDIATE`) so that a transaction never
    /// fails half-way for want of it, once it is this process's turn to write (see
    /// [`WriteTurns`]).
    pub async fn transaction<T, F>(&mut self, body: F) -> Result<T, StoreError>
    where
        F: for<'c> FnOnce(&'c mut Conn) -> ConnFuture<'c, T>,
    {
        let _turn = match self {
            Conn::Mysql(_) | Conn::Postgres(_) => None,
            Conn::Sqlite(_, turns) => Some(turns.take(BUSY_TIMEOUT).await?),
        };
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
            Conn::Mysql(_) | Conn::Postgres(_) => "BEGIN",
            Conn::Sqlite(..) => "BEGIN IMMEDIATE",
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
    /// MySQL or PostgreSQL database when missing, and applies pending migrations.
    pub async fn connect(url: &str, pool_size: u32) -> Result<Db, StoreError> {
        let parsed = StoreUrl::parse(url)?;
        run_migrations(parsed.clone()).await?;
        let db = match parsed {
            StoreUrl::Mysql(hosts) => {
                let dialer = Dialer::new(hosts);
                let first = dialer.current().to_string();
                let mut config = ManagerConfig::default();
                // The manager's URL is the first server's; the dialer picks the one to use.
                config.custom_setup = Box::new(move |_| establish_mysql(dialer.clone()).boxed());
                // Checked on a table, not by `SELECT 1`: a Galera node cut off from its
                // cluster still answers that, and refuses everything else.
                config.recycling_method = RecyclingMethod::CustomQuery(CHECK_QUERY.into());
                let manager = AsyncDieselConnectionManager::<AsyncMysqlConnection>::new_with_config(
                    first, config,
                );
                Db::Mysql(
                    pool_builder(pool_size)
                        .build(manager)
                        .await
                        .map_err(connect_error)?,
                )
            }
            StoreUrl::Postgres(url) => {
                let mut config = ManagerConfig::default();
                let setup = url.clone();
                config.custom_setup = Box::new(move |_| postgres::establish(setup.clone()).boxed());
                config.recycling_method = RecyclingMethod::CustomQuery(CHECK_QUERY.into());
                let manager = AsyncDieselConnectionManager::<AsyncPgConnection>::new_with_config(
                    url.url(),
                    config,
                );
                Db::Postgres(
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
                        // The connection used last is the one whose page cache is still valid:
                        // SQLite empties a connection's cache when another one has written.
                        .queue_strategy(bb8::QueueStrategy::Lifo)
                        .build(manager)
                        .await
                        .map_err(connect_error)?,
                    WriteTurns::default(),
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
            Db::Postgres(pool) => Conn::Postgres(Box::new(pool.get_owned().await?)),
            Db::Sqlite(pool, turns) => Conn::Sqlite(pool.get_owned().await?, turns.clone()),
        })
    }

    /// The backend's name, for logs.
    pub fn backend(&self) -> &'static str {
        match self {
            Db::Mysql(_) => "mysql",
            Db::Postgres(_) => "postgres",
            Db::Sqlite(..) => "sqlite",
        }
    }
}

fn pool_builder<M: bb8::ManageConnection>(size: u32) -> bb8::Builder<M>
where
    M::Error: std::fmt::Display,
{
    bb8::Pool::builder()
        .max_size(size.max(1))
        .connection_timeout(std::time::Duration::from_secs(10))
        .error_sink(Box::new(LogConnectErrors))
}

/// Logs why a connection could not be opened: a caller waiting for one is told only that none
/// came in time, so the cause (refused, too many connections, access denied) is told here.
#[derive(Debug, Clone, Copy)]
struct LogConnectErrors;

impl<E: std::fmt::Display> bb8::ErrorSink<E> for LogConnectErrors {
    fn sink(&self, err: E) {
        log::warn!("cannot open a database connection: {err}");
    }

    fn boxed_clone(&self) -> Box<dyn bb8::ErrorSink<E>> {
        Box::new(*self)
    }
}

fn connect_error(err: impl std::fmt::Display) -> StoreError {
    StoreError::Connect(err.to_string())
}

/// The statement a pooled MySQL or PostgreSQL connection must pass each time it is handed out.
const CHECK_QUERY: &str = "SELECT 1 FROM ax_meta LIMIT 1";

/// MySQL sessions read committed data: ax's writes are guarded by row locks and
/// compare-and-set, so REPEATABLE READ's gap locks would only add deadlocks between
/// concurrent batches.
///
/// A connection goes to whichever server of the URL answers and can serve (see [`Dialer`]);
/// one that broke, or whose Galera node left the cluster, fails the pool's check
/// ([`CHECK_QUERY`]) when next taken (bb8 tests each on check-out) and is replaced.
async fn establish_mysql(dialer: Dialer) -> diesel::ConnectionResult<AsyncMysqlConnection> {
    let mut conn = dialer.connect().await?;
    conn.batch_execute("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED")
        .await
        .map_err(diesel::ConnectionError::CouldntSetupConfiguration)?;
    Ok(conn)
}

async fn establish_sqlite(path: String) -> diesel::ConnectionResult<SqliteConn> {
    let mut conn = SqliteConn::establish(&path).await?;
    conn.batch_execute(&sqlite_pragmas())
        .await
        .map_err(diesel::ConnectionError::CouldntSetupConfiguration)?;
    Ok(conn)
}
