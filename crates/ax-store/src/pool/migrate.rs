//! Applies the embedded migrations (at `ax serve` start-up and by `ax migrate`), with the one
//! step SQL cannot do: before `(scene, name)` becomes unique, existing clashes are renamed,
//! each rename logged.

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::time::{Duration, Instant};

use diesel::backend::Backend;
use diesel::connection::LoadConnection;
use diesel::query_builder::{BoxedSqlQuery, SqlQuery};
use diesel::query_dsl::methods::{ExecuteDsl, LoadQuery};
use diesel::serialize::ToSql;
use diesel::sql_types::HasSqlType;
use diesel::sql_types::{BigInt, Text};
use diesel::{Connection, QueryableByName, RunQueryDsl, SqliteConnection};
use diesel_async::async_connection_wrapper::AsyncConnectionWrapper;
use diesel_async::{AsyncMysqlConnection, AsyncPgConnection};
use diesel_migrations::{embed_migrations, EmbeddedMigrations, MigrationHarness};

use super::backend::{database_name, sqlite_pragmas, MysqlHosts, PostgresUrl, StoreUrl};
use super::error::StoreError;
use super::hosts::Dialer;
use crate::queries::{leases, wsrep};
use crate::rows::models::MAX_NAME_CHARS;
use ax_core::text::Escaped;

/// A blocking MySQL connection for the migration harness, which is synchronous.
type MysqlSyncConn = AsyncConnectionWrapper<AsyncMysqlConnection>;

const MYSQL_MIGRATIONS: EmbeddedMigrations = embed_migrations!("../../migrations/mysql");
const SQLITE_MIGRATIONS: EmbeddedMigrations = embed_migrations!("../../migrations/sqlite");
const POSTGRES_MIGRATIONS: EmbeddedMigrations = embed_migrations!("../../migrations/postgres");

/// A blocking PostgreSQL connection for the migration harness.
type PostgresSyncConn = AsyncConnectionWrapper<AsyncPgConnection>;

/// The migration that makes a task's `(scene, name)` unique.
const UNIQUE_NAMES: &str = "2026-12-01-000001_task_names_unique";

/// Applies the embedded migrations on a thread of its own: diesel's migration harness is
/// synchronous and must not block an actix arbiter.
pub async fn run_migrations(url: StoreUrl) -> Result<Vec<String>, StoreError> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    std::thread::spawn(move || {
        let _ = tx.send(migrate_blocking(&url));
    });
    rx.await
        .map_err(|_| StoreError::Migration("migration thread died".into()))?
}

fn migrate_blocking(url: &StoreUrl) -> Result<Vec<String>, StoreError> {
    match url {
        StoreUrl::Sqlite(path) => {
            if let Some(dir) = Path::new(path)
                .parent()
                .filter(|d| !d.as_os_str().is_empty())
            {
                std::fs::create_dir_all(dir).map_err(|err| {
                    StoreError::Connect(format!("cannot create {}: {err}", dir.display()))
                })?;
            }
            let mut conn = SqliteConnection::establish(path)
                .map_err(|err| StoreError::Connect(format!("{path}: {err}")))?;
            diesel::connection::SimpleConnection::batch_execute(&mut conn, &sqlite_pragmas())?;
            apply(&mut conn, (SQLITE_MIGRATIONS, RENAME_TASK))
        }
        StoreUrl::Mysql(hosts) => {
            let url = answering(hosts)?;
            create_mysql_database(&url)?;
            let mut conn = <MysqlSyncConn as Connection>::establish(&url)
                .map_err(|err| StoreError::Connect(err.to_string()))?;
            // Several ax processes may start at once on a new database: one migrates, the
            // others wait for it and then find nothing pending.
            let settings: Vec<wsrep::Setting> = wsrep::wsrep_on().load(&mut conn)?;
            if wsrep::on(&settings) {
                return under_lease(&mut conn, |conn| {
                    apply(conn, (MYSQL_MIGRATIONS, RENAME_TASK))
                });
            }
            diesel::sql_query("SELECT GET_LOCK('ax_migrations', 120)").execute(&mut conn)?;
            let applied = apply(&mut conn, (MYSQL_MIGRATIONS, RENAME_TASK));
            diesel::sql_query("SELECT RELEASE_LOCK('ax_migrations')").execute(&mut conn)?;
            applied
        }
        StoreUrl::Postgres(url) => {
            // The blocking wrapper drives its connection through this runtime's handle, which
            // only a runtime with worker threads serves from outside `block_on`.
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .enable_all()
                .build()
                .map_err(|err| StoreError::Connect(err.to_string()))?;
            create_postgres_database(&runtime, url)?;
            let mut conn = postgres_sync(&runtime, url)?;
            diesel::sql_query("SELECT pg_advisory_lock(hashtext('ax_migrations'))")
                .execute(&mut conn)?;
            let applied = apply(&mut conn, (POSTGRES_MIGRATIONS, RENAME_TASK_POSTGRES));
            diesel::sql_query("SELECT pg_advisory_unlock(hashtext('ax_migrations'))")
                .execute(&mut conn)?;
            applied
        }
    }
}

/// The URL (with the database) of the first server of `hosts` that answers, tried as the
/// store's connections try them (see [`Dialer`]); asked without the database, which may not
/// exist yet.
fn answering(hosts: &MysqlHosts) -> Result<String, StoreError> {
    let dialer = Dialer::new(hosts.servers());
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|err| StoreError::Connect(err.to_string()))?;
    runtime
        .block_on(dialer.connect())
        .map_err(|err| StoreError::Connect(err.to_string()))?;
    Ok(hosts.urls()[dialer.answered()].clone())
}

/// How long the migrations' lease lasts on Galera: as long as `GET_LOCK` waits elsewhere.
/// A process killed while migrating holds the next one up that long.
const MIGRATION_LEASE: Duration = Duration::from_secs(120);

/// Runs `migrate` holding the lease `ax_migrations` (on Galera, where `GET_LOCK` is one
/// node's alone), waiting up to [`MIGRATION_LEASE`] for another process's to end. The lease
/// table is made first, by its own migration's statement (which is `IF NOT EXISTS`).
fn under_lease(
    conn: &mut MysqlSyncConn,
    migrate: impl FnOnce(&mut MysqlSyncConn) -> Result<Vec<String>, StoreError>,
) -> Result<Vec<String>, StoreError> {
    diesel::connection::SimpleConnection::batch_execute(conn, LEASE_TABLE)?;
    let holder = uuid::Uuid::new_v4().to_string();
    let deadline = Instant::now() + MIGRATION_LEASE;
    loop {
        // A certification conflict (another node's process took it at the same time) is an
        // error here: the read that follows, next time round, says who won.
        let taken = leases::take(MIGRATIONS_LEASE_NAME, &holder, MIGRATION_LEASE)
            .execute(conn)
            .map_err(StoreError::from);
        if let Err(err) = &taken {
            log::warn!("migrations: lease not taken ({err}); trying again");
        }
        let held: leases::Held =
            leases::held_by(MIGRATIONS_LEASE_NAME, &holder).get_result(conn)?;
        if taken.is_ok() && held.held > 0 {
            break;
        }
        if Instant::now() >= deadline {
            return Err(StoreError::Migration(format!(
                "another ax process held the migrations' lease for {MIGRATION_LEASE:?}"
            )));
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    let applied = migrate(conn);
    leases::release(MIGRATIONS_LEASE_NAME, &holder).execute(conn)?;
    applied
}

/// The lease the migrations are run under, on Galera.
const MIGRATIONS_LEASE_NAME: &str = "ax_migrations";

/// The lease table, as its migration makes it.
const LEASE_TABLE: &str =
    include_str!("../../../../migrations/mysql/2026-12-07-000100_leases/up.sql");

/// The statement renaming a task (its new name, its id), in MySQL's and SQLite's placeholders
/// and in PostgreSQL's.
const RENAME_TASK: &str = "UPDATE ax_task SET name = ? WHERE id = ?";
const RENAME_TASK_POSTGRES: &str = "UPDATE ax_task SET name = $1 WHERE id = $2";

/// Applies the pending migrations; `rename` renames a task (see [`rename_name_clashes`]).
/// Returns their names, in order.
fn apply<C, B>(
    conn: &mut C,
    (migrations, rename): (EmbeddedMigrations, &'static str),
) -> Result<Vec<String>, StoreError>
where
    C: MigrationHarness<B> + Connection<Backend = B> + LoadConnection,
    B: Backend + HasSqlType<Text> + HasSqlType<BigInt>,
    String: ToSql<Text, B>,
    i64: ToSql<BigInt, B>,
    SqlQuery: LoadQuery<'static, C, NamedTask>,
    Rename<B>: ExecuteDsl<C>,
{
    let failed =
        |err: Box<dyn std::error::Error + Send + Sync>| StoreError::Migration(err.to_string());
    let pending = conn.pending_migrations(migrations).map_err(failed)?;
    if pending.is_empty() {
        log::info!("migrations: none pending");
    }
    let mut applied = Vec::with_capacity(pending.len());
    for migration in pending {
        let name = migration.name().to_string();
        if name == UNIQUE_NAMES {
            rename_name_clashes(conn, rename)?;
        }
        conn.run_migration(&migration).map_err(failed)?;
        log::info!("applied migration {name}");
        applied.push(name);
    }
    Ok(applied)
}

/// A task's id, scene and name, read for the rename step.
#[derive(QueryableByName)]
pub struct NamedTask {
    #[diesel(sql_type = BigInt)]
    id: i64,
    #[diesel(sql_type = Text)]
    scene: String,
    #[diesel(sql_type = Text)]
    name: String,
}

/// The statement renaming one task.
pub type Rename<B> = BoxedSqlQuery<'static, B, SqlQuery>;

/// Renames the tasks whose `(scene, name)` another, older task has, in one transaction, by
/// the statement `rename`.
fn rename_name_clashes<C, B>(conn: &mut C, rename: &'static str) -> Result<(), StoreError>
where
    C: Connection<Backend = B> + LoadConnection,
    B: Backend + HasSqlType<Text> + HasSqlType<BigInt>,
    String: ToSql<Text, B>,
    i64: ToSql<BigInt, B>,
    SqlQuery: LoadQuery<'static, C, NamedTask>,
    Rename<B>: ExecuteDsl<C>,
{
    conn.transaction(|conn| {
        let tasks: Vec<NamedTask> =
            diesel::sql_query("SELECT id, scene, name FROM ax_task ORDER BY id").load(conn)?;
        let tasks: Vec<(i64, String, String)> =
            tasks.into_iter().map(|t| (t.id, t.scene, t.name)).collect();
        for (id, scene, old, new) in clash_renames(&tasks) {
            diesel::sql_query(rename)
                .into_boxed::<B>()
                .bind::<Text, _>(new.clone())
                .bind::<BigInt, _>(id)
                .execute(conn)?;
            // Names stored before they were checked may hold anything.
            log::warn!(
                "task {id} renamed from `{}` to `{}`: scene `{}` has another task of that name, \
                 and names are now unique in a scene",
                Escaped(&old),
                Escaped(&new),
                Escaped(&scene)
            );
        }
        Ok(())
    })
}

/// The renames that make `(scene, name)` unique among `tasks` (id, scene, name), oldest
/// first: the oldest task keeps its name, each later one becomes `name (2)`, `name (3)`, … —
/// the first such name free in its scene, shortened to fit the column. Returns (id, scene,
/// old name, new name).
fn clash_renames(tasks: &[(i64, String, String)]) -> Vec<(i64, String, String, String)> {
    let mut taken: HashSet<(&str, String)> = tasks
        .iter()
        .map(|(_, scene, name)| (scene.as_str(), name.clone()))
        .collect();
    let mut seen: HashMap<(&str, &str), ()> = HashMap::new();
    let mut renames = Vec::new();
    for (id, scene, name) in tasks {
        if seen.insert((scene, name), ()).is_none() {
            continue;
        }
        let new = (2..)
            .map(|n| numbered(name, n))
            .find(|candidate| !taken.contains(&(scene.as_str(), candidate.clone())))
            .unwrap_or_default();
        taken.insert((scene.as_str(), new.clone()));
        renames.push((*id, scene.clone(), name.clone(), new));
    }
    renames
}

/// `name (n)`, the name cut so the whole fits in a task name.
fn numbered(name: &str, n: u32) -> String {
    let suffix = format!(" ({n})");
    let keep = MAX_NAME_CHARS.saturating_sub(suffix.chars().count());
    let base: String = name.chars().take(keep).collect();
    format!("{base}{suffix}")
}

/// Creates the database a MySQL URL names, if the user may; a user without the right gets the
/// connection error of the next step instead, which names the real problem.
fn create_mysql_database(url: &str) -> Result<(), StoreError> {
    let bad = || StoreError::BadUrl(super::backend::redacted(url));
    let mut server = url::Url::parse(url).map_err(|_| bad())?;
    let name = database_name(&server).ok_or_else(bad)?;
    server.set_path("");
    let mut conn = <MysqlSyncConn as Connection>::establish(server.as_str())
        .map_err(|err| StoreError::Connect(err.to_string()))?;
    let sql = format!(
        "CREATE DATABASE IF NOT EXISTS `{}`",
        name.replace('`', "``")
    );
    if let Err(err) = diesel::connection::SimpleConnection::batch_execute(&mut conn, &sql) {
        log::warn!("could not create database `{name}`: {err}");
    }
    Ok(())
}

/// A blocking connection to `url`'s server, opened as the pool opens its own (TLS as the URL
/// says), served by `runtime`.
fn postgres_sync(
    runtime: &tokio::runtime::Runtime,
    url: &PostgresUrl,
) -> Result<PostgresSyncConn, StoreError> {
    let conn = runtime
        .block_on(super::postgres::establish(url.clone()))
        .map_err(|err| StoreError::Connect(err.to_string()))?;
    let _serving = runtime.enter();
    Ok(PostgresSyncConn::from(conn))
}

/// Creates the database a PostgreSQL URL names, if missing and the user may (see
/// [`create_mysql_database`]).
fn create_postgres_database(
    runtime: &tokio::runtime::Runtime,
    url: &PostgresUrl,
) -> Result<(), StoreError> {
    #[derive(QueryableByName)]
    struct Found {
        #[diesel(sql_type = BigInt)]
        #[allow(dead_code)]
        found: i64,
    }
    let name = url.database();
    let mut conn = postgres_sync(runtime, &url.maintenance())?;
    let found: Vec<Found> =
        diesel::sql_query("SELECT CAST(1 AS BIGINT) AS found FROM pg_database WHERE datname = $1")
            .bind::<Text, _>(&name)
            .load(&mut conn)?;
    if found.is_empty() {
        let sql = format!("CREATE DATABASE \"{}\"", name.replace('"', "\"\""));
        if let Err(err) = diesel::connection::SimpleConnection::batch_execute(&mut conn, &sql) {
            log::warn!("could not create database `{name}`: {err}");
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task(id: i64, scene: &str, name: &str) -> (i64, String, String) {
        (id, scene.into(), name.into())
    }

    #[test]
    fn later_clashes_are_numbered_and_the_oldest_keeps_its_name() {
        let tasks = [
            task(1, "a", "report"),
            task(2, "a", "report"),
            task(3, "b", "report"),
            task(4, "a", "report (2)"),
            task(5, "a", "report"),
            task(6, "a", "other"),
        ];
        let renames: Vec<(i64, String)> = clash_renames(&tasks)
            .into_iter()
            .map(|(id, _, _, new)| (id, new))
            .collect();
        // `report (2)` is taken by task 4, so task 2 becomes `report (3)`.
        assert_eq!(
            renames,
            [(2, "report (3)".to_string()), (5, "report (4)".to_string())]
        );
    }

    #[test]
    fn no_clash_no_rename() {
        let tasks = [task(1, "a", "x"), task(2, "b", "x"), task(3, "a", "X")];
        assert!(clash_renames(&tasks).is_empty());
    }

    #[test]
    fn a_long_name_is_cut_to_fit_its_number() {
        let long = "n".repeat(MAX_NAME_CHARS);
        let renames = clash_renames(&[task(1, "a", &long), task(2, "a", &long)]);
        let new = &renames[0].3;
        assert_eq!(new.chars().count(), MAX_NAME_CHARS);
        assert!(new.ends_with(" (2)"));
    }
}
