//! What a setting accepts: how a value written for it (an environment variable, a flag, a key
//! of the config file) is read, checked, and described in the configuration reference and in refusals.

use std::collections::{BTreeMap, HashSet};

use serde_json::Value;

use super::duration::{self, TimeUnit};
use super::{HostConfig, NamedToken, MIN_SECRET_CHARS};
use ax_core::alerting::{check_channels, AlertRule, Channel};
use ax_core::dispatch::routing::valid_group_name;
use ax_core::security::{Groups, Role, ANONYMOUS};

/// The kinds of value a setting takes.
pub enum Kind {
    /// A whole number `min..=max`, of `unit` (`runs`, `/s`, or empty); 0 too when
    /// `zero` (its meaning is in the setting's doc, not in the rule a bad value is told).
    Count {
        min: i64,
        max: i64,
        unit: &'static str,
        zero: bool,
    },
    /// A duration `min..=max`, kept in `unit`: a plain number is of `unit`, or it has its own
    /// unit (`500ms`, `1s`, `5m`, `1h`, `2d`).
    Duration { min: i64, max: i64, unit: TimeUnit },
    /// Any text.
    Text,
    /// Text that `accepts` takes; `rule` says which, in the words that follow the key.
    Checked {
        rule: &'static str,
        accepts: fn(&str) -> bool,
    },
    /// A secret: long enough not to be guessed, never shown.
    Secret,
    /// A list (comma-separated in an environment variable) that `check` takes, or says why
    /// not; `rule` says what it lists.
    List {
        rule: &'static str,
        check: fn(&[String]) -> Result<(), String>,
    },
    /// `server.tokens`, from the file: `{name, token, role}` each.
    Tokens,
    /// `dispatch.hosts`, from the file: `host` or `host:port` to `{max_in_flight}`.
    Hosts,
    /// `alerts.channels`, from the file: `{name, kind, …}` each.
    Channels,
    /// `alerts.default`, from the file: `{events, channels, threshold, windowSecs, silenceSecs}`.
    AlertRule,
}

/// A value read for a setting, before it is kept in its field.
#[derive(Debug)]
pub enum Parsed {
    Number(i128),
    Text(String),
    List(Vec<String>),
    Tokens(Vec<NamedToken>),
    Hosts(BTreeMap<String, HostConfig>),
    Channels(Vec<Channel>),
    AlertRule(AlertRule),
}

/// Why a value is refused.
#[derive(Debug)]
pub enum Refusal {
    /// The words that follow the key: `must be 1-65535`.
    Rule(String),
    /// A secret too short; its value is never shown.
    ShortSecret,
    /// One part of a list's entry refused, `entry` naming it after the key (`[0].groups`).
    Entry { entry: String, rule: String },
}

/// A value as written: text (an environment variable, a flag) or a value of the config file.
pub enum Written<'a> {
    Text(&'a str),
    Yaml(&'a Value),
}

/// The most requests in flight to one executor host (`dispatch.max_in_flight_per_host` and
/// each `dispatch.hosts` cap).
pub const MAX_IN_FLIGHT_PER_HOST: i64 = 100_000;

impl Kind {
    /// Reads and checks a value written for a setting of this kind.
    pub fn read(&self, written: Written<'_>) -> Result<Parsed, Refusal> {
        let parsed = match (self, written) {
            (_, Written::Text(text)) => self.read_text(text)?,
            (Kind::List { .. }, Written::Yaml(Value::Array(items))) => Parsed::List(
                items
                    .iter()
                    .map(scalar)
                    .collect::<Option<_>>()
                    .ok_or_else(|| self.refusal())?,
            ),
            (Kind::Tokens, Written::Yaml(value)) => serde_json::from_value(value.clone())
                .map(Parsed::Tokens)
                .map_err(|err| Refusal::Rule(format!("{} ({err})", self.rule())))?,
            (Kind::Hosts, Written::Yaml(value)) => serde_json::from_value(value.clone())
                .map(Parsed::Hosts)
                .map_err(|err| Refusal::Rule(format!("{} ({err})", self.rule())))?,
            (Kind::Channels, Written::Yaml(value)) => serde_json::from_value(value.clone())
                .map(Parsed::Channels)
                .map_err(|err| Refusal::Rule(format!("{} ({err})", self.rule())))?,
            (Kind::AlertRule, Written::Yaml(value)) => serde_json::from_value(value.clone())
                .map(Parsed::AlertRule)
                .map_err(|err| Refusal::Rule(format!("{} ({err})", self.rule())))?,
            (_, Written::Yaml(value)) => {
                self.read_text(&scalar(value).ok_or_else(|| self.refusal())?)?
            }
        };
        self.check(&parsed)?;
        Ok(parsed)
    }

    fn read_text(&self, text: &str) -> Result<Parsed, Refusal> {
        match self {
            Kind::Count { .. } => text
                .trim()
                .parse()
                .map(Parsed::Number)
                .map_err(|_| self.refusal()),
            Kind::Duration { unit, .. } => duration::parse(text, *unit)
                .map(Parsed::Number)
                .ok_or_else(|| {
                    Refusal::Rule(format!(
                        "{}: a plain number of {}, or one with its unit (500ms, 1s, 5m, 1h, 2d)",
                        self.rule(),
                        unit.symbol(),
                    ))
                }),
            Kind::Text | Kind::Checked { .. } | Kind::Secret => Ok(Parsed::Text(text.into())),
            Kind::List { .. } => Ok(Parsed::List(listed(text))),
            Kind::Tokens | Kind::Hosts | Kind::Channels | Kind::AlertRule => Err(Refusal::Rule(
                format!("{}, set in the config file", self.rule()),
            )),
        }
    }

    /// Checks a value of this kind: as read, or as a caller set it in the field.
    pub fn check(&self, parsed: &Parsed) -> Result<(), Refusal> {
        match (self, parsed) {
            (Kind::Count { min, max, zero, .. }, Parsed::Number(n)) => {
                let zero_ok = *zero && *n == 0;
                in_range(*n, *min, *max) || zero_ok
            }
            (Kind::Duration { min, max, .. }, Parsed::Number(n)) => in_range(*n, *min, *max),
            (Kind::Text, Parsed::Text(_)) => true,
            (Kind::Checked { accepts, .. }, Parsed::Text(text)) => accepts(text),
            (Kind::Secret, Parsed::Text(secret)) => {
                if secret.chars().count() < MIN_SECRET_CHARS {
                    return Err(Refusal::ShortSecret);
                }
                true
            }
            (Kind::List { rule, check }, Parsed::List(items)) => {
                return check(items).map_err(|why| Refusal::Rule(format!("{rule}: {why}")))
            }
            (Kind::Tokens, Parsed::Tokens(tokens)) => return check_tokens(tokens),
            (Kind::Hosts, Parsed::Hosts(hosts)) => return check_hosts(hosts),
            (Kind::Channels, Parsed::Channels(channels)) => {
                // The rule follows the key: `alerts.channels [1].url: …`.
                return check_channels(channels).map_err(|err| {
                    let entry = err.key.strip_prefix("alerts.channels").unwrap_or(&err.key);
                    Refusal::Rule(format!("{entry}: {}", err.message))
                });
            }
            // Its channels are checked against `alerts.channels` by `Config::validate`.
            (Kind::AlertRule, Parsed::AlertRule(rule)) => {
                return rule
                    .check_values()
                    .map_err(|err| Refusal::Rule(err.to_string()))
            }
            _ => false,
        }
        .then_some(())
        .ok_or_else(|| self.refusal())
    }

    /// The values it takes, as the reference's range column shows them (empty: any).
    pub fn describe(&self) -> String {
        match self {
            Kind::Count { min, max, unit, .. } => {
                format!("{min}-{max} {unit}").trim_end().to_string()
            }
            Kind::Duration { min, max, unit } => format!("{min}-{max} {}", unit.symbol()),
            Kind::Secret => format!("at least {MIN_SECRET_CHARS} characters"),
            Kind::Hosts => format!("max_in_flight 1-{MAX_IN_FLIGHT_PER_HOST}"),
            Kind::Text
            | Kind::Checked { .. }
            | Kind::List { .. }
            | Kind::Tokens
            | Kind::Channels
            | Kind::AlertRule => String::new(),
        }
    }

    /// Whether a value of this kind is left out of refusals.
    pub fn hides_values(&self) -> bool {
        matches!(self, Kind::Secret | Kind::Tokens | Kind::Channels)
    }

    /// Set in the config file only (a structure no environment variable could hold).
    pub fn is_file_only(&self) -> bool {
        matches!(
            self,
            Kind::Tokens | Kind::Hosts | Kind::Channels | Kind::AlertRule
        )
    }

    /// A list is written comma-separated in an environment variable.
    pub fn is_list(&self) -> bool {
        matches!(self, Kind::List { .. })
    }

    /// What a value must be, in the words that follow the key.
    fn rule(&self) -> String {
        match self {
            Kind::Count { .. } | Kind::Duration { .. } | Kind::Secret => {
                format!("must be {}", self.describe())
            }
            Kind::Text => "must be text".into(),
            Kind::Checked { rule, .. } | Kind::List { rule, .. } => rule.to_string(),
            Kind::Tokens => {
                "must be a list of {name, token, role} (an executor's with groups)".into()
            }
            Kind::Hosts => "must map each host or host:port to {max_in_flight}".into(),
            Kind::Channels => "must be a list of {name, kind, …}".into(),
            Kind::AlertRule => {
                "must be {events, channels, threshold, windowSecs, silenceSecs}".into()
            }
        }
    }

    /// The refusal of a value that breaks the rule.
    pub fn refusal(&self) -> Refusal {
        Refusal::Rule(self.rule())
    }
}

impl Parsed {
    /// The value as the reference and refusals show it (a URL's password masked).
    pub fn shown(&self) -> String {
        match self {
            Parsed::Number(n) => n.to_string(),
            Parsed::Text(text) => masked(text),
            Parsed::List(items) => format!("[{}]", items.join(", ")),
            Parsed::Tokens(tokens) => {
                let names: Vec<&str> = tokens.iter().map(|token| token.name.as_str()).collect();
                format!("[{}]", names.join(", "))
            }
            Parsed::Hosts(hosts) => {
                let caps: Vec<String> = hosts
                    .iter()
                    .map(|(host, config)| format!("{host}: {}", config.max_in_flight))
                    .collect();
                format!("{{{}}}", caps.join(", "))
            }
            Parsed::Channels(channels) => {
                let names: Vec<&str> = channels.iter().map(|c| c.name.as_str()).collect();
                format!("[{}]", names.join(", "))
            }
            Parsed::AlertRule(rule) => {
                format!(
                "{{events: [{}], channels: [{}], threshold: {}, windowSecs: {}, silenceSecs: {}}}",
                rule.events.iter().map(|e| e.as_str()).collect::<Vec<_>>().join(", "),
                rule.channels.join(", "),
                rule.threshold,
                rule.window_secs,
                rule.silence_secs
            )
            }
        }
    }
}

/// A value of the config file as text: a scalar as written; `None` for a list or a mapping.
pub fn scalar(value: &Value) -> Option<String> {
    match value {
        Value::String(text) => Some(text.clone()),
        Value::Number(number) => Some(number.to_string()),
        Value::Bool(flag) => Some(flag.to_string()),
        Value::Null | Value::Array(_) | Value::Object(_) => None,
    }
}

/// `text` with the password of a URL in it masked, whether the URL parses or not.
pub fn masked(text: &str) -> String {
    if let Some((scheme, rest)) = text.split_once("://") {
        let authority = &rest[..rest.find('/').unwrap_or(rest.len())];
        if let Some(at) = authority.rfind('@') {
            if let Some(colon) = authority[..at].find(':') {
                return format!("{scheme}://{}:***{}", &rest[..colon], &rest[at..]);
            }
        }
    }
    text.to_string()
}

fn in_range(n: i128, min: i64, max: i64) -> bool {
    (i128::from(min)..=i128::from(max)).contains(&n)
}

/// The entries of a comma-separated list, trimmed, empty ones left out.
fn listed(value: &str) -> Vec<String> {
    value
        .split(',')
        .map(str::trim)
        .filter(|entry| !entry.is_empty())
        .map(String::from)
        .collect()
}

/// `dispatch.hosts`: each key a host or `host:port` as a handler URL names it, each cap in
/// the range of `dispatch.max_in_flight_per_host`.
fn check_hosts(hosts: &BTreeMap<String, HostConfig>) -> Result<(), Refusal> {
    for (host, config) in hosts {
        let plain = !host.contains(['/', '@', '?', '#', ' '])
            && ax_core::dispatch::host_slots::host_key(&format!("http://{host}/")).is_some();
        if !plain {
            return Err(Refusal::Rule(format!(
                "must name each host as in a handler URL, host or host:port (`{host}` is not one)"
            )));
        }
        if !in_range(config.max_in_flight as i128, 1, MAX_IN_FLIGHT_PER_HOST) {
            return Err(Refusal::Rule(format!(
                "must give `{host}` a max_in_flight of 1-{MAX_IN_FLIGHT_PER_HOST}, not {}",
                config.max_in_flight
            )));
        }
    }
    Ok(())
}

/// Named tokens: each name and each token given once, names fit for the audit log, tokens
/// long enough not to be guessed, an executor's groups named. A token is never shown.
fn check_tokens(tokens: &[NamedToken]) -> Result<(), Refusal> {
    let mut names = HashSet::new();
    let mut secrets = HashSet::new();
    for (n, named) in tokens.iter().enumerate() {
        check_groups(named).map_err(|rule| Refusal::Entry {
            entry: format!("[{n}].groups"),
            rule,
        })?;
        if !(1..=64).contains(&named.name.chars().count())
            || named.name.chars().any(char::is_control)
            || named.name == ANONYMOUS
        {
            return Err(Refusal::Rule(format!(
                "must name each token with 1-64 characters, not `{ANONYMOUS}` (`{}` is not such a name)",
                named.name
            )));
        }
        if !names.insert(named.name.as_str()) {
            return Err(Refusal::Rule(format!(
                "must name each token once (`{}` is there twice)",
                named.name
            )));
        }
        if named.token.chars().count() < MIN_SECRET_CHARS {
            return Err(Refusal::Rule(format!(
                "must give each token at least {MIN_SECRET_CHARS} characters (the token of `{}` has fewer)",
                named.name
            )));
        }
        if !secrets.insert(named.token.as_str()) {
            return Err(Refusal::Rule(format!(
                "must give each name a token of its own (the token of `{}` is another token's too)",
                named.name
            )));
        }
    }
    Ok(())
}

/// The `groups` of a named token: an executor's lists the groups it may register members into
/// (`["*"]` for all, so that all is never the default of a forgotten key); another's has none.
fn check_groups(named: &NamedToken) -> Result<(), String> {
    let every = Groups::EVERY;
    let name = &named.name;
    match (named.role, named.groups.as_deref()) {
        (Role::Executor, None) => Err(format!(
            "must list the executor groups the token `{name}` may register members into \
             (`[\"{every}\"]` for all)"
        )),
        (Role::Executor, Some([])) => Err(format!(
            "must name at least one group for the token `{name}` (`[\"{every}\"]` for all)"
        )),
        (Role::Executor, Some(groups)) => {
            if groups.len() > 1 && groups.iter().any(|group| group == every) {
                return Err(format!(
                    "of the token `{name}` must be `[\"{every}\"]` alone or group names: `{every}` is every group"
                ));
            }
            match groups.iter().find(|group| *group != every && !valid_group_name(group)) {
                Some(bad) => Err(format!(
                    "of the token `{name}` must be group names, 1-64 of a-z 0-9 _ . - (`{}` is not one)",
                    bad.escape_debug()
                )),
                None => Ok(()),
            }
        }
        (_, None) => Ok(()),
        (_, Some(_)) => Err(format!(
            "are for an executor's token only (`{name}` is not one: it has no groups to join)"
        )),
    }
}
