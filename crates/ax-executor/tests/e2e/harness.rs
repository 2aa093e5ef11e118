//! A real `ax serve` per test (the binary from `AX_BIN`, default `target/debug/ax`), executors
//! in this process or as processes of their own, and the calls the tests make. Every process
//! started here is killed when its value is dropped, pass or fail.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use ax_executor::{Executor, ShutdownHandle};
use serde_json::{json, Value};

/// ax's and the executors' signing secret.
pub const SECRET: &str = "sdk-e2e-signing-secret-0123";
pub const ADMIN_TOKEN: &str = "sdk-e2e-admin-token-0123456";
pub const EXECUTOR_TOKEN: &str = "sdk-e2e-executor-token-01234";

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace().join("target"))
}

/// The ax binary under test.
pub fn ax_bin() -> PathBuf {
    let bin = std::env::var_os("AX_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| target_dir().join("debug/ax"));
    assert!(
        bin.is_file(),
        "no ax binary at {}: build it (`cargo build --bin ax` at the workspace root) or set AX_BIN",
        bin.display()
    );
    bin
}

/// An example of this crate, built by `cargo test -p ax-executor` (or `--examples`).
pub fn example_bin(name: &str) -> PathBuf {
    let bin = target_dir().join("debug/examples").join(name);
    assert!(
        bin.is_file(),
        "no example binary at {}: run `cargo build -p ax-executor --examples` (plain \
         `cargo test -p ax-executor` builds it)",
        bin.display()
    );
    bin
}

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|addr| addr.port())
        .expect("a free port on 127.0.0.1")
}

pub fn unique(prefix: &str) -> String {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    format!("{prefix}-{}", NEXT.fetch_add(1, Ordering::Relaxed))
}

pub fn unix_now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| since.as_secs() as i64)
}

/// Polls `f` every 50 ms until it gives `Some`, failing with `what` after `within`.
pub async fn eventually<T, F, Fut>(within: Duration, what: &str, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + within;
    loop {
        if let Some(found) = f().await {
            return found;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn wait_listening(port: u16, what: &str) {
    eventually(Duration::from_secs(30), what, || async {
        tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .ok()
            .map(|_| ())
    })
    .await
}

/// A child process, killed (SIGKILL) when dropped if still running.
pub struct Process {
    pub child: Child,
    pub name: String,
    log: PathBuf,
    /// Where an example's log file lives, removed with it.
    _dir: Option<tempfile::TempDir>,
}

impl Process {
    fn spawn(name: &str, command: &mut Command, log: PathBuf) -> Process {
        let out = std::fs::File::create(&log).expect("a log file");
        let err = out.try_clone().expect("a log file");
        // Nothing of the caller's ax settings leaks in: each test sets its own.
        for (key, _) in std::env::vars() {
            if key.starts_with("AX_") || key == "EXECUTOR_URL" || key == "EXECUTOR_ADDR" {
                command.env_remove(key);
            }
        }
        let child = command
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .unwrap_or_else(|err| panic!("cannot start {name}: {err}"));
        Process {
            child,
            name: name.to_string(),
            log,
            _dir: None,
        }
    }

    /// Sends a signal (`TERM`, `KILL`).
    pub fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(self.child.id().to_string())
            .status()
            .expect("kill");
        assert!(status.success(), "kill -{signal} {}", self.name);
    }

    /// Waits for the process to exit; its exit code.
    pub async fn exited(&mut self, within: Duration) -> Option<i32> {
        let name = format!("{} to exit", self.name);
        let child = &mut self.child;
        eventually(within, &name, || {
            let status = child.try_wait().ok().flatten();
            async move { status.map(|status| status.code()) }
        })
        .await
    }

    pub fn output(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            let output = self.output();
            let tail: Vec<&str> = output.lines().rev().take(40).collect();
            eprintln!("--- last lines of {} ---", self.name);
            for line in tail.iter().rev() {
                eprintln!("{line}");
            }
        }
    }
}

/// A running `ax serve` in a temp dir of its own, on SQLite.
pub struct Ax {
    pub url: String,
    admin: Option<String>,
    client: awc::Client,
    _process: Process,
    _dir: tempfile::TempDir,
}

/// How a test's ax is set up.
#[derive(Default)]
pub struct AxOptions {
    /// Admin and executor tokens (the executor's may join `billing`).
    pub tokens: bool,
    /// `executors.heartbeat_secs` and `executors.member_ttl_secs`.
    pub heartbeat_and_ttl_secs: Option<(u64, u64)>,
}

impl Ax {
    pub async fn start() -> Ax {
        Ax::start_with(AxOptions::default()).await
    }

    pub async fn start_with(options: AxOptions) -> Ax {
        // The SDK's own log lines, shown with a failing test's output (RUST_LOG=info).
        let _ = env_logger::builder().is_test(true).try_init();
        let dir = tempfile::tempdir().expect("a temp dir");
        let port = free_port();
        let mut command = Command::new(ax_bin());
        command.arg("serve").current_dir(dir.path());
        if options.tokens {
            let config = dir.path().join("ax.yaml");
            let yaml = format!(
                "server:\n  admin_token: \"{ADMIN_TOKEN}\"\n  tokens:\n    - {{name: \
                 billing-executor, token: \"{EXECUTOR_TOKEN}\", role: executor, groups: \
                 [billing]}}\n"
            );
            std::fs::write(&config, yaml).expect("ax.yaml");
            command.arg("--config").arg(&config);
        }
        let process = {
            let db = dir.path().join("ax.db");
            command
                .env("AX_STORE_URL", format!("sqlite://{}", db.display()))
                .env("AX_BIND", "127.0.0.1")
                .env("AX_PORT", port.to_string())
                .env("AX_SIGNING_SECRET", SECRET)
                .env("AX_RETRY_BACKOFF_SECS", "1")
                .env("AX_RETRY_FACTOR", "1");
            if let Some((heartbeat, ttl)) = options.heartbeat_and_ttl_secs {
                command
                    .env("AX_EXECUTOR_HEARTBEAT_SECS", heartbeat.to_string())
                    .env("AX_EXECUTOR_MEMBER_TTL_SECS", ttl.to_string());
            }
            Process::spawn("ax serve", &mut command, dir.path().join("ax.log"))
        };
        let ax = Ax {
            url: format!("http://127.0.0.1:{port}"),
            admin: options.tokens.then(|| ADMIN_TOKEN.to_string()),
            client: awc::Client::builder()
                .timeout(Duration::from_secs(30))
                .finish(),
            _process: process,
            _dir: dir,
        };
        let healthz = format!("{}/healthz", ax.url);
        let client = &ax.client;
        eventually(
            Duration::from_secs(60),
            "ax's /healthz to answer 200",
            || {
                let request = client.get(&healthz).send();
                async move { request.await.ok().filter(|r| r.status() == 200).map(|_| ()) }
            },
        )
        .await;
        ax
    }

    async fn call(&self, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
        let method = awc::http::Method::from_bytes(method.as_bytes()).expect("a method");
        let mut request = self.client.request(method, format!("{}{path}", self.url));
        if let Some(token) = &self.admin {
            request = request.bearer_auth(token);
        }
        let mut response = match body {
            Some(body) => request.send_json(&body).await,
            None => request.send().await,
        }
        .unwrap_or_else(|err| panic!("{path}: {err}"));
        let bytes = response.body().limit(16 << 20).await.expect("a body");
        let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        (response.status().as_u16(), body)
    }

    pub async fn get(&self, path: &str) -> (u16, Value) {
        self.call("GET", path, None).await
    }

    pub async fn post(&self, path: &str, body: Value) -> (u16, Value) {
        self.call("POST", path, Some(body)).await
    }

    /// Creates a task that fires on no schedule soon (runs are triggered), from `fields`.
    pub async fn task(&self, fields: Value) -> i64 {
        let mut body = json!({"name": unique("sdk"), "cron": "0 0 0 1 1 *", "maxRetry": 0,
            "timeoutMs": 10_000});
        if let (Some(body), Some(fields)) = (body.as_object_mut(), fields.as_object()) {
            body.extend(fields.clone());
        }
        let (status, task) = self.post("/api/tasks", body).await;
        assert_eq!(status, 201, "{task}");
        task["id"].as_i64().expect("a task id")
    }

    /// Fires a run of the task now; its requestId.
    pub async fn trigger(&self, task: i64) -> String {
        let (status, run) = self
            .post(&format!("/api/tasks/{task}/trigger"), json!({}))
            .await;
        assert_eq!(status, 201, "{run}");
        run["requestId"].as_str().expect("a requestId").to_string()
    }

    pub async fn run(&self, request_id: &str) -> Value {
        let (status, run) = self.get(&format!("/api/instances/{request_id}")).await;
        assert_eq!(status, 200, "{run}");
        run
    }

    /// Waits until the run's status is one of `statuses`.
    pub async fn run_in(&self, request_id: &str, statuses: &[&str], within: Duration) -> Value {
        let what = format!("run {request_id} to be {statuses:?}");
        eventually(within, &what, || async {
            let run = self.run(request_id).await;
            statuses
                .contains(&run["status"].as_str().unwrap_or(""))
                .then_some(run)
        })
        .await
    }

    /// Waits until the run is final (SUCCESS or FAILED).
    pub async fn ended(&self, request_id: &str) -> Value {
        self.run_in(request_id, &["SUCCESS", "FAILED"], Duration::from_secs(60))
            .await
    }

    /// The texts of the run's log lines, by attempt, and each attempt's progress.
    pub async fn log(&self, request_id: &str) -> Vec<(Vec<String>, Value)> {
        let (status, log) = self.get(&format!("/api/instances/{request_id}/log")).await;
        assert_eq!(status, 200, "{log}");
        log["attempts"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|attempt| {
                let lines = attempt["lines"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|line| line["text"].as_str().map(str::to_string))
                    .collect();
                (lines, attempt["progress"].clone())
            })
            .collect()
    }
}

/// An executor serving in this process on a free port, until stopped.
pub struct Served {
    pub base: String,
    stop: ShutdownHandle,
    serving: tokio::task::JoinHandle<Result<(), ax_executor::Error>>,
}

impl Served {
    /// Serves `executor` (short drain, so tests stay quick) on a free port.
    pub async fn start(executor: Executor) -> Served {
        Served::start_on(free_port(), executor).await
    }

    pub async fn start_on(port: u16, executor: Executor) -> Served {
        let executor = executor.drain_delay(Duration::from_millis(200));
        let stop = executor.shutdown_handle();
        let serving = tokio::task::spawn_local(executor.serve(("127.0.0.1", port)));
        wait_listening(port, "the executor to listen").await;
        Served {
            base: format!("http://127.0.0.1:{port}"),
            stop,
            serving,
        }
    }

    /// Shuts it down gracefully; serve's result.
    pub async fn shutdown(mut self) -> Result<(), ax_executor::Error> {
        self.stop.shutdown();
        (&mut self.serving).await.expect("serve ran to its end")
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        self.stop.shutdown();
    }
}

/// An executor builder for `ax`, with the shared secret.
pub fn executor(ax: &Ax) -> Executor {
    Executor::new(SECRET).expect("a secret").ax_url(&ax.url)
}

/// Starts an example binary with `env`, on `port`; returns once it listens.
pub async fn start_example(name: &str, port: u16, ax: &Ax, env: &[(&str, String)]) -> Process {
    let mut command = Command::new(example_bin(name));
    command
        .env("AX_SIGNING_SECRET", SECRET)
        .env("AX_URL", &ax.url)
        .env("RUST_LOG", "info");
    let dir = tempfile::tempdir().expect("a temp dir");
    let log = dir.path().join(format!("{name}.log"));
    let mut process = Process::spawn(name, command.envs(env.iter().cloned()), log);
    process.name = format!("{name} on port {port}");
    process._dir = Some(dir);
    wait_listening(port, &format!("{name} to listen on {port}")).await;
    process
}

/// POSTs `body` to `url` with the given signature headers; the status, headers and body.
pub async fn post_signed(
    url: &str,
    body: &Value,
    timestamp: i64,
    signature: &str,
) -> (u16, awc::http::header::HeaderMap, Value) {
    let bytes = serde_json::to_vec(body).expect("json");
    let mut response = awc::Client::default()
        .post(url)
        .insert_header(("Content-Type", "application/json"))
        .insert_header(("X-Ax-Timestamp", timestamp.to_string()))
        .insert_header(("X-Ax-Signature", signature))
        .send_body(bytes)
        .await
        .unwrap_or_else(|err| panic!("POST {url}: {err}"));
    let reply = response.body().await.expect("a body");
    let json = serde_json::from_slice(&reply).unwrap_or(Value::Null);
    (response.status().as_u16(), response.headers().clone(), json)
}

/// A dispatch body as ax sends it.
pub fn dispatch_body(request_id: &str, attempt: u32, params: Value) -> Value {
    json!({"taskId": 1, "requestId": request_id, "params": params,
        "scheduledAt": "2027-02-03T04:05:10.000Z", "attempt": attempt,
        "callbackToken": "not-a-real-token"})
}

/// `body` signed with `secret` at `timestamp`: the signature header's value.
pub fn signature_of(secret: &str, timestamp: i64, body: &Value) -> String {
    let bytes = serde_json::to_vec(body).expect("json");
    ax_executor::signature::sign(secret.as_bytes(), timestamp, &bytes)
}
