//! Configuration, layered: built-in defaults, then `config/ax.yaml` (or `--config PATH`), then
//! `AX_…` environment variables.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::plan::MissedRunPolicy;
use crate::run::RetryPolicy;
use crate::security::{Allowlist, Role, ANONYMOUS};

/// The config file read when no `--config` is given and it exists.
pub const DEFAULT_CONFIG_PATH: &str = "config/ax.yaml";

/// Errors reading the configuration.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("invalid config file {path}: {source}")]
    Parse {
        path: PathBuf,
        source: serde_yaml::Error,
    },
    #[error("invalid value `{value}` for {name}: {reason}")]
    Invalid {
        name: &'static str,
        value: String,
        reason: String,
    },
    /// A secret too short not to be guessed; its value is never shown.
    #[error("{key} ({env}) must be at least {MIN_SECRET_CHARS} characters")]
    ShortSecret {
        key: &'static str,
        env: &'static str,
    },
}

/// The fewest characters of a token or a secret.
pub const MIN_SECRET_CHARS: usize = 16;

/// A named API token (`server.tokens`).
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct NamedToken {
    pub name: String,
    pub token: String,
    pub role: Role,
}

/// All settings of one ax process.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    pub server: ServerConfig,
    pub store: StoreConfig,
    pub redis: RedisConfig,
    pub scheduler: SchedulerConfig,
    pub dispatch: DispatchConfig,
    pub security: SecurityConfig,
}

/// `security.*`: signatures, callback tokens and where handlers may live.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct SecurityConfig {
    /// Key of dispatch signatures and callback tokens; unset: one generated and kept in the
    /// database, shared by every ax process on it.
    pub signing_secret: Option<String>,
    /// Hosts, `*.domains`, IPs and CIDRs handlers may live on; empty: anywhere.
    pub handler_allowlist: Vec<String>,
}

/// `server.*`: the HTTP API and this process's identity in a cluster.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct ServerConfig {
    /// Listen address; unset: 0.0.0.0 with an admin token, 127.0.0.1 without one.
    pub bind: Option<String>,
    pub port: u16,
    /// Unique per ax process sharing one database; the value of the Redis lock. Unset: the
    /// identity this host keeps in the store (see `crate::identity`).
    pub instance_id: Option<String>,
    /// How long shutdown waits for in-flight dispatches.
    pub shutdown_timeout_ms: u64,
    /// When set, the admin API requires `Authorization: Bearer <token>`.
    pub admin_token: Option<String>,
    /// Named tokens, each with its role; the audit log names the token a change came with.
    pub tokens: Vec<NamedToken>,
    /// Names (`host` or `host:port`) requests may give as their `Host` besides the loopback
    /// ones, the bind address and this machine's names; checked without tokens, or when set.
    pub allowed_hosts: Vec<String>,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            bind: None,
            port: 8901,
            instance_id: None,
            shutdown_timeout_ms: 10_000,
            admin_token: None,
            tokens: Vec::new(),
            allowed_hosts: Vec::new(),
        }
    }
}

/// `store.*`: the database.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct StoreConfig {
    /// `sqlite://PATH` (embedded) or `mysql://user:pass@host:port/db`.
    pub url: String,
    pub pool_size: u32,
    /// Most instance writes in one transaction.
    pub batch_size: usize,
    /// Longest a write waits in the queue before its batch is committed.
    pub batch_interval_ms: u64,
    /// Finished runs older than this are deleted.
    pub retention_days: i64,
}

impl Default for StoreConfig {
    fn default() -> Self {
        StoreConfig {
            url: "sqlite://./data/ax.db".into(),
            pool_size: 16,
            batch_size: 100,
            batch_interval_ms: 500,
            retention_days: 30,
        }
    }
}

/// `redis.*`: the cluster lock; unset means an in-process lock (one ax process).
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct RedisConfig {
    pub url: Option<String>,
}

/// Longest a run may be committed ahead of its time, in ms.
pub const MAX_COMMIT_AHEAD_MS: u64 = 5_000;

/// `scheduler.*`: the time wheel and its preload window.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct SchedulerConfig {
    pub tick_interval_ms: u64,
    pub wheel_size: usize,
    /// Page size of the preload query.
    pub max_grab_batch: i64,
    /// How far ahead tasks are held in the wheel.
    pub preload_window_secs: i64,
    /// How often the window is topped up from the database.
    pub preload_interval_secs: u64,
    /// How long before its time a run's row is committed (0: at its time). The run is still
    /// dispatched at its time; committing ahead takes the database off the lag.
    pub commit_ahead_ms: u64,
    /// Most runs between the wheel and the dispatchers (planned, committing, or committed and
    /// waiting for a dispatcher): past it the wheel waits, and falls behind the clock.
    pub max_queued_runs: usize,
    /// A run later than this when ax sees it is recorded MISSED instead of fired.
    pub misfire_threshold_secs: i64,
    /// Wait before the first retry of a failed attempt.
    pub retry_backoff_secs: i64,
    /// Each further retry waits this many times longer.
    pub retry_factor: i64,
    /// How long a run waits for its upstream tasks before it fails.
    pub dependency_timeout_secs: i64,
    /// Most backfilled runs of a task dispatched per second.
    pub backfill_per_sec: i64,
}

impl Default for SchedulerConfig {
    fn default() -> Self {
        SchedulerConfig {
            tick_interval_ms: 1000,
            wheel_size: 600,
            max_grab_batch: 500,
            preload_window_secs: 600,
            preload_interval_secs: 30,
            commit_ahead_ms: 500,
            max_queued_runs: 50_000,
            misfire_threshold_secs: 300,
            retry_backoff_secs: 5,
            retry_factor: 5,
            dependency_timeout_secs: 3600,
            backfill_per_sec: 50,
        }
    }
}

/// `dispatch.*`: the HTTP callers.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct DispatchConfig {
    /// DispatchActors, each on its own thread.
    pub workers: usize,
    /// Most requests in flight per worker.
    pub max_in_flight: usize,
    /// Most requests in flight to one executor host (a handler URL's host and port), over
    /// every worker; the runs over it wait in that host's queue.
    pub max_in_flight_per_host: usize,
    /// Settings of some executor hosts, by `host:port` or `host`.
    pub hosts: std::collections::BTreeMap<String, HostConfig>,
}

/// `dispatch.hosts.<host>`: one executor host's own settings.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct HostConfig {
    /// Most requests in flight to this host, instead of `dispatch.max_in_flight_per_host`.
    pub max_in_flight: usize,
}

impl Default for DispatchConfig {
    fn default() -> Self {
        DispatchConfig {
            workers: 2,
            max_in_flight: 512,
            max_in_flight_per_host: 64,
            hosts: Default::default(),
        }
    }
}

impl DispatchConfig {
    /// Each executor host's cap.
    pub fn host_caps(&self) -> crate::host_slots::HostCaps {
        crate::host_slots::HostCaps {
            default: self.max_in_flight_per_host,
            hosts: self
                .hosts
                .iter()
                .map(|(host, config)| (host.to_ascii_lowercase(), config.max_in_flight))
                .collect(),
        }
    }
}

/// Environment variables, each overriding one key. Exact names: operators' scripts rely on them.
pub const ENV_KEYS: &[(&str, &str)] = &[
    ("AX_BIND", "server.bind"),
    ("AX_ADMIN_TOKEN", "server.admin_token"),
    ("AX_SIGNING_SECRET", "security.signing_secret"),
    ("AX_HANDLER_ALLOWLIST", "security.handler_allowlist"),
    ("AX_ALLOWED_HOSTS", "server.allowed_hosts"),
    ("AX_PORT", "server.port"),
    ("AX_INSTANCE_ID", "server.instance_id"),
    ("AX_SHUTDOWN_TIMEOUT_MS", "server.shutdown_timeout_ms"),
    ("AX_STORE_URL", "store.url"),
    ("AX_STORE_POOL_SIZE", "store.pool_size"),
    ("AX_STORE_BATCH_SIZE", "store.batch_size"),
    ("AX_STORE_BATCH_INTERVAL_MS", "store.batch_interval_ms"),
    ("AX_REDIS_URL", "redis.url"),
    ("AX_TICK_INTERVAL_MS", "scheduler.tick_interval_ms"),
    ("AX_WHEEL_SIZE", "scheduler.wheel_size"),
    ("AX_MAX_GRAB_BATCH", "scheduler.max_grab_batch"),
    ("AX_PRELOAD_WINDOW_SECS", "scheduler.preload_window_secs"),
    ("AX_COMMIT_AHEAD_MS", "scheduler.commit_ahead_ms"),
    ("AX_MAX_QUEUED_RUNS", "scheduler.max_queued_runs"),
    (
        "AX_PRELOAD_INTERVAL_SECS",
        "scheduler.preload_interval_secs",
    ),
    (
        "AX_MISFIRE_THRESHOLD_SECS",
        "scheduler.misfire_threshold_secs",
    ),
    ("AX_RETRY_BACKOFF_SECS", "scheduler.retry_backoff_secs"),
    ("AX_RETRY_FACTOR", "scheduler.retry_factor"),
    (
        "AX_DEPENDENCY_TIMEOUT_SECS",
        "scheduler.dependency_timeout_secs",
    ),
    ("AX_BACKFILL_PER_SEC", "scheduler.backfill_per_sec"),
    ("AX_RETENTION_DAYS", "store.retention_days"),
    ("AX_DISPATCH_WORKERS", "dispatch.workers"),
    ("AX_DISPATCH_MAX_IN_FLIGHT", "dispatch.max_in_flight"),
    (
        "AX_DISPATCH_MAX_IN_FLIGHT_PER_HOST",
        "dispatch.max_in_flight_per_host",
    ),
];

impl Config {
    /// Loads the configuration: `path` if given, else `config/ax.yaml` if present, else
    /// defaults; then the process environment.
    pub fn load(path: Option<&Path>) -> Result<Config, ConfigError> {
        Config::load_with(path, Vec::new())
    }

    /// Like `load`, then command-line flags over both: each `(flag, key, value)` sets the
    /// config key `key` (errors name `flag`).
    pub fn load_with(
        path: Option<&Path>,
        flags: Vec<(&'static str, &'static str, String)>,
    ) -> Result<Config, ConfigError> {
        let default_path = Path::new(DEFAULT_CONFIG_PATH);
        let file = path.or_else(|| default_path.exists().then_some(default_path));
        let mut config = match file {
            Some(path) => Config::from_file(path)?,
            None => Config::default(),
        };
        config.apply_env(|name| std::env::var(name).ok())?;
        for (flag, key, value) in flags {
            config.set(flag, key, value)?;
        }
        config.validate()?;
        Ok(config)
    }

    /// The environment variables ax reads, each with its config key, for `--help`.
    pub fn env_help() -> String {
        let mut help =
            String::from("Environment (over the config file; command-line flags over both):\n");
        for (name, key) in ENV_KEYS {
            help.push_str(&format!("  {name:<28} {key}\n"));
        }
        help.push_str("  RUST_LOG                     log filter (default info)\n");
        help
    }

    /// The listen address: as configured, else all interfaces only when the admin API is
    /// protected by a token.
    pub fn bind_address(&self) -> &str {
        match &self.server.bind {
            Some(bind) => bind,
            None if self.has_tokens() => "0.0.0.0",
            None => "127.0.0.1",
        }
    }

    /// Whether the API asks for a token (the admin token or a named one).
    pub fn has_tokens(&self) -> bool {
        self.server.admin_token.is_some() || !self.server.tokens.is_empty()
    }

    /// The global missed-run policy.
    pub fn missed_run_policy(&self) -> MissedRunPolicy {
        MissedRunPolicy {
            misfire_threshold_secs: self.scheduler.misfire_threshold_secs,
            ..MissedRunPolicy::default()
        }
    }

    /// The global retry back-off.
    pub fn retry_policy(&self) -> RetryPolicy {
        RetryPolicy {
            backoff_secs: self.scheduler.retry_backoff_secs,
            factor: self.scheduler.retry_factor,
        }
    }

    /// Reads a YAML file; absent keys keep their defaults.
    pub fn from_file(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        serde_yaml::from_str(&text).map_err(|source| ConfigError::Parse {
            path: path.to_path_buf(),
            source,
        })
    }

    /// Applies every `AX_…` variable that `lookup` finds.
    pub fn apply_env(
        &mut self,
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<(), ConfigError> {
        for (name, key) in ENV_KEYS {
            if let Some(value) = lookup(name) {
                self.set(name, key, value)?;
            }
        }
        Ok(())
    }

    fn set(&mut self, name: &'static str, key: &str, value: String) -> Result<(), ConfigError> {
        match key {
            "server.bind" => self.server.bind = Some(value).filter(|v| !v.is_empty()),
            "server.admin_token" => self.server.admin_token = Some(value).filter(|v| !v.is_empty()),
            "security.signing_secret" => {
                self.security.signing_secret = Some(value).filter(|v| !v.is_empty())
            }
            "security.handler_allowlist" => self.security.handler_allowlist = listed(&value),
            "server.allowed_hosts" => self.server.allowed_hosts = listed(&value),
            "server.port" => self.server.port = parse(name, &value)?,
            "server.instance_id" => self.server.instance_id = Some(value).filter(|v| !v.is_empty()),
            "server.shutdown_timeout_ms" => self.server.shutdown_timeout_ms = parse(name, &value)?,
            "store.url" => self.store.url = value,
            "store.pool_size" => self.store.pool_size = parse(name, &value)?,
            "store.batch_size" => self.store.batch_size = parse(name, &value)?,
            "store.batch_interval_ms" => self.store.batch_interval_ms = parse(name, &value)?,
            // An empty value clears it: the way to fall back to the in-process lock.
            "redis.url" => self.redis.url = Some(value).filter(|v| !v.is_empty()),
            "scheduler.tick_interval_ms" => self.scheduler.tick_interval_ms = parse(name, &value)?,
            "scheduler.wheel_size" => self.scheduler.wheel_size = parse(name, &value)?,
            "scheduler.max_grab_batch" => self.scheduler.max_grab_batch = parse(name, &value)?,
            "scheduler.preload_window_secs" => {
                self.scheduler.preload_window_secs = parse(name, &value)?
            }
            "scheduler.preload_interval_secs" => {
                self.scheduler.preload_interval_secs = parse(name, &value)?
            }
            "scheduler.commit_ahead_ms" => self.scheduler.commit_ahead_ms = parse(name, &value)?,
            "scheduler.max_queued_runs" => self.scheduler.max_queued_runs = parse(name, &value)?,
            "scheduler.misfire_threshold_secs" => {
                self.scheduler.misfire_threshold_secs = parse(name, &value)?
            }
            "scheduler.retry_backoff_secs" => {
                self.scheduler.retry_backoff_secs = parse(name, &value)?
            }
            "scheduler.retry_factor" => self.scheduler.retry_factor = parse(name, &value)?,
            "scheduler.dependency_timeout_secs" => {
                self.scheduler.dependency_timeout_secs = parse(name, &value)?
            }
            "scheduler.backfill_per_sec" => self.scheduler.backfill_per_sec = parse(name, &value)?,
            "store.retention_days" => self.store.retention_days = parse(name, &value)?,
            "dispatch.workers" => self.dispatch.workers = parse(name, &value)?,
            "dispatch.max_in_flight" => self.dispatch.max_in_flight = parse(name, &value)?,
            "dispatch.max_in_flight_per_host" => {
                self.dispatch.max_in_flight_per_host = parse(name, &value)?
            }
            _ => unreachable!("ENV_KEYS names only keys handled here"),
        }
        Ok(())
    }

    /// Rejects values the scheduler cannot run with.
    pub fn validate(&self) -> Result<(), ConfigError> {
        for range in RANGES {
            range.check(self)?;
        }
        if let Some(id) = &self.server.instance_id {
            if !is_instance_id(id) {
                return Err(invalid(
                    "server.instance_id",
                    id.clone(),
                    "must be 1-64 characters of A-Z a-z 0-9 . _ : -",
                ));
            }
        }
        check_secret(
            "server.admin_token",
            "AX_ADMIN_TOKEN",
            &self.server.admin_token,
        )?;
        check_secret(
            "security.signing_secret",
            "AX_SIGNING_SECRET",
            &self.security.signing_secret,
        )?;
        check_tokens(&self.server.tokens)?;
        check_hosts(&self.dispatch.hosts)?;
        Allowlist::parse(&self.security.handler_allowlist).map_err(|err| {
            invalid(
                "security.handler_allowlist",
                self.security.handler_allowlist.join(","),
                &err,
            )
        })?;
        crate::site::check_allowed_hosts(&self.server.allowed_hosts).map_err(|err| {
            invalid(
                "server.allowed_hosts",
                self.server.allowed_hosts.join(","),
                &err,
            )
        })?;
        crate::store::StoreUrl::parse(&self.store.url)
            .map_err(|err| invalid("store.url", self.store.url.clone(), &err.to_string()))?;
        Ok(())
    }
}

/// `dispatch.hosts`: each key a host or `host:port` as a handler URL names it, each cap in
/// the range of `dispatch.max_in_flight_per_host`.
fn check_hosts(hosts: &std::collections::BTreeMap<String, HostConfig>) -> Result<(), ConfigError> {
    for (host, config) in hosts {
        let plain = !host.contains(['/', '@', '?', '#', ' '])
            && crate::host_slots::host_key(&format!("http://{host}/")).is_some();
        if !plain {
            return Err(invalid(
                "dispatch.hosts",
                host.clone(),
                "must be a host or host:port, as in a handler URL",
            ));
        }
        if !(1..=100_000).contains(&config.max_in_flight) {
            return Err(invalid(
                "dispatch.hosts",
                format!("{host}: max_in_flight {}", config.max_in_flight),
                "max_in_flight must be 1-100000",
            ));
        }
    }
    Ok(())
}

/// A secret set by `key` (or `env`) must be long enough not to be guessed.
fn check_secret(
    key: &'static str,
    env: &'static str,
    secret: &Option<String>,
) -> Result<(), ConfigError> {
    match secret {
        Some(secret) if secret.chars().count() < MIN_SECRET_CHARS => {
            Err(ConfigError::ShortSecret { key, env })
        }
        _ => Ok(()),
    }
}

/// Named tokens: each name and each token given once, names fit for the audit log, tokens
/// long enough not to be guessed.
fn check_tokens(tokens: &[NamedToken]) -> Result<(), ConfigError> {
    let mut names = std::collections::HashSet::new();
    let mut secrets = std::collections::HashSet::new();
    for named in tokens {
        if !(1..=64).contains(&named.name.chars().count())
            || named.name.chars().any(char::is_control)
            || named.name == ANONYMOUS
        {
            let why = format!("a name must be 1-64 characters, not `{ANONYMOUS}`");
            return Err(invalid("server.tokens", named.name.clone(), &why));
        }
        if !names.insert(named.name.as_str()) {
            return Err(invalid(
                "server.tokens",
                named.name.clone(),
                "names a token twice",
            ));
        }
        if named.token.chars().count() < MIN_SECRET_CHARS {
            let why = format!(
                "the token of `{}` must be at least {MIN_SECRET_CHARS} characters",
                named.name
            );
            return Err(invalid("server.tokens", "<hidden>".into(), &why));
        }
        if !secrets.insert(named.token.as_str()) {
            let why = format!("the token of `{}` is another token's too", named.name);
            return Err(invalid("server.tokens", "<hidden>".into(), &why));
        }
    }
    Ok(())
}

/// Whether `id` may name an ax process: it also names a lock file and a Redis key.
pub fn is_instance_id(id: &str) -> bool {
    (1..=64).contains(&id.len())
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | ':' | '-'))
}

/// The values a numeric key accepts. Durations are bounded too: a time far enough ahead
/// overflows the date arithmetic of the scheduler, which would stop an actor at run time.
pub struct Range {
    pub key: &'static str,
    pub min: i64,
    pub max: i64,
    /// `ms`, `s`, `days`, or empty for a count.
    pub unit: &'static str,
    value: fn(&Config) -> i128,
}

impl Range {
    /// `min-max unit`, as the README's table shows it.
    pub fn describe(&self) -> String {
        format!("{}-{} {}", self.min, self.max, self.unit)
            .trim_end()
            .to_string()
    }

    fn check(&self, config: &Config) -> Result<(), ConfigError> {
        let value = (self.value)(config);
        if (i128::from(self.min)..=i128::from(self.max)).contains(&value) {
            return Ok(());
        }
        let reason = format!("must be {}", self.describe());
        Err(invalid(self.key, value.to_string(), &reason))
    }
}

/// One day, in seconds.
const DAY_SECS: i64 = 24 * 60 * 60;

/// Every numeric key with its range, declared once.
pub const RANGES: &[Range] = &[
    Range {
        key: "server.shutdown_timeout_ms",
        min: 0,
        max: 10 * 60 * 1000,
        unit: "ms",
        value: |c| c.server.shutdown_timeout_ms.into(),
    },
    Range {
        key: "store.pool_size",
        min: 1,
        max: 1000,
        unit: "",
        value: |c| c.store.pool_size.into(),
    },
    Range {
        key: "store.batch_size",
        min: 1,
        // A MySQL statement holds at most 65,535 parameters; a fire row binds a dozen.
        max: 5000,
        unit: "",
        value: |c| c.store.batch_size as i128,
    },
    Range {
        key: "store.batch_interval_ms",
        min: 0,
        max: 10_000,
        unit: "ms",
        value: |c| c.store.batch_interval_ms.into(),
    },
    Range {
        key: "store.retention_days",
        min: 1,
        max: 3650,
        unit: "days",
        value: |c| c.store.retention_days.into(),
    },
    Range {
        key: "scheduler.tick_interval_ms",
        min: 1,
        // Ticks fall on whole seconds at least; /healthz expects one every few seconds.
        max: 1000,
        unit: "ms",
        value: |c| c.scheduler.tick_interval_ms.into(),
    },
    Range {
        key: "scheduler.wheel_size",
        min: 1,
        max: crate::wheel::MAX_SLOTS as i64,
        unit: "",
        value: |c| c.scheduler.wheel_size as i128,
    },
    Range {
        key: "scheduler.max_grab_batch",
        min: 1,
        max: 10_000,
        unit: "",
        value: |c| c.scheduler.max_grab_batch.into(),
    },
    Range {
        key: "scheduler.preload_window_secs",
        min: 1,
        max: DAY_SECS,
        unit: "s",
        value: |c| c.scheduler.preload_window_secs.into(),
    },
    Range {
        key: "scheduler.preload_interval_secs",
        min: 1,
        max: 60 * 60,
        unit: "s",
        value: |c| c.scheduler.preload_interval_secs.into(),
    },
    Range {
        key: "scheduler.commit_ahead_ms",
        min: 0,
        max: MAX_COMMIT_AHEAD_MS as i64,
        unit: "ms",
        value: |c| c.scheduler.commit_ahead_ms.into(),
    },
    Range {
        key: "scheduler.max_queued_runs",
        min: 1,
        max: 10_000_000,
        unit: "runs",
        value: |c| c.scheduler.max_queued_runs as i128,
    },
    Range {
        key: "scheduler.misfire_threshold_secs",
        min: 1,
        max: 7 * DAY_SECS,
        unit: "s",
        value: |c| c.scheduler.misfire_threshold_secs.into(),
    },
    Range {
        key: "scheduler.retry_backoff_secs",
        min: 1,
        max: 7 * DAY_SECS,
        unit: "s",
        value: |c| c.scheduler.retry_backoff_secs.into(),
    },
    Range {
        key: "scheduler.retry_factor",
        min: 1,
        max: 10,
        unit: "",
        value: |c| c.scheduler.retry_factor.into(),
    },
    Range {
        key: "scheduler.dependency_timeout_secs",
        min: 1,
        max: 7 * DAY_SECS,
        unit: "s",
        value: |c| c.scheduler.dependency_timeout_secs.into(),
    },
    Range {
        key: "scheduler.backfill_per_sec",
        min: 1,
        max: 10_000,
        unit: "/s",
        value: |c| c.scheduler.backfill_per_sec.into(),
    },
    Range {
        key: "dispatch.workers",
        min: 1,
        max: 64,
        unit: "",
        value: |c| c.dispatch.workers as i128,
    },
    Range {
        key: "dispatch.max_in_flight",
        min: 1,
        max: 100_000,
        unit: "",
        value: |c| c.dispatch.max_in_flight as i128,
    },
    Range {
        key: "dispatch.max_in_flight_per_host",
        min: 1,
        max: 100_000,
        unit: "",
        value: |c| c.dispatch.max_in_flight_per_host as i128,
    },
];

fn parse<T: std::str::FromStr>(name: &'static str, value: &str) -> Result<T, ConfigError>
where
    T::Err: std::fmt::Display,
{
    value
        .trim()
        .parse()
        .map_err(|err: T::Err| invalid(name, value.to_string(), &err.to_string()))
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

fn invalid(name: &'static str, value: String, reason: &str) -> ConfigError {
    ConfigError::Invalid {
        name,
        value,
        reason: reason.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_the_embedded_store_on_port_8901() {
        let config = Config::default();
        assert_eq!(config.server.port, 8901);
        assert_eq!(config.store.url, "sqlite://./data/ax.db");
        assert_eq!(config.redis.url, None);
        assert_eq!(config.scheduler.wheel_size, 600);
        assert_eq!(config.scheduler.max_grab_batch, 500);
        assert_eq!(config.scheduler.preload_window_secs, 600);
        assert_eq!(config.store.batch_size, 100);
        assert_eq!(config.store.batch_interval_ms, 500);
        config.validate().expect("defaults are valid");
    }

    #[test]
    fn environment_overrides_the_file() {
        let mut config: Config =
            serde_yaml::from_str("server:\n  port: 9000\nstore:\n  url: sqlite://x.db\n")
                .expect("yaml");
        assert_eq!(config.server.port, 9000);
        config
            .apply_env(|name| match name {
                "AX_PORT" => Some("9100".into()),
                "AX_INSTANCE_ID" => Some("node-a".into()),
                "AX_STORE_URL" => Some("mysql://root@127.0.0.1:3306/ax".into()),
                "AX_REDIS_URL" => Some("redis://127.0.0.1:6379".into()),
                _ => None,
            })
            .expect("env");
        assert_eq!(config.server.port, 9100);
        assert_eq!(config.server.instance_id.as_deref(), Some("node-a"));
        assert_eq!(config.store.url, "mysql://root@127.0.0.1:3306/ax");
        assert_eq!(config.redis.url.as_deref(), Some("redis://127.0.0.1:6379"));
    }

    #[test]
    fn every_environment_variable_sets_its_key() {
        for (name, key) in ENV_KEYS {
            let mut config = Config::default();
            let value = if key.ends_with("url") {
                "sqlite://x.db"
            } else if key.ends_with("allowlist") {
                "10.0.0.0/8"
            } else if key.ends_with("allowed_hosts") {
                "ax.example.com"
            } else {
                "7"
            };
            config
                .apply_env(|n| (n == *name).then(|| value.to_string()))
                .unwrap_or_else(|err| panic!("{name}: {err}"));
            assert_ne!(config, Config::default(), "{name} changes {key}");
        }
    }

    #[test]
    fn the_shipped_config_file_holds_the_defaults() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(DEFAULT_CONFIG_PATH);
        let shipped = Config::from_file(&path).expect("config/ax.yaml parses");
        shipped.validate().expect("config/ax.yaml is valid");
        assert_eq!(shipped, Config::default());
    }

    #[test]
    fn the_readme_documents_every_variable() {
        let readme = include_str!("../README.md");
        for (name, key) in ENV_KEYS {
            assert!(
                readme.contains(name) && readme.contains(key),
                "{name} / {key}"
            );
        }
    }

    /// The environment variable of a key.
    fn env_name(key: &str) -> &'static str {
        ENV_KEYS
            .iter()
            .find(|(_, k)| *k == key)
            .map(|(name, _)| *name)
            .unwrap_or_else(|| panic!("{key} has no environment variable"))
    }

    /// The configuration with `key` set to `value`, validated.
    fn with_value(key: &str, value: i128) -> Result<Config, ConfigError> {
        let mut config = Config::default();
        let name = env_name(key);
        config.apply_env(|n| (n == name).then(|| value.to_string()))?;
        config.validate()?;
        Ok(config)
    }

    #[test]
    fn every_range_accepts_its_bounds_and_names_its_key_past_them() {
        for range in RANGES {
            let (min, max) = (i128::from(range.min), i128::from(range.max));
            for ok in [min, max] {
                with_value(range.key, ok).unwrap_or_else(|err| panic!("{}: {err}", range.key));
            }
            for bad in [max + 1, i128::from(i64::MAX), min - 1] {
                let err = with_value(range.key, bad).expect_err(range.key).to_string();
                // A value the key's type cannot even hold is named by its variable.
                let named = err.contains(range.key) || err.contains(env_name(range.key));
                assert!(named, "{} = {bad}: {err}", range.key);
            }
            let err = with_value(range.key, max + 1)
                .expect_err(range.key)
                .to_string();
            assert!(err.contains(range.key), "{}: {err}", range.key);
            assert!(err.contains(&range.describe()), "{}: {err}", range.key);
        }
    }

    #[test]
    fn every_duration_key_has_a_range() {
        let durations = ENV_KEYS
            .iter()
            .map(|(_, key)| *key)
            .filter(|key| key.ends_with("_ms") || key.ends_with("_secs") || key.ends_with("_days"));
        for key in durations {
            assert!(RANGES.iter().any(|r| r.key == key), "{key}");
        }
    }

    #[test]
    fn the_readme_states_every_range() {
        let readme = include_str!("../README.md");
        for range in RANGES {
            let row = format!("| `{}` |", range.key);
            let line = readme
                .lines()
                .find(|line| line.starts_with(&row))
                .unwrap_or_else(|| panic!("no README row for {}", range.key));
            assert!(line.contains(&range.describe()), "{line}");
        }
    }

    #[test]
    fn instance_ids_name_files_and_keys_safely() {
        for ok in ["node-a", "host.example-1a2b3c4d", "a:b_c"] {
            assert!(is_instance_id(ok), "{ok}");
        }
        for bad in ["", "a/b", "a b", "ü", &"x".repeat(65)] {
            assert!(!is_instance_id(bad), "{bad}");
        }
        let mut config = Config::default();
        config
            .apply_env(|name| (name == "AX_INSTANCE_ID").then(|| "../x".into()))
            .expect("any text is read");
        let err = config.validate().expect_err("a path is no instance id");
        assert!(err.to_string().contains("server.instance_id"), "{err}");
    }

    #[test]
    fn bad_values_are_named() {
        let mut config = Config::default();
        let err = config
            .apply_env(|name| (name == "AX_PORT").then(|| "eighty".into()))
            .expect_err("not a port");
        assert!(err.to_string().contains("AX_PORT"), "{err}");
        let config = Config {
            store: StoreConfig {
                url: "postgres://x".into(),
                ..StoreConfig::default()
            },
            ..Config::default()
        };
        assert!(config
            .validate()
            .unwrap_err()
            .to_string()
            .contains("store.url"));
        assert!(serde_yaml::from_str::<Config>("server:\n  prot: 1\n").is_err());
        let mut config = Config::default();
        config.scheduler.commit_ahead_ms = MAX_COMMIT_AHEAD_MS + 1;
        let err = config.validate().expect_err("too far ahead");
        assert!(
            err.to_string().contains("scheduler.commit_ahead_ms"),
            "{err}"
        );
        config.scheduler.commit_ahead_ms = 0;
        config.validate().expect("0 commits at the time");
    }

    #[test]
    fn allowed_hosts_come_comma_separated_or_from_the_file_and_are_checked() {
        let mut config: Config =
            serde_yaml::from_str("server:\n  allowed_hosts: [ax.example.com]\n").expect("yaml");
        assert_eq!(config.server.allowed_hosts, ["ax.example.com"]);
        config
            .apply_env(|name| {
                (name == "AX_ALLOWED_HOSTS").then(|| "ax.example.com, ops.example.com:8443,".into())
            })
            .expect("env");
        assert_eq!(
            config.server.allowed_hosts,
            ["ax.example.com", "ops.example.com:8443"]
        );
        config.validate().expect("valid");
        config
            .server
            .allowed_hosts
            .push("http://evil.example".into());
        let err = config.validate().expect_err("a URL is no host").to_string();
        assert!(
            err.contains("server.allowed_hosts") && err.contains("`http://evil.example`"),
            "{err}"
        );
    }

    #[test]
    fn the_admin_token_and_the_signing_secret_are_long_enough() {
        for (name, key) in [
            ("AX_ADMIN_TOKEN", "server.admin_token"),
            ("AX_SIGNING_SECRET", "security.signing_secret"),
        ] {
            let with = |value: &str| {
                let mut config = Config::default();
                config.apply_env(|n| (n == name).then(|| value.to_string()))?;
                config.validate()
            };
            let err = with("fifteen-chars-x").expect_err(name).to_string();
            assert_eq!(
                err,
                format!("{key} ({name}) must be at least 16 characters")
            );
            with("sixteen-chars-xx").unwrap_or_else(|err| panic!("{name}: {err}"));
            // Counted in characters, as they are typed.
            with("ü".repeat(16).as_str()).unwrap_or_else(|err| panic!("{name}: {err}"));
        }
    }

    #[test]
    fn named_tokens_come_from_the_file_and_are_checked() {
        let yaml =
            "server:\n  tokens:\n    - {name: ops, token: ops-token-0123456789, role: admin}\n    \
                    - {name: wall, token: wall-token-0123456789, role: viewer}\n";
        let config: Config = serde_yaml::from_str(yaml).expect("tokens parse");
        assert_eq!(config.server.tokens[1].role, Role::Viewer);
        config.validate().expect("valid tokens");
        assert!(config.has_tokens());
        assert_eq!(config.bind_address(), "0.0.0.0");
        assert!(serde_yaml::from_str::<Config>(
            "server:\n  tokens:\n    - {name: x, token: y0123456789abcdef, role: root}\n"
        )
        .is_err());
        let named = |name: &str, token: &str| NamedToken {
            name: name.into(),
            token: token.into(),
            role: Role::Admin,
        };
        for (tokens, why) in [
            (vec![named("ops", "short")], "at least 16"),
            (vec![named("", "ops-token-0123456789")], "1-64"),
            (vec![named(ANONYMOUS, "ops-token-0123456789")], "1-64"),
            (
                vec![
                    named("a", "ops-token-0123456789"),
                    named("a", "other-token-0123456789"),
                ],
                "twice",
            ),
            (
                vec![
                    named("a", "ops-token-0123456789"),
                    named("b", "ops-token-0123456789"),
                ],
                "another token",
            ),
        ] {
            let mut config = Config::default();
            config.server.tokens = tokens;
            let err = config.validate().expect_err(why).to_string();
            assert!(err.contains("server.tokens") && err.contains(why), "{err}");
            assert!(!err.contains("ops-token"), "a token never shows: {err}");
        }
    }
}
