//! Log lines and progress reach the run's log in ax, in order, before its result.

use std::time::Duration;

use ax_executor::{Failed, Run};
use serde_json::{json, Value};

use crate::harness::{executor, Ax, Served};

#[actix_web::test]
async fn log_lines_and_progress_are_on_the_run() {
    let ax = Ax::start().await;
    let served = Served::start(executor(&ax).reply_within(Duration::ZERO).handle(
        "/export",
        |run: Run<Value>| async move {
            run.log("exporting");
            run.progress(10);
            tokio::time::sleep(Duration::from_millis(700)).await;
            // More than a batch at once, then the last progress.
            run.log_lines((0..250).map(|i| format!("row {i}")));
            run.progress(50);
            Ok::<_, Failed>("exported")
        },
    ))
    .await;
    let task = ax
        .task(json!({"handlerUrl": format!("{}/export", served.base)}))
        .await;
    let request_id = ax.trigger(task).await;
    let run = ax.ended(&request_id).await;
    assert_eq!(run["status"], "SUCCESS", "{run}");
    let attempts = ax.log(&request_id).await;
    assert_eq!(attempts.len(), 1, "{attempts:?}");
    let (lines, progress) = &attempts[0];
    let mut want = vec!["exporting".to_string()];
    want.extend((0..250).map(|i| format!("row {i}")));
    assert_eq!(lines, &want);
    assert_eq!(progress, &json!(50));
    served.shutdown().await.expect("a clean shutdown");
}
