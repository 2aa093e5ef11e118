//! Past its ceiling ax falls behind in order instead of queueing without bound. The ceiling is
//! made small here: one dispatcher sending one request at a time to an executor that takes
//! 250 ms (4 runs/s), at most 2 runs between the wheel and the dispatchers, and 6 every-second
//! tasks (6 runs/s, 1.5 times the ceiling). While that lasts the wheel falls behind the clock
//! (shown in `/metrics`, told in one WARN line), the runs between it and the dispatchers stay
//! within the bound, and every run is still recorded and delivered once, late, each by itself:
//! no second of any task is folded into another.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use serde_json::json;

use crate::common::{Api, AxProcess, Executor, Reply, TestStore};

const TASKS: usize = 6;

/// A gauge of `/metrics`.
async fn gauge(base: &str, name: &str) -> f64 {
    let client = awc::Client::default();
    let mut response = client
        .get(format!("{base}/metrics"))
        .send()
        .await
        .expect("metrics");
    let body = response.body().await.expect("metrics body");
    let text = String::from_utf8_lossy(&body);
    text.lines()
        .find_map(|line| line.strip_prefix(&format!("{name} ")))
        .and_then(|value| value.trim().parse().ok())
        .unwrap_or_else(|| panic!("{name} not in /metrics:\n{text}"))
}

#[actix_rt::test(system = "crate::common::TestSystem")]
async fn past_its_ceiling_ax_falls_behind_in_order() {
    let store = TestStore::sqlite();
    let dir = tempfile::tempdir().expect("dir");
    let env = [
        ("AX_STORE_URL", store.url()),
        ("AX_DISPATCH_WORKERS", "1".into()),
        ("AX_DISPATCH_MAX_IN_FLIGHT", "1".into()),
        ("AX_MAX_QUEUED_RUNS", "2".into()),
    ]
    .map(|(key, value)| (key.to_string(), value))
    .to_vec();
    let executor = Executor::start(Reply::Slow(Duration::from_millis(250))).await;
    let ax = AxProcess::start(dir.path(), "overload", env).await;
    let api = Api::at(ax.base());
    let mut ids = Vec::new();
    for i in 0..TASKS {
        let task = api
            .create_task(json!({
                "name": format!("busy-{i}"), "cron": "* * * * * *",
                "handlerUrl": executor.url, "maxRetry": 0,
            }))
            .await;
        ids.push(task["id"].as_i64().expect("id"));
    }

    // Offered 6 runs/s against 4: after 10 s the wheel is seconds behind.
    let mut most_behind: f64 = 0.0;
    let mut most_queued: f64 = 0.0;
    let overload = Instant::now();
    while overload.elapsed() < Duration::from_secs(10) {
        actix_rt::time::sleep(Duration::from_millis(500)).await;
        most_behind = most_behind.max(gauge(&ax.base(), "ax_wheel_behind_seconds").await);
        most_queued = most_queued.max(gauge(&ax.base(), "ax_fire_queued_runs").await);
    }
    println!(
        "overload: the wheel at most {most_behind} s behind, at most {most_queued} runs queued"
    );
    assert!(most_behind >= 2.0, "the wheel fell behind: {most_behind} s");
    // The bound, plus the one second (one run per task) the wheel takes while under it.
    assert!(
        most_queued <= (2 + TASKS) as f64,
        "runs between the wheel and the dispatchers: {most_queued}"
    );

    // The load ends: the wheel catches up, and everything it took goes out.
    for id in &ids {
        let (status, reply) = api.post(&format!("/api/tasks/{id}/pause"), json!({})).await;
        assert_eq!(status, 200, "{reply}");
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    while gauge(&ax.base(), "ax_wheel_behind_seconds").await > 0.0
        || gauge(&ax.base(), "ax_fire_queued_runs").await > 0.0
    {
        assert!(Instant::now() < deadline, "the wheel did not catch up");
        actix_rt::time::sleep(Duration::from_millis(200)).await;
    }
    let mut runs = Vec::new();
    for id in &ids {
        runs.push(api.wait_final(*id, 1, Duration::from_secs(30)).await);
    }

    // Every second of every task has its run, none folded into another, each delivered once.
    let delivered: Vec<String> = executor
        .received()
        .iter()
        .map(|d| d.request_id.clone())
        .collect();
    let unique: HashSet<&String> = delivered.iter().collect();
    assert_eq!(unique.len(), delivered.len(), "a run was delivered twice");
    let mut seconds_of: HashMap<i64, Vec<i64>> = HashMap::new();
    for (id, task_runs) in ids.iter().zip(&runs) {
        for run in task_runs {
            assert_eq!(run["status"], "SUCCESS", "{run}");
            let at =
                chrono::DateTime::parse_from_rfc3339(run["scheduledAt"].as_str().unwrap_or(""))
                    .expect("scheduledAt")
                    .timestamp();
            seconds_of.entry(*id).or_default().push(at);
            let request_id = run["requestId"].as_str().unwrap_or_default().to_string();
            assert!(unique.contains(&request_id), "{run} was not delivered");
        }
    }
    for (id, mut seconds) in seconds_of {
        seconds.sort_unstable();
        let (first, last) = (seconds[0], seconds[seconds.len() - 1]);
        assert_eq!(
            seconds,
            (first..=last).collect::<Vec<_>>(),
            "task {id}: every second from the first run to the last has its own run"
        );
    }

    let log = std::fs::read_to_string(ax.log_path()).unwrap_or_default();
    let warnings: Vec<&str> = log
        .lines()
        .filter(|line| line.contains("WARN") && line.contains("behind the clock"))
        .collect();
    assert_eq!(
        warnings.len(),
        1,
        "one warning for the overload: {warnings:#?}"
    );
    let per_run_warnings = log
        .lines()
        .filter(|line| line.contains("WARN") && line.contains("late"))
        .filter(|line| !line.contains("behind the clock"))
        .count();
    assert_eq!(per_run_warnings, 0, "no warning per run:\n{log}");
    assert_eq!(ax.terminate().await, Some(0), "a clean shutdown exits 0");
    executor.stop().await;
}
