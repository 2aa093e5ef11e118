//! The Python executor of `docs/executors.md`, run as written (its code block taken from the
//! page) against a real ax: it listens on the port its environment names (`EXECUTOR_PORT`);
//! with ax's `AX_SIGNING_SECRET` it runs what it is sent, with its log lines and progress, and
//! reports the result by callback; with another secret it refuses every dispatch, as the page
//! says, and the run fails `HTTP_401`.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::common::{config, start_ax, unique_name, Api, TestStore, SECRET};

const PAGE: &str = include_str!("../../docs/executors.md");

/// The page's Python executor: the first ```python block of its "In Python" section.
fn documented_executor() -> String {
    let section = PAGE
        .split("\n### In Python\n")
        .nth(1)
        .expect("docs/executors.md has an `### In Python` section");
    let code = section
        .split("```python\n")
        .nth(1)
        .and_then(|rest| rest.split("\n```").next())
        .expect("a ```python block in the section");
    format!("{code}\n")
}

/// The documented executor running in a folder of its own, stopped when dropped.
struct PythonExecutor {
    child: Child,
    port: u16,
    _dir: tempfile::TempDir,
}

impl PythonExecutor {
    /// Starts it with `secret` as its `AX_SIGNING_SECRET`, on a free port given by
    /// `EXECUTOR_PORT`; returns once it accepts connections.
    fn start(ax_url: &str, secret: &str) -> PythonExecutor {
        let dir = tempfile::tempdir().expect("temp dir");
        std::fs::write(dir.path().join("executor.py"), documented_executor()).expect("write");
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|listener| listener.local_addr())
            .map(|addr| addr.port())
            .expect("a free port");
        let child = Command::new("python3")
            .arg("executor.py")
            .current_dir(dir.path())
            .env("AX_SIGNING_SECRET", secret)
            .env("AX_URL", ax_url)
            .env("EXECUTOR_PORT", port.to_string())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("python3");
        let executor = PythonExecutor {
            child,
            port,
            _dir: dir,
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "the documented executor never listened on EXECUTOR_PORT {port}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        executor
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/run", self.port)
    }
}

impl Drop for PythonExecutor {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Triggers a run of a new task on `handler` with `params`; returns the run once it ended.
async fn run_on(api: &Api, handler: &str, params: Value) -> Value {
    let task = api
        .create_task(json!({"name": unique_name("python"), "cron": "0 0 0 1 1 *",
            "handlerUrl": handler, "maxRetry": 0, "timeoutMs": 20_000}))
        .await;
    let (status, run) = api
        .post(
            &format!("/api/tasks/{}/trigger", task["id"]),
            json!({ "params": params }),
        )
        .await;
    assert_eq!(status, 201, "{run}");
    let path = format!("/api/instances/{}", run["requestId"].as_str().expect("id"));
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (_, run) = api.get(&path).await;
        if ["SUCCESS", "FAILED"].contains(&run["status"].as_str().unwrap_or("")) {
            return run;
        }
        assert!(Instant::now() < deadline, "the run never ended: {run}");
        actix_rt::time::sleep(Duration::from_millis(100)).await;
    }
}

#[actix_rt::test(system = "crate::common::TestSystem")]
async fn the_documented_python_executor_runs_with_axs_signing_secret() {
    let store = TestStore::sqlite();
    let ax = start_ax(&config(&store, false, "python-executor")).await;
    let api = Api::new(&ax);
    let ax_url = format!("http://{}", ax.addr());

    // The same secret as ax's: the run is done once, with its log lines, and reported.
    let executor = PythonExecutor::start(&ax_url, SECRET);
    let run = run_on(&api, &executor.url(), json!({"region": "eu"})).await;
    assert_eq!(run["status"], "SUCCESS", "{run}");
    assert_eq!(run["message"], "exported region eu", "{run}");
    let (status, log) = api
        .get(&format!(
            "/api/instances/{}/log",
            run["requestId"].as_str().expect("id")
        ))
        .await;
    assert_eq!(status, 200, "{log}");
    let attempt = &log["attempts"][0];
    let lines: Vec<&str> = attempt["lines"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|line| line["text"].as_str())
        .collect();
    assert_eq!(lines.first(), Some(&"exporting region eu"), "{log}");
    assert_eq!(lines.last(), Some(&"part 4/4 written"), "{log}");
    assert_eq!(attempt["progress"], 100, "{log}");

    // Another secret: every dispatch is refused, the run fails as the page says.
    let stranger = PythonExecutor::start(&ax_url, "not-the-signing-secret");
    let run = run_on(&api, &stranger.url(), json!({"region": "us"})).await;
    assert_eq!(run["status"], "FAILED", "{run}");
    assert_eq!(run["code"], "HTTP_401", "{run}");
    drop((executor, stranger));
    ax.shutdown().await;
}

/// `ax executor check` finds the documented executor conforming: its result comes by callback
/// to the dispatch's `callbackUrl`, its log lines as ax takes them, forged dispatches refused.
/// It keeps results in a table but does not say so (`X-Ax-Idempotent`): a warning, no failure.
#[actix_rt::test(system = "crate::common::TestSystem")]
async fn the_documented_python_executor_passes_the_check() {
    let executor = PythonExecutor::start(&crate::common::refusing_base(), SECRET);
    let mut check = crate::common::ax_command();
    check
        .args(["executor", "check", &executor.url(), "--secret", SECRET])
        .args(["--params", r#"{"region": "eu"}"#])
        .env("RUST_LOG", "warn");
    let output = actix_web::rt::task::spawn_blocking(move || check.output().expect("run ax"))
        .await
        .expect("check ends");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(0), "{stdout}");
    for (check, result) in [
        ("reply", "ok"),
        ("callback", "ok"),
        ("duplicate", "warn"),
        ("forged", "ok"),
        ("log", "ok"),
    ] {
        assert!(
            stdout
                .lines()
                .any(|line| line.split_whitespace().take(2).eq([check, result])),
            "{check} {result}: {stdout}"
        );
    }
}
