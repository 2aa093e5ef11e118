//! This process's identity in a cluster (`server.instance_id`): the configured one, or the one
//! its host keeps in the store, so that a restarted node is the same node and recovers its own
//! runs at once. No two live processes share one: the identity is locked for the process's
//! lifetime, with a lock the system frees when the process dies, even by `kill -9`: a named
//! lock on MySQL/MariaDB, an advisory lock on PostgreSQL, each on a connection of its own. On
//! SQLite the lock is the database file's own: one ax process per file, whatever its id. On MariaDB
//! Galera Cluster, which does not replicate named locks, it is a lease in the store instead,
//! which a killed process leaves to expire: a restart with the same id waits up to
//! [`LEASE_TTL`] for it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use diesel_async::{AsyncMysqlConnection, AsyncPgConnection};
use tokio::sync::oneshot;
use uuid::Uuid;

use ax_store::pool::postgres;
use ax_store::queries::meta;
use ax_store::queries::named_locks::{self, Taken};
use ax_store::queries::{advisory_locks, leases, wsrep};
use ax_store::{Db, Dialer, MysqlHosts, PostgresUrl, StoreError, StoreUrl};

/// How long start-up waits for the identity's previous holder to be gone (a process still
/// shutting down, or one just killed whose connection the server has not yet closed).
const CLAIM_WAIT: Duration = Duration::from_secs(5);
/// How often a server lock's connection is used, so that it never idles out (MySQL's
/// `wait_timeout`), and the lock is checked and taken again if the connection was lost.
const KEEP_INTERVAL: Duration = Duration::from_secs(30);
/// How long an instance id's lease lasts on Galera unless renewed; it is renewed every third
/// of that, so a renewal may fail twice (the node the lease was written to died, the next
/// connection goes to another) before it lapses.
const LEASE_TTL: Duration = Duration::from_secs(15);
/// How soon the keeper tries again after its connection failed.
const RETRY_INTERVAL: Duration = Duration::from_secs(1);
/// How many characters of the host name a generated id keeps, with `-` and 8 hex digits.
const HOST_CHARS: usize = 55;

/// Why this process cannot have its identity.
#[derive(Debug, thiserror::Error)]
pub enum IdentityError {
    #[error("instance id {0} is in use by another running ax process")]
    InUse(String),
    #[error(
        "the SQLite file {0} is in use by another running ax process (one ax serve per SQLite \
         file; several share a MySQL/MariaDB store)"
    )]
    FileInUse(String),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("cannot lock the instance id: {0}")]
    Lock(String),
}

/// The identity of this process, held until [`Identity::release`] or the process ends.
pub struct Identity {
    id: String,
    /// Whether the lock is still this process's (a server lock goes with a lost connection).
    held: Arc<AtomicBool>,
    lock: Lock,
}

/// How an identity is locked: the one backend-specific part of it.
enum Lock {
    /// A lock on a connection of its own, which the server frees when the connection dies
    /// (on Galera a lease); kept by a background task.
    Server(Keeper),
    /// The SQLite file's own lock (see [`StoreClaim`]).
    Sqlite(std::fs::File),
}

/// A process's claim on its store, taken before it touches the store (migrations included):
/// on SQLite, an exclusive lock on `<database file>.lock` beside it, so that no second ax
/// process uses the file, whatever its instance id. The kernel frees the lock when the process
/// dies. The file stays: removing it would let a process lock a file nobody else sees.
pub enum StoreClaim {
    /// MySQL/MariaDB and PostgreSQL, shared by several processes: their ids are locked one
    /// by one.
    Mysql(MysqlHosts),
    Postgres(PostgresUrl),
    Sqlite(std::fs::File),
}

impl StoreClaim {
    /// Claims the store at `url`; fails when another live ax process uses its SQLite file.
    pub async fn take(url: &StoreUrl) -> Result<StoreClaim, IdentityError> {
        Ok(match url {
            StoreUrl::Mysql(hosts) => StoreClaim::Mysql(hosts.clone()),
            StoreUrl::Postgres(url) => StoreClaim::Postgres(url.clone()),
            StoreUrl::Sqlite(path) => {
                let in_use = || IdentityError::FileInUse(path.clone());
                StoreClaim::Sqlite(lock_file(&format!("{path}.lock"), in_use).await?)
            }
        })
    }
}

/// The task keeping a server lock. Dropped (a start-up that failed later), it is aborted, and
/// its connection closes, freeing the lock.
struct Keeper {
    stop: Option<oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Keeper {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Identity {
    /// Takes this process's identity on the store it has claimed: `configured`, or this
    /// host's default (generated once, kept in the store). Fails when a live process holds it.
    pub async fn claim(
        db: &Db,
        store: StoreClaim,
        configured: Option<&str>,
    ) -> Result<Identity, IdentityError> {
        let id = match configured {
            Some(id) => id.to_string(),
            None => host_default(db).await?,
        };
        let held = Arc::new(AtomicBool::new(true));
        let lock = match store {
            StoreClaim::Mysql(hosts) => {
                let dialer = Dialer::new(hosts);
                let mut conn = connect_mysql(&dialer).await?;
                let hold = Hold::of(&mut conn, &id).await?;
                hold_on(MysqlLock { dialer, hold }, conn, &id, held.clone()).await?
            }
            StoreClaim::Postgres(url) => {
                let mut conn = connect_postgres(&url).await?;
                let key = advisory_locks::key_of(&mut conn, &id).await?;
                hold_on(AdvisoryLock { url, key }, conn, &id, held.clone()).await?
            }
            // The process has the file to itself: no other can hold its id.
            StoreClaim::Sqlite(file) => Lock::Sqlite(file),
        };
        let origin = match configured {
            Some(_) => "configured",
            None => "this host's default, kept in the store",
        };
        log::info!("instance id: {id} ({origin})");
        Ok(Identity { id, held, lock })
    }

    /// The instance id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Whether the identity is still this process's alone; `false` after the server lock was
    /// lost with its connection and another process took it meanwhile.
    pub fn held(&self) -> Arc<AtomicBool> {
        self.held.clone()
    }

    /// Frees the identity for the next process (shutdown).
    pub async fn release(self) {
        match self.lock {
            Lock::Server(mut keeper) => {
                if let Some(stop) = keeper.stop.take() {
                    let _ = stop.send(());
                }
                // It releases the lock, then ends.
                let _ = (&mut keeper.task).await;
            }
            Lock::Sqlite(file) => drop(file),
        }
    }
}

/// This host's default id: the one stored for it, or `<host>-<8 hex digits>` stored now.
async fn host_default(db: &Db) -> Result<String, StoreError> {
    let host = host_name();
    let mut conn = db.conn().await?;
    meta::instance_id_of(&mut conn, &host, generate(&host)).await
}

/// A new id for `host`: `<host>-<8 hex digits>`.
fn generate(host: &str) -> String {
    let short: String = host.chars().take(HOST_CHARS).collect();
    format!("{short}-{}", &Uuid::new_v4().simple().to_string()[..8])
}

/// The kernel's host name (`ax` if none is known), in the characters of an id.
fn host_name() -> String {
    in_id_characters(&system_host_name().unwrap_or_else(|| "ax".into()))
}

/// The kernel's host name, if one is known.
pub fn system_host_name() -> Option<String> {
    ["/proc/sys/kernel/hostname", "/etc/hostname"]
        .iter()
        .find_map(|path| {
            let name = std::fs::read_to_string(path).ok()?;
            Some(name.trim().to_string()).filter(|name| !name.is_empty())
        })
}

/// The address this process is reached on from elsewhere: `configured` (`alerts.console_url`
/// for people, `executors.callback_url` for executors) when set, else the address it serves
/// on, with this machine's `host_name` for an unspecified one (`0.0.0.0` reaches nothing from
/// elsewhere). No trailing `/`.
pub fn reachable_at(
    configured: Option<&str>,
    served_on: std::net::SocketAddr,
    host_name: Option<String>,
) -> String {
    if let Some(url) = configured {
        return url.trim_end_matches('/').to_string();
    }
    match host_name.filter(|_| served_on.ip().is_unspecified()) {
        Some(host) => format!("http://{host}:{}", served_on.port()),
        None => format!("http://{served_on}"),
    }
}

/// `name` in the characters an instance id allows, any other one replaced by `-`.
fn in_id_characters(name: &str) -> String {
    name.chars()
        .map(|c| match c {
            'a'..='z' | 'A'..='Z' | '0'..='9' | '.' | '_' | '-' => c,
            _ => '-',
        })
        .collect()
}

/// Locks the file at `path` exclusively, waiting up to [`CLAIM_WAIT`] for a holder (a
/// process still shutting down); `in_use` if it is still held then.
async fn lock_file(
    path: &str,
    in_use: impl Fn() -> IdentityError,
) -> Result<std::fs::File, IdentityError> {
    // The lock comes before the store, which would make its folder: a first start in an
    // empty folder makes it here.
    let folder = std::path::Path::new(path).parent();
    if let Some(folder) = folder.filter(|folder| !folder.as_os_str().is_empty()) {
        std::fs::create_dir_all(folder)
            .map_err(|err| IdentityError::Lock(format!("{}: {err}", folder.display())))?;
    }
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .map_err(|err| IdentityError::Lock(format!("{path}: {err}")))?;
    let deadline = Instant::now() + CLAIM_WAIT;
    loop {
        match file.try_lock() {
            Ok(()) => return Ok(file),
            Err(std::fs::TryLockError::WouldBlock) if Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(std::fs::TryLockError::WouldBlock) => return Err(in_use()),
            Err(std::fs::TryLockError::Error(err)) => {
                return Err(IdentityError::Lock(format!("{path}: {err}")))
            }
        }
    }
}

/// A lock on an instance id that a server holds for one connection: how it is taken, kept,
/// given up and reached again.
trait ServerLock {
    type Conn;
    /// A connection of its own, to the server that answers.
    async fn connect(&self) -> Result<Self::Conn, StoreError>;
    /// Takes it, waiting for a holder that is going (up to [`CLAIM_WAIT`], or a lease's life).
    async fn take(&self, conn: &mut Self::Conn) -> Result<Taken, StoreError>;
    /// Whether it is still this process's, taking it again if it is free (renewing a lease).
    async fn keep(&self, conn: &mut Self::Conn) -> Result<bool, StoreError>;
    async fn release(&self, conn: &mut Self::Conn) -> Result<(), StoreError>;
    /// How often it is checked: a lock only so that its connection never idles out, a lease
    /// before it expires.
    fn interval(&self) -> Duration {
        KEEP_INTERVAL
    }
    fn describe(&self) -> String;
}

/// How an instance id is held on a MySQL/MariaDB store.
enum Hold {
    /// A named lock (`GET_LOCK`) of the connection.
    Named(String),
    /// On Galera: the lease `name`, held by `holder` (this process).
    Lease { name: String, holder: String },
}

impl Hold {
    /// The way to hold `id` on the server at the other end of `conn`.
    async fn of(conn: &mut AsyncMysqlConnection, id: &str) -> Result<Hold, StoreError> {
        Ok(match wsrep::is_galera(conn).await? {
            true => Hold::Lease {
                name: format!("ax_instance:{id}"),
                holder: Uuid::new_v4().to_string(),
            },
            false => Hold::Named(named_locks::name_of(conn, id).await?),
        })
    }
}

/// An instance id's lock on MySQL/MariaDB, and the servers to reach it on.
struct MysqlLock {
    dialer: Dialer,
    hold: Hold,
}

impl ServerLock for MysqlLock {
    type Conn = AsyncMysqlConnection;

    async fn connect(&self) -> Result<AsyncMysqlConnection, StoreError> {
        connect_mysql(&self.dialer).await
    }

    async fn take(&self, conn: &mut AsyncMysqlConnection) -> Result<Taken, StoreError> {
        match &self.hold {
            Hold::Named(name) => named_locks::take(conn, name, CLAIM_WAIT).await,
            Hold::Lease { .. } => {
                let deadline = Instant::now() + LEASE_TTL + Duration::from_secs(1);
                loop {
                    // A certification conflict with a process taking it on another node fails
                    // the statement: the next round reads who won.
                    match self.keep(conn).await {
                        Ok(true) => return Ok(Taken::Yes),
                        Ok(false) => {}
                        Err(err) if err.is_transient() => {}
                        Err(err) => return Err(err),
                    }
                    if Instant::now() >= deadline {
                        return Ok(Taken::InUse);
                    }
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
            }
        }
    }

    async fn keep(&self, conn: &mut AsyncMysqlConnection) -> Result<bool, StoreError> {
        match &self.hold {
            Hold::Named(name) => named_locks::still_held(conn, name).await,
            Hold::Lease { name, holder } => leases::hold(conn, name, holder, LEASE_TTL).await,
        }
    }

    async fn release(&self, conn: &mut AsyncMysqlConnection) -> Result<(), StoreError> {
        match &self.hold {
            Hold::Named(name) => named_locks::release(conn, name).await,
            Hold::Lease { name, holder } => leases::give_up(conn, name, holder).await,
        }
    }

    fn interval(&self) -> Duration {
        match self.hold {
            Hold::Named(_) => KEEP_INTERVAL,
            Hold::Lease { .. } => LEASE_TTL / 3,
        }
    }

    fn describe(&self) -> String {
        match &self.hold {
            Hold::Named(name) => format!("GET_LOCK({name})"),
            Hold::Lease { name, .. } => format!("the lease {name}"),
        }
    }
}

/// An instance id's session advisory lock on PostgreSQL.
struct AdvisoryLock {
    url: PostgresUrl,
    key: i64,
}

impl ServerLock for AdvisoryLock {
    type Conn = AsyncPgConnection;

    async fn connect(&self) -> Result<AsyncPgConnection, StoreError> {
        connect_postgres(&self.url).await
    }

    async fn take(&self, conn: &mut AsyncPgConnection) -> Result<Taken, StoreError> {
        advisory_locks::take(conn, self.key, CLAIM_WAIT).await
    }

    async fn keep(&self, conn: &mut AsyncPgConnection) -> Result<bool, StoreError> {
        advisory_locks::still_held(conn, self.key).await
    }

    async fn release(&self, conn: &mut AsyncPgConnection) -> Result<(), StoreError> {
        advisory_locks::release(conn, self.key).await
    }

    fn describe(&self) -> String {
        format!("pg_advisory_lock({})", self.key)
    }
}

/// Takes `lock` for `id` on `conn` and starts the task that keeps it.
async fn hold_on<L: ServerLock + 'static>(
    lock: L,
    mut conn: L::Conn,
    id: &str,
    held: Arc<AtomicBool>,
) -> Result<Lock, IdentityError> {
    match lock.take(&mut conn).await? {
        Taken::Yes => {}
        Taken::InUse => return Err(IdentityError::InUse(id.to_string())),
        Taken::Failed => {
            return Err(IdentityError::Lock(format!("{} failed", lock.describe())));
        }
    }
    let (stop, stopped) = oneshot::channel();
    let keep = Keep {
        lock,
        id: id.to_string(),
        held,
    };
    let task = actix_rt::spawn(keep_lock(Some(conn), keep, stopped));
    Ok(Lock::Server(Keeper {
        stop: Some(stop),
        task,
    }))
}

async fn connect_mysql(dialer: &Dialer) -> Result<AsyncMysqlConnection, StoreError> {
    dialer
        .connect()
        .await
        .map_err(|err| StoreError::Connect(err.to_string()))
}

async fn connect_postgres(url: &PostgresUrl) -> Result<AsyncPgConnection, StoreError> {
    postgres::establish(url.clone())
        .await
        .map_err(|err| StoreError::Connect(err.to_string()))
}

/// What the keeper of a server lock needs.
struct Keep<L> {
    lock: L,
    id: String,
    held: Arc<AtomicBool>,
}

/// Checks the lock (renews the lease) every [`ServerLock::interval`] until `stop`, taking it
/// again on a new connection (to whichever server answers) if the old one died; then
/// releases it.
async fn keep_lock<L: ServerLock>(
    mut conn: Option<L::Conn>,
    keep: Keep<L>,
    mut stop: oneshot::Receiver<()>,
) {
    let mut wait = keep.lock.interval();
    loop {
        tokio::select! {
            _ = &mut stop => break,
            _ = tokio::time::sleep(wait) => {}
        }
        let held = match conn.as_mut() {
            Some(c) => keep.lock.keep(c).await,
            None => match keep.lock.connect().await {
                Ok(c) => keep.lock.keep(conn.insert(c)).await,
                Err(err) => Err(err),
            },
        };
        wait = keep.lock.interval();
        match held {
            Ok(held) => {
                if keep.held.swap(held, Ordering::Relaxed) != held {
                    match held {
                        true => log::info!("instance id {}: lock taken again", keep.id),
                        false => log::error!(
                            "instance id {}: another ax process took it while the lock's \
                             connection was down",
                            keep.id
                        ),
                    }
                }
            }
            Err(err) => {
                log::warn!("instance id {}: lock connection lost: {err}", keep.id);
                conn = None;
                wait = RETRY_INTERVAL;
            }
        }
    }
    if let Some(mut conn) = conn {
        if let Err(err) = keep.lock.release(&mut conn).await {
            log::warn!(
                "instance id {}: not released ({err}); the server frees it with the connection \
                 (a lease: when it expires)",
                keep.id
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn any_host_name_makes_a_valid_instance_id() {
        for host in [
            host_name(),
            "h".repeat(200),
            in_id_characters("my host/ü.example"),
        ] {
            let id = generate(&host);
            assert!(crate::config::is_instance_id(&id), "{id}");
            assert_ne!(generate(&host), id, "each generated id is new");
        }
        assert_eq!(in_id_characters("a b/c.d"), "a-b-c.d");
    }

    #[test]
    fn a_process_is_reached_where_it_serves_unless_configured() {
        let served: std::net::SocketAddr = "127.0.0.1:8901".parse().expect("addr");
        let host = || Some("ax-1".to_string());
        assert_eq!(reachable_at(None, served, host()), "http://127.0.0.1:8901");
        // Behind a proxy, with a path of its own and a trailing slash.
        let proxied = reachable_at(Some("https://ops.example.com/ax/"), served, host());
        assert_eq!(proxied, "https://ops.example.com/ax");
        // Every interface: the machine's name, which reaches it from elsewhere.
        let any: std::net::SocketAddr = "0.0.0.0:8901".parse().expect("addr");
        assert_eq!(reachable_at(None, any, host()), "http://ax-1:8901");
        assert_eq!(reachable_at(None, any, None), "http://0.0.0.0:8901");
        let v6: std::net::SocketAddr = "[::1]:8901".parse().expect("addr");
        assert_eq!(reachable_at(None, v6, host()), "http://[::1]:8901");
    }
}
