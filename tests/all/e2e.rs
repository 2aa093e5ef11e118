//! End to end: ax started in-process on a real store, a real HTTP executor, the public API.

use std::collections::HashSet;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::{json, Value};

use crate::common::{
    config, on_each_backend, raw_exchange, start_ax, status_and_header, unique_name, Api, Executor,
    Reply, TestStore,
};

/// A task firing every second; each call names a new one.
fn every_second(handler: &str) -> Value {
    json!({"name": unique_name("tick"), "cron": "* * * * * *", "handlerUrl": handler, "params": {"k": "v"}})
}

fn time(value: &Value) -> DateTime<Utc> {
    value
        .as_str()
        .and_then(|s| DateTime::parse_from_rfc3339(s).ok())
        .map(|t| t.with_timezone(&Utc))
        .unwrap_or_else(|| panic!("not a time: {value}"))
}

/// A task fires on schedule; every delivery is recorded, final, and carries its request id.
async fn fires_dispatches_and_records(store: TestStore) {
    // On MariaDB with Redis, as a cluster runs; on SQLite alone.
    let redis = store.is_shared();
    let ax = start_ax(&config(&store, redis, "e2e")).await;
    let api = Api::new(&ax);
    let executor = Executor::start(Reply::Success).await;
    let task = api.create_task(every_second(&executor.url)).await;
    let id = task["id"].as_i64().expect("id");
    assert_eq!(task["status"], "ENABLED");
    assert!(time(&task["nextRunAt"]) > Utc::now() - chrono::Duration::seconds(1));

    let received = executor.wait_for(3, Duration::from_secs(8)).await;
    assert!(received.len() >= 3, "only {} deliveries", received.len());
    let mut scheduled = HashSet::new();
    for delivery in &received {
        assert_eq!(delivery.body["taskId"], id);
        assert_eq!(delivery.body["params"], json!({"k": "v"}));
        assert_eq!(delivery.body["attempt"], 1);
        assert_eq!(delivery.request_id, delivery.header_request_id);
        assert!(
            delivery.signed_with(crate::common::SECRET),
            "signed: {delivery:?}"
        );
        assert!(!delivery.signed_with("another secret"));
        let at = delivery.body["scheduledAt"].as_str().expect("scheduledAt");
        // The one time format: RFC 3339 UTC with milliseconds, a whole second here.
        assert!(
            at.len() == 24 && at.ends_with(".000Z"),
            "whole UTC seconds: {at}"
        );
        assert!(
            scheduled.insert(at.to_string()),
            "one delivery per second: {at}"
        );
        assert!(
            delivery.wall >= time(&delivery.body["scheduledAt"]),
            "never delivered before its time: {at} arrived at {}",
            delivery.wall
        );
    }

    ax.shutdown().await;
    // After a clean shutdown every delivered run is recorded, final, under its request id.
    let restarted = Utc::now();
    let ax = start_ax(&config(&store, redis, "e2e")).await;
    let api = Api::new(&ax);
    let runs = api.instances(id).await;
    for delivery in executor.received() {
        let (status, run) = api
            .get(&format!("/api/instances/{}", delivery.request_id))
            .await;
        assert_eq!(status, 200, "{run}");
        assert_eq!(run["status"], "SUCCESS", "{run}");
        assert_eq!(run["taskId"], id);
        assert_eq!(
            run["scheduledAt"].as_str().map(|s| &s[..19]),
            delivery.body["scheduledAt"].as_str().map(|s| &s[..19])
        );
    }
    // Runs are committed ahead of their time (scheduler.commit_ahead_ms): of those
    // before the restart, only the first can have been committed late.
    let first_session: Vec<&Value> = runs
        .iter()
        .filter(|r| time(&r["createdAt"]) < restarted)
        .collect();
    let ahead = first_session
        .iter()
        .filter(|r| time(&r["createdAt"]) < time(&r["scheduledAt"]))
        .count();
    assert!(
        ahead + 1 >= first_session.len(),
        "committed ahead: {ahead} of {first_session:?}"
    );
    let ids: HashSet<&str> = runs
        .iter()
        .filter_map(|r| r["requestId"].as_str())
        .collect();
    assert_eq!(ids.len(), runs.len(), "request ids are unique");
    // A clean shutdown leaves no run behind: whatever fired was delivered and recorded.
    let fired_before_restart: Vec<&Value> = runs
        .iter()
        .filter(|r| time(&r["triggerAt"]) < restarted)
        .collect();
    assert!(
        fired_before_restart
            .iter()
            .all(|r| r["status"] == "SUCCESS"),
        "open runs after shutdown: {fired_before_restart:?}"
    );
    ax.shutdown().await;
    executor.stop().await;
}

on_each_backend!(
    fires_dispatches_and_records,
    sqlite: fires_on_sqlite,
    mariadb: fires_on_mariadb_with_redis,
    postgres: fires_on_postgres
);

/// A 202 leaves the run RUNNING until the executor's callback; a second result changes nothing.
async fn callback_completes_a_run(store: TestStore) {
    let ax = start_ax(&config(&store, store.is_shared(), "cb")).await;
    let api = Api::new(&ax);
    let executor = Executor::start(Reply::Accepted).await;
    let task = api.create_task(every_second(&executor.url)).await;
    let delivery = executor.wait_for(1, Duration::from_secs(5)).await[0].clone();
    let path = format!("/api/instances/{}", delivery.request_id);
    let run = api
        .wait_status(&path, "RUNNING", Duration::from_secs(5))
        .await;
    assert!(run["deadlineAt"].is_string(), "{run}");

    let (status, reply) = api
        .post(
            "/api/callback",
            // An integer code, as executors ported from XXL-Job send it; a message's control
            // characters but for newlines and tabs are dropped.
            delivery.callback(
                "SUCCESS",
                json!({"code": 0, "message": "done\r\n\tall\u{0} \u{1b}[2Jrows"}),
            ),
        )
        .await;
    assert_eq!(status, 200, "{reply}");
    assert_eq!(reply["applied"], true);
    let (_, run) = api.get(&path).await;
    assert_eq!(run["status"], "SUCCESS");
    assert_eq!(run["code"], "0", "stored as its decimal text: {run}");
    assert_eq!(run["message"], "done\n\tall [2Jrows");
    assert!(run["finishedAt"].is_string());

    let (status, reply) = api
        .post(
            "/api/callback",
            delivery.callback("FAILED", json!({"message": "late"})),
        )
        .await;
    assert_eq!(status, 200, "{reply}");
    assert_eq!(reply["applied"], false);
    assert_eq!(reply["status"], "SUCCESS");
    let (_, again) = api.get(&path).await;
    assert_eq!(again["status"], "SUCCESS");
    assert_eq!(again["message"], "done\n\tall [2Jrows");

    let unknown = uuid::Uuid::new_v4().to_string();
    let token = ax_core::security::callback_token(crate::common::SECRET.as_bytes(), &unknown);
    let (status, reply) = api
        .post(
            "/api/callback",
            json!({"requestId": unknown, "callbackToken": token, "status": "SUCCESS"}),
        )
        .await;
    assert_eq!(status, 404, "{reply}");
    // A forged token is refused before anything is looked up, and changes nothing.
    let (status, reply) = api
        .post(
            "/api/callback",
            delivery.callback("FAILED", json!({"callbackToken": "0".repeat(64)})),
        )
        .await;
    assert_eq!(
        (status, &reply["error"]["code"]),
        (403, &json!("FORBIDDEN")),
        "{reply}"
    );
    let other = uuid::Uuid::new_v4().to_string();
    let (status, _) = api
        .post(
            "/api/callback",
            json!({"requestId": delivery.request_id, "status": "FAILED",
                   "callbackToken": ax_core::security::callback_token(crate::common::SECRET.as_bytes(), &other)}),
        )
        .await;
    assert_eq!(status, 403, "a token of another run");
    let (_, still) = api.get(&path).await;
    assert_eq!(still["status"], "SUCCESS");
    assert!(
        delivery.signed_with(crate::common::SECRET),
        "the dispatch is signed"
    );
    for (body, field) in [
        (json!({"status": "SUCCESS"}), "requestId"),
        (
            json!({"requestId": "nope", "status": "SUCCESS"}),
            "requestId",
        ),
        (delivery.callback("DONE", json!({})), "status"),
        (delivery.callback("SUCCESS", json!({"x": 1})), "x"),
        (delivery.callback("SUCCESS", json!({"code": 1.5})), "code"),
        (delivery.callback("SUCCESS", json!({"code": true})), "code"),
        (delivery.callback("SUCCESS", json!({"code": [0]})), "code"),
        (
            delivery.callback("SUCCESS", json!({"code": {"a": 1}})),
            "code",
        ),
        (
            delivery.callback("SUCCESS", json!({"code": "E\u{0}"})),
            "code",
        ),
        (
            delivery.callback("SUCCESS", json!({"code": "E1\nE2"})),
            "code",
        ),
        (
            delivery.callback("SUCCESS", json!({"message": ["m"]})),
            "message",
        ),
        (
            json!({"requestId": delivery.request_id, "status": "SUCCESS"}),
            "callbackToken",
        ),
    ] {
        let (status, reply) = api.post("/api/callback", body).await;
        assert_eq!(status, 400, "{reply}");
        assert_eq!(reply["error"]["field"], field, "{reply}");
    }
    let _ = api
        .call("DELETE", &format!("/api/tasks/{}", task["id"]), None)
        .await;
    ax.shutdown().await;
    executor.stop().await;
}

on_each_backend!(
    callback_completes_a_run,
    sqlite: callback_on_sqlite,
    mariadb: callback_on_mariadb,
    postgres: callback_on_postgres
);

/// Each way an attempt fails ends the run FAILED with the reason recorded.
#[actix_rt::test(system = "crate::common::TestSystem")]
async fn failed_attempts_record_the_reason() {
    let store = TestStore::sqlite();
    let ax = start_ax(&config(&store, false, "fail")).await;
    let api = Api::new(&ax);
    let error = Executor::start(Reply::Status(500)).await;
    let refuses = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("port");
        let port = listener.local_addr().expect("addr").port();
        drop(listener);
        format!("http://127.0.0.1:{port}/run")
    };
    let slow = Executor::start(Reply::Slow(Duration::from_secs(3))).await;
    let silent = Executor::start(Reply::Accepted).await;
    let failed = Executor::start(Reply::Failed).await;
    let cases = [
        (error.url.clone(), 30_000, "HTTP_500"),
        (refuses, 30_000, "CONNECT_ERROR"),
        (slow.url.clone(), 500, "TIMEOUT"),
        (silent.url.clone(), 500, "TIMEOUT"),
        (failed.url.clone(), 30_000, "E1"),
    ];
    let mut tasks = Vec::new();
    for (url, timeout_ms, code) in cases {
        let mut body = every_second(&url);
        body["timeoutMs"] = json!(timeout_ms);
        body["maxRetry"] = json!(0);
        let task = api.create_task(body).await;
        tasks.push((task["id"].as_i64().expect("id"), code));
    }
    for (id, code) in tasks {
        let runs = api.wait_final(id, 1, Duration::from_secs(8)).await;
        let run = runs
            .iter()
            .find(|r| r["status"] != "RUNNING" && r["status"] != "READY")
            .unwrap_or_else(|| panic!("task {id}: no final run in {runs:?}"));
        assert_eq!(run["status"], "FAILED", "task {id}: {run}");
        assert_eq!(run["code"], code, "task {id}: {run}");
        assert!(run["message"].is_string(), "{run}");
    }
    ax.shutdown().await;
}

/// A failed attempt is retried with the same request id until it succeeds or the retries are
/// used up; the executor can stop retries.
async fn retries_until_success_or_given_up(store: TestStore) {
    let ax = start_ax(&config(&store, store.is_shared(), "retry")).await;
    let api = Api::new(&ax);
    let flaky = Executor::start(Reply::FailFirst(2)).await;
    let broken = Executor::start(Reply::Status(503)).await;
    let fatal = Executor::start(Reply::FailNoRetry).await;
    let mut ids = Vec::new();
    for (url, max_retry) in [(&flaky.url, 3), (&broken.url, 2), (&fatal.url, 5)] {
        let mut body = every_second(url);
        body["maxRetry"] = json!(max_retry);
        body["retryBackoffSecs"] = json!(1);
        body["retryFactor"] = json!(2);
        let task = api.create_task(body).await;
        ids.push(task["id"].as_i64().expect("id"));
    }
    // Let each task fire once, then stop its schedule so only retries follow.
    let first = flaky.wait_for(1, Duration::from_secs(5)).await[0].clone();
    broken.wait_for(1, Duration::from_secs(5)).await;
    let fatal_first = fatal.wait_for(1, Duration::from_secs(5)).await[0].clone();
    for id in &ids {
        let (status, task) = api.get(&format!("/api/tasks/{id}")).await;
        assert_eq!(status, 200);
        let mut body = task.clone();
        for key in ["id", "status", "nextRunAt", "createdAt", "updatedAt"] {
            body.as_object_mut().expect("object").remove(key);
        }
        body["enabled"] = json!(false);
        let (status, reply) = api
            .call("PUT", &format!("/api/tasks/{id}"), Some(body))
            .await;
        assert_eq!(status, 200, "{reply}");
    }

    // flaky: 500, 500, then SUCCESS — attempts 1, 2, 3 one and two seconds apart.
    let path = format!("/api/instances/{}", first.request_id);
    let run = api
        .wait_status(&path, "SUCCESS", Duration::from_secs(10))
        .await;
    assert_eq!(run["attempt"], 3, "{run}");
    assert_eq!(run["retryCount"], 2, "{run}");
    // Its timeline: the two failed attempts, each with its outcome and its ax process.
    let attempts = run["attempts"].as_array().expect("attempts");
    assert_eq!(attempts.len(), 2, "{run}");
    for (n, attempt) in attempts.iter().enumerate() {
        assert_eq!(attempt["attempt"], n as i64 + 1, "{attempt}");
        assert_eq!(attempt["process"], "retry", "{attempt}");
        assert!(
            attempt["code"].as_str().is_some_and(|c| c.contains("500")),
            "{attempt}"
        );
    }
    let mut page = awc::Client::default()
        .get(format!(
            "http://{}/console/runs/{}",
            ax.addr(),
            first.request_id
        ))
        .send()
        .await
        .expect("the run's page");
    let page = String::from_utf8_lossy(&page.body().await.expect("a body")).into_owned();
    assert_eq!(page.matches("then retried").count(), 2, "{page}");
    let deliveries: Vec<_> = flaky
        .received()
        .into_iter()
        .filter(|r| r.request_id == first.request_id)
        .collect();
    let attempts: Vec<_> = deliveries
        .iter()
        .map(|r| r.body["attempt"].clone())
        .collect();
    assert_eq!(attempts, vec![json!(1), json!(2), json!(3)]);
    assert!(deliveries
        .iter()
        .all(|r| r.body["scheduledAt"] == first.body["scheduledAt"]));
    let gap = |a: usize, b: usize| deliveries[b].at.duration_since(deliveries[a].at);
    assert!(
        gap(0, 1) >= Duration::from_millis(900),
        "first retry after ~1 s: {:?}",
        gap(0, 1)
    );
    assert!(
        gap(1, 2) >= Duration::from_millis(1900),
        "second after ~2 s: {:?}",
        gap(1, 2)
    );

    // broken: always 503 — 1 attempt + 2 retries, then FAILED for good.
    let runs = api.wait_final(ids[1], 1, Duration::from_secs(10)).await;
    let last = runs.last().expect("a run");
    assert_eq!(last["status"], "FAILED", "{last}");
    assert_eq!(last["retryCount"], 2, "{last}");
    assert_eq!(last["code"], "HTTP_503");
    let request_id = last["requestId"].as_str().expect("id");
    assert_eq!(
        broken
            .received()
            .iter()
            .filter(|r| r.request_id == request_id)
            .count(),
        3
    );

    // fatal: "retry": false ends the run at once.
    let path = format!("/api/instances/{}", fatal_first.request_id);
    let run = api
        .wait_status(&path, "FAILED", Duration::from_secs(5))
        .await;
    assert_eq!(run["retryCount"], 0, "{run}");
    assert_eq!(run["code"], "FATAL");
    actix_rt::time::sleep(Duration::from_millis(1500)).await;
    let fatal_deliveries = fatal
        .received()
        .iter()
        .filter(|r| r.request_id == fatal_first.request_id)
        .count();
    assert_eq!(fatal_deliveries, 1);
    ax.shutdown().await;
}

on_each_backend!(
    retries_until_success_or_given_up,
    sqlite: retries_on_sqlite,
    mariadb: retries_on_mariadb,
    postgres: retries_on_postgres
);

/// A late result still counts while the run is open: a SUCCESS after a timeout ends the run
/// and cancels the pending retry.
#[actix_rt::test(system = "crate::common::TestSystem")]
async fn a_late_success_cancels_the_retry() {
    let store = TestStore::sqlite();
    let ax = start_ax(&config(&store, false, "late")).await;
    let api = Api::new(&ax);
    let silent = Executor::start(Reply::Accepted).await;
    let mut body = every_second(&silent.url);
    body["timeoutMs"] = json!(300);
    body["retryBackoffSecs"] = json!(30);
    body["enabled"] = json!(true);
    let task = api.create_task(body.clone()).await;
    let first = silent.wait_for(1, Duration::from_secs(5)).await[0].clone();
    body["enabled"] = json!(false);
    api.call("PUT", &format!("/api/tasks/{}", task["id"]), Some(body))
        .await;
    let path = format!("/api/instances/{}", first.request_id);
    // Attempt 1 is accepted, then times out: the run waits for its retry (READY, attempt 2).
    api.wait_status(&path, "RUNNING", Duration::from_secs(5))
        .await;
    let run = api
        .wait_status(&path, "READY", Duration::from_secs(5))
        .await;
    assert_eq!(run["attempt"], 2, "{run}");
    assert_eq!(run["code"], "TIMEOUT");
    let (status, reply) = api
        .post("/api/callback", first.callback("SUCCESS", json!({})))
        .await;
    assert_eq!((status, &reply["applied"]), (200, &json!(true)), "{reply}");
    let (_, run) = api.get(&path).await;
    assert_eq!(run["status"], "SUCCESS");
    assert_eq!(run["nextAttemptAt"], Value::Null);
    ax.shutdown().await;
}

/// Changing a task reaches the wheel at once: a disabled or deleted task stops firing.
#[actix_rt::test(system = "crate::common::TestSystem")]
async fn updates_and_deletes_take_effect_at_once() {
    let store = TestStore::sqlite();
    let ax = start_ax(&config(&store, false, "upd")).await;
    let api = Api::new(&ax);
    let executor = Executor::start(Reply::Success).await;
    let a = api.create_task(every_second(&executor.url)).await;
    let b = api.create_task(every_second(&executor.url)).await;
    executor.wait_for(2, Duration::from_secs(5)).await;

    let mut disabled = every_second(&executor.url);
    disabled["enabled"] = json!(false);
    disabled["name"] = json!("renamed");
    let (status, updated) = api
        .call("PUT", &format!("/api/tasks/{}", a["id"]), Some(disabled))
        .await;
    assert_eq!(status, 200, "{updated}");
    assert_eq!(updated["name"], "renamed");
    assert_eq!(updated["status"], "PAUSED");
    assert_eq!(updated["nextRunAt"], Value::Null);
    let (status, _) = api
        .call("DELETE", &format!("/api/tasks/{}", b["id"]), None)
        .await;
    assert_eq!(status, 204);
    let (status, _) = api.get(&format!("/api/tasks/{}", b["id"])).await;
    assert_eq!(status, 404);

    actix_rt::time::sleep(Duration::from_millis(1500)).await;
    let before = executor.received().len();
    actix_rt::time::sleep(Duration::from_millis(2500)).await;
    assert_eq!(
        executor.received().len(),
        before,
        "nothing fires after disable/delete"
    );
    ax.shutdown().await;
}

/// Tasks and their schedule survive a restart.
#[actix_rt::test(system = "crate::common::TestSystem")]
async fn tasks_survive_a_restart() {
    let store = TestStore::sqlite();
    let executor = Executor::start(Reply::Success).await;
    let ax = start_ax(&config(&store, false, "one")).await;
    let task = Api::new(&ax).create_task(every_second(&executor.url)).await;
    ax.shutdown().await;
    let delivered = executor.received().len();

    let ax = start_ax(&config(&store, false, "two")).await;
    let api = Api::new(&ax);
    let (status, again) = api.get(&format!("/api/tasks/{}", task["id"])).await;
    assert_eq!(status, 200);
    assert_eq!(again["cron"], "* * * * * *");
    let received = executor
        .wait_for(delivered + 2, Duration::from_secs(6))
        .await;
    assert!(received.len() >= delivered + 2, "fires after restart");
    ax.shutdown().await;
}

/// The API's contract for bad input and listings.
#[actix_rt::test(system = "crate::common::TestSystem")]
async fn api_rejects_bad_input_and_pages_listings() {
    let store = TestStore::sqlite();
    let ax = start_ax(&config(&store, false, "api")).await;
    let api = Api::new(&ax);
    let url = "http://127.0.0.1:9/run";
    for (body, field) in [
        (json!({"cron": "* * * * * *", "handlerUrl": url}), "name"),
        (
            json!({"name": "x", "cron": "0 0 0 30 2 *", "handlerUrl": url}),
            "cron",
        ),
        (
            json!({"name": "x", "cron": "L * * * * *", "handlerUrl": url}),
            "cron",
        ),
        (
            json!({"name": "x", "cron": "* * * * * *", "handlerUrl": "file:///etc"}),
            "handlerUrl",
        ),
        (
            json!({"name": "x", "cron": "* * * * * *", "handlerUrl": url, "maxRetry": 99}),
            "maxRetry",
        ),
        (
            json!({"name": "x", "cron": "* * * * * *", "handlerUrl": url, "params": "s"}),
            "params",
        ),
        (
            json!({"name": "x'; DROP TABLE ax_task; --", "cron": "* * * * * *", "handlerUrl": url, "scene": "s".repeat(65)}),
            "scene",
        ),
    ] {
        let (status, reply) = api.post("/api/tasks", body).await;
        assert_eq!(status, 400, "{reply}");
        assert_eq!(reply["error"]["code"], "INVALID_ARGUMENT");
        assert_eq!(reply["error"]["field"], field, "{reply}");
    }
    let (status, reply) = api
        .raw(
            "POST",
            "/api/tasks",
            "application/json",
            b"{not json".to_vec(),
        )
        .await;
    assert_eq!(status, 400, "{reply}");
    let mut oversized = format!(
        "POST /api/tasks HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\n\r\n",
        2 * 1024 * 1024
    )
    .into_bytes();
    oversized.extend(vec![b' '; 2 * 1024 * 1024]);
    let (status, _, reply) = raw_exchange(ax.addr(), oversized).await;
    assert_eq!(status, 413, "{reply}");
    assert_eq!(reply["error"]["code"], "PAYLOAD_TOO_LARGE", "{reply}");
    let (_, page) = api.get("/api/tasks").await;
    assert_eq!(page["total"], 0, "nothing stored by rejected requests");

    for (i, scene) in ["a", "a", "b"].iter().enumerate() {
        let body = json!({"name": format!("t{i}"), "scene": scene, "cron": "0 0 0 1 1 *", "handlerUrl": url});
        api.create_task(body).await;
    }
    let (_, page) = api.get("/api/tasks?scene=a&limit=1&offset=1").await;
    assert_eq!(page["total"], 2);
    assert_eq!(page["items"].as_array().map(Vec::len), Some(1));
    assert_eq!(page["items"][0]["name"], "t1");
    let (status, reply) = api.get("/api/tasks?limit=100000").await;
    assert_eq!((status, &reply["error"]["field"]), (400, &json!("limit")));
    let (status, reply) = api.get("/api/tasks?status=SLEEPING").await;
    assert_eq!((status, &reply["error"]["field"]), (400, &json!("status")));
    let (status, _) = api.get("/api/tasks/424242").await;
    assert_eq!(status, 404);
    let (status, reply) = api.get("/api/tasks/abc").await;
    assert_eq!((status, &reply["error"]["field"]), (400, &json!("id")));
    let (status, _) = api.get("/api/instances/not-a-uuid").await;
    assert_eq!(status, 400);
    let (status, _) = api
        .get(&format!("/api/instances/{}", uuid::Uuid::new_v4()))
        .await;
    assert_eq!(status, 404);
    let (status, health) = api.get("/healthz").await;
    assert_eq!(status, 200);
    assert_eq!(health["status"], "ok");
    ax.shutdown().await;
}

/// Results count once, for the attempt they belong to: an executor that re-sends its FAILED
/// callback (with and without `attempt`) burns no retry, a result for an attempt never
/// dispatched is 409 and changes nothing, and the answer gives the run's status after the call.
#[actix_rt::test(system = "crate::common::TestSystem")]
async fn callbacks_count_once_per_attempt() {
    let store = TestStore::sqlite();
    let ax = start_ax(&config(&store, false, "once")).await;
    let api = Api::new(&ax);
    let executor = Executor::start(Reply::Accepted).await;
    let mut body = every_second(&executor.url);
    body["maxRetry"] = json!(3);
    body["retryBackoffSecs"] = json!(60);
    let task = api.create_task(body.clone()).await;
    let first = executor.wait_for(1, Duration::from_secs(5)).await[0].clone();
    body["enabled"] = json!(false);
    api.call("PUT", &format!("/api/tasks/{}", task["id"]), Some(body))
        .await;
    let path = format!("/api/instances/{}", first.request_id);
    api.wait_status(&path, "RUNNING", Duration::from_secs(5))
        .await;

    let (status, reply) = api
        .post(
            "/api/callback",
            first.callback("FAILED", json!({"attempt": 99})),
        )
        .await;
    assert_eq!(status, 409, "{reply}");
    assert_eq!(reply["error"]["code"], "CONFLICT");
    assert_eq!(reply["error"]["field"], "attempt");
    let (_, run) = api.get(&path).await;
    assert_eq!(
        (&run["status"], &run["attempt"]),
        (&json!("RUNNING"), &json!(1))
    );

    let failed = |extra| first.callback("FAILED", extra);
    let (status, reply) = api
        .post("/api/callback", failed(json!({"attempt": 1})))
        .await;
    assert_eq!(status, 200, "{reply}");
    assert_eq!(
        (&reply["applied"], &reply["status"]),
        (&json!(true), &json!("READY"))
    );
    for _ in 0..2 {
        let (status, reply) = api.post("/api/callback", failed(json!({}))).await;
        assert_eq!(status, 200, "{reply}");
        assert_eq!(reply["applied"], false, "{reply}");
        assert_eq!(
            reply["status"], "READY",
            "the run's status, not the reported one"
        );
    }
    let (_, run) = api.get(&path).await;
    assert_eq!(run["status"], "READY", "{run}");
    assert_eq!(
        (&run["attempt"], &run["retryCount"]),
        (&json!(2), &json!(1))
    );
    // Attempt 2 was never dispatched: its result is refused.
    let (status, reply) = api
        .post("/api/callback", failed(json!({"attempt": 2})))
        .await;
    assert_eq!(status, 409, "{reply}");
    ax.shutdown().await;
    executor.stop().await;
}

on_each_backend!(a_manual_run_is_claimed_and_dispatched_once_on, mariadb: a_manual_run_is_claimed_and_dispatched_once, postgres: a_manual_run_is_claimed_and_dispatched_once_on_postgres);

/// A manual run goes the way of every due attempt: into the wheel, claimed, dispatched once.
async fn a_manual_run_is_claimed_and_dispatched_once_on(store: TestStore) {
    let ax = start_ax(&config(&store, true, "manual")).await;
    let api = Api::new(&ax);
    let executor = Executor::start(Reply::Success).await;
    let mut body = every_second(&executor.url);
    body["enabled"] = json!(false);
    let task = api.create_task(body).await;
    let (status, run) = api
        .post(
            &format!("/api/tasks/{}/trigger", task["id"]),
            json!({"params": {"by": "hand"}}),
        )
        .await;
    assert_eq!(status, 201, "{run}");
    assert_eq!(run["triggerType"], "MANUAL");
    let path = format!(
        "/api/instances/{}",
        run["requestId"].as_str().unwrap_or_default()
    );
    let done = api
        .wait_status(&path, "SUCCESS", Duration::from_secs(5))
        .await;
    assert_eq!(done["firedBy"], "manual", "{done}");
    actix_rt::time::sleep(Duration::from_millis(1500)).await;
    let deliveries = executor.received();
    assert_eq!(deliveries.len(), 1, "delivered once");
    assert_eq!(deliveries[0].body["params"], json!({"by": "hand"}));
    assert_eq!(
        deliveries[0].request_id,
        run["requestId"].as_str().unwrap_or_default()
    );
    ax.shutdown().await;
    executor.stop().await;
}

/// Whatever an executor puts in its reply is brought within its column: the worst cases of
/// every result field — too long, the wrong type (dropped), 4-byte characters and NULs (dropped)
/// — end their runs SUCCESS with what fits, and never hold up the results of other tasks. An
/// integer code is kept as its decimal text.
async fn worst_case_replies_are_stored_within_their_columns(store: TestStore) {
    let ax = start_ax(&config(&store, false, "worst")).await;
    let api = Api::new(&ax);
    let long = "c".repeat(100);
    let huge_message = format!("😀\u{0}{}", "m".repeat(10_000));
    let bodies = [
        json!({"status": "SUCCESS", "code": long, "message": "long code"}),
        json!({"status": "SUCCESS", "code": {"nested": [1, 2, {"deep": "x".repeat(80)}]}}),
        json!({"status": "SUCCESS", "code": 123_456_789_012_345_678u64, "message": huge_message}),
        json!({"status": "SUCCESS", "code": "😀".repeat(70), "message": ["not", "text"]}),
        json!({"status": "SUCCESS", "code": null, "message": true}),
    ];
    let mut executors = Vec::new();
    let mut tasks = Vec::new();
    for body in bodies {
        let executor = Executor::start(Reply::Body(body.to_string())).await;
        tasks.push(api.create_task(every_second(&executor.url)).await);
        executors.push(executor);
    }
    let plain = Executor::start(Reply::Success).await;
    tasks.push(api.create_task(every_second(&plain.url)).await);
    for (n, task) in tasks.iter().enumerate() {
        let id = task["id"].as_i64().unwrap_or_default();
        let runs = api.wait_final(id, 2, Duration::from_secs(10)).await;
        let due: Vec<&Value> = runs.iter().filter(|r| r["status"] != "READY").collect();
        assert!(due.len() >= 2, "task {id}: {runs:?}");
        for run in due {
            assert_eq!(run["status"], "SUCCESS", "task {id}: {run}");
            let code = run["code"].as_str().unwrap_or_default();
            let message = run["message"].as_str().unwrap_or_default();
            assert!(code.chars().count() <= 64, "{run}");
            assert!(message.chars().count() <= 1024, "{run}");
            assert!(!message.contains('\u{0}'), "{run}");
            if n == 1 {
                assert!(run["code"].is_null(), "an object is no code: {run}");
            }
            if n == 2 {
                assert_eq!(code, "123456789012345678", "{run}");
                assert!(message.starts_with("😀mmm"), "{run}");
            }
        }
    }
    ax.shutdown().await;
    for executor in executors {
        executor.stop().await;
    }
    plain.stop().await;
}

on_each_backend!(
    worst_case_replies_are_stored_within_their_columns,
    sqlite: worst_case_replies_on_sqlite,
    mariadb: worst_case_replies_on_mariadb,
    postgres: worst_case_replies_on_postgres
);

/// `timeoutMs` bounds the whole exchange: a handler that sends its headers at once and its
/// body a byte a second times out at `timeoutMs`, delivered once; and a reply body is read up
/// to its cap (64 KiB), the rest ignored.
#[actix_rt::test(system = "crate::common::TestSystem")]
async fn timeout_covers_the_reply_body_and_bodies_are_capped() {
    let store = TestStore::sqlite();
    let ax = start_ax(&config(&store, false, "body")).await;
    let api = Api::new(&ax);
    let trickle = Executor::start(Reply::Trickle(Duration::from_secs(1))).await;
    let mut body = every_second(&trickle.url);
    body["timeoutMs"] = json!(2000);
    body["maxRetry"] = json!(0);
    let task = api.create_task(body.clone()).await;
    let first = trickle.wait_for(1, Duration::from_secs(5)).await[0].clone();
    body["enabled"] = json!(false);
    api.call("PUT", &format!("/api/tasks/{}", task["id"]), Some(body))
        .await;
    let path = format!("/api/instances/{}", first.request_id);
    let run = api
        .wait_status(&path, "FAILED", Duration::from_secs(4))
        .await;
    assert_eq!(run["code"], "TIMEOUT", "{run}");
    // Ended at timeoutMs (2 s), not when the body would have been complete (40 s).
    let took = time(&run["finishedAt"]) - first.wall;
    assert!(
        took < chrono::Duration::seconds(3),
        "ended {took} after the dispatch"
    );
    actix_rt::time::sleep(Duration::from_secs(1)).await;
    let deliveries = trickle.received();
    assert_eq!(
        deliveries
            .iter()
            .filter(|d| d.request_id == first.request_id)
            .count(),
        1,
        "delivered once"
    );

    let padded = format!(
        "{}{}",
        json!({"status": "FAILED", "code": "E_BIG", "retry": false}),
        " ".repeat(100 * 1024)
    );
    let big = Executor::start(Reply::Body(padded)).await;
    let task = api.create_task(every_second(&big.url)).await;
    let id = task["id"].as_i64().unwrap_or_default();
    let runs = api.wait_final(id, 1, Duration::from_secs(5)).await;
    let done: Vec<&Value> = runs.iter().filter(|r| r["status"] != "READY").collect();
    assert!(!done.is_empty());
    // The capped body is still the result it says: no read error, no default success.
    assert!(
        done.iter()
            .all(|r| r["status"] == "FAILED" && r["code"] == "E_BIG"),
        "{runs:?}"
    );
    ax.shutdown().await;
    trickle.stop().await;
    big.stop().await;
}

/// Small parts of the contract: `HEAD /healthz` answers like `GET`; a trigger body over the
/// limit is a 413 in the JSON shape; a per-task listing of a task that does not exist is 404;
/// ids are plain decimal.
#[actix_rt::test(system = "crate::common::TestSystem")]
async fn contract_edges() {
    let store = TestStore::sqlite();
    let ax = start_ax(&config(&store, false, "edges")).await;
    let api = Api::new(&ax);
    let (status, _) = api.call("HEAD", "/healthz", None).await;
    assert_eq!(status, 200);
    let (status, reply) = api.get("/api/tasks/999999/instances").await;
    assert_eq!(status, 404, "{reply}");
    assert_eq!(reply["error"]["code"], "NOT_FOUND");
    // A body over the limit is refused in the JSON error shape, like every error.
    let huge = vec![b' '; 2 * 1024 * 1024];
    let (status, reply) = api
        .raw("POST", "/api/tasks/1/trigger", "application/json", huge)
        .await;
    assert_eq!(status, 413, "{reply}");
    assert_eq!(reply["error"]["code"], "PAYLOAD_TOO_LARGE");
    for id in ["+5", "005", "-1"] {
        let (status, reply) = api.get(&format!("/api/tasks/{id}")).await;
        assert_eq!(status, 400, "{id}: {reply}");
        assert_eq!(reply["error"]["field"], "id");
    }
    // A known path with a method it does not serve: 405, its methods in `Allow`, JSON body.
    let pause = format!("http://{}/api/tasks/1/pause", ax.addr());
    assert_eq!(
        status_and_header("PATCH", &pause, "Allow").await,
        (405, Some("POST".to_string()))
    );
    let (status, reply) = api.call("DELETE", "/api/tasks", None).await;
    assert_eq!(
        (status, &reply["error"]["code"]),
        (405, &json!("METHOD_NOT_ALLOWED")),
        "{reply}"
    );
    let (status, _) = api.call("DELETE", "/api/nothing/here", None).await;
    assert_eq!(status, 404);
    ax.shutdown().await;
}

/// A reply means what HTTP says: 200, 201 and 204 without a result are a success, 202 is
/// `RUNNING` until the callback, and a result in the body wins over the code.
#[actix_rt::test(system = "crate::common::TestSystem")]
async fn replies_mean_what_http_says() {
    let store = TestStore::sqlite();
    let ax = start_ax(&config(&store, false, "replies")).await;
    let api = Api::new(&ax);
    let cases = [
        (Reply::Status(200), "SUCCESS"),
        (Reply::Status(201), "SUCCESS"),
        (Reply::Status(204), "SUCCESS"),
        (Reply::Accepted, "RUNNING"),
        (
            Reply::Body(r#"{"status":"FAILED","retry":false}"#.into()),
            "FAILED",
        ),
    ];
    let mut running = Vec::new();
    for (reply, want) in cases {
        let executor = Executor::start(reply).await;
        let mut body = every_second(&executor.url);
        body["enabled"] = json!(false);
        body["maxRetry"] = json!(0);
        let task = api.create_task(body).await;
        let (status, run) = api
            .post(&format!("/api/tasks/{}/trigger", task["id"]), json!({}))
            .await;
        assert_eq!(status, 201, "{run}");
        let path = format!(
            "/api/instances/{}",
            run["requestId"].as_str().unwrap_or_default()
        );
        api.wait_status(&path, want, Duration::from_secs(5)).await;
        let received = executor.wait_for(1, Duration::from_secs(1)).await;
        if want == "RUNNING" {
            running.push((path, received[0].clone()));
        }
        executor.stop().await;
    }
    // The accepted run ends with its callback.
    let (path, received) = &running[0];
    let callback = received.callback("SUCCESS", json!({}));
    let (status, reply) = api.post("/api/callback", callback).await;
    assert_eq!(
        (status, &reply["status"]),
        (200, &json!("SUCCESS")),
        "{reply}"
    );
    api.wait_status(path, "SUCCESS", Duration::from_secs(2))
        .await;
    ax.shutdown().await;
}

/// `PATCH` merges the given fields into a task (RFC 7386: `null` resets one to its default) and
/// checks the result like a `PUT`; `PUT` stays a replacement.
#[actix_rt::test(system = "crate::common::TestSystem")]
async fn patch_merges_fields_and_put_replaces() {
    let store = TestStore::sqlite();
    let ax = start_ax(&config(&store, false, "patch")).await;
    let api = Api::new(&ax);
    let task = api
        .create_task(json!({
            "name": "p", "scene": "s", "cron": "0 0 0 1 1 *", "handlerUrl": "http://127.0.0.1:9/run",
            "params": {"region": "eu", "tier": 1}, "maxRetry": 7, "enabled": false,
        }))
        .await;
    let path = format!("/api/tasks/{}", task["id"]);
    let (status, patched) = api
        .call(
            "PATCH",
            &path,
            Some(json!({"params": {"tier": null, "batch": 5}, "maxRetry": null, "cron": "0 0 1 * * *"})),
        )
        .await;
    assert_eq!(status, 200, "{patched}");
    assert_eq!(patched["params"], json!({"region": "eu", "batch": 5}));
    assert_eq!(patched["maxRetry"], 3, "null resets to the default");
    assert_eq!(patched["cron"], "0 0 1 * * *");
    assert_eq!(
        (&patched["name"], &patched["scene"]),
        (&json!("p"), &json!("s"))
    );
    assert_eq!(patched["enabled"], false, "untouched fields stay");
    for (body, field) in [
        (json!({"cron": "nope"}), json!("cron")),
        (json!({"colour": "red"}), json!("colour")),
        (json!({"name": null}), json!("name")),
    ] {
        let (status, reply) = api.call("PATCH", &path, Some(body)).await;
        assert_eq!((status, &reply["error"]["field"]), (400, &field), "{reply}");
    }
    let (status, _) = api.call("PATCH", &path, Some(json!([1]))).await;
    assert_eq!(status, 400);
    let (_, now) = api.get(&path).await;
    assert_eq!(
        now["cron"], "0 0 1 * * *",
        "refused patches changed nothing"
    );
    // PUT replaces: what it leaves out takes its default.
    let (status, replaced) = api
        .call(
            "PUT",
            &path,
            Some(
                json!({"name": "p", "cron": "0 0 0 1 1 *", "handlerUrl": "http://127.0.0.1:9/run"}),
            ),
        )
        .await;
    assert_eq!(status, 200, "{replaced}");
    assert_eq!(
        (&replaced["params"], &replaced["scene"]),
        (&json!({}), &json!("default"))
    );
    let (status, _) = api.call("PATCH", "/api/tasks/999", Some(json!({}))).await;
    assert_eq!(status, 404);
    ax.shutdown().await;
}

/// An executor's server that closes a kept-alive connection as the next request arrives on it,
/// without answering: the race every HTTP client meets when a server drops an idle connection
/// just as the client reuses it (the first request on each connection is answered SUCCESS).
async fn closing_kept_alive_connections() -> (String, std::sync::Arc<std::sync::atomic::AtomicUsize>)
{
    use std::sync::atomic::{AtomicUsize, Ordering};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!("http://{}/run", listener.local_addr().expect("addr"));
    let answered = std::sync::Arc::new(AtomicUsize::new(0));
    let count = answered.clone();
    actix_rt::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let count = count.clone();
            actix_rt::spawn(async move {
                let mut request = Vec::new();
                let mut buf = [0u8; 4096];
                // The whole first request: its head and a body of Content-Length bytes.
                loop {
                    let Ok(n) = stream.read(&mut buf).await else {
                        return;
                    };
                    if n == 0 {
                        return;
                    }
                    request.extend_from_slice(&buf[..n]);
                    let text = String::from_utf8_lossy(&request).to_ascii_lowercase();
                    let Some(end) = text.find("\r\n\r\n") else {
                        continue;
                    };
                    let length: usize = text[..end]
                        .lines()
                        .find_map(|l| l.strip_prefix("content-length:"))
                        .and_then(|n| n.trim().parse().ok())
                        .unwrap_or(0);
                    if request.len() >= end + 4 + length {
                        break;
                    }
                }
                let body = r#"{"status":"SUCCESS"}"#;
                let reply = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
                    body.len()
                );
                if stream.write_all(reply.as_bytes()).await.is_ok() {
                    count.fetch_add(1, Ordering::SeqCst);
                }
                // The next request's first bytes, then the connection is closed unanswered.
                let _ = stream.read(&mut buf).await;
            });
        }
    });
    (url, answered)
}

/// A kept-alive connection the executor closed under ax's request is ax's own affair: the
/// attempt goes out again at once on a new connection, never charged to the executor as a
/// failed attempt (`CONNECT_ERROR`) nor delayed to its retry.
#[actix_rt::test(system = "crate::common::TestSystem")]
async fn a_connection_closed_as_it_is_reused_is_not_a_failed_attempt() {
    let store = TestStore::sqlite();
    let ax = start_ax(&config(&store, false, "e2e")).await;
    let api = Api::new(&ax);
    let (url, answered) = closing_kept_alive_connections().await;
    let task = api
        .create_task(json!({"name": unique_name("reuse"), "cron": "* * * * * *",
            "handlerUrl": url, "maxRetry": 3}))
        .await;
    let id = task["id"].as_i64().expect("id");
    let runs = api.wait_final(id, 4, Duration::from_secs(10)).await;
    let due: Vec<&Value> = runs
        .iter()
        .filter(|r| r["status"] != "READY" && r["status"] != "RUNNING")
        .collect();
    assert!(due.len() >= 4, "{runs:#?}");
    for run in &due {
        assert_eq!(run["status"], "SUCCESS", "{run}");
        assert_eq!(run["attempt"], 1, "delivered at its first attempt: {run}");
        let lag = time(&run["finishedAt"]) - time(&run["scheduledAt"]);
        assert!(lag < chrono::Duration::seconds(2), "not late: {run}");
    }
    assert!(answered.load(std::sync::atomic::Ordering::SeqCst) >= 4);
    ax.shutdown().await;
}

/// A request with an optional `If-Match`; the status, the `ETag` and the JSON body.
async fn conditional(
    ax: &ax_server::app::Ax,
    method: &str,
    path: &str,
    if_match: Option<&str>,
    body: Option<Value>,
) -> (u16, Option<String>, Value) {
    let method = actix_web::http::Method::from_bytes(method.as_bytes()).expect("method");
    let mut request = awc::Client::default().request(method, format!("http://{}{path}", ax.addr()));
    if let Some(tag) = if_match {
        request = request.insert_header(("If-Match", tag));
    }
    let mut response = match body {
        Some(body) => request.send_json(&body).await,
        None => request.send().await,
    }
    .expect("an answer");
    let etag = response
        .headers()
        .get("etag")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let bytes = response.body().await.expect("a body");
    let json = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    (response.status().as_u16(), etag, json)
}

/// A task's version is its ETag; `If-Match` makes PUT, PATCH and DELETE conditional on it (412
/// when stale, naming If-Match, nothing changed); two PATCHes from one version: one stored, one
/// 412; two PATCHes without `If-Match` of different fields: both kept.
async fn versions_make_changes_conditional(store: TestStore) {
    let ax = start_ax(&config(&store, false, "versions")).await;
    let task = Api::new(&ax)
        .create_task(json!({
            "name": "v", "scene": "s", "cron": "0 0 0 1 1 *", "handlerUrl": "http://127.0.0.1:9/run",
            "params": {"region": "eu"}, "timeoutMs": 1000,
        }))
        .await;
    assert_eq!(task["version"], 1, "{task}");
    let path = format!("/api/tasks/{}", task["id"]);
    let (status, etag, got) = conditional(&ax, "GET", &path, None, None).await;
    assert_eq!(
        (status, etag.as_deref(), &got["version"]),
        (200, Some("\"1\""), &json!(1))
    );

    let patch = |timeout: i64| Some(json!({"timeoutMs": timeout}));
    let (status, etag, patched) =
        conditional(&ax, "PATCH", &path, Some("\"1\""), patch(2000)).await;
    assert_eq!((status, etag.as_deref()), (200, Some("\"2\"")), "{patched}");
    assert_eq!(
        (&patched["timeoutMs"], &patched["version"]),
        (&json!(2000), &json!(2))
    );
    // Stale, weak, or a list without the current version: 412, the current ETag, no change.
    for tag in ["\"1\"", "W/\"2\"", "\"1\", \"3\""] {
        for (method, body) in [
            ("PATCH", patch(3000)),
            (
                "PUT",
                Some(json!({"name": "v", "scene": "s", "cron": "0 0 0 1 1 *",
                "handlerUrl": "http://127.0.0.1:9/run", "timeoutMs": 3000})),
            ),
            ("DELETE", None),
        ] {
            let (status, etag, reply) = conditional(&ax, method, &path, Some(tag), body).await;
            assert_eq!(
                (status, etag.as_deref()),
                (412, Some("\"2\"")),
                "{method} {tag}: {reply}"
            );
            assert_eq!(reply["error"]["code"], "PRECONDITION_FAILED", "{reply}");
            assert_eq!(reply["error"]["field"], "If-Match", "{reply}");
        }
    }
    let (_, _, now) = conditional(&ax, "GET", &path, None, None).await;
    assert_eq!(
        (&now["timeoutMs"], &now["version"]),
        (&json!(2000), &json!(2)),
        "unchanged"
    );
    let (status, _, reply) = conditional(&ax, "PATCH", &path, Some("2"), patch(3000)).await;
    assert_eq!(
        (status, &reply["error"]["field"]),
        (400, &json!("If-Match")),
        "{reply}"
    );
    let (status, etag, _) = conditional(&ax, "PATCH", &path, Some("*"), patch(3000)).await;
    assert_eq!((status, etag.as_deref()), (200, Some("\"3\"")));
    // A view sent back: its read-only fields are ignored, `version` too (If-Match carries it).
    let (_, _, mut view) = conditional(&ax, "GET", &path, None, None).await;
    for key in ["id", "status", "nextRunAt", "createdAt", "updatedAt"] {
        view.as_object_mut().expect("object").remove(key);
    }
    view["version"] = json!(1);
    let (status, etag, reply) = conditional(&ax, "PUT", &path, None, Some(view)).await;
    assert_eq!((status, etag.as_deref()), (200, Some("\"4\"")), "{reply}");
    // A pause and a resume are changes too.
    let (_, etag, _) = conditional(&ax, "POST", &format!("{path}/pause"), None, None).await;
    assert_eq!(etag.as_deref(), Some("\"5\""));
    let (_, etag, _) = conditional(&ax, "POST", &format!("{path}/resume"), None, None).await;
    assert_eq!(etag.as_deref(), Some("\"6\""));

    // Two PATCHes made from one version: exactly one is stored.
    for round in 0..10 {
        let (_, _, now) = conditional(&ax, "GET", &path, None, None).await;
        let tag = format!("\"{}\"", now["version"]);
        let (one, two) = futures_util::join!(
            conditional(&ax, "PATCH", &path, Some(&tag), patch(4000 + round)),
            conditional(&ax, "PATCH", &path, Some(&tag), patch(5000 + round)),
        );
        let mut statuses = [one.0, two.0];
        statuses.sort();
        assert_eq!(statuses, [200, 412], "round {round}: {one:?} {two:?}");
    }
    // Without If-Match, concurrent PATCHes of different fields are each merged onto the other.
    for round in 0..10 {
        let (one, two) = futures_util::join!(
            conditional(&ax, "PATCH", &path, None, patch(6000 + round)),
            conditional(
                &ax,
                "PATCH",
                &path,
                None,
                Some(json!({"params": {"round": round}}))
            ),
        );
        assert_eq!((one.0, two.0), (200, 200), "round {round}: {one:?} {two:?}");
        let (_, _, now) = conditional(&ax, "GET", &path, None, None).await;
        assert_eq!(now["timeoutMs"], 6000 + round, "round {round}: {now}");
        assert_eq!(
            now["params"],
            json!({"region": "eu", "round": round}),
            "round {round}"
        );
    }
    let (_, etag, _) = conditional(&ax, "GET", &path, None, None).await;
    let (status, _, _) = conditional(&ax, "DELETE", &path, etag.as_deref(), None).await;
    assert_eq!(status, 204);
    ax.shutdown().await;
}

on_each_backend!(
    versions_make_changes_conditional,
    sqlite: versions_on_sqlite,
    mariadb: versions_on_mariadb,
    postgres: versions_on_postgres
);

/// An executor's pooled connection stays open while it waits for the next burst: a callback
/// client keeps idle connections for 15 s or more, and one ax closed after 5 s idle (actix's
/// default) would be found closed, so each callback would open a new connection.
#[actix_rt::test(system = "crate::common::TestSystem")]
async fn an_idle_connection_stays_open_for_the_next_request() {
    use tokio::io::AsyncWriteExt;
    let store = TestStore::sqlite();
    let ax = start_ax(&config(&store, false, "keep-alive")).await;
    let mut stream = tokio::net::TcpStream::connect(ax.addr())
        .await
        .expect("connect");
    let request = format!("GET /healthz HTTP/1.1\r\nHost: {}\r\n\r\n", ax.addr());
    for (round, idle) in [("first", 0), ("after 6 s idle", 6)] {
        tokio::time::sleep(Duration::from_secs(idle)).await;
        stream
            .write_all(request.as_bytes())
            .await
            .expect("the connection takes the request");
        let head = one_response(&mut stream).await;
        assert!(head.starts_with("HTTP/1.1 200"), "{round}: {head}");
    }
    ax.shutdown().await;
}

/// Reads one response (head and its `content-length` body) off a kept-alive connection;
/// returns its head, or what came before the connection closed.
async fn one_response(stream: &mut tokio::net::TcpStream) -> String {
    use tokio::io::AsyncReadExt;
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let text = String::from_utf8_lossy(&got).to_string();
        if let Some((head, body)) = text.split_once("\r\n\r\n") {
            let length = head
                .lines()
                .find_map(|line| {
                    let (name, value) = line.split_once(':')?;
                    name.eq_ignore_ascii_case("content-length")
                        .then(|| value.trim().parse::<usize>().ok())?
                })
                .unwrap_or(0);
            if body.len() >= length {
                return head.to_string();
            }
        }
        let read = tokio::time::timeout(Duration::from_secs(5), stream.read(&mut buf)).await;
        match read {
            Ok(Ok(n)) if n > 0 => got.extend_from_slice(&buf[..n]),
            _ => return format!("closed after {text:?}"),
        }
    }
}
