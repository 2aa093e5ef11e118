//! A long job: `steps` steps (params), each `STEP_MS` milliseconds (env, default 500), with a
//! log line and the progress after each. Past `reply_within` its dispatch is answered `202`
//! and the result follows by callback. At shutdown it notices `run.stopping()` and finishes
//! within the grace (`SHUTDOWN_GRACE_MS`, default 30 s), or is reported `EXECUTOR_SHUTDOWN`.
//!
//! `AX_SIGNING_SECRET=… EXECUTOR_ADDR=127.0.0.1:9002 cargo run -p ax-executor --example long_job`,
//! then a task with `"handlerUrl": "http://127.0.0.1:9002/export", "params": {"steps": 10}`.
//! The end-to-end tests run it as a process of its own, to kill it.

use std::time::Duration;

use ax_executor::{Executor, Run};

#[derive(serde::Deserialize)]
struct Export {
    steps: u32,
}

fn env_ms(name: &str, default: u64) -> Duration {
    let ms = std::env::var(name).ok().and_then(|v| v.parse().ok());
    Duration::from_millis(ms.unwrap_or(default))
}

#[actix_web::main]
async fn main() -> Result<(), ax_executor::Error> {
    env_logger::init();
    let addr = std::env::var("EXECUTOR_ADDR").unwrap_or("127.0.0.1:9002".into());
    let step = env_ms("STEP_MS", 500);
    Executor::from_env()?
        .shutdown_grace(env_ms("SHUTDOWN_GRACE_MS", 30_000))
        .handle("/export", move |run: Run<Export>| async move {
            let steps = run.params.steps.max(1);
            for done in 1..=steps {
                tokio::time::sleep(step).await;
                if run.stopping() {
                    run.log("shutdown asked: finishing the export first");
                }
                run.log(format!("step {done}/{steps} written"));
                run.progress((done * 100 / steps) as u8);
            }
            Ok(format!("exported in {steps} steps"))
        })
        .serve(addr)
        .await
}
