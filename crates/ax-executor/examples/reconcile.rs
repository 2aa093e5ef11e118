//! The README's ten-line executor, in group `billing` at `EXECUTOR_URL`:
//! `AX_SIGNING_SECRET=… cargo run -p ax-executor --example reconcile`.
use ax_executor::{Executor, Run};

#[derive(serde::Deserialize)]
struct Params {
    region: String,
}

#[actix_web::main]
async fn main() -> Result<(), ax_executor::Error> {
    let url = std::env::var("EXECUTOR_URL").unwrap_or("http://127.0.0.1:9000".into());
    Executor::from_env()?
        .group("billing", url)
        .handle("/reconcile", |run: Run<Params>| async move {
            run.log(format!("reconciling {}", run.params.region));
            run.progress(50);
            Ok(format!("reconciled {}", run.params.region))
        })
        .serve_at_group_url()
        .await
}
