//! Tasks for the dashboard's list of failing tasks: each had a run fail, and its latest run is
//! now failed, under way (answered `202`), waiting for its next attempt, or a success.

use std::time::Duration;

use serde_json::{json, Value};

use super::{unique_name, Api, Executor, Reply};

/// The tasks, by what their latest run is doing.
pub struct FailingStates {
    pub failing: i64,
    pub running: i64,
    pub retrying: i64,
    pub recovered: i64,
}

/// Executors answering every way the states need.
pub struct Answering {
    pub failed: Executor,
    pub accepted: Executor,
    pub succeeded: Executor,
}

impl Answering {
    pub async fn start() -> Answering {
        Answering {
            failed: Executor::start(Reply::Failed).await,
            accepted: Executor::start(Reply::Accepted).await,
            succeeded: Executor::start(Reply::Success).await,
        }
    }

    pub async fn stop(self) {
        for executor in [self.failed, self.accepted, self.succeeded] {
            executor.stop().await;
        }
    }
}

/// Makes the four tasks in `scene`: each fails a manual run, then is changed by `change` and
/// run again (the failing one is not run again).
pub async fn failing_states(api: &Api, scene: &str, answering: &Answering) -> FailingStates {
    let retry_later = json!({"maxRetry": 2, "retryBackoffSecs": 600});
    let states = [
        ("failing", None),
        (
            "running",
            Some(json!({"handlerUrl": answering.accepted.url})),
        ),
        ("retrying", Some(retry_later)),
        (
            "recovered",
            Some(json!({"handlerUrl": answering.succeeded.url})),
        ),
    ];
    let mut ids = Vec::new();
    for (name, change) in states {
        let task = api
            .create_task(
                json!({"name": unique_name(name), "scene": scene, "cron": "0 0 3 1 1 *",
                "handlerUrl": answering.failed.url, "maxRetry": 0}),
            )
            .await;
        let id = task["id"].as_i64().expect("id");
        let failed = trigger(api, id).await;
        wait(api, &failed, "FAILED").await;
        if let Some(change) = change {
            let (status, body) = api
                .call("PATCH", &format!("/api/tasks/{id}"), Some(change))
                .await;
            assert_eq!(status, 200, "{body}");
            let again = trigger(api, id).await;
            match name {
                "running" => drop(wait(api, &again, "RUNNING").await),
                // Its first attempt failed; the next waits ten minutes.
                "retrying" => wait_attempt(api, &again, 2).await,
                _ => drop(wait(api, &again, "SUCCESS").await),
            }
        }
        ids.push(id);
    }
    FailingStates {
        failing: ids[0],
        running: ids[1],
        retrying: ids[2],
        recovered: ids[3],
    }
}

/// Fires a manual run of task `id`: its request id.
async fn trigger(api: &Api, id: i64) -> String {
    let (status, run) = api
        .post(&format!("/api/tasks/{id}/trigger"), json!({}))
        .await;
    assert_eq!(status, 201, "{run}");
    run["requestId"].as_str().expect("requestId").to_string()
}

async fn wait(api: &Api, request_id: &str, status: &str) -> Value {
    api.wait_status(
        &format!("/api/instances/{request_id}"),
        status,
        Duration::from_secs(10),
    )
    .await
}

/// Waits until the run is at `attempt` (a failed one retried).
async fn wait_attempt(api: &Api, request_id: &str, attempt: i64) {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let (_, run) = api.get(&format!("/api/instances/{request_id}")).await;
        if run["attempt"] == json!(attempt) && run["status"] == "READY" {
            return;
        }
        assert!(std::time::Instant::now() < deadline, "{run}");
        actix_rt::time::sleep(Duration::from_millis(50)).await;
    }
}
