//! Security rules as pure functions: dispatch signatures, per-run callback tokens, the admin
//! token check and the handler allowlist.

pub mod site;

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Arc;

use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};

type HmacSha256 = Hmac<Sha256>;

/// What a token may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Reads only: every change is refused (403).
    Viewer,
    Admin,
    /// An executor's: registers members and sends callbacks, nothing else (403).
    Executor,
}

/// Who a request comes from, as the audit log names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    pub name: String,
    pub role: Role,
    /// The executor groups an executor's token may register members into (its
    /// `server.tokens[N].groups`); an admin may into every group, a viewer into none.
    pub groups: Groups,
}

/// The executor groups a token may join: `["*"]` for all, written out, or the groups named.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Groups {
    All,
    Only(Vec<String>),
}

impl Groups {
    /// The entry of `groups` that stands for every group.
    pub const EVERY: &'static str = "*";

    /// The groups a `groups` list of the config file names (checked at start-up).
    pub fn listed(groups: &[String]) -> Groups {
        match groups {
            [every] if every == Groups::EVERY => Groups::All,
            named => Groups::Only(named.to_vec()),
        }
    }

    /// Whether `group` is one of them.
    pub fn contains(&self, group: &str) -> bool {
        match self {
            Groups::All => true,
            Groups::Only(named) => named.iter().any(|name| name == group),
        }
    }

    /// As a message names them: `*` or `billing, payroll`.
    pub fn shown(&self) -> String {
        match self {
            Groups::All => Groups::EVERY.into(),
            Groups::Only(named) => named.join(", "),
        }
    }
}

/// The actor of a change made without any token configured (ax then serves localhost only,
/// unless `server.bind` says otherwise).
pub const ANONYMOUS: &str = "anonymous";
/// The name of `server.admin_token` in the audit log.
pub const ADMIN_TOKEN_NAME: &str = "admin";

impl Principal {
    pub fn anonymous() -> Principal {
        Principal::admin(ANONYMOUS)
    }

    /// An admin named `name`: it may do anything, in every executor group.
    pub fn admin(name: &str) -> Principal {
        Principal {
            name: name.into(),
            role: Role::Admin,
            groups: Groups::All,
        }
    }

    /// Whether it may register members into executor group `group`, and remove members of it.
    pub fn may_join(&self, group: &str) -> bool {
        match self.role {
            Role::Admin => true,
            Role::Executor => self.groups.contains(group),
            Role::Viewer => false,
        }
    }

    /// Whether it renews and removes members it did not register itself: those another token
    /// registered, and those an admin defined. Only an admin does; an executor's token keeps
    /// to its own.
    pub fn acts_on_any_member(&self) -> bool {
        self.role == Role::Admin
    }

    /// Whether it may make changes.
    pub fn may_change(&self) -> bool {
        self.role == Role::Admin
    }

    /// Whether it may read the API and the console (an executor's token may not).
    pub fn may_read(&self) -> bool {
        self.role != Role::Executor
    }
}

/// The security settings in force in one ax process.
#[derive(Debug, Clone)]
pub struct Security {
    /// When set, the admin API requires it as a bearer token.
    pub admin_token: Option<String>,
    /// Named tokens with their roles (`server.tokens`).
    pub tokens: Vec<(String, Principal)>,
    /// Key of dispatch signatures and callback tokens.
    pub secret: Arc<[u8]>,
    pub allowlist: Allowlist,
    /// The names requests may give as their `Host`, when they are checked: without tokens,
    /// or with `server.allowed_hosts` set.
    pub hosts: Option<crate::security::site::AllowedHosts>,
}

/// The header carrying the dispatch signature (`v1=<hex>`), and the one carrying its time.
pub const SIGNATURE_HEADER: &str = "X-Ax-Signature";
pub const TIMESTAMP_HEADER: &str = "X-Ax-Timestamp";
/// The header carrying the executor protocol's version (`docs/protocol.md`), and the version
/// ax speaks.
pub const PROTOCOL_HEADER: &str = "X-Ax-Protocol";
pub const PROTOCOL_VERSION: &str = "1";
/// Headers of an executor's reply, for `ax executor check`: it keeps each run's result, and
/// this reply is to a run it had taken already.
pub const IDEMPOTENT_HEADER: &str = "X-Ax-Idempotent";
pub const DUPLICATE_HEADER: &str = "X-Ax-Duplicate";

fn hmac_hex(secret: &[u8], parts: &[&[u8]]) -> String {
    // An HMAC key may have any length, so this cannot fail.
    let mut mac = HmacSha256::new_from_slice(secret).unwrap_or_else(|_| unreachable!());
    for part in parts {
        mac.update(part);
    }
    hex(&mac.finalize().into_bytes())
}

fn hex(bytes: &[u8]) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut hex = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        hex.push(HEX[usize::from(byte >> 4)] as char);
        hex.push(HEX[usize::from(byte & 0xf)] as char);
    }
    hex
}

/// The `X-Ax-Signature` of a dispatch: HMAC-SHA256 over `"{timestamp}.{body}"`, like webhook
/// signatures, so an executor can check that the call came from ax and is fresh.
pub fn sign_dispatch(secret: &[u8], timestamp: i64, body: &[u8]) -> String {
    let ts = timestamp.to_string();
    format!("v1={}", hmac_hex(secret, &[ts.as_bytes(), b".", body]))
}

/// The token a run's result callback must carry: derived from the run's request id, so any ax
/// process sharing the secret can check it without a lookup.
pub fn callback_token(secret: &[u8], request_id: &str) -> String {
    hmac_hex(secret, &[b"callback:", request_id.as_bytes()])
}

/// Compares secrets in constant time, whatever their lengths.
pub fn same_secret(given: &str, expected: &str) -> bool {
    // Digests first: the comparison then takes the same time whatever the lengths.
    let (given, expected) = (Sha256::digest(given), Sha256::digest(expected));
    given
        .iter()
        .zip(expected.iter())
        .fold(0u8, |diff, (a, b)| diff | (a ^ b))
        == 0
}

impl Security {
    /// Whether the API asks for a token.
    pub fn has_tokens(&self) -> bool {
        self.admin_token.is_some() || !self.tokens.is_empty()
    }

    /// The token configured now under `name`, with who it is.
    fn token_named(&self, name: &str) -> Option<(&str, Principal)> {
        if let (ADMIN_TOKEN_NAME, Some(token)) = (name, &self.admin_token) {
            return Some((token, Principal::admin(ADMIN_TOKEN_NAME)));
        }
        self.tokens
            .iter()
            .find(|(_, principal)| principal.name == name)
            .map(|(token, principal)| (token.as_str(), principal.clone()))
    }

    /// What a console session keeps of the token it signed in with: a digest keyed with the
    /// signing secret, so the table tells nothing of the token.
    pub fn token_digest(&self, token: &str) -> String {
        hmac_hex(&self.secret, &[b"session-token:", token.as_bytes()])
    }

    /// Who a session signed in as `name` with the token of `digest` is: the token configured
    /// now under that name, if it is still that token. A token changed or removed ends the
    /// sessions it opened.
    pub fn session_principal(&self, name: &str, digest: &str) -> Option<Principal> {
        let (token, principal) = self.token_named(name)?;
        same_secret(&self.token_digest(token), digest).then_some(principal)
    }

    /// Who the `Authorization` header says the request is from: anonymous when no token is
    /// configured; `None` when tokens are and it carries none of them.
    pub fn authorize(&self, authorization: Option<&str>) -> Option<Principal> {
        if !self.has_tokens() {
            return Some(Principal::anonymous());
        }
        let admin = self
            .admin_token
            .iter()
            .map(|token| (token, Principal::admin(ADMIN_TOKEN_NAME)));
        let named = self.tokens.iter().map(|(token, p)| (token, p.clone()));
        admin
            .chain(named)
            .find(|(token, _)| is_admin(authorization, token))
            .map(|(_, principal)| principal)
    }
}

/// A fresh random secret, as 64 hex digits (256 bits: two v4 UUIDs' 244 random bits and their
/// version marks).
pub fn new_secret() -> String {
    let (a, b) = (uuid::Uuid::new_v4(), uuid::Uuid::new_v4());
    format!("{}{}", a.simple(), b.simple())
}

/// What the store keeps of a session's secret: its SHA-256, so the table alone opens no session.
pub fn session_key(secret: &str) -> String {
    hex(&Sha256::digest(secret.as_bytes()))
}

/// The CSRF token of the console forms of a session: bound to its secret, so another session's
/// token (or one set by another site) does not pass.
pub fn csrf_token(secret: &[u8], session_secret: &str) -> String {
    hmac_hex(secret, &[b"csrf:", session_secret.as_bytes()])
}

/// Whether an `Authorization` header carries the admin token, in the `Bearer` scheme.
pub fn is_admin(authorization: Option<&str>, token: &str) -> bool {
    authorization
        .and_then(bearer_token)
        .is_some_and(|given| same_secret(given, token))
}

/// The token an `Authorization` header offers in the `Bearer` scheme (its name
/// case-insensitive, RFC 7235), right or wrong.
pub fn bearer_token(authorization: &str) -> Option<&str> {
    authorization
        .trim_start()
        .split_once(' ')
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .map(|(_, given)| given.trim())
}

/// One allowed handler host: an exact host name, a `*.domain` wildcard, an IP, or a CIDR block.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Rule {
    Host(String),
    Suffix(String),
    Net(IpAddr, u8),
}

/// Link-local and cloud-metadata addresses: a handler there is refused unless an entry names it
/// (an IP or CIDR inside the range, or the exact host name), even with an empty allowlist, so a
/// task cannot read a cloud instance's credentials through ax.
const GUARDED: [(IpAddr, u8); 4] = [
    (IpAddr::V4(Ipv4Addr::new(169, 254, 0, 0)), 16),
    // Alibaba Cloud's metadata service.
    (IpAddr::V4(Ipv4Addr::new(100, 100, 100, 200)), 32),
    (IpAddr::V6(Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 0)), 10),
    (
        IpAddr::V6(Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254)),
        128,
    ),
];

/// Host names of metadata services, refused like the guarded addresses unless an entry names
/// them exactly: ax checks a name's addresses only when it dispatches, and a task should not
/// be stored pointing there in the first place.
const GUARDED_NAMES: [&str; 1] = ["metadata.google.internal"];

/// The address a packet to `ip` reaches: an IPv6 form that carries an IPv4 address
/// (IPv4-mapped `::ffff:a.b.c.d`, IPv4-compatible `::a.b.c.d`, IPv4-translated
/// `::ffff:0:a.b.c.d`, NAT64 `64:ff9b::a.b.c.d`) is that IPv4 address, and checked as one;
/// `::` and `::1` stay IPv6.
fn embedded_ipv4(ip: IpAddr) -> IpAddr {
    let IpAddr::V6(v6) = ip.to_canonical() else {
        return ip.to_canonical();
    };
    let bits = u128::from(v6);
    let (prefix, low) = (bits >> 32, bits as u32);
    let compatible = prefix == 0 && low > 1;
    let translated = prefix == 0xffff_0000;
    let nat64 = prefix == 0x0064_ff9b_0000_0000_0000_0000;
    if compatible || translated || nat64 {
        IpAddr::V4(Ipv4Addr::from(low))
    } else {
        IpAddr::V6(v6)
    }
}

/// `host` as the allowlist compares it: lower case, without the trailing dot of a fully
/// qualified name.
fn host_key(host: &str) -> String {
    host.strip_suffix('.').unwrap_or(host).to_ascii_lowercase()
}

/// The hosts handlers may live on; empty allows every host outside the guarded ranges.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Allowlist(Vec<Rule>);

impl Allowlist {
    /// Parses entries like `executor.internal`, `*.svc.example.com`, `10.1.2.3`, `10.0.0.0/8`.
    pub fn parse(entries: &[String]) -> Result<Allowlist, String> {
        entries
            .iter()
            .map(|entry| parse_rule(entry.trim()))
            .collect::<Result<_, _>>()
            .map(Allowlist)
    }

    /// Whether a handler on `host`, as written in its URL, may be called.
    pub fn allows(&self, host: &str) -> bool {
        let host = host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_ascii_lowercase();
        match host.parse::<IpAddr>() {
            Ok(ip) => self.allows_ip(embedded_ipv4(ip)),
            Err(_) if GUARDED_NAMES.contains(&host_key(&host).as_str()) => self.names(&host),
            Err(_) => {
                self.0.is_empty()
                    || self.0.iter().any(|rule| match rule {
                        Rule::Host(name) => *name == host,
                        Rule::Suffix(domain) => host.ends_with(domain.as_str()),
                        Rule::Net(..) => false,
                    })
            }
        }
    }

    /// Whether a handler on the host name `host` may be called at `addr`, one of the addresses
    /// it resolved to when dispatched: the name must be allowed, and a guarded address named.
    pub fn allows_resolved(&self, host: &str, addr: IpAddr) -> bool {
        let addr = embedded_ipv4(addr);
        self.allows(host) && (!is_guarded(addr) || self.names(host) || self.names_guarded(addr))
    }

    /// Whether an entry is the host name `host` itself (a trailing dot aside).
    fn names(&self, host: &str) -> bool {
        let host = host_key(host);
        self.0
            .iter()
            .any(|rule| matches!(rule, Rule::Host(name) if host_key(name) == host))
    }

    fn allows_ip(&self, ip: IpAddr) -> bool {
        if is_guarded(ip) {
            return self.names_guarded(ip);
        }
        self.0.is_empty()
            || self
                .0
                .iter()
                .any(|rule| matches!(rule, Rule::Net(net, bits) if in_net(ip, *net, *bits)))
    }

    /// Whether an IP or CIDR entry inside a guarded range covers `ip`: a wider entry such as
    /// `0.0.0.0/0` does not count.
    fn names_guarded(&self, ip: IpAddr) -> bool {
        self.0.iter().any(|rule| match rule {
            Rule::Net(net, bits) => {
                in_net(ip, *net, *bits)
                    && GUARDED
                        .iter()
                        .any(|(range, width)| bits >= width && in_net(*net, *range, *width))
            }
            _ => false,
        })
    }
}

fn is_guarded(ip: IpAddr) -> bool {
    GUARDED
        .iter()
        .any(|(range, width)| in_net(ip, *range, *width))
}

fn parse_rule(entry: &str) -> Result<Rule, String> {
    let bad = || format!("`{entry}` is not a host, *.domain, IP or CIDR");
    if entry.is_empty() {
        return Err(bad());
    }
    if let Some(domain) = entry.strip_prefix("*.") {
        return Ok(Rule::Suffix(format!(".{}", domain.to_ascii_lowercase())));
    }
    let (addr, bits) = match entry.split_once('/') {
        Some((addr, bits)) => (addr, Some(bits.parse::<u8>().map_err(|_| bad())?)),
        None => (entry, None),
    };
    match addr.parse::<IpAddr>() {
        Ok(ip) => {
            let max = if ip.is_ipv4() { 32 } else { 128 };
            let bits = bits.unwrap_or(max);
            if bits > max {
                return Err(bad());
            }
            Ok(Rule::Net(ip, bits))
        }
        Err(_) if bits.is_none() && !entry.contains(['/', ' ', '*']) => {
            Ok(Rule::Host(entry.to_ascii_lowercase()))
        }
        Err(_) => Err(bad()),
    }
}

fn in_net(ip: IpAddr, net: IpAddr, bits: u8) -> bool {
    match (ip, net) {
        (IpAddr::V4(ip), IpAddr::V4(net)) => {
            let mask = u32::MAX.checked_shl(32 - u32::from(bits)).unwrap_or(0);
            u32::from(ip) & mask == u32::from(net) & mask
        }
        (IpAddr::V6(ip), IpAddr::V6(net)) => {
            let mask = u128::MAX.checked_shl(128 - u32::from(bits)).unwrap_or(0);
            u128::from(ip) & mask == u128::from(net) & mask
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_match_only_when_equal_whatever_their_lengths() {
        assert!(same_secret("token-1", "token-1"));
        for other in ["token-2", "token-1 ", "token", "", "token-1token-1"] {
            assert!(!same_secret(other, "token-1"), "{other:?}");
        }
        assert!(same_secret("", ""));
    }

    #[test]
    fn signatures_follow_the_documented_scheme() {
        // `printf '1700000000.{}' | openssl dgst -sha256 -hmac secret`
        let sig = sign_dispatch(b"secret", 1_700_000_000, b"{}");
        assert_eq!(
            sig,
            "v1=b8569b78799ff9e3cbff0fc2d63a33a2b57f3282abd07c37ae5e8e7d79a5f163"
        );
        assert_ne!(sig, sign_dispatch(b"secret", 1_700_000_001, b"{}"));
        assert_ne!(sig, sign_dispatch(b"other", 1_700_000_000, b"{}"));
        assert_ne!(sig, sign_dispatch(b"secret", 1_700_000_000, b"{ }"));
    }

    #[test]
    fn callback_tokens_are_per_run_and_per_secret() {
        let token = callback_token(b"s", "run-1");
        assert_eq!(token.len(), 64);
        assert_ne!(token, callback_token(b"s", "run-2"));
        assert_ne!(token, callback_token(b"t", "run-1"));
    }

    #[test]
    fn admin_token_needs_the_bearer_scheme_and_the_exact_value() {
        assert!(is_admin(Some("Bearer s3cret"), "s3cret"));
        assert!(is_admin(Some("bearer s3cret"), "s3cret"));
        assert!(is_admin(Some("BEARER  s3cret"), "s3cret"));
        assert!(!is_admin(Some("Bearers3cret"), "s3cret"));
        assert!(!is_admin(Some("Bearer s3cre"), "s3cret"));
        assert!(!is_admin(Some("s3cret"), "s3cret"));
        assert!(!is_admin(Some("Basic s3cret"), "s3cret"));
        assert!(!is_admin(None, "s3cret"));
        // A token offered, right or wrong; another scheme offers none.
        assert_eq!(bearer_token(" bearer  guess "), Some("guess"));
        assert_eq!(bearer_token("Basic dXNlcjpwdw=="), None);
    }

    #[test]
    fn an_executors_token_joins_its_groups_and_acts_on_its_own_members_only() {
        let executor = |groups: &[&str]| Principal {
            name: "workers".into(),
            role: Role::Executor,
            groups: Groups::listed(&groups.iter().map(|g| g.to_string()).collect::<Vec<_>>()),
        };
        let billing = executor(&["billing", "reports"]);
        assert!(billing.may_join("billing") && billing.may_join("reports"));
        assert!(!billing.may_join("payroll") && !billing.may_join("*"));
        assert_eq!(billing.groups.shown(), "billing, reports");
        let every = executor(&["*"]);
        assert_eq!(every.groups, Groups::All);
        assert!(every.may_join("payroll"));
        assert!(!billing.acts_on_any_member() && !every.acts_on_any_member());
        let admin = Principal::admin(ADMIN_TOKEN_NAME);
        assert!(admin.may_join("payroll") && admin.acts_on_any_member());
        let viewer = Principal {
            role: Role::Viewer,
            ..every
        };
        assert!(!viewer.may_join("payroll") && !viewer.acts_on_any_member());
    }

    #[test]
    fn a_session_lasts_while_its_token_is_configured_under_its_name() {
        let with = |admin: Option<&str>, ops: &str| Security {
            admin_token: admin.map(String::from),
            tokens: vec![(
                ops.to_string(),
                Principal {
                    name: "ops".into(),
                    role: Role::Viewer,
                    groups: Groups::Only(Vec::new()),
                },
            )],
            secret: Arc::from(&b"signing"[..]),
            allowlist: Allowlist::default(),
            hosts: None,
        };
        let before = with(Some("admin-token-1"), "ops-token-1");
        let admin = before.token_digest("admin-token-1");
        let ops = before.token_digest("ops-token-1");
        assert_eq!(admin.len(), 64);
        assert!(!admin.contains("admin-token-1"));
        let who = before
            .session_principal("admin", &admin)
            .expect("signed in");
        assert_eq!((who.name.as_str(), who.role), ("admin", Role::Admin));
        let who = before.session_principal("ops", &ops).expect("signed in");
        assert_eq!(who.role, Role::Viewer);
        // Another token's digest, or one keyed with another secret, is no session.
        assert_eq!(before.session_principal("admin", &ops), None);
        let other_secret = Security {
            secret: Arc::from(&b"other"[..]),
            ..with(Some("admin-token-1"), "ops-token-1")
        };
        assert_eq!(other_secret.session_principal("admin", &admin), None);
        assert_eq!(before.session_principal("admin", ""), None);
        // The admin token changed or removed, the ops token changed: their sessions end.
        let after = with(Some("admin-token-2"), "ops-token-2");
        assert_eq!(after.session_principal("admin", &admin), None);
        assert_eq!(after.session_principal("ops", &ops), None);
        assert_eq!(
            with(None, "ops-token-1").session_principal("admin", &admin),
            None
        );
        assert!(with(None, "ops-token-1")
            .session_principal("ops", &ops)
            .is_some());
    }

    #[test]
    fn allowlist_matches_hosts_domains_ips_and_cidrs() {
        let rules: Vec<String> = [
            "executor.internal",
            "*.svc.example.com",
            "10.0.0.0/8",
            "127.0.0.1",
            "fd00::/8",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let allow = Allowlist::parse(&rules).expect("valid");
        for host in [
            "executor.internal",
            "EXECUTOR.internal",
            "a.svc.example.com",
            "10.9.8.7",
            "127.0.0.1",
            "[fd12::1]",
        ] {
            assert!(allow.allows(host), "{host}");
        }
        for host in [
            "svc.example.com",
            "evil.internal",
            "11.0.0.1",
            "127.0.0.2",
            "169.254.169.254",
            "[::1]",
            "example.com.evil",
        ] {
            assert!(!allow.allows(host), "{host}");
        }
        assert!(Allowlist::default().allows("10.9.8.7"));
        for bad in ["10.0.0.0/33", "", "a b", "10.0.0.0/x", "host/8"] {
            assert!(Allowlist::parse(&[bad.to_string()]).is_err(), "{bad}");
        }
    }

    fn list(entries: &[&str]) -> Allowlist {
        let entries: Vec<String> = entries.iter().map(|s| s.to_string()).collect();
        Allowlist::parse(&entries).expect("valid")
    }

    #[test]
    fn link_local_and_metadata_addresses_need_an_entry_of_their_own() {
        let guarded = [
            "169.254.169.254",
            "169.254.0.1",
            "[fe80::1]",
            "[febf::1]",
            "[fd00:ec2::254]",
            "[::ffff:169.254.169.254]",
            "[::a9fe:a9fe]",
            "[::169.254.169.254]",
            "[64:ff9b::a9fe:a9fe]",
            "[64:ff9b::169.254.0.1]",
            "[::ffff:0:a9fe:a9fe]",
            "100.100.100.200",
            "[::ffff:100.100.100.200]",
            "[64:ff9b::6464:64c8]",
            "metadata.google.internal",
            "METADATA.Google.Internal",
            "metadata.google.internal.",
        ];
        for allowlist in [
            list(&[]),
            list(&["0.0.0.0/0", "::/0", "*.internal", "*.google.internal"]),
        ] {
            for host in guarded {
                assert!(!allowlist.allows(host), "{host} under {allowlist:?}");
            }
        }
        assert!(list(&[]).allows("10.1.2.3"));
        assert!(list(&[]).allows("[fd00:ec2::255]"));
        // Neighbours of the guarded ones, and the IPv6 loopback (no IPv4 inside).
        for host in [
            "100.100.100.201",
            "[::1]",
            "[64:ff9b::a00:5]",
            "[64:ff9b:1::a9fe:a9fe]",
            "google.internal",
            "metadata.google.internal.evil",
            "xmetadata.google.internal",
        ] {
            assert!(list(&[]).allows(host), "{host}");
        }
        // An IPv4 address inside IPv6 is checked as that IPv4 address against the entries.
        let private = list(&["10.0.0.0/8"]);
        assert!(private.allows("[64:ff9b::a00:5]") && private.allows("[::10.1.2.3]"));
        assert!(!private.allows("[64:ff9b::b00:5]"));
        let named = list(&[
            "169.254.169.254",
            "fe80::/10",
            "fd00:ec2::254",
            "100.100.100.200",
            "metadata.google.internal",
        ]);
        for host in [
            "169.254.169.254",
            "[fe80::1]",
            "[fd00:ec2::254]",
            "[64:ff9b::a9fe:a9fe]",
            "100.100.100.200",
            "metadata.google.internal",
            "Metadata.Google.Internal.",
        ] {
            assert!(named.allows(host), "{host}");
        }
        assert!(!named.allows("169.254.0.1"));
        assert!(!named.allows("[::a9fe:1]"));
    }

    #[test]
    fn resolved_addresses_are_checked_as_well_as_the_name() {
        let metadata: IpAddr = "169.254.169.254".parse().expect("ip");
        let private: IpAddr = "10.0.0.5".parse().expect("ip");
        let open = Allowlist::default();
        assert!(open.allows_resolved("executor.example", private));
        assert!(!open.allows_resolved("executor.example", metadata));
        for embedded in [
            "::ffff:169.254.169.254",
            "::a9fe:a9fe",
            "64:ff9b::a9fe:a9fe",
            "::ffff:100.100.100.200",
        ] {
            let addr: IpAddr = embedded.parse().expect("ip");
            assert!(
                !open.allows_resolved("executor.example", addr),
                "{embedded}"
            );
        }
        assert!(!open.allows_resolved("metadata.google.internal", private));
        assert!(list(&["metadata.google.internal"])
            .allows_resolved("metadata.google.internal.", metadata));

        let wildcard = list(&["*.internal"]);
        assert!(wildcard.allows_resolved("a.internal", private));
        assert!(!wildcard.allows_resolved("a.internal", metadata));
        assert!(!wildcard.allows_resolved("a.example", private));

        // Naming the host, or the address, is explicit.
        assert!(list(&["metadata.internal"]).allows_resolved("METADATA.internal", metadata));
        assert!(list(&["*.internal", "169.254.169.254"]).allows_resolved("a.internal", metadata));
    }
}
