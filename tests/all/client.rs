//! `ax tasks …` and `ax runs …` as a real process against a running `ax serve`, on both
//! stores: tables and `--json`, `--url`/`AX_URL`, `--token`/`AX_ADMIN_TOKEN`, exit 1 with the
//! API's message when it says no, 2 for bad input.

use std::process::Output;
use std::time::Duration;

use serde_json::{json, Value};

use crate::common::{on_each_backend, Api, AxProcess, Executor, Reply, TestStore};

const TOKEN: &str = "client-t0ken-0123456";

/// `ax ARGS…` with no `AX_…` variable but those given.
fn ax(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut command = crate::common::ax_command();
    command.args(args).envs(env.iter().copied());
    command.output().expect("run ax")
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn ok(output: &Output) -> String {
    assert_eq!(
        output.status.code(),
        Some(0),
        "stderr: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout(output)
}

async fn the_cli_drives_the_api(store: TestStore) {
    let dir = tempfile::tempdir().expect("dir");
    let env = [
        ("AX_STORE_URL", store.url()),
        ("AX_ADMIN_TOKEN", TOKEN.into()),
    ]
    .map(|(key, value)| (key.to_string(), value))
    .to_vec();
    let ax_process = AxProcess::start(dir.path(), "client", env).await;
    let url = ax_process.base();
    let executor = Executor::start(Reply::Success).await;
    let api = Api::at(url.clone());
    let (status, task) = api
        .call(
            "POST",
            "/api/tasks",
            Some(
                json!({"name": "cli-report", "scene": "cli", "cron": "0 0 3 * * *",
                "handlerUrl": executor.url}),
            ),
        )
        .await;
    // The API asks for the token; the test's own client has none.
    assert_eq!(status, 401, "{task}");
    let with_token = |args: &[&str]| {
        let mut all = args.to_vec();
        all.extend_from_slice(&["--url", url.as_str(), "--token", TOKEN]);
        ax(&all, &[])
    };
    let empty = ok(&with_token(&["tasks", "list"]));
    assert_eq!(empty.lines().count(), 1, "only the header: {empty}");

    // Create one through the API with the token, then drive it from the CLI.
    let client = awc::Client::default();
    let mut reply = client
        .post(format!("{url}/api/tasks"))
        .bearer_auth(TOKEN)
        .send_json(
            &json!({"name": "cli-report", "scene": "cli", "cron": "0 0 3 * * *",
            "handlerUrl": executor.url}),
        )
        .await
        .expect("create");
    let task: Value = reply.json().await.expect("task");
    let id = task["id"].to_string();

    let list = ok(&with_token(&["tasks", "list", "--scene", "cli"]));
    let header = list.lines().next().unwrap_or_default();
    assert!(
        header.starts_with("ID") && header.contains("NEXT RUN"),
        "{list}"
    );
    assert!(
        list.contains("cli-report") && list.contains("ENABLED"),
        "{list}"
    );
    let paused = ok(&with_token(&["tasks", "pause", &id]));
    assert_eq!(paused, format!("paused task cli/cli-report (id {id})\n"));
    // The environment works as the flags do, and --json prints the API's reply.
    let env = [("AX_URL", url.as_str()), ("AX_ADMIN_TOKEN", TOKEN)];
    let got: Value = serde_json::from_str(&ok(&ax(&["tasks", "get", &id, "--json"], &env)))
        .expect("--json prints JSON");
    assert_eq!(got["status"], "PAUSED");
    ok(&with_token(&["tasks", "resume", &id]));

    let triggered = ok(&with_token(&["tasks", "trigger", &id]));
    let request_id = triggered
        .trim()
        .strip_prefix(&format!("triggered task {id} (id {id}): run "))
        .expect("the new run's request id")
        .to_string();
    executor.wait_for(1, Duration::from_secs(10)).await;
    // Its reply is recorded a moment after the executor has it.
    actix_rt::time::sleep(Duration::from_millis(500)).await;
    let runs = ok(&with_token(&[
        "runs", "list", "--task", &id, "--status", "SUCCESS",
    ]));
    assert!(runs.contains(&request_id), "{runs}");
    let run = ok(&with_token(&["runs", "get", &request_id]));
    assert!(
        run.lines()
            .any(|l| l.starts_with("status") && l.ends_with("SUCCESS")),
        "{run}"
    );

    // A final run is not cancelled: the API's 409, exit 1.
    let final_run = with_token(&["runs", "cancel", &request_id]);
    assert_eq!(final_run.status.code(), Some(1), "{final_run:?}");
    assert!(String::from_utf8_lossy(&final_run.stderr).contains("CONFLICT"));
    let backfill =
        |from: &str, to: &str| with_token(&["tasks", "backfill", &id, "--from", from, "--to", to]);
    let backfilled = ok(&backfill("2026-01-01T00:00:00Z", "2026-01-01T00:00:01Z"));
    assert!(
        backfilled.starts_with(&format!("backfilled task {id} (id {id}): ")),
        "{backfilled}"
    );
    // A range the API refuses is bad input: 2, naming the field.
    let empty = backfill("2026-01-01T00:00:00Z", "2026-01-01T00:00:00Z");
    assert_eq!(empty.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&empty.stderr).contains("(to)"));

    // The server said no: exit 1 with the API's message.
    let missing = with_token(&["tasks", "get", "999999"]);
    assert_eq!(missing.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&missing.stderr).contains("NOT_FOUND"),
        "{missing:?}"
    );
    let no_token = ax(&["tasks", "list", "--url", &url], &[]);
    assert_eq!(no_token.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&no_token.stderr).contains("UNAUTHORIZED"));
    // Bad usage is 2, before any request.
    let bad_status = with_token(&["runs", "list", "--status", "DONE"]);
    assert_eq!(bad_status.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad_status.stderr).contains("--status"));
    assert_eq!(with_token(&["tasks", "get", "x"]).status.code(), Some(2));
    ax_process.terminate().await;
}

on_each_backend!(
    the_cli_drives_the_api,
    sqlite: the_cli_drives_the_api_sqlite,
    mariadb: the_cli_drives_the_api_mysql,
    postgres: the_cli_drives_the_api_postgres
);

async fn tasks_as_code(store: TestStore) {
    let dir = tempfile::tempdir().expect("dir");
    let env = vec![("AX_STORE_URL".to_string(), store.url())];
    let ax_process = AxProcess::start(dir.path(), "apply", env).await;
    let url = ax_process.base();
    let file = dir.path().join("tasks.yaml");
    let write = |text: &str| std::fs::write(&file, text).expect("write the file");
    let apply = |extra: &[&str]| {
        let path = file.display().to_string();
        let mut args = vec!["apply", "-f", path.as_str(), "--url", url.as_str()];
        args.extend_from_slice(extra);
        ok(&ax(&args, &[]))
    };
    write(
        "- {name: a, scene: code, cron: '0 0 1 * * *', handlerUrl: 'http://127.0.0.1:9/run'}\n\
         - name: b\n  scene: code\n  cron: '0 0 2 * * *'\n  handlerUrl: 'http://127.0.0.1:9/run'\n  params: {k: v}\n\
         - {name: c, scene: other, cron: '0 0 3 * * *', handlerUrl: 'http://127.0.0.1:9/run', maxRetry: 0}\n",
    );
    let dry = apply(&["--dry-run"]);
    assert_eq!(
        dry,
        "+ code/a\n+ code/b\n+ other/c\n\
         3 would be created, 0 would be changed, 0 would be deleted\n"
    );
    let api = Api::at(url.clone());
    let (_, page) = api.get("/api/tasks").await;
    assert_eq!(page["total"], 0, "a dry run writes nothing");
    assert_eq!(
        apply(&[]),
        "+ code/a\n+ code/b\n+ other/c\n3 created, 0 changed, 0 deleted\n"
    );
    assert_eq!(apply(&[]), "no change\n", "idempotent");

    // b changes, a leaves the file: pruned within the file's scenes only.
    write(
        "- name: b\n  scene: code\n  cron: '0 30 2 * * *'\n  handlerUrl: 'http://127.0.0.1:9/run'\n  params: {k: v}\n",
    );
    let cron = r#"~ code/b: cron "0 0 2 * * *" → "0 30 2 * * *""#;
    assert_eq!(
        apply(&["--dry-run", "--prune"]),
        format!("{cron}\n- code/a\n0 would be created, 1 would be changed, 1 would be deleted\n")
    );
    assert_eq!(
        apply(&["--prune", "--yes"]),
        format!("{cron}\n- code/a\n0 created, 1 changed, 1 deleted\n")
    );
    let (_, page) = api.get("/api/tasks").await;
    assert_eq!(page["total"], 2, "other/c stays: {page}");

    // What export prints, apply takes back unchanged.
    let exported = ok(&ax(&["export", "--url", &url], &[]));
    assert!(
        exported.contains("name: b") && exported.contains("0 30 2 * * *"),
        "{exported}"
    );
    write(&exported);
    assert_eq!(apply(&["--prune"]), "no change\n");
    let json = ok(&ax(
        &["export", "--scene", "other", "--json", "--url", &url],
        &[],
    ));
    let tasks: Value = serde_json::from_str(&json).expect("JSON");
    assert_eq!(tasks.as_array().map(Vec::len), Some(1), "{json}");

    // A paused scene is exported with every scene's pause, and apply restores it.
    let (status, _) = api.post("/api/scenes/code/pause", json!({})).await;
    assert_eq!(status, 200);
    let exported = ok(&ax(&["export", "--url", &url], &[]));
    assert!(
        exported.contains("scenes:\n  code:\n    paused: true\n  other:\n    paused: false\n"),
        "{exported}"
    );
    assert!(
        exported.contains("tasks:") && exported.contains("name: b"),
        "{exported}"
    );
    write(&exported);
    assert_eq!(apply(&["--prune"]), "no change\n", "a round trip");
    let (status, _) = api.post("/api/scenes/code/resume", json!({})).await;
    assert_eq!(status, 200);
    assert_eq!(
        apply(&[]),
        "~ scene code (paused)\n0 created, 0 changed, 0 deleted; scenes: 1 paused, 0 resumed\n"
    );
    let paused = |scenes: &Value, name: &str| {
        scenes["items"]
            .as_array()
            .and_then(|s| s.iter().find(|s| s["scene"] == name))
            .map(|s| s["paused"].clone())
    };
    let (_, scenes) = api.get("/api/scenes").await;
    assert_eq!(paused(&scenes, "code"), Some(json!(true)), "{scenes}");
    write(&exported.replace("paused: true", "paused: false"));
    assert_eq!(
        apply(&["--dry-run"]),
        "~ scene code (resumed)\n0 would be created, 0 would be changed, 0 would be deleted; \
         scenes: 0 would be paused, 1 would be resumed\n"
    );
    apply(&[]);
    let (_, scenes) = api.get("/api/scenes").await;
    assert_eq!(paused(&scenes, "code"), Some(json!(false)), "{scenes}");
    let plain = ok(&ax(&["export", "--url", &url], &[]));
    assert!(
        plain.starts_with("- "),
        "no scene paused: the plain list: {plain}"
    );
    write(&exported.replace("paused: true", "paused: maybe"));
    let path = file.display().to_string();
    let bad = ax(&["apply", "-f", &path, "--url", &url], &[]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&bad.stderr).contains("scenes.code.paused"),
        "{bad:?}"
    );

    // A bad file changes nothing and is a usage error naming the task and field.
    write("- {name: d, scene: code, cron: 'nope', handlerUrl: 'http://127.0.0.1:9/run'}\n");
    let path = file.display().to_string();
    let bad = ax(&["apply", "-f", &path, "--url", &url], &[]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&bad.stderr).contains("items[0].cron"),
        "{bad:?}"
    );
    ax_process.terminate().await;
}

on_each_backend!(
    tasks_as_code,
    sqlite: tasks_as_code_sqlite,
    mariadb: tasks_as_code_mysql,
    postgres: tasks_as_code_postgres
);

/// Labels through the CLI: `ax apply` sets and changes them, `ax export` prints them (none
/// when empty) and applies back unchanged, `ax tasks list --label` filters by one.
async fn labels_as_code(store: TestStore) {
    let dir = tempfile::tempdir().expect("dir");
    let env = vec![("AX_STORE_URL".to_string(), store.url())];
    let ax_process = AxProcess::start(dir.path(), "labels", env).await;
    let url = ax_process.base();
    let file = dir.path().join("tasks.yaml");
    let path = file.display().to_string();
    let write = |text: &str| std::fs::write(&file, text).expect("write the file");
    let apply = || ok(&ax(&["apply", "-f", &path, "--url", &url], &[]));
    write(
        "- name: a\n  scene: code\n  cron: '0 0 1 * * *'\n  handlerUrl: 'http://127.0.0.1:9/run'\n  labels: {team: billing, tier: '1'}\n\
         - {name: b, scene: code, cron: '0 0 2 * * *', handlerUrl: 'http://127.0.0.1:9/run'}\n",
    );
    assert_eq!(
        apply(),
        "+ code/a\n+ code/b\n2 created, 0 changed, 0 deleted\n"
    );
    let exported = ok(&ax(&["export", "--url", &url], &[]));
    assert!(
        exported.contains("  labels:\n    team: billing\n    tier: \"1\"\n"),
        "{exported}"
    );
    assert_eq!(
        exported.matches("labels").count(),
        1,
        "none for b: {exported}"
    );
    write(&exported);
    assert_eq!(apply(), "no change\n", "a round trip");
    write(&exported.replace("team: billing", "team: ops"));
    assert_eq!(
        apply(),
        "~ code/a: labels {\"team\":\"billing\",\"tier\":\"1\"} → {\"team\":\"ops\",\"tier\":\"1\"}\n\
         0 created, 1 changed, 0 deleted\n"
    );

    let list = |label: &str| ax(&["tasks", "list", "--label", label, "--url", &url], &[]);
    let ops = ok(&list("team=ops"));
    assert_eq!(ops.lines().count(), 2, "the header and a: {ops}");
    assert!(ops.contains(" a ") && !ops.contains(" b "), "{ops}");
    assert_eq!(ok(&list("team=billing")).lines().count(), 1, "none now");
    for bad in ["team", "Team=ops", "=ops"] {
        let refused = list(bad);
        assert_eq!(refused.status.code(), Some(2), "{bad}: {refused:?}");
        let stderr = String::from_utf8_lossy(&refused.stderr);
        assert!(stderr.contains("--label"), "{bad}: {stderr}");
    }

    // Bad labels in a file: a usage error naming the task and the label, nothing changed.
    write(&exported.replace("team: billing", "Team: billing"));
    let bad = ax(&["apply", "-f", &path, "--url", &url], &[]);
    assert_eq!(bad.status.code(), Some(2), "{bad:?}");
    assert!(
        String::from_utf8_lossy(&bad.stderr).contains("items[0].labels.Team"),
        "{bad:?}"
    );
    assert_eq!(ok(&list("team=ops")).lines().count(), 2, "unchanged");
    ax_process.terminate().await;
}

on_each_backend!(
    labels_as_code,
    sqlite: labels_as_code_sqlite,
    mariadb: labels_as_code_mysql,
    postgres: labels_as_code_postgres
);
