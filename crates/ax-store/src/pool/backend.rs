//! Which database a store URL names, how it is printed, and how each SQLite connection is set
//! up.

use std::time::Duration;

use super::error::StoreError;

/// How long a SQLite write waits for the file's lock (its busy timeout), or for its turn among
/// the writes of this process (`write_turns`).
pub(crate) const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// SQLite settings applied to every connection: WAL so readers never block the writer, a busy
/// timeout so concurrent writers wait instead of failing, full sync so a committed run
/// survives a crash, statement journals in memory (a statement's own undo, of no use after a
/// crash), not a file made and deleted for each statement that needs one, and a checkpoint
/// every 10,000 WAL pages (40 MB) rather than 1,000: the pages every second's runs change
/// again (the tasks', the newest index pages) are copied into the database once a checkpoint,
/// so fewer checkpoints copy fewer of them.
pub(crate) fn sqlite_pragmas() -> String {
    format!(
        "PRAGMA journal_mode = WAL; PRAGMA busy_timeout = {}; PRAGMA synchronous = FULL; \
         PRAGMA foreign_keys = ON; PRAGMA temp_store = MEMORY; PRAGMA wal_autocheckpoint = 10000;",
        BUSY_TIMEOUT.as_millis()
    )
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

pub(crate) fn database_name(url: &url::Url) -> Option<String> {
    let name = url.path().trim_start_matches('/');
    (!name.is_empty()).then(|| name.to_string())
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
