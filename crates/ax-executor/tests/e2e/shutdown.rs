//! Processes that stop: killed with SIGKILL mid-run (ax retries the run elsewhere in time),
//! and stopped with SIGTERM (the run in flight finishes, or is reported past the grace).

use std::time::Duration;

use serde_json::json;

use crate::harness::{free_port, start_example, Ax};

fn example_env(port: u16, step_ms: u64) -> Vec<(&'static str, String)> {
    vec![
        ("EXECUTOR_ADDR", format!("127.0.0.1:{port}")),
        ("STEP_MS", step_ms.to_string()),
    ]
}

#[actix_web::test]
async fn a_run_killed_mid_way_is_retried_with_the_same_request_id() {
    let ax = Ax::start().await;
    let port = free_port();
    let mut first = start_example("long_job", port, &ax, &example_env(port, 1000)).await;
    let task = ax
        .task(
            json!({"handlerUrl": format!("http://127.0.0.1:{port}/export"),
            "params": {"steps": 20}, "timeoutMs": 4000, "maxRetry": 3}),
        )
        .await;
    let request_id = ax.trigger(task).await;
    // RUNNING: the 202 is sent, the job at work.
    let running = ax
        .run_in(&request_id, &["RUNNING"], Duration::from_secs(30))
        .await;
    assert_eq!(running["attempt"], 1, "{running}");
    first.signal("KILL");
    assert_eq!(
        first.exited(Duration::from_secs(10)).await,
        None,
        "killed by a signal"
    );

    // Started again (quick this time): ax times the attempt out and delivers it again.
    let _second = start_example("long_job", port, &ax, &example_env(port, 10)).await;
    let run = ax.ended(&request_id).await;
    assert_eq!(run["status"], "SUCCESS", "{run}");
    assert_eq!(run["requestId"], request_id.as_str());
    assert!(run["attempt"].as_i64() >= Some(2), "{run}");
    assert_eq!(run["attempts"][0]["code"], "TIMEOUT", "{run}");
    assert_eq!(run["message"], "exported in 20 steps", "{run}");
}

/// A long job of `steps` at work when its executor (run with `env`) gets SIGTERM: the
/// executor process, and the run once it ended.
async fn terminated_mid_run(
    ax: &Ax,
    port: u16,
    env: &[(&'static str, String)],
    (steps, timeout_ms): (u32, u64),
) -> (crate::harness::Process, String, serde_json::Value) {
    let executor = start_example("long_job", port, ax, env).await;
    let task = ax
        .task(
            json!({"handlerUrl": format!("http://127.0.0.1:{port}/export"),
            "params": {"steps": steps}, "timeoutMs": timeout_ms}),
        )
        .await;
    let request_id = ax.trigger(task).await;
    ax.run_in(&request_id, &["RUNNING"], Duration::from_secs(30))
        .await;
    executor.signal("TERM");
    let run = ax.ended(&request_id).await;
    (executor, request_id, run)
}

#[actix_web::test]
async fn sigterm_lets_the_run_in_flight_finish() {
    let ax = Ax::start().await;
    let port = free_port();
    let (mut executor, request_id, run) =
        terminated_mid_run(&ax, port, &example_env(port, 400), (10, 30_000)).await;
    assert_eq!(run["status"], "SUCCESS", "{run}");
    assert_eq!(run["attempt"], 1, "{run}");
    assert_eq!(executor.exited(Duration::from_secs(20)).await, Some(0));
    let attempts = ax.log(&request_id).await;
    let lines = &attempts[0].0;
    assert!(
        lines.iter().any(|line| line.starts_with("shutdown asked")),
        "the job saw run.stopping(): {lines:?}"
    );
    assert_eq!(lines.last().map(String::as_str), Some("step 10/10 written"));
}

#[actix_web::test]
async fn sigterm_reports_a_run_still_at_work_past_the_grace() {
    let ax = Ax::start().await;
    let port = free_port();
    let mut env = example_env(port, 100);
    env.push(("SHUTDOWN_GRACE_MS", "500".into()));
    let (mut executor, _, run) = terminated_mid_run(&ax, port, &env, (300, 60_000)).await;
    assert_eq!(run["status"], "FAILED", "{run}");
    assert_eq!(run["code"], "EXECUTOR_SHUTDOWN", "{run}");
    assert_eq!(
        run["message"], "the executor shut down before the run ended",
        "{run}"
    );
    assert_eq!(executor.exited(Duration::from_secs(20)).await, Some(0));
}
