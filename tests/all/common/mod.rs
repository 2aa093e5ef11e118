//! Shared test harness: real MariaDB databases (one per test, dropped afterwards), SQLite files
//! in temp dirs, Redis databases leased per test ([`redis_url`]), an in-test HTTP executor, ax
//! itself started in-process, and a headless Chromium driven through WebDriver ([`webdriver`]),
//! and an SMTP sink for alert mail ([`smtp`]). Every async test runs in a [`TestSystem`], which
//! ends whatever the test started when the test ends, and a scenario runs on both stores with
//! [`on_each_backend!`].
#![allow(dead_code)]

pub mod attention;
mod backends;
mod chromedriver;
pub mod events;
mod redis_lease;
pub mod smtp;
mod system;
pub mod webdriver;

pub(crate) use backends::on_each_backend;
pub use redis_lease::{redis_database, redis_url};
pub use system::{assert_in_test_system, TestSystem};

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock, Mutex};
use std::time::{Duration, Instant};

use actix_web::{web, App, HttpResponse, HttpServer};
use ax_core::time::clock::SystemClock;
use ax_server::app::Ax;
use ax_server::config::Config;
use futures_util::StreamExt;
use serde_json::Value;

/// The MariaDB server the tests make their databases on: `AX_TEST_MYSQL` (a URL without a
/// database), by default the local one.
pub fn mysql_server() -> &'static str {
    static URL: LazyLock<String> =
        LazyLock::new(|| server_url("AX_TEST_MYSQL", "mysql://root@127.0.0.1:3306"));
    &URL
}

/// The URL of database `name` on the test's MariaDB, listing the servers `before` ahead of it.
pub fn mysql_server_after(before: &[String], name: &str) -> String {
    let server = mysql_server();
    let (user, live) = server
        .strip_prefix("mysql://")
        .and_then(|rest| rest.rsplit_once('@'))
        .map_or(("", server.trim_start_matches("mysql://")), |(u, h)| (u, h));
    let at = if user.is_empty() { "" } else { "@" };
    format!("mysql://{user}{at}{},{live}/{name}", before.join(","))
}

/// The PostgreSQL server the tests make their databases on: `AX_TEST_POSTGRES` (a URL without
/// a database), by default the local one.
pub fn postgres_server() -> &'static str {
    static URL: LazyLock<String> =
        LazyLock::new(|| server_url("AX_TEST_POSTGRES", "postgres://postgres@127.0.0.1:5432"));
    &URL
}

/// A uniquely named PostgreSQL database (created by ax), dropped with this.
pub struct PostgresDatabase(pub String);

impl PostgresDatabase {
    pub fn new() -> PostgresDatabase {
        PostgresDatabase(format!("ax_test_{}", uuid::Uuid::new_v4().simple()))
    }

    pub fn url(&self) -> String {
        format!("{}/{}", postgres_server(), self.0)
    }
}

impl Drop for PostgresDatabase {
    /// From a thread of its own, as [`TestStore`]'s: drop may run inside a runtime.
    fn drop(&mut self) {
        use diesel::connection::SimpleConnection;
        use diesel::Connection;
        type Sync = diesel_async::async_connection_wrapper::AsyncConnectionWrapper<
            diesel_async::AsyncPgConnection,
        >;
        let sql = format!("DROP DATABASE IF EXISTS \"{}\" WITH (FORCE)", self.0);
        let _ = std::thread::spawn(move || {
            if let Ok(mut conn) =
                <Sync as Connection>::establish(&format!("{}/postgres", postgres_server()))
            {
                let _ = conn.batch_execute(&sql);
            }
        })
        .join();
    }
}

/// The Redis server the tests use (databases of it by number): `AX_TEST_REDIS`, by default the
/// local one.
pub fn redis_server() -> &'static str {
    static URL: LazyLock<String> =
        LazyLock::new(|| server_url("AX_TEST_REDIS", "redis://127.0.0.1:6379"));
    &URL
}

fn server_url(variable: &str, local: &str) -> String {
    std::env::var(variable)
        .ok()
        .filter(|url| !url.trim().is_empty())
        .map_or_else(
            || local.to_string(),
            |url| url.trim_end_matches('/').to_string(),
        )
}
/// The signing secret of in-process test instances, so tests can check signatures and tokens.
pub const SECRET: &str = "test-signing-secret";

/// The store a test runs on.
pub enum TestStore {
    Sqlite(tempfile::TempDir),
    Mysql(String),
    Postgres(PostgresDatabase),
}

impl TestStore {
    /// A fresh SQLite file.
    pub fn sqlite() -> TestStore {
        TestStore::Sqlite(tempfile::tempdir().expect("temp dir"))
    }

    /// A uniquely named MariaDB database (created by ax's own start-up).
    pub fn mysql() -> TestStore {
        let name = format!("ax_test_{}", uuid::Uuid::new_v4().simple());
        TestStore::Mysql(name)
    }

    /// A uniquely named PostgreSQL database (created by ax's own start-up).
    pub fn postgres() -> TestStore {
        TestStore::Postgres(PostgresDatabase::new())
    }

    pub fn url(&self) -> String {
        match self {
            TestStore::Sqlite(dir) => format!("sqlite://{}/ax.db", dir.path().display()),
            TestStore::Mysql(name) => format!("{}/{name}", mysql_server()),
            TestStore::Postgres(database) => database.url(),
        }
    }

    /// The backend's name, as `Db::backend` says it.
    pub fn backend(&self) -> &'static str {
        match self {
            TestStore::Sqlite(_) => "sqlite",
            TestStore::Mysql(_) => "mysql",
            TestStore::Postgres(_) => "postgres",
        }
    }

    /// Whether it is a database server's, which several ax processes share (with Redis).
    pub fn is_shared(&self) -> bool {
        !matches!(self, TestStore::Sqlite(_))
    }

    /// The URL of its database server (without a database).
    pub fn server(&self) -> &'static str {
        match self {
            TestStore::Mysql(_) => mysql_server(),
            TestStore::Postgres(_) => postgres_server(),
            TestStore::Sqlite(_) => panic!("a SQLite store has no server"),
        }
    }

    /// The URL of this database with its server reached through `proxy`.
    pub fn url_through(&self, proxy: &Proxy) -> String {
        match self {
            TestStore::Mysql(name) => format!("mysql://root@{}/{name}", proxy.addr),
            TestStore::Postgres(database) => {
                format!("postgres://postgres@{}/{}", proxy.addr, database.0)
            }
            TestStore::Sqlite(_) => panic!("a SQLite store has no server to proxy"),
        }
    }
}

impl Drop for TestStore {
    fn drop(&mut self) {
        if let TestStore::Mysql(name) = self {
            drop_mysql_database(name);
        }
    }
}

/// Drops a test database from a thread of its own (drop may run inside a runtime).
fn drop_mysql_database(name: &str) {
    use diesel::connection::SimpleConnection;
    use diesel::Connection;
    type Sync = diesel_async::async_connection_wrapper::AsyncConnectionWrapper<
        diesel_async::AsyncMysqlConnection,
    >;
    let sql = format!("DROP DATABASE IF EXISTS `{name}`");
    let _ = std::thread::spawn(move || {
        if let Ok(mut conn) = <Sync as Connection>::establish(&format!("{}/", mysql_server())) {
            let _ = conn.batch_execute(&sql);
        }
    })
    .join();
}

/// A config for a test ax: port 0, fast batches, the given store, Redis if clustered.
pub fn config(store: &TestStore, redis: bool, instance_id: &str) -> Config {
    let mut config = Config::default();
    config.server.bind = Some("127.0.0.1".into());
    config.server.port = 0;
    config.server.instance_id = Some(instance_id.into());
    config.server.shutdown_timeout_ms = 3_000;
    config.store.url = store.url();
    config.store.batch_interval_ms = 50;
    config.redis.url = redis.then(redis_url);
    config.security.signing_secret = Some(SECRET.into());
    config.scheduler.preload_interval_secs = 2;
    config
}

/// An alert channel of `kind` named `name`, posting to `url`.
pub fn alert_channel(
    name: &str,
    kind: ax_core::alerting::ChannelKind,
    url: String,
) -> ax_core::alerting::Channel {
    ax_core::alerting::Channel {
        name: name.into(),
        kind,
        url: Some(url),
        template: None,
        smtp: None,
        to: Vec::new(),
        from: None,
        ca_file: None,
    }
}

/// A config for an in-process ax (`alerts-N`) whose default rule alerts on every channel of
/// `channels`.
pub fn with_channels(store: &TestStore, channels: Vec<ax_core::alerting::Channel>) -> Config {
    let mut config = config(store, false, &unique_name("alerts"));
    config.alerts.default_rule = ax_core::alerting::AlertRule {
        channels: channels.iter().map(|c| c.name.clone()).collect(),
        ..ax_core::alerting::AlertRule::default()
    };
    config.alerts.channels = channels;
    config
}

/// `config` with one webhook channel, `ops-hook`, posting to `url`, the channel of the
/// default rule: failing tasks alert for real.
pub fn with_webhook(mut config: Config, url: String) -> Config {
    let hook = alert_channel("ops-hook", ax_core::alerting::ChannelKind::Webhook, url);
    config.alerts.channels = vec![hook];
    config.alerts.default_rule = ax_core::alerting::AlertRule {
        channels: vec!["ops-hook".into()],
        ..ax_core::alerting::AlertRule::default()
    };
    config
}

/// `prefix-N`, a new N each call: task names are unique in a scene.
pub fn unique_name(prefix: &str) -> String {
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!("{prefix}-{n}")
}

/// Starts ax on the wall clock.
pub async fn start_ax(config: &Config) -> Ax {
    assert_in_test_system("an in-process ax");
    ax_server::app::start(config, Arc::new(SystemClock))
        .await
        .expect("ax starts")
}

/// One request the executor received.
#[derive(Debug, Clone)]
pub struct Received {
    pub request_id: String,
    pub header_request_id: String,
    pub body: Value,
    pub at: Instant,
    /// When it arrived, by the wall clock.
    pub wall: chrono::DateTime<chrono::Utc>,
    /// `X-Ax-Signature` as sent.
    pub signature: String,
    /// `X-Ax-Timestamp` as sent.
    pub timestamp: String,
    /// `X-Ax-Protocol` as sent.
    pub protocol: String,
    /// The raw body, as signed.
    pub raw: Vec<u8>,
}

impl Received {
    /// Its run's scheduled time, from the body.
    pub fn scheduled_at(&self) -> chrono::DateTime<chrono::Utc> {
        self.body["scheduledAt"]
            .as_str()
            .and_then(|at| at.parse().ok())
            .expect("scheduledAt")
    }

    /// How long after its run's scheduled time it arrived.
    pub fn lateness(&self) -> chrono::Duration {
        self.wall - self.scheduled_at()
    }

    /// A result callback for this run, with its callback token and these extra fields.
    pub fn callback(&self, status: &str, extra: Value) -> Value {
        let mut body = serde_json::json!({
            "requestId": self.request_id,
            "callbackToken": self.body["callbackToken"],
            "status": status,
        });
        if let (Some(body), Value::Object(extra)) = (body.as_object_mut(), extra) {
            body.extend(extra);
        }
        body
    }

    /// Whether the signature is valid for `secret`.
    pub fn signed_with(&self, secret: &str) -> bool {
        let timestamp: i64 = self.timestamp.parse().unwrap_or(-1);
        self.signature == ax_core::security::sign_dispatch(secret.as_bytes(), timestamp, &self.raw)
    }
}

/// How the test executor answers.
#[derive(Debug, Clone)]
pub enum Reply {
    /// 200 `{"status":"SUCCESS"}`.
    Success,
    /// 200 `{"status":"FAILED","code":..,"message":..}`.
    Failed,
    /// 202 with no result: a callback is expected.
    Accepted,
    /// This HTTP status, with a short body.
    Status(u16),
    /// Sleeps before answering SUCCESS.
    Slow(Duration),
    /// Answers 500 to the first `n` deliveries of each run, then SUCCESS.
    FailFirst(usize),
    /// 200 `{"status":"FAILED","retry":false}`.
    FailNoRetry,
    /// 200 with this body, as it is.
    Body(String),
    /// 200 at once, then a 40-byte SUCCESS body one byte per interval.
    Trickle(Duration),
}

/// A real HTTP executor running inside the test.
pub struct Executor {
    pub url: String,
    received: Arc<Mutex<Vec<Received>>>,
    /// Requests being handled now, and the most at once.
    load: Arc<(AtomicUsize, AtomicUsize)>,
    server: actix_web::dev::ServerHandle,
}

type ExecutorState = (
    Arc<Mutex<Vec<Received>>>,
    Reply,
    Arc<(AtomicUsize, AtomicUsize)>,
);

impl Executor {
    pub async fn start(reply: Reply) -> Executor {
        Executor::start_keeping_alive(reply, Duration::from_secs(5)).await
    }

    /// An executor that closes a connection idle for `keep_alive` (gunicorn's default is 2 s,
    /// Node's and uvicorn's 5 s).
    pub async fn start_keeping_alive(reply: Reply, keep_alive: Duration) -> Executor {
        Executor::serve(reply, keep_alive, 2048).await
    }

    /// An executor whose listen queue holds `backlog` connections (beyond: SYNs are dropped
    /// and retried by the client's kernel a second later).
    pub async fn start_with_backlog(reply: Reply, backlog: u32) -> Executor {
        Executor::serve(reply, Duration::from_secs(5), backlog).await
    }

    /// An executor on this address (one that refused connections until now, say).
    pub async fn start_at(reply: Reply, addr: &str) -> Executor {
        Executor::serve_at(reply, Duration::from_secs(5), 2048, addr).await
    }

    async fn serve(reply: Reply, keep_alive: Duration, backlog: u32) -> Executor {
        Executor::serve_at(reply, keep_alive, backlog, "127.0.0.1:0").await
    }

    async fn serve_at(reply: Reply, keep_alive: Duration, backlog: u32, addr: &str) -> Executor {
        assert_in_test_system("an executor");
        let received = Arc::new(Mutex::new(Vec::new()));
        let load: Arc<(AtomicUsize, AtomicUsize)> = Arc::default();
        let state: ExecutorState = (received.clone(), reply, load.clone());
        let server = HttpServer::new(move || {
            App::new()
                .app_data(web::Data::new(state.clone()))
                .default_service(web::to(handle))
        })
        .keep_alive(keep_alive)
        .workers(1)
        .backlog(backlog)
        .disable_signals()
        .bind(addr)
        .expect("bind executor");
        let addr = server.addrs()[0];
        let server = server.run();
        let handle = server.handle();
        actix_rt::spawn(server);
        Executor {
            url: format!("http://{addr}/run"),
            received,
            load,
            server: handle,
        }
    }

    /// Its base URL, as an executor group member is given: `http://127.0.0.1:PORT/`.
    pub fn base(&self) -> String {
        self.url.trim_end_matches("run").to_string()
    }

    /// The most requests it handled at once.
    pub fn most_at_once(&self) -> usize {
        self.load.1.load(Ordering::SeqCst)
    }

    pub fn received(&self) -> Vec<Received> {
        self.received.lock().expect("lock").clone()
    }

    /// Waits until at least `n` requests arrived (or the timeout passes); returns them all.
    pub async fn wait_for(&self, n: usize, timeout: Duration) -> Vec<Received> {
        let deadline = Instant::now() + timeout;
        loop {
            let received = self.received();
            if received.len() >= n || Instant::now() > deadline {
                return received;
            }
            actix_rt::time::sleep(Duration::from_millis(50)).await;
        }
    }

    pub async fn stop(self) {
        self.server.stop(false).await;
    }
}

async fn handle(
    state: web::Data<ExecutorState>,
    req: actix_web::HttpRequest,
    raw: web::Bytes,
) -> HttpResponse {
    let load = state.2.clone();
    let now = load.0.fetch_add(1, Ordering::SeqCst) + 1;
    load.1.fetch_max(now, Ordering::SeqCst);
    let response = reply(state, req, raw).await;
    load.0.fetch_sub(1, Ordering::SeqCst);
    response
}

async fn reply(
    state: web::Data<ExecutorState>,
    req: actix_web::HttpRequest,
    raw: web::Bytes,
) -> HttpResponse {
    let body: Value = serde_json::from_slice(&raw).unwrap_or(Value::Null);
    let header = |name: &str| {
        req.headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string()
    };
    let received = Received {
        request_id: body["requestId"].as_str().unwrap_or_default().to_string(),
        header_request_id: header("X-Ax-Request-Id"),
        body,
        at: Instant::now(),
        wall: chrono::Utc::now(),
        signature: header("X-Ax-Signature"),
        timestamp: header("X-Ax-Timestamp"),
        protocol: header("X-Ax-Protocol"),
        raw: raw.to_vec(),
    };
    let deliveries_of_run = {
        let mut all = state.0.lock().expect("lock");
        all.push(received.clone());
        all.iter()
            .filter(|r| r.request_id == received.request_id)
            .count()
    };
    match &state.1 {
        Reply::Success => HttpResponse::Ok().json(serde_json::json!({"status": "SUCCESS"})),
        Reply::Failed => HttpResponse::Ok()
            .json(serde_json::json!({"status": "FAILED", "code": "E1", "message": "boom"})),
        Reply::Accepted => HttpResponse::Accepted().finish(),
        Reply::Status(code) => {
            HttpResponse::build(actix_web::http::StatusCode::from_u16(*code).expect("status"))
                .body("executor says no")
        }
        Reply::Slow(delay) => {
            actix_rt::time::sleep(*delay).await;
            HttpResponse::Ok().json(serde_json::json!({"status": "SUCCESS"}))
        }
        Reply::FailFirst(n) if deliveries_of_run <= *n => {
            HttpResponse::InternalServerError().body("not yet")
        }
        Reply::FailFirst(_) => HttpResponse::Ok().json(serde_json::json!({"status": "SUCCESS"})),
        Reply::FailNoRetry => HttpResponse::Ok()
            .json(serde_json::json!({"status": "FAILED", "code": "FATAL", "retry": false})),
        Reply::Body(body) => HttpResponse::Ok()
            .content_type("application/json")
            .body(body.clone()),
        Reply::Trickle(interval) => {
            let body = format!("{:<40}", r#"{"status":"SUCCESS"}"#).into_bytes();
            let interval = *interval;
            let bytes = futures_util::stream::iter(body).then(move |byte| async move {
                actix_rt::time::sleep(interval).await;
                Ok::<_, actix_web::Error>(web::Bytes::from(vec![byte]))
            });
            HttpResponse::Ok()
                .content_type("application/json")
                .streaming(Box::pin(bytes))
        }
    }
}

/// A base URL nothing listens on: every connection is refused.
pub fn refusing_base() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    drop(listener);
    format!("http://{addr}/")
}

/// A small JSON client for ax's API.
pub struct Api {
    base: String,
    client: awc::Client,
}

impl Api {
    pub fn new(ax: &Ax) -> Api {
        Api::at(format!("http://{}", ax.addr()))
    }

    /// A client of the ax listening at `base` (`http://host:port`).
    pub fn at(base: String) -> Api {
        Api {
            base,
            client: awc::Client::builder()
                .timeout(Duration::from_secs(10))
                .finish(),
        }
    }

    /// Sends a request; returns the status and the JSON body (Null when empty).
    pub async fn call(&self, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
        self.try_call(method, path, body)
            .await
            .unwrap_or_else(|| panic!("{method} {path}: no answer from {}", self.base))
    }

    /// Like `call`, but `None` when the server cannot be reached (it may have been killed).
    pub async fn try_call(
        &self,
        method: &str,
        path: &str,
        body: Option<Value>,
    ) -> Option<(u16, Value)> {
        let method = actix_web::http::Method::from_bytes(method.as_bytes()).expect("method");
        let request = self.client.request(method, format!("{}{path}", self.base));
        let mut response = match body {
            Some(body) => request.send_json(&body).await,
            None => request.send().await,
        }
        .ok()?;
        let status = response.status().as_u16();
        let bytes = response.body().limit(16 << 20).await.ok()?;
        Some((
            status,
            serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        ))
    }

    /// Sends raw bytes with a content type, on a connection of its own that reads while it
    /// writes: a server refusing a large body may answer and close before reading it all.
    pub async fn raw(
        &self,
        method: &str,
        path: &str,
        content_type: &str,
        body: Vec<u8>,
    ) -> (u16, Value) {
        let host = self.base.trim_start_matches("http://");
        let addr = host.parse().expect("a base of http://ip:port");
        let mut request = format!(
            "{method} {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: {content_type}\r\n\
             Content-Length: {}\r\nConnection: close\r\n\r\n",
            body.len()
        )
        .into_bytes();
        request.extend(body);
        let (status, _, reply) = raw_exchange(addr, request).await;
        (status, reply)
    }

    pub async fn get(&self, path: &str) -> (u16, Value) {
        self.call("GET", path, None).await
    }

    pub async fn post(&self, path: &str, body: Value) -> (u16, Value) {
        self.call("POST", path, Some(body)).await
    }

    /// Fires one run of `task` now (`POST /api/tasks/{id}/trigger`); panics unless 201. The run.
    pub async fn trigger(&self, task: &Value) -> Value {
        let (status, run) = self
            .post(
                &format!("/api/tasks/{}/trigger", task["id"]),
                serde_json::json!({}),
            )
            .await;
        assert_eq!(status, 201, "trigger task {}: {run}", task["id"]);
        run
    }

    /// Creates a task; panics unless 201.
    pub async fn create_task(&self, body: Value) -> Value {
        let (status, task) = self.post("/api/tasks", body).await;
        assert_eq!(status, 201, "create task: {task}");
        task
    }

    /// Every instance of a task (up to 500), newest first.
    pub async fn instances(&self, task_id: i64) -> Vec<Value> {
        let (status, page) = self
            .get(&format!("/api/tasks/{task_id}/instances?limit=500"))
            .await;
        assert_eq!(status, 200, "{page}");
        page["items"].as_array().cloned().unwrap_or_default()
    }

    /// Polls `path` until its run has status `want`; fails the test if it does not in time.
    pub async fn wait_status(&self, path: &str, want: &str, timeout: Duration) -> Value {
        let deadline = Instant::now() + timeout;
        loop {
            let (status, run) = self.get(path).await;
            if (status == 200 && run["status"] == want) || Instant::now() > deadline {
                assert_eq!(run["status"], want, "{run}");
                return run;
            }
            actix_rt::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Waits until at least `n` instances of the task are due and every due one is in a final
    /// state; returns them all.
    pub async fn wait_final(&self, task_id: i64, n: usize, timeout: Duration) -> Vec<Value> {
        let deadline = Instant::now() + timeout;
        loop {
            let runs = self.instances(task_id).await;
            // A run committed ahead of its time (scheduler.commit_ahead_ms) is not due yet.
            let now = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
            let due: Vec<&Value> = runs
                .iter()
                .filter(|r| {
                    r["scheduledAt"]
                        .as_str()
                        .is_some_and(|at| at <= now.as_str())
                })
                .collect();
            let all_final = due.iter().all(|r| {
                matches!(
                    r["status"].as_str(),
                    Some("SUCCESS" | "FAILED" | "MISSED" | "SKIPPED" | "CANCELLED")
                )
            });
            if (due.len() >= n && all_final) || Instant::now() > deadline {
                return runs;
            }
            actix_rt::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// An `ax serve` child process, for tests that kill it.
pub struct AxProcess {
    pub port: u16,
    /// `AX_INSTANCE_ID`, or with `start_with_host_identity` only the name of its log file.
    pub instance_id: String,
    /// Whether `AX_INSTANCE_ID` is set.
    configured_id: bool,
    child: std::process::Child,
    env: Vec<(String, String)>,
    dir: std::path::PathBuf,
}

/// A port nobody listens on right now.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port")
}

impl AxProcess {
    /// Starts `ax serve` in `dir` with these `AX_…` settings and waits until it is healthy.
    pub async fn start(
        dir: &std::path::Path,
        instance_id: &str,
        env: Vec<(String, String)>,
    ) -> AxProcess {
        AxProcess::spawn(dir, instance_id, true, env).await
    }

    /// Like `start`, without `AX_INSTANCE_ID`: the process takes its host's identity. `name`
    /// names its log file.
    pub async fn start_with_host_identity(
        dir: &std::path::Path,
        name: &str,
        env: Vec<(String, String)>,
    ) -> AxProcess {
        AxProcess::spawn(dir, name, false, env).await
    }

    /// Like `start`, but waits only until `/healthz` answers, healthy or not (a process whose
    /// clock is skewed, say).
    pub async fn start_answering(
        dir: &std::path::Path,
        instance_id: &str,
        env: Vec<(String, String)>,
    ) -> AxProcess {
        let process = AxProcess::launch(dir, instance_id, true, env);
        process.wait_for_health(false).await;
        process
    }

    async fn spawn(
        dir: &std::path::Path,
        instance_id: &str,
        configured_id: bool,
        env: Vec<(String, String)>,
    ) -> AxProcess {
        let process = AxProcess::launch(dir, instance_id, configured_id, env);
        process.wait_healthy().await;
        process
    }

    fn launch(
        dir: &std::path::Path,
        instance_id: &str,
        configured_id: bool,
        env: Vec<(String, String)>,
    ) -> AxProcess {
        let port = free_port();
        let id = configured_id.then_some(instance_id);
        let child = spawn_ax(dir, instance_id, id, port, &env);
        AxProcess {
            port,
            instance_id: instance_id.to_string(),
            configured_id,
            child,
            env,
            dir: dir.to_path_buf(),
        }
    }

    pub fn base(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    async fn wait_healthy(&self) {
        self.wait_for_health(true).await;
    }

    /// Waits until `/healthz` answers (200, or any answer unless `healthy`).
    async fn wait_for_health(&self, healthy: bool) {
        let client = awc::Client::default();
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if let Ok(response) = client.get(format!("{}/healthz", self.base())).send().await {
                if response.status().is_success() || !healthy {
                    return;
                }
            }
            actix_rt::time::sleep(Duration::from_millis(50)).await;
        }
        panic!(
            "ax {} did not become healthy; see {}",
            self.instance_id,
            self.log_path().display()
        );
    }

    pub fn log_path(&self) -> std::path::PathBuf {
        self.dir.join(format!("{}.log", self.instance_id))
    }

    /// The most memory the process has held so far (`VmHWM`), in KiB.
    pub fn peak_memory_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .expect("the process's status");
        status
            .lines()
            .find_map(|line| line.strip_prefix("VmHWM:"))
            .and_then(|value| value.split_whitespace().next()?.parse().ok())
            .expect("VmHWM")
    }

    /// `kill -9`: no shutdown path runs.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// SIGTERM, then waits for the exit; returns its status code.
    pub async fn terminate(mut self) -> Option<i32> {
        self.stop().await
    }

    /// SIGTERM, then waits for the exit (a kill after 20 s); returns its status code. The
    /// process can be restarted.
    pub async fn stop(&mut self) -> Option<i32> {
        let _ = std::process::Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                return status.code();
            }
            actix_rt::time::sleep(Duration::from_millis(50)).await;
        }
        self.kill();
        None
    }

    /// Sends the process `signal` (`STOP`, `CONT`, …) by name.
    pub fn signal(&self, signal: &str) {
        let sent = std::process::Command::new("kill")
            .args([&format!("-{signal}"), &self.child.id().to_string()])
            .status()
            .expect("kill");
        assert!(sent.success(), "kill -{signal}");
    }

    /// How the process ended, if it has (a signal shows as `signal: N`); `None` while it runs.
    pub fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// Starts the same instance again (same id, settings and port) and waits until healthy.
    pub async fn restart(&mut self) {
        let id = self.configured_id.then_some(self.instance_id.as_str());
        self.child = spawn_ax(&self.dir, &self.instance_id, id, self.port, &self.env);
        self.wait_healthy().await;
    }
}

impl Drop for AxProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Spawns `ax serve` logging to `<log_name>.log`, with `AX_INSTANCE_ID` set to `instance_id`.
fn spawn_ax(
    dir: &std::path::Path,
    log_name: &str,
    instance_id: Option<&str>,
    port: u16,
    env: &[(String, String)],
) -> std::process::Child {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join(format!("{log_name}.log")))
        .expect("log file");
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_ax"));
    command
        .arg("serve")
        .current_dir(dir)
        .env("AX_BIND", "127.0.0.1")
        .env("AX_PORT", port.to_string())
        .env_remove("AX_INSTANCE_ID")
        .env("RUST_LOG", "warn")
        .stdout(std::process::Stdio::null())
        .stderr(log);
    if let Some(id) = instance_id {
        command.env("AX_INSTANCE_ID", id);
    }
    for (key, value) in env {
        command.env(key, value);
    }
    command.spawn().expect("spawn ax")
}

/// The `host:port` a server URL names ([`mysql_server`], [`redis_server`]), for a [`Proxy`] target.
pub fn host_port(url: &str) -> String {
    let url = url::Url::parse(url).expect("server URL");
    let host = url.host_str().expect("server host");
    let port = url.port().expect("server port");
    format!("{host}:{port}")
}

/// A TCP proxy in front of a real server: `cut()` takes the server away from whoever connects
/// through the proxy and `restore()` gives it back, an outage that leaves the shared server
/// running for everyone else.
pub struct Proxy {
    /// Where to connect instead of the target.
    pub addr: std::net::SocketAddr,
    shared: Arc<ProxyShared>,
    accept: actix_rt::task::JoinHandle<()>,
}

struct ProxyShared {
    target: String,
    /// True while cut: open connections are closed, new ones are closed on arrival.
    cut: tokio::sync::watch::Sender<bool>,
    forwarded: AtomicUsize,
    refused: AtomicUsize,
    /// The local ports of the proxy's own connections to the target: the server sees a
    /// connection made through the proxy as coming from one of these.
    upstream_ports: Mutex<Vec<u16>>,
}

impl Proxy {
    /// Listens on 127.0.0.1 (a free port) and forwards each connection to `target`
    /// (`host:port`). Runs on the calling test's runtime.
    pub async fn start(target: &str) -> Proxy {
        let listener = actix_rt::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind proxy");
        let addr = listener.local_addr().expect("proxy address");
        let shared = Arc::new(ProxyShared {
            target: target.to_string(),
            cut: tokio::sync::watch::Sender::new(false),
            forwarded: AtomicUsize::new(0),
            refused: AtomicUsize::new(0),
            upstream_ports: Mutex::new(Vec::new()),
        });
        let accept = actix_rt::spawn(accept_connections(listener, shared.clone()));
        Proxy {
            addr,
            shared,
            accept,
        }
    }

    /// Closes every open connection and, until `restore`, every new one as it arrives.
    pub fn cut(&self) {
        self.shared.cut.send_replace(true);
    }

    /// Forwards new connections again.
    pub fn restore(&self) {
        self.shared.cut.send_replace(false);
    }

    /// Connections forwarded to the target so far.
    pub fn forwarded(&self) -> usize {
        self.shared.forwarded.load(Ordering::SeqCst)
    }

    /// Connections closed on arrival because the proxy was cut.
    pub fn refused(&self) -> usize {
        self.shared.refused.load(Ordering::SeqCst)
    }

    /// The local ports of the proxy's connections to the target.
    pub fn upstream_ports(&self) -> Vec<u16> {
        self.shared.upstream_ports.lock().expect("lock").clone()
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.accept.abort();
        self.cut();
    }
}

async fn accept_connections(listener: actix_rt::net::TcpListener, shared: Arc<ProxyShared>) {
    loop {
        match listener.accept().await {
            Ok((client, _)) => {
                actix_rt::spawn(forward(client, shared.clone()));
            }
            // Out of file descriptors, say: wait instead of spinning.
            Err(_) => actix_rt::time::sleep(Duration::from_millis(10)).await,
        }
    }
}

async fn forward(mut client: actix_rt::net::TcpStream, shared: Arc<ProxyShared>) {
    let mut cut = shared.cut.subscribe();
    if *cut.borrow_and_update() {
        shared.refused.fetch_add(1, Ordering::SeqCst);
        return;
    }
    let Ok(mut upstream) = actix_rt::net::TcpStream::connect(&shared.target).await else {
        return;
    };
    shared.forwarded.fetch_add(1, Ordering::SeqCst);
    if let Ok(local) = upstream.local_addr() {
        shared
            .upstream_ports
            .lock()
            .expect("lock")
            .push(local.port());
    }
    // Dropping both streams closes them: each side sees the other go away.
    tokio::select! {
        _ = tokio::io::copy_bidirectional(&mut client, &mut upstream) => {}
        _ = cut.wait_for(|cut| *cut) => {}
    }
}

/// A `redis-server` of the test's own on `port`, without persistence, killed when dropped: a
/// Redis that comes up while ax runs, or one with a password, which the shared Redis must not
/// be given.
pub struct RedisProcess {
    pub port: u16,
    child: std::process::Child,
}

impl RedisProcess {
    /// Starts it with `args` besides the port, and waits until it listens.
    pub async fn start(port: u16, args: &[&str]) -> RedisProcess {
        let port_arg = port.to_string();
        let mut command = std::process::Command::new("redis-server");
        command
            .args(["--port", &port_arg, "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .args(args)
            .current_dir(std::env::temp_dir());
        RedisProcess::spawn(port, command).await
    }

    /// A Redis Sentinel on `port` that monitors the primary on `primary_port` as `service`
    /// (down after 1 s, quorum 2) with the data nodes' `password`, its config (which it
    /// rewrites) in `dir`.
    pub async fn sentinel(
        dir: &std::path::Path,
        port: u16,
        service: &str,
        primary_port: u16,
        password: &str,
    ) -> RedisProcess {
        RedisProcess::sentinel_with(dir, port, service, primary_port, password, "").await
    }

    /// [`RedisProcess::sentinel`] with `extra` lines of config after its own (TLS, a password
    /// of its own).
    pub async fn sentinel_with(
        dir: &std::path::Path,
        port: u16,
        service: &str,
        primary_port: u16,
        password: &str,
        extra: &str,
    ) -> RedisProcess {
        let config = dir.join(format!("sentinel-{port}.conf"));
        std::fs::write(
            &config,
            format!(
                "port {port}\nbind 127.0.0.1\ndir {dir}\n\
                 sentinel monitor {service} 127.0.0.1 {primary_port} 2\n\
                 sentinel auth-pass {service} {password}\n\
                 sentinel down-after-milliseconds {service} 1000\n\
                 sentinel failover-timeout {service} 3000\n\
                 sentinel parallel-syncs {service} 1\n{extra}",
                dir = dir.display()
            ),
        )
        .expect("sentinel config");
        let mut command = std::process::Command::new("redis-server");
        command.arg(&config).arg("--sentinel").current_dir(dir);
        RedisProcess::spawn(port, command).await
    }

    async fn spawn(port: u16, mut command: std::process::Command) -> RedisProcess {
        let child = command
            .stdout(std::process::Stdio::null())
            .spawn()
            .expect("start redis-server (Debian's redis-server package)");
        let process = RedisProcess { port, child };
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "redis-server on port {port} does not listen"
            );
            actix_rt::time::sleep(Duration::from_millis(20)).await;
        }
        process
    }

    /// A connection to it (without a password).
    pub async fn conn(&self) -> redis::aio::MultiplexedConnection {
        self.conn_with("").await
    }

    /// A connection to it with `password` (none if empty).
    pub async fn conn_with(&self, password: &str) -> redis::aio::MultiplexedConnection {
        let credentials = if password.is_empty() {
            String::new()
        } else {
            format!(":{password}@")
        };
        redis::Client::open(format!("redis://{credentials}127.0.0.1:{}", self.port))
            .expect("redis url")
            .get_multiplexed_async_connection()
            .await
            .expect("connect to the test's redis-server")
    }
}

impl Drop for RedisProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A tiny deterministic generator for kill moments; tests print the seed for replay.
pub struct XorShift(pub u64);

impl XorShift {
    /// A duration in `[low, high)` milliseconds.
    pub fn between_ms(&mut self, low: u64, high: u64) -> Duration {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        Duration::from_millis(low + self.0 % (high - low))
    }
}

/// A task's rows by scheduled second; fails on two rows for one second.
pub fn one_row_per_second(
    task_id: i64,
    rows: &[ax_store::rows::models::Run],
) -> std::collections::BTreeMap<i64, &ax_store::rows::models::Run> {
    let mut by_second = std::collections::BTreeMap::new();
    for row in rows {
        let second = row.scheduled_at.and_utc().timestamp();
        assert!(
            by_second.insert(second, row).is_none(),
            "task {task_id}: two rows for second {second}"
        );
    }
    by_second
}

/// Every run of a task, newest scheduled first.
pub async fn rows_of(db: &ax_store::Db, task_id: i64) -> Vec<ax_store::rows::models::Run> {
    let mut conn = db.conn().await.expect("conn");
    let page = ax_store::queries::Page {
        limit: 100_000,
        offset: 0,
    };
    let (rows, _) =
        ax_store::queries::runs::list_for_task(&mut conn, ax_core::run::TaskId(task_id), page)
            .await
            .expect("rows");
    rows
}

/// Sends raw bytes on a fresh connection, reading while it writes (a server may answer early
/// and close before it has read everything); answers the status, the head in lower case and
/// the JSON body of the reply.
pub async fn raw_exchange(addr: std::net::SocketAddr, request: Vec<u8>) -> (u16, String, Value) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let (mut read, mut write) = stream.into_split();
    let writer = actix_rt::spawn(async move {
        // A failed write is the server closing early: its answer is what counts.
        let _ = write.write_all(&request).await;
        write
    });
    let mut reply = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), read.read_to_end(&mut reply)).await;
    drop(writer.await);
    let text = String::from_utf8_lossy(&reply).to_string();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or(0);
    (
        status,
        head.to_ascii_lowercase(),
        serde_json::from_str(body).unwrap_or(Value::Null),
    )
}

/// The status of a bodiless request and one header of its answer.
pub async fn status_and_header(method: &str, url: &str, header: &str) -> (u16, Option<String>) {
    let method = actix_web::http::Method::from_bytes(method.as_bytes()).expect("method");
    let response = awc::Client::default()
        .request(method, url)
        .send()
        .await
        .expect("answer");
    let value = response
        .headers()
        .get(header)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    (response.status().as_u16(), value)
}

/// The `ax` binary as a command without the caller's `AX_…` variables: a developer's
/// settings must not leak into what a test runs (and `--help` shows none of their values).
pub fn ax_command() -> std::process::Command {
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_ax"));
    for (name, _) in std::env::vars_os() {
        if name.to_string_lossy().starts_with("AX_") {
            command.env_remove(name);
        }
    }
    command
}
