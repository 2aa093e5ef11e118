//! The link to Redis that the fire lock, the cluster's heartbeats and the alerts share: a pool
//! that needs no answer to start, and an outage remembered. Redis keeps nothing ax cannot
//! rebuild (locks of 3 s, heartbeats of 10 s), so a process that starts while it is out of
//! reach runs as one whose Redis went away: it fires unlocked, on the database's
//! compare-and-set. While Redis is out of reach every call fails at once, so no fire batch
//! waits on a dial; one task alone tries it again, with back-off, and brings the link back up.
//!
//! Redis is one server, or the primary that Redis Sentinel names: each new connection then
//! asks the sentinels which server is the primary. A connection that fails, or that a demoted
//! primary answers with `READONLY`, is dropped, and Redis counted out of reach: the next
//! connection, the reconnect task's, asks the sentinels again and so follows a failover. A
//! planned failover leaves the old primary up, taking writes, until the sentinels demote it
//! (seconds later): so a task listens to the sentinels' `+switch-master` and retires every
//! connection made before it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use futures_util::StreamExt;
use redis::aio::MultiplexedConnection;
use redis::sentinel::{SentinelClient, SentinelClientBuilder, SentinelServerType};
use redis::{ErrorKind, RedisResult, ServerErrorKind, TlsCertificates, TlsMode};
use rustls::pki_types::pem::PemObject;
use tokio::sync::watch;

use crate::config::{RedisConfig, RedisTarget, SentinelTarget};

/// A pool of Redis connections.
pub type RedisPool = bb8::Pool<Dialer>;

/// Connections the pool keeps at most.
const POOL_SIZE: u32 = 4;

/// How long a call off the fire path (a heartbeat, the cluster's list, the alerts' check) waits
/// for Redis before it counts it out of reach.
pub const CALL_WAIT: Duration = Duration::from_secs(1);

/// How long one try to reach Redis (a dial and a `PING`) may take, at start and after an outage.
const PROBE_WAIT: Duration = Duration::from_secs(1);

/// The pause before Redis, found out of reach, is tried again; each failed try doubles it.
const FIRST_PAUSE: Duration = Duration::from_millis(100);

/// The longest pause between tries: the heartbeats' interval, so a process is back in the
/// cluster's list about as soon after Redis returns as it would be had it kept dialing (the
/// others take a process missing from the list for gone).
const MAX_PAUSE: Duration = Duration::from_secs(2);

/// Why Redis did not serve a call (the fire lock's, a heartbeat's, the cluster list's), or why
/// it cannot be used at all.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// `redis.url` or `redis.ca_file` cannot be used as given (the words say which and why).
    #[error("{0}")]
    BadUrl(String),
    /// No answer: Redis is down, unreachable, or too slow to wait for.
    #[error("Redis unavailable: {0}")]
    Unavailable(String),
    /// Redis answered and refused the credentials that `keys` give (none shown): a setting to
    /// correct, not an outage to wait out.
    #[error("{keys}: Redis at {addr} refused the credentials it gives: {why}")]
    Refused {
        /// `redis.url`, and under Sentinel `redis.sentinel_password` as well.
        keys: &'static str,
        addr: String,
        why: String,
    },
    /// Redis's TLS certificate is not one `redis.ca_file` (or the system) vouches for, or does
    /// not name the host `redis.url` gives: a setting to correct, as refused credentials are.
    #[error(
        "redis.url, redis.ca_file: the TLS certificate of Redis at {addr} is not trusted: {why}"
    )]
    Untrusted { addr: String, why: String },
    /// Redis answered a command with an error: the command's fault, not the link's.
    #[error("Redis refused a command: {0}")]
    Command(String),
}

impl LockError {
    /// Whether Redis is to be counted out of reach until a try gets an answer.
    fn is_outage(&self) -> bool {
        matches!(
            self,
            LockError::Unavailable(_) | LockError::Refused { .. } | LockError::Untrusted { .. }
        )
    }

    /// Whether only a corrected setting mends it.
    pub fn is_setting(&self) -> bool {
        matches!(
            self,
            LockError::BadUrl(_) | LockError::Refused { .. } | LockError::Untrusted { .. }
        )
    }
}

/// A Redis unavailable for this reason.
pub(crate) fn unavailable(err: impl std::fmt::Display) -> LockError {
    LockError::Unavailable(err.to_string())
}

/// The link to one Redis; clones share the pool and what is known of Redis's reach.
#[derive(Clone)]
pub struct RedisLink {
    shared: Arc<Shared>,
}

struct Shared {
    pool: RedisPool,
    /// Redis as logs name it, without credentials: `host:port`, or the sentinels' service.
    addr: String,
    /// The settings that give the credentials.
    credential_keys: &'static str,
    /// Whether Redis answers: false from a call that got no answer until a try gets one.
    up: watch::Sender<bool>,
}

impl RedisLink {
    /// A link to the Redis that `redis.url` names, whether or not it answers now (one try, of
    /// at most a second, says which). Fails only on what waiting cannot mend: a URL that is no
    /// Redis URL, a CA file that cannot be read, credentials Redis refuses or a certificate it
    /// is not trusted by. Starts the task that brings the link back after an outage; it ends
    /// with the last clone of the link. Runs inside an actix system.
    pub async fn connect(url: &str, settings: &RedisConfig) -> Result<RedisLink, LockError> {
        let target =
            RedisTarget::parse(url).map_err(|why| LockError::BadUrl(format!("redis.url {why}")))?;
        let addr = target.shown();
        let credential_keys = match target {
            RedisTarget::Node(_) => "redis.url",
            RedisTarget::Sentinel(_) => "redis.url, redis.sentinel_password",
        };
        let (manager, watch) = Dialer::new(target, settings)?;
        let pool = bb8::Pool::builder()
            .max_size(POOL_SIZE)
            // Every call is bounded by its own wait; trying a failed dial again is the link's
            // reconnect task's, with back-off, not the pool's behind the callers' backs.
            .retry_connection(false)
            .build_unchecked(manager);
        let shared = Arc::new(Shared {
            pool,
            addr,
            credential_keys,
            up: watch::channel(true).0,
        });
        match shared.probe().await {
            Ok(()) => {}
            Err(err) if err.is_setting() => return Err(err),
            Err(err) => shared.lost(&err),
        }
        let changes = shared.up.subscribe();
        actix_rt::spawn(reconnect(Arc::downgrade(&shared), changes));
        if let Some(watch) = watch {
            actix_rt::spawn(watch_failovers(Arc::downgrade(&shared), watch));
        }
        Ok(RedisLink { shared })
    }

    /// Whether Redis answers, as the last call or try found.
    pub fn is_up(&self) -> bool {
        *self.shared.up.borrow()
    }

    /// Runs `op` on a pooled connection, waiting at most `within`. While Redis is out of reach
    /// it fails at once, without a dial; a call that gets no answer counts Redis out of reach.
    pub async fn call<T>(
        &self,
        within: Duration,
        op: impl AsyncFnOnce(&mut MultiplexedConnection) -> RedisResult<T>,
    ) -> Result<T, LockError> {
        let shared = &self.shared;
        if !self.is_up() {
            return Err(unavailable(format!(
                "{} is out of reach (tried again in the background)",
                shared.addr
            )));
        }
        let attempt = async {
            // With no pool error forwarded to it, a get only ever times out: the wait below
            // ends it first.
            let mut conn = shared.pool.get().await.map_err(unavailable)?;
            op(&mut conn.inner).await.map_err(|err| {
                let err = shared.failure(err);
                // A connection Redis no longer answers on, or a demoted primary's, is not
                // handed out again: the next one is dialed afresh (asking the sentinels).
                conn.broken = err.is_outage();
                err
            })
        };
        let outcome = match tokio::time::timeout(within, attempt).await {
            Ok(outcome) => outcome,
            Err(_) => Err(unavailable(format!("no answer within {within:?}"))),
        };
        if let Err(err) = &outcome {
            shared.lost(err);
        }
        outcome
    }
}

impl Shared {
    /// One try: a connection of its own and a `PING`, within [`PROBE_WAIT`]. The connection
    /// that answered goes to the pool, so the next call needs no dial.
    async fn probe(&self) -> Result<(), LockError> {
        let attempt = async {
            let mut conn = self.pool.dedicated_connection().await?;
            redis::cmd("PING")
                .query_async::<String>(&mut conn.inner)
                .await?;
            Ok(conn)
        };
        match tokio::time::timeout(PROBE_WAIT, attempt).await {
            Ok(Ok(conn)) => {
                // A full pool has connections enough: this one is then dropped.
                let _ = self.pool.add(conn);
                Ok(())
            }
            Ok(Err(err)) => Err(self.failure(err)),
            Err(_) => Err(unavailable(format!(
                "{}: no answer within {PROBE_WAIT:?}",
                self.addr
            ))),
        }
    }

    /// What a failed call or try says of Redis.
    fn failure(&self, err: redis::RedisError) -> LockError {
        match verdict(&err) {
            Verdict::Refused => LockError::Refused {
                keys: self.credential_keys,
                addr: self.addr.clone(),
                why: err.to_string(),
            },
            Verdict::Untrusted => LockError::Untrusted {
                addr: self.addr.clone(),
                why: err.to_string(),
            },
            Verdict::Answered => LockError::Command(err.to_string()),
            Verdict::OutOfReach => unavailable(err),
        }
    }

    /// Counts Redis out of reach after `err` (if it says so), saying it once per outage.
    fn lost(&self, err: &LockError) {
        if err.is_outage() && self.up.send_if_modified(|up| std::mem::replace(up, false)) {
            log::warn!(
                "Redis at {} out of reach ({err}): firing unlocked, on the database's \
                 compare-and-set, and no heartbeat until it answers; tried again every {:?} at \
                 most",
                self.addr,
                MAX_PAUSE
            );
        }
    }
}

/// Brings the link back after each outage: tries Redis with back-off until it answers. Ends
/// when the link is gone.
async fn reconnect(link: Weak<Shared>, mut changes: watch::Receiver<bool>) {
    while changes.wait_for(|up| !*up).await.is_ok() {
        let mut pause = FIRST_PAUSE;
        loop {
            actix_rt::time::sleep(pause).await;
            let Some(shared) = link.upgrade() else {
                return;
            };
            match shared.probe().await {
                Ok(()) => {
                    shared.up.send_replace(true);
                    log::info!("Redis at {} answers again: fire locks resume", shared.addr);
                    break;
                }
                // Said every time: nothing mends it but a corrected setting.
                Err(err) if err.is_setting() => log::warn!("{err}"),
                Err(err) => log::debug!("Redis still out of reach: {err}"),
            }
            pause = next_pause(pause);
        }
    }
}

/// The pause after a failed try that followed a pause of `pause`.
fn next_pause(pause: Duration) -> Duration {
    (pause * 2).min(MAX_PAUSE)
}

/// What a failed call says of Redis.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verdict {
    /// It answered, with an error: the command's fault.
    Answered,
    /// It refused the credentials: `WRONGPASS`, `NOAUTH`, `ERR invalid password`, or a
    /// password given to a server that has none.
    Refused,
    /// Its TLS certificate is not trusted.
    Untrusted,
    /// No answer (a dial or a connection failed), or no write taken: a primary demoted to a
    /// replica answers `READONLY`.
    OutOfReach,
}

fn verdict(err: &redis::RedisError) -> Verdict {
    let refused_words = match err.code() {
        Some("NOAUTH" | "WRONGPASS") => true,
        Some("ERR") => err
            .detail()
            .is_some_and(|detail| detail.contains("invalid password")),
        _ => false,
    };
    match err.kind() {
        ErrorKind::AuthenticationFailed => Verdict::Refused,
        _ if refused_words => Verdict::Refused,
        _ if untrusted(err) => Verdict::Untrusted,
        ErrorKind::Server(ServerErrorKind::ReadOnly) => Verdict::OutOfReach,
        ErrorKind::Server(_) | ErrorKind::Extension | ErrorKind::UnexpectedReturnType => {
            Verdict::Answered
        }
        _ => Verdict::OutOfReach,
    }
}

/// Whether TLS refused Redis's certificate (an unknown issuer, another host's name, …).
fn untrusted(err: &redis::RedisError) -> bool {
    // rustls's error reaches here inside an io::Error that the redis crate keeps behind an
    // `Arc<dyn Error>`, out of reach of a downcast: its words are what is left of it.
    err.is_io_error() && err.to_string().contains("invalid peer certificate")
}

/// How a connection is made: to the one Redis of `redis.url`, or to the primary the sentinels
/// name, asked at each dial.
pub enum Dialer {
    /// One Redis.
    Node(redis::Client),
    /// The primary of a service, which the sentinels name.
    Sentinel {
        /// Asked by one dial at a time (it keeps its connections to the sentinels).
        client: tokio::sync::Mutex<SentinelClient>,
        /// The primary the last dial reached, to say when a failover moved it.
        primary: std::sync::Mutex<Option<String>>,
        /// Failovers announced so far: a connection made before the last one is retired.
        failovers: Arc<AtomicU64>,
    },
}

/// A pooled connection, and whether it is not to be handed out again.
pub struct Conn {
    inner: MultiplexedConnection,
    broken: bool,
    /// The failovers announced before it was made.
    failovers: u64,
}

/// What the task that listens for failovers needs: each sentinel, the service, and the count
/// it bumps.
struct FailoverWatch {
    sentinels: Vec<redis::Client>,
    service: String,
    failovers: Arc<AtomicU64>,
}

impl Dialer {
    /// The dialer of `target`, with the CA file and the sentinels' password of `settings`, and
    /// for sentinels what the task that listens for their failovers needs.
    fn new(
        target: RedisTarget,
        settings: &RedisConfig,
    ) -> Result<(Dialer, Option<FailoverWatch>), LockError> {
        let certificates = ca_certificates(&target, settings.ca_file.as_deref())?;
        let bad = |err: redis::RedisError| LockError::BadUrl(format!("redis.url: {err}"));
        match target {
            RedisTarget::Node(info) => {
                let client = tls_client(info, certificates).map_err(bad)?;
                Ok((Dialer::Node(client), None))
            }
            RedisTarget::Sentinel(target) => {
                let sentinel_settings = match &settings.sentinel_password {
                    Some(password) => redis::RedisConnectionInfo::default().set_password(password),
                    None => redis::RedisConnectionInfo::default(),
                };
                let sentinels = target
                    .sentinels
                    .iter()
                    .map(|addr| {
                        let info = redis::IntoConnectionInfo::into_connection_info(addr.clone())?
                            .set_redis_settings(sentinel_settings.clone());
                        tls_client(info, certificates.clone())
                    })
                    .collect::<RedisResult<Vec<_>>>()
                    .map_err(bad)?;
                let watch = FailoverWatch {
                    sentinels,
                    service: target.service.clone(),
                    failovers: Arc::default(),
                };
                let client = sentinel_client(target, certificates, settings).map_err(bad)?;
                let dialer = Dialer::Sentinel {
                    client: tokio::sync::Mutex::new(client),
                    primary: std::sync::Mutex::new(None),
                    failovers: watch.failovers.clone(),
                };
                Ok((dialer, Some(watch)))
            }
        }
    }

    /// The failovers announced so far (none for one Redis).
    fn failovers(&self) -> u64 {
        match self {
            Dialer::Node(_) => 0,
            Dialer::Sentinel { failovers, .. } => failovers.load(Ordering::Acquire),
        }
    }

    /// Whether `conn` is not to be handed out again.
    fn retired(&self, conn: &Conn) -> bool {
        conn.broken || conn.failovers != self.failovers()
    }

    /// Says where the primary is the first time, and again when it moved.
    fn note_primary(&self, client: &redis::Client) {
        let Dialer::Sentinel { primary, .. } = self else {
            return;
        };
        let now = client.get_connection_info().addr().to_string();
        let mut known = primary
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if known.as_deref() != Some(now.as_str()) {
            match known.replace(now.clone()) {
                None => log::info!("Redis Sentinel names {now} the primary"),
                Some(before) => log::warn!(
                    "Redis Sentinel names {now} the primary, in place of {before}: a failover"
                ),
            }
        }
    }
}

impl bb8::ManageConnection for Dialer {
    type Connection = Conn;
    type Error = redis::RedisError;

    async fn connect(&self) -> Result<Conn, redis::RedisError> {
        let failovers = self.failovers();
        let inner = match self {
            Dialer::Node(client) => client.get_multiplexed_async_connection().await?,
            Dialer::Sentinel { client, .. } => {
                // The sentinels name the primary, which is asked whether it is one.
                let primary = client.lock().await.async_get_client().await?;
                self.note_primary(&primary);
                primary.get_multiplexed_async_connection().await?
            }
        };
        Ok(Conn {
            inner,
            broken: false,
            failovers,
        })
    }

    async fn is_valid(&self, conn: &mut Conn) -> Result<(), redis::RedisError> {
        if self.retired(conn) {
            return Err(redis::RedisError::from((
                ErrorKind::Io,
                "made before the last failover",
            )));
        }
        redis::cmd("PING")
            .query_async::<String>(&mut conn.inner)
            .await
            .map(drop)
    }

    fn has_broken(&self, conn: &mut Conn) -> bool {
        self.retired(conn)
    }
}

/// A client of `info`, checked against `certificates` when given.
fn tls_client(
    info: redis::ConnectionInfo,
    certificates: Option<TlsCertificates>,
) -> RedisResult<redis::Client> {
    match certificates {
        Some(certificates) => redis::Client::build_with_tls(info, certificates),
        None => redis::Client::open(info),
    }
}

/// Listens to one sentinel after another for `+switch-master` of the service, and counts each
/// such failover, which retires the connections made before it. Ends when the link is gone.
async fn watch_failovers(link: Weak<Shared>, watch: FailoverWatch) {
    for sentinel in watch.sentinels.iter().cycle() {
        if let Ok(mut pubsub) = sentinel.get_async_pubsub().await {
            if pubsub.subscribe("+switch-master").await.is_ok() {
                let mut messages = pubsub.on_message();
                loop {
                    // Woken now and then to end with the link.
                    let next = tokio::time::timeout(MAX_PAUSE, messages.next()).await;
                    if link.strong_count() == 0 {
                        return;
                    }
                    match next {
                        Ok(Some(message)) => {
                            // `<service> <old ip> <old port> <new ip> <new port>`
                            let said: String = message.get_payload().unwrap_or_default();
                            if said.split(' ').next() == Some(watch.service.as_str()) {
                                watch.failovers.fetch_add(1, Ordering::AcqRel);
                                log::info!("Redis Sentinel announces a failover: {said}");
                            }
                        }
                        Ok(None) => break,
                        Err(_) => {}
                    }
                }
            }
        }
        actix_rt::time::sleep(MAX_PAUSE).await;
        if link.strong_count() == 0 {
            return;
        }
    }
}

/// The certificate authorities of `redis.ca_file`, for a TLS URL; `None` for the system's.
fn ca_certificates(
    target: &RedisTarget,
    ca_file: Option<&str>,
) -> Result<Option<TlsCertificates>, LockError> {
    let Some(path) = ca_file else {
        return Ok(None);
    };
    if !target.tls() {
        return Err(LockError::BadUrl(
            "redis.ca_file is set but redis.url is not rediss:// or rediss+sentinel://: a CA \
             file is for TLS only"
                .to_string(),
        ));
    }
    let pem = std::fs::read(path)
        .map_err(|err| LockError::BadUrl(format!("redis.ca_file: cannot read {path}: {err}")))?;
    let certificates = rustls::pki_types::CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|err| LockError::BadUrl(format!("redis.ca_file: {path}: {err}")))?;
    if certificates.is_empty() {
        return Err(LockError::BadUrl(format!(
            "redis.ca_file: {path} holds no PEM certificate"
        )));
    }
    Ok(Some(TlsCertificates {
        client_tls: None,
        root_cert: Some(pem),
    }))
}

/// The client that asks `target`'s sentinels for the primary and dials it.
fn sentinel_client(
    target: SentinelTarget,
    certificates: Option<TlsCertificates>,
    settings: &RedisConfig,
) -> RedisResult<SentinelClient> {
    let SentinelTarget {
        sentinels,
        service,
        node,
        tls,
    } = target;
    let mut builder = SentinelClientBuilder::new(sentinels, service, SentinelServerType::Master)?
        .set_client_to_redis_db(node.db());
    if let Some(username) = node.username() {
        builder = builder.set_client_to_redis_username(username);
    }
    if let Some(password) = node.password() {
        builder = builder.set_client_to_redis_password(password);
    }
    if let Some(password) = &settings.sentinel_password {
        builder = builder.set_client_to_sentinel_password(password);
    }
    if tls {
        builder = builder
            .set_client_to_redis_tls_mode(TlsMode::Secure)
            .set_client_to_sentinel_tls_mode(TlsMode::Secure);
        if let Some(certificates) = certificates {
            builder = builder
                .set_client_to_redis_certificates(certificates.clone())
                .set_client_to_sentinel_certificates(certificates);
        }
    }
    builder.build()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refused_credentials_answers_and_silence_are_told_apart() {
        let server = |code: &str, detail: &str| {
            redis::make_extension_error(code.to_string(), Some(detail.to_string()))
        };
        let refused = [
            redis::RedisError::from((
                ErrorKind::AuthenticationFailed,
                "Password authentication failed",
            )),
            server("NOAUTH", "Authentication required."),
            server(
                "WRONGPASS",
                "invalid username-password pair or user is disabled.",
            ),
            redis::RedisError::from((
                ErrorKind::Server(ServerErrorKind::ResponseError),
                "An error was signalled by the server",
                "invalid password".to_string(),
            )),
        ];
        for err in refused {
            assert_eq!(verdict(&err), Verdict::Refused, "{err}");
        }
        let answered = [
            server(
                "WRONGTYPE",
                "Operation against a key holding the wrong kind of value",
            ),
            redis::RedisError::from((
                ErrorKind::Server(ServerErrorKind::NoScript),
                "No matching script",
            )),
        ];
        for err in answered {
            assert_eq!(verdict(&err), Verdict::Answered, "{err}");
        }
        let silent = [
            std::io::ErrorKind::ConnectionRefused,
            std::io::ErrorKind::ConnectionReset,
            std::io::ErrorKind::TimedOut,
        ]
        .map(|kind| redis::RedisError::from(std::io::Error::from(kind)));
        // A primary demoted to a replica takes no write: its connections are of no more use.
        let demoted = redis::RedisError::from((
            ErrorKind::Server(ServerErrorKind::ReadOnly),
            "You can't write against a read only replica.",
        ));
        for err in silent.into_iter().chain([demoted]) {
            assert_eq!(verdict(&err), Verdict::OutOfReach, "{err}");
        }
        let unknown_issuer = std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            rustls::Error::InvalidCertificate(rustls::CertificateError::UnknownIssuer),
        );
        assert_eq!(
            verdict(&redis::RedisError::from(unknown_issuer)),
            Verdict::Untrusted
        );
    }

    #[test]
    fn tries_back_off_to_the_heartbeats_interval() {
        let pauses: Vec<u64> = std::iter::successors(Some(FIRST_PAUSE), |p| Some(next_pause(*p)))
            .take(7)
            .map(|p| p.as_millis() as u64)
            .collect();
        assert_eq!(pauses, [100, 200, 400, 800, 1600, 2000, 2000]);
    }
}
