//! `ax copy`: a deployment made on SQLite goes to PostgreSQL, on to MariaDB and back to SQLite,
//! every copied row as it was; a copy cut short completes on a second run; a target that holds
//! a deployment, or a complete copy, is refused.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Output;
use std::time::Duration;

use diesel::sql_types::Text;
use diesel::{Connection, QueryableByName, RunQueryDsl, SqliteConnection};
use serde_json::json;

use crate::common::{ax_command, config, start_ax, Api, Executor, Reply, TestStore};

/// The tables `ax copy` copies: compared row by row.
const COPIED: [&str; 11] = [
    "ax_task",
    "ax_task_dependency",
    "ax_scene",
    "ax_executor_group",
    "ax_executor_member",
    "ax_audit",
    "ax_instance",
    "ax_attempt",
    "ax_run_log",
    "ax_run_log_attempt",
    "ax_alert",
];

#[derive(QueryableByName)]
struct Line {
    #[diesel(sql_type = Text)]
    line: String,
}

/// Every row of the copied tables of the SQLite store at `url`, each as one line of its
/// values, sorted.
fn dump(url: &str) -> BTreeMap<&'static str, Vec<String>> {
    let path = url.trim_start_matches("sqlite://");
    let mut conn = SqliteConnection::establish(path).expect("open the SQLite store");
    COPIED
        .into_iter()
        .map(|table| {
            let columns: Vec<Line> = diesel::sql_query(format!(
                "SELECT name AS line FROM pragma_table_info('{table}') ORDER BY cid"
            ))
            .load(&mut conn)
            .expect("columns");
            let values: Vec<String> = columns
                .iter()
                .map(|c| format!("quote({})", c.line))
                .collect();
            let rows: Vec<Line> = diesel::sql_query(format!(
                "SELECT {} AS line FROM {table}",
                values.join(" || '|' || ")
            ))
            .load(&mut conn)
            .expect("rows");
            let mut rows: Vec<String> = rows.into_iter().map(|row| row.line).collect();
            rows.sort();
            (table, rows)
        })
        .collect()
}

fn copy(dir: &Path, from: &str, to: &str) -> Output {
    ax_command()
        .current_dir(dir)
        .env("RUST_LOG", "warn")
        .args(["copy", "--from", from, "--to", to])
        .output()
        .expect("run ax copy")
}

/// The counts `ax copy` printed, by kind.
fn counts(output: &Output) -> BTreeMap<String, u64> {
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(
        output.status.code(),
        Some(0),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
        .lines()
        .skip(1)
        .filter_map(|line| {
            let (kind, count) = line.trim().rsplit_once(' ')?;
            Some((kind.trim().to_string(), count.parse().ok()?))
        })
        .collect()
}

fn refused(output: &Output, says: &str) {
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains(says), "{stderr}");
}

/// A deployment on SQLite: tasks (one depending on another, one retried, one with labels in
/// a paused scene), an executor group with a member, runs with attempts and output, and the
/// audit log of it all.
async fn deployment(store: &TestStore) {
    let mut config = config(store, false, "copied");
    // The member stays while the copies are made.
    config.executors.member_ttl_secs = 3_600;
    let ax = start_ax(&config).await;
    let api = Api::new(&ax);
    let body = r#"{"status":"SUCCESS","output":"3 rows written"}"#;
    let succeeds = Executor::start(Reply::Body(body.into())).await;
    // Its first attempt fails, the retry succeeds: an ended attempt is kept.
    let fails = Executor::start(Reply::FailFirst(1)).await;
    let every = |name: &str, url: &str| json!({"name": name, "cron": "* * * * * *", "handlerUrl": url, "maxRetry": 0});
    let first = api.create_task(every("first", &succeeds.url)).await;
    let first_id = first["id"].as_i64().expect("id");
    let mut second = every("second", &succeeds.url);
    second["dependsOn"] = json!([first_id]);
    api.create_task(second).await;
    let mut failing = every("failing", &fails.url);
    failing["maxRetry"] = json!(1);
    failing["retryBackoffSecs"] = json!(1);
    let failing = api.create_task(failing).await;
    let mut labelled = every("labelled", &succeeds.url);
    labelled["scene"] = json!("reports");
    labelled["labels"] = json!({"team": "billing"});
    api.create_task(labelled).await;
    let (status, body) = api.post("/api/scenes/reports/pause", json!({})).await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = api
        .post(
            "/api/executors/workers/members",
            json!({"url": succeeds.base()}),
        )
        .await;
    assert_eq!(status, 201, "{body}");
    api.wait_final(first_id, 3, Duration::from_secs(20)).await;
    let failing_id = failing["id"].as_i64().expect("id");
    api.wait_final(failing_id, 2, Duration::from_secs(20)).await;
    ax.shutdown().await;
}

#[actix_rt::test(system = "crate::common::TestSystem")]
async fn a_deployment_goes_round_every_backend_row_for_row() {
    let dir = tempfile::tempdir().expect("temp dir");
    let source = TestStore::sqlite();
    deployment(&source).await;
    let (postgres, mariadb, back) = (
        TestStore::postgres(),
        TestStore::mysql(),
        TestStore::sqlite(),
    );
    let hops = [
        (&source, &postgres),
        (&postgres, &mariadb),
        (&mariadb, &back),
    ];
    let mut said = Vec::new();
    for (from, to) in hops {
        said.push(counts(&copy(dir.path(), &from.url(), &to.url())));
    }
    let first = &said[0];
    for kind in [
        "tasks",
        "dependencies",
        "scenes",
        "groups",
        "members",
        "audit",
    ] {
        assert!(first[kind] > 0, "{kind}: {first:?}");
    }
    for kind in ["runs", "attempts", "log attempts"] {
        assert!(first[kind] >= 3, "{kind}: {first:?}");
    }
    assert!(said.iter().all(|counts| counts == first), "{said:?}");
    assert_eq!(
        dump(&back.url()),
        dump(&source.url()),
        "every row came through"
    );

    // Once complete, a copy is not made again; a store that holds anything is no target.
    refused(
        &copy(dir.path(), &source.url(), &postgres.url()),
        "already a complete copy",
    );
    let path = back.url().replace("sqlite://", "");
    let mut conn = SqliteConnection::establish(&path).expect("open");
    diesel::sql_query("DELETE FROM ax_meta WHERE name = 'copied_from'")
        .execute(&mut conn)
        .expect("unmark");
    refused(
        &copy(dir.path(), &source.url(), &back.url()),
        "already holds",
    );

    // A copy cut short (its mark still says so, rows missing) completes on a second run.
    let cut = TestStore::sqlite();
    counts(&copy(dir.path(), &source.url(), &cut.url()));
    {
        let path = cut.url().replace("sqlite://", "");
        let mut conn = SqliteConnection::establish(&path).expect("open");
        diesel::sql_query(
            "UPDATE ax_meta SET value = 'copying ' || substr(value, 6) \
             WHERE name = 'copied_from'",
        )
        .execute(&mut conn)
        .expect("mark");
        diesel::sql_query("DELETE FROM ax_instance WHERE id % 2 = 0")
            .execute(&mut conn)
            .expect("delete runs");
        diesel::sql_query("DELETE FROM ax_attempt")
            .execute(&mut conn)
            .expect("delete attempts");
    }
    assert_eq!(counts(&copy(dir.path(), &source.url(), &cut.url())), *first);
    assert_eq!(dump(&cut.url()), dump(&source.url()), "completed");

    // No runs asked for, none copied.
    let definitions = TestStore::sqlite();
    let output = ax_command()
        .current_dir(dir.path())
        .args(["copy", "--from", &source.url(), "--to", &definitions.url()])
        .args(["--runs-days", "0"])
        .output()
        .expect("run ax copy");
    let without = counts(&output);
    assert_eq!((without["runs"], without["tasks"]), (0, first["tasks"]));
}

#[test]
fn bad_urls_are_usage_errors_naming_the_flag() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = format!("sqlite://{}/a.db", dir.path().display());
    for (from, to, flag) in [
        ("redis://x", store.as_str(), "--from"),
        (store.as_str(), "postgres://x", "--to"),
        (store.as_str(), store.as_str(), "--to"),
    ] {
        let output = copy(dir.path(), from, to);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains(&format!("invalid {flag}")), "{stderr}");
    }
    assert!(!dir.path().join("a.db").exists(), "nothing made");
}
