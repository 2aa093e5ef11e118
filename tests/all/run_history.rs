//! A task's history on its page (stats, failure heat-maps, dependencies) and the upstream run
//! an UPSTREAM_FAILED run links to, on real runs on SQLite and MariaDB.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::common::{
    config, on_each_backend, start_ax, unique_name, Api, Executor, Reply, TestStore,
};

async fn page(ax: &ax_server::app::Ax, path: &str) -> String {
    let client = awc::Client::builder()
        .timeout(Duration::from_secs(10))
        .finish();
    let mut response = client
        .get(format!("http://{}{path}", ax.addr()))
        .send()
        .await
        .unwrap_or_else(|err| panic!("GET {path}: {err}"));
    assert_eq!(response.status().as_u16(), 200, "GET {path}");
    let body = response.body().limit(4 << 20).await.expect("a body");
    String::from_utf8_lossy(&body).into_owned()
}

/// Waits for a run of the task ending with this code.
async fn run_with_code(api: &Api, task: i64, code: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let runs = api.instances(task).await;
        if let Some(run) = runs.iter().find(|run| run["code"] == code) {
            return run.clone();
        }
        assert!(
            Instant::now() < deadline,
            "no {code} run of task {task}: {runs:?}"
        );
        actix_rt::time::sleep(Duration::from_millis(200)).await;
    }
}

async fn history_and_upstream_links(store: TestStore) {
    let ax = start_ax(&config(&store, false, "history")).await;
    let api = Api::new(&ax);
    let failing = Executor::start(Reply::Failed).await;
    let ok = Executor::start(Reply::Success).await;
    let scene = unique_name("history");
    let upstream = api
        .create_task(json!({"name": unique_name("upstream"), "scene": scene, "cron": "* * * * * *", "handlerUrl": failing.url, "maxRetry": 0}))
        .await;
    let up = upstream["id"].as_i64().expect("id");
    let downstream = api
        .create_task(json!({"name": unique_name("downstream"), "scene": scene, "cron": "* * * * * *", "handlerUrl": ok.url, "maxRetry": 0, "dependsOn": [up]}))
        .await;
    let down = downstream["id"].as_i64().expect("id");
    let failed = run_with_code(&api, down, "UPSTREAM_FAILED").await;

    // The run page links to the upstream's run that did not succeed.
    let request_id = failed["requestId"].as_str().expect("requestId");
    let run_page = page(&ax, &format!("/console/runs/{request_id}")).await;
    assert!(run_page.contains("Upstream run that failed"), "{run_page}");
    let linked = run_page
        .split("failed-upstream\"><a href=\"/console/runs/")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .expect("a link to the upstream run");
    let (status, upstream_run) = api.get(&format!("/api/instances/{linked}")).await;
    assert_eq!(status, 200, "{upstream_run}");
    assert_eq!(upstream_run["taskId"], up);
    assert_eq!(upstream_run["status"], "FAILED");

    // The upstream's page: its failures counted, no success, its downstream by name.
    api.wait_final(up, 2, Duration::from_secs(10)).await;
    let task_page = page(&ax, &format!("/console/tasks/{up}")).await;
    let failed_runs = api
        .instances(up)
        .await
        .iter()
        .filter(|run| run["status"] == "FAILED")
        .count();
    assert!(failed_runs >= 1);
    assert!(task_page.contains("0.0 %"), "no run succeeded: {task_page}");
    let counted: u32 = task_page
        .split("class=\"heatmap by-hour\"")
        .nth(1)
        .and_then(|svg| svg.split("</svg>").next())
        .expect("the hourly heat-map")
        .split("data-count=\"")
        .skip(1)
        .filter_map(|cell| cell.split('"').next()?.parse::<u32>().ok())
        .sum();
    assert!(
        counted as usize >= failed_runs,
        "{counted} counted, {failed_runs} failed"
    );
    assert!(
        task_page.contains("class=\"run bad\""),
        "a red bar on the timeline"
    );
    let names = downstream["name"].as_str().expect("name");
    let downstream_links = task_page
        .split("class=\"downstream\"")
        .nth(1)
        .expect("downstreams");
    assert!(downstream_links.contains(&format!("href=\"/console/tasks/{down}\">{names}<")));

    // The scene's page draws both tasks.
    let scene_page = page(&ax, &format!("/console/scenes/{scene}")).await;
    assert!(
        scene_page.contains("svg class=\"timeline\""),
        "{scene_page}"
    );
    assert!(scene_page.contains("class=\"heatmap by-day\""));
    for task in [up, down] {
        api.call("POST", &format!("/api/tasks/{task}/pause"), None)
            .await;
    }
    ax.shutdown().await;
}

on_each_backend!(
    history_and_upstream_links,
    sqlite: history_on_sqlite,
    mariadb: history_on_mysql,
    postgres: history_on_postgres
);
