//! The `ax` binary: `cron next`, `migrate`, a failing `serve`, a refused `apply`, and executor
//! groups as code, calendars and `runs logs` against a running `ax serve`, run as a real
//! process.

use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::{Api, AxProcess, TestStore};

/// An `ax` command isolated from the developer's environment: no `AX_…` variables, and run in
/// a folder of its own so neither `config/ax.yaml` nor `./data` of the repository is touched.
fn ax(dir: &Path) -> Command {
    let mut command = crate::common::ax_command();
    command.current_dir(dir).env("RUST_LOG", "warn");
    command
}

fn run(command: &mut Command) -> Output {
    command.output().expect("run ax")
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn cron_next(args: &[&str]) -> Output {
    let dir = tempfile::tempdir().expect("temp dir");
    run(ax(dir.path()).arg("cron").arg("next").args(args))
}

fn assert_lines(output: &Output, expected: &[&str]) {
    assert_eq!(output.status.code(), Some(0), "stderr: {}", stderr(output));
    let expected: String = expected.iter().map(|line| format!("{line}\n")).collect();
    assert_eq!(stdout(output), expected);
}

/// A usage error whose message names `fragment`.
fn assert_usage_error_naming(output: &Output, what: &str, fragment: &str) {
    assert_usage_error(output, what);
    assert!(
        stderr(output).contains(fragment),
        "{what}: {}",
        stderr(output)
    );
}

fn assert_usage_error(output: &Output, what: &str) {
    assert_eq!(
        output.status.code(),
        Some(2),
        "{what}: stdout {:?} stderr {:?}",
        stdout(output),
        stderr(output)
    );
    assert!(!stderr(output).trim().is_empty(), "{what}: stderr is empty");
    assert_eq!(stdout(output), "", "{what}: stdout");
    assert!(
        !stderr(output).contains("panicked"),
        "{what}: {}",
        stderr(output)
    );
}

#[test]
fn cron_next_prints_the_requested_count() {
    let output = cron_next(&[
        "*/15 * * * * *",
        "--from",
        "2027-02-03T04:05:06Z",
        "--count",
        "3",
    ]);
    assert_lines(
        &output,
        &[
            "2027-02-03T04:05:15Z",
            "2027-02-03T04:05:30Z",
            "2027-02-03T04:05:45Z",
        ],
    );
}

#[test]
fn cron_next_stops_at_the_end_of_9999() {
    let output = cron_next(&[
        "* * * * * *",
        "--from",
        "9999-12-31T23:59:58Z",
        "--count",
        "5",
    ]);
    assert_lines(&output, &["9999-12-31T23:59:59Z"]);
}

#[test]
fn cron_next_start_is_exclusive() {
    let output = cron_next(&[
        "*/15 * * * * *",
        "--from",
        "2027-02-03T04:05:15Z",
        "--count",
        "1",
    ]);
    assert_lines(&output, &["2027-02-03T04:05:30Z"]);
}

#[test]
fn cron_next_prints_five_by_default() {
    let output = cron_next(&["0 0 12 * * *", "--from", "2027-12-30T00:00:00Z"]);
    assert_lines(
        &output,
        &[
            "2027-12-30T12:00:00Z",
            "2027-12-31T12:00:00Z",
            "2028-01-01T12:00:00Z",
            "2028-01-02T12:00:00Z",
            "2028-01-03T12:00:00Z",
        ],
    );
}

#[test]
fn cron_next_without_from_starts_now() {
    let before = chrono::Utc::now();
    let output = cron_next(&["* * * * * *", "--count", "2"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let times: Vec<chrono::DateTime<chrono::Utc>> = stdout(&output)
        .lines()
        .map(|line| {
            chrono::DateTime::parse_from_rfc3339(line)
                .unwrap_or_else(|err| panic!("{line}: {err}"))
                .with_timezone(&chrono::Utc)
        })
        .collect();
    assert_eq!(times.len(), 2);
    assert!(times[0] > before, "{} after {before}", times[0]);
    assert!(times[0] < before + chrono::TimeDelta::seconds(30));
    assert_eq!(times[1] - times[0], chrono::TimeDelta::seconds(1));
}

#[test]
fn cron_next_converts_an_offset_to_utc() {
    // 06:05:06+02:00 is 04:05:06Z: the next hour boundaries are in UTC.
    let output = cron_next(&[
        "0 0 * * * *",
        "--from",
        "2027-02-03T06:05:06+02:00",
        "--count",
        "2",
    ]);
    assert_lines(&output, &["2027-02-03T05:00:00Z", "2027-02-03T06:00:00Z"]);
    // Across a date line, with a negative offset.
    let output = cron_next(&[
        "0 0 0 * * *",
        "--from",
        "2027-02-03T20:00:00-05:00",
        "--count",
        "1",
    ]);
    assert_lines(&output, &["2027-02-05T00:00:00Z"]);
}

#[test]
fn cron_next_finds_a_rare_leap_day_monday() {
    let output = cron_next(&[
        "0 0 0 29 2 MON",
        "--from",
        "2072-03-01T00:00:00Z",
        "--count",
        "1",
    ]);
    assert_lines(&output, &["2112-02-29T00:00:00Z"]);
}

#[test]
fn cron_next_rejects_invalid_expressions() {
    for expr in [
        "0 0 0 31 2 *",
        "* * *",
        "L * * * * *",
        "60 * * * * *",
        "",
        "* * * * * * * *",
    ] {
        let output = cron_next(&[expr, "--from", "2027-02-03T04:05:06Z"]);
        assert_usage_error_naming(&output, expr, "invalid cron expression");
    }
}

/// A step larger than its field's range is refused wherever a cron is taken, exit 2 naming
/// it: by `ax cron next`, and in a task file before any request.
#[test]
fn a_step_larger_than_its_fields_range_is_a_usage_error() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("tasks.yaml");
    for (expr, field) in [("*/99 * * * * *", "second"), ("25 */61 * * * *", "minute")] {
        let output = cron_next(&[expr, "--from", "2027-02-03T04:05:06Z"]);
        assert_usage_error_naming(&output, expr, &format!("{field} field: the step in"));
        let file =
            format!("- name: fast\n  cron: '{expr}'\n  handlerUrl: http://127.0.0.1:9/run\n");
        std::fs::write(&path, file).expect("write");
        let output = run(ax(dir.path())
            .args(["apply", "-f"])
            .arg(&path)
            .args(["--url", "http://127.0.0.1:9"]));
        assert_usage_error_naming(&output, expr, "items[0].cron");
    }
}

#[test]
fn cron_next_rejects_an_invalid_from() {
    for from in [
        "yesterday",
        "2027-02-03",
        "2027-02-03T04:05:06",
        "2027-13-03T04:05:06Z",
    ] {
        let output = cron_next(&["* * * * * *", "--from", from]);
        assert_usage_error_naming(&output, from, "--from");
    }
}

#[test]
fn cron_next_rejects_a_bad_count() {
    for count in ["0", "-1", "many", "100001"] {
        let output = cron_next(&[
            "* * * * * *",
            "--from",
            "2027-02-03T04:05:06Z",
            "--count",
            count,
        ]);
        assert_usage_error(&output, count);
    }
}

#[test]
fn cron_next_in_a_zone_moves_a_fire_out_of_the_dst_gap() {
    // Berlin skips 02:00-03:00 on 2027-03-28: 02:30 fires at 03:00 local.
    let args = ["--from", "2027-03-27T12:00:00Z", "--count", "2"];
    let output = cron_next(&[&["0 30 2 * * *", "--tz", "Europe/Berlin"], &args[..]].concat());
    assert_lines(
        &output,
        &["2027-03-28T03:00:00+02:00", "2027-03-29T02:30:00+02:00"],
    );
    let args = ["--from", "2027-03-28T00:40:00Z", "--count", "3"];
    let output = cron_next(&[&["0 */15 * * * *", "--tz", "Europe/Berlin"], &args[..]].concat());
    assert_lines(
        &output,
        &[
            "2027-03-28T01:45:00+01:00",
            "2027-03-28T03:00:00+02:00",
            "2027-03-28T03:15:00+02:00",
        ],
    );
}

#[test]
fn cron_next_in_a_zone_handles_the_dst_overlap() {
    // Berlin repeats 02:00-03:00 on 2027-10-31: a fixed time fires once, an interval twice.
    let output = cron_next(&[
        "0 30 2 * * *",
        "--tz",
        "Europe/Berlin",
        "--from",
        "2027-10-30T12:00:00Z",
        "--count",
        "2",
    ]);
    assert_lines(
        &output,
        &["2027-10-31T02:30:00+02:00", "2027-11-01T02:30:00+01:00"],
    );
    let output = cron_next(&[
        "0 */30 * * * *",
        "--tz",
        "Europe/Berlin",
        "--from",
        "2027-10-30T23:45:00Z",
        "--count",
        "4",
    ]);
    assert_lines(
        &output,
        &[
            "2027-10-31T02:00:00+02:00",
            "2027-10-31T02:30:00+02:00",
            "2027-10-31T02:00:00+01:00",
            "2027-10-31T02:30:00+01:00",
        ],
    );
}

#[test]
fn cron_next_rejects_an_unknown_zone() {
    let output = cron_next(&[
        "0 30 2 * * *",
        "--tz",
        "Mars/Olympus_Mons",
        "--from",
        "2027-03-27T12:00:00Z",
    ]);
    assert_usage_error_naming(&output, "Mars/Olympus_Mons", "`Mars/Olympus_Mons`");
}

/// A file nested past what a file of tasks needs is refused before it is parsed (the YAML
/// parser takes seconds on it) and before any server is asked: a usage error naming the file
/// and the line.
#[test]
fn apply_refuses_a_deeply_nested_file() {
    let dir = tempfile::tempdir().expect("temp dir");
    for (name, text) in [
        (
            "flow.yaml",
            format!("{}{}", "[".repeat(100_000), "]".repeat(100_000)),
        ),
        ("dashes.yaml", format!("{}x\n", "- ".repeat(100_000))),
        (
            "late.yaml",
            format!("- name: a\n  params:\n    x: {}\n", "{y: ".repeat(100_000)),
        ),
    ] {
        assert!(text.len() >= 200_000, "{name}");
        let path = dir.path().join(name);
        std::fs::write(&path, &text).expect("write");
        let output = run(ax(dir.path())
            .args(["apply", "-f"])
            .arg(&path)
            .args(["--url", "http://127.0.0.1:9"]));
        let line = if name == "late.yaml" { 3 } else { 1 };
        assert_usage_error_naming(
            &output,
            name,
            &format!("{name}:{line}: nested deeper than 64 levels"),
        );
    }
}

#[test]
fn migrate_creates_the_sqlite_store() {
    let dir = tempfile::tempdir().expect("temp dir");
    let db = dir.path().join("nested/x.db");
    let url = format!("sqlite://{}", db.display());
    let said = migrate_twice(dir.path(), &url);
    assert!(db.is_file(), "{} was not created", db.display());
    assert!(
        said.contains("applied migration 2026-11-29-000000_init"),
        "{said}"
    );
}

/// Runs `ax migrate` on `url`, then again, which must be a no-op that succeeds and says so;
/// answers what the first said.
fn migrate_twice(dir: &Path, url: &str) -> String {
    let output = run(ax(dir).arg("migrate").env("AX_STORE_URL", url));
    assert_eq!(output.status.code(), Some(0), "stderr: {}", stderr(&output));
    let said = stdout(&output);
    assert!(said.contains(url), "{said}");
    let again = run(ax(dir).arg("migrate").env("AX_STORE_URL", url));
    assert_eq!(again.status.code(), Some(0), "stderr: {}", stderr(&again));
    assert!(
        stdout(&again).contains("no migrations pending"),
        "{}",
        stdout(&again)
    );
    said
}

/// `ax migrate` tries the servers of a URL as `ax serve` does: a closed port, then the test's
/// MariaDB.
#[test]
fn migrate_goes_to_the_first_server_of_the_url_that_answers() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = TestStore::mysql();
    let TestStore::Mysql(name) = &store else {
        unreachable!("a MariaDB store")
    };
    let closed = format!("127.0.0.1:{}", crate::common::free_port());
    let url = crate::common::mysql_server_after(&[closed], name);
    let output = run(ax(dir.path()).arg("migrate").env("AX_STORE_URL", &url));
    assert_eq!(output.status.code(), Some(0), "stderr: {}", stderr(&output));
    let said = stdout(&output);
    assert!(said.contains(&url), "{said}");
    assert!(
        said.contains("applied migration 2026-11-29-000000_init"),
        "{said}"
    );
}

/// `ax migrate` creates a PostgreSQL database and its schema (encrypted if the server offers
/// TLS with a certificate ax trusts, else in plain text), once.
#[test]
fn migrate_creates_the_postgres_schema_once() {
    let dir = tempfile::tempdir().expect("temp dir");
    let database = crate::common::PostgresDatabase::new();
    let url = database.url();
    let said = migrate_twice(dir.path(), &url);
    for migration in ["2026-11-29-000000_init", "2026-12-07-000100_leases"] {
        assert!(
            said.contains(&format!("applied migration {migration}")),
            "{said}"
        );
    }
}

#[test]
fn migrate_reads_the_store_url_from_a_config_file() {
    let dir = tempfile::tempdir().expect("temp dir");
    let db = dir.path().join("from-file.db");
    let config = dir.path().join("ax.yaml");
    std::fs::write(
        &config,
        format!("store:\n  url: sqlite://{}\n", db.display()),
    )
    .expect("write config");
    let output = run(ax(dir.path()).arg("migrate").arg("--config").arg(&config));
    assert_eq!(output.status.code(), Some(0), "stderr: {}", stderr(&output));
    assert!(db.is_file());
}

#[test]
fn migrate_rejects_a_bad_store_url() {
    let dir = tempfile::tempdir().expect("temp dir");
    let output = run(ax(dir.path())
        .arg("migrate")
        .env("AX_STORE_URL", "bogus://x"));
    assert_usage_error(&output, "bogus://x");
    let message = stderr(&output);
    assert!(message.contains("store.url"), "{message}");
    assert!(message.contains("bogus://x"), "{message}");
}

#[test]
fn migrate_rejects_a_bad_config_file() {
    let dir = tempfile::tempdir().expect("temp dir");
    let config = dir.path().join("ax.yaml");
    std::fs::write(&config, "server:\n  prot: 1\n").expect("write config");
    let output = run(ax(dir.path()).arg("migrate").arg("--config").arg(&config));
    assert_usage_error(&output, "unknown key");
    let missing = run(ax(dir.path())
        .arg("migrate")
        .arg("--config")
        .arg(dir.path().join("missing.yaml")));
    assert_usage_error(&missing, "missing file");
}

/// Waits for a child to exit, killing it after `timeout`.
fn wait_with_timeout(mut child: Child, timeout: Duration) -> (Option<i32>, Duration, String) {
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            let output = child.wait_with_output().expect("output");
            return (status.code(), started.elapsed(), stderr(&output));
        }
        if started.elapsed() > timeout {
            let _ = child.kill();
            let output = child.wait_with_output().expect("output");
            panic!(
                "ax serve still running after {timeout:?}; stderr: {}",
                stderr(&output)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Runs an `ax serve` that must fail at start-up, with backtraces on and the default log level
/// so that no panic could pass unseen: its exit code and stderr.
fn serve_failing(dir: &Path, env: &[(&str, String)]) -> (Option<i32>, String) {
    let mut command = ax(dir);
    command
        .arg("serve")
        .env_remove("RUST_LOG")
        .env("RUST_BACKTRACE", "1")
        .env("AX_BIND", "127.0.0.1")
        .env("AX_PORT", "0")
        .env("AX_STORE_URL", format!("sqlite://{}/ax.db", dir.display()))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (name, value) in env {
        command.env(name, value);
    }
    let child = command.spawn().expect("spawn ax serve");
    let (code, elapsed, stderr) = wait_with_timeout(child, Duration::from_secs(30));
    assert!(
        elapsed < Duration::from_secs(15),
        "took {elapsed:?}: {stderr}"
    );
    (code, stderr)
}

/// A start-up failure: exit `code`, no panic, and the last line of stderr, the only one of ax's
/// own and the only one above the info level, names `cause`.
fn assert_start_failure((exit, stderr): (Option<i32>, String), code: i32, cause: &str) {
    assert_eq!(exit, Some(code), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(!stderr.contains("backtrace"), "{stderr}");
    let lines: Vec<&str> = stderr.lines().collect();
    let (last, logs) = lines.split_last().expect("a line on stderr");
    assert!(last.starts_with("ax: ") && last.contains(cause), "{stderr}");
    for line in logs {
        assert!(line.starts_with('[') && line.contains(" INFO "), "{line}");
    }
}

#[test]
fn serve_exits_when_the_port_is_taken() {
    let dir = tempfile::tempdir().expect("temp dir");
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = taken.local_addr().expect("addr").port().to_string();
    let failed = serve_failing(dir.path(), &[("AX_PORT", port.clone())]);
    assert_start_failure(failed, 1, &format!("cannot listen on 127.0.0.1:{port}"));
}

#[test]
fn serve_exits_when_the_store_is_unreachable() {
    let dir = tempfile::tempdir().expect("temp dir");
    let url = "mysql://root@127.0.0.1:1/x".to_string();
    let failed = serve_failing(dir.path(), &[("AX_STORE_URL", url)]);
    assert_start_failure(failed, 1, "cannot start: cannot connect to the store");
}

#[test]
fn serve_rejects_durations_past_their_bound() {
    let dir = tempfile::tempdir().expect("temp dir");
    for (name, key, value) in [
        (
            "AX_PRELOAD_WINDOW_SECS",
            "scheduler.preload_window_secs",
            "9999999999",
        ),
        (
            "AX_RETENTION_DAYS",
            "store.retention_days",
            "106751991167300",
        ),
        (
            "AX_DEPENDENCY_TIMEOUT_SECS",
            "scheduler.dependency_timeout_secs",
            "9223372036854775807",
        ),
    ] {
        let failed = serve_failing(dir.path(), &[(name, value.to_string())]);
        assert_start_failure(failed, 2, key);
    }
}

/// A bad listen address or Redis URL is bad input: exit 2 naming the variable and the key,
/// before anything starts (a Redis that does not answer is exit 1, see above).
#[test]
fn serve_rejects_a_bad_bind_address_or_redis_url() {
    let dir = tempfile::tempdir().expect("temp dir");
    for (name, key, value) in [
        ("AX_BIND", "server.bind", "not an address"),
        ("AX_BIND", "server.bind", "999.1.1.1"),
        ("AX_REDIS_URL", "redis.url", "localhost:6379"),
        ("AX_REDIS_URL", "redis.url", "http://127.0.0.1:6379"),
    ] {
        let failed = serve_failing(dir.path(), &[(name, value.to_string())]);
        assert_start_failure(failed.clone(), 2, key);
        assert!(failed.1.contains(name), "{}", failed.1);
    }
}

#[test]
fn serve_rejects_a_bad_config_file() {
    let dir = tempfile::tempdir().expect("temp dir");
    let config = dir.path().join("ax.yaml");
    std::fs::write(&config, "scheduler:\n  tick_interval_ms: 60000\n").expect("write config");
    let mut command = ax(dir.path());
    command.arg("serve").arg("--config").arg(&config);
    let output = run(command.env("RUST_BACKTRACE", "1"));
    assert_usage_error_naming(&output, "tick interval", "scheduler.tick_interval_ms");
    assert_eq!(stderr(&output).lines().count(), 1, "{}", stderr(&output));
}

#[test]
fn serve_rejects_a_bad_port() {
    let dir = tempfile::tempdir().expect("temp dir");
    let output = run(ax(dir.path()).arg("serve").env("AX_PORT", "eighty"));
    assert_usage_error(&output, "AX_PORT=eighty");
    assert!(stderr(&output).contains("AX_PORT"), "{}", stderr(&output));
}

/// `ax serve --port --bind --store`: the flags win over the environment (and the config file);
/// `--help` lists the environment variables serve reads.
#[test]
fn serve_flags_win_over_the_environment() {
    let dir = tempfile::tempdir().expect("temp dir");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port");
    let db = dir.path().join("flag.db");
    let child = ax(dir.path())
        .args(["serve", "--port", &port.to_string(), "--bind", "127.0.0.1"])
        .arg("--store")
        .arg(format!("sqlite://{}", db.display()))
        .env("AX_PORT", "1")
        .env("AX_STORE_URL", "sqlite://./env.db")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn ax serve");
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut healthy = false;
    while !healthy && Instant::now() < deadline {
        healthy = std::net::TcpStream::connect(("127.0.0.1", port)).is_ok();
        std::thread::sleep(Duration::from_millis(50));
    }
    let pid = child.id().to_string();
    let _ = Command::new("kill").args(["-TERM", &pid]).status();
    let (code, _, log) = wait_with_timeout(child, Duration::from_secs(20));
    assert!(healthy, "not listening on --port {port}: {log}");
    assert_eq!(code, Some(0), "{log}");
    assert!(db.is_file(), "the --store file was not used: {log}");
    assert!(!dir.path().join("env.db").exists());

    let help = run(ax(dir.path()).args(["serve", "--help"]));
    let text = stdout(&help);
    for name in [
        "--port",
        "--bind",
        "--store",
        "AX_PORT",
        "AX_STORE_URL",
        "AX_ADMIN_TOKEN",
    ] {
        assert!(text.contains(name), "{name} not in serve --help:\n{text}");
    }
    let bad = run(ax(dir.path()).args(["serve", "--store", "bogus://x"]));
    assert_usage_error(&bad, "bogus://x");
}

/// The production config in `deploy/` is one ax takes.
#[test]
fn the_deploy_config_is_valid() {
    let dir = tempfile::tempdir().expect("temp dir");
    let config = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/ax.yaml");
    let store = format!("sqlite://{}", dir.path().join("x.db").display());
    let output = run(ax(dir.path())
        .arg("migrate")
        .arg("--config")
        .arg(&config)
        .args(["--store", &store]));
    assert_eq!(output.status.code(), Some(0), "stderr: {}", stderr(&output));
}

/// A short admin token or signing secret stops `ax serve` before it starts: exit 2, one line
/// naming the key, the value never shown.
#[test]
fn short_secrets_are_refused_at_start() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = format!("sqlite://{}", dir.path().join("x.db").display());
    for (env, key, value) in [
        ("AX_ADMIN_TOKEN", "server.admin_token", "short"),
        ("AX_SIGNING_SECRET", "security.signing_secret", "x"),
        ("AX_ADMIN_TOKEN", "server.admin_token", "fifteen-chars-x"),
    ] {
        let output = run(ax(dir.path())
            .args(["serve", "--port", "0", "--store", &store])
            .env(env, value));
        assert_usage_error_naming(&output, env, key);
        let message = stderr(&output);
        // Exactly this line: the value is not in it.
        assert_eq!(
            message.trim(),
            format!("ax: {key} ({env}) must be at least 16 characters")
        );
    }
    let file = dir.path().join("short.yaml");
    std::fs::write(&file, "server:\n  admin_token: tiny-secret\n").expect("config file");
    let output = run(ax(dir.path())
        .arg("serve")
        .arg("--config")
        .arg(&file)
        .args(["--store", &store]));
    assert_usage_error_naming(&output, "the file's admin token", "server.admin_token");
    assert!(!stderr(&output).contains("tiny-secret"));
    assert!(!dir.path().join("x.db").exists(), "nothing started");
}

/// `ax executors apply|list|get` and `ax apply` with `executors:` beside `tasks:`, against a
/// running ax; a bad group in either file is a usage error naming its key.
#[actix_rt::test(system = "crate::common::TestSystem")]
async fn executor_groups_as_code() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = TestStore::sqlite();
    let env = vec![("AX_STORE_URL".to_string(), store.url())];
    let ax_process = AxProcess::start(dir.path(), "executors", env).await;
    let url = ax_process.base();
    let client = |args: &[&str]| run(ax(dir.path()).args(args).args(["--url", &url]));
    let groups = dir.path().join("groups.yaml");
    let groups_path = groups.display().to_string();
    let write = |path: &Path, text: &str| std::fs::write(path, text).expect("write the file");

    write(
        &groups,
        "- {name: billing, routing: FAILOVER, maxInFlight: 8, members: ['http://127.0.0.1:9/']}\n",
    );
    let apply_groups = ["executors", "apply", "-f", groups_path.as_str()];
    assert_lines(
        &client(&apply_groups),
        &["+ billing (created)", "1 created, 0 replaced"],
    );
    assert_lines(
        &client(&apply_groups),
        &["~ billing (replaced)", "0 created, 1 replaced"],
    );

    let list = client(&["executors", "list"]);
    assert_eq!(list.status.code(), Some(0), "{}", stderr(&list));
    let lines: Vec<String> = stdout(&list).lines().map(str::to_string).collect();
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert!(lines[0].starts_with("GROUP") && lines[0].contains("MEMBERS"));
    let row: Vec<&str> = lines[1].split_whitespace().collect();
    assert_eq!(row[..4], ["billing", "FAILOVER", "8", "1"], "{lines:?}");
    let wide = stdout(&client(&["executors", "list", "--wide"]));
    assert!(
        wide.lines()
            .any(|l| l.starts_with("billing  http://127.0.0.1:9/  HEALTHY")),
        "{wide}"
    );
    let listed: Value =
        serde_json::from_str(&stdout(&client(&["executors", "list", "--json"]))).expect("JSON");
    assert_eq!(listed["items"][0]["name"], "billing", "{listed}");

    let got = client(&["executors", "get", "billing"]);
    assert_eq!(got.status.code(), Some(0), "{}", stderr(&got));
    let text = stdout(&got);
    assert!(
        text.lines()
            .any(|l| l.starts_with("routing") && l.ends_with("FAILOVER")),
        "{text}"
    );
    assert!(
        text.lines().any(|l| l.starts_with("http://127.0.0.1:9/")),
        "{text}"
    );
    let group: Value =
        serde_json::from_str(&stdout(&client(&["executors", "get", "billing", "--json"])))
            .expect("JSON");
    assert_eq!(group["maxInFlight"], 8, "{group}");
    assert_eq!(group["members"][0]["url"], "http://127.0.0.1:9/", "{group}");
    assert_eq!(group["members"][0]["registered"], false, "{group}");
    let missing = client(&["executors", "get", "nobody"]);
    assert_eq!(missing.status.code(), Some(1), "{}", stderr(&missing));
    assert!(
        stderr(&missing).contains("NOT_FOUND"),
        "{}",
        stderr(&missing)
    );
    assert_usage_error_naming(
        &client(&["executors", "get", "Bad Name"]),
        "a bad group name",
        "GROUP",
    );

    // `ax apply`: the groups are written before the tasks that name them.
    let tasks = dir.path().join("tasks.yaml");
    let tasks_path = tasks.display().to_string();
    let task_file = "executors:\n\
         - {name: ledger, routing: LEAST_BUSY, members: ['http://127.0.0.1:9']}\n\
         tasks:\n\
         - name: reconcile\n  scene: finance\n  cron: '0 0 4 * * *'\n\
         \x20 executor: {group: ledger, path: /jobs/reconcile}\n";
    write(&tasks, task_file);
    let apply = |extra: &[&str]| {
        let mut args = vec!["apply", "-f", tasks_path.as_str()];
        args.extend_from_slice(extra);
        client(&args)
    };
    assert_lines(
        &apply(&["--dry-run"]),
        &[
            "+ executor ledger",
            "+ finance/reconcile",
            "1 would be created, 0 would be changed, 0 would be deleted; \
             executors: 1 would be created, 0 would be replaced",
        ],
    );
    let api = Api::at(url.clone());
    let (_, listing) = api.get("/api/executors").await;
    assert_eq!(
        listing["items"].as_array().map(Vec::len),
        Some(1),
        "a dry run writes nothing: {listing}"
    );
    assert_lines(
        &apply(&[]),
        &[
            "+ executor ledger",
            "+ finance/reconcile",
            "1 created, 0 changed, 0 deleted; executors: 1 created, 0 replaced",
        ],
    );
    assert_lines(&apply(&[]), &["no change"]);
    let (_, page) = api.get("/api/tasks?scene=finance").await;
    let task = &page["items"][0];
    assert_eq!(task["executor"]["group"], "ledger", "{page}");
    assert_eq!(task["executor"]["path"], "/jobs/reconcile", "{page}");
    let (_, ledger) = api.get("/api/executors/ledger").await;
    assert_eq!(ledger["routing"], "LEAST_BUSY", "{ledger}");
    write(&tasks, &task_file.replace("LEAST_BUSY", "FIRST"));
    assert_lines(
        &apply(&[]),
        &[
            "~ executor ledger (routing)",
            "0 created, 0 changed, 0 deleted; executors: 0 created, 1 replaced",
        ],
    );

    // `ax export` writes the groups its tasks use: applied back, nothing changes.
    let exported = client(&["export", "--scene", "finance"]);
    assert_eq!(exported.status.code(), Some(0), "{}", stderr(&exported));
    let text = stdout(&exported);
    assert!(
        text.contains("executors:") && text.contains("name: ledger"),
        "{text}"
    );
    assert!(text.contains("routing: FIRST"), "{text}");
    write(&tasks, &text);
    assert_lines(&apply(&[]), &["no change"]);

    // A bad routing is refused before any request, naming the group's key.
    write(&groups, "executors:\n- {name: billing, routing: ROUND}\n");
    assert_usage_error_naming(
        &client(&apply_groups),
        "executors apply, bad routing",
        "executors[0].routing",
    );
    write(&tasks, &task_file.replace("LEAST_BUSY", "NEAREST"));
    assert_usage_error_naming(&apply(&[]), "apply, bad routing", "executors[0].routing");
    let (_, ledger) = api.get("/api/executors/ledger").await;
    assert_eq!(ledger["routing"], "FIRST", "unchanged: {ledger}");
    ax_process.terminate().await;
}

/// `ax calendars import|list|get|put|delete` against a running ax: a real holiday calendar
/// read from its `.ics` file, a calendar from a YAML file, and the refusals (bad name, bad
/// file, a calendar in use).
#[actix_rt::test(system = "crate::common::TestSystem")]
async fn calendars_from_files_and_ics() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = TestStore::sqlite();
    let env = vec![("AX_STORE_URL".to_string(), store.url())];
    let ax_process = AxProcess::start(dir.path(), "calendars", env).await;
    let url = ax_process.base();
    let client = |args: &[&str]| run(ax(dir.path()).args(args).args(["--url", &url]));
    let ics = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/calendars/uk-england-wales-holidays.ics")
        .display()
        .to_string();

    let dry = client(&[
        "calendars",
        "import",
        "uk",
        &ics,
        "--until",
        "2030",
        "--dry-run",
    ]);
    assert_eq!(dry.status.code(), Some(0), "{}", stderr(&dry));
    let read: Value = serde_json::from_str(&stdout(&dry)).expect("JSON");
    assert_eq!(read["dates"].as_array().map(Vec::len), Some(80), "{read}");
    let api = Api::at(url.clone());
    let (status, _) = api.get("/api/calendars/uk").await;
    assert_eq!(status, 404, "a dry run sends nothing");
    let import = ["calendars", "import", "uk", ics.as_str(), "--until", "2030"];
    assert_lines(
        &client(&import),
        &["created calendar uk: 80 dates, 0 ranges, 0 weekdays"],
    );
    assert_lines(
        &client(&import),
        &["replaced calendar uk: 80 dates, 0 ranges, 0 weekdays"],
    );

    let days = dir.path().join("office.yaml");
    std::fs::write(
        &days,
        "dates: [2026-12-31]\nranges: [{from: 2026-12-24, to: 2026-12-27}]\nweekdays: [SAT, SUN]\n",
    )
    .expect("write the file");
    let days_path = days.display().to_string();
    assert_lines(
        &client(&["calendars", "put", "office", &days_path]),
        &["created calendar office: 1 date, 1 range, 2 weekdays"],
    );
    let list = client(&["calendars", "list"]);
    assert_eq!(list.status.code(), Some(0), "{}", stderr(&list));
    let rows: Vec<Vec<String>> = stdout(&list)
        .lines()
        .map(|line| line.split_whitespace().map(str::to_string).collect())
        .collect();
    assert_eq!(
        rows[0][..5],
        ["NAME", "DATES", "RANGES", "WEEKDAYS", "TASKS"],
        "{rows:?}"
    );
    assert_eq!(
        rows[1][..5],
        ["office", "1", "1", "SAT,SUN", "0"],
        "{rows:?}"
    );
    assert_eq!(rows[2][..5], ["uk", "80", "0", "-", "0"], "{rows:?}");
    // `ax cron next --calendar` asks the server: weekdays at 09:00 in London, the bank
    // holidays of Christmas 2027 (Monday 27th, Tuesday 28th) moved to the next open day.
    let preview = [
        "cron",
        "next",
        "0 0 9 * * MON-FRI",
        "--tz",
        "Europe/London",
        "--count",
        "3",
        "--from",
        "2027-12-24T12:00:00Z",
        "--calendar",
        "uk",
        "--policy",
        "NEXT_OPEN_DAY",
    ];
    assert_lines(
        &client(&preview),
        &[
            "2027-12-29T09:00:00.000Z",
            "2027-12-30T09:00:00.000Z",
            "2027-12-31T09:00:00.000Z",
            "- 2027-12-27T09:00:00.000Z  day off (uk)",
            "- 2027-12-28T09:00:00.000Z  day off (uk)",
        ],
    );
    let unknown = ["cron", "next", "0 0 9 * * *", "--calendar", "nope"];
    assert_eq!(
        client(&unknown).status.code(),
        Some(2),
        "an unknown calendar"
    );
    let got = stdout(&client(&["calendars", "get", "uk"]));
    assert!(got.lines().any(|line| line == "2027-12-27"), "{got}");
    assert!(
        !got.lines().any(|line| line == "2027-12-25"),
        "moved: {got}"
    );

    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, r#"{"dates": ["2026-02-30"]}"#).expect("write the file");
    let bad_path = bad.display().to_string();
    assert_usage_error_naming(
        &client(&["calendars", "put", "office", &bad_path]),
        "a bad calendar file",
        "bad.json: dates[0]",
    );
    assert_usage_error_naming(
        &client(&["calendars", "get", "UK Holidays"]),
        "a bad calendar name",
        "<NAME>",
    );
    let timed = dir.path().join("meeting.ics");
    std::fs::write(
        &timed,
        "BEGIN:VCALENDAR\nBEGIN:VEVENT\nSUMMARY:Standup\nDTSTART:20261225T090000Z\n\
         END:VEVENT\nEND:VCALENDAR\n",
    )
    .expect("write the file");
    assert_usage_error_naming(
        &client(&["calendars", "import", "team", &timed.display().to_string()]),
        "an event at a time of day",
        "meeting.ics: line 4: event `Standup`",
    );

    api.create_task(serde_json::json!({"name": "payroll", "cron": "0 0 9 * * *",
        "handlerUrl": "http://127.0.0.1:9/run", "calendars": {"exclude": ["uk"]}}))
        .await;
    let in_use = client(&["calendars", "delete", "uk"]);
    assert_eq!(in_use.status.code(), Some(1), "{}", stderr(&in_use));
    assert!(
        stderr(&in_use).contains("CONFLICT (name)"),
        "{}",
        stderr(&in_use)
    );
    assert!(stderr(&in_use).contains("payroll"), "{}", stderr(&in_use));
    assert_lines(
        &client(&["calendars", "delete", "office"]),
        &["deleted calendar office"],
    );
    let gone = client(&["calendars", "get", "office"]);
    assert_eq!(gone.status.code(), Some(1), "{}", stderr(&gone));
    assert!(stderr(&gone).contains("NOT_FOUND"), "{}", stderr(&gone));
    ax_process.terminate().await;
}

/// `ax runs logs`: a run's lines by attempt; with `--follow`, each new line once, as it comes,
/// until the run ends, then the run's final status; a request id that is no UUID is a usage
/// error.
#[actix_rt::test(system = "crate::common::TestSystem")]
async fn runs_logs_follows_a_run_to_its_end() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = TestStore::sqlite();
    let env = vec![
        ("AX_STORE_URL".to_string(), store.url()),
        (
            "AX_SIGNING_SECRET".to_string(),
            crate::common::SECRET.to_string(),
        ),
    ];
    let ax_process = AxProcess::start(dir.path(), "logs", env).await;
    let url = ax_process.base();
    let api = Api::at(url.clone());
    let executor = crate::common::Executor::start(crate::common::Reply::Accepted).await;
    let task = api
        .create_task(serde_json::json!({"name": "logged", "cron": "* * * * * *",
            "handlerUrl": executor.url, "maxRetry": 0}))
        .await;
    let delivery = executor.wait_for(1, Duration::from_secs(5)).await[0].clone();
    api.post(
        &format!("/api/tasks/{}/pause", task["id"]),
        serde_json::json!({}),
    )
    .await;
    let log_path = format!("/api/instances/{}/log", delivery.request_id);
    let token = delivery.body["callbackToken"].clone();
    let send = |lines: Vec<&str>, progress: u32| serde_json::json!({"callbackToken": token, "lines": lines, "progress": progress});
    let (status, reply) = api.post(&log_path, send(vec!["one", "two"], 20)).await;
    assert_eq!(status, 200, "{reply}");

    let follow = ax(dir.path())
        .args([
            "runs",
            "logs",
            &delivery.request_id,
            "--follow",
            "--url",
            &url,
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("ax runs logs");
    actix_rt::time::sleep(Duration::from_millis(1_500)).await;
    api.post(&log_path, send(vec!["three"], 80)).await;
    actix_rt::time::sleep(Duration::from_millis(1_500)).await;
    let (status, reply) = api
        .post("/api/callback", delivery.callback("SUCCESS", Value::Null))
        .await;
    assert_eq!(status, 200, "{reply}");
    let followed =
        actix_rt::task::spawn_blocking(move || output_within(follow, Duration::from_secs(10)))
            .await
            .expect("follow ends");
    assert_eq!(followed.status.code(), Some(0), "{}", stderr(&followed));
    assert_eq!(
        log_texts(&stdout(&followed)),
        ["one", "two", "three"],
        "each line once, as it came"
    );
    // It ends with how the run ended.
    let last = stdout(&followed).lines().last().map(str::to_string);
    assert!(
        last.as_deref()
            .is_some_and(|line| line.starts_with("--- run SUCCESS (attempt 1")),
        "{}",
        stdout(&followed)
    );

    let once = run(ax(dir.path()).args(["runs", "logs", &delivery.request_id, "--url", &url]));
    assert_eq!(once.status.code(), Some(0), "{}", stderr(&once));
    let text = stdout(&once);
    assert_eq!(log_texts(&text), ["one", "two", "three"], "{text}");
    assert!(text.contains("--- attempt 1: 80 %"), "{text}");
    assert!(
        !text.contains("--- run "),
        "only --follow waits for the end: {text}"
    );

    assert_usage_error_naming(
        &run(ax(dir.path()).args(["runs", "logs", "not-a-uuid", "--url", &url])),
        "a request id that is no UUID",
        "REQUEST_ID",
    );
    executor.stop().await;
}

/// The texts of `ax runs logs` lines (`AT  TEXT`), headers left out.
fn log_texts(printed: &str) -> Vec<String> {
    printed
        .lines()
        .filter(|l| !l.starts_with("---"))
        .filter_map(|l| l.split_once("  ").map(|(_, t)| t.to_string()))
        .collect()
}

/// The output of a child that must end within `timeout`.
fn output_within(mut child: Child, timeout: Duration) -> Output {
    let started = Instant::now();
    while child.try_wait().expect("try_wait").is_none() {
        if started.elapsed() > timeout {
            let _ = child.kill();
            panic!("still running after {timeout:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().expect("output")
}
