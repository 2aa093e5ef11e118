//! The bench's store: a fresh SQLite file or a fresh MariaDB database, prepared with ax's own
//! store layer (so migrations are applied once, before any ax process races to apply them),
//! read back after the run, and dropped at the end.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::Context as _;
use chrono::{DateTime, Utc};
use diesel::dsl::count_star;
use diesel::prelude::*;
use diesel::sql_types::Text;
use diesel_async::RunQueryDsl;

use crate::load::counters::{find_processes, process_cpu_ticks, ServerCounters, Traffic};
use crate::StoreKind;
use ax_core::run::{RunStatus, TaskId};
use ax_store::rows::schema::ax_instance::dsl as i;
use ax_store::rows::schema::ax_task::dsl as t;
use ax_store::with_conn;
use ax_store::{to_db, Db};

/// The MariaDB server of the bench (root, no password, loopback only).
pub const MYSQL_SERVER: &str = "mysql://root@127.0.0.1:3306";
/// The PostgreSQL server `--store postgres` makes its databases on.
pub const POSTGRES_SERVER: &str = "postgres://postgres@127.0.0.1:5432";

/// A store made for one bench run.
pub struct BenchStore {
    pub url: String,
    db: Db,
    /// Dropped with the store.
    _database: Option<BenchDatabase>,
}

impl BenchStore {
    /// Creates the store and applies ax's migrations to it.
    pub async fn create(kind: StoreKind, dir: &Path) -> anyhow::Result<BenchStore> {
        let (url, database) = match kind {
            StoreKind::Sqlite => (format!("sqlite://{}/ax.db", dir.display()), None),
            StoreKind::Mysql | StoreKind::Postgres => {
                let name = format!("ax_bench_{}", uuid::Uuid::new_v4().simple());
                let database = BenchDatabase { kind, name };
                (database.url(), Some(database))
            }
        };
        let db = Db::connect(&url, 2)
            .await
            .with_context(|| format!("cannot prepare the store {url}"))?;
        Ok(BenchStore {
            url,
            db,
            _database: database,
        })
    }

    /// Opens the store of `url` (a MariaDB database is created if missing) and applies ax's
    /// migrations to it; nothing is dropped afterwards (`ax bench chaos` throws its whole
    /// server away).
    pub async fn open(url: &str) -> anyhow::Result<BenchStore> {
        let db = Db::connect(url, 2)
            .await
            .with_context(|| format!("cannot prepare the store {url}"))?;
        Ok(BenchStore {
            url: url.to_string(),
            db,
            _database: None,
        })
    }

    /// Every run row scheduled in `[start, end)`: its task, its scheduled second (Unix) and
    /// its status.
    pub async fn runs_in(
        &self,
        start: DateTime<Utc>,
        end: DateTime<Utc>,
    ) -> anyhow::Result<Vec<(i64, i64, String)>> {
        let (start, end) = (to_db(start), to_db(end));
        let mut conn = self.db.conn().await?;
        let rows: Vec<(TaskId, chrono::NaiveDateTime, String)> = with_conn!(&mut conn, |c| {
            i::ax_instance
                .filter(i::scheduled_at.ge(start))
                .filter(i::scheduled_at.lt(end))
                .select((i::task_id, i::scheduled_at, i::status))
                .load(c)
                .await
        })
        .context("cannot read the runs")?;
        Ok(rows
            .into_iter()
            .map(|(task, at, status)| (task.0, at.and_utc().timestamp(), status))
            .collect())
    }

    /// The server's statement and row counters (all clients); `None` on SQLite.
    pub async fn server_counters(&self) -> anyhow::Result<Option<ServerCounters>> {
        let Db::Mysql(pool) = &self.db else {
            return Ok(None);
        };
        let mut conn = pool.get().await.context("no MariaDB connection")?;
        let rows: Vec<StatusRow> = diesel::sql_query(
            "SHOW GLOBAL STATUS WHERE Variable_name IN ('Questions', 'Handler_write', 'Handler_update', \
             'Handler_delete', 'Bytes_received', 'Bytes_sent')",
        )
        .load(&mut *conn)
        .await
        .context("cannot read the server's status counters")?;
        let value = |name: &str| -> anyhow::Result<u64> {
            let row = rows
                .iter()
                .find(|row| row.name == name)
                .with_context(|| format!("no {name} in the server's status"))?;
            row.value
                .parse()
                .with_context(|| format!("{name} is not a number: {}", row.value))
        };
        Ok(Some(ServerCounters {
            statements: value("Questions")?,
            rows_written: value("Handler_write")?
                + value("Handler_update")?
                + value("Handler_delete")?,
            traffic: Traffic {
                sent: value("Bytes_received")?,
                received: value("Bytes_sent")?,
            },
        }))
    }

    /// The CPU the database server's processes on this machine have spent (MariaDB's one, or
    /// PostgreSQL's process per connection and its helpers), in clock ticks; `None` on SQLite.
    pub fn server_cpu_ticks(&self) -> anyhow::Result<Option<u64>> {
        let names: &[&str] = match self.db {
            Db::Mysql(_) => &["mariadbd", "mysqld"],
            Db::Postgres(_) => &["postgres"],
            Db::Sqlite(..) => return Ok(None),
        };
        let processes = find_processes(names);
        if processes.is_empty() {
            return Ok(None);
        }
        // A process that ended in between counts no more.
        let ticks = processes
            .into_iter()
            .filter_map(|pid| process_cpu_ticks(pid).ok());
        Ok(Some(ticks.sum()))
    }

    /// Every task's id and name.
    pub async fn task_names(&self) -> anyhow::Result<Vec<(i64, String)>> {
        let mut conn = self.db.conn().await?;
        let rows: Vec<(TaskId, String)> = with_conn!(&mut conn, |c| t::ax_task
            .select((t::id, t::name))
            .load(c)
            .await)?;
        Ok(rows.into_iter().map(|(id, name)| (id.0, name)).collect())
    }

    /// Run rows beyond the first of a (task, scheduled second): what the compare-and-set
    /// and the unique request id must prevent.
    pub async fn duplicate_rows(&self) -> anyhow::Result<u64> {
        let mut conn = self.db.conn().await?;
        let counts: Vec<i64> = with_conn!(&mut conn, |c| i::ax_instance
            .group_by((i::task_id, i::scheduled_at))
            .having(count_star().gt(1))
            .select(count_star())
            .load(c)
            .await)
        .context("cannot count duplicate rows")?;
        Ok(counts.iter().map(|n| n.unsigned_abs() - 1).sum())
    }

    /// How many runs scheduled in `[start, end)` are in each status.
    pub async fn statuses_in(
        &self,
        start: DateTime<Utc>,
        end: DateTime<Utc>,
    ) -> anyhow::Result<BTreeMap<String, u64>> {
        let (start, end) = (to_db(start), to_db(end));
        let mut conn = self.db.conn().await?;
        let rows: Vec<(String, i64)> = with_conn!(&mut conn, |c| i::ax_instance
            .filter(i::scheduled_at.ge(start))
            .filter(i::scheduled_at.lt(end))
            .group_by(i::status)
            .select((i::status, count_star()))
            .load(c)
            .await)
        .context("cannot count runs by status")?;
        Ok(rows
            .into_iter()
            .map(|(status, n)| (status, n.unsigned_abs()))
            .collect())
    }
}

/// Runs not in a final state, from [`BenchStore::statuses_in`].
pub fn not_final(statuses: &BTreeMap<String, u64>) -> u64 {
    statuses
        .iter()
        .filter(|(status, _)| !is_final(status))
        .map(|(_, n)| n)
        .sum()
}

/// The statuses that are not final, with their counts.
pub fn open_only(mut statuses: BTreeMap<String, u64>) -> BTreeMap<String, u64> {
    statuses.retain(|status, _| !is_final(status));
    statuses
}

fn is_final(status: &str) -> bool {
    RunStatus::parse(status).is_some_and(RunStatus::is_final)
}

#[derive(QueryableByName)]
struct StatusRow {
    #[diesel(sql_type = Text, column_name = Variable_name)]
    name: String,
    #[diesel(sql_type = Text, column_name = Value)]
    value: String,
}

/// A MariaDB or PostgreSQL database of the bench, dropped when this is.
struct BenchDatabase {
    kind: StoreKind,
    name: String,
}

impl BenchDatabase {
    fn url(&self) -> String {
        match self.kind {
            StoreKind::Postgres => format!("{POSTGRES_SERVER}/{}", self.name),
            _ => format!("{MYSQL_SERVER}/{}", self.name),
        }
    }

    /// Drops it over a connection of `Conn`'s to `server`.
    fn drop_over<Conn>(server: &str, sql: String) -> Result<(), String>
    where
        Conn: diesel::Connection + diesel::connection::SimpleConnection,
    {
        let mut conn = Conn::establish(server).map_err(|err| err.to_string())?;
        conn.batch_execute(&sql).map_err(|err| err.to_string())
    }
}

impl Drop for BenchDatabase {
    fn drop(&mut self) {
        use diesel_async::async_connection_wrapper::AsyncConnectionWrapper;
        type SyncMysql = AsyncConnectionWrapper<diesel_async::AsyncMysqlConnection>;
        type SyncPostgres = AsyncConnectionWrapper<diesel_async::AsyncPgConnection>;
        let (kind, name) = (self.kind, self.name.clone());
        // A thread of its own: the blocking wrapper must not run on the bench's runtime.
        let dropped = std::thread::spawn(move || match kind {
            StoreKind::Postgres => BenchDatabase::drop_over::<SyncPostgres>(
                &format!("{POSTGRES_SERVER}/postgres"),
                format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)"),
            ),
            _ => BenchDatabase::drop_over::<SyncMysql>(
                &format!("{MYSQL_SERVER}/"),
                format!("DROP DATABASE IF EXISTS `{name}`"),
            ),
        })
        .join();
        let name = &self.name;
        match dropped {
            Ok(Ok(())) => {}
            Ok(Err(err)) => eprintln!("ax bench: could not drop database `{name}`: {err}"),
            Err(_) => eprintln!("ax bench: could not drop database `{name}`"),
        }
    }
}
