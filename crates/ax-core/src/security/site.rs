//! Where a request comes from, as pure rules: a page of another site may not change anything
//! (cross-site request forgery), a body sent to the API must say it is JSON (a page can send
//! `text/plain` or a form to any site, never JSON), and ax answers only to its own names, so a
//! page whose name is rebound to ax's address (DNS rebinding) cannot read it.

use std::net::IpAddr;

/// A host as a request or a setting names it: a name (lower case, no trailing dot) or an IP.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Host {
    Name(String),
    Ip(IpAddr),
}

/// One name ax answers to, on one port or any.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Entry {
    host: Host,
    port: Option<u16>,
}

impl Entry {
    fn matches(&self, host: &Host, port: Option<u16>) -> bool {
        let same_port = match (self.port, port) {
            (None, _) => true,
            (Some(want), Some(got)) => want == got,
            // No port in the request: the scheme's own.
            (Some(want), None) => matches!(want, 80 | 443),
        };
        self.host == *host && same_port
    }
}

/// The names ax answers to: `localhost`, the loopback addresses, the bind address (any
/// address of this machine when it binds them all), the machine's host names, and the
/// entries of `server.allowed_hosts`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllowedHosts {
    defaults: Vec<Entry>,
    /// `server.allowed_hosts`: a page served under one of these names is ax's own, even when
    /// a proxy in front of ax passes another `Host`.
    configured: Vec<Entry>,
    /// ax listens on every interface: any IP names this machine. (An IP cannot be rebound: a
    /// page at an address is served by whoever answers there.)
    any_ip: bool,
}

impl AllowedHosts {
    /// The defaults for `bind` and this machine's `host_names`, and the `configured` entries
    /// (`name`, `name:port`, an IP, `[v6]:port`; checked with the configuration by
    /// [`check_allowed_hosts`], so one that is not an entry is left out).
    pub fn new(bind: &str, host_names: &[String], configured: &[String]) -> AllowedHosts {
        let any = |host| Entry { host, port: None };
        let bind = host_of(bind.trim());
        let any_ip = matches!(bind, Some(Host::Ip(ip)) if ip.is_unspecified());
        let names = host_names.iter().filter_map(|name| host_of(name.trim()));
        let defaults = [Host::Name("localhost".into())]
            .into_iter()
            .chain(bind)
            .chain(names)
            .map(any)
            .collect();
        AllowedHosts {
            defaults,
            configured: configured
                .iter()
                .filter_map(|entry| parse_entry(entry).ok())
                .collect(),
            any_ip,
        }
    }

    /// Whether a request whose `Host` is `authority` (`host[:port]`) is one for ax.
    pub fn allows(&self, authority: &str) -> bool {
        let Some((host, port)) = split_authority(authority) else {
            return false;
        };
        let loopback = matches!(host, Host::Ip(ip) if ip.to_canonical().is_loopback());
        loopback
            || (self.any_ip && matches!(host, Host::Ip(_)))
            || self
                .defaults
                .iter()
                .chain(&self.configured)
                .any(|entry| entry.matches(&host, port))
    }

    /// Whether `server.allowed_hosts` names `host` on `port`.
    fn configures(&self, host: &Host, port: Option<u16>) -> bool {
        self.configured
            .iter()
            .any(|entry| entry.matches(host, port))
    }
}

/// Checks the entries of `server.allowed_hosts`; the error names the first bad one.
pub fn check_allowed_hosts(entries: &[String]) -> Result<(), String> {
    entries
        .iter()
        .try_for_each(|entry| parse_entry(entry).map(drop))
}

fn parse_entry(entry: &str) -> Result<Entry, String> {
    let bad = || format!("`{entry}` is not a host name or IP, with an optional :port");
    let (host, port) = split_authority(entry.trim()).ok_or_else(bad)?;
    if let Host::Name(name) = &host {
        if !is_host_name(name) {
            return Err(bad());
        }
    }
    Ok(Entry { host, port })
}

/// An address `ax serve` can be told to listen on (`server.bind`): an IP address, or a host
/// name (not all digits, which would be a mistyped IPv4 address).
pub fn is_bind_address(text: &str) -> bool {
    let numeric = |name: &str| name.bytes().all(|b| b.is_ascii_digit() || b == b'.');
    text.parse::<std::net::IpAddr>().is_ok() || (is_host_name(text) && !numeric(text))
}

/// A DNS name: dot-separated labels of letters, digits, `-` and `_` (container names), each
/// 1-63 characters, 253 in all.
fn is_host_name(name: &str) -> bool {
    name.len() <= 253
        && name.split('.').all(|label| {
            (1..=63).contains(&label.len())
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_'))
        })
}

/// `host`, `host:port`, `[v6]` or `[v6]:port`; `None` if malformed.
fn split_authority(authority: &str) -> Option<(Host, Option<u16>)> {
    if let Ok(ip) = authority.parse::<IpAddr>() {
        return Some((Host::Ip(ip.to_canonical()), None));
    }
    let (host, port) = if let Some(rest) = authority.strip_prefix('[') {
        let (v6, after) = rest.split_once(']')?;
        let port = match after {
            "" => None,
            after => Some(after.strip_prefix(':')?),
        };
        (Host::Ip(IpAddr::V6(v6.parse().ok()?).to_canonical()), port)
    } else {
        let (host, port) = match authority.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (authority, None),
        };
        (host_of(host)?, port)
    };
    let port = match port {
        Some(port) => Some(port.parse::<u16>().ok().filter(|p| *p != 0)?),
        None => None,
    };
    Some((host, port))
}

/// A bare host (no port, a v6 address without brackets) as [`Host`].
fn host_of(host: &str) -> Option<Host> {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    if let Ok(ip) = bare.parse::<IpAddr>() {
        return Some(Host::Ip(ip.to_canonical()));
    }
    let name = host.strip_suffix('.').unwrap_or(host).to_ascii_lowercase();
    (!name.is_empty() && !name.contains(['/', '@', ' ', ':', '[', ']'])).then_some(Host::Name(name))
}

/// Whether a request with `method` may change something (all but `GET` and `HEAD`, as the
/// viewer's role has it).
pub fn changes(method: &str) -> bool {
    !matches!(method, "GET" | "HEAD")
}

/// The header by which a request that changes something shows it comes from a page of
/// another site, if one does: `Sec-Fetch-Site` other than `same-origin` or `none` (typed by
/// the user), or an `Origin` that is not the request's `Host` nor named by
/// `server.allowed_hosts`. Clients that are not browsers send neither and pass.
pub fn cross_site(
    sec_fetch_site: Option<&str>,
    origin: Option<&str>,
    host: Option<&str>,
    allowed: Option<&AllowedHosts>,
) -> Option<&'static str> {
    if let Some(site) = sec_fetch_site {
        let site = site.trim().to_ascii_lowercase();
        if site != "same-origin" && site != "none" {
            return Some("Sec-Fetch-Site");
        }
    }
    let origin = origin?;
    let same = |origin: &url::Url| {
        let Some(host_of_origin) = origin.host_str().and_then(host_of) else {
            return false;
        };
        let port = origin.port_or_known_default();
        let is_host = host
            .and_then(split_authority)
            .is_some_and(|(host, host_port)| {
                host == host_of_origin && host_port.or(origin.port_or_known_default()) == port
            });
        is_host || allowed.is_some_and(|a| a.configures(&host_of_origin, port))
    };
    // `null` (a sandboxed or privacy-sensitive context) parses as no URL with a host.
    match url::Url::parse(origin.trim()) {
        Ok(origin) if same(&origin) => None,
        _ => Some("Origin"),
    }
}

/// Whether a request carries a body: a `Content-Length` above 0, or any `Transfer-Encoding`.
pub fn has_body(content_length: Option<&str>, transfer_encoding: bool) -> bool {
    transfer_encoding || content_length.is_some_and(|length| length.trim() != "0")
}

/// Whether a `Content-Type` says JSON: `application/json` or `application/…+json` (such as
/// `merge-patch+json`), with any parameters. A page may send another site only `text/plain`,
/// a form or `multipart/form-data` without asking it first (CORS), never these.
pub fn is_json(content_type: Option<&str>) -> bool {
    let Some(content_type) = content_type else {
        return false;
    };
    let essence = content_type
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    essence == "application/json"
        || essence
            .strip_prefix("application/")
            .is_some_and(|sub| sub.ends_with("+json") && !sub.contains('/'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hosts(bind: &str, configured: &[&str]) -> AllowedHosts {
        let configured: Vec<String> = configured.iter().map(|s| s.to_string()).collect();
        check_allowed_hosts(&configured).expect("valid");
        AllowedHosts::new(bind, &["build-7".into()], &configured)
    }

    #[test]
    fn by_default_ax_answers_to_loopback_its_bind_address_and_its_names() {
        let local = hosts("127.0.0.1", &[]);
        for host in [
            "localhost",
            "LOCALHOST:8901",
            "localhost.:8901",
            "127.0.0.1",
            "127.0.0.1:8901",
            "127.1.2.3:80",
            "[::1]:8901",
            "[::1]",
            "::1",
            "build-7:8901",
            "Build-7",
        ] {
            assert!(local.allows(host), "{host}");
        }
        for host in [
            "evil.example",
            "evil.example:8901",
            "localhost.evil.example",
            "build-7.evil.example",
            "10.1.2.3:8901",
            "0.0.0.0:8901",
            "",
            ":8901",
            "localhost:x",
            "localhost:0",
            "[::1",
            "a b",
            "user@localhost",
        ] {
            assert!(!local.allows(host), "{host:?}");
        }
        let everywhere = hosts("0.0.0.0", &[]);
        assert!(everywhere.allows("10.1.2.3:8901") && everywhere.allows("[fd00::5]:8901"));
        assert!(!everywhere.allows("evil.example"));
        let one = hosts("10.1.2.3", &[]);
        assert!(one.allows("10.1.2.3:8901") && !one.allows("10.1.2.4:8901"));
        let named = hosts("ax.internal", &[]);
        assert!(named.allows("ax.internal:8901") && !named.allows("ax.example"));
    }

    #[test]
    fn allowed_hosts_add_names_on_a_port_or_any() {
        let allowed = hosts("127.0.0.1", &["ax.example.com", "ops.example.com:8443"]);
        for host in [
            "ax.example.com",
            "AX.example.com:443",
            "ops.example.com:8443",
            "localhost:8901",
        ] {
            assert!(allowed.allows(host), "{host}");
        }
        for host in ["ops.example.com:8901", "example.com", "evil.example"] {
            assert!(!allowed.allows(host), "{host}");
        }
        assert!(hosts("127.0.0.1", &["ops.example.com:443"]).allows("ops.example.com"));
        for bad in [
            "",
            "a b",
            "http://ax.example.com",
            "ax.example.com:99999",
            "ax.example.com:",
            "ax..example.com",
            "*",
            "[::1",
        ] {
            assert!(parse_entry(bad).is_err(), "{bad:?}");
        }
        for good in [
            "ax",
            "ax-1.example.com:8080",
            "10.0.0.1",
            "[fd00::1]:443",
            "my_app",
        ] {
            assert!(parse_entry(good).is_ok(), "{good}");
        }
    }

    #[test]
    fn a_page_of_another_site_is_told_apart_by_its_headers() {
        let host = Some("127.0.0.1:8901");
        // Not a browser: neither header.
        assert_eq!(cross_site(None, None, host, None), None);
        assert_eq!(cross_site(None, None, None, None), None);
        for site in ["same-origin", "none", "Same-Origin"] {
            assert_eq!(cross_site(Some(site), None, host, None), None, "{site}");
        }
        for site in ["cross-site", "same-site", "other"] {
            assert_eq!(
                cross_site(Some(site), None, host, None),
                Some("Sec-Fetch-Site")
            );
        }
        for origin in ["http://127.0.0.1:8901", "HTTP://127.0.0.1:8901"] {
            assert_eq!(cross_site(None, Some(origin), host, None), None, "{origin}");
        }
        for origin in [
            "http://evil.example",
            "http://127.0.0.1:3000",
            "http://127.0.0.1",
            "http://localhost:8901",
            "null",
            "",
            "127.0.0.1:8901",
        ] {
            assert_eq!(
                cross_site(None, Some(origin), host, None),
                Some("Origin"),
                "{origin:?}"
            );
        }
        assert_eq!(
            cross_site(Some("same-origin"), Some("http://evil.example"), host, None),
            Some("Origin")
        );
        // Default ports: the Host names none, the Origin its scheme's.
        assert_eq!(
            cross_site(
                None,
                Some("https://ax.example.com"),
                Some("ax.example.com"),
                None
            ),
            None
        );
        assert_eq!(
            cross_site(None, Some("http://[::1]:8901"), Some("[::1]:8901"), None),
            None
        );
        // Behind a proxy that passes its own Host: the public name, when configured, is ax's.
        let proxied = hosts("127.0.0.1", &["ax.example.com"]);
        let public = Some("https://ax.example.com");
        assert_eq!(cross_site(None, public, host, Some(&proxied)), None);
        assert_eq!(cross_site(None, public, host, None), Some("Origin"));
        // The defaults are not enough: another app on this machine is another site.
        assert_eq!(
            cross_site(None, Some("http://localhost:3000"), host, Some(&proxied)),
            Some("Origin")
        );
    }

    #[test]
    fn only_json_bodies_and_only_changes_are_checked() {
        for json in [
            "application/json",
            "application/json; charset=utf-8",
            "Application/JSON",
            "application/merge-patch+json",
        ] {
            assert!(is_json(Some(json)), "{json}");
        }
        for other in [
            "text/plain",
            "application/x-www-form-urlencoded",
            "multipart/form-data; boundary=x",
            "text/json",
            "application/jsonx",
            "",
        ] {
            assert!(!is_json(Some(other)), "{other}");
        }
        assert!(!is_json(None));
        assert!(has_body(Some("2"), false) && has_body(None, true));
        assert!(!has_body(Some("0"), false) && !has_body(None, false));
        assert!(changes("POST") && changes("DELETE") && changes("PATCH"));
        assert!(!changes("GET") && !changes("HEAD"));
    }
}
