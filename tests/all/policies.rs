//! End to end, per policy: the overlap policies (SKIP, BUFFER_ONE, REPLACE, ALLOW), cancel,
//! backfill and jitter, on a real store with a real executor that leaves every run RUNNING
//! (202) until the test reports its result.

use std::time::Duration;

use ax_core::run::{jitter_offset, RequestId, TaskId};
use chrono::{DateTime, Utc};
use serde_json::{json, Value};

use crate::common::{
    config, on_each_backend, start_ax, unique_name, Api, Executor, Received, Reply, TestStore,
};

fn time(value: &Value) -> DateTime<Utc> {
    value
        .as_str()
        .and_then(|s| DateTime::parse_from_rfc3339(s).ok())
        .map(|t| t.with_timezone(&Utc))
        .unwrap_or_else(|| panic!("not a time: {value}"))
}

/// A task firing every second whose runs stay RUNNING for a minute unless reported.
fn every_second(handler: &str, overlap: &str) -> Value {
    json!({"name": unique_name("overlap"), "cron": "* * * * * *", "handlerUrl": handler,
           "timeoutMs": 60_000, "maxRetry": 0, "overlap": overlap})
}

/// The task's runs scheduled by now, oldest first.
async fn due_runs(api: &Api, task: i64) -> Vec<Value> {
    let now = Utc::now();
    let mut runs: Vec<Value> = api
        .instances(task)
        .await
        .into_iter()
        .filter(|run| time(&run["scheduledAt"]) <= now)
        .collect();
    runs.reverse();
    runs
}

fn statuses(runs: &[Value]) -> Vec<String> {
    runs.iter()
        .map(|run| run["status"].as_str().unwrap_or_default().to_string())
        .collect()
}

async fn report(api: &Api, delivery: &Received, status: &str) -> Value {
    let (code, reply) = api
        .post("/api/callback", delivery.callback(status, json!({})))
        .await;
    assert_eq!(code, 200, "{reply}");
    reply
}

async fn sleep_secs(secs: f64) {
    actix_rt::time::sleep(Duration::from_secs_f64(secs)).await;
}

/// SKIP: while the first run is open every later one is recorded SKIPPED (code OVERLAP) and
/// never sent — across two ax processes sharing the store and Redis; once it is final, the
/// next run goes out.
async fn skip_records_overlapping_runs_skipped(store: TestStore) {
    // On MariaDB with Redis and two processes; on SQLite one.
    let redis = store.is_shared();
    let first_config = config(&store, redis, "policy-a");
    let a = start_ax(&first_config).await;
    // The decision is the store's: a second process firing the same task decides alike.
    let b = match redis {
        true => {
            let mut second = first_config.clone();
            second.server.instance_id = Some("policy-b".into());
            Some(start_ax(&second).await)
        }
        false => None,
    };
    let api = Api::new(&a);
    let executor = Executor::start(Reply::Accepted).await;
    let task = api.create_task(every_second(&executor.url, "SKIP")).await;
    let id = task["id"].as_i64().expect("id");
    assert_eq!(task["overlap"], "SKIP");
    let first = executor.wait_for(1, Duration::from_secs(5)).await;
    sleep_secs(3.2).await;
    assert_eq!(executor.received().len(), 1, "only the first run is sent");
    let runs = due_runs(&api, id).await;
    assert!(runs.len() >= 3, "{runs:?}");
    assert_eq!(runs[0]["status"], "RUNNING");
    for run in &runs[1..] {
        assert_eq!(run["status"], "SKIPPED", "{run}");
        assert_eq!(run["code"], "OVERLAP");
        assert!(run["finishedAt"].is_string());
    }
    report(&api, &first[0], "SUCCESS").await;
    let next = executor.wait_for(2, Duration::from_secs(4)).await;
    assert_eq!(
        next.len(),
        2,
        "the next run goes out once the first is final"
    );
    let (status, stats) = api.get(&format!("/api/tasks/{id}/stats")).await;
    assert_eq!(status, 200);
    assert!(stats["overlap"]["skipped"].as_i64() >= Some(2), "{stats}");
    assert!(stats["byStatus"]["SKIPPED"].as_i64() >= Some(2), "{stats}");
    let metrics = metrics_text(&a).await;
    assert!(
        metrics.lines().any(
            |line| line.starts_with("ax_overlap_runs_total{decision=\"skipped\"}")
                && !line.ends_with(" 0")
        ),
        "{metrics}"
    );
    drop((a, b));
    executor.stop().await;
}

async fn metrics_text(ax: &ax_server::app::Ax) -> String {
    let mut response = awc::Client::default()
        .get(format!("http://{}/metrics", ax.addr()))
        .send()
        .await
        .expect("metrics");
    let body = response.body().await.expect("metrics body");
    String::from_utf8_lossy(&body).into_owned()
}

/// BUFFER_ONE: the second run waits PENDING (code OVERLAP), the third and later are SKIPPED;
/// when the first is final the waiting one goes out with its own request id.
async fn buffer_one_holds_one_run(store: TestStore) {
    let ax = start_ax(&config(&store, true, "policy")).await;
    let api = Api::new(&ax);
    let executor = Executor::start(Reply::Accepted).await;
    let id = api
        .create_task(every_second(&executor.url, "BUFFER_ONE"))
        .await["id"]
        .as_i64()
        .expect("id");
    let first = executor.wait_for(1, Duration::from_secs(5)).await;
    sleep_secs(3.2).await;
    let runs = due_runs(&api, id).await;
    assert!(runs.len() >= 4, "{runs:?}");
    assert_eq!(statuses(&runs[..2]), ["RUNNING", "PENDING"]);
    assert_eq!(runs[1]["code"], "OVERLAP");
    for run in &runs[2..] {
        assert_eq!(run["status"], "SKIPPED", "{run}");
    }
    assert_eq!(executor.received().len(), 1);
    report(&api, &first[0], "SUCCESS").await;
    let sent = executor.wait_for(2, Duration::from_secs(4)).await;
    assert_eq!(sent.len(), 2);
    assert_eq!(
        sent[1].request_id, runs[1]["requestId"],
        "the waiting run goes out"
    );
    let waited = api
        .wait_status(
            &format!("/api/instances/{}", sent[1].request_id),
            "RUNNING",
            Duration::from_secs(3),
        )
        .await;
    assert_eq!(waited["code"], Value::Null, "the hold's code is cleared");
    executor.stop().await;
}

/// REPLACE: each new run cancels the open one (CANCELLED, code REPLACED) and goes out; the
/// replaced run's late result changes nothing.
async fn replace_cancels_the_earlier_run(store: TestStore) {
    let ax = start_ax(&config(&store, true, "policy")).await;
    let api = Api::new(&ax);
    let executor = Executor::start(Reply::Accepted).await;
    let id = api
        .create_task(every_second(&executor.url, "REPLACE"))
        .await["id"]
        .as_i64()
        .expect("id");
    let sent = executor.wait_for(3, Duration::from_secs(6)).await;
    assert!(sent.len() >= 3);
    let first = format!("/api/instances/{}", sent[0].request_id);
    let replaced = api
        .wait_status(&first, "CANCELLED", Duration::from_secs(3))
        .await;
    assert_eq!(replaced["code"], "REPLACED");
    let late = report(&api, &sent[0], "SUCCESS").await;
    assert_eq!(late["applied"], false, "{late}");
    assert_eq!(api.get(&first).await.1["status"], "CANCELLED");
    let runs = due_runs(&api, id).await;
    let open = runs
        .iter()
        .filter(|run| matches!(run["status"].as_str(), Some("RUNNING" | "READY")))
        .count();
    assert!(open <= 1, "one run open at a time: {:?}", statuses(&runs));
    executor.stop().await;
}

/// ALLOW (the default): every run goes out, overlapping or not.
async fn allow_sends_every_run(store: TestStore) {
    let ax = start_ax(&config(&store, false, "policy")).await;
    let api = Api::new(&ax);
    let executor = Executor::start(Reply::Accepted).await;
    let mut body = every_second(&executor.url, "ALLOW");
    body.as_object_mut().map(|b| b.remove("overlap"));
    let task = api.create_task(body).await;
    assert_eq!(task["overlap"], "ALLOW");
    let sent = executor.wait_for(3, Duration::from_secs(6)).await;
    assert!(sent.len() >= 3, "{} sent", sent.len());
    executor.stop().await;
}

/// Cancel: an open run ends CANCELLED (code CANCELLED), its waiting retry dropped; a second
/// cancel is a 409; a late result changes nothing; an unknown run is a 404.
async fn cancel_ends_an_open_run(store: TestStore) {
    let ax = start_ax(&config(&store, false, "policy")).await;
    let api = Api::new(&ax);
    let executor = Executor::start(Reply::Accepted).await;
    let task = api
        .create_task(json!({"name": unique_name("cancel"), "cron": "0 0 0 1 1 *",
            "handlerUrl": executor.url, "timeoutMs": 60_000}))
        .await;
    let id = task["id"].as_i64().expect("id");
    let (status, run) = api
        .post(&format!("/api/tasks/{id}/trigger"), json!({}))
        .await;
    assert_eq!(status, 201, "{run}");
    let sent = executor.wait_for(1, Duration::from_secs(5)).await;
    let path = format!("/api/instances/{}", sent[0].request_id);
    api.wait_status(&path, "RUNNING", Duration::from_secs(3))
        .await;
    let (status, cancelled) = api.post(&format!("{path}/cancel"), json!({})).await;
    assert_eq!(status, 200, "{cancelled}");
    assert_eq!(cancelled["status"], "CANCELLED");
    assert_eq!(cancelled["code"], "CANCELLED");
    assert!(cancelled["finishedAt"].is_string());
    let (status, again) = api.post(&format!("{path}/cancel"), json!({})).await;
    assert_eq!(status, 409, "{again}");
    assert_eq!(again["error"]["code"], "CONFLICT");
    let late = report(&api, &sent[0], "FAILED").await;
    assert_eq!(late["applied"], false);
    assert_eq!(api.get(&path).await.1["status"], "CANCELLED");
    let unknown = format!("/api/instances/{}/cancel", uuid::Uuid::new_v4());
    assert_eq!(api.post(&unknown, json!({})).await.0, 404);
    assert_eq!(
        api.post("/api/instances/nope/cancel", json!({})).await.0,
        400
    );

    // A run waiting for its retry: cancelled, the retry never goes out.
    let failing = Executor::start(Reply::Status(500)).await;
    let retried = api
        .create_task(json!({"name": unique_name("cancel"), "cron": "0 0 0 1 1 *",
            "handlerUrl": failing.url, "maxRetry": 3, "retryBackoffSecs": 2}))
        .await["id"]
        .as_i64()
        .expect("id");
    api.post(&format!("/api/tasks/{retried}/trigger"), json!({}))
        .await;
    let first = failing.wait_for(1, Duration::from_secs(5)).await;
    let path = format!("/api/instances/{}", first[0].request_id);
    // A manual run is READY from birth: wait until its failure is recorded and a retry waits.
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    let waiting = loop {
        let (_, run) = api.get(&path).await;
        if run["nextAttemptAt"].is_string() || std::time::Instant::now() > deadline {
            break run;
        }
        actix_rt::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(waiting["status"], "READY", "{waiting}");
    assert!(waiting["nextAttemptAt"].is_string(), "{waiting}");
    let (status, cancelled) = api.post(&format!("{path}/cancel"), json!({})).await;
    assert_eq!(status, 200);
    assert_eq!(cancelled["nextAttemptAt"], Value::Null);
    sleep_secs(3.0).await;
    assert_eq!(
        failing.received().len(),
        1,
        "the dropped retry never goes out"
    );
    executor.stop().await;
    failing.stop().await;
}

/// Backfill: every fire time of the range gets a run with its scheduled request id, paced;
/// a second backfill of the range finds them all existing; too large or future ranges are
/// refused naming `to`.
async fn backfill_fills_a_range_once(store: TestStore) {
    let mut config = config(&store, false, "policy");
    config.scheduler.backfill_per_sec = 1;
    let ax = start_ax(&config).await;
    let api = Api::new(&ax);
    let executor = Executor::start(Reply::Success).await;
    let task = api
        .create_task(
            // Paused, so that no scheduled run mixes in: a backfill is explicit, paused or not.
            json!({"name": unique_name("backfill"), "cron": "0 * * * * *",
            "handlerUrl": executor.url, "enabled": false}),
        )
        .await;
    let id = task["id"].as_i64().expect("id");
    let to = DateTime::from_timestamp(Utc::now().timestamp() / 60 * 60 - 60, 0).expect("time");
    let from = to - chrono::Duration::minutes(6);
    let range = json!({"from": from.to_rfc3339(), "to": to.to_rfc3339()});
    let (status, done) = api
        .post(&format!("/api/tasks/{id}/backfill"), range.clone())
        .await;
    assert_eq!(status, 202, "{done}");
    assert_eq!(done, json!({"runs": 6, "existing": 0}));
    let sent = executor.wait_for(6, Duration::from_secs(12)).await;
    assert_eq!(sent.len(), 6);
    let mut per_second = std::collections::BTreeMap::new();
    for delivery in &sent {
        *per_second.entry(delivery.wall.timestamp()).or_insert(0) += 1;
    }
    // One a second; a second late under load may carry two.
    assert!(per_second.len() >= 4, "1 a second: {per_second:?}");
    assert!(per_second.values().all(|n| *n <= 2), "{per_second:?}");
    // Each fire time's run carries the request id its scheduled run has.
    let mut got: Vec<String> = sent.iter().map(|d| d.request_id.clone()).collect();
    let mut want: Vec<String> = (0..6)
        .map(|n| RequestId::scheduled(TaskId(id), from + chrono::Duration::minutes(n)))
        .map(|id| id.as_str().to_string())
        .collect();
    got.sort();
    want.sort();
    assert_eq!(got, want);
    let runs = api.wait_final(id, 6, Duration::from_secs(5)).await;
    assert!(runs.iter().all(|run| run["triggerType"] == "BACKFILL"));
    let (status, again) = api.post(&format!("/api/tasks/{id}/backfill"), range).await;
    assert_eq!(status, 202);
    assert_eq!(again, json!({"runs": 0, "existing": 6}));

    let far = json!({"from": "2000-01-01T00:00:00Z", "to": to.to_rfc3339()});
    let (status, error) = api.post(&format!("/api/tasks/{id}/backfill"), far).await;
    assert_eq!(
        (status, &error["error"]["field"]),
        (400, &json!("to")),
        "{error}"
    );
    let future = json!({"from": from.to_rfc3339(), "to": "2999-01-01T00:00:00Z"});
    let (status, error) = api.post(&format!("/api/tasks/{id}/backfill"), future).await;
    assert_eq!(
        (status, &error["error"]["field"]),
        (400, &json!("to")),
        "{error}"
    );
    let reversed = json!({"from": to.to_rfc3339(), "to": from.to_rfc3339()});
    let (status, error) = api
        .post(&format!("/api/tasks/{id}/backfill"), reversed)
        .await;
    assert_eq!(
        (status, &error["error"]["field"]),
        (400, &json!("to")),
        "{error}"
    );
    let (status, error) = api
        .post(
            &format!("/api/tasks/{id}/backfill"),
            json!({"to": to.to_rfc3339()}),
        )
        .await;
    assert_eq!(
        (status, &error["error"]["field"]),
        (400, &json!("from")),
        "{error}"
    );
    assert_eq!(api.instances(id).await.len(), 6, "refusals change nothing");
    executor.stop().await;
}

/// A backfill follows the task's overlap policy: under SKIP, while its first run is open the
/// later ones are SKIPPED as they come due.
async fn backfill_follows_the_overlap_policy(store: TestStore) {
    let mut config = config(&store, false, "policy");
    config.scheduler.backfill_per_sec = 1;
    let ax = start_ax(&config).await;
    let api = Api::new(&ax);
    let executor = Executor::start(Reply::Accepted).await;
    let id = api
        .create_task(
            json!({"name": unique_name("backfill"), "cron": "0 * * * * *",
            "handlerUrl": executor.url, "enabled": false, "overlap": "SKIP",
            "timeoutMs": 60_000}),
        )
        .await["id"]
        .as_i64()
        .expect("id");
    let to = DateTime::from_timestamp(Utc::now().timestamp() / 60 * 60, 0).expect("time");
    let range =
        json!({"from": (to - chrono::Duration::minutes(3)).to_rfc3339(), "to": to.to_rfc3339()});
    let (status, done) = api.post(&format!("/api/tasks/{id}/backfill"), range).await;
    assert_eq!((status, done), (202, json!({"runs": 3, "existing": 0})));
    executor.wait_for(1, Duration::from_secs(4)).await;
    sleep_secs(3.5).await;
    let mut runs = api.instances(id).await;
    runs.reverse();
    assert_eq!(
        statuses(&runs),
        ["RUNNING", "SKIPPED", "SKIPPED"],
        "{runs:?}"
    );
    assert_eq!(executor.received().len(), 1);
    executor.stop().await;
}

/// Jitter: each run goes out at its offset after its nominal time, the offset fixed by
/// (taskId, scheduledAt); scheduledAt stays nominal.
async fn jitter_delays_each_run_by_its_offset(store: TestStore) {
    let ax = start_ax(&config(&store, false, "policy")).await;
    let api = Api::new(&ax);
    let executor = Executor::start(Reply::Success).await;
    let task = api
        .create_task(json!({"name": unique_name("jitter"), "cron": "* * * * * *",
            "handlerUrl": executor.url, "jitterSecs": 3}))
        .await;
    let id = task["id"].as_i64().expect("id");
    assert_eq!(task["jitterSecs"], 3);
    let sent = executor.wait_for(6, Duration::from_secs(12)).await;
    assert!(sent.len() >= 6);
    let mut offsets = std::collections::HashSet::new();
    for delivery in &sent {
        let scheduled = time(&delivery.body["scheduledAt"]);
        assert_eq!(scheduled.timestamp_subsec_millis(), 0, "nominal time");
        let offset = jitter_offset(TaskId(id), scheduled, 3);
        offsets.insert(offset.num_seconds());
        let due = scheduled + offset;
        assert!(delivery.wall >= due, "not before its offset: {delivery:?}");
        assert!(
            delivery.wall < due + chrono::Duration::milliseconds(1500),
            "at its offset: due {due}, sent {}",
            delivery.wall
        );
        let (_, run) = api
            .get(&format!("/api/instances/{}", delivery.request_id))
            .await;
        // The run is due at its offset (one of offset 0 goes out as any run, at its fire time).
        let trigger_at = time(&run["triggerAt"]);
        assert!(
            trigger_at >= due && trigger_at < due + chrono::Duration::milliseconds(1500),
            "triggerAt at its offset {due}: {run}"
        );
    }
    assert!(
        offsets.len() > 1,
        "offsets differ between runs: {offsets:?}"
    );
    executor.stop().await;
}

on_each_backend!(
    skip_records_overlapping_runs_skipped,
    sqlite: skip_sqlite,
    mariadb: skip_mysql_two_processes,
    postgres: skip_postgres
);

#[actix_rt::test(system = "crate::common::TestSystem")]
async fn buffer_one_mysql() {
    buffer_one_holds_one_run(TestStore::mysql()).await;
}

#[actix_rt::test(system = "crate::common::TestSystem")]
async fn replace_mysql() {
    replace_cancels_the_earlier_run(TestStore::mysql()).await;
}

#[actix_rt::test(system = "crate::common::TestSystem")]
async fn allow_sqlite() {
    allow_sends_every_run(TestStore::sqlite()).await;
}

on_each_backend!(
    cancel_ends_an_open_run,
    sqlite: cancel_sqlite,
    mariadb: cancel_mysql,
    postgres: cancel_postgres
);

on_each_backend!(
    backfill_fills_a_range_once,
    sqlite: backfill_sqlite,
    mariadb: backfill_mysql,
    postgres: backfill_postgres
);

#[actix_rt::test(system = "crate::common::TestSystem")]
async fn backfill_overlap_mysql() {
    backfill_follows_the_overlap_policy(TestStore::mysql()).await;
}

#[actix_rt::test(system = "crate::common::TestSystem")]
async fn jitter_mysql() {
    jitter_delays_each_run_by_its_offset(TestStore::mysql()).await;
}

/// A task's cron matches local time in its `timeZone`; every time shown stays UTC. An unknown
/// zone is a 400 naming `timeZone`.
async fn time_zones_drive_the_schedule(store: TestStore) {
    let ax = start_ax(&config(&store, false, "policy")).await;
    let api = Api::new(&ax);
    let body = json!({"name": unique_name("zoned"), "cron": "0 30 9 * * *",
        "handlerUrl": "http://127.0.0.1:9/run", "timeZone": "Asia/Kathmandu"});
    let task = api.create_task(body.clone()).await;
    assert_eq!(task["timeZone"], "Asia/Kathmandu");
    // 09:30 in Kathmandu (+05:45) is 03:45 UTC.
    let next = time(&task["nextRunAt"]);
    assert_eq!(next.format("%H:%M:%S").to_string(), "03:45:00", "{task}");
    assert!(next > Utc::now() && next <= Utc::now() + chrono::Duration::days(1));
    let id = task["id"].as_i64().expect("id");
    let (status, moved) = api
        .call(
            "PATCH",
            &format!("/api/tasks/{id}"),
            Some(json!({"timeZone": "America/New_York"})),
        )
        .await;
    assert_eq!(status, 200, "{moved}");
    let hour = time(&moved["nextRunAt"]).format("%H:%M").to_string();
    assert!(
        hour == "13:30" || hour == "14:30",
        "09:30 in New York: {hour}"
    );
    let (status, reset) = api
        .call(
            "PATCH",
            &format!("/api/tasks/{id}"),
            Some(json!({"timeZone": null})),
        )
        .await;
    assert_eq!(status, 200);
    assert_eq!(reset["timeZone"], "UTC");
    assert_eq!(
        time(&reset["nextRunAt"]).format("%H:%M").to_string(),
        "09:30"
    );

    let mut bad = body;
    bad["name"] = json!(unique_name("zoned"));
    bad["timeZone"] = json!("Mars/Olympus_Mons");
    let (status, error) = api.post("/api/tasks", bad).await;
    assert_eq!(status, 400);
    assert_eq!(error["error"]["field"], "timeZone", "{error}");
    assert!(error["error"]["message"]
        .as_str()
        .is_some_and(|m| m.contains("Mars/Olympus_Mons")));
}

on_each_backend!(
    time_zones_drive_the_schedule,
    sqlite: time_zones_sqlite,
    mariadb: time_zones_mysql,
    postgres: time_zones_postgres
);

/// `GET /api/cron/next`: the DST gap in Berlin, as UTC and local times with the note,
/// and the expression in English; bad input names its parameter.
#[actix_rt::test(system = "crate::common::TestSystem")]
async fn cron_preview_shows_dst_notes() {
    let store = TestStore::sqlite();
    let ax = start_ax(&config(&store, false, "policy")).await;
    let api = Api::new(&ax);
    let (status, preview) = api
        .get("/api/cron/next?expr=0%2030%202%20*%20*%20*&tz=Europe/Berlin&from=2027-03-27T12:00:00Z&count=2")
        .await;
    assert_eq!(status, 200, "{preview}");
    assert_eq!(
        preview["times"],
        json!([
            {"utc": "2027-03-28T01:00:00.000Z", "local": "2027-03-28T03:00:00.000+02:00",
             "note": "moved from 02:30 (DST gap)"},
            {"utc": "2027-03-29T00:30:00.000Z", "local": "2027-03-29T02:30:00.000+02:00",
             "note": null},
        ])
    );
    let description = preview["description"].as_str().expect("description");
    assert!(description.contains("02:30"), "{description}");
    let (status, weekdays) = api
        .get("/api/cron/next?expr=0%2030%209%20*%20*%20MON-FRI")
        .await;
    assert_eq!(status, 200);
    assert_eq!(weekdays["times"].as_array().map(Vec::len), Some(10));
    assert_eq!(weekdays["description"], "At 09:30, Monday through Friday");
    // The series stops at the end of 9999, the last time the API takes.
    let (status, last) = api
        .get("/api/cron/next?expr=*%20*%20*%20*%20*%20*&from=9999-12-31T23:59:58Z&count=5")
        .await;
    assert_eq!(status, 200, "{last}");
    assert_eq!(
        last["times"],
        json!([{"utc": "9999-12-31T23:59:59.000Z", "local": "9999-12-31T23:59:59.000Z",
                "note": null}])
    );
    for (query, field) in [
        ("expr=61%20*%20*%20*%20*%20*", "expr"),
        ("tz=UTC", "expr"),
        ("expr=*%20*%20*%20*%20*&tz=Nowhere/Town", "tz"),
        ("expr=*%20*%20*%20*%20*&count=101", "count"),
        ("expr=*%20*%20*%20*%20*&from=yesterday", "from"),
    ] {
        let (status, error) = api.get(&format!("/api/cron/next?{query}")).await;
        assert_eq!(status, 400, "{query}: {error}");
        assert_eq!(error["error"]["field"], field, "{query}: {error}");
    }
    let (_, error) = api.get("/api/cron/next?expr=61%20*%20*%20*%20*%20*").await;
    assert!(
        error["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("second")),
        "the parser's message: {error}"
    );
}
