//! Isolation between executors: an executor that accepts connections and never answers holds
//! only its own host's slots (`dispatch.max_in_flight_per_host`); a healthy executor's runs
//! keep their lag; on one host, a hung handler holds only the slow lane's share of its slots,
//! so the host's other handlers keep theirs; runs waiting for the hung host's slots are
//! neither claimed again nor sent twice, even by a second ax process on the same store;
//! deleting a task ends its waiting and in-flight dispatches at once. MariaDB + Redis, real
//! HTTP on both sides.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::json;
use tokio::io::AsyncReadExt;

use crate::common::{
    config, on_each_backend, start_ax, unique_name, Api, Executor, Reply, TestStore,
};

/// An executor that accepts every connection, reads the request and never answers; on a path
/// starting `/ok` it answers at once (a healthy handler of the same host).
struct Hung {
    url: String,
    host: String,
    open: Arc<AtomicUsize>,
    most_open: Arc<AtomicUsize>,
    /// The request id of every request received on a hung path, in order.
    received: Arc<Mutex<Vec<String>>>,
    /// Each request answered on `/ok`: its request id, scheduled time and when it came.
    answered: Arc<Mutex<Vec<Answered>>>,
    /// Dropped with it: its thread stops, closing every connection.
    _stop: tokio::sync::oneshot::Sender<()>,
}

/// A request the healthy handler answered.
#[derive(Debug, Clone)]
struct Answered {
    request_id: String,
    scheduled_at: DateTime<Utc>,
    wall: DateTime<Utc>,
}

impl Hung {
    /// On a thread and runtime of its own: the connections it counts open close as soon as
    /// the peer closes them, however busy the ax processes of the test keep the test's thread.
    async fn start() -> Hung {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        listener.set_nonblocking(true).expect("nonblocking");
        let addr = listener.local_addr().expect("addr");
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let hung = Hung {
            url: format!("http://{addr}/run"),
            host: addr.to_string(),
            open: Arc::default(),
            most_open: Arc::default(),
            received: Arc::default(),
            answered: Arc::default(),
            _stop: stop,
        };
        let (open, most, received, answered) = (
            hung.open.clone(),
            hung.most_open.clone(),
            hung.received.clone(),
            hung.answered.clone(),
        );
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            runtime.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).expect("listener");
                let accept = async {
                    while let Ok((stream, _)) = listener.accept().await {
                        let now = open.fetch_add(1, Ordering::SeqCst) + 1;
                        most.fetch_max(now, Ordering::SeqCst);
                        let (open, received, answered) =
                            (open.clone(), received.clone(), answered.clone());
                        tokio::spawn(async move {
                            serve(stream, received, answered).await;
                            open.fetch_sub(1, Ordering::SeqCst);
                        });
                    }
                };
                tokio::select! {
                    () = accept => {}
                    _ = stopped => {}
                }
            });
        });
        hung
    }

    fn open(&self) -> usize {
        self.open.load(Ordering::SeqCst)
    }

    fn received(&self) -> Vec<String> {
        self.received.lock().expect("lock").clone()
    }
}

/// Serves one connection: a request on `/ok` is answered at once (and the next one read), any
/// other is noted by its request id and held until the peer closes.
async fn serve(
    mut stream: tokio::net::TcpStream,
    received: Arc<Mutex<Vec<String>>>,
    answered: Arc<Mutex<Vec<Answered>>>,
) {
    let mut buf = Vec::new();
    loop {
        let Some((head, body)) = read_request(&mut stream, &mut buf).await else {
            return;
        };
        let header = |name: &str| {
            head.lines().find_map(|line| {
                let (key, value) = line.split_once(':')?;
                key.eq_ignore_ascii_case(name)
                    .then(|| value.trim().to_string())
            })
        };
        let request_id = header("x-ax-request-id").unwrap_or_default();
        if !head.starts_with("POST /ok") {
            received.lock().expect("lock").push(request_id);
            // Held: read until the peer closes.
            let mut sink = [0u8; 4096];
            while matches!(stream.read(&mut sink).await, Ok(n) if n > 0) {}
            return;
        }
        let body: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
        let scheduled_at = body["scheduledAt"]
            .as_str()
            .and_then(|at| at.parse().ok())
            .expect("scheduledAt");
        answered.lock().expect("lock").push(Answered {
            request_id,
            scheduled_at,
            wall: Utc::now(),
        });
        let reply = b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n";
        if tokio::io::AsyncWriteExt::write_all(&mut stream, reply)
            .await
            .is_err()
        {
            return;
        }
    }
}

/// Reads one request (head and body by its content-length) from `stream`, `buf` holding what
/// was read past the last one; `None` once the peer closes.
async fn read_request(
    stream: &mut tokio::net::TcpStream,
    buf: &mut Vec<u8>,
) -> Option<(String, Vec<u8>)> {
    let mut chunk = [0u8; 4096];
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_string();
            let length: usize = head
                .lines()
                .find_map(|line| {
                    let (key, value) = line.split_once(':')?;
                    key.eq_ignore_ascii_case("content-length")
                        .then(|| value.trim().parse().ok())?
                })
                .unwrap_or(0);
            if buf.len() >= end + 4 + length {
                let body = buf[end + 4..end + 4 + length].to_vec();
                buf.drain(..end + 4 + length);
                return Some((head, body));
            }
        }
        match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => return None,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
}

fn every_second(name: &str, url: &str, timeout_ms: i64) -> serde_json::Value {
    json!({"name": unique_name(name), "cron": "* * * * * *", "handlerUrl": url,
           "timeoutMs": timeout_ms, "maxRetry": 0})
}

/// Runs delivered more than once: request ids seen twice.
fn duplicates(ids: &[String]) -> Vec<(String, usize)> {
    let mut seen: HashMap<&String, usize> = HashMap::new();
    for id in ids {
        *seen.entry(id).or_default() += 1;
    }
    let mut twice: Vec<(String, usize)> = seen
        .into_iter()
        .filter(|(_, n)| *n > 1)
        .map(|(id, n)| (id.clone(), n))
        .collect();
    twice.sort();
    twice
}

/// The control executor's deliveries: each run's lag (received minus scheduled), in ms.
fn lags_ms(control: &Executor) -> Vec<i64> {
    let mut lags: Vec<i64> = control
        .received()
        .iter()
        .map(|d| {
            let scheduled: DateTime<Utc> = d.body["scheduledAt"]
                .as_str()
                .and_then(|at| at.parse().ok())
                .expect("scheduledAt");
            (d.wall - scheduled).num_milliseconds()
        })
        .collect();
    lags.sort();
    lags
}

/// The control task was delivered at least `runs` times, each run once, with its usual lag.
fn control_kept_its_lag(control: &Executor, runs: usize) {
    let lags = lags_ms(control);
    assert!(
        lags.len() >= runs,
        "the control task is delivered: {lags:?}"
    );
    assert!(p99(&lags) < 1_500, "control lag stays normal: {lags:?}");
    let ids: Vec<String> = control
        .received()
        .iter()
        .map(|d| d.request_id.clone())
        .collect();
    assert_eq!(duplicates(&ids), vec![], "no control run delivered twice");
}

fn p99(sorted: &[i64]) -> i64 {
    sorted[(sorted.len() * 99).div_ceil(100).saturating_sub(1)]
}

/// The gauge `name` of `host` in ax's `/metrics`, 0 when not shown.
async fn host_gauge(ax: &ax_server::app::Ax, name: &str, host: &str) -> usize {
    let metrics = awc::Client::default()
        .get(format!("http://{}/metrics", ax.addr()))
        .send()
        .await
        .expect("metrics")
        .body()
        .await
        .expect("body");
    let line = format!("{name}{{host=\"{host}\"}} ");
    String::from_utf8_lossy(&metrics)
        .lines()
        .find_map(|l| l.strip_prefix(&line).and_then(|n| n.parse().ok()))
        .unwrap_or(0)
}

/// Runs waiting for a slot of `host` (`ax_dispatch_queued`).
async fn queued(ax: &ax_server::app::Ax, host: &str) -> usize {
    host_gauge(ax, "ax_dispatch_queued", host).await
}

fn sleep(secs: f64) -> actix_rt::time::Sleep {
    actix_rt::time::sleep(Duration::from_secs_f64(secs))
}

on_each_backend!(a_hung_executor_holds_only_its_own_slots_on, mariadb: a_hung_executor_holds_only_its_own_slots, postgres: a_hung_executor_holds_only_its_own_slots_on_postgres);

/// The first repro, scaled: a task with a 10-minute timeout backfilled over 1,100
/// seconds on the hung executor, and a control task every second on a healthy one, defaults
/// otherwise.
async fn a_hung_executor_holds_only_its_own_slots_on(store: TestStore) {
    let mut config = config(&store, true, "isolation");
    config.scheduler.backfill_per_sec = 1000;
    let ax = start_ax(&config).await;
    let api = Api::new(&ax);
    let hung = Hung::start().await;
    let control = Executor::start(Reply::Success).await;

    let stuck = api
        .create_task(json!({"name": unique_name("hung"), "cron": "* * * * * *",
            "handlerUrl": hung.url, "timeoutMs": 600_000, "enabled": false}))
        .await;
    let stuck = stuck["id"].as_i64().expect("id");
    let to = Utc::now() - chrono::Duration::seconds(2);
    let range = json!({"from": (to - chrono::Duration::seconds(1100)).to_rfc3339(),
                       "to": to.to_rfc3339()});
    let (status, done) = api
        .post(&format!("/api/tasks/{stuck}/backfill"), range)
        .await;
    assert_eq!(status, 202, "{done}");
    api.create_task(every_second("control", &control.url, 5_000))
        .await;

    sleep(8.0).await;
    let cap = config.dispatch.max_in_flight_per_host;
    assert!(
        hung.most_open.load(Ordering::SeqCst) <= cap,
        "at most {cap} connections on the hung host, saw {}",
        hung.most_open.load(Ordering::SeqCst)
    );
    assert_eq!(hung.open(), cap, "the hung host's slots are all taken");
    let waiting = queued(&ax, &hung.host).await;
    assert!(
        waiting > 100,
        "the rest of the backfill waits in the hung host's queue: {waiting}"
    );
    control_kept_its_lag(&control, 6);
    assert_eq!(duplicates(&hung.received()), vec![]);

    // Deleting the task ends its waiting runs and closes its connections at once.
    let (status, _) = api
        .call("DELETE", &format!("/api/tasks/{stuck}"), None)
        .await;
    assert_eq!(status, 204);
    for _ in 0..40 {
        if hung.open() == 0 {
            break;
        }
        sleep(0.05).await;
    }
    assert_eq!(hung.open(), 0, "no connection left on the hung host");
    sleep(1.5).await;
    assert_eq!(queued(&ax, &hung.host).await, 0, "nothing waits for it");
    assert!(hung.received().len() <= cap, "no waiting run was sent");
    ax.shutdown().await;
}

on_each_backend!(a_hung_handler_cannot_starve_the_other_handlers_of_its_host_on, mariadb: a_hung_handler_cannot_starve_the_other_handlers_of_its_host, postgres: a_hung_handler_cannot_starve_the_other_handlers_of_its_host_on_postgres);

/// A hot handler: 150 every-second tasks whose handler hangs (`timeoutMs` 10 s) beside a
/// healthy every-second task on the same host and port, another path, defaults otherwise.
/// Once the hung handler's first attempts have timed out, the healthy task is delivered in at
/// least 27 of the next 30 s with its usual lag, and no run is sent twice.
async fn a_hung_handler_cannot_starve_the_other_handlers_of_its_host_on(store: TestStore) {
    let config = config(&store, true, "lanes");
    let ax = start_ax(&config).await;
    let api = Api::new(&ax);
    let host = Hung::start().await;
    let (hung_url, ok_url) = (
        format!("http://{}/hung", host.host),
        format!("http://{}/ok", host.host),
    );
    let first_created = Utc::now();
    let mut tasks = Vec::new();
    for _ in 0..150 {
        let task = api
            .create_task(every_second("hung", &hung_url, 10_000))
            .await;
        tasks.push(task["id"].as_i64().expect("id"));
    }
    let healthy = api
        .create_task(every_second("healthy", &ok_url, 5_000))
        .await;
    tasks.push(healthy["id"].as_i64().expect("id"));

    // The first hung attempts go out at the first second after their task's creation and
    // time out 10 s later; the window starts once they have.
    let from = first_created + chrono::Duration::seconds(12);
    let to = from + chrono::Duration::seconds(30);
    let until_end = (to - Utc::now()).to_std().unwrap_or_default() + Duration::from_secs(2);
    actix_rt::time::sleep(until_end).await;

    let share = config.dispatch.max_in_flight_per_host * config.dispatch.slow_share_percent / 100;
    assert_eq!(
        host_gauge(&ax, "ax_dispatch_slow_in_flight", &host.host).await,
        share,
        "the hung handler holds the slow lane's share of the host"
    );
    let answered = host.answered.lock().expect("lock").clone();
    let in_window: Vec<&Answered> = answered
        .iter()
        .filter(|a| a.scheduled_at >= from && a.scheduled_at < to)
        .collect();
    let seconds: std::collections::BTreeSet<i64> = in_window
        .iter()
        .map(|a| a.scheduled_at.timestamp())
        .collect();
    assert!(
        seconds.len() >= 27,
        "the healthy task is delivered in at least 27 of the 30 s: {} ({:?})",
        seconds.len(),
        seconds
    );
    let mut lags: Vec<i64> = in_window
        .iter()
        .map(|a| (a.wall - a.scheduled_at).num_milliseconds())
        .collect();
    lags.sort();
    assert!(
        p99(&lags) <= 1_500,
        "the healthy task keeps its lag: {lags:?}"
    );
    let ids: Vec<String> = answered.iter().map(|a| a.request_id.clone()).collect();
    assert_eq!(duplicates(&ids), vec![], "no healthy run delivered twice");
    assert_eq!(
        duplicates(&host.received()),
        vec![],
        "no hung run sent twice"
    );

    for id in tasks {
        api.call("DELETE", &format!("/api/tasks/{id}"), None).await;
    }
    ax.shutdown().await;
}

on_each_backend!(runs_waiting_for_a_host_are_neither_claimed_again_nor_sent_twice_on, mariadb: runs_waiting_for_a_host_are_neither_claimed_again_nor_sent_twice, postgres: runs_waiting_for_a_host_are_neither_claimed_again_nor_sent_twice_on_postgres);

/// The second repro, scaled, on two ax processes sharing MariaDB and Redis: 30
/// every-second tasks on the hung executor (timeout 1 s, no retries) with 4 slots a process,
/// so runs wait long past their first claim; each is delivered at most once, and the control
/// task keeps its lag.
async fn runs_waiting_for_a_host_are_neither_claimed_again_nor_sent_twice_on(store: TestStore) {
    let mut first = config(&store, true, "isolation-a");
    first.dispatch.max_in_flight_per_host = 4;
    let mut second = first.clone();
    second.server.instance_id = Some("isolation-b".into());
    let a = start_ax(&first).await;
    let b = start_ax(&second).await;
    let api = Api::new(&a);
    let hung = Hung::start().await;
    let control = Executor::start(Reply::Success).await;
    let mut stuck = Vec::new();
    for _ in 0..30 {
        let task = api
            .create_task(every_second("hung", &hung.url, 1_000))
            .await;
        stuck.push(task["id"].as_i64().expect("id"));
    }
    api.create_task(every_second("control", &control.url, 5_000))
        .await;

    // Long enough for waiting runs to outlive their first claim (timeout + 10 s).
    sleep(16.0).await;
    let waiting = queued(&a, &hung.host).await + queued(&b, &hung.host).await;
    assert!(waiting > 100, "runs wait for the hung host: {waiting}");
    assert_eq!(duplicates(&hung.received()), vec![], "no run sent twice");
    control_kept_its_lag(&control, 14);

    for id in stuck {
        api.call("DELETE", &format!("/api/tasks/{id}"), None).await;
    }
    a.shutdown().await;
    b.shutdown().await;
}

on_each_backend!(a_run_in_flight_past_its_first_claim_is_not_sent_again_on, mariadb: a_run_in_flight_past_its_first_claim_is_not_sent_again, postgres: a_run_in_flight_past_its_first_claim_is_not_sent_again_on_postgres);

/// A run that waited for its host's only slot, then hangs in flight past its first claim
/// (timeout + 10 s from its commit): its claim is renewed while it is in flight, so a second
/// ax process on the same store neither takes it nor sends it again before it times out.
async fn a_run_in_flight_past_its_first_claim_is_not_sent_again_on(store: TestStore) {
    let mut first = config(&store, true, "in-flight-a");
    first.dispatch.max_in_flight_per_host = 1;
    let mut second = first.clone();
    second.server.instance_id = Some("in-flight-b".into());
    let a = start_ax(&first).await;
    let b = start_ax(&second).await;
    let api = Api::new(&a);
    let hung = Hung::start().await;
    let task = api
        .create_task(
            json!({"name": unique_name("in-flight"), "cron": "0 0 0 1 1 *",
                            "handlerUrl": hung.url, "timeoutMs": 15_000, "maxRetry": 0}),
        )
        .await;
    let trigger = format!("/api/tasks/{}/trigger", task["id"]);
    for _ in 0..2 {
        let (status, _) = api.call("POST", &trigger, None).await;
        assert!((200..300).contains(&status), "triggered: {status}");
    }
    // The second run waits 15 s for the slot, then 15 s in flight: its first claim lapses
    // 10 s into its exchange.
    sleep(29.0).await;
    let received = hung.received();
    assert_eq!(duplicates(&received), vec![], "no run sent twice");
    assert_eq!(received.len(), 2, "both runs sent once: {received:?}");
    a.shutdown().await;
    b.shutdown().await;
}
