//! `redis.url`, read: one Redis (`redis://`, `rediss://` over TLS, or a Unix socket), or the
//! primary that Redis Sentinel names for a service (`redis+sentinel://`, `rediss+sentinel://`
//! over TLS). The URL's user and password are the data nodes' (the primary's); sentinels that
//! ask for a password of their own get `redis.sentinel_password`, as go-redis, redis-py, Lettuce
//! and Spring keep the two apart.

use redis::{ConnectionAddr, ConnectionInfo, IntoConnectionInfo, RedisConnectionInfo};

/// What `redis.url` must be, in the words that follow the key.
pub const RULE: &str = "must be redis://[user:password@]host:port[/DB], rediss://… (TLS) or \
                        redis+sentinel://[user:password@]host:port,host:port,…/SERVICE[/DB] \
                        (rediss+sentinel://… over TLS)";

/// The port of a sentinel whose address names none.
const SENTINEL_PORT: u16 = 26379;

/// Where `redis.url` points.
#[derive(Debug, Clone)]
pub enum RedisTarget {
    /// One Redis, as the redis crate reads its URL.
    Node(ConnectionInfo),
    /// The primary of a service, as the sentinels name it.
    Sentinel(SentinelTarget),
}

/// A `redis+sentinel://` URL, read.
#[derive(Debug, Clone)]
pub struct SentinelTarget {
    /// The sentinels, asked in turn (`TcpTls` ones over TLS).
    pub sentinels: Vec<ConnectionAddr>,
    /// The name the sentinels monitor the primary under (`sentinel monitor NAME …`).
    pub service: String,
    /// The database, user and password of the data nodes.
    pub node: RedisConnectionInfo,
    /// Whether the sentinels and the data nodes are reached over TLS.
    pub tls: bool,
}

impl RedisTarget {
    /// `url` read, or the words after the key that refuse it.
    pub fn parse(url: &str) -> Result<RedisTarget, String> {
        let url = url.trim();
        let (scheme, rest) = url
            .split_once("://")
            .ok_or_else(|| format!("{RULE} (no scheme)"))?;
        match scheme {
            "redis+sentinel" => parse_sentinel(rest, false).map(RedisTarget::Sentinel),
            "rediss+sentinel" => parse_sentinel(rest, true).map(RedisTarget::Sentinel),
            "redis" | "rediss" | "unix" | "redis+unix" => url
                .into_connection_info()
                .map(RedisTarget::Node)
                .map_err(|err| format!("{RULE} ({})", err.detail().unwrap_or("unreadable"))),
            other => Err(format!("{RULE} (`{other}://` is none of them)")),
        }
    }

    /// Whether Redis is reached over TLS.
    pub fn tls(&self) -> bool {
        match self {
            RedisTarget::Node(info) => matches!(info.addr(), ConnectionAddr::TcpTls { .. }),
            RedisTarget::Sentinel(target) => target.tls,
        }
    }

    /// Redis as logs and errors name it: its address, or the service and its sentinels; never
    /// a credential.
    pub fn shown(&self) -> String {
        match self {
            RedisTarget::Node(info) => info.addr().to_string(),
            RedisTarget::Sentinel(target) => {
                let sentinels: Vec<String> =
                    target.sentinels.iter().map(ToString::to_string).collect();
                format!(
                    "the primary of `{}` (sentinels {})",
                    target.service,
                    sentinels.join(",")
                )
            }
        }
    }
}

/// Whether `url` is a `redis.url` ax takes.
pub fn is_redis_url(url: &str) -> bool {
    RedisTarget::parse(url).is_ok()
}

/// `[user:password@]host:port,…/SERVICE[/DB]`, the part after `redis+sentinel://`.
fn parse_sentinel(rest: &str, tls: bool) -> Result<SentinelTarget, String> {
    let refuse = |why: &str| format!("{RULE} ({why})");
    if rest.contains(['?', '#']) {
        return Err(refuse("a sentinel URL takes no ?options or #fragment"));
    }
    let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
    let (credentials, hosts) = match authority.rsplit_once('@') {
        Some((credentials, hosts)) => (Some(credentials), hosts),
        None => (None, authority),
    };
    let scheme = if tls { "rediss" } else { "redis" };
    let sentinels = hosts
        .split(',')
        .map(|host| sentinel_addr(scheme, host.trim()).ok_or(host))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|host| refuse(&format!("`{host}` is no sentinel host:port")))?;
    let mut segments = path.split('/');
    let service = segments.next().unwrap_or_default();
    if service.is_empty() {
        return Err(refuse(
            "no SERVICE: the name the sentinels monitor the primary under",
        ));
    }
    let db = match segments.next() {
        None | Some("") => 0,
        Some(db) => db
            .parse::<u16>()
            .map_err(|_| refuse(&format!("`{db}` is no database number")))?,
    };
    if segments.any(|segment| !segment.is_empty()) {
        return Err(refuse("nothing may follow /SERVICE/DB"));
    }
    let node = match credentials {
        // The redis crate reads them as for one Redis: percent-decoded, the user optional.
        Some(credentials) => format!("redis://{credentials}@localhost")
            .into_connection_info()
            .map_err(|_| refuse("the user or password is unreadable"))?
            .redis_settings()
            .clone(),
        None => RedisConnectionInfo::default(),
    };
    Ok(SentinelTarget {
        sentinels,
        service: service.to_string(),
        node: node.set_db(i64::from(db)),
        tls,
    })
}

/// `host:port`, `host`, `[v6]:port` or `[v6]` as a sentinel's address (no port: 26379).
fn sentinel_addr(scheme: &str, host: &str) -> Option<ConnectionAddr> {
    if host.is_empty() || host.contains(['@', '/']) {
        return None;
    }
    let has_port = match host.rsplit_once(']') {
        Some((_, after)) => !after.is_empty(),
        None => host.contains(':'),
    };
    let url = if has_port {
        format!("{scheme}://{host}")
    } else {
        format!("{scheme}://{host}:{SENTINEL_PORT}")
    };
    let info = url.into_connection_info().ok()?;
    matches!(
        info.addr(),
        ConnectionAddr::Tcp(..) | ConnectionAddr::TcpTls { .. }
    )
    .then(|| info.addr().clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sentinel(url: &str) -> SentinelTarget {
        match RedisTarget::parse(url) {
            Ok(RedisTarget::Sentinel(target)) => target,
            other => panic!("{url}: {other:?}"),
        }
    }

    fn hosts(target: &SentinelTarget) -> Vec<String> {
        target.sentinels.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn a_sentinel_url_names_its_sentinels_service_database_and_credentials() {
        let target = sentinel("redis+sentinel://ax:s%40cret@h1:26379,h2:26380,10.0.0.3/mymaster/3");
        assert_eq!(hosts(&target), ["h1:26379", "h2:26380", "10.0.0.3:26379"]);
        assert_eq!(target.service, "mymaster");
        assert_eq!(target.node.db(), 3);
        assert_eq!(target.node.username(), Some("ax"));
        assert_eq!(target.node.password(), Some("s@cret"));
        assert!(!target.tls);
        assert!(target
            .sentinels
            .iter()
            .all(|addr| matches!(addr, ConnectionAddr::Tcp(..))));

        let bare = sentinel("redis+sentinel://[::1]:26379,[::1]/mymaster");
        assert_eq!(hosts(&bare), ["::1:26379", "::1:26379"]);
        assert_eq!((bare.node.db(), bare.node.password()), (0, None));
        let password_only = sentinel("redis+sentinel://:pw@h1/m/");
        assert_eq!(password_only.node.username(), None);
        assert_eq!(password_only.node.password(), Some("pw"));
    }

    #[test]
    fn rediss_sentinel_reaches_sentinels_and_nodes_over_tls() {
        let target = sentinel("rediss+sentinel://h1:26379,h2:26379/m");
        assert!(target.tls);
        assert!(target
            .sentinels
            .iter()
            .all(|addr| matches!(addr, ConnectionAddr::TcpTls { .. })));
        assert!(RedisTarget::parse("rediss+sentinel://h1/m").unwrap().tls());
    }

    #[test]
    fn one_redis_is_read_as_the_redis_crate_reads_it() {
        for (url, tls) in [
            ("redis://127.0.0.1:6379", false),
            ("redis://:pw@127.0.0.1:6379/9", false),
            ("rediss://ax:pw@redis.example:6380/1", true),
        ] {
            let target = RedisTarget::parse(url).expect(url);
            assert!(matches!(target, RedisTarget::Node(_)), "{url}");
            assert_eq!(target.tls(), tls, "{url}");
        }
    }

    #[test]
    fn redis_is_shown_without_its_credentials() {
        let node = RedisTarget::parse("rediss://ax:topsecret@h:6380/1").unwrap();
        assert_eq!(node.shown(), "h:6380");
        let target =
            RedisTarget::parse("redis+sentinel://ax:topsecret@h1:1,h2:2/mymaster/0").unwrap();
        assert_eq!(
            target.shown(),
            "the primary of `mymaster` (sentinels h1:1,h2:2)"
        );
    }

    #[test]
    fn what_is_no_redis_url_is_refused_with_the_rule() {
        for (url, why) in [
            ("http://127.0.0.1:6379", "`http://` is none of them"),
            ("127.0.0.1:6379", "no scheme"),
            ("redis+sentinel://h1:26379", "no SERVICE"),
            ("redis+sentinel://h1:26379/", "no SERVICE"),
            (
                "redis+sentinel://h1:26379,/m",
                "`` is no sentinel host:port",
            ),
            ("redis+sentinel://h1:port/m", "`h1:port` is no sentinel"),
            ("redis+sentinel://h1/m/x", "`x` is no database number"),
            ("redis+sentinel://h1/m/0/more", "nothing may follow"),
            ("redis+sentinel://h1/m?db=1", "no ?options"),
            ("redis+sentinel://:pw@/m", "`` is no sentinel host:port"),
        ] {
            let err = RedisTarget::parse(url).expect_err(url);
            assert!(err.starts_with(RULE), "{url}: {err}");
            assert!(err.contains(why), "{url}: {err}");
            assert!(!err.contains("pw"), "{url}: {err}");
        }
    }
}
