use super::*;
use ax_core::security::Role;

/// The configuration a file of `yaml` gives, named `ax.yaml` in refusals.
fn from_yaml(yaml: &str) -> Result<Config, ConfigError> {
    let mut config = Config::default();
    file::apply(&mut config, Path::new("ax.yaml"), yaml)?;
    Ok(config)
}

/// The configuration with the environment variable `name` set to `value`, validated.
fn with_env(name: &str, value: &str) -> Result<Config, ConfigError> {
    let mut config = Config::default();
    config.apply_env(|n| (n == name).then(|| value.to_string()))?;
    config.validate()?;
    Ok(config)
}

fn setting(key: &str) -> &'static Setting {
    SETTINGS
        .iter()
        .find(|setting| setting.key == key)
        .unwrap_or_else(|| panic!("no setting {key}"))
}

/// A value each setting with an environment variable takes, other than its default.
fn sample(setting: &Setting) -> &'static str {
    match (&setting.kind, setting.key) {
        (_, "store.url") => "sqlite://x.db",
        (_, "redis.url") => "redis://127.0.0.1:6379",
        (_, "security.handler_allowlist") => "10.0.0.0/8",
        (_, "server.allowed_hosts") => "ax.example.com",
        (_, "alerts.console_url") => "https://ax.example.com",
        (_, "executors.callback_url") => "https://ax.example.com",
        (_, "server.bind") => "127.0.0.2",
        (_, "alerts.send_timeout_ms") => "700",
        (_, "run_logs.max_bytes") => "4096",
        (Kind::Secret, _) => "a-secret-long-enough",
        _ => "7",
    }
}

/// The numeric settings, each with its bounds.
fn ranges() -> impl Iterator<Item = (&'static Setting, i64, i64)> {
    SETTINGS.iter().filter_map(|setting| match setting.kind {
        Kind::Count { min, max, .. } | Kind::Duration { min, max, .. } => Some((setting, min, max)),
        _ => None,
    })
}

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
fn every_key_is_declared_once_with_an_environment_variable_of_its_own() {
    let mut keys = std::collections::HashSet::new();
    let mut names = std::collections::HashSet::new();
    for setting in SETTINGS {
        assert!(keys.insert(setting.key), "{} twice", setting.key);
        let file_only = setting.kind.is_file_only();
        match setting.env {
            Some(name) => {
                assert!(!file_only, "{}", setting.key);
                assert!(name.starts_with("AX_"), "{name}");
                assert!(names.insert(name), "{name} twice");
            }
            None => assert!(file_only, "{} has no environment variable", setting.key),
        }
        assert!(!setting.doc.is_empty() && !setting.doc.contains('\n'));
    }
    for alias in ALIASES {
        assert!(!keys.contains(alias.key), "{}", alias.key);
        setting(alias.sets);
    }
}

#[test]
fn every_default_is_within_its_range() {
    let defaults = Config::default();
    for setting in SETTINGS {
        if let Some(value) = setting.value(&defaults) {
            setting
                .kind
                .check(&value)
                .unwrap_or_else(|err| panic!("{}: {err:?}", setting.key));
        }
    }
}

#[test]
fn environment_overrides_the_file() {
    let mut config =
        from_yaml("server:\n  port: 9000\nstore:\n  url: sqlite://x.db\n").expect("yaml");
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
    for setting in SETTINGS {
        let Some(name) = setting.env else { continue };
        let config = with_env(name, sample(setting)).unwrap_or_else(|err| panic!("{name}: {err}"));
        assert_ne!(config, Config::default(), "{name} changes {}", setting.key);
    }
}

#[test]
fn an_empty_environment_variable_is_unset_for_every_key() {
    let file = "server:\n  bind: 127.0.0.2\n  port: 9000\nstore:\n  url: sqlite://x.db\n\
                redis:\n  url: redis://127.0.0.1:6379\n";
    let from_file = from_yaml(file).expect("yaml");
    for setting in SETTINGS {
        let Some(name) = setting.env else { continue };
        for empty in ["", "  "] {
            let mut config = from_file.clone();
            config
                .apply_env(|n| (n == name).then(|| empty.to_string()))
                .unwrap_or_else(|err| panic!("{name}={empty:?}: {err}"));
            assert_eq!(config, from_file, "{name}={empty:?} keeps the file's value");
        }
    }
    // Empty in the file too: the default stays.
    let empty = from_yaml("redis:\n  url:\nstore:\n  url: \"\"\nserver:\n  port: ''\n");
    assert_eq!(empty.expect("empty values"), Config::default());
}

#[test]
fn the_shipped_config_file_holds_the_defaults() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(DEFAULT_CONFIG_PATH);
    let shipped = Config::from_file(&path).expect("config/ax.yaml parses");
    shipped.validate().expect("config/ax.yaml is valid");
    assert_eq!(shipped, Config::default());
}

#[test]
fn serve_help_lists_every_environment_variable_with_its_key() {
    let help = Config::env_help();
    for setting in SETTINGS {
        if let Some(name) = setting.env {
            let line = help
                .lines()
                .find(|line| line.trim_start().starts_with(&format!("{name} ")))
                .unwrap_or_else(|| panic!("{name} not in:\n{help}"));
            assert!(line.contains(setting.key), "{line}");
            assert!(line.contains(&setting.kind.describe()), "{line}");
        }
    }
    assert!(
        help.contains("AX_PORT") && help.contains("RUST_LOG"),
        "{help}"
    );
}

#[test]
fn every_range_accepts_its_bounds_and_names_its_key_past_them() {
    for (setting, min, max) in ranges() {
        let name = setting.env.expect("a numeric setting has a variable");
        let rule = format!("must be {}", setting.kind.describe());
        let (min, max) = (i128::from(min), i128::from(max));
        for ok in [min, max] {
            with_env(name, &ok.to_string()).unwrap_or_else(|err| panic!("{}: {err}", setting.key));
        }
        // 0 is the port's "any free port", besides its range.
        let zero_ok = matches!(setting.kind, Kind::Count { zero: true, .. });
        let past = [max + 1, i128::from(i64::MAX), min - 1]
            .into_iter()
            .filter(|n| !(zero_ok && *n == 0))
            .map(|n| n.to_string());
        let malformed = ["9".repeat(50), "x".into(), "1e3".into()];
        for bad in past.chain(malformed) {
            let err = with_env(name, &bad).expect_err(setting.key).to_string();
            assert!(
                err.starts_with(&format!("{name}={bad}: {} {rule}", setting.key)),
                "{err}"
            );
        }
    }
}

#[test]
fn a_bad_value_is_refused_in_the_keys_words_naming_where_it_came_from() {
    let rule = "server.port must be 1-65535";
    for value in ["70000", "eighty", "-1", "99999999999999999999999"] {
        let err = with_env("AX_PORT", value).expect_err(value).to_string();
        assert_eq!(err, format!("AX_PORT={value}: {rule}"));
    }
    let err = from_yaml("server:\n  port: 70000\n")
        .expect_err("70000")
        .to_string();
    assert_eq!(err, format!("ax.yaml: server.port=70000: {rule}"));
    let mut config = Config::default();
    let err = config
        .apply_flag("--port", "server.port", "70000")
        .expect_err("70000")
        .to_string();
    assert_eq!(err, format!("--port=70000: {rule}"));
    config.server.port = 0;
    config.validate().expect("0 is any free port");

    for (name, value, message) in [
        (
            "AX_STORE_URL",
            "postgres://x",
            "store.url must be sqlite://PATH, mysql://user:pass@host:port/db (several servers: \
             mysql://user:pass@host1:port,host2:port/db) or \
             postgres://user:pass@host:port/db[?sslmode=disable|prefer|require]",
        ),
        (
            "AX_REDIS_URL",
            "http://127.0.0.1:6379",
            "redis.url must be redis://[user:password@]host:port[/DB], rediss://… (TLS) or \
             redis+sentinel://[user:password@]host:port,host:port,…/SERVICE[/DB] \
             (rediss+sentinel://… over TLS)",
        ),
        (
            "AX_PRELOAD_WINDOW_SECS",
            "10 minutes",
            "scheduler.preload_window_secs must be 1-86400 s: a plain number of s, or one \
             with its unit (500ms, 1s, 5m, 1h, 2d)",
        ),
        (
            "AX_STORE_BATCH_INTERVAL_MS",
            "11s",
            "store.batch_interval_ms must be 0-10000 ms",
        ),
        (
            "AX_HANDLER_ALLOWLIST",
            "10.0.0.0/33",
            "security.handler_allowlist must list hosts, *.domains, IPs or CIDRs: \
             `10.0.0.0/33` is not a host, *.domain, IP or CIDR",
        ),
    ] {
        let err = with_env(name, value).expect_err(name).to_string();
        assert_eq!(err, format!("{name}={value}: {message}"));
    }
    // A URL's password is not shown.
    let err = with_env("AX_STORE_URL", "mysql://ax:hunter2@/db")
        .expect_err("no host")
        .to_string();
    assert!(
        !err.contains("hunter2") && err.contains("store.url"),
        "{err}"
    );
}

#[test]
fn every_duration_takes_units_in_the_environment_and_in_the_file() {
    let config = with_env("AX_STORE_BATCH_INTERVAL_MS", "1s").expect("1s");
    assert_eq!(config.store.batch_interval_ms, 1000);
    let config = with_env("AX_PRELOAD_WINDOW_SECS", "5m").expect("5m");
    assert_eq!(config.scheduler.preload_window_secs, 300);
    let config = with_env("AX_RETENTION_DAYS", "2d").expect("2d");
    assert_eq!(config.store.retention_days, 2);
    let config = from_yaml(
        "store:\n  batch_interval_ms: 500\n  retention_days: 48h\nscheduler:\n  \
         dependency_timeout_secs: 1h\n  tick_interval_ms: 500ms\n",
    )
    .expect("units");
    assert_eq!(config.store.batch_interval_ms, 500);
    assert_eq!(config.store.retention_days, 2);
    assert_eq!(config.scheduler.dependency_timeout_secs, 3600);
    assert_eq!(config.scheduler.tick_interval_ms, 500);
    let err = with_env("AX_PRELOAD_WINDOW_SECS", "1500ms").expect_err("not whole");
    assert!(err.to_string().contains("a plain number of s"), "{err}");
    for setting in SETTINGS {
        let kept_in = ["_ms", "_secs", "_days"]
            .iter()
            .find(|suffix| setting.key.ends_with(*suffix));
        let unit = match setting.kind {
            Kind::Duration { unit, .. } => Some(unit.symbol()),
            _ => None,
        };
        let expected = kept_in.map(|suffix| match *suffix {
            "_ms" => "ms",
            "_secs" => "s",
            _ => "days",
        });
        assert_eq!(unit, expected, "{}", setting.key);
    }
}

#[test]
fn the_design_documents_file_is_taken_as_written() {
    let design = "server:\n  port: 8901\n  instance_id: ax-scheduler-01\nstore:\n  \
                  mysql_dsn: \"user:pass@tcp(127.0.0.1:3306)/axdb?charset=utf8mb4&parseTime=true\"\n  \
                  redis_addr: \"127.0.0.1:6379\"\nscheduler:\n  tick_interval: 1s\n  \
                  wheel_size: 600\n  max_grab_batch: 500\n";
    let config = from_yaml(design).expect("the design document's file");
    config.validate().expect("valid");
    assert_eq!(config.server.port, 8901);
    assert_eq!(
        config.server.instance_id.as_deref(),
        Some("ax-scheduler-01")
    );
    assert_eq!(config.store.url, "mysql://user:pass@127.0.0.1:3306/axdb");
    assert_eq!(config.redis.url.as_deref(), Some("redis://127.0.0.1:6379"));
    assert_eq!(config.scheduler.tick_interval_ms, 1000);
    assert_eq!(config.scheduler.wheel_size, 600);
    assert_eq!(config.scheduler.max_grab_batch, 500);
}

#[test]
fn the_design_documents_redis_addr_takes_a_database_index() {
    let design = "store:\n  redis_addr: \"127.0.0.1:6379/9\"\n";
    let config = from_yaml(design).expect("redis_addr with a database");
    config.validate().expect("valid");
    assert_eq!(
        config.redis.url.as_deref(),
        Some("redis://127.0.0.1:6379/9")
    );
}

#[test]
fn an_alias_and_its_key_together_are_refused_naming_both() {
    for (yaml, first, second) in [
        (
            "store:\n  url: sqlite://x.db\n  mysql_dsn: root@tcp(h:1)/ax\n",
            "store.url",
            "store.mysql_dsn",
        ),
        (
            "store:\n  redis_addr: h:1\nredis:\n  url: redis://h:1\n",
            "store.redis_addr",
            "redis.url",
        ),
        (
            "scheduler:\n  tick_interval: 1s\n  tick_interval_ms: 1000\n",
            "scheduler.tick_interval",
            "scheduler.tick_interval_ms",
        ),
    ] {
        let err = from_yaml(yaml).expect_err(yaml).to_string();
        assert!(
            err.starts_with(&format!("ax.yaml: {first} and {second} both set ")),
            "{err}"
        );
    }
    // An empty one is unset: no conflict.
    from_yaml("store:\n  url:\n  mysql_dsn: root@tcp(h:1)/ax\n").expect("one is empty");
}

#[test]
fn an_alias_refuses_in_its_own_words() {
    for (yaml, message) in [
        (
            "store:\n  mysql_dsn: \"ax:secret@unix(/run/mysqld.sock)/ax\"\n",
            "ax.yaml: store.mysql_dsn=ax:***@unix(/run/mysqld.sock)/ax: store.mysql_dsn \
             must be user:pass@tcp(host:port)/db, as Go's MySQL driver takes it (a Unix \
             socket is not taken here: set store.url to mysql://user@localhost/db?socket=PATH)",
        ),
        (
            "store:\n  redis_addr: redis://h:1\n",
            "ax.yaml: store.redis_addr=redis://h:1: store.redis_addr must be host:port or \
             host:port/DB, as in 127.0.0.1:6379 or 127.0.0.1:6379/9 (`redis://h:1` is no \
             host:port)",
        ),
        (
            "scheduler:\n  tick_interval: 1000\n",
            "ax.yaml: scheduler.tick_interval=1000: scheduler.tick_interval must be a \
             duration with its unit, such as 1s or 500ms",
        ),
        (
            "scheduler:\n  tick_interval: 2s\n",
            "ax.yaml: scheduler.tick_interval=2s: scheduler.tick_interval_ms must be 1-1000 ms",
        ),
    ] {
        assert_eq!(from_yaml(yaml).expect_err(yaml).to_string(), message);
    }
}

#[test]
fn unknown_keys_are_refused_by_name() {
    for (yaml, key) in [
        ("server:\n  prot: 1\n", "server.prot"),
        ("sever:\n  port: 1\n", "sever"),
        ("sever:\n", "sever"),
        ("server:\n  prot:\n", "server.prot"),
        ("store:\n  mysql_dns: \"\"\n", "store.mysql_dns"),
        ("store:\n  dsn: x\n", "store.dsn"),
    ] {
        let err = from_yaml(yaml).expect_err(yaml).to_string();
        assert_eq!(err, format!("ax.yaml: unknown key {key}"));
    }
    let err = from_yaml("server: 8901\n")
        .expect_err("no mapping")
        .to_string();
    assert_eq!(err, "ax.yaml: server must be a mapping of its keys");
    assert_eq!(from_yaml("").expect("an empty file"), Config::default());
    let err = from_yaml("server:\n  8080: 1\n")
        .expect_err("a number")
        .to_string();
    assert_eq!(err, "ax.yaml: unknown key server.8080");
}

#[test]
fn a_file_that_is_not_yaml_or_too_deep_is_refused_naming_the_line() {
    for (yaml, message) in [
        (
            "server:\n  port: 1\n  port: 2\n".to_string(),
            "duplicate mapping key `port` is not allowed here at line 3, column 3",
        ),
        (
            "server:\n  port: [1\n".into(),
            "unclosed bracket '[' at line 2, column 9",
        ),
        (
            format!("server:\n  allowed_hosts: {}\n", "[".repeat(100_000)),
            "nested deeper than 64 levels at line 2",
        ),
    ] {
        let err = from_yaml(&yaml).expect_err(message).to_string();
        assert_eq!(err, format!("invalid config file ax.yaml: {message}"));
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
    let err = with_env("AX_INSTANCE_ID", "../x").expect_err("a path is no instance id");
    assert_eq!(
        err.to_string(),
        "AX_INSTANCE_ID=../x: server.instance_id must be 1-64 characters of A-Z a-z 0-9 . _ : -"
    );
    let mut config = Config::default();
    config.server.instance_id = Some("../x".into());
    let err = config.validate().expect_err("set in the field");
    assert!(err
        .to_string()
        .starts_with("server.instance_id=../x: server.instance_id"));
}

#[test]
fn redis_key_prefixes_are_checked() {
    assert_eq!(
        Config::default().redis.key_prefix,
        "ax:",
        "the design's keys"
    );
    let config = with_env("AX_REDIS_KEY_PREFIX", "billing:ax:").expect("a prefix");
    assert_eq!(config.redis.key_prefix, "billing:ax:");
    for bad in ["a b", "ax:*", &"x".repeat(65)] {
        let err = with_env("AX_REDIS_KEY_PREFIX", bad).expect_err("refused");
        assert!(
            err.to_string()
                .contains("redis.key_prefix must be 1-64 characters"),
            "{bad}: {err}"
        );
    }
}

#[test]
fn bad_values_set_in_the_fields_are_named() {
    let mut config = Config::default();
    config.store.url = "postgres://x".into();
    let err = config.validate().expect_err("no database").to_string();
    assert!(err.contains("store.url"), "{err}");
    let mut config = Config::default();
    config.scheduler.commit_ahead_ms = MAX_COMMIT_AHEAD_MS + 1;
    let err = config.validate().expect_err("too far ahead");
    assert_eq!(
        err.to_string(),
        "scheduler.commit_ahead_ms=5001: scheduler.commit_ahead_ms must be 0-5000 ms"
    );
    config.scheduler.commit_ahead_ms = 0;
    config.validate().expect("0 commits at the time");
}

#[test]
fn allowed_hosts_come_comma_separated_or_from_the_file_and_are_checked() {
    let mut config = from_yaml("server:\n  allowed_hosts: [ax.example.com]\n").expect("yaml");
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
    let err = from_yaml("server:\n  allowed_hosts: [{a: 1}]\n").expect_err("a mapping");
    assert!(
        err.to_string().contains("server.allowed_hosts must list"),
        "{err}"
    );
}

#[test]
fn the_admin_token_and_the_signing_secret_are_long_enough() {
    for (name, key) in [
        ("AX_ADMIN_TOKEN", "server.admin_token"),
        ("AX_SIGNING_SECRET", "security.signing_secret"),
    ] {
        let err = with_env(name, "fifteen-chars-x")
            .expect_err(name)
            .to_string();
        assert_eq!(
            err,
            format!("{key} ({name}) must be at least 16 characters")
        );
        with_env(name, "sixteen-chars-xx").unwrap_or_else(|err| panic!("{name}: {err}"));
        // Counted in characters, as they are typed.
        with_env(name, &"ü".repeat(16)).unwrap_or_else(|err| panic!("{name}: {err}"));
    }
    let err = from_yaml("server:\n  admin_token: tiny-secret\n").expect_err("short");
    assert!(!err.to_string().contains("tiny-secret"), "{err}");
    let err = from_yaml("server:\n  admin_token: [tiny-secret]\n").expect_err("a list");
    assert!(!err.to_string().contains("tiny-secret"), "{err}");
}

#[test]
fn named_tokens_come_from_the_file_and_are_checked() {
    let yaml =
        "server:\n  tokens:\n    - {name: ops, token: ops-token-0123456789, role: admin}\n    \
                - {name: wall, token: wall-token-0123456789, role: viewer}\n";
    let config = from_yaml(yaml).expect("tokens parse");
    assert_eq!(config.server.tokens[1].role, Role::Viewer);
    config.validate().expect("valid tokens");
    assert!(config.has_tokens());
    assert_eq!(config.bind_address(), "0.0.0.0");
    let err =
        from_yaml("server:\n  tokens:\n    - {name: x, token: y0123456789abcdef, role: root}\n")
            .expect_err("no such role")
            .to_string();
    assert!(
        err.contains("server.tokens must be a list of {name, token, role}"),
        "{err}"
    );
    assert!(!err.contains("y0123456789abcdef"), "{err}");
    let named = |name: &str, token: &str| NamedToken {
        name: name.into(),
        token: token.into(),
        role: Role::Admin,
        groups: None,
    };
    for (tokens, why) in [
        (vec![named("ops", "short")], "at least 16"),
        (vec![named("", "ops-token-0123456789")], "1-64"),
        (
            vec![named(ax_core::security::ANONYMOUS, "ops-token-0123456789")],
            "1-64",
        ),
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

#[test]
fn an_executors_token_names_its_groups_and_no_other_token_does() {
    let file = |entries: &str| from_yaml(&format!("server:\n  tokens:\n{entries}"));
    let config = file(
        "    - {name: ops, token: ops-token-0123456789, role: admin}\n    \
         - {name: billing, token: bill-token-0123456789, role: executor, groups: [billing, payroll]}\n    \
         - {name: fleet, token: fleet-token-0123456789, role: executor, groups: [\"*\"]}\n",
    )
    .expect("valid tokens");
    let groups: Vec<_> = config
        .server
        .tokens
        .iter()
        .map(|t| t.groups.clone())
        .collect();
    assert_eq!(
        groups,
        [
            None,
            Some(vec!["billing".into(), "payroll".into()]),
            Some(vec!["*".into()])
        ]
    );
    for (entries, refused) in [
        (
            "    - {name: ops, token: ops-token-0123456789, role: admin}\n    \
             - {name: w, token: w-token-0123456789ab, role: executor}\n",
            "server.tokens[1].groups must list the executor groups the token `w` may",
        ),
        (
            "    - {name: w, token: w-token-0123456789ab, role: executor, groups: []}\n",
            "server.tokens[0].groups must name at least one group",
        ),
        (
            "    - {name: w, token: w-token-0123456789ab, role: executor, groups: [a, \"*\"]}\n",
            "server.tokens[0].groups of the token `w` must be `[\"*\"]` alone",
        ),
        (
            "    - {name: w, token: w-token-0123456789ab, role: executor, groups: [Billing]}\n",
            "(`Billing` is not one)",
        ),
        (
            "    - {name: v, token: v-token-0123456789ab, role: viewer, groups: [a]}\n",
            "server.tokens[0].groups are for an executor's token only",
        ),
    ] {
        let err = file(entries).expect_err(refused).to_string();
        assert!(err.starts_with("ax.yaml: server.tokens["), "{err}");
        assert!(err.contains(refused), "{err}");
        assert!(
            !err.contains("token-0123456789"),
            "a token never shows: {err}"
        );
    }
    // Set in the field rather than read: checked alike.
    let mut config = Config::default();
    config.server.tokens = vec![NamedToken {
        name: "w".into(),
        token: "w-token-0123456789ab".into(),
        role: Role::Executor,
        groups: None,
    }];
    let err = config.validate().expect_err("no groups").to_string();
    assert!(
        err.starts_with("server.tokens[0].groups must list"),
        "{err}"
    );
}

#[test]
fn executor_hosts_come_from_the_file_and_are_checked() {
    let config = from_yaml("dispatch:\n  hosts:\n    \"10.0.0.7:9000\": {max_in_flight: 256}\n")
        .expect("hosts");
    assert_eq!(config.dispatch.host_caps().hosts["10.0.0.7:9000"], 256);
    for (yaml, why) in [
        (
            "dispatch:\n  hosts:\n    \"a/b\": {max_in_flight: 1}\n",
            "`a/b` is not one",
        ),
        (
            "dispatch:\n  hosts:\n    h: {max_in_flight: 0}\n",
            "1-100000, not 0",
        ),
        (
            "dispatch:\n  hosts:\n    h: {max: 1}\n",
            "must map each host",
        ),
    ] {
        let err = from_yaml(yaml).expect_err(yaml).to_string();
        assert!(err.contains("dispatch.hosts") && err.contains(why), "{err}");
    }
}
