//! Executors' log lines, progress and output, against a real ax and executor on both stores:
//! lines and progress of an open run, proven by the run's callback token (or an admin's
//! token), bounded per attempt with a marker, the output of a reply and of a callback, and
//! refused after the run ended and its grace passed; lines kept without control characters,
//! and counted once split on newlines before any is made.

use std::time::Duration;

use serde_json::{json, Value};

use crate::common::{
    config, on_each_backend, start_ax, unique_name, Api, AxProcess, Executor, Reply, TestStore,
};

fn every_second(handler: &str) -> Value {
    json!({"name": unique_name("log"), "cron": "* * * * * *", "handlerUrl": handler, "maxRetry": 0})
}

fn texts(attempt: &Value) -> Vec<String> {
    attempt["lines"]
        .as_array()
        .unwrap_or_else(|| panic!("no lines in {attempt}"))
        .iter()
        .map(|line| line["text"].as_str().unwrap_or_default().to_string())
        .collect()
}

/// An open run takes lines and progress, each call kept in order with its time; only the
/// run's callback token proves a call; bad input is a 400 naming its field and keeps nothing;
/// beyond the bound the last lines stay, after a marker; a callback's output is kept, and
/// after the grace the log is closed.
async fn an_open_run_keeps_what_its_executor_says(store: TestStore) {
    let mut cfg = config(&store, store.is_shared(), &unique_name("logs"));
    cfg.run_logs.max_lines = 5;
    cfg.run_logs.grace_secs = 1;
    let ax = start_ax(&cfg).await;
    let api = Api::new(&ax);
    let executor = Executor::start(Reply::Accepted).await;
    let task = api.create_task(every_second(&executor.url)).await;
    let delivery = executor.wait_for(1, Duration::from_secs(5)).await[0].clone();
    api.post(&format!("/api/tasks/{}/pause", task["id"]), json!({}))
        .await;
    let path = format!("/api/instances/{}/log", delivery.request_id);
    let token = delivery.body["callbackToken"].clone();

    let (status, reply) = api
        .post(
            &path,
            json!({"callbackToken": token, "lines": ["starting", "rows: 10\nrows: 20"], "progress": 40}),
        )
        .await;
    assert_eq!(status, 200, "{reply}");
    assert_eq!(reply["attempt"], 1);
    assert_eq!(reply["lines"], 3, "a line per newline: {reply}");

    for (body, field) in [
        (json!({"callbackToken": token, "progress": 101}), "progress"),
        (json!({"callbackToken": token, "lines": "one"}), "lines"),
        (
            json!({"callbackToken": token, "lines": ["x"], "attempt": 2}),
            "attempt",
        ),
        (json!({"callbackToken": token}), "lines"),
        (
            json!({"callbackToken": token, "lines": ["x"], "extra": 1}),
            "extra",
        ),
    ] {
        let (status, reply) = api.post(&path, body.clone()).await;
        assert!(status == 400 || status == 409, "{body}: {status} {reply}");
        assert_eq!(reply["error"]["field"], field, "{body}: {reply}");
    }
    let (status, _) = api
        .post(&path, json!({"callbackToken": "forged", "lines": ["x"]}))
        .await;
    assert_eq!(status, 403);
    let (status, _) = api
        .post(
            "/api/instances/00000000-0000-4000-8000-000000000000/log",
            json!({"lines": ["x"]}),
        )
        .await;
    assert_eq!(status, 404);

    let (status, log) = api.get(&path).await;
    assert_eq!(status, 200, "{log}");
    let attempt = &log["attempts"][0];
    assert_eq!(attempt["attempt"], 1);
    assert_eq!(attempt["progress"], 40);
    assert_eq!(texts(attempt), ["starting", "rows: 10", "rows: 20"]);
    let at = attempt["lines"][0]["at"].as_str().unwrap_or_default();
    assert!(
        at.ends_with('Z') && at.len() == 24,
        "RFC 3339 UTC with ms: {at}"
    );

    // Without a callback token, ax without tokens takes the call (as its admin API).
    let more: Vec<String> = (1..=4).map(|n| format!("step {n}")).collect();
    let (status, reply) = api
        .post(&path, json!({"lines": more, "progress": 90}))
        .await;
    assert_eq!(status, 200, "{reply}");
    assert_eq!(reply["lines"], 5);
    assert_eq!(reply["droppedLines"], 2);
    let (_, log) = api.get(&path).await;
    let attempt = &log["attempts"][0];
    let kept = texts(attempt);
    assert!(kept[0].contains("2 earlier lines dropped"), "{kept:?}");
    assert_eq!(attempt["lines"][0]["marker"], true);
    assert_eq!(
        kept[1..],
        ["rows: 20", "step 1", "step 2", "step 3", "step 4"]
    );
    assert_eq!(attempt["progress"], 90);

    let (status, reply) = api
        .post(
            "/api/callback",
            delivery.callback("SUCCESS", json!({"output": "42 rows written"})),
        )
        .await;
    assert_eq!(status, 200, "{reply}");
    let (_, log) = api.get(&path).await;
    assert_eq!(log["attempts"][0]["output"], "42 rows written", "{log}");

    // Within the grace a late line is still taken; after it, 409.
    let (status, reply) = api
        .post(&path, json!({"callbackToken": token, "lines": ["closing"]}))
        .await;
    assert_eq!(status, 200, "{reply}");
    actix_rt::time::sleep(Duration::from_millis(1_500)).await;
    let (status, reply) = api
        .post(
            &path,
            json!({"callbackToken": token, "lines": ["too late"]}),
        )
        .await;
    assert_eq!(status, 409, "{reply}");
    assert!(
        reply["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("log lines are taken until 1 s after its end")),
        "{reply}"
    );
    let (_, log) = api.get(&path).await;
    assert_eq!(
        texts(&log["attempts"][0]).last().map(String::as_str),
        Some("closing")
    );

    ax.shutdown().await;
    executor.stop().await;
}

on_each_backend!(
    an_open_run_keeps_what_its_executor_says,
    sqlite: an_open_run_keeps_what_its_executor_says_on_sqlite,
    mariadb: an_open_run_keeps_what_its_executor_says_on_mariadb,
    postgres: an_open_run_keeps_what_its_executor_says_on_postgres
);

/// The output in a handler's reply is kept with its attempt.
#[actix_rt::test(system = "crate::common::TestSystem")]
async fn a_replys_output_is_kept_with_its_attempt() {
    let store = TestStore::sqlite();
    let ax = start_ax(&config(&store, false, "reply-output")).await;
    let api = Api::new(&ax);
    let body = r#"{"status":"SUCCESS","output":"report.csv: 3 MB"}"#;
    let executor = Executor::start(Reply::Body(body.into())).await;
    let task = api.create_task(every_second(&executor.url)).await;
    let id = task["id"].as_i64().expect("id");
    let run = api.wait_final(id, 1, Duration::from_secs(5)).await[0].clone();
    let path = format!(
        "/api/instances/{}/log",
        run["requestId"].as_str().unwrap_or_default()
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        let (status, log) = api.get(&path).await;
        assert_eq!(status, 200, "{log}");
        if log["attempts"][0]["output"] == "report.csv: 3 MB" {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "no output in {log}");
        actix_rt::time::sleep(Duration::from_millis(100)).await;
    }
    ax.shutdown().await;
    executor.stop().await;
}

/// With tokens, a call without the run's callback token needs an admin's (or an executor's)
/// token.
#[actix_rt::test(system = "crate::common::TestSystem")]
async fn without_its_callback_token_a_call_needs_a_token_that_may_report() {
    let store = TestStore::sqlite();
    let mut cfg = config(&store, false, "log-tokens");
    cfg.server.admin_token = Some("admin-token-long-enough".into());
    let ax = start_ax(&cfg).await;
    let base = format!("http://{}", ax.addr());
    let executor = Executor::start(Reply::Accepted).await;
    let client = awc::Client::default();
    let mut created = client
        .post(format!("{base}/api/tasks"))
        .bearer_auth("admin-token-long-enough")
        .send_json(&every_second(&executor.url))
        .await
        .expect("create");
    assert_eq!(created.status(), 201);
    let delivery = executor.wait_for(1, Duration::from_secs(5)).await[0].clone();
    let url = format!("{base}/api/instances/{}/log", delivery.request_id);
    let lines = json!({"lines": ["hello"]});
    let status = |token: Option<&str>| {
        let request = client.post(&url);
        let request = match token {
            Some(token) => request.bearer_auth(token),
            None => request,
        };
        let lines = lines.clone();
        async move {
            request
                .send_json(&lines)
                .await
                .expect("post")
                .status()
                .as_u16()
        }
    };
    assert_eq!(status(None).await, 401);
    assert_eq!(status(Some("not-the-token-at-all")).await, 401);
    assert_eq!(status(Some("admin-token-long-enough")).await, 200);
    let _ = created.body().await;
    ax.shutdown().await;
    executor.stop().await;
}

/// A line keeps no control character but tabs: an escape sequence, a NUL or a carriage return
/// from an executor is taken (200) and stored as text without it.
#[actix_rt::test(system = "crate::common::TestSystem")]
async fn lines_are_kept_without_control_characters() {
    let store = TestStore::sqlite();
    let ax = start_ax(&config(&store, false, "log-controls")).await;
    let api = Api::new(&ax);
    let executor = Executor::start(Reply::Accepted).await;
    let task = api.create_task(every_second(&executor.url)).await;
    let delivery = executor.wait_for(1, Duration::from_secs(5)).await[0].clone();
    api.post(&format!("/api/tasks/{}/pause", task["id"]), json!({}))
        .await;
    let path = format!("/api/instances/{}/log", delivery.request_id);
    let sent =
        json!({"lines": ["\u{1b}[31mRED\u{1b}[0m", "a\u{0}b\rc\td", "x\u{7f}\u{9b}2J\r\nnext"]});
    let (status, reply) = api.post(&path, sent).await;
    assert_eq!(status, 200, "{reply}");
    assert_eq!(reply["lines"], 4, "{reply}");
    let (_, log) = api.get(&path).await;
    assert_eq!(
        texts(&log["attempts"][0]),
        ["[31mRED[0m", "abc\td", "x2J", "next"]
    );
    ax.shutdown().await;
    executor.stop().await;
}

/// `lines` is bounded once split on newlines: 1,000 lines in all are taken, one more is a 400
/// naming `lines`. A megabyte of newlines in one string (520,000 lines) is refused before any
/// line is made: twelve such calls at once cost ax a few megabytes, not the 178 MB they cost
/// when each newline became a line first.
#[actix_rt::test(system = "crate::common::TestSystem")]
async fn newlines_are_counted_as_lines_before_any_is_made() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = TestStore::sqlite();
    let env = vec![("AX_STORE_URL".to_string(), store.url())];
    let process = AxProcess::start(dir.path(), "log-flood", env).await;
    let api = Api::at(process.base());
    let executor = Executor::start(Reply::Accepted).await;
    let task = api.create_task(every_second(&executor.url)).await;
    let delivery = executor.wait_for(1, Duration::from_secs(5)).await[0].clone();
    api.post(&format!("/api/tasks/{}/pause", task["id"]), json!({}))
        .await;
    let path = format!("/api/instances/{}/log", delivery.request_id);

    let thousand = "\n".repeat(999);
    let (status, reply) = api.post(&path, json!({"lines": [thousand]})).await;
    assert_eq!((status, &reply["lines"]), (200, &json!(1000)), "{reply}");
    let (status, reply) = api
        .post(&path, json!({"lines": ["one more", thousand]}))
        .await;
    assert_eq!(status, 400, "{reply}");
    assert_eq!(reply["error"]["field"], "lines", "{reply}");

    let before = process.peak_memory_kib();
    let flood = json!({"lines": ["\n".repeat(520_000)]});
    let calls = (0..12).map(|_| api.post(&path, flood.clone()));
    for (status, reply) in futures_util::future::join_all(calls).await {
        assert_eq!(status, 400, "{reply}");
        assert_eq!(reply["error"]["field"], "lines", "{reply}");
    }
    let grew = process.peak_memory_kib().saturating_sub(before);
    assert!(
        grew < 48 * 1024,
        "twelve floods of newlines took {grew} KiB more"
    );
    let (_, log) = api.get(&path).await;
    assert_eq!(
        log["attempts"][0]["lines"].as_array().map(Vec::len),
        Some(1000)
    );
    process.terminate().await;
    executor.stop().await;
}
