//! Operating ax, end to end: pause and resume (task and scene), manual runs, one-level
//! dependencies, the run history and task stats — on MariaDB + Redis and on SQLite.

use std::time::Duration;

use serde_json::{json, Value};

use crate::common::{config, on_each_backend, start_ax, Api, Executor, Reply, TestStore};

fn task(name: &str, scene: &str, cron: &str, handler: &str) -> Value {
    json!({"name": name, "scene": scene, "cron": cron, "handlerUrl": handler, "maxRetry": 0})
}

fn deliveries_of(executor: &Executor, task_id: i64) -> usize {
    executor
        .received()
        .iter()
        .filter(|r| r.body["taskId"] == task_id)
        .count()
}

/// A paused task (or scene) fires no more — also not from entries already in the wheel — and
/// resuming starts from now, with no burst of the runs that fell in the pause.
async fn pause_and_resume(store: TestStore) {
    let ax = start_ax(&config(&store, store.is_shared(), "ops")).await;
    let api = Api::new(&ax);
    let executor = Executor::start(Reply::Success).await;
    let a = api
        .create_task(task("a", "billing", "* * * * * *", &executor.url))
        .await;
    let b = api
        .create_task(task("b", "billing", "* * * * * *", &executor.url))
        .await;
    let c = api
        .create_task(task("c", "reports", "* * * * * *", &executor.url))
        .await;
    let id = |t: &Value| t["id"].as_i64().expect("id");
    executor.wait_for(6, Duration::from_secs(5)).await;

    let (status, paused) = api
        .post(&format!("/api/tasks/{}/pause", id(&a)), json!({}))
        .await;
    assert_eq!(status, 200, "{paused}");
    assert_eq!(
        (paused["status"].as_str(), &paused["nextRunAt"]),
        (Some("PAUSED"), &Value::Null)
    );
    let (status, reply) = api.post("/api/scenes/reports/pause", json!({})).await;
    assert_eq!((status, &reply["paused"]), (200, &json!(1)), "{reply}");
    let (_, scenes) = api.get("/api/scenes").await;
    let billing = scenes["items"]
        .as_array()
        .and_then(|s| s.iter().find(|s| s["scene"] == "billing"))
        .cloned()
        .expect("billing scene");
    assert_eq!(billing["tasks"], json!({"ENABLED": 1, "PAUSED": 1}));
    assert_eq!(billing["total"], 2);

    // Entries already in the wheel for the next second must not fire either.
    actix_rt::time::sleep(Duration::from_millis(1200)).await;
    let (a_before, c_before) = (
        deliveries_of(&executor, id(&a)),
        deliveries_of(&executor, id(&c)),
    );
    let b_before = deliveries_of(&executor, id(&b));
    // At least three seconds, and until the enabled task fired twice more.
    let waited = std::time::Instant::now();
    while waited.elapsed() < Duration::from_secs(3)
        || (deliveries_of(&executor, id(&b)) < b_before + 2
            && waited.elapsed() < Duration::from_secs(15))
    {
        actix_rt::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        deliveries_of(&executor, id(&a)),
        a_before,
        "paused task fired"
    );
    assert_eq!(
        deliveries_of(&executor, id(&c)),
        c_before,
        "paused scene fired"
    );
    assert!(
        deliveries_of(&executor, id(&b)) >= b_before + 2,
        "the rest keeps firing"
    );

    // Resume: one run per second from now on, none for the paused seconds.
    let (status, resumed) = api
        .post(&format!("/api/tasks/{}/resume", id(&a)), json!({}))
        .await;
    assert_eq!(
        (status, resumed["status"].as_str()),
        (200, Some("ENABLED")),
        "{resumed}"
    );
    let (status, reply) = api.post("/api/scenes/reports/resume", json!({})).await;
    assert_eq!((status, &reply["resumed"]), (200, &json!(1)), "{reply}");
    let resumed_at = chrono::Utc::now();
    actix_rt::time::sleep(Duration::from_millis(2500)).await;
    for t in [&a, &c] {
        let runs = api.instances(id(t)).await;
        let after: Vec<&Value> = runs
            .iter()
            .filter(|r| r["triggerAt"].as_str() > Some(resumed_at.to_rfc3339().as_str()))
            .collect();
        assert!(!after.is_empty(), "task {} fires again", id(t));
        for run in after {
            let scheduled = run["scheduledAt"].as_str().expect("scheduledAt");
            assert!(
                scheduled >= &resumed_at.format("%Y-%m-%dT%H:%M:%S").to_string()[..],
                "a run from the pause fired: {run}"
            );
        }
    }
    let (status, reply) = api.post("/api/scenes/no%20such/pause", json!({})).await;
    assert_eq!(
        (status, &reply["error"]["field"]),
        (400, &json!("scene")),
        "{reply}"
    );
    let (status, _) = api.post("/api/tasks/999999/pause", json!({})).await;
    assert_eq!(status, 404);
    ax.shutdown().await;
}

on_each_backend!(
    pause_and_resume,
    sqlite: pause_and_resume_on_sqlite,
    mariadb: pause_and_resume_on_mariadb,
    postgres: pause_and_resume_on_postgres
);

/// Waits at least 3 s, and until task `live` has `more` deliveries beyond `since` (at most
/// 15 s); returns whether it has.
async fn wait_for_fires(executor: &Executor, live: i64, since: usize, more: usize) -> bool {
    let waited = std::time::Instant::now();
    loop {
        let fired = deliveries_of(executor, live) >= since + more;
        if (fired && waited.elapsed() >= Duration::from_secs(3))
            || waited.elapsed() >= Duration::from_secs(15)
        {
            return fired;
        }
        actix_rt::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A scene's pause is its own state: its tasks stop firing, on every ax process of the store,
/// a task created in it meanwhile too, and their own state stays; resuming the scene leaves a
/// task paused by itself paused, and the others fire again.
async fn a_scene_pause_is_its_own(store: TestStore) {
    let clustered = store.is_shared();
    let scene = crate::common::unique_name("quiet");
    let ax = start_ax(&config(&store, clustered, "scene-a")).await;
    // On MariaDB a second process shares the store: the pause must reach its wheel too.
    let other = match clustered {
        true => Some(start_ax(&config(&store, true, "scene-b")).await),
        false => None,
    };
    let api = Api::new(&ax);
    let executor = Executor::start(Reply::Success).await;
    let every_second = |name: &str, scene: &str| task(name, scene, "* * * * * *", &executor.url);
    let id = |t: &Value| t["id"].as_i64().expect("id");
    let own = api.create_task(every_second("own", &scene)).await;
    let rest = api.create_task(every_second("rest", &scene)).await;
    let elsewhere = api.create_task(every_second("elsewhere", "busy")).await;
    executor.wait_for(6, Duration::from_secs(5)).await;

    let (status, _) = api
        .post(&format!("/api/tasks/{}/pause", id(&own)), json!({}))
        .await;
    assert_eq!(status, 200);
    let (status, reply) = api
        .post(&format!("/api/scenes/{scene}/pause"), json!({}))
        .await;
    assert_eq!((status, &reply["paused"]), (200, &json!(1)), "{reply}");
    let (_, scenes) = api.get("/api/scenes").await;
    let listed = |name: &str| {
        scenes["items"]
            .as_array()
            .and_then(|s| s.iter().find(|s| s["scene"] == name))
            .cloned()
            .unwrap_or_else(|| panic!("scene {name}: {scenes}"))
    };
    assert_eq!(listed(&scene)["paused"], true);
    assert!(listed(&scene)["pausedAt"].is_string(), "{scenes}");
    assert_eq!(listed(&scene)["tasks"], json!({"ENABLED": 1, "PAUSED": 1}));
    assert_eq!(listed("busy")["paused"], false);
    let (_, rest_now) = api.get(&format!("/api/tasks/{}", id(&rest))).await;
    assert_eq!(
        (
            &rest_now["status"],
            &rest_now["scenePaused"],
            &rest_now["nextRunAt"]
        ),
        (&json!("ENABLED"), &json!(true), &Value::Null),
        "its own state stays"
    );
    let late = api.create_task(every_second("late", &scene)).await;
    assert_eq!(
        (&late["scenePaused"], &late["nextRunAt"]),
        (&json!(true), &Value::Null)
    );

    // Nothing of the scene fires (entries already in the wheels neither); the rest does.
    actix_rt::time::sleep(Duration::from_millis(1200)).await;
    let quiet = [id(&own), id(&rest), id(&late)];
    let before: Vec<usize> = quiet.iter().map(|t| deliveries_of(&executor, *t)).collect();
    let busy = deliveries_of(&executor, id(&elsewhere));
    assert!(
        wait_for_fires(&executor, id(&elsewhere), busy, 2).await,
        "another scene fires on"
    );
    let after: Vec<usize> = quiet.iter().map(|t| deliveries_of(&executor, *t)).collect();
    assert_eq!(after, before, "a paused scene fired");

    // Resumed: its enabled tasks fire again from now; the one paused by itself does not.
    let (status, reply) = api
        .post(&format!("/api/scenes/{scene}/resume"), json!({}))
        .await;
    assert_eq!((status, &reply["resumed"]), (200, &json!(2)), "{reply}");
    let own_before = deliveries_of(&executor, id(&own));
    for live in [id(&rest), id(&late)] {
        let since = deliveries_of(&executor, live);
        assert!(
            wait_for_fires(&executor, live, since, 2).await,
            "task {live} fires again"
        );
    }
    assert_eq!(
        deliveries_of(&executor, id(&own)),
        own_before,
        "paused by itself"
    );
    let (_, own_now) = api.get(&format!("/api/tasks/{}", id(&own))).await;
    assert_eq!(
        (&own_now["status"], &own_now["scenePaused"]),
        (&json!("PAUSED"), &json!(false))
    );
    let (status, reply) = api
        .post(&format!("/api/scenes/{scene}/resume"), json!({}))
        .await;
    assert_eq!(
        (status, &reply["resumed"]),
        (200, &json!(0)),
        "not paused: {reply}"
    );
    let audit = api.get("/api/audit?limit=50").await.1;
    let actions: Vec<&str> = audit["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| e["target"] == format!("scene {scene}"))
        .filter_map(|e| e["action"].as_str())
        .collect();
    assert_eq!(
        actions,
        ["scene.resume", "scene.resume", "scene.pause"],
        "{audit}"
    );
    if let Some(other) = other {
        other.shutdown().await;
    }
    ax.shutdown().await;
}

on_each_backend!(
    a_scene_pause_is_its_own,
    sqlite: a_scene_pause_on_sqlite,
    mariadb: a_scene_pause_on_mariadb_with_two_processes,
    postgres: a_scene_pause_on_postgres
);

/// A manual run fires now with its own request id and params, outside the schedule.
#[actix_rt::test(system = "crate::common::TestSystem")]
async fn manual_run_fires_now_and_leaves_the_schedule_alone() {
    let store = TestStore::sqlite();
    let ax = start_ax(&config(&store, false, "manual")).await;
    let api = Api::new(&ax);
    let executor = Executor::start(Reply::Success).await;
    let yearly = api
        .create_task(task("yearly", "ops", "0 0 0 1 1 *", &executor.url))
        .await;
    let id = yearly["id"].as_i64().expect("id");
    let (status, run) = api
        .post(
            &format!("/api/tasks/{id}/trigger"),
            json!({"params": {"date": "2027-01-01"}}),
        )
        .await;
    assert_eq!(status, 201, "{run}");
    assert_eq!(run["triggerType"], "MANUAL");
    let delivery = executor.wait_for(1, Duration::from_secs(5)).await[0].clone();
    assert_eq!(delivery.request_id, run["requestId"]);
    assert_eq!(delivery.body["params"], json!({"date": "2027-01-01"}));
    let (status, again) = api
        .post(&format!("/api/tasks/{id}/trigger"), json!({}))
        .await;
    assert_eq!(status, 201);
    assert_ne!(
        again["requestId"], run["requestId"],
        "every manual run has its own id"
    );
    let second = executor.wait_for(2, Duration::from_secs(5)).await[1].clone();
    assert_eq!(
        second.body["params"],
        json!({}),
        "without an override, the task's params"
    );
    let (_, after) = api.get(&format!("/api/tasks/{id}")).await;
    assert_eq!(
        after["nextRunAt"], yearly["nextRunAt"],
        "the schedule is untouched"
    );
    let runs = api.wait_final(id, 2, Duration::from_secs(5)).await;
    assert!(runs.iter().all(|r| r["status"] == "SUCCESS"), "{runs:?}");
    let (status, reply) = api
        .post(&format!("/api/tasks/{id}/trigger"), json!({"params": 5}))
        .await;
    assert_eq!((status, &reply["error"]["field"]), (400, &json!("params")));
    let (status, _) = api.post("/api/tasks/999999/trigger", json!({})).await;
    assert_eq!(status, 404);
    ax.shutdown().await;
}

on_each_backend!(one_level_dependencies_on, mariadb: one_level_dependencies, postgres: one_level_dependencies_on_postgres);

/// B waits on A: B's run is released when A's latest run at or before it succeeded, fails
/// with UPSTREAM_FAILED when it failed, and DEPENDENCY_TIMEOUT when A never ran.
async fn one_level_dependencies_on(store: TestStore) {
    let ax = start_ax(&config(&store, true, "deps")).await;
    let api = Api::new(&ax);
    let ok = Executor::start(Reply::Success).await;
    let failing = Executor::start(Reply::Status(500)).await;
    let upstream_ok = api
        .create_task(task("up-ok", "etl", "*/2 * * * * *", &ok.url))
        .await;
    let upstream_bad = api
        .create_task(task("up-bad", "etl", "*/2 * * * * *", &failing.url))
        .await;
    let never = api
        .create_task(task("up-never", "etl", "0 0 0 1 1 *", &ok.url))
        .await;
    let id = |t: &Value| t["id"].as_i64().expect("id");
    let mut body = task("down-ok", "etl", "*/2 * * * * *", &ok.url);
    body["dependsOn"] = json!([id(&upstream_ok)]);
    let down_ok = api.create_task(body).await;
    assert_eq!(down_ok["dependsOn"], json!([id(&upstream_ok)]));
    let mut body = task("down-bad", "etl", "*/2 * * * * *", &ok.url);
    body["dependsOn"] = json!([id(&upstream_ok), id(&upstream_bad)]);
    let down_bad = api.create_task(body).await;
    let mut body = task("down-wait", "etl", "*/2 * * * * *", &ok.url);
    body["dependsOn"] = json!([id(&never)]);
    body["dependencyTimeoutSecs"] = json!(2);
    let down_wait = api.create_task(body).await;

    // Unknown upstreams and cycles are rejected, and nothing changes.
    let mut body = task("x", "etl", "* * * * * *", &ok.url);
    body["dependsOn"] = json!([987654]);
    let (status, reply) = api.post("/api/tasks", body).await;
    assert_eq!(
        (status, &reply["error"]["field"]),
        (400, &json!("dependsOn")),
        "{reply}"
    );
    let mut cyclic = task("up-ok", "etl", "*/2 * * * * *", &ok.url);
    cyclic["dependsOn"] = json!([id(&down_ok)]);
    let (status, reply) = api
        .call(
            "PUT",
            &format!("/api/tasks/{}", id(&upstream_ok)),
            Some(cyclic),
        )
        .await;
    assert_eq!(
        (status, &reply["error"]["field"]),
        (400, &json!("dependsOn")),
        "{reply}"
    );
    let (_, unchanged) = api.get(&format!("/api/tasks/{}", id(&upstream_ok))).await;
    assert_eq!(unchanged["dependsOn"], json!([]));

    let released = api
        .wait_final(id(&down_ok), 1, Duration::from_secs(10))
        .await;
    let done = released
        .iter()
        .find(|r| r["status"] == "SUCCESS")
        .expect("a released run");
    // It was released only once an upstream run at or before it had succeeded (the latest
    // one when its upstreams were checked): that run finished, and was delivered, first.
    let up_runs = api.instances(id(&upstream_ok)).await;
    let delivered = ok.received();
    let pos = |rid: &Value| delivered.iter().position(|r| r.request_id == *rid);
    let released_after = up_runs.iter().any(|up| {
        up["scheduledAt"].as_str() <= done["scheduledAt"].as_str()
            && up["status"] == "SUCCESS"
            && up["finishedAt"].as_str() <= done["finishedAt"].as_str()
            && pos(&up["requestId"]) < pos(&done["requestId"])
    });
    assert!(
        released_after,
        "released before any upstream success: {done}"
    );

    let failed = api
        .wait_final(id(&down_bad), 1, Duration::from_secs(10))
        .await;
    let run = failed
        .iter()
        .find(|r| r["status"] == "FAILED")
        .expect("failed run");
    assert_eq!(run["code"], "UPSTREAM_FAILED", "{run}");
    assert_eq!(run["retryCount"], 0);

    let timed_out = api
        .wait_final(id(&down_wait), 1, Duration::from_secs(10))
        .await;
    let run = timed_out
        .iter()
        .find(|r| r["status"] == "FAILED")
        .expect("failed run");
    assert_eq!(run["code"], "DEPENDENCY_TIMEOUT", "{run}");
    assert!(
        ok.received()
            .iter()
            .all(|r| r.body["taskId"] != id(&down_bad)),
        "never dispatched"
    );
    ax.shutdown().await;
}

/// The run history filters and pages with a cursor; stats count and measure lag.
#[actix_rt::test(system = "crate::common::TestSystem")]
async fn history_and_stats() {
    let store = TestStore::sqlite();
    let ax = start_ax(&config(&store, false, "hist")).await;
    let api = Api::new(&ax);
    let ok = Executor::start(Reply::Success).await;
    let bad = Executor::start(Reply::Status(503)).await;
    let a = api
        .create_task(task("a", "red", "* * * * * *", &ok.url))
        .await;
    let b = api
        .create_task(task("b", "blue", "* * * * * *", &bad.url))
        .await;
    let (a, b) = (a["id"].as_i64().expect("id"), b["id"].as_i64().expect("id"));
    api.wait_final(a, 4, Duration::from_secs(8)).await;
    api.wait_final(b, 4, Duration::from_secs(8)).await;

    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let path = match &cursor {
            Some(c) => format!("/api/instances?taskId={a}&limit=2&cursor={c}"),
            None => format!("/api/instances?taskId={a}&limit=2"),
        };
        let (status, page) = api.get(&path).await;
        assert_eq!(status, 200, "{page}");
        let items = page["items"].as_array().cloned().unwrap_or_default();
        assert!(items.len() <= 2);
        seen.extend(items);
        match page["nextCursor"].as_str() {
            Some(next) => cursor = Some(next.to_string()),
            None => break,
        }
    }
    assert!(seen.len() >= 4);
    assert!(seen.iter().all(|r| r["taskId"] == a));
    let times: Vec<&str> = seen
        .iter()
        .filter_map(|r| r["scheduledAt"].as_str())
        .collect();
    assert!(
        times.windows(2).all(|w| w[0] > w[1]),
        "newest first, no repeats: {times:?}"
    );

    let (_, blue) = api
        .get("/api/instances?scene=blue&status=FAILED&limit=500")
        .await;
    let items = blue["items"].as_array().expect("items");
    assert!(
        !items.is_empty()
            && items
                .iter()
                .all(|r| r["taskId"] == b && r["status"] == "FAILED")
    );
    let from = seen[1]["scheduledAt"].as_str().expect("time");
    let (_, ranged) = api
        .get(&format!("/api/instances?taskId={a}&from={from}&limit=500"))
        .await;
    let ranged = ranged["items"].as_array().expect("items");
    assert!(ranged
        .iter()
        .all(|r| r["scheduledAt"].as_str() >= Some(from)));
    for (query, field) in [
        ("status=DONE", "status"),
        ("from=yesterday", "from"),
        ("cursor=zz", "cursor"),
        ("limit=0", "limit"),
        ("taskId=-3", "taskId"),
    ] {
        let (status, reply) = api.get(&format!("/api/instances?{query}")).await;
        assert_eq!(
            (status, &reply["error"]["field"]),
            (400, &json!(field)),
            "{query}: {reply}"
        );
    }

    let (status, stats) = api
        .get(&format!("/api/tasks/{b}/stats?windowSecs=600"))
        .await;
    assert_eq!(status, 200, "{stats}");
    assert!(stats["byStatus"]["FAILED"].as_i64() >= Some(4), "{stats}");
    assert_eq!(
        stats["total"],
        stats["byStatus"]
            .as_object()
            .map(|m| m.values().filter_map(Value::as_i64).sum::<i64>())
            .unwrap_or(-1)
    );
    let lag = &stats["lagMs"];
    assert!(
        lag["p50"].as_i64() <= lag["p99"].as_i64() && lag["p99"].as_i64() <= lag["max"].as_i64(),
        "{stats}"
    );
    assert!(
        lag["max"].as_i64() < Some(2000),
        "fired within the second: {stats}"
    );
    // The lag is the first dispatch's, never before the run's second (its row is recorded
    // half a second ahead).
    assert!(lag["p50"].as_i64() >= Some(0), "{stats}");
    let (_, runs) = api.get(&format!("/api/instances?taskId={b}&limit=5")).await;
    for run in runs["items"].as_array().expect("items") {
        let (scheduled, sent) = (run["scheduledAt"].as_str(), run["dispatchedAt"].as_str());
        assert!(sent.is_some() && sent >= scheduled, "{run}");
    }
    let (status, _) = api.get(&format!("/api/tasks/{b}/stats?windowSecs=1")).await;
    assert_eq!(status, 400);
    ax.shutdown().await;
}
