//! The `ax` client commands as a real process against a running `ax serve` (SQLite, with an
//! admin token): every command's success path, one exit-code rule for all of them (0 ok, 1 the
//! server said no or could not be reached, 2 bad usage or input), paging, `scene/name`,
//! `tasks edit` with a scripted editor, `tasks delete` without a terminal, `--watch`,
//! completions and `--version`.

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::common::{AxProcess, Executor, Reply, TestStore};

const TOKEN: &str = "cli-commands-t0ken-01";

/// `ax ARGS…` in `dir`, with none of the developer's `AX_…` variables, stdin not a terminal.
fn ax(dir: &Path, args: &[&str]) -> Command {
    let mut command = crate::common::ax_command();
    command
        .current_dir(dir)
        .args(args)
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null());
    command
}

fn output(command: &mut Command) -> Output {
    command.output().expect("run ax")
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Its stdout, after checking it exited 0.
fn ok(output: &Output, what: &str) -> String {
    assert_eq!(
        output.status.code(),
        Some(0),
        "{what}: stdout {:?} stderr {:?}",
        stdout(output),
        stderr(output)
    );
    stdout(output)
}

/// A running ax and the commands that reach it.
struct Server {
    dir: tempfile::TempDir,
    process: AxProcess,
    _store: TestStore,
}

impl Server {
    async fn start(name: &str) -> Server {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = TestStore::sqlite();
        let env = vec![
            ("AX_STORE_URL".to_string(), store.url()),
            ("AX_ADMIN_TOKEN".to_string(), TOKEN.to_string()),
        ];
        let process = AxProcess::start(dir.path(), name, env).await;
        Server {
            dir,
            process,
            _store: store,
        }
    }

    fn url(&self) -> String {
        self.process.base()
    }

    /// `ax ARGS… --url URL --token TOKEN`.
    fn ax(&self, args: &[&str]) -> Command {
        let mut command = ax(self.dir.path(), args);
        command.args(["--url", &self.url(), "--token", TOKEN]);
        command
    }

    fn run(&self, args: &[&str]) -> Output {
        output(&mut self.ax(args))
    }

    /// The output of a command that must succeed.
    fn ok(&self, args: &[&str]) -> String {
        ok(&self.run(args), &args.join(" "))
    }

    /// Writes a file in the server's folder; its path.
    fn file(&self, name: &str, text: &str) -> String {
        let path = self.dir.path().join(name);
        std::fs::write(&path, text).expect("write");
        path.display().to_string()
    }

    async fn bulk(&self, items: Vec<Value>) {
        let client = awc::Client::builder()
            .timeout(Duration::from_secs(60))
            .finish();
        let mut reply = client
            .post(format!("{}/api/tasks/bulk", self.url()))
            .bearer_auth(TOKEN)
            .send_json(&json!({ "items": items }))
            .await
            .expect("bulk");
        let body: Value = reply.json().limit(1 << 20).await.expect("bulk reply");
        assert_eq!(reply.status().as_u16(), 200, "{body}");
    }
}

/// The one line a change prints.
fn one_line(text: &str, starts: &str) {
    assert_eq!(text.lines().count(), 1, "{text}");
    assert!(text.starts_with(starts), "{text}");
}

/// The value after `key` in `key  value` lines.
fn field(text: &str, key: &str) -> String {
    text.lines()
        .find_map(|line| {
            let (name, value) = line.split_once("  ")?;
            (name == key).then(|| value.trim().to_string())
        })
        .unwrap_or_else(|| panic!("no {key} in {text}"))
}

#[actix_rt::test(system = "crate::common::TestSystem")]
async fn every_command_against_a_running_ax() {
    let server = Server::start("commands").await;
    let executor = Executor::start(Reply::Success).await;
    let handler = executor.url.clone();

    // create: from flags, and from a file of one task.
    let created = server.ok(&[
        "tasks",
        "create",
        "--name",
        "alpha",
        "--scene",
        "s1",
        "--cron",
        "0 0 3 * * *",
        "--handler",
        &handler,
        "--params",
        r#"{"k": 1}"#,
    ]);
    one_line(&created, "created task s1/alpha (id ");
    let file = server.file(
        "beta.yaml",
        &format!("name: beta\nscene: s1\ncron: '0 0 4 * * *'\nhandlerUrl: '{handler}'\n"),
    );
    one_line(
        &server.ok(&["tasks", "create", "-f", &file]),
        "created task s1/beta",
    );

    // list: table, wide, json (and --json), yaml; the global flags before the subcommand.
    let list = server.ok(&["tasks", "list", "--scene", "s1"]);
    assert_eq!(list.lines().count(), 3, "{list}");
    assert!(list.starts_with("ID") && list.contains("alpha") && list.contains("beta"));
    let wide = server.ok(&["tasks", "list", "-o", "wide"]);
    assert!(
        wide.contains("HANDLER") && wide.contains(&handler),
        "{wide}"
    );
    let json: Value = serde_json::from_str(&server.ok(&["tasks", "list", "-o", "json"]))
        .expect("-o json is JSON");
    assert_eq!(json["items"].as_array().map(Vec::len), Some(2), "{json}");
    assert_eq!(json["total"], 2);
    let alias: Value =
        serde_json::from_str(&server.ok(&["tasks", "list", "--json"])).expect("--json");
    assert_eq!(alias, json);
    let yaml = server.ok(&["tasks", "list", "-o", "yaml"]);
    assert!(
        yaml.contains("items:") && yaml.contains("name: alpha"),
        "{yaml}"
    );
    let url = server.url();
    let before = ok(
        &output(ax(server.dir.path(), &[]).args([
            "--url", &url, "--token", TOKEN, "-o", "json", "tasks", "get", "s1/alpha",
        ])),
        "global flags first",
    );
    let alpha: Value = serde_json::from_str(&before).expect("JSON");
    assert_eq!(alpha["params"], json!({"k": 1}), "{alpha}");
    let id = alpha["id"].to_string();

    // get by id and by scene/name.
    let got = server.ok(&["tasks", "get", &id]);
    assert_eq!(field(&got, "name"), "alpha");
    assert_eq!(server.ok(&["tasks", "get", "s1/alpha"]), got);

    // pause, resume, trigger: one line each.
    one_line(
        &server.ok(&["tasks", "pause", "s1/alpha"]),
        &format!("paused task s1/alpha (id {id})"),
    );
    one_line(
        &server.ok(&["tasks", "resume", &id]),
        "resumed task s1/alpha",
    );
    let triggered = server.ok(&["tasks", "trigger", "s1/alpha", "--params", r#"{"x": 2}"#]);
    one_line(&triggered, "triggered task s1/alpha");
    let request_id = triggered
        .trim()
        .rsplit(' ')
        .next()
        .expect("the run's request id")
        .to_string();

    // runs get --watch: until the run ends.
    executor.wait_for(1, Duration::from_secs(30)).await;
    let started = Instant::now();
    let watched = server.ok(&["runs", "get", &request_id, "--watch"]);
    let took = started.elapsed();
    assert!(took < Duration::from_secs(60), "{took:?}: {watched}");
    assert!(watched.contains("SUCCESS"), "{watched}");
    let run = server.ok(&["runs", "get", &request_id]);
    assert_eq!(field(&run, "status"), "SUCCESS");
    assert_eq!(field(&run, "params"), r#"{"x":2}"#);

    // runs list: by task (id, scene/name, name), scene, several statuses, time.
    for task in [id.as_str(), "s1/alpha", "alpha"] {
        let runs = server.ok(&[
            "runs",
            "list",
            "--task",
            task,
            "--status",
            "SUCCESS,FAILED",
            "--status",
            "MISSED",
            "--from",
            "2000-01-01T00:00:00Z",
            "--to",
            "9999-01-01T00:00:00Z",
        ]);
        assert!(runs.contains(&request_id), "--task {task}: {runs}");
    }
    let none = server.ok(&["runs", "list", "--scene", "s1", "--status", "FAILED"]);
    assert_eq!(none.lines().count(), 1, "{none}");
    let runs: Value =
        serde_json::from_str(&server.ok(&["runs", "list", "--scene", "s1", "-o", "json"]))
            .expect("JSON");
    assert_eq!(runs["items"][0]["requestId"], request_id.as_str(), "{runs}");
    let wide = server.ok(&["runs", "list", "-o", "wide"]);
    assert!(
        wide.contains("TRIGGER") && wide.contains("MANUAL"),
        "{wide}"
    );

    // scenes.
    let scenes = server.ok(&["scenes", "list"]);
    assert!(scenes.lines().any(|l| l.starts_with("s1 ")), "{scenes}");
    one_line(
        &server.ok(&["scenes", "pause", "s1"]),
        "paused scene s1: 2 tasks",
    );
    let paused: Value =
        serde_json::from_str(&server.ok(&["scenes", "list", "-o", "json"])).expect("JSON");
    assert_eq!(paused["items"][0]["paused"], true, "{paused}");
    one_line(&server.ok(&["scenes", "resume", "s1"]), "resumed scene s1");

    // audit, cluster.
    let audit = server.ok(&["audit", "list", "--limit", "3"]);
    assert_eq!(audit.lines().count(), 4, "{audit}");
    assert!(
        audit.starts_with("AT") && audit.contains("scene.resume"),
        "{audit}"
    );
    let cluster = server.ok(&["cluster"]);
    assert!(cluster.starts_with("INSTANCE"), "{cluster}");
    assert!(
        cluster.contains("commands") && cluster.contains("(answered)"),
        "{cluster}"
    );

    // edit: a scripted editor changes the cron; an editor that changes nothing.
    let editor = server.file(
        "editor.sh",
        "#!/bin/sh\nsed -i \"s/0 0 3 \\* \\* \\*/0 30 3 * * */\" \"$1\"\n",
    );
    let saved = ok(
        &output(
            server
                .ax(&["tasks", "edit", "s1/alpha"])
                .env("EDITOR", format!("sh {editor}")),
        ),
        "edit",
    );
    one_line(&saved, "saved task s1/alpha");
    assert_eq!(
        field(&server.ok(&["tasks", "get", &id]), "cron"),
        "0 30 3 * * *"
    );
    let unchanged = ok(
        &output(server.ax(&["tasks", "edit", &id]).env("EDITOR", "true")),
        "edit without a change",
    );
    assert_eq!(unchanged, "no change\n");
    // A change made while the editor is open is not overwritten: exit 1, nothing saved.
    let racing = server.file(
        "racing.sh",
        &format!(
            "#!/bin/sh\n{} tasks pause {id} --url {url} --token {TOKEN} >/dev/null\n\
             sed -i 's/0 30 3/0 45 3/' \"$1\"\n",
            env!("CARGO_BIN_EXE_ax")
        ),
    );
    let refused = output(
        server
            .ax(&["tasks", "edit", &id])
            .env("EDITOR", format!("sh {racing}")),
    );
    assert_eq!(refused.status.code(), Some(1), "{}", stderr(&refused));
    assert!(
        stderr(&refused).contains("changed by someone else"),
        "{}",
        stderr(&refused)
    );
    let now = server.ok(&["tasks", "get", &id]);
    assert_eq!(field(&now, "cron"), "0 30 3 * * *");
    assert_eq!(field(&now, "status"), "PAUSED");

    // delete: refused without a terminal unless --yes.
    let asked = server.run(&["tasks", "delete", "s1/beta"]);
    assert_eq!(asked.status.code(), Some(2), "{}", stderr(&asked));
    assert!(stderr(&asked).contains("--yes"), "{}", stderr(&asked));
    assert!(server.ok(&["tasks", "list"]).contains("beta"));
    one_line(
        &server.ok(&["tasks", "delete", "s1/beta", "--yes"]),
        "deleted task s1/beta",
    );
    assert!(!server.ok(&["tasks", "list"]).contains("beta"));

    // Other reads.
    assert!(server.ok(&["executors", "list"]).starts_with("GROUP"));
    assert!(server.ok(&["alerts", "list"]).starts_with("CREATED"));
    assert!(server.ok(&["plan", "--hours", "1"]).contains("runs of"));
    executor.stop().await;
}

/// The line of a listing that holds `text`.
fn line_with<'a>(listing: &'a str, text: &str) -> &'a str {
    listing
        .lines()
        .find(|line| line.contains(text))
        .unwrap_or_else(|| panic!("no line with {text} in {listing}"))
}

/// What the first hour's commands say: `tasks create --executor GROUP[:PATH]`; `tasks list`
/// shows a task its paused scene stops as `PAUSED (scene)`, not `ENABLED`; `runs list` names
/// a run's task by `scene/name`.
#[actix_rt::test(system = "crate::common::TestSystem")]
async fn tasks_and_runs_say_what_is_so() {
    let server = Server::start("first-hour").await;
    let executor = Executor::start(Reply::Success).await;

    // --executor GROUP:PATH and GROUP: the task's executor field, no handler URL.
    let create = |name: &str, executor: &str| {
        server.ok(&[
            "tasks",
            "create",
            "--name",
            name,
            "--scene",
            "billing",
            "--cron",
            "0 0 3 * * *",
            "--executor",
            executor,
        ])
    };
    one_line(
        &create("charge", "payments:/jobs/charge"),
        "created task billing/charge (id ",
    );
    one_line(&create("settle", "payments"), "created task billing/settle");
    for (name, executor) in [
        (
            "charge",
            json!({"group": "payments", "path": "/jobs/charge"}),
        ),
        ("settle", json!({"group": "payments", "path": ""})),
    ] {
        let task = server.ok(&["tasks", "get", &format!("billing/{name}"), "-o", "json"]);
        let task: Value = serde_json::from_str(&task).expect("JSON");
        assert_eq!(task["executor"], executor, "{task}");
        assert_eq!(task["handlerUrl"], Value::Null, "{task}");
    }
    let flags = ["tasks", "create", "--name", "x", "--cron", "0 0 3 * * *"];
    for (more, says) in [
        (&["--executor", "Payments:/x"][..], "--executor"),
        (&["--executor", "http://127.0.0.1:9/run"], "--handler"),
        (
            &["--executor", "payments", "--handler", "http://127.0.0.1:9/"],
            "--handler",
        ),
        (&[], "--handler"),
    ] {
        let refused = server.run(&[&flags[..], more].concat());
        let text = stderr(&refused);
        assert_eq!(refused.status.code(), Some(2), "{more:?}: {text}");
        assert!(text.contains(says), "{more:?} should name {says}: {text}");
    }

    // A task stopped by its scene's pause says so, and which pause stops it.
    let report = server.ok(&[
        "tasks",
        "create",
        "--name",
        "report",
        "--scene",
        "ops",
        "--cron",
        "0 0 3 * * *",
        "--handler",
        &executor.url,
    ]);
    one_line(&report, "created task ops/report");
    let status = || line_with(&server.ok(&["tasks", "list"]), " report ").to_string();
    assert!(status().contains("  ENABLED  "), "{}", status());
    server.ok(&["scenes", "pause", "ops"]);
    assert!(status().contains("  PAUSED (scene)  "), "{}", status());
    server.ok(&["tasks", "pause", "ops/report"]);
    assert!(
        status().contains("  PAUSED (task, scene)  "),
        "{}",
        status()
    );
    server.ok(&["scenes", "resume", "ops"]);
    assert!(status().contains("  PAUSED  "), "{}", status());
    // Data stays the API's: the task's own status, and its scene's pause beside it.
    server.ok(&["scenes", "pause", "ops"]);
    let listed: Value =
        serde_json::from_str(&server.ok(&["tasks", "list", "--scene", "ops", "-o", "json"]))
            .expect("JSON");
    assert_eq!(listed["items"][0]["status"], "PAUSED", "{listed}");
    assert_eq!(listed["items"][0]["scenePaused"], true, "{listed}");
    server.ok(&["scenes", "resume", "ops"]);
    server.ok(&["tasks", "resume", "ops/report"]);

    // runs list: the task's scene/name.
    let triggered = server.ok(&["tasks", "trigger", "ops/report"]);
    let request_id = triggered.trim().rsplit(' ').next().expect("request id");
    executor.wait_for(1, Duration::from_secs(30)).await;
    let runs = server.ok(&["runs", "list"]);
    let line = line_with(&runs, request_id);
    assert!(line.contains("  ops/report  "), "{runs}");
    let header: Vec<&str> = runs.lines().next().unwrap_or("").split("  ").collect();
    assert!(header.contains(&"TASK"), "{runs}");
    let runs: Value =
        serde_json::from_str(&server.ok(&["runs", "list", "-o", "json"])).expect("JSON");
    assert!(runs["items"][0]["taskId"].is_i64(), "the API's own: {runs}");
    executor.stop().await;
}

/// Exit codes, one rule for every command: 2 for bad usage or input (the message names the
/// flag or argument), 1 when the server said no or could not be reached, 0 otherwise.
#[actix_rt::test(system = "crate::common::TestSystem")]
async fn exit_codes_follow_one_rule() {
    let server = Server::start("codes").await;
    let created = server.ok(&[
        "tasks",
        "create",
        "--name",
        "one",
        "--scene",
        "codes",
        "--cron",
        "0 0 3 * * *",
        "--handler",
        "http://127.0.0.1:9/run",
    ]);
    assert!(created.starts_with("created"), "{created}");
    let uuid = "0b6f1c52-8a47-4cf5-9d3e-2f7c1a9e4b10";
    let missing = server.file(
        "two.yaml",
        "- {name: a, cron: '* * * * * *'}\n- {name: b}\n",
    );
    let usage: &[(&[&str], &str)] = &[
        (&["runs", "list", "--limit", "501"], "--limit"),
        (&["runs", "get", "not-a-uuid"], "REQUEST_ID"),
        (&["runs", "cancel", "not-a-uuid"], "REQUEST_ID"),
        (&["runs", "logs", "not-a-uuid"], "REQUEST_ID"),
        (
            &["tasks", "list", "--status", "paused"],
            "ENABLED or PAUSED",
        ),
        (&["tasks", "list", "--label", "team"], "--label"),
        (&["tasks", "list", "--limit", "0"], "--limit"),
        (&["tasks", "list", "-o", "xml"], "--output"),
        (&["tasks", "list", "--json", "-o", "yaml"], "--json"),
        (
            &["runs", "list", "--from", "yesterday"],
            "'--from <FROM>': expected an RFC 3339 time",
        ),
        (&["runs", "list", "--to", "2027-01-01"], "--to"),
        (&["runs", "list", "--status", "DONE"], "--status"),
        (&["runs", "list", "--task", "0"], "--task"),
        (&["tasks", "get", "nightly"], "SCENE/NAME"),
        (&["tasks", "pause", "x/"], "SCENE/NAME"),
        (
            &["tasks", "trigger", "codes/one", "--params", "[1]"],
            "--params",
        ),
        (
            &["tasks", "backfill", "1", "--from", "x", "--to", "y"],
            "--from",
        ),
        (
            &[
                "tasks",
                "create",
                "--name",
                "x",
                "--cron",
                "bad",
                "--handler",
                "http://127.0.0.1:9/",
            ],
            "cron",
        ),
        (&["tasks", "create", "--name", "x"], "--cron"),
        (
            &["tasks", "create", "-f", "no-such-file.yaml"],
            "no-such-file.yaml",
        ),
        (&["tasks", "create", "-f", &missing], "one task"),
        (&["tasks", "delete", "codes/one"], "--yes"),
        (&["scenes", "pause", "a b"], "scene"),
        (&["audit", "list", "--limit", "0"], "--limit"),
        (&["executors", "get", "Bad Name"], "GROUP"),
        (&["alerts", "list", "--limit", "501"], "--limit"),
        (&["plan", "--hours", "0"], "--hours"),
        (&["tasks", "frobnicate"], "frobnicate"),
    ];
    for (args, says) in usage {
        let output = server.run(args);
        let text = stderr(&output);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {text}");
        assert!(text.contains(says), "{args:?} should name {says}: {text}");
        assert!(!text.contains("panicked"), "{args:?}: {text}");
        assert_eq!(stdout(&output), "", "{args:?}");
    }
    let bad_url = output(&mut ax(
        server.dir.path(),
        &["tasks", "list", "--url", "nowhere"],
    ));
    assert_eq!(bad_url.status.code(), Some(2), "{}", stderr(&bad_url));
    assert!(stderr(&bad_url).contains("--url"), "{}", stderr(&bad_url));

    let refused: &[(&[&str], &str)] = &[
        (&["tasks", "get", "999999"], "NOT_FOUND"),
        (&["tasks", "get", "codes/nobody"], "no task codes/nobody"),
        (&["tasks", "pause", "999999"], "NOT_FOUND"),
        (&["tasks", "edit", "999999"], "NOT_FOUND"),
        (&["tasks", "delete", "999999", "--yes"], "NOT_FOUND"),
        (&["runs", "get", uuid], "NOT_FOUND"),
        (&["runs", "cancel", uuid], "NOT_FOUND"),
        (&["runs", "list", "--task", "nobody"], "no task nobody"),
        (&["executors", "get", "nobody"], "NOT_FOUND"),
    ];
    for (args, says) in refused {
        let output = server.run(args);
        let text = stderr(&output);
        assert_eq!(output.status.code(), Some(1), "{args:?}: {text}");
        assert!(text.contains(says), "{args:?} should say {says}: {text}");
    }

    // A missing or wrong token: 1, and how to pass it.
    let url = server.url();
    for token in [None, Some("wrong-token-0123456789")] {
        let mut command = ax(server.dir.path(), &["tasks", "list", "--url", &url]);
        if let Some(token) = token {
            command.args(["--token", token]);
        }
        let output = output(&mut command);
        assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
        assert!(
            stderr(&output).contains("pass the admin token with --token or AX_ADMIN_TOKEN"),
            "{}",
            stderr(&output)
        );
    }

    // Nobody listening: 1, in plain words.
    let closed = format!("http://127.0.0.1:{}", crate::common::free_port());
    let commands: &[&[&str]] = &[
        &["tasks", "list"],
        &["tasks", "get", "1"],
        &["runs", "list"],
        &["scenes", "list"],
        &["audit", "list"],
        &["cluster"],
        &["executors", "list"],
    ];
    for args in commands {
        let output = output(ax(server.dir.path(), args).args(["--url", &closed]));
        assert_eq!(
            output.status.code(),
            Some(1),
            "{args:?}: {}",
            stderr(&output)
        );
        assert_eq!(
            stderr(&output).trim(),
            format!("ax: cannot reach ax at {closed}: connection refused"),
            "{args:?}"
        );
    }

    // And 0 for every read that works.
    let reads: &[&[&str]] = &[
        &["tasks", "list"],
        &["tasks", "get", "codes/one"],
        &["runs", "list"],
        &["scenes", "list"],
        &["audit", "list"],
        &["cluster"],
        &["executors", "list"],
        &["alerts", "list"],
        &["plan"],
    ];
    for args in reads {
        for format in ["table", "wide", "json", "yaml"] {
            let mut all = args.to_vec();
            all.extend(["-o", format]);
            server.ok(&all);
        }
    }
}

/// `ax tasks list` reads every page: 605 tasks are 605 rows; `--limit` cuts the table and
/// says on stderr how many were left out.
#[actix_rt::test(system = "crate::common::TestSystem")]
async fn tasks_list_pages_through_everything() {
    let server = Server::start("paging").await;
    let items: Vec<Value> = (0..605)
        .map(|n| {
            json!({"name": format!("t{n:03}"), "scene": "many", "cron": "0 0 3 * * *",
                   "handlerUrl": "http://127.0.0.1:9/run"})
        })
        .collect();
    server.bulk(items).await;
    let all = server.run(&["tasks", "list", "--scene", "many"]);
    assert_eq!(ok(&all, "list").lines().count(), 606);
    assert_eq!(stderr(&all), "");
    let json: Value =
        serde_json::from_str(&server.ok(&["tasks", "list", "-o", "json"])).expect("JSON");
    assert_eq!(json["items"].as_array().map(Vec::len), Some(605));
    let cut = server.run(&["tasks", "list", "--limit", "10"]);
    let rows = ok(&cut, "--limit 10");
    assert_eq!(rows.lines().count(), 11, "{rows}");
    assert!(
        rows.lines().nth(10).is_some_and(|l| l.contains("t009")),
        "{rows}"
    );
    assert_eq!(stderr(&cut), "… 595 more\n");
    let cut = server.run(&["tasks", "list", "--limit", "600"]);
    assert_eq!(ok(&cut, "--limit 600").lines().count(), 601);
    assert_eq!(stderr(&cut), "… 5 more\n");

    // --watch prints the list again until interrupted.
    let mut watch = server
        .ax(&[
            "tasks", "list", "--scene", "many", "--limit", "1", "--watch",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("ax tasks list --watch");
    std::thread::sleep(Duration::from_millis(3_000));
    let _ = watch.kill();
    let watched = watch.wait_with_output().expect("output");
    let headers = stdout(&watched)
        .lines()
        .filter(|l| l.starts_with("ID"))
        .count();
    assert!(headers >= 2, "{}", stdout(&watched));
}

/// `ax runs logs` prints what an executor sent as text, never as terminal control: the
/// control characters of a line are dropped when ax keeps it (its escape sequences, NUL and
/// `\r` never reach the terminal), what is left that could move the terminal (a bidi
/// override) is printed escaped, and a tab stays a tab.
#[actix_rt::test(system = "crate::common::TestSystem")]
async fn runs_logs_prints_executor_text_as_data() {
    let server = Server::start("log-text").await;
    let executor = Executor::start(Reply::Accepted).await;
    server
        .bulk(vec![json!({"name": "painted", "cron": "* * * * * *",
            "handlerUrl": executor.url, "maxRetry": 0})])
        .await;
    let delivery = executor.wait_for(1, Duration::from_secs(10)).await[0].clone();
    let lines = ["\u{1b}[31mRED\u{1b}[0m", "a\u{0}b\rc\td", "\u{202e}gnp.exe"];
    let body = json!({"callbackToken": delivery.body["callbackToken"], "lines": lines});
    let (status, reply) = crate::common::Api::at(server.url())
        .post(&format!("/api/instances/{}/log", delivery.request_id), body)
        .await;
    assert_eq!(status, 200, "{reply}");

    let printed = server.ok(&["runs", "logs", &delivery.request_id]);
    let texts: Vec<&str> = printed
        .lines()
        .filter(|line| !line.starts_with("---"))
        .filter_map(|line| line.split_once("  ").map(|(_, text)| text))
        .collect();
    assert_eq!(
        texts,
        ["[31mRED[0m", "abc\td", "\\u{202e}gnp.exe"],
        "{printed:?}"
    );
    assert!(
        !printed.contains(['\u{1b}', '\u{0}', '\r', '\u{202e}']),
        "{printed:?}"
    );
    executor.stop().await;
}

/// `ax completion SHELL` prints a script; `ax --version` says the commit.
#[test]
fn completions_and_version() {
    let dir = tempfile::tempdir().expect("temp dir");
    for shell in ["bash", "zsh", "fish"] {
        let script = ok(&output(&mut ax(dir.path(), &["completion", shell])), shell);
        assert!(
            script.contains("tasks") && script.len() > 1000,
            "{shell}: {script}"
        );
    }
    let bad = output(&mut ax(dir.path(), &["completion", "tcsh"]));
    assert_eq!(bad.status.code(), Some(2));
    let version = ok(&output(&mut ax(dir.path(), &["--version"])), "--version");
    assert!(
        version.starts_with(&format!("ax {} (commit ", env!("CARGO_PKG_VERSION"))),
        "{version}"
    );
}
