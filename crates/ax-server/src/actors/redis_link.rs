//! The link to Redis that the fire lock, the cluster's heartbeats and the alerts share: a pool
//! that needs no answer to start, and an outage remembered. Redis keeps nothing ax cannot
//! rebuild (locks of 3 s, heartbeats of 10 s), so a process that starts while it is out of
//! reach runs as one whose Redis went away: it fires unlocked, on the database's
//! compare-and-set. While Redis is out of reach every call fails at once, so no fire batch
//! waits on a dial; one task alone tries it again, with back-off, and brings the link back up.

use std::sync::{Arc, Weak};
use std::time::Duration;

use bb8_redis::RedisConnectionManager;
use redis::aio::MultiplexedConnection;
use redis::{ErrorKind, IntoConnectionInfo, RedisResult};
use tokio::sync::watch;

/// A pool of Redis connections.
pub type RedisPool = bb8::Pool<RedisConnectionManager>;

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
    #[error("invalid Redis URL: {0}")]
    BadUrl(String),
    /// No answer: Redis is down, unreachable, or too slow to wait for.
    #[error("Redis unavailable: {0}")]
    Unavailable(String),
    /// Redis answered and refused the credentials `redis.url` gives (none shown): a setting to
    /// correct, not an outage to wait out.
    #[error("redis.url: Redis at {addr} refused the credentials it gives: {why}")]
    Refused { addr: String, why: String },
    /// Redis answered a command with an error: the command's fault, not the link's.
    #[error("Redis refused a command: {0}")]
    Command(String),
}

impl LockError {
    /// Whether Redis is to be counted out of reach until a try gets an answer.
    fn is_outage(&self) -> bool {
        matches!(self, LockError::Unavailable(_) | LockError::Refused { .. })
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
    /// `host:port` of the URL, to name Redis without its credentials.
    addr: String,
    /// Whether Redis answers: false from a call that got no answer until a try gets one.
    up: watch::Sender<bool>,
}

impl RedisLink {
    /// A link to the Redis at `url`, whether or not it answers now (one try, of at most a
    /// second, says which). Fails only on what waiting cannot mend: a URL that is no Redis URL,
    /// or credentials Redis refuses. Starts the task that brings the link back after an
    /// outage; it ends with the last clone of the link. Runs inside an actix system.
    pub async fn connect(url: &str) -> Result<RedisLink, LockError> {
        let bad_url = |err: redis::RedisError| LockError::BadUrl(err.to_string());
        let addr = url
            .into_connection_info()
            .map_err(bad_url)?
            .addr()
            .to_string();
        let manager = RedisConnectionManager::new(url).map_err(bad_url)?;
        let pool = bb8::Pool::builder()
            .max_size(POOL_SIZE)
            // Every call is bounded by its own wait; trying a failed dial again is the link's
            // reconnect task's, with back-off, not the pool's behind the callers' backs.
            .retry_connection(false)
            .build_unchecked(manager);
        let shared = Arc::new(Shared {
            pool,
            addr,
            up: watch::channel(true).0,
        });
        match shared.probe().await {
            Ok(()) => {}
            Err(err @ LockError::Refused { .. }) => return Err(err),
            Err(err) => shared.lost(&err),
        }
        let changes = shared.up.subscribe();
        actix_rt::spawn(reconnect(Arc::downgrade(&shared), changes));
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
            op(&mut conn).await.map_err(|err| shared.failure(err))
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
            redis::cmd("PING").query_async::<String>(&mut conn).await?;
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
                Err(err @ LockError::Refused { .. }) => log::warn!("{err}"),
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
    /// No answer: a dial or a connection failed.
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
        ErrorKind::Server(_) | ErrorKind::Extension | ErrorKind::UnexpectedReturnType => {
            Verdict::Answered
        }
        _ => Verdict::OutOfReach,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use redis::ServerErrorKind;

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
        for err in silent {
            assert_eq!(verdict(&err), Verdict::OutOfReach, "{err}");
        }
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
