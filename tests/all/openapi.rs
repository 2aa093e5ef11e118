//! The OpenAPI document describes exactly the routes the router serves, and `/metrics` speaks
//! the Prometheus text format.

use std::collections::BTreeSet;

use ax_server::api::ENDPOINTS;
use serde_json::json;

use crate::common::events::Events;
use crate::common::{config, start_ax, Api, Executor, Reply, TestStore};

#[actix_rt::test(system = "crate::common::TestSystem")]
async fn the_document_matches_the_router() {
    let store = TestStore::sqlite();
    let ax = start_ax(&config(&store, false, "openapi")).await;
    let api = Api::new(&ax);
    let (status, doc) = api.get("/api/openapi.json").await;
    assert_eq!(status, 200);
    assert_eq!(doc["openapi"], "3.0.3");
    let documented: BTreeSet<(String, String)> = doc["paths"]
        .as_object()
        .expect("paths")
        .iter()
        .flat_map(|(path, item)| {
            let methods = item
                .as_object()
                .map(|m| m.keys().cloned().collect::<Vec<_>>());
            methods
                .unwrap_or_default()
                .into_iter()
                .map(move |method| (method, path.clone()))
        })
        .collect();
    let routed: BTreeSet<(String, String)> = ENDPOINTS
        .iter()
        .map(|e| (e.method.to_string(), e.path.to_string()))
        .collect();
    assert_eq!(documented, routed);

    // Every documented endpoint is served: none falls through to the router's "no route".
    let no_route = |reply: &serde_json::Value| {
        reply["error"]["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("no route"))
    };
    let (status, reply) = api.call("GET", "/api/nothing-here", None).await;
    assert!(
        status == 404 && no_route(&reply),
        "the check can fail: {reply}"
    );
    let mut operation_ids = BTreeSet::new();
    for (method, path) in &documented {
        let concrete = path
            .replace("{id}", "1")
            .replace("{scene}", "default")
            .replace("{requestId}", &uuid::Uuid::new_v4().to_string());
        let body = (method == "post" || method == "put").then(|| json!({}));
        let op = &doc["paths"][path.as_str()][method.as_str()];
        if op["responses"]["200"]["content"]["text/event-stream"].is_object() {
            // A stream stays open: its head is enough to show it is served.
            let (status, events) = Events::open(&format!("http://{}", ax.addr()), &concrete).await;
            assert_eq!(status, 200, "{method} {path}");
            assert!(events.is_some_and(|e| e.content_type == "text/event-stream"));
        } else {
            let (status, reply) = api.call(&method.to_uppercase(), &concrete, body).await;
            assert!(
                !no_route(&reply),
                "{method} {path} is not routed ({status}: {reply})"
            );
        }
        assert!(
            op["summary"].is_string() && op["responses"].is_object(),
            "{method} {path}"
        );
        assert!(
            operation_ids.insert(op["operationId"].as_str().unwrap_or_default().to_string()),
            "{method} {path}: a missing or repeated operationId"
        );
        let admin = ENDPOINTS
            .iter()
            .any(|e| e.admin && e.method == method && e.path == path);
        assert_eq!(
            op["responses"]["401"].is_object(),
            admin,
            "{method} {path}: a 401 exactly where the admin token is asked"
        );
    }
    let callback = &doc["paths"]["/api/callback"]["post"]["responses"];
    assert!(callback["403"].is_object() && callback["413"].is_object());
    assert!(
        doc["paths"]["/metrics"]["get"]["responses"]["200"]["content"]["text/plain"].is_object()
    );
    assert_eq!(
        doc["paths"]["/api/tasks/{id}"]["get"]["parameters"][0]["schema"]["type"],
        "integer"
    );
    // A task's version: its ETag on every reply of one task; If-Match and 412 on its changes.
    let task = &doc["paths"]["/api/tasks/{id}"];
    assert!(task["get"]["responses"]["200"]["headers"]["ETag"].is_object());
    for method in ["put", "patch", "delete"] {
        let op = &task[method];
        assert!(op["responses"]["412"].is_object(), "{method}");
        let if_match = op["parameters"].as_array().and_then(|params| {
            params
                .iter()
                .find(|p| p["name"] == "If-Match" && p["in"] == "header")
        });
        assert!(if_match.is_some(), "{method}: {op}");
    }
    assert!(task["get"]["responses"]["412"].is_null());
    let input = &doc["components"]["schemas"]["TaskInput"]["properties"];
    assert_eq!(input["labels"]["type"], "object", "{input}");
    let list = doc["paths"]["/api/tasks"]["get"]["parameters"].as_array();
    assert!(
        list.is_some_and(|params| params.iter().any(|p| p["name"] == "label")),
        "{list:?}"
    );
    let schema = &doc["components"]["schemas"]["Task"]["allOf"][1]["properties"];
    assert!(schema["version"].is_object() && schema["scenePaused"].is_object());
    let scenes = &doc["paths"]["/api/scenes"]["get"]["responses"]["200"]["content"];
    let scene = &scenes["application/json"]["schema"]["properties"]["items"]["items"];
    assert_eq!(scene["properties"]["paused"]["type"], "boolean", "{scene}");
    // A 400 lists every field it refuses.
    let error = &doc["components"]["schemas"]["Error"]["properties"]["error"]["properties"];
    let item = &error["errors"]["items"]["properties"];
    assert!(
        item["field"].is_object() && item["message"].is_object(),
        "{error}"
    );
    ax.shutdown().await;
}

#[actix_rt::test(system = "crate::common::TestSystem")]
async fn metrics_count_what_happens() {
    let store = TestStore::sqlite();
    let ax = start_ax(&config(&store, false, "metrics")).await;
    let api = Api::new(&ax);
    let executor = Executor::start(Reply::Success).await;
    api.create_task(json!({"name": "m", "cron": "* * * * * *", "handlerUrl": executor.url}))
        .await;
    executor
        .wait_for(2, std::time::Duration::from_secs(5))
        .await;
    let client = awc::Client::default();
    let mut response = client
        .get(format!("http://{}/metrics", ax.addr()))
        .send()
        .await
        .expect("metrics");
    assert_eq!(response.status(), 200);
    let text = String::from_utf8(response.body().await.expect("body").to_vec()).expect("utf-8");
    let value = |name: &str| -> f64 {
        text.lines()
            .find_map(|line| line.strip_prefix(name)?.trim().parse().ok())
            .unwrap_or_else(|| panic!("{name} missing from:\n{text}"))
    };
    assert!(value("ax_fires_total") >= 2.0);
    assert!(value("ax_dispatch_results_total{outcome=\"success\"}") >= 1.0);
    assert!(value("ax_trigger_lag_seconds_count") >= 1.0);
    assert!(value("ax_store_batch_rows_count") >= 1.0);
    assert!(value("ax_wheel_entries") >= 1.0);
    let preload = value("ax_startup_preload_seconds");
    assert!(
        (0.0..5.0).contains(&preload),
        "start-up preload took {preload} s"
    );
    for family in [
        "ax_store_commit_seconds",
        "ax_callback_seconds",
        "ax_retries_total",
        "ax_missed_runs_total",
        "ax_lock_conflicts_total",
        "ax_writes_folded_total",
    ] {
        assert!(text.contains(&format!("# TYPE {family}")), "{family}");
    }
    ax.shutdown().await;
}

/// Runs the independent validator (`openapi-spec-validator`, installed by `scripts/test.sh`
/// from PyPI when missing) on a document; its verdict and output.
fn validate_openapi(doc: &serde_json::Value) -> (bool, String) {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("openapi.json");
    std::fs::write(&path, doc.to_string()).expect("write the document");
    let output = std::process::Command::new("python3")
        .args(["-m", "openapi_spec_validator"])
        .arg(&path)
        .output()
        .expect("run python3 -m openapi_spec_validator");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        !text.contains("No module named"),
        "openapi-spec-validator is missing (scripts/test.sh installs it): {text}"
    );
    (output.status.success(), text)
}

#[actix_rt::test(system = "crate::common::TestSystem")]
async fn an_openapi_validator_accepts_the_document() {
    let store = TestStore::sqlite();
    let ax = start_ax(&config(&store, false, "openapi-valid")).await;
    let (status, doc) = Api::new(&ax).get("/api/openapi.json").await;
    assert_eq!(status, 200);
    let (valid, output) = validate_openapi(&doc);
    assert!(valid, "{output}");
    // The validator does refuse a broken document.
    let mut broken = doc.clone();
    broken["paths"]["/healthz"]["get"]["responses"] = json!("none");
    let (valid, output) = validate_openapi(&broken);
    assert!(!valid, "{output}");
    ax.shutdown().await;
}
