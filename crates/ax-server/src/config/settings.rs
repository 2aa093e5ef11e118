//! Every setting of ax, declared once: its key, environment variable, default, kind (range,
//! unit or rule) and one-line doc. The config structs, the environment, the file, the checks,
//! `ax serve --help` and the configuration reference's table all follow from these declarations.

use std::collections::BTreeMap;

use super::declare::settings;
use super::duration::{self, TimeUnit};
use super::kind::{Kind, MAX_IN_FLIGHT_PER_HOST};
use super::{dsn, is_instance_id, is_key_prefix, redis_url, HostConfig, NamedToken};
use ax_core::alerting::{AlertRule, Channel};

/// Longest a run may be committed ahead of its time, in ms.
pub const MAX_COMMIT_AHEAD_MS: u64 = 5_000;

/// One day, in seconds.
const DAY_SECS: i64 = 24 * 60 * 60;

/// Seconds, `min..=max`.
const fn secs(min: i64, max: i64) -> Kind {
    Kind::Duration {
        min,
        max,
        unit: TimeUnit::Secs,
    }
}

/// Milliseconds, `min..=max`.
const fn millis(min: i64, max: i64) -> Kind {
    Kind::Duration {
        min,
        max,
        unit: TimeUnit::Millis,
    }
}

/// A count `min..=max` of `unit`.
const fn count(min: i64, max: i64, unit: &'static str) -> Kind {
    Kind::Count {
        min,
        max,
        unit,
        zero: false,
    }
}

settings! {
    /// `server.*`: the HTTP API and this process's identity in a cluster.
    server: ServerConfig {
        bind: Option<String> {
            env: "AX_BIND",
            default: None,
            shown: "`127.0.0.1` without an admin token, `0.0.0.0` with one",
            kind: Kind::Checked {
                rule: "must be an IP address or a host name",
                accepts: ax_core::security::site::is_bind_address,
            },
            doc: "listen address",
        }
        admin_token: Option<String> {
            env: "AX_ADMIN_TOKEN",
            default: None,
            kind: Kind::Secret,
            doc: "when set, every `/api` call but the callback needs `Authorization: Bearer <token>`",
        }
        tokens: Vec<NamedToken> {
            default: Vec::new(),
            kind: Kind::Tokens,
            doc: "named tokens `{name, token, role}`, role `viewer`, `admin` or `executor` (registers executor group members, nothing else); an executor's lists the groups it may join, `groups: [billing, …]` (`[\"*\"]` for all, written out; required); see [Security](security.md)",
        }
        allowed_hosts: Vec<String> {
            env: "AX_ALLOWED_HOSTS",
            default: Vec::new(),
            kind: Kind::List {
                rule: "must list names requests may give as their Host",
                check: ax_core::security::site::check_allowed_hosts,
            },
            doc: "more names requests may give as their `Host` (`name` or `name:port`, e.g. the public name behind a proxy), added to the defaults; checked without a token, and with one when set (see [Security](security.md))",
        }
        port: u16 {
            env: "AX_PORT",
            default: 8901,
            kind: Kind::Count { min: 1, max: 65535, unit: "", zero: true },
            doc: "HTTP port (0: any free port)",
        }
        instance_id: Option<String> {
            env: "AX_INSTANCE_ID",
            default: None,
            shown: "`<hostname>-<8 hex digits>`, made on the first start, kept in the store",
            kind: Kind::Checked {
                rule: "must be 1-64 characters of A-Z a-z 0-9 . _ : -",
                accepts: is_instance_id,
            },
            doc: "unique name of this ax process (value of its Redis locks, `firedBy` of its runs); 1-64 of `A-Z a-z 0-9 . _ : -`",
        }
        shutdown_timeout_ms: u64 {
            env: "AX_SHUTDOWN_TIMEOUT_MS",
            default: 10_000,
            kind: millis(0, 10 * 60 * 1000),
            doc: "how long shutdown waits for in-flight dispatches",
        }
    }

    /// `store.*`: the database.
    store: StoreConfig {
        url: String {
            env: "AX_STORE_URL",
            default: "sqlite://./data/ax.db".into(),
            kind: Kind::Checked {
                rule: "must be sqlite://PATH, mysql://user:pass@host:port/db (several servers: mysql://user:pass@host1:port,host2:port/db) or postgres://user:pass@host:port/db[?sslmode=disable|prefer|require]",
                accepts: |url| ax_store::StoreUrl::parse(url).is_ok(),
            },
            doc: "`sqlite://PATH`, `mysql://user:pass@host:port/db` or `postgres://user:pass@host:port/db` (a missing database is created if the user may); MySQL is reached over TCP at exactly that host and port, through a Unix socket only with `?socket=PATH`. Several servers, as a Galera cluster's nodes: `mysql://user:pass@host1:port,host2:port,host3:port/db`; connections go to the server that answered last, else to the next that answers in the listed order, each given 2 s. PostgreSQL (also `postgresql://`) takes `sslmode` `disable`, `prefer` (the default: TLS if the server's certificate is trusted, else plain text) or `require` (TLS, the certificate checked), and `sslrootcert=PATH` for a private authority; several processes share one database as on MySQL",
        }
        pool_size: u32 {
            env: "AX_STORE_POOL_SIZE",
            default: 16,
            kind: count(1, 1000, ""),
            doc: "database connections (on MySQL the fires' write lane holds up to `store.fire_commits` and the results' up to `store.result_commits`; the rest serve reads)",
        }
        fire_commits: usize {
            env: "AX_STORE_FIRE_COMMITS",
            default: 2,
            kind: count(1, 64, ""),
            doc: "MySQL: fire transactions committing at once; raise it for a database server with cores of its own, as each beyond the server's cores costs it CPU without adding throughput (SQLite: always one)",
        }
        result_commits: usize {
            env: "AX_STORE_RESULT_COMMITS",
            default: 4,
            kind: count(1, 64, ""),
            doc: "MySQL: result transactions committing at once; a callback is answered once its result is committed, so more at once shorten that wait when a second's callbacks come together (SQLite: always one)",
        }
        batch_size: usize {
            env: "AX_STORE_BATCH_SIZE",
            default: 100,
            // A MySQL statement holds at most 65,535 parameters; a fire row binds a dozen.
            kind: count(1, 5000, ""),
            doc: "most run writes per transaction",
        }
        batch_interval_ms: u64 {
            env: "AX_STORE_BATCH_INTERVAL_MS",
            default: 500,
            kind: millis(0, 10_000),
            doc: "longest a result waits for a running commit before another starts beside it (results commit as soon as no commit of theirs runs; fires at once)",
        }
        retention_days: i64 {
            env: "AX_RETENTION_DAYS",
            default: 30,
            kind: Kind::Duration { min: 1, max: 3650, unit: TimeUnit::Days },
            doc: "finished runs older than this are deleted, in small batches, in the background",
        }
    }

    /// `redis.*`: the cluster lock; unset means an in-process lock (one ax process).
    redis: RedisConfig {
        url: Option<String> {
            env: "AX_REDIS_URL",
            default: None,
            kind: Kind::Checked {
                rule: redis_url::RULE,
                accepts: redis_url::is_redis_url,
            },
            doc: "`redis://[user:password@]host:port[/DB]`, `rediss://…` over TLS, or `redis+sentinel://[user:password@]host:port,host:port,…/SERVICE[/DB]` (`rediss+sentinel://…` over TLS): the primary the sentinels name for SERVICE, followed on a failover; the password is the data nodes'; unset (or empty): in-process lock, for a single ax",
        }
        ca_file: Option<String> {
            env: "AX_REDIS_CA_FILE",
            default: None,
            kind: Kind::Text,
            doc: "PEM file of the certificate authorities that `rediss://` (and `rediss+sentinel://`) Redis certificates are checked against, in place of the system's; unset: the system's",
        }
        sentinel_password: Option<String> {
            env: "AX_REDIS_SENTINEL_PASSWORD",
            default: None,
            kind: Kind::Text,
            doc: "password of the sentinels themselves (their `requirepass`), when they have one; the password in `redis.url` is the data nodes'",
        }
        key_prefix: String {
            env: "AX_REDIS_KEY_PREFIX",
            default: "ax:".into(),
            kind: Kind::Checked {
                rule: "must be 1-64 characters of A-Z a-z 0-9 . _ : -",
                accepts: is_key_prefix,
            },
            doc: "the start of every Redis key ax writes (fire locks `<prefix>lock:<taskId>`, heartbeats `<prefix>instance:<id>`, the process list `<prefix>instances`): two deployments with databases of their own share one Redis under different prefixes",
        }
    }

    /// `cluster.*`: what each process checks of itself against the others.
    cluster: ClusterConfig {
        max_clock_skew_ms: u64 {
            env: "AX_MAX_CLOCK_SKEW_MS",
            default: 500,
            kind: millis(0, 60_000),
            doc: "how far this process's clock may be from the database's (the cluster's reference clock, checked at start and every 5 s); past it the process fires and claims nothing, `/healthz` answers 503 and `CLOCK_SKEW` is alerted; `0` does not check",
        }
    }

    /// `scheduler.*`: the time wheel, its preload window, and the runs' global policies.
    scheduler: SchedulerConfig {
        tick_interval_ms: u64 {
            env: "AX_TICK_INTERVAL_MS",
            default: 1000,
            // Ticks fall on whole seconds at least; /healthz expects one every few seconds.
            kind: millis(1, 1000),
            doc: "wheel tick; ticks are aligned to whole seconds",
        }
        wheel_size: usize {
            env: "AX_WHEEL_SIZE",
            default: 600,
            kind: count(1, ax_core::wheel::MAX_SLOTS as i64, ""),
            doc: "wheel slots of one second (not `/healthz`'s `wheelSize`, the runs the wheel holds)",
        }
        max_grab_batch: i64 {
            env: "AX_MAX_GRAB_BATCH",
            default: 500,
            kind: count(1, 10_000, ""),
            doc: "page size of the preload query",
        }
        preload_window_secs: i64 {
            env: "AX_PRELOAD_WINDOW_SECS",
            default: 600,
            kind: secs(1, DAY_SECS),
            doc: "how far ahead runs are held in the wheel",
        }
        preload_interval_secs: u64 {
            env: "AX_PRELOAD_INTERVAL_SECS",
            default: 30,
            kind: secs(1, 60 * 60),
            doc: "how often the window is topped up from the database",
        }
        commit_ahead_ms: u64 {
            env: "AX_COMMIT_AHEAD_MS",
            default: 500,
            kind: millis(0, MAX_COMMIT_AHEAD_MS as i64),
            doc: "a run's row is committed this long before its time and dispatched at its time, so the database write is off the lag; `0` commits at the time",
        }
        max_queued_runs: usize {
            env: "AX_MAX_QUEUED_RUNS",
            default: 50_000,
            kind: count(1, 10_000_000, "runs"),
            doc: "most runs between the wheel and the dispatchers (planned, committing, or waiting for a dispatcher); past it the wheel waits and falls behind the clock (see Overload)",
        }
        misfire_threshold_secs: i64 {
            env: "AX_MISFIRE_THRESHOLD_SECS",
            default: 300,
            kind: secs(1, 7 * DAY_SECS),
            doc: "a run later than this when ax sees it is recorded `MISSED` (per task: `misfireThresholdSecs`)",
        }
        retry_backoff_secs: i64 {
            env: "AX_RETRY_BACKOFF_SECS",
            default: 5,
            kind: secs(1, 7 * DAY_SECS),
            doc: "wait before the first retry (per task: `retryBackoffSecs`)",
        }
        retry_factor: i64 {
            env: "AX_RETRY_FACTOR",
            default: 5,
            kind: count(1, 10, ""),
            doc: "each further retry waits this many times longer (per task: `retryFactor`)",
        }
        dependency_timeout_secs: i64 {
            env: "AX_DEPENDENCY_TIMEOUT_SECS",
            default: 3600,
            kind: secs(1, 7 * DAY_SECS),
            doc: "how long a run waits for its upstream tasks (per task: `dependencyTimeoutSecs`)",
        }
        backfill_per_sec: i64 {
            env: "AX_BACKFILL_PER_SEC",
            default: 50,
            kind: count(1, 10_000, "/s"),
            doc: "most backfilled runs of a task that become due each second",
        }
    }

    /// `dispatch.*`: the HTTP callers.
    dispatch: DispatchConfig {
        workers: usize {
            env: "AX_DISPATCH_WORKERS",
            default: 2,
            kind: count(1, 64, ""),
            doc: "dispatcher threads",
        }
        max_in_flight: usize {
            env: "AX_DISPATCH_MAX_IN_FLIGHT",
            default: 512,
            kind: count(1, 100_000, ""),
            doc: "most HTTP calls in flight per dispatcher; up to 8 times as many replies may wait for their result's group commit, beyond that the dispatcher waits",
        }
        max_in_flight_per_host: usize {
            env: "AX_DISPATCH_MAX_IN_FLIGHT_PER_HOST",
            default: 64,
            kind: count(1, MAX_IN_FLIGHT_PER_HOST, ""),
            doc: "most HTTP calls in flight to one executor host (a handler URL's host and port), over all dispatchers; runs over it wait in that host's queue, in order, holding nothing another host could use (see [Delivery guarantees](delivery.md))",
        }
        slow_after_ms: u64 {
            env: "AX_DISPATCH_SLOW_AFTER_MS",
            default: 1_000,
            kind: millis(1, 24 * 60 * 60 * 1000),
            doc: "a handler (URL) whose attempt held its executor host's slot this long or longer (a timed-out one too) is slow: the attempts of every task sent to it take the host's slow lane, until 3 of its attempts in a row are quicker",
        }
        slow_share_percent: usize {
            env: "AX_DISPATCH_SLOW_SHARE_PERCENT",
            default: 50,
            kind: count(1, 100, "%"),
            doc: "the share of each executor host's slots (and each group member's) its slow handlers may hold, at least one; the rest always serve its other handlers, in order (100: no lane of their own)",
        }
        hosts: BTreeMap<String, HostConfig> {
            default: BTreeMap::new(),
            kind: Kind::Hosts,
            doc: "one executor host's own cap, by `host:port` or `host` (any port; `host:port` wins): `dispatch: {hosts: {\"10.0.0.7:9000\": {max_in_flight: 256}}}`",
        }
    }

    /// `executors.*`: executor groups' members and their health.
    executors: ExecutorsConfig {
        callback_url: Option<String> {
            env: "AX_CALLBACK_URL",
            default: None,
            shown: "the address ax serves on, `http://{server.bind}:{port}` (this machine's name for `0.0.0.0`)",
            kind: Kind::Checked {
                rule: "must be an http:// or https:// URL",
                accepts: |url| url.starts_with("http://") || url.starts_with("https://"),
            },
            doc: "ax's API as executors reach it (a load balancer in front of the cluster, a proxy's path included): each dispatch carries `callbackUrl` (`{callback_url}/api/callback`) and `logUrl` under it (see [the executor protocol](protocol.md))",
        }
        heartbeat_secs: i64 {
            env: "AX_EXECUTOR_HEARTBEAT_SECS",
            default: 10,
            kind: secs(1, 3600),
            doc: "how often a registered member repeats its registration (told to it in the reply)",
        }
        member_ttl_secs: i64 {
            env: "AX_EXECUTOR_MEMBER_TTL_SECS",
            default: 30,
            kind: secs(2, 7 * DAY_SECS),
            doc: "a registered member not heard from for this long is dropped from its group",
        }
        max_registered_members: usize {
            env: "AX_EXECUTOR_MAX_REGISTERED_MEMBERS",
            default: ax_core::dispatch::routing::MAX_DEFINED_MEMBERS,
            kind: count(1, 100_000, ""),
            doc: "most members that registered themselves one group holds (as `PUT` defines at most 1,000); one more registration is refused with 409",
        }
        failures_to_cool: u32 {
            env: "AX_EXECUTOR_FAILURES_TO_COOL",
            default: 3,
            kind: count(1, 1000, ""),
            doc: "failed dispatches in a row after which a member is skipped for the cool-down",
        }
        cool_down_secs: i64 {
            env: "AX_EXECUTOR_COOL_DOWN_SECS",
            default: 30,
            kind: secs(1, 3600),
            doc: "how long an unhealthy member is skipped before one probe dispatch",
        }
    }

    /// `security.*`: signatures, callback tokens and where handlers may live.
    security: SecurityConfig {
        signing_secret: Option<String> {
            env: "AX_SIGNING_SECRET",
            default: None,
            shown: "generated once, kept in the database",
            kind: Kind::Secret,
            doc: "key of dispatch signatures and callback tokens; set it (on every ax and executor) to verify signatures",
        }
        handler_allowlist: Vec<String> {
            env: "AX_HANDLER_ALLOWLIST",
            default: Vec::new(),
            shown: "empty: any host but link-local",
            kind: Kind::List {
                rule: "must list hosts, *.domains, IPs or CIDRs",
                check: |entries| ax_core::security::Allowlist::parse(entries).map(drop),
            },
            doc: "hosts handlers may live on: names, `*.domains`, IPs, CIDRs (`10.0.0.0/8`); see Security",
        }
    }

    /// `alerts.*`: who is told when runs fail, go missing or come back.
    alerts: AlertsConfig {
        channels: Vec<Channel> {
            default: Vec::new(),
            kind: Kind::Channels,
            doc: "where alerts go: `{name, kind: webhook, slack or email, …}` each (see [Alerts](alerts.md)); `${VAR}` in a value is read from the environment when used",
        }
        default_rule: AlertRule {
            key: "default",
            default: AlertRule::default(),
            shown: "`{events: [FAILED, MISSED, UPSTREAM_FAILED, LAG, MEMBER_UNHEALTHY, PROCESS_LEFT, STORE_UNREACHABLE, REDIS_UNREACHABLE, CLOCK_SKEW, RESOLVED], channels: [], threshold: 1, windowSecs: 300, silenceSecs: 1800}`",
            kind: Kind::AlertRule,
            doc: "the rule of a task whose own and whose scene's are unset: which events alert on which channels, and how repeats fold",
        }
        console_url: Option<String> {
            env: "AX_CONSOLE_URL",
            default: None,
            shown: "the address ax serves on, `http://{server.bind}:{port}` (this machine's name for `0.0.0.0`)",
            kind: Kind::Checked {
                rule: "must be an http:// or https:// URL",
                accepts: |url| url.starts_with("http://") || url.starts_with("https://"),
            },
            doc: "the console's address as people reach it (a proxy's path included: `https://ops.example.com/ax`), for the links in alerts: `{console_url}/console/runs/{requestId}`",
        }
        retry_for_secs: i64 {
            env: "AX_ALERT_RETRY_FOR_SECS",
            default: 3600,
            kind: secs(1, 7 * DAY_SECS),
            doc: "how long a channel that fails is tried again (with back-off) before its alert is marked failed",
        }
        send_timeout_ms: u64 {
            env: "AX_ALERT_SEND_TIMEOUT_MS",
            default: 10_000,
            kind: millis(100, 300_000),
            doc: "longest one send to a channel may take",
        }
        outage_secs: i64 {
            env: "AX_ALERT_OUTAGE_SECS",
            default: 60,
            kind: secs(5, DAY_SECS),
            doc: "how long the store or Redis may be out of reach from a process before it alerts (STORE_UNREACHABLE, REDIS_UNREACHABLE)",
        }
        group_window_secs: i64 {
            env: "AX_ALERT_GROUP_WINDOW_SECS",
            default: 10,
            kind: secs(1, 3600),
            doc: "how long events about the members of one executor group (or about ax processes) gather before they go out as one alert naming how many and the first of them",
        }
    }

    /// `run_logs.*`: the log lines and progress executors send while a run is open.
    run_logs: RunLogsConfig {
        max_lines: usize {
            env: "AX_RUN_LOG_MAX_LINES",
            default: 1000,
            kind: count(1, 100_000, "lines"),
            doc: "most log lines kept per attempt: beyond, the last ones are kept and a marker says how many went",
        }
        max_bytes: usize {
            env: "AX_RUN_LOG_MAX_BYTES",
            default: 262_144,
            kind: count(1024, 16_777_216, "bytes"),
            doc: "most bytes of log lines kept per attempt: beyond, the last ones are kept",
        }
        grace_secs: i64 {
            env: "AX_RUN_LOG_GRACE_SECS",
            default: 300,
            kind: secs(0, DAY_SECS),
            doc: "how long after a run ends its log still takes lines (then 409)",
        }
    }
}

/// A key of the design document's config file, read as one of ax's settings.
pub struct Alias {
    /// The key as the design document writes it.
    pub key: &'static str,
    /// The setting it sets.
    pub sets: &'static str,
    /// The value as the setting takes it, or the words after the key that refuse it.
    pub convert: fn(&str) -> Result<String, String>,
    /// The value as a refusal shows it.
    pub shown: fn(&str) -> String,
    /// One line: how it maps, for the configuration reference.
    pub doc: &'static str,
}

/// The design document's keys.
pub const ALIASES: &[Alias] = &[
    Alias {
        key: "store.mysql_dsn",
        sets: "store.url",
        convert: dsn::mysql_url,
        shown: dsn::redacted,
        doc: "a DSN of Go's MySQL driver: `user:pass@tcp(host:port)/db?params` is `mysql://user:pass@host:port/db` (no password, no port: 3306, no address: 127.0.0.1:3306); `charset`, `collation`, `parseTime`, `loc` and the time-outs are Go's own and left out, any other option and `unix(…)` are refused",
    },
    Alias {
        key: "store.redis_addr",
        sets: "redis.url",
        convert: dsn::redis_url,
        shown: str::to_string,
        doc: "`host:port` is `redis://host:port` (no port: 6379); `host:port/DB` is `redis://host:port/DB`, the Redis database DB (one per deployment)",
    },
    Alias {
        key: "scheduler.tick_interval",
        sets: "scheduler.tick_interval_ms",
        convert: with_unit,
        shown: str::to_string,
        doc: "a duration with its unit (`1s`, `500ms`)",
    },
];

/// A duration that says its unit: the key has none in its name to give a plain number one.
fn with_unit(text: &str) -> Result<String, String> {
    if duration::has_unit(text) {
        Ok(text.to_string())
    } else {
        Err("must be a duration with its unit, such as 1s or 500ms".into())
    }
}
