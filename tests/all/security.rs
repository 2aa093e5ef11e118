//! Security end to end: the admin token, the default bind, the handler allowlist, and hostile
//! input that must get a clear 4xx, store nothing, and leave the server serving.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::common::{
    config, on_each_backend, start_ax, status_and_header, unique_name, Api, AxProcess, Executor,
    Reply, TestStore,
};

const TOKEN: &str = "admin-s3cret-0123456";

fn body(handler: &str) -> Value {
    json!({"name": unique_name("t"), "cron": "0 0 0 1 1 *", "handlerUrl": handler})
}

async fn call_with(
    api_base: &str,
    auth: Option<&str>,
    method: &str,
    path: &str,
    body: Option<Value>,
) -> u16 {
    let client = awc::Client::builder()
        .timeout(Duration::from_secs(10))
        .finish();
    let method = actix_web::http::Method::from_bytes(method.as_bytes()).expect("method");
    let mut request = client.request(method, format!("{api_base}{path}"));
    if let Some(auth) = auth {
        request = request.insert_header(("Authorization", auth));
    }
    let response = match body {
        Some(body) => request.send_json(&body).await,
        None => request.send().await,
    };
    response.expect("answer").status().as_u16()
}

#[actix_rt::test(system = "crate::common::TestSystem")]
async fn the_admin_api_requires_the_token() {
    let store = TestStore::sqlite();
    let mut config = config(&store, false, "auth");
    config.server.admin_token = Some(TOKEN.into());
    let ax = start_ax(&config).await;
    let base = format!("http://{}", ax.addr());
    let bearer = format!("Bearer {TOKEN}");
    let handler = Some(body("http://127.0.0.1:9/run"));
    // Ten refusals (more from one address in a minute would be answered later): without a
    // token on every kind of endpoint, with a wrong one on a read and a change. A 401 says
    // which scheme it wants.
    assert_eq!(
        status_and_header("GET", &format!("{base}/api/tasks"), "WWW-Authenticate").await,
        (401, Some("Bearer".to_string()))
    );
    for (method, path, body) in [
        ("POST", "/api/tasks", handler.clone()),
        ("POST", "/api/scenes/default/pause", None),
        ("GET", "/api/cluster", None),
    ] {
        assert_eq!(
            call_with(&base, None, method, path, body).await,
            401,
            "{method} {path}"
        );
    }
    for auth in ["Bearer wrong", TOKEN, "Basic admin-s3cret-0123456"] {
        assert_eq!(
            call_with(&base, Some(auth), "GET", "/api/tasks", None).await,
            401,
            "{auth}"
        );
        assert_eq!(
            call_with(&base, Some(auth), "POST", "/api/tasks", handler.clone()).await,
            401,
            "{auth}"
        );
    }
    assert_eq!(
        call_with(&base, Some(&bearer), "GET", "/api/tasks", None).await,
        200
    );
    // The scheme's name is case-insensitive (RFC 7235).
    let lower = format!("bearer {TOKEN}");
    assert_eq!(
        call_with(&base, Some(&lower), "GET", "/api/tasks", None).await,
        200
    );
    assert_eq!(
        call_with(&base, Some(&bearer), "POST", "/api/tasks", handler).await,
        201
    );
    // Open: health, metrics, and the callback (it carries its run's token instead).
    assert_eq!(call_with(&base, None, "GET", "/healthz", None).await, 200);
    assert_eq!(call_with(&base, None, "GET", "/metrics", None).await, 200);
    let callback = json!({"requestId": uuid::Uuid::new_v4().to_string(), "callbackToken": "x", "status": "SUCCESS"});
    assert_eq!(
        call_with(&base, None, "POST", "/api/callback", Some(callback)).await,
        403
    );
    // The rejected calls stored nothing: one task, created with the token.
    let client = awc::Client::default();
    let mut response = client
        .get(format!("{base}/api/tasks"))
        .insert_header(("Authorization", bearer.as_str()))
        .send()
        .await
        .expect("answer");
    let page: Value = response.json().await.expect("json");
    assert_eq!(page["total"], 1);
    ax.shutdown().await;
}

#[actix_rt::test(system = "crate::common::TestSystem")]
async fn without_a_token_ax_listens_on_loopback_only() {
    let store = TestStore::sqlite();
    let mut config = config(&store, false, "loopback");
    config.server.bind = None;
    let ax = start_ax(&config).await;
    assert!(ax.addr().ip().is_loopback(), "{}", ax.addr());
    ax.shutdown().await;
    config.server.admin_token = Some(TOKEN.into());
    let ax = start_ax(&config).await;
    assert!(
        ax.addr().ip().is_unspecified(),
        "with a token: all interfaces, {}",
        ax.addr()
    );
    ax.shutdown().await;
}

#[actix_rt::test(system = "crate::common::TestSystem")]
async fn handlers_outside_the_allowlist_are_rejected() {
    let store = TestStore::sqlite();
    let mut config = config(&store, false, "allow");
    config.security.handler_allowlist = vec!["127.0.0.1".into(), "*.executors.internal".into()];
    let ax = start_ax(&config).await;
    let api = Api::new(&ax);
    for url in [
        "http://169.254.169.254/latest/meta-data",
        "http://10.0.0.5/run",
        "http://db.internal/x",
        "http://[::1]:9/run",
    ] {
        let (status, reply) = api.post("/api/tasks", body(url)).await;
        assert_eq!(
            (status, &reply["error"]["field"]),
            (400, &json!("handlerUrl")),
            "{url}: {reply}"
        );
    }
    for url in ["http://127.0.0.1:9/run", "https://a.executors.internal/run"] {
        let (status, reply) = api.post("/api/tasks", body(url)).await;
        assert_eq!(status, 201, "{url}: {reply}");
    }
    let (_, page) = api.get("/api/tasks").await;
    assert_eq!(page["total"], 2);
    ax.shutdown().await;
}

/// Link-local and cloud-metadata addresses and names are refused even with an empty
/// allowlist, also as IPv4 inside IPv6 (mapped, compatible, NAT64), and allowed only by an
/// entry that names them; an entry removed later stops the dispatch before any connection.
/// No request is sent to any of them: each refusal comes first.
#[actix_rt::test(system = "crate::common::TestSystem")]
async fn metadata_addresses_need_an_entry_of_their_own() {
    let store = TestStore::sqlite();
    let guarded = [
        "http://169.254.169.254/latest/meta-data",
        "http://[fe80::1]:8080/run",
        "http://[fd00:ec2::254]/latest",
        "http://[::ffff:169.254.169.254]/",
        "http://[::a9fe:a9fe]/latest/meta-data",
        "http://[64:ff9b::a9fe:a9fe]/latest/meta-data",
        "http://100.100.100.200/latest/meta-data",
        "http://metadata.google.internal/computeMetadata/v1/",
        "http://METADATA.google.internal./computeMetadata/v1/",
    ];
    let mut config = config(&store, false, "guarded");
    let ax = start_ax(&config).await;
    let api = Api::new(&ax);
    for url in guarded {
        let (status, reply) = api.post("/api/tasks", body(url)).await;
        assert_eq!(
            (status, &reply["error"]["field"]),
            (400, &json!("handlerUrl")),
            "{url}: {reply}"
        );
    }
    let (status, reply) = api.post("/api/tasks", body("http://10.0.0.5/run")).await;
    assert_eq!(status, 201, "{reply}");
    ax.shutdown().await;

    config.security.handler_allowlist = vec![
        "169.254.169.254".into(),
        "0.0.0.0/0".into(),
        "metadata.google.internal".into(),
    ];
    let ax = start_ax(&config).await;
    let api = Api::new(&ax);
    let (status, reply) = api.post("/api/tasks", body(guarded[0])).await;
    assert_eq!(status, 201, "named explicitly: {reply}");
    let (status, reply) = api.post("/api/tasks", body("http://169.254.0.1/")).await;
    assert_eq!(status, 400, "a wide range does not name it: {reply}");
    // Yearly: it fires only when triggered below, under the allowlist of then.
    let by_name = api.create_task(body(guarded[7])).await;
    ax.shutdown().await;

    config.security.handler_allowlist = Vec::new();
    let ax = start_ax(&config).await;
    let api = Api::new(&ax);
    let (status, run) = api
        .post(&format!("/api/tasks/{}/trigger", by_name["id"]), json!({}))
        .await;
    assert_eq!(status, 201, "{run}");
    let path = format!(
        "/api/instances/{}",
        run["requestId"].as_str().unwrap_or_default()
    );
    let failed = api
        .wait_status(&path, "FAILED", Duration::from_secs(10))
        .await;
    assert_eq!(
        (&failed["code"], &failed["attempt"]),
        (&json!("HANDLER_NOT_ALLOWED"), &json!(1)),
        "{failed}"
    );
    ax.shutdown().await;
}

/// The allowlist is applied when a run is dispatched, not only when its task was stored: a
/// host name is called through the checking resolver, and a host the allowlist in force no
/// longer allows is not called at all (the run fails `HANDLER_NOT_ALLOWED`, not retried).
#[actix_rt::test(system = "crate::common::TestSystem")]
async fn the_allowlist_is_checked_again_at_dispatch() {
    let store = TestStore::sqlite();
    let executor = Executor::start(Reply::Success).await;
    let by_name = executor.url.replace("127.0.0.1", "localhost");
    let mut config = config(&store, false, "dispatch-check");
    config.security.handler_allowlist = vec!["localhost".into()];
    let ax = start_ax(&config).await;
    let api = Api::new(&ax);
    let mut task = body(&by_name);
    task["maxRetry"] = json!(3);
    let task = api.create_task(task).await;
    let trigger = format!("/api/tasks/{}/trigger", task["id"]);
    let run = |reply: &Value| {
        format!(
            "/api/instances/{}",
            reply["requestId"].as_str().unwrap_or_default()
        )
    };
    let (status, first) = api.post(&trigger, json!({})).await;
    assert_eq!(status, 201, "{first}");
    api.wait_status(&run(&first), "SUCCESS", Duration::from_secs(10))
        .await;
    assert_eq!(executor.received().len(), 1);
    ax.shutdown().await;

    config.security.handler_allowlist = vec!["127.0.0.1".into()];
    let ax = start_ax(&config).await;
    let api = Api::new(&ax);
    let (status, second) = api.post(&trigger, json!({})).await;
    assert_eq!(status, 201, "{second}");
    let failed = api
        .wait_status(&run(&second), "FAILED", Duration::from_secs(10))
        .await;
    assert_eq!(failed["code"], "HANDLER_NOT_ALLOWED", "{failed}");
    assert_eq!(failed["attempt"], 1, "not retried: {failed}");
    actix_rt::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        executor.received().len(),
        1,
        "the refused host was not called"
    );
    ax.shutdown().await;
    executor.stop().await;
}

on_each_backend!(hostile_input_gets_a_clear_4xx_and_changes_nothing_on, mariadb: hostile_input_gets_a_clear_4xx_and_changes_nothing, postgres: hostile_input_gets_a_clear_4xx_and_changes_nothing_on_postgres);

async fn hostile_input_gets_a_clear_4xx_and_changes_nothing_on(store: TestStore) {
    let ax = start_ax(&config(&store, false, "hostile")).await;
    let api = Api::new(&ax);
    let json_type = "application/json";
    let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000)).into_bytes();
    let cases: Vec<(&str, &str, &str, Vec<u8>, u16)> = vec![
        ("deep JSON", "POST", "/api/tasks", deep.clone(), 400),
        ("deep JSON callback", "POST", "/api/callback", deep, 400),
        (
            "bad UTF-8",
            "POST",
            "/api/tasks",
            b"{\"name\": \"\xff\xfe\"}".to_vec(),
            400,
        ),
        ("oversized", "POST", "/api/tasks", vec![b'{'; 2 << 20], 413),
        (
            "not JSON",
            "POST",
            "/api/callback",
            b"requestId=1".to_vec(),
            400,
        ),
        (
            "trigger junk",
            "POST",
            "/api/tasks/1/trigger",
            b"\x00\x01".to_vec(),
            400,
        ),
    ];
    for (what, method, path, body, want) in cases {
        let (status, reply) = api.raw(method, path, json_type, body).await;
        assert_eq!(status, want, "{what}: {reply}");
        assert!(
            reply["error"]["code"].is_string(),
            "{what}: a JSON error body"
        );
    }
    let sql = "'; DROP TABLE ax_task; --";
    let valid = json!({"name": "n", "cron": "* * * * * *", "handlerUrl": "http://127.0.0.1:9/run"});
    for field in [
        "cron",
        "handlerUrl",
        "scene",
        "params",
        "maxRetry",
        "timeoutMs",
        "enabled",
        "dependsOn",
        "retryFactor",
    ] {
        let mut bad = valid.clone();
        bad[field] = json!(sql);
        let (status, reply) = api.post("/api/tasks", bad).await;
        assert_eq!(
            (status, &reply["error"]["field"]),
            (400, &json!(field)),
            "{field}: {reply}"
        );
    }
    for (query, field) in [
        ("/api/tasks?limit=99999999999999999999", "limit"),
        ("/api/tasks?offset=-1", "offset"),
        ("/api/instances?limit=1e9", "limit"),
        ("/api/instances?taskId=1%20OR%201%3D1", "taskId"),
        ("/api/instances?scene=x%27%20OR%20%271", "scene"),
        ("/api/tasks/1%20OR%201=1", "id"),
    ] {
        let (status, reply) = api.get(query).await;
        assert_eq!(
            (status, &reply["error"]["field"]),
            (400, &json!(field)),
            "{query}: {reply}"
        );
    }
    let (_, page) = api.get("/api/tasks").await;
    assert_eq!(page["total"], 0, "nothing stored by rejected requests");
    // A name is free text: stored as given, and the tables are intact.
    let mut named = valid.clone();
    named["name"] = json!(sql);
    let created = api.create_task(named).await;
    let (_, again) = api.get(&format!("/api/tasks/{}", created["id"])).await;
    assert_eq!(again["name"], sql);
    let (status, health) = api.get("/healthz").await;
    assert_eq!(
        (status, &health["status"]),
        (200, &json!("ok")),
        "still serving"
    );
    ax.shutdown().await;
}

/// `GET /api/tasks` with this `Authorization`: its status and how long it took.
async fn timed_read(base: &str, auth: &str) -> (u16, Duration) {
    let started = Instant::now();
    let status = call_with(base, Some(auth), "GET", "/api/tasks", None).await;
    (status, started.elapsed())
}

/// An API 401 is logged with the address (never the token) and, past ten a minute from one
/// address, answered later; a request with the token from the same address is not held up.
#[actix_rt::test(system = "crate::common::TestSystem")]
async fn failed_tokens_are_logged_and_slowed_down() {
    let dir = tempfile::tempdir().expect("dir");
    let store = format!("sqlite://{}", dir.path().join("ax.db").display());
    let env = [("AX_STORE_URL", store), ("AX_ADMIN_TOKEN", TOKEN.into())]
        .map(|(key, value)| (key.to_string(), value))
        .to_vec();
    let mut ax = AxProcess::start(dir.path(), "throttled", env).await;
    let base = ax.base();
    let guess = "Bearer guess-0123456789abcdef";
    for n in 1..=10 {
        let (status, took) = timed_read(&base, guess).await;
        assert_eq!(status, 401);
        assert!(
            took < Duration::from_millis(900),
            "failure {n} took {took:?}"
        );
    }
    let (status, took) = timed_read(&base, guess).await;
    assert_eq!(status, 401);
    assert!(took >= Duration::from_millis(950), "the 11th took {took:?}");
    let (status, took) = timed_read(&base, &format!("Bearer {TOKEN}")).await;
    assert_eq!(status, 200);
    assert!(
        took < Duration::from_millis(900),
        "the token's request took {took:?}"
    );
    ax.stop().await;
    let log = std::fs::read_to_string(ax.log_path()).expect("the log");
    let warned = log
        .lines()
        .filter(|line| {
            line.contains("WARN")
                && line.contains("auth: API token for GET /api/tasks failed, from 127.0.0.1")
        })
        .count();
    assert_eq!(warned, 11, "{log}");
    assert!(
        log.contains("(11 in the last minute: answered 1 s late)"),
        "{log}"
    );
    assert!(
        !log.contains("guess-0123") && !log.contains(TOKEN),
        "no token in the log: {log}"
    );
}
