//! The schedule ahead: `GET /api/schedule/load`, `ax plan` and `/console/schedule` over tasks
//! made here, on both stores.

use std::process::{Command, Output};

use serde_json::{json, Value};

use crate::common::{config, on_each_backend, start_ax, unique_name, Api, TestStore};

async fn make_tasks(api: &Api) -> (Vec<i64>, i64) {
    let scene = unique_name("hourly");
    let mut hourly = Vec::new();
    for n in 0..3 {
        let task = api
            .create_task(
                json!({"name": format!("report-{n}"), "scene": scene, "cron": "0 0 * * * *",
                "handlerUrl": "http://127.0.0.1:9/run"}),
            )
            .await;
        hourly.push(task["id"].as_i64().expect("id"));
    }
    let ticker = api
        .create_task(
            json!({"name": "ticker", "scene": scene, "cron": "*/10 * * * * *",
            "handlerUrl": "http://127.0.0.1:9/run", "enabled": false}),
        )
        .await;
    (hourly, ticker["id"].as_i64().expect("id"))
}

fn at_top_of_hour(busy: &Value) -> bool {
    busy["at"]
        .as_str()
        .is_some_and(|at| at.ends_with(":00:00.000Z"))
}

async fn the_schedule_ahead(store: TestStore) {
    let ax = start_ax(&config(&store, false, &unique_name("plan"))).await;
    let api = Api::new(&ax);
    let (hourly, ticker) = make_tasks(&api).await;

    let (status, load) = api.get("/api/schedule/load?hours=2").await;
    assert_eq!(status, 200, "{load}");
    let per_minute = load["perMinute"].as_array().expect("perMinute");
    assert_eq!(per_minute.len(), 120);
    let busiest = load["busiest"].as_array().expect("busiest");
    assert!(!busiest.is_empty() && busiest.len() <= 10, "{load}");
    let top = busiest
        .iter()
        .find(|b| at_top_of_hour(b))
        .expect("the top of an hour is busy");
    let firing: Vec<i64> = top["tasks"]
        .as_array()
        .expect("tasks")
        .iter()
        .filter_map(Value::as_i64)
        .collect();
    for id in &hourly {
        assert!(
            firing.contains(id),
            "{id} fires at {}: {firing:?}",
            top["at"]
        );
    }
    assert!(!firing.contains(&ticker), "a disabled task does not fire");
    if !store.is_shared() {
        // A store of its own: the counts are exactly these tasks'.
        assert_eq!(load["tasks"], 3);
        assert_eq!(load["totalRuns"], 6, "3 tasks, 2 hours");
        assert_eq!(per_minute.iter().filter_map(Value::as_u64).sum::<u64>(), 6);
        assert_eq!((busiest.len(), &top["runs"]), (2, &json!(3)));
        assert_eq!(load["busiestShare"], 100.0);
        let from = load["from"].as_str().expect("from");
        let to = load["to"].as_str().expect("to");
        assert!(from.ends_with('Z') && to.ends_with('Z') && from < to);
    }

    for bad in ["hours=0", "hours=169", "hours=abc"] {
        let (status, refusal) = api.get(&format!("/api/schedule/load?{bad}")).await;
        assert_eq!(
            (status, &refusal["error"]["field"]),
            (400, &json!("hours")),
            "{bad}: {refusal}"
        );
    }

    // `ax plan`: the busiest seconds as lines; --json the API's body; a bad --hours is usage.
    let url = format!("http://{}", ax.addr());
    let plan = ax_plan(&["--hours", "2", "--url", &url]).await;
    assert_eq!(
        plan.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&plan.stderr)
    );
    let text = String::from_utf8_lossy(&plan.stdout);
    assert!(
        text.lines()
            .any(|l| l.contains(":00:00.000Z") && l.contains(" runs ") && l.contains("% of tasks")),
        "{text}"
    );
    let json_plan = ax_plan(&["--json", "--url", &url]).await;
    let body: Value = serde_json::from_slice(&json_plan.stdout)
        .unwrap_or_else(|err| panic!("{err}: {}", String::from_utf8_lossy(&json_plan.stderr)));
    assert_eq!(body["perMinute"].as_array().map(Vec::len), Some(24 * 60));
    let bad = ax_plan(&["--hours", "0", "--url", &url]).await;
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("--hours"));

    // The console page: the heat-map and the busiest second named with its tasks.
    let page = awc::Client::default()
        .get(format!("{url}/console/schedule"))
        .send()
        .await;
    let body = page
        .expect("page")
        .body()
        .limit(8 << 20)
        .await
        .expect("body");
    let page = String::from_utf8_lossy(&body);
    assert!(page.contains(r#"id="schedule-heatmap""#), "the heat-map");
    assert_eq!(page.matches(r#"class="cell""#).count(), 24 * 60);
    assert!(
        page.contains("(the top of the hour)</strong> — "),
        "the busiest second named"
    );
    if !store.is_shared() {
        assert!(
            page.contains(&format!("/console/tasks/{}", hourly[0])),
            "its tasks linked"
        );
    }

    for id in hourly.iter().chain([&ticker]) {
        let (status, _) = api.call("DELETE", &format!("/api/tasks/{id}"), None).await;
        assert_eq!(status, 204);
    }
    ax.shutdown().await;
}

on_each_backend!(
    the_schedule_ahead,
    sqlite: the_schedule_ahead_on_sqlite,
    mariadb: the_schedule_ahead_on_mariadb,
    postgres: the_schedule_ahead_on_postgres
);

/// `ax plan` with `args`, run off the test's thread: the ax under test shares that thread's
/// runtime (the database connections it opened at start are driven by it), so blocking it
/// while ax answers would stall those connections.
async fn ax_plan(args: &[&str]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_ax"));
    command.arg("plan").args(args);
    actix_rt::task::spawn_blocking(move || command.output().expect("ax plan"))
        .await
        .expect("ax plan ran")
}
