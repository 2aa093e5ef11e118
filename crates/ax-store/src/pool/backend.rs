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
    /// A `mysql://` URL: the servers it lists, tried in order (see [`MysqlHosts`]).
    Mysql(MysqlHosts),
    /// A `postgres://` or `postgresql://` URL, as tokio-postgres reads it.
    Postgres(PostgresUrl),
}

/// A PostgreSQL URL, checked: a host, a database and an `sslmode` ax can honour.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PostgresUrl {
    /// The URL for the driver (without `sslrootcert`, which tokio-postgres does not read).
    url: String,
    pub ssl: SslMode,
    /// A PEM file of the certificate authorities to trust besides the web PKI's
    /// (`sslrootcert=PATH`).
    pub root_cert: Option<String>,
}

/// Whether a PostgreSQL connection is encrypted: `require`d (the server's certificate checked
/// against the trusted authorities), `prefer`red (the default: encrypted and checked if that
/// works, else in plain text), or `disable`d.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SslMode {
    Disable,
    Prefer,
    Require,
}

impl PostgresUrl {
    /// The URL the driver connects by.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The name of its database.
    pub fn database(&self) -> String {
        url::Url::parse(&self.url)
            .ok()
            .as_ref()
            .and_then(database_name)
            .unwrap_or_default()
    }

    /// The same server, its `postgres` database: to create the one the URL names.
    pub(crate) fn maintenance(&self) -> PostgresUrl {
        let mut url = url::Url::parse(&self.url).expect("checked when parsed");
        url.set_path("/postgres");
        PostgresUrl {
            url: url.into(),
            ..self.clone()
        }
    }
}

/// The servers of a `mysql://` URL, in the URL's order, each as the URL ax connects to it by:
/// over TCP to its host and port, unless the URL names a socket itself (`socket=`, or
/// `prefer_socket=true`). `mysql://u:p@h1:3306,h2:3306/db` lists two, sharing the user, the
/// database and the options.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MysqlHosts(Vec<String>);

impl MysqlHosts {
    /// One URL per server, in order.
    pub fn urls(&self) -> &[String] {
        &self.0
    }

    /// The same servers, with no database chosen: to reach them before it exists.
    pub(crate) fn servers(&self) -> MysqlHosts {
        let servers = self.0.iter().filter_map(|url| {
            let mut url = url::Url::parse(url).ok()?;
            url.set_path("");
            Some(url.into())
        });
        MysqlHosts(servers.collect())
    }
}

/// How a store URL is written, as refusals say it.
const URL_FORMS: &str = "store.url must be sqlite://PATH, mysql://user:pass@host:port/db \
                         (several servers: mysql://user:pass@host1:port,host2:port/db) or \
                         postgres://user:pass@host:port/db[?sslmode=disable|prefer|require]";

impl StoreUrl {
    /// Parses `sqlite://PATH`, `mysql://user:pass@host:port[,host:port…]/db` or
    /// `postgres://user:pass@host:port/db[?sslmode=…]`.
    pub fn parse(url: &str) -> Result<Self, StoreError> {
        let refuse =
            |why: &str| StoreError::BadUrl(format!("`{}` ({why}): {URL_FORMS}", redacted(url)));
        if let Some(path) = url.strip_prefix("sqlite://") {
            if path.is_empty() {
                return Err(refuse("no path"));
            }
            Ok(StoreUrl::Sqlite(path.to_string()))
        } else if let Some(rest) = url.strip_prefix("mysql://") {
            mysql_hosts(rest)
                .map(StoreUrl::Mysql)
                .map_err(|why| refuse(&why))
        } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            postgres_url(url)
                .map(StoreUrl::Postgres)
                .map_err(|why| refuse(&why))
        } else {
            Err(refuse("neither sqlite://, mysql:// nor postgres://"))
        }
    }
}

/// The part of a URL after `scheme://` cut in its user (with `@`, if any), its hosts and what
/// follows them (path, query, fragment).
fn authority(rest: &str) -> (&str, &str, &str) {
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(end);
    match authority.rfind('@') {
        Some(at) => (&authority[..=at], &authority[at + 1..], tail),
        None => ("", authority, tail),
    }
}

/// The servers of a MySQL URL (what follows `mysql://`), or why it names none.
fn mysql_hosts(rest: &str) -> Result<MysqlHosts, String> {
    let (user, hosts, tail) = authority(rest);
    if hosts.is_empty() {
        return Err("no host".into());
    }
    let urls = hosts
        .split(',')
        .map(|host| {
            if host.is_empty() {
                return Err("an empty host in the list".to_string());
            }
            let parsed = url::Url::parse(&format!("mysql://{user}{host}{tail}"))
                .map_err(|err| format!("`{host}`: {err}"))?;
            if parsed.host_str().is_none() {
                return Err(format!("`{host}` is no host"));
            }
            if database_name(&parsed).is_none() {
                return Err("no database name after the /".into());
            }
            Ok(tcp_unless_socket(parsed))
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(MysqlHosts(urls))
}
/// A PostgreSQL URL checked: one host, a database, an `sslmode` of `disable`, `prefer` (the
/// default) or `require`, and `sslrootcert`. tokio-postgres's other forms (`host=… dbname=…`,
/// several hosts) are refused: ax prints and redacts URLs.
fn postgres_url(url: &str) -> Result<PostgresUrl, String> {
    let mut parsed = url::Url::parse(url).map_err(|err| err.to_string())?;
    if parsed.host_str().is_none_or(str::is_empty) {
        return Err("no host".into());
    }
    if database_name(&parsed).is_none() {
        return Err("no database name after the /".into());
    }
    let (mut ssl, mut root_cert) = (SslMode::Prefer, None);
    let mut kept = Vec::new();
    for (key, value) in parsed.query_pairs() {
        match (&*key, &*value) {
            ("sslmode", "require") => ssl = SslMode::Require,
            ("sslmode", "prefer") => ssl = SslMode::Prefer,
            ("sslmode", "disable") => ssl = SslMode::Disable,
            ("sslmode", other) => {
                return Err(format!(
                    "sslmode `{other}` is not one of disable, prefer, require"
                ))
            }
            ("sslrootcert", path) => root_cert = Some(path.to_string()),
            _ => kept.push((key.to_string(), value.to_string())),
        }
    }
    parsed.set_query(None);
    if !kept.is_empty() {
        parsed.query_pairs_mut().extend_pairs(kept);
    }
    Ok(PostgresUrl {
        url: parsed.into(),
        ssl,
        root_cert,
    })
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

/// A store URL fit to print: its password, if any, replaced by `***` (for every host of a
/// MySQL URL, which shares one user).
pub fn redacted(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let (user, hosts, tail) = authority(rest);
    match user.split_once(':') {
        Some((name, _)) => format!("{scheme}://{name}:***@{hosts}{tail}"),
        None => url.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mysql_urls(url: &str) -> Vec<String> {
        match StoreUrl::parse(url) {
            Ok(StoreUrl::Mysql(hosts)) => hosts.urls().to_vec(),
            other => panic!("{url}: {other:?}"),
        }
    }

    fn mysql_url(url: &str) -> String {
        let urls = mysql_urls(url);
        assert_eq!(urls.len(), 1, "{url}");
        urls[0].clone()
    }

    #[test]
    fn a_mysql_url_lists_its_servers_in_order() {
        assert_eq!(
            mysql_urls("mysql://ax:s%40cret@db1:3306,db2:3307,[::1]:3308,10.0.0.4/axdb?pool_min=1"),
            [
                "mysql://ax:s%40cret@db1:3306/axdb?pool_min=1&prefer_socket=false",
                "mysql://ax:s%40cret@db2:3307/axdb?pool_min=1&prefer_socket=false",
                "mysql://ax:s%40cret@[::1]:3308/axdb?pool_min=1&prefer_socket=false",
                "mysql://ax:s%40cret@10.0.0.4/axdb?pool_min=1&prefer_socket=false",
            ]
        );
        assert_eq!(
            mysql_urls("mysql://root@127.0.0.1:1,127.0.0.1:3306/ax"),
            [
                "mysql://root@127.0.0.1:1/ax?prefer_socket=false",
                "mysql://root@127.0.0.1:3306/ax?prefer_socket=false",
            ]
        );
        assert_eq!(
            mysql_url("mysql://root@[::1]:3306/ax"),
            "mysql://root@[::1]:3306/ax?prefer_socket=false"
        );
    }

    #[test]
    fn a_bad_store_url_is_refused_naming_the_setting_and_hiding_the_password() {
        for (url, why) in [
            ("mysql://ax:pw@db1,,db2/ax", "an empty host in the list"),
            ("mysql://ax:pw@db1,/ax", "an empty host in the list"),
            ("mysql://ax:pw@db1:3306,db2:99999/ax", "`db2:99999`"),
            ("mysql://ax:pw@[::1/ax", "`[::1`"),
            ("mysql://ax:pw@/ax", "no host"),
            ("mysql://ax:pw@db1,db2", "no database name"),
            ("mysql://ax:pw@db1:3306,db2:3306/", "no database name"),
            ("sqlite://", "no path"),
            (
                "redis://ax:pw@db/ax",
                "neither sqlite://, mysql:// nor postgres://",
            ),
            ("postgres://ax:pw@/ax", "empty host"),
            ("postgresql://ax:pw@db:5432", "no database name"),
            (
                "postgres://ax:pw@db/ax?sslmode=verify-full",
                "sslmode `verify-full`",
            ),
        ] {
            let message = match StoreUrl::parse(url) {
                Err(err @ StoreError::BadUrl(_)) => err.to_string(),
                other => panic!("{url}: {other:?}"),
            };
            assert!(message.contains(why), "{url}: {message}");
            assert!(message.contains("store.url must be"), "{url}: {message}");
            assert!(!message.contains(":pw@"), "{url}: {message}");
        }
    }

    #[test]
    fn a_postgres_url_names_its_database_and_how_it_is_encrypted() {
        for (url, driver, database, ssl, root_cert) in [
            (
                "postgres://postgres@127.0.0.1:5432/ax",
                "postgres://postgres@127.0.0.1:5432/ax",
                "ax",
                SslMode::Prefer,
                None,
            ),
            (
                "postgresql://ax:s%40cret@db/axdb?sslmode=require&sslrootcert=/etc/ax/ca.pem",
                "postgresql://ax:s%40cret@db/axdb",
                "axdb",
                SslMode::Require,
                Some("/etc/ax/ca.pem"),
            ),
            (
                "postgres://ax@db/ax?connect_timeout=5&sslmode=disable",
                "postgres://ax@db/ax?connect_timeout=5",
                "ax",
                SslMode::Disable,
                None,
            ),
        ] {
            match StoreUrl::parse(url) {
                Ok(StoreUrl::Postgres(parsed)) => {
                    assert_eq!(parsed.url(), driver);
                    assert_eq!(parsed.database(), database, "{url}");
                    assert_eq!(parsed.ssl, ssl, "{url}");
                    assert_eq!(parsed.root_cert.as_deref(), root_cert, "{url}");
                    assert!(parsed.maintenance().url().contains("/postgres"), "{url}");
                }
                other => panic!("{url}: {other:?}"),
            }
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
        assert_eq!(
            redacted("mysql://ax:s3cret@db1:3306,[::1]:3307/ax?x=a@b"),
            "mysql://ax:***@db1:3306,[::1]:3307/ax?x=a@b"
        );
        assert_eq!(redacted("mysql://ax:p@ss@db/ax"), "mysql://ax:***@db/ax");
    }
}
