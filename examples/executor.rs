//! An executor for ax in Rust, on actix-web: `cargo run --example executor`.
//!
//! It listens on 127.0.0.1:9001 (`EXECUTOR_ADDR` to change it) and checks each dispatch's
//! signature when `AX_SIGNING_SECRET` is set (ax's `security.signing_secret`). `POST /run`
//! answers with the result at once; `POST /slow` answers `202 Accepted`, works for two
//! seconds, sends two log lines, then reports the result to ax's `POST /api/callback` (at
//! `AX_URL`, default `http://127.0.0.1:8901`) with the run's `callbackToken` and `attempt`.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use actix_web::{web, App, HttpRequest, HttpResponse, HttpServer};
use hmac::{Hmac, Mac};
use serde_json::{json, Value};
use sha2::Sha256;

/// Whether `body` carries ax's signature: `X-Ax-Signature: v1=<hex>`, the HMAC-SHA256 of
/// `"<X-Ax-Timestamp>.<body>"` keyed with the signing secret, made within the last 5 minutes.
fn signed(secret: &[u8], req: &HttpRequest, body: &[u8]) -> bool {
    let header = |name| req.headers().get(name).and_then(|v| v.to_str().ok());
    let (Some(timestamp), Some(signature)) = (header("X-Ax-Timestamp"), header("X-Ax-Signature"))
    else {
        return false;
    };
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    let fresh = timestamp
        .parse::<i64>()
        .is_ok_and(|ts| (now - ts).abs() < 300);
    let Some(expected) = signature.strip_prefix("v1=").and_then(from_hex) else {
        return false;
    };
    let mut mac = Hmac::<Sha256>::new_from_slice(secret).expect("any key length");
    mac.update(timestamp.as_bytes());
    mac.update(b".");
    mac.update(body);
    fresh && mac.verify_slice(&expected).is_ok() // compared in constant time
}

fn from_hex(text: &str) -> Option<Vec<u8>> {
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

/// The run ax sent, if its signature holds (or no secret is configured here).
fn run_of(req: &HttpRequest, body: &[u8]) -> Option<Value> {
    let secret = std::env::var("AX_SIGNING_SECRET").unwrap_or_default();
    if !secret.is_empty() && !signed(secret.as_bytes(), req, body) {
        return None;
    }
    serde_json::from_slice(body).ok()
}

/// A short job: the result goes in the reply.
async fn run(req: HttpRequest, body: web::Bytes) -> HttpResponse {
    let Some(run) = run_of(&req, &body) else {
        return HttpResponse::Unauthorized().finish();
    };
    println!(
        "run {} attempt {} params {}",
        run["requestId"], run["attempt"], run["params"]
    );
    HttpResponse::Ok().json(json!({"status": "SUCCESS", "code": "0", "message": "done"}))
}

/// A long job: accepted now, its result reported later by callback.
async fn slow(req: HttpRequest, body: web::Bytes) -> HttpResponse {
    let Some(run) = run_of(&req, &body) else {
        return HttpResponse::Unauthorized().finish();
    };
    actix_web::rt::spawn(work_then_report(run));
    HttpResponse::Accepted().finish()
}

async fn work_then_report(run: Value) {
    // Where ax said to answer (`callbackUrl`, `logUrl`), else `AX_URL`.
    let ax = std::env::var("AX_URL").unwrap_or_else(|_| "http://127.0.0.1:8901".into());
    let url_of =
        |field: &str, otherwise: String| run[field].as_str().map_or(otherwise, String::from);
    let client = awc::Client::default();
    let token = &run["callbackToken"];
    let attempt = &run["attempt"];
    let request_id = run["requestId"].as_str().unwrap_or("");
    let log_url = url_of("logUrl", format!("{ax}/api/instances/{request_id}/log"));
    let callback_url = url_of("callbackUrl", format!("{ax}/api/callback"));
    for (lines, progress) in [(["exporting"], 0), (["written"], 100)] {
        let body = json!({"callbackToken": token, "attempt": attempt, "lines": lines,
                          "progress": progress});
        let _ = client.post(&log_url).send_json(&body).await;
        actix_web::rt::time::sleep(Duration::from_secs(1)).await;
    }
    // The same requestId may come again (delivery is at least once): a real job keys its
    // work on it, so that a second delivery does nothing twice.
    let result = json!({"requestId": run["requestId"], "callbackToken": token,
                        "attempt": attempt, "status": "SUCCESS", "code": "0",
                        "message": "42 rows"});
    match client.post(&callback_url).send_json(&result).await {
        Ok(mut reply) => {
            let body = reply.body().await.unwrap_or_default();
            println!(
                "callback {} {}",
                reply.status(),
                String::from_utf8_lossy(&body)
            );
        }
        // A real executor tries again: ax keeps the run open until its timeoutMs.
        Err(err) => eprintln!("callback failed: {err}"),
    }
}

#[actix_web::main]
async fn main() -> std::io::Result<()> {
    let addr = std::env::var("EXECUTOR_ADDR").unwrap_or_else(|_| "127.0.0.1:9001".into());
    println!("executor on http://{addr} (/run, /slow)");
    HttpServer::new(|| {
        App::new()
            .route("/run", web::post().to(run))
            .route("/slow", web::post().to(slow))
    })
    .bind(addr)?
    .run()
    .await
}
