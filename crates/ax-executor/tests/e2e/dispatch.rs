//! Dispatches: signatures, dedupe of a re-delivered run, 202 then callback, typed params,
//! a panicking handler.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use ax_executor::{Failed, Run};
use serde::Deserialize;
use serde_json::{json, Value};

use crate::harness::{
    dispatch_body, executor, post_signed, signature_of, unix_now, Ax, Served, SECRET,
};

/// A handler's call count.
fn counter() -> (Arc<AtomicUsize>, Arc<AtomicUsize>) {
    let calls = Arc::new(AtomicUsize::new(0));
    (calls.clone(), calls)
}

#[actix_web::test]
async fn a_run_delivered_twice_is_handled_once() {
    let ax = Ax::start().await;
    let (calls, counted) = counter();
    let served = Served::start(executor(&ax).handle("/slow", move |run: Run<Value>| {
        let counted = counted.clone();
        async move {
            counted.fetch_add(1, Ordering::SeqCst);
            // Longer than the task's timeoutMs: ax delivers the run again meanwhile.
            tokio::time::sleep(Duration::from_secs(3)).await;
            Ok::<_, Failed>(format!("done once: {}", run.request_id))
        }
    }))
    .await;
    let url = format!("{}/slow", served.base);
    let task = ax
        .task(json!({"handlerUrl": url, "timeoutMs": 1000, "maxRetry": 5}))
        .await;
    let request_id = ax.trigger(task).await;
    let run = ax.ended(&request_id).await;
    assert_eq!(run["status"], "SUCCESS", "{run}");
    assert!(run["attempt"].as_i64() >= Some(2), "delivered again: {run}");
    assert_eq!(run["message"], format!("done once: {request_id}"), "{run}");
    assert_eq!(calls.load(Ordering::SeqCst), 1, "the handler ran once");

    // Once more, by hand: the kept result, flagged as a duplicate, and still no second run.
    let body = dispatch_body(&request_id, 9, json!({}));
    let now = unix_now();
    let (status, headers, reply) =
        post_signed(&url, &body, now, &signature_of(SECRET, now, &body)).await;
    assert_eq!(status, 200, "{reply}");
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    assert_eq!(header("X-Ax-Duplicate"), Some("true"));
    assert_eq!(header("X-Ax-Idempotent"), Some("true"));
    assert_eq!(header("X-Ax-Protocol"), Some("1"));
    assert_eq!(
        reply,
        json!({"status": "SUCCESS", "message": format!("done once: {request_id}")})
    );
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    served.shutdown().await.expect("a clean shutdown");
}

#[actix_web::test]
async fn forged_and_stale_dispatches_are_refused() {
    let ax = Ax::start().await;
    let (calls, counted) = counter();
    let handler = move |_: Run<Value>| {
        let counted = counted.clone();
        async move {
            counted.fetch_add(1, Ordering::SeqCst);
            Ok::<_, Failed>("ran")
        }
    };
    let served = Served::start(executor(&ax).handle("/run", handler.clone())).await;
    let url = format!("{}/run", served.base);
    let body = dispatch_body("forged-1", 1, json!({}));
    let now = unix_now();
    let refusals = [
        (
            "another secret",
            now,
            signature_of("not-the-signing-secret", now, &body),
        ),
        (
            "signed 10 minutes ago",
            now - 600,
            signature_of(SECRET, now - 600, &body),
        ),
        (
            "signed 10 minutes ahead",
            now + 600,
            signature_of(SECRET, now + 600, &body),
        ),
        (
            "another timestamp",
            now - 1,
            signature_of(SECRET, now, &body),
        ),
        ("no signature", now, String::new()),
    ];
    for (what, timestamp, signature) in refusals {
        let (status, _, reply) = post_signed(&url, &body, timestamp, &signature).await;
        assert_eq!(status, 401, "{what}: {reply}");
        assert!(reply["error"].is_string(), "{what}: {reply}");
    }
    assert_eq!(calls.load(Ordering::SeqCst), 0, "no refused dispatch ran");

    // Through ax: an executor with another secret refuses ax's dispatches, the run fails.
    let stranger = Served::start(
        ax_executor::Executor::new("not-the-signing-secret")
            .expect("a secret")
            .ax_url(&ax.url)
            .handle("/run", handler),
    )
    .await;
    let task = ax
        .task(json!({"handlerUrl": format!("{}/run", stranger.base)}))
        .await;
    let run = ax.ended(&ax.trigger(task).await).await;
    assert_eq!(run["status"], "FAILED", "{run}");
    assert_eq!(run["code"], "HTTP_401", "{run}");
    assert_eq!(calls.load(Ordering::SeqCst), 0);

    // The right signature, for comparison: it runs.
    let (status, _, reply) = post_signed(&url, &body, now, &signature_of(SECRET, now, &body)).await;
    assert_eq!(
        (status, reply),
        (200, json!({"status": "SUCCESS", "message": "ran"}))
    );
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    stranger.shutdown().await.expect("a clean shutdown");
    served.shutdown().await.expect("a clean shutdown");
}

#[actix_web::test]
async fn a_handler_slower_than_reply_within_is_answered_202_then_called_back() {
    let ax = Ax::start().await;
    let served = Served::start(executor(&ax).handle_with(
        "/slow",
        Duration::from_millis(200),
        |run: Run<Value>| async move {
            tokio::time::sleep(Duration::from_millis(1500)).await;
            Ok::<_, Failed>(format!("slow but done, attempt {}", run.attempt))
        },
    ))
    .await;
    let task = ax
        .task(json!({"handlerUrl": format!("{}/slow", served.base)}))
        .await;
    let request_id = ax.trigger(task).await;
    // RUNNING: ax took the 202 and waits for the callback.
    let running = ax
        .run_in(
            &request_id,
            &["RUNNING", "SUCCESS", "FAILED"],
            Duration::from_secs(30),
        )
        .await;
    assert_eq!(running["status"], "RUNNING", "{running}");
    let run = ax.ended(&request_id).await;
    assert_eq!(run["status"], "SUCCESS", "{run}");
    assert_eq!(run["message"], "slow but done, attempt 1", "{run}");
    assert_eq!(run["attempt"], 1, "{run}");
    served.shutdown().await.expect("a clean shutdown");
}

#[derive(Deserialize)]
struct Reconcile {
    region: String,
}

#[actix_web::test]
async fn params_of_the_wrong_shape_fail_bad_params_without_retry() {
    let ax = Ax::start().await;
    let (calls, counted) = counter();
    let served = Served::start(
        executor(&ax).handle("/reconcile", move |run: Run<Reconcile>| {
            let counted = counted.clone();
            async move {
                counted.fetch_add(1, Ordering::SeqCst);
                Ok::<_, Failed>(run.params.region)
            }
        }),
    )
    .await;
    let url = format!("{}/reconcile", served.base);
    let bad = ax
        .task(json!({"handlerUrl": url, "params": {"region": 42}, "maxRetry": 3}))
        .await;
    let run = ax.ended(&ax.trigger(bad).await).await;
    assert_eq!(run["status"], "FAILED", "{run}");
    assert_eq!(run["code"], "BAD_PARAMS", "{run}");
    assert_eq!(run["attempt"], 1, "no retry: {run}");
    let message = run["message"].as_str().unwrap_or("");
    assert!(
        message.starts_with("params do not fit: invalid type: integer `42`"),
        "{run}"
    );
    assert_eq!(calls.load(Ordering::SeqCst), 0);

    let good = ax
        .task(json!({"handlerUrl": url, "params": {"region": "eu", "extra": true}}))
        .await;
    let run = ax.ended(&ax.trigger(good).await).await;
    assert_eq!(
        (&run["status"], &run["message"]),
        (&json!("SUCCESS"), &json!("eu")),
        "{run}"
    );
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    served.shutdown().await.expect("a clean shutdown");
}

#[actix_web::test]
async fn failures_and_panics_are_failed_results() {
    let ax = Ax::start().await;
    let served = Served::start(
        executor(&ax)
            .handle("/refuse", |_: Run<Value>| async {
                Err::<(), _>(Failed::new("UPSTREAM_DOWN", "billing API 503").stop_retry())
            })
            .handle_with("/refuse-later", Duration::ZERO, |_: Run<Value>| async {
                Err::<(), _>(Failed::new("GONE_FOR_GOOD", "no such account").stop_retry())
            })
            .handle("/parse", |_: Run<Value>| async {
                let rows: u32 = "many".parse()?;
                Ok(rows.to_string())
            })
            .handle("/panic", |_: Run<Value>| async {
                if unix_now() > 0 {
                    panic!("boom");
                }
                Ok(())
            }),
    )
    .await;
    for (path, retries, code, message) in [
        ("/refuse", 3, "UPSTREAM_DOWN", "billing API 503"),
        ("/refuse-later", 3, "GONE_FOR_GOOD", "no such account"),
        ("/parse", 0, "ERROR", "invalid digit found in string"),
        ("/panic", 0, "ERROR", "the handler panicked: boom"),
    ] {
        let task = ax
            .task(json!({"handlerUrl": format!("{}{path}", served.base), "maxRetry": retries}))
            .await;
        let run = ax.ended(&ax.trigger(task).await).await;
        assert_eq!(run["status"], "FAILED", "{path}: {run}");
        assert_eq!(run["code"], code, "{path}: {run}");
        assert_eq!(run["message"], message, "{path}: {run}");
        assert_eq!(run["attempt"], 1, "{path}: {run}");
    }
    served.shutdown().await.expect("a clean shutdown");
}
