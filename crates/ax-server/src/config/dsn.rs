//! The design document's store keys, as ax's URLs: `store.mysql_dsn`, a DSN of Go's MySQL
//! driver (`user:pass@tcp(host:port)/db?params`), and `store.redis_addr`, a Redis `host:port`
//! with an optional `/DB` index.

/// The form of a Go MySQL DSN, as refusals name it.
const DSN_FORM: &str = "user:pass@tcp(host:port)/db";

/// Options of Go's driver that only shape the Go client: ax reads and writes times as UTC
/// itself, its connections talk utf8mb4, and it keeps its own time-outs. Any other option
/// would change how the server is reached (`tls`, …), so it is refused rather than dropped.
const IGNORED_PARAMS: &[&str] = &[
    "charset",
    "collation",
    "parseTime",
    "loc",
    "timeout",
    "readTimeout",
    "writeTimeout",
];

/// Go's default MySQL port, taken when the address names none.
const MYSQL_PORT: u16 = 3306;
/// Redis's default port, taken when `redis_addr` names none.
const REDIS_PORT: u16 = 6379;

/// `user:pass@tcp(host:port)/db?params` as `mysql://user:pass@host:port/db`, read the way Go's
/// driver reads it: the database after the last `/`, the credentials before the last `@`, the
/// password after the first `:` of those; no address is `127.0.0.1:3306`. On refusal: the
/// rule, in the words that follow the key.
pub fn mysql_url(dsn: &str) -> Result<String, String> {
    let refuse = |why: &str| format!("must be {DSN_FORM}, as Go's MySQL driver takes it ({why})");
    let (head, tail) = dsn.rsplit_once('/').ok_or_else(|| refuse("no /db"))?;
    let (database, params) = tail.split_once('?').unwrap_or((tail, ""));
    if database.is_empty() {
        return Err(refuse("no database name after the /"));
    }
    for param in params.split('&').filter(|param| !param.is_empty()) {
        let (name, _) = param
            .split_once('=')
            .ok_or_else(|| refuse(&format!("`{param}` is no name=value")))?;
        if !IGNORED_PARAMS.contains(&name) {
            return Err(refuse(&format!(
                "ax has no equivalent of the option `{name}`: set store.url instead"
            )));
        }
    }
    let (credentials, address) = match head.rsplit_once('@') {
        Some((credentials, address)) => (credentials, address),
        None => ("", head),
    };
    let (user, password) = match credentials.split_once(':') {
        Some((user, password)) => (user, Some(password)),
        None => (credentials, None),
    };
    let (protocol, addr) = match address.split_once('(') {
        Some((protocol, rest)) => {
            let addr = rest
                .strip_suffix(')')
                .ok_or_else(|| refuse("an address opened with ( is not closed with )"))?;
            (protocol, addr)
        }
        None => (address, ""),
    };
    match protocol {
        "" | "tcp" | "tcp4" | "tcp6" => {}
        "unix" => {
            return Err(refuse(
                "a Unix socket is not taken here: set store.url to mysql://user@localhost/db?socket=PATH",
            ))
        }
        other => return Err(refuse(&format!("`{other}` is not tcp"))),
    }
    let addr = if addr.is_empty() { "127.0.0.1" } else { addr };
    let (host, port) = host_port(addr, MYSQL_PORT).map_err(|why| refuse(&why))?;
    let mut url = url::Url::parse(&format!("mysql://{host}:{port}/"))
        .map_err(|_| refuse(&format!("`{addr}` is no host:port")))?;
    // Go's DSN holds them as typed; the URL holds them percent-encoded.
    let credentials_set = url.set_username(user).is_ok() && url.set_password(password).is_ok();
    if !credentials_set {
        return Err(refuse("the user or password cannot be put in a URL"));
    }
    url.set_path(database);
    Ok(url.to_string())
}

/// `host:port` as `redis://host:port`, and `host:port/DB` (a database index, one per
/// deployment as production.md advises) as `redis://host:port/DB`; no port is Redis's own,
/// 6379.
pub fn redis_url(addr: &str) -> Result<String, String> {
    let refuse = |why: String| {
        format!(
            "must be host:port or host:port/DB, as in 127.0.0.1:6379 or 127.0.0.1:6379/9 ({why})"
        )
    };
    let addr = addr.trim();
    let (address, database) = match addr.rsplit_once('/') {
        Some((address, db)) if !db.is_empty() && db.bytes().all(|b| b.is_ascii_digit()) => {
            (address, Some(db))
        }
        _ => (addr, None),
    };
    let (host, port) = host_port(address, REDIS_PORT).map_err(refuse)?;
    match database {
        None => Ok(format!("redis://{host}:{port}")),
        Some(db) => {
            let db: u32 = db
                .parse()
                .map_err(|_| refuse(format!("the database index `{db}` is too large")))?;
            Ok(format!("redis://{host}:{port}/{db}"))
        }
    }
}

/// A DSN as an error shows it: the password masked.
pub fn redacted(dsn: &str) -> String {
    let Some((head, tail)) = dsn.rsplit_once('/') else {
        return dsn.to_string();
    };
    match head.rsplit_once('@') {
        Some((credentials, address)) => match credentials.split_once(':') {
            Some((user, _)) => format!("{user}:***@{address}/{tail}"),
            None => dsn.to_string(),
        },
        None => dsn.to_string(),
    }
}

/// `host:port`, `host`, `[v6]:port` or `[v6]`: the host (an IPv6 one in brackets) and the port,
/// `default_port` when none is given.
fn host_port(addr: &str, default_port: u16) -> Result<(String, u16), String> {
    let bad = || format!("`{addr}` is no host:port");
    let (host, port) = match addr.strip_prefix('[') {
        Some(rest) => {
            let (v6, after) = rest.split_once(']').ok_or_else(bad)?;
            let port = match after {
                "" => None,
                after => Some(after.strip_prefix(':').ok_or_else(bad)?),
            };
            (format!("[{v6}]"), port)
        }
        None => match addr.split_once(':') {
            Some((_, port)) if port.contains(':') => return Err(bad()),
            Some((host, port)) => (host.to_string(), Some(port)),
            None => (addr.to_string(), None),
        },
    };
    let port = match port {
        Some(port) => port
            .parse::<u16>()
            .ok()
            .filter(|port| *port > 0)
            .ok_or_else(bad)?,
        None => default_port,
    };
    let plain = !host.is_empty() && !host.contains(['/', '@', '?', '#', ' ', '(', ')']);
    if !plain {
        return Err(bad());
    }
    Ok((host, port))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_design_documents_dsn_is_a_mysql_url() {
        let dsn = "user:pass@tcp(127.0.0.1:3306)/axdb?charset=utf8mb4&parseTime=true";
        assert_eq!(
            mysql_url(dsn).as_deref(),
            Ok("mysql://user:pass@127.0.0.1:3306/axdb")
        );
    }

    #[test]
    fn every_form_of_the_dsn_is_read_as_go_reads_it() {
        for (dsn, url) in [
            (
                "root@tcp(127.0.0.1:3306)/test",
                "mysql://root@127.0.0.1:3306/test",
            ),
            (
                "root:@tcp(127.0.0.1:3306)/test",
                "mysql://root@127.0.0.1:3306/test",
            ),
            ("ax@tcp(db.internal)/ax", "mysql://ax@db.internal:3306/ax"),
            ("ax:pw@tcp([::1]:3307)/ax", "mysql://ax:pw@[::1]:3307/ax"),
            ("ax:pw@tcp([::1])/ax", "mysql://ax:pw@[::1]:3306/ax"),
            ("ax:pw@/ax", "mysql://ax:pw@127.0.0.1:3306/ax"),
            ("ax:pw@tcp/ax", "mysql://ax:pw@127.0.0.1:3306/ax"),
            ("/ax", "mysql://127.0.0.1:3306/ax"),
            ("ax@tcp(h:1)/ax?", "mysql://ax@h:1/ax"),
            ("ax@tcp(h:1)/ax?loc=Local&timeout=5s", "mysql://ax@h:1/ax"),
            // The password holds what a URL must encode; Go takes it up to the last `@`.
            (
                "ax:p@ss:w#rd@tcp(h:3306)/ax",
                "mysql://ax:p%40ss%3Aw%23rd@h:3306/ax",
            ),
        ] {
            assert_eq!(mysql_url(dsn).as_deref(), Ok(url), "{dsn}");
            ax_store::StoreUrl::parse(url).unwrap_or_else(|err| panic!("{url}: {err}"));
        }
    }

    #[test]
    fn a_dsn_ax_cannot_follow_is_refused_saying_why() {
        for (dsn, why) in [
            ("ax@unix(/run/mysqld/mysqld.sock)/ax", "socket=PATH"),
            ("ax@tcp(h:3306)", "no /db"),
            ("ax@tcp(h:3306)/", "no database name"),
            ("ax@tcp(h:3306)/ax?tls=true", "`tls`"),
            ("ax@tcp(h:3306)/ax?parseTime", "no name=value"),
            ("ax@udp(h:3306)/ax", "`udp` is not tcp"),
            ("ax@tcp(h:3306/ax", "not closed"),
            ("ax@tcp(h:99999)/ax", "no host:port"),
            ("ax@tcp(h:0)/ax", "no host:port"),
            ("ax@tcp(::1)/ax", "no host:port"),
            ("ax@tcp(h:x)/ax", "no host:port"),
            ("ax@tcp(:3306)/ax", "no host:port"),
        ] {
            let err = mysql_url(dsn).expect_err(dsn);
            assert!(
                err.starts_with("must be user:pass@tcp(host:port)/db"),
                "{err}"
            );
            assert!(err.contains(why), "{dsn}: {err}");
        }
    }

    #[test]
    fn a_redis_address_is_a_redis_url() {
        for (addr, url) in [
            ("127.0.0.1:6379", "redis://127.0.0.1:6379"),
            ("redis.internal", "redis://redis.internal:6379"),
            ("[::1]:6380", "redis://[::1]:6380"),
            // A database index, one per deployment.
            ("127.0.0.1:6379/9", "redis://127.0.0.1:6379/9"),
            ("h:1/2", "redis://h:1/2"),
            ("redis.internal/0", "redis://redis.internal:6379/0"),
            ("[::1]:6380/15", "redis://[::1]:6380/15"),
            ("h:1/007", "redis://h:1/7"),
        ] {
            assert_eq!(redis_url(addr).as_deref(), Ok(url), "{addr}");
            // What redis.url takes.
            let info = redis::IntoConnectionInfo::into_connection_info(url);
            assert!(info.is_ok(), "{url}");
        }
        for bad in [
            "redis://127.0.0.1:6379",
            "h:port",
            "",
            "a b:1",
            "h:1/",
            "h:1/x",
            "h:1/-1",
            "h:1/2/3",
            "/2",
            "h:1/99999999999",
        ] {
            let err = redis_url(bad).expect_err(bad);
            assert!(
                err.starts_with("must be host:port or host:port/DB"),
                "{err}"
            );
        }
    }

    #[test]
    fn a_password_is_never_shown() {
        assert_eq!(
            redacted("user:secret@tcp(h:1)/db?charset=utf8mb4"),
            "user:***@tcp(h:1)/db?charset=utf8mb4"
        );
        assert_eq!(redacted("user@tcp(h:1)/db"), "user@tcp(h:1)/db");
        assert_eq!(redacted("no-slash"), "no-slash");
    }
}
