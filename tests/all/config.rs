//! The configuration as the `ax` binary reads it: a bad value of any kind refused at start in
//! one line in its key's words, an empty variable unset, and the design document's own file.

use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use crate::common::{Api, AxProcess, TestStore};

/// An `ax` command without the caller's `AX_…` variables, in a folder of its own (no
/// `config/ax.yaml` but the test's).
fn ax(dir: &Path) -> Command {
    let mut command = crate::common::ax_command();
    command.current_dir(dir).env("RUST_LOG", "warn");
    command
}

fn output(command: &mut Command) -> Output {
    command.output().expect("run ax")
}

/// Exit 2 and exactly `line` on stderr, nothing else.
fn assert_refused(output: &Output, line: &str) {
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr, format!("{line}\n"));
    assert!(output.stdout.is_empty(), "{output:?}");
}

/// What `redis.url` must be, in the words of a refusal.
const REDIS_RULE: &str = "redis.url must be redis://[user:password@]host:port[/DB], rediss://… \
                          (TLS) or redis+sentinel://[user:password@]host:port,host:port,…/\
                          SERVICE[/DB] (rediss+sentinel://… over TLS)";

#[test]
fn a_bad_value_of_any_kind_is_refused_at_start_in_the_keys_words() {
    let dir = tempfile::tempdir().expect("temp dir");
    let port = "server.port must be 1-65535";
    let store_url = "store.url must be sqlite://PATH, mysql://user:pass@host:port/db (several \
                     servers: mysql://user:pass@host1:port,host2:port/db) or \
                     postgres://user:pass@host:port/db[?sslmode=disable|prefer|require]";
    for (name, value, message) in [
        ("AX_PORT", "70000", port.to_string()),
        ("AX_PORT", "eighty", port.to_string()),
        (
            "AX_TICK_INTERVAL_MS",
            "2s",
            "scheduler.tick_interval_ms must be 1-1000 ms".into(),
        ),
        (
            "AX_PRELOAD_WINDOW_SECS",
            "soon",
            "scheduler.preload_window_secs must be 1-86400 s: a plain number of s, or one with \
             its unit (500ms, 1s, 5m, 1h, 2d)"
                .into(),
        ),
        (
            "AX_STORE_URL",
            "postgres://ax:secret@db/ax?sslmode=verify-full",
            store_url.into(),
        ),
        (
            "AX_STORE_URL",
            "mysql://ax:secret@db1,,db3/ax",
            store_url.into(),
        ),
        ("AX_REDIS_URL", "http://127.0.0.1:6379", REDIS_RULE.into()),
        // A sentinel URL without the service the sentinels know the primary by.
        (
            "AX_REDIS_URL",
            "redis+sentinel://ax:secret@h1:26379,h2:26379",
            REDIS_RULE.into(),
        ),
        (
            "AX_INSTANCE_ID",
            "a/b",
            "server.instance_id must be 1-64 characters of A-Z a-z 0-9 . _ : -".into(),
        ),
    ] {
        let shown = value.replace(":secret@", ":***@");
        let line = format!("ax: {name}={shown}: {message}");
        assert_refused(&output(ax(dir.path()).arg("serve").env(name, value)), &line);
        // Every command that loads the configuration refuses it alike.
        assert_refused(
            &output(ax(dir.path()).arg("migrate").env(name, value)),
            &line,
        );
    }
    let flag = output(ax(dir.path()).args(["serve", "--port", "70000"]));
    assert_refused(&flag, &format!("ax: --port=70000: {port}"));
    let file = dir.path().join("ax.yaml");
    std::fs::write(&file, "server:\n  port: 70000\n").expect("config file");
    let from_file = output(ax(dir.path()).arg("serve").arg("--config").arg(&file));
    let line = format!("ax: {}: server.port=70000: {port}", file.display());
    assert_refused(&from_file, &line);
    assert!(!dir.path().join("data").exists(), "nothing started");
}

#[test]
fn an_executors_token_without_groups_is_refused_at_start() {
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("ax.yaml");
    std::fs::write(
        &file,
        "server:\n  tokens:\n    - {name: workers, token: workers-token-0123456789, role: executor}\n",
    )
    .expect("config file");
    let refused = output(ax(dir.path()).arg("serve").arg("--config").arg(&file));
    let line = format!(
        "ax: {}: server.tokens[0].groups must list the executor groups the token `workers` may \
         register members into (`[\"*\"]` for all)",
        file.display()
    );
    assert_refused(&refused, &line);
    assert!(!dir.path().join("data").exists(), "nothing started");

    // Its groups named (all of them, written out): it starts.
    std::fs::write(
        &file,
        "server:\n  tokens:\n    - {name: workers, token: workers-token-0123456789, role: executor, \
         groups: [\"*\"]}\n",
    )
    .expect("config file");
    let migrated = output(ax(dir.path()).arg("migrate").arg("--config").arg(&file));
    assert_eq!(migrated.status.code(), Some(0), "{migrated:?}");
}

#[test]
fn an_empty_variable_is_unset_for_every_key() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut command = ax(dir.path());
    command.arg("migrate");
    for name in ax_server::config::env_vars() {
        command.env(name, "");
    }
    let migrated = output(&mut command);
    assert_eq!(migrated.status.code(), Some(0), "{migrated:?}");
    // The default store: `store.url` unset, not empty.
    assert!(dir.path().join("data/ax.db").is_file());
}

/// The design document's configuration file, its DSN on a database of the test's own, its
/// instance id and Redis address those given.
fn design_file(database: &str, instance_id: &str, redis_addr: &str) -> String {
    format!(
        "server:\n  port: 8901\n  instance_id: {instance_id}\nstore:\n  \
         mysql_dsn: \"root@tcp(127.0.0.1:3306)/{database}?charset=utf8mb4&parseTime=true\"\n  \
         redis_addr: \"{redis_addr}\"\nscheduler:\n  tick_interval: 1s\n  wheel_size: 600\n  \
         max_grab_batch: 500\n"
    )
}

/// Whether `instance_id`'s heartbeat is in Redis database `db`.
fn beating(db: u32, instance_id: &str) -> bool {
    let url = format!("{}/{db}", crate::common::redis_server());
    let mut redis = redis::Client::open(url)
        .and_then(|client| client.get_connection())
        .expect("Redis");
    redis::cmd("EXISTS")
        .arg(format!("ax:instance:{instance_id}"))
        .query::<bool>(&mut redis)
        .expect("EXISTS")
}

/// Waits up to 10 s for `instance_id`'s heartbeat in Redis database `db`.
async fn wait_for_heartbeat(db: u32, instance_id: &str) -> bool {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !beating(db, instance_id) && Instant::now() < deadline {
        actix_rt::time::sleep(Duration::from_millis(100)).await;
    }
    beating(db, instance_id)
}

#[actix_rt::test(system = "crate::common::TestSystem")]
async fn the_design_documents_file_runs_ax_on_mysql_and_redis() {
    let store = TestStore::mysql();
    let TestStore::Mysql(database) = &store else {
        unreachable!("a MariaDB store")
    };
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::create_dir(dir.path().join("config")).expect("config dir");
    let file = design_file(database, "ax-scheduler-01", "127.0.0.1:6379");
    std::fs::write(dir.path().join("config/ax.yaml"), file).expect("file");

    let migrated = output(ax(dir.path()).arg("migrate"));
    let stdout = String::from_utf8_lossy(&migrated.stdout);
    assert_eq!(migrated.status.code(), Some(0), "{migrated:?}");
    let url = format!("mysql://root@127.0.0.1:3306/{database}");
    assert!(stdout.contains(&format!("applied to {url}")), "{stdout}");

    // `ax serve` on the file as it is; the harness sets only AX_BIND and AX_PORT (port 8901
    // may be taken), so the instance id, the store and Redis are the file's.
    let mut node = AxProcess::start_with_host_identity(dir.path(), "design", Vec::new()).await;
    let (status, health) = Api::at(node.base()).get("/healthz").await;
    assert_eq!(status, 200, "{health}");
    assert_eq!(health["instanceId"], "ax-scheduler-01", "{health}");
    assert_eq!(health["store"], "mysql", "{health}");
    // Its heartbeat is in the file's Redis: `redis_addr` is the cluster's Redis.
    assert!(
        wait_for_heartbeat(0, "ax-scheduler-01").await,
        "no heartbeat of ax-scheduler-01 in Redis"
    );
    assert_eq!(node.stop().await, Some(0));
}

/// `redis_addr` with a database index (one per deployment, as production.md advises): ax
/// keeps its keys in that database, none in database 0.
#[actix_rt::test(system = "crate::common::TestSystem")]
async fn the_design_documents_redis_addr_takes_a_database_index() {
    let store = TestStore::mysql();
    let TestStore::Mysql(database) = &store else {
        unreachable!("a MariaDB store")
    };
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::create_dir(dir.path().join("config")).expect("config dir");
    // An instance id of this test's own: database 0 is shared with other tests.
    let instance = format!("ax-{}", database.replace('_', "-"));
    let index = crate::common::redis_database();
    let file = design_file(database, &instance, &format!("127.0.0.1:6379/{index}"));
    std::fs::write(dir.path().join("config/ax.yaml"), file).expect("file");
    let migrated = output(ax(dir.path()).arg("migrate"));
    assert_eq!(migrated.status.code(), Some(0), "{migrated:?}");

    let mut node = AxProcess::start_with_host_identity(dir.path(), "design-db", Vec::new()).await;
    let (status, health) = Api::at(node.base()).get("/healthz").await;
    assert_eq!(status, 200, "{health}");
    assert_eq!(health["instanceId"], instance.as_str(), "{health}");
    assert!(
        wait_for_heartbeat(index.into(), &instance).await,
        "no heartbeat of {instance} in Redis database {index}"
    );
    assert!(!beating(0, &instance), "a heartbeat in database 0");
    assert_eq!(node.stop().await, Some(0));
}
