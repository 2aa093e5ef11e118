//! Connecting to one of several MySQL/MariaDB servers (a Galera cluster's nodes, a primary and
//! its stand-by): the one that answered last, else the next ones in the URL's order.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use diesel::ConnectionError;
use diesel_async::{AsyncConnection, AsyncMysqlConnection};

use super::backend::{redacted, MysqlHosts};
use crate::queries::wsrep;

/// How long one server may take to accept a connection and greet ax: a server that is down
/// refuses at once, but one that is unreachable (a host gone from the network) never answers,
/// and each second spent on it is a second without fires.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// Opens connections to the first server of a list that answers. Cloned, it shares which
/// server answered last, so every connection after a failover goes straight to the server that
/// took over instead of waiting on a dead one first.
#[derive(Debug, Clone)]
pub struct Dialer {
    hosts: Arc<MysqlHosts>,
    last_good: Arc<AtomicUsize>,
}

impl Dialer {
    pub fn new(hosts: MysqlHosts) -> Dialer {
        Dialer {
            hosts: Arc::new(hosts),
            last_good: Arc::new(AtomicUsize::new(0)),
        }
    }

    /// The URL of the server that answered last (the first one before any did).
    pub fn current(&self) -> &str {
        &self.hosts.urls()[self.answered()]
    }

    /// The place in the URL of the server that answered last.
    pub(crate) fn answered(&self) -> usize {
        self.last_good.load(Ordering::Relaxed)
    }

    /// A connection to the server that answered last or, if it does not answer within
    /// [`CONNECT_TIMEOUT`] or cannot serve (a Galera node out of its cluster), to the next one
    /// that does, in the URL's order from there (wrapping round). Fails with every server's
    /// reason when none answers.
    pub async fn connect(&self) -> Result<AsyncMysqlConnection, ConnectionError> {
        let urls = self.hosts.urls();
        let start = self.answered();
        let mut failures = Vec::new();
        for index in (start..urls.len()).chain(0..start) {
            let url = &urls[index];
            let failure = match tokio::time::timeout(CONNECT_TIMEOUT, open(url)).await {
                Ok(Ok(conn)) => {
                    if index != start {
                        log::warn!(
                            "store: connected to {} ({} failed)",
                            redacted(url),
                            failures.join("; ")
                        );
                    }
                    self.last_good.store(index, Ordering::Relaxed);
                    return Ok(conn);
                }
                Ok(Err(why)) => why,
                Err(_) => format!("no answer within {CONNECT_TIMEOUT:?}"),
            };
            failures.push(format!("{}: {failure}", redacted(url)));
        }
        Err(ConnectionError::BadConnection(failures.join("; ")))
    }
}

/// A connection to the server at `url`, if it can serve ax now.
async fn open(url: &str) -> Result<AsyncMysqlConnection, String> {
    let mut conn = AsyncMysqlConnection::establish(url)
        .await
        .map_err(|err| err.to_string())?;
    match wsrep::unready(&mut conn).await {
        Ok(None) => Ok(conn),
        Ok(Some(why)) => Err(why),
        Err(err) => Err(err.to_string()),
    }
}
