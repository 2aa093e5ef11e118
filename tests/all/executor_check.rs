//! `ax executor check`: a conformant executor passes, and each way of breaking the protocol is
//! found — against executors written here, so that each fault is there on purpose. (Each SDK's
//! tests run the check against its own example.)

use std::collections::HashMap;
use std::process::Output;
use std::sync::Mutex;

use actix_web::{web, App, HttpRequest, HttpResponse, HttpServer};
use serde_json::{json, Value};

use crate::common::SECRET;

/// What a test executor gets wrong.
#[derive(Debug, Clone, Copy, Default)]
struct Faults {
    /// Takes any dispatch, signed or not.
    ignores_signatures: bool,
    /// Says it keeps results (`X-Ax-Idempotent`) but runs a re-delivery again, unmarked.
    runs_duplicates: bool,
    /// Answers `202` on its slow path, then never calls back.
    never_calls_back: bool,
}

#[derive(Default)]
struct State {
    faults: Faults,
    /// Results kept, by requestId.
    kept: Mutex<HashMap<String, Value>>,
    /// How often each requestId's job ran.
    runs: Mutex<HashMap<String, usize>>,
}

fn signed(req: &HttpRequest, body: &[u8]) -> bool {
    let header = |name| req.headers().get(name).and_then(|v| v.to_str().ok());
    let (Some(timestamp), Some(signature)) = (header("X-Ax-Timestamp"), header("X-Ax-Signature"))
    else {
        return false;
    };
    let Ok(at) = timestamp.parse::<i64>() else {
        return false;
    };
    let fresh = (chrono::Utc::now().timestamp() - at).abs() <= 300;
    fresh && signature == ax_core::security::sign_dispatch(SECRET.as_bytes(), at, body)
}

/// The run, if the executor takes the dispatch.
fn taken(state: &State, req: &HttpRequest, body: &[u8]) -> Option<Value> {
    if !state.faults.ignores_signatures && !signed(req, body) {
        return None;
    }
    serde_json::from_slice(body).ok()
}

async fn quick(state: web::Data<State>, req: HttpRequest, body: web::Bytes) -> HttpResponse {
    let Some(run) = taken(&state, &req, &body) else {
        return HttpResponse::Unauthorized().json(json!({"error": "bad signature"}));
    };
    let id = run["requestId"].as_str().unwrap_or_default().to_string();
    let kept = state.kept.lock().expect("kept").get(&id).cloned();
    if let (Some(result), false) = (kept, state.faults.runs_duplicates) {
        return HttpResponse::Ok()
            .insert_header(("X-Ax-Idempotent", "true"))
            .insert_header(("X-Ax-Duplicate", "true"))
            .json(result);
    }
    *state
        .runs
        .lock()
        .expect("runs")
        .entry(id.clone())
        .or_default() += 1;
    let result = json!({"status": "SUCCESS", "message": "done"});
    state.kept.lock().expect("kept").insert(id, result.clone());
    HttpResponse::Ok()
        .insert_header(("X-Ax-Idempotent", "true"))
        .json(result)
}

async fn slow(state: web::Data<State>, req: HttpRequest, body: web::Bytes) -> HttpResponse {
    let Some(run) = taken(&state, &req, &body) else {
        return HttpResponse::Unauthorized().finish();
    };
    let calls_back = !state.faults.never_calls_back;
    actix_web::rt::spawn(async move {
        let client = awc::Client::default();
        let token = &run["callbackToken"];
        let log = json!({"callbackToken": token, "attempt": run["attempt"],
                         "lines": ["working"], "progress": 50});
        let url = run["logUrl"].as_str().unwrap_or_default();
        let _ = client.post(url).send_json(&log).await;
        if calls_back {
            let result = json!({"requestId": run["requestId"], "callbackToken": token,
                                "attempt": run["attempt"], "status": "SUCCESS"});
            let url = run["callbackUrl"].as_str().unwrap_or_default();
            let _ = client.post(url).send_json(&result).await;
        }
    });
    HttpResponse::Accepted().finish()
}

/// A test executor with these faults: its base URL, its state and its server.
async fn executor(faults: Faults) -> (String, web::Data<State>, actix_web::dev::ServerHandle) {
    let state = web::Data::new(State {
        faults,
        ..State::default()
    });
    let shared = state.clone();
    let server = HttpServer::new(move || {
        App::new()
            .app_data(shared.clone())
            .route("/run", web::post().to(quick))
            .route("/slow", web::post().to(slow))
    })
    .workers(1)
    .disable_signals()
    .bind("127.0.0.1:0")
    .expect("bind");
    let base = format!("http://{}", server.addrs()[0]);
    let server = server.run();
    let handle = server.handle();
    actix_rt::spawn(server);
    (base, state, handle)
}

/// `ax executor check` with these arguments, run off the test's thread.
async fn check(args: &[&str]) -> Output {
    let mut command = crate::common::ax_command();
    command
        .args(["executor", "check"])
        .args(args)
        .env_remove("AX_SIGNING_SECRET")
        .env("RUST_LOG", "warn");
    actix_web::rt::task::spawn_blocking(move || command.output().expect("run ax"))
        .await
        .expect("check ends")
}

/// Each check's result word, by check name, from the table.
fn results(output: &Output) -> HashMap<String, String> {
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .skip(1)
        .filter_map(|line| {
            let mut words = line.split_whitespace();
            Some((words.next()?.to_string(), words.next()?.to_string()))
        })
        .collect()
}

fn text(output: &Output) -> String {
    format!(
        "stdout {}\nstderr {}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

#[actix_rt::test(system = "crate::common::TestSystem")]
async fn a_conformant_executor_passes_every_check() {
    let (base, state, server) = executor(Faults::default()).await;
    let output = check(&[
        &base,
        "--path",
        "/run",
        "--slow-path",
        "/slow",
        "--secret",
        SECRET,
    ])
    .await;
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    let found = results(&output);
    for (check, want) in [
        ("reply", "ok"),
        ("callback", "skip"),
        ("duplicate", "ok"),
        ("forged", "ok"),
        ("slow", "ok"),
        ("log", "ok"),
    ] {
        assert_eq!(
            found.get(check).map(String::as_str),
            Some(want),
            "{check}: {}",
            text(&output)
        );
    }
    // The duplicate came back with the kept result: the job ran once per requestId, and no
    // forged, stale or unsigned dispatch ran it.
    let runs = state.runs.lock().expect("runs").clone();
    assert_eq!(runs.len(), 1, "{runs:?}");
    assert!(runs.values().all(|n| *n == 1), "{runs:?}");

    // As JSON, for a pipeline.
    let output = check(&[&base, "--path", "/run", "--secret", SECRET, "-o", "json"]).await;
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    let report: Value = serde_json::from_slice(&output.stdout).expect("JSON");
    assert_eq!(report["conforms"], true);
    assert_eq!(report["url"], format!("{base}/run"));
    assert_eq!(report["checks"][0]["check"], "reply");
    server.stop(false).await;
}

#[actix_rt::test(system = "crate::common::TestSystem")]
async fn each_fault_is_found_and_fails_the_check() {
    let broken = Faults {
        ignores_signatures: true,
        never_calls_back: true,
        ..Faults::default()
    };
    let (base, _, server) = executor(broken).await;
    let output = check(&[
        &base,
        "--path",
        "/run",
        "--slow-path",
        "/slow",
        "--secret",
        SECRET,
        "--wait",
        "2",
    ])
    .await;
    assert_eq!(output.status.code(), Some(1), "{}", text(&output));
    let found = results(&output);
    assert_eq!(found["forged"], "fail", "{}", text(&output));
    assert_eq!(found["slow"], "fail", "{}", text(&output));
    assert_eq!(found["reply"], "ok", "{}", text(&output));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("does not conform: forged, slow"),
        "{stderr}"
    );
    server.stop(false).await;

    // Says it keeps results, runs a re-delivery again.
    let lying = Faults {
        runs_duplicates: true,
        ..Faults::default()
    };
    let (base, state, server) = executor(lying).await;
    let output = check(&[&base, "--path", "/run", "--secret", SECRET]).await;
    assert_eq!(output.status.code(), Some(1), "{}", text(&output));
    assert_eq!(results(&output)["duplicate"], "fail", "{}", text(&output));
    let runs = state.runs.lock().expect("runs").clone();
    assert!(
        runs.values().any(|n| *n == 2),
        "it ran the duplicate: {runs:?}"
    );
    server.stop(false).await;
}

#[actix_rt::test(system = "crate::common::TestSystem")]
async fn a_wrong_secret_or_none_is_said_plainly() {
    let (base, _, server) = executor(Faults::default()).await;
    let output = check(&[
        &base,
        "--path",
        "/run",
        "--secret",
        "not the executor's secret",
    ])
    .await;
    assert_eq!(output.status.code(), Some(1), "{}", text(&output));
    assert!(
        text(&output).contains("is --secret the executor's signing secret?"),
        "{}",
        text(&output)
    );
    let output = check(&[&base, "--path", "/run"]).await;
    assert_eq!(output.status.code(), Some(1), "{}", text(&output));
    assert!(text(&output).contains("--secret"), "{}", text(&output));
    server.stop(false).await;
}

#[actix_rt::test(system = "crate::common::TestSystem")]
async fn bad_usage_exits_2_naming_the_flag() {
    for (args, named) in [
        (vec!["ftp://127.0.0.1:9"], "URL"),
        (vec!["http://127.0.0.1:9", "--path", "run"], "--path"),
        (vec!["http://127.0.0.1:9", "--params", "{nope"], "--params"),
        (vec!["http://127.0.0.1:9", "--wait", "0"], "--wait"),
        (
            vec!["http://127.0.0.1:9", "--reply-to", "ax.local"],
            "--reply-to",
        ),
    ] {
        let output = check(&args).await;
        assert_eq!(output.status.code(), Some(2), "{args:?}: {}", text(&output));
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains(named), "{args:?}: {stderr}");
    }
    // Nothing listening: a failed check, not a usage error.
    let output = check(&[&crate::common::refusing_base(), "--secret", SECRET]).await;
    assert_eq!(output.status.code(), Some(1), "{}", text(&output));
    assert_eq!(results(&output)["reply"], "fail", "{}", text(&output));
}
