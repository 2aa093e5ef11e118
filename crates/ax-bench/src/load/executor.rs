//! The mock executor: an HTTP handler fast enough not to be what is measured. It records every
//! run it receives and answers it at once (sync mode) or with 202 and a later callback.

use std::ops::Range;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use actix_web::http::header::{self, HeaderMap};
use actix_web::http::StatusCode;
use actix_web::{dev::ServerHandle, web, App, HttpRequest, HttpResponse, HttpServer};
use anyhow::Context as _;
use chrono::{DateTime, Utc};
use serde::Deserialize;
use serde_json::json;
use uuid::Uuid;

use ax_core::run::ReportedStatus;

use crate::measure::analysis::{injects_failure, Delivery};
use crate::Mode;

/// How the executor answers.
#[derive(Debug, Clone, Copy)]
pub struct Behaviour {
    pub mode: Mode,
    pub fail_rate: f64,
    /// Simulated work: before the reply (sync) or before the callback (callback).
    pub delay: Duration,
}

/// Counters of what the executor did besides recording deliveries. All but `bad_requests`
/// count runs scheduled in the measuring window only: runs still firing while ax shuts down
/// after the grace period must not blur them.
#[derive(Debug, Default)]
pub struct Counters {
    /// Requests whose body was not a run.
    pub bad_requests: AtomicU64,
    /// Deliveries answered 500 on purpose (`--fail-rate`).
    pub injected_failures: AtomicU64,
    pub callbacks_ok: AtomicU64,
    /// Callbacks refused by ax or not sent.
    pub callback_errors: AtomicU64,
    /// Alerts posted to `/alerts` (`--alerts`), at any time.
    pub alerts_received: AtomicU64,
    /// HTTP bytes between ax and the executor, at any time, counted as HTTP/1.1 text (request
    /// line or status line, headers, body): what ax sent (runs, callbacks' answers) and what
    /// it received (replies, callbacks).
    pub http_bytes: HttpBytes,
}

/// HTTP bytes from ax's side.
#[derive(Debug, Default)]
pub struct HttpBytes {
    pub ax_sent: AtomicU64,
    pub ax_received: AtomicU64,
}

/// State shared by the executor's worker threads.
struct Shared {
    behaviour: Behaviour,
    deliveries: Mutex<Vec<Delivery>>,
    counters: Counters,
    /// Round trips of the window's accepted callbacks, in ms.
    callback_ms: Mutex<Vec<f64>>,
    /// `/api/callback` URLs of the ax processes, known once they are up.
    callback_urls: OnceLock<Vec<String>>,
    next_callback: AtomicUsize,
    /// Scheduled seconds of the measuring window, known before it starts.
    window: OnceLock<Range<i64>>,
}

impl Shared {
    fn in_window(&self, scheduled_at: i64) -> bool {
        self.window.get().is_some_and(|w| w.contains(&scheduled_at))
    }

    fn count(&self, counter: &AtomicU64, scheduled_at: i64) {
        if self.in_window(scheduled_at) {
            counter.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// The running mock executor.
pub struct MockExecutor {
    /// The handler URL to register tasks with.
    pub url: String,
    /// The base URL of each port it listens on: as many executor group members.
    pub bases: Vec<String>,
    shared: Arc<Shared>,
    server: ServerHandle,
}

/// Worker threads: enough for ~10k requests/s on a small machine without taking a core from ax.
const WORKERS: usize = 2;
/// Connections the callback client of each worker may open: callbacks wait for ax's group
/// commit, so many are in flight at once.
const CALLBACK_CONNECTIONS: usize = 1024;

impl MockExecutor {
    /// Starts the executor on `ports` free ports of 127.0.0.1 (one server, so one count of
    /// what every port received). Must run inside an actix system.
    pub fn start(behaviour: Behaviour, ports: usize) -> anyhow::Result<MockExecutor> {
        MockExecutor::start_on(behaviour, ports, "127.0.0.1")
    }

    /// The same on free ports of `host`.
    pub fn start_on(
        behaviour: Behaviour,
        ports: usize,
        host: &str,
    ) -> anyhow::Result<MockExecutor> {
        let shared = Arc::new(Shared {
            behaviour,
            deliveries: Mutex::new(Vec::with_capacity(1 << 16)),
            counters: Counters::default(),
            callback_ms: Mutex::new(Vec::new()),
            callback_urls: OnceLock::new(),
            next_callback: AtomicUsize::new(0),
            window: OnceLock::new(),
        });
        let state = web::Data::from(shared.clone());
        let mut server = HttpServer::new(move || {
            // awc's client is bound to the worker thread that makes it.
            let client = awc::Client::builder()
                .connector(awc::Connector::new().limit(CALLBACK_CONNECTIONS))
                .timeout(Duration::from_secs(10))
                .finish();
            App::new()
                .app_data(state.clone())
                .app_data(web::Data::new(client))
                .route("/alerts", web::post().to(take_alert))
                .default_service(web::to(handle_run))
        })
        .workers(WORKERS)
        .disable_signals()
        .keep_alive(Duration::from_secs(75))
        .backlog(4096);
        for _ in 0..ports.max(1) {
            server = server
                .bind((host, 0))
                .context("cannot start the mock executor")?;
        }
        let bases: Vec<String> = server
            .addrs()
            .iter()
            .map(|addr| format!("http://{addr}/"))
            .collect();
        let server = server.run();
        let handle = server.handle();
        actix_rt::spawn(server);
        Ok(MockExecutor {
            url: format!("{}run", bases[0]),
            bases,
            shared,
            server: handle,
        })
    }

    /// Where callbacks go, round-robin: one URL per ax process.
    pub fn set_callback_targets(&self, ax_base_urls: &[String]) {
        let urls = ax_base_urls
            .iter()
            .map(|base| format!("{base}/api/callback"))
            .collect();
        let _ = self.shared.callback_urls.set(urls);
    }

    /// Where `--alerts` sends the alerts: counted apart from the runs.
    pub fn alerts_url(&self) -> String {
        let base = self.bases.first().map_or("", String::as_str);
        format!("{base}alerts")
    }

    /// The scheduled seconds `[start, end)` whose runs the counters count.
    pub fn set_window(&self, start: i64, end: i64) {
        let _ = self.shared.window.set(start..end);
    }

    /// Every delivery so far.
    pub fn deliveries(&self) -> Vec<Delivery> {
        match self.shared.deliveries.lock() {
            Ok(deliveries) => deliveries.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    pub fn counters(&self) -> &Counters {
        &self.shared.counters
    }

    /// Round trips of the window's accepted callbacks, in ms, sorted.
    pub fn callback_ms(&self) -> Vec<f64> {
        let mut ms = self
            .shared
            .callback_ms
            .lock()
            .map(|ms| ms.clone())
            .unwrap_or_default();
        ms.sort_by(f64::total_cmp);
        ms
    }

    pub async fn stop(&self) {
        self.server.stop(false).await;
    }
}

/// The part of ax's dispatch body the bench needs.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RunBody<'a> {
    task_id: i64,
    request_id: &'a str,
    scheduled_at: &'a str,
    callback_token: &'a str,
}

/// The run a dispatch body describes, and the token its callback must carry.
fn parse_run(body: &[u8], received_at_us: i64) -> Option<(Delivery, String)> {
    let run: RunBody = serde_json::from_slice(body).ok()?;
    let delivery = Delivery {
        request_id: Uuid::parse_str(run.request_id).ok()?,
        task_id: run.task_id,
        scheduled_at: DateTime::parse_from_rfc3339(run.scheduled_at)
            .ok()?
            .timestamp(),
        received_at_us,
    };
    Some((delivery, run.callback_token.to_string()))
}

/// An alert ax sent (`--alerts`): counted, nothing else.
async fn take_alert(shared: web::Data<Shared>) -> HttpResponse {
    shared
        .counters
        .alerts_received
        .fetch_add(1, Ordering::Relaxed);
    HttpResponse::Ok().finish()
}

async fn handle_run(
    shared: web::Data<Shared>,
    client: web::Data<awc::Client>,
    request: HttpRequest,
    body: web::Bytes,
) -> HttpResponse {
    // Read the clock first: the lag is up to the moment the request arrived.
    let received_at_us = Utc::now().timestamp_micros();
    let request_line = request.method().as_str().len() + request.uri().to_string().len() + 12;
    let bytes = &shared.counters.http_bytes;
    bytes.ax_sent.fetch_add(
        (request_line + head_len(request.headers()) + body.len()) as u64,
        Ordering::Relaxed,
    );
    let response = answer_run(&shared, client, &body, received_at_us).await;
    bytes
        .ax_received
        .fetch_add(response_len(&response), Ordering::Relaxed);
    response
}

/// Bytes of a header block as HTTP/1.1 sends it: `name: value\r\n` each, and the blank line.
fn head_len(headers: &HeaderMap) -> usize {
    headers
        .iter()
        .map(|(name, value)| name.as_str().len() + value.len() + 4)
        .sum::<usize>()
        + 2
}

/// Bytes of a response as HTTP/1.1 sends it: the status line, its headers with the
/// `content-length` and `date` the server adds, and its body.
fn response_len(response: &HttpResponse) -> u64 {
    let body = match actix_web::body::MessageBody::size(response.body()) {
        actix_web::body::BodySize::Sized(n) => n as usize,
        _ => 0,
    };
    let added = "content-length: \r\n".len() + body.to_string().len() + DATE_HEADER_LEN;
    (status_line_len(response.status()) + head_len(response.headers()) + added + body) as u64
}

/// Bytes of `HTTP/1.1 200 OK\r\n`.
fn status_line_len(status: StatusCode) -> usize {
    "HTTP/1.1 200 \r\n".len() + status.canonical_reason().map_or(0, str::len)
}

/// `date: Sat, 05 Dec 2026 10:42:28 GMT\r\n`
const DATE_HEADER_LEN: usize = 37;

async fn answer_run(
    shared: &web::Data<Shared>,
    client: web::Data<awc::Client>,
    body: &[u8],
    received_at_us: i64,
) -> HttpResponse {
    let Some((delivery, token)) = parse_run(body, received_at_us) else {
        shared.counters.bad_requests.fetch_add(1, Ordering::Relaxed);
        return HttpResponse::BadRequest().body("not an ax run");
    };
    match shared.deliveries.lock() {
        Ok(mut deliveries) => deliveries.push(delivery),
        Err(poisoned) => poisoned.into_inner().push(delivery),
    }
    let behaviour = shared.behaviour;
    if injects_failure(&delivery.request_id, behaviour.fail_rate) {
        shared.count(&shared.counters.injected_failures, delivery.scheduled_at);
        return HttpResponse::InternalServerError().body("injected failure");
    }
    match behaviour.mode {
        Mode::Sync => {
            if !behaviour.delay.is_zero() {
                actix_rt::time::sleep(behaviour.delay).await;
            }
            HttpResponse::Ok().json(json!({"status": ReportedStatus::Success}))
        }
        Mode::Callback => {
            let shared = shared.clone().into_inner();
            let client = client.get_ref().clone();
            actix_rt::spawn(async move {
                actix_rt::time::sleep(behaviour.delay).await;
                send_callback(&shared, &client, &delivery, &token).await;
            });
            HttpResponse::Accepted().finish()
        }
    }
}

async fn send_callback(shared: &Shared, client: &awc::Client, delivery: &Delivery, token: &str) {
    let (counters, request_id) = (&shared.counters, delivery.request_id);
    let Some(urls) = shared.callback_urls.get().filter(|urls| !urls.is_empty()) else {
        shared.count(&counters.callback_errors, delivery.scheduled_at);
        return;
    };
    let url = &urls[shared.next_callback.fetch_add(1, Ordering::Relaxed) % urls.len()];
    let body = json!({
        "requestId": request_id.to_string(),
        "callbackToken": token,
        "status": ReportedStatus::Success,
    });
    let sent = Instant::now();
    let request = client.post(url);
    let body = body.to_string();
    // Request line, headers (with the content type and length `send_body` adds) and body.
    let request_len = format!("POST {} HTTP/1.1\r\n", request.get_uri().path()).len()
        + head_len(request.headers())
        + "content-type: application/json\r\ncontent-length: \r\n".len()
        + body.len().to_string().len()
        + body.len();
    let mut answer = request
        .insert_header((header::CONTENT_TYPE, "application/json"))
        .send_body(body)
        .await;
    let bytes = &counters.http_bytes;
    bytes
        .ax_received
        .fetch_add(request_len as u64, Ordering::Relaxed);
    if let Ok(response) = &mut answer {
        // Read to its end, as an executor's client does: a connection whose answer is left
        // unread is closed, not kept for the next callback.
        let length = response.body().await.map_or(0, |body| body.len());
        bytes.ax_sent.fetch_add(
            (status_line_len(response.status()) + head_len(response.headers()) + length) as u64,
            Ordering::Relaxed,
        );
    }
    match answer {
        Ok(response) if response.status().is_success() => {
            shared.count(&counters.callbacks_ok, delivery.scheduled_at);
            if shared.in_window(delivery.scheduled_at) {
                let ms = sent.elapsed().as_secs_f64() * 1000.0;
                if let Ok(mut all) = shared.callback_ms.lock() {
                    all.push(ms);
                }
            }
        }
        Ok(response) => {
            log::debug!("callback {request_id}: HTTP {}", response.status());
            shared.count(&counters.callback_errors, delivery.scheduled_at);
        }
        Err(err) => {
            log::debug!("callback {request_id}: {err}");
            shared.count(&counters.callback_errors, delivery.scheduled_at);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dispatch_body_is_parsed() {
        let body = br#"{"taskId": 7, "requestId": "c8681e86-bdcd-5673-a08a-f227603c9451",
            "params": {"a": 1}, "scheduledAt": "2027-02-03T04:05:10Z", "attempt": 1,
            "callbackToken": "ab12"}"#;
        let (delivery, token) = parse_run(body, 42).expect("a run");
        assert_eq!(token, "ab12");
        assert_eq!(delivery.task_id, 7);
        assert_eq!(delivery.scheduled_at, 1_801_627_510);
        assert_eq!(delivery.received_at_us, 42);
        assert_eq!(
            delivery.request_id.to_string(),
            "c8681e86-bdcd-5673-a08a-f227603c9451"
        );
        assert!(parse_run(b"{}", 0).is_none());
        assert!(parse_run(br#"{"taskId":1,"requestId":"x","scheduledAt":"now"}"#, 0).is_none());
    }
}
