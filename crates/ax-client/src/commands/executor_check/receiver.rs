//! The check's stand-in for ax's callback and log endpoints: every dispatch names it as its
//! `callbackUrl` and `logUrl`, and it keeps what the executor sends, answering as ax would.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use actix_web::{web, App, HttpResponse, HttpServer};
use serde_json::{json, Value};

/// What the executor sent back.
#[derive(Debug, Clone)]
pub struct Sent {
    /// The run it is about: the callback body's `requestId`, or the log URL's.
    pub request_id: String,
    pub body: Value,
    pub is_log: bool,
}

type Kept = Arc<Mutex<Vec<Sent>>>;

pub struct Receiver {
    /// `http://host:port`, as the executor reaches it.
    pub base: String,
    kept: Kept,
    server: actix_web::dev::ServerHandle,
}

impl Receiver {
    /// Listens on `addr`; `reply_to` is the address dispatches name instead of the one bound,
    /// for an executor that reaches this machine by another.
    pub fn start(addr: &str, reply_to: Option<&str>) -> std::io::Result<Receiver> {
        let kept = Kept::default();
        let state = web::Data::new(kept.clone());
        let server = HttpServer::new(move || {
            App::new()
                .app_data(state.clone())
                .app_data(web::JsonConfig::default().limit(1 << 20))
                .route("/api/callback", web::post().to(callback))
                .route("/api/instances/{requestId}/log", web::post().to(log))
        })
        .workers(1)
        .disable_signals()
        .bind(addr)?;
        let bound = server.addrs()[0];
        let server = server.run();
        let handle = server.handle();
        actix_rt::spawn(server);
        let base = reply_to.map_or_else(
            || format!("http://{bound}"),
            |url| url.trim_end_matches('/').to_string(),
        );
        Ok(Receiver {
            base,
            kept,
            server: handle,
        })
    }

    /// Everything sent about `request_id` so far.
    pub fn about(&self, request_id: &str) -> Vec<Sent> {
        let kept = self
            .kept
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        kept.iter()
            .filter(|sent| sent.request_id == request_id)
            .cloned()
            .collect()
    }

    /// The first callback about `request_id`, waiting until `deadline` for it.
    pub async fn callback(&self, request_id: &str, deadline: Instant) -> Option<Value> {
        loop {
            let found = self
                .about(request_id)
                .into_iter()
                .find(|sent| !sent.is_log)
                .map(|sent| sent.body);
            if found.is_some() || Instant::now() >= deadline {
                return found;
            }
            actix_rt::time::sleep(Duration::from_millis(50)).await;
        }
    }

    pub async fn stop(self) {
        self.server.stop(false).await;
    }
}

fn keep(kept: &Kept, sent: Sent) {
    kept.lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .push(sent);
}

/// Answers as ax does, once kept: the result is recorded.
async fn callback(kept: web::Data<Kept>, body: web::Json<Value>) -> HttpResponse {
    let body = body.into_inner();
    let request_id = body["requestId"].as_str().unwrap_or_default().to_string();
    let status = body["status"].clone();
    keep(
        &kept,
        Sent {
            request_id: request_id.clone(),
            body,
            is_log: false,
        },
    );
    HttpResponse::Ok().json(json!({"requestId": request_id, "status": status,
                                   "applied": true, "message": "result recorded"}))
}

async fn log(
    kept: web::Data<Kept>,
    path: web::Path<String>,
    body: web::Json<Value>,
) -> HttpResponse {
    let body = body.into_inner();
    let request_id = path.into_inner();
    let lines = body["lines"].as_array().map_or(0, Vec::len);
    let attempt = body["attempt"].as_i64().unwrap_or(1);
    keep(
        &kept,
        Sent {
            request_id: request_id.clone(),
            body,
            is_log: true,
        },
    );
    HttpResponse::Ok().json(json!({"requestId": request_id, "attempt": attempt,
                                   "lines": lines, "droppedLines": 0}))
}
