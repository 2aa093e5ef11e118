//! The executor protocol (`docs/protocol.md`): its JSON Schemas (`docs/protocol/`) against what
//! ax sends and what it takes. The schemas are read by an independent validator (Python's
//! `jsonschema`, installed with `openapi-spec-validator` by `scripts/test.sh`), so a schema and
//! ax cannot agree by sharing a mistake.

use std::time::Duration;

use serde_json::{json, Value};

use crate::common::{config, start_ax, unique_name, Api, Executor, Received, Reply, TestStore};

/// A schema of `docs/protocol/`, by its file name without `.schema.json`.
type Schema = &'static str;

/// Every error each instance has under its schema (none: valid), one list per instance.
fn violations(cases: &[(Schema, &Value)]) -> Vec<Vec<String>> {
    const VALIDATE: &str = r#"
import json, sys
from jsonschema import Draft202012Validator as V
out = []
for case in json.load(sys.stdin):
    schema = json.load(open(f"docs/protocol/{case['schema']}.schema.json"))
    V.check_schema(schema)
    checker = V(schema, format_checker=V.FORMAT_CHECKER)
    out.append([e.message for e in checker.iter_errors(case["instance"])])
print(json.dumps(out))
"#;
    let input: Vec<Value> = cases
        .iter()
        .map(|(schema, instance)| json!({"schema": schema, "instance": instance}))
        .collect();
    let mut child = std::process::Command::new("python3")
        .args(["-c", VALIDATE])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("python3 runs");
    let stdin = child.stdin.take().expect("stdin");
    serde_json::to_writer(stdin, &input).expect("write instances");
    let output = child.wait_with_output().expect("validator ends");
    assert!(output.status.success(), "the validator failed");
    serde_json::from_slice(&output.stdout).expect("the validator's verdicts")
}

/// Asserts `instance` is valid under `schema`.
fn assert_valid(schema: Schema, instance: &Value) {
    let errors = violations(&[(schema, instance)]).remove(0);
    assert!(errors.is_empty(), "{schema}: {instance}: {errors:?}");
}

/// The properties `schema` names.
fn properties(schema: Schema) -> Vec<String> {
    let path = format!(
        "{}/docs/protocol/{schema}.schema.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).expect("schema file");
    let schema: Value = serde_json::from_str(&text).expect("schema JSON");
    schema["properties"]
        .as_object()
        .expect("properties")
        .keys()
        .cloned()
        .collect()
}

/// A dispatch as sent: version 1, signed, every field one the schema names and valid under it.
fn assert_dispatch(delivery: &Received, reply_to: &str) {
    assert_eq!(delivery.protocol, "1", "X-Ax-Protocol");
    assert!(delivery.signed_with(crate::common::SECRET));
    assert_valid("dispatch", &delivery.body);
    let named = properties("dispatch");
    for field in delivery.body.as_object().expect("object").keys() {
        assert!(named.contains(field), "`{field}` is not in the schema");
    }
    assert_eq!(
        delivery.body["callbackUrl"],
        format!("{reply_to}/api/callback")
    );
    assert_eq!(
        delivery.body["logUrl"],
        format!("{reply_to}/api/instances/{}/log", delivery.request_id)
    );
}

/// What ax sends is a dispatch the schema takes, and what the schemas describe (results in a
/// reply or a callback, log lines, registrations) ax takes, its answers valid under theirs.
#[actix_rt::test(system = "crate::common::TestSystem")]
async fn ax_sends_and_takes_what_the_schemas_say() {
    let store = TestStore::sqlite();
    let ax = start_ax(&config(&store, false, "protocol")).await;
    let api = Api::new(&ax);
    let reply_to = format!("http://{}", ax.addr());
    let executor = Executor::start(Reply::Accepted).await;
    let task = api
        .create_task(
            json!({"name": unique_name("protocol"), "cron": "0 0 0 1 1 *",
                            "handlerUrl": executor.url, "params": {"region": "eu"},
                            "maxRetry": 2}),
        )
        .await;
    api.trigger(&task).await;
    let delivery = executor
        .wait_for(1, Duration::from_secs(10))
        .await
        .remove(0);
    assert_dispatch(&delivery, &reply_to);

    // Log lines and progress, as the schema has them.
    let log = json!({"callbackToken": delivery.body["callbackToken"], "attempt": 1,
                     "lines": ["exporting", "part 1/4"], "progress": 25});
    assert_valid("log", &log);
    let log_url = delivery.body["logUrl"].as_str().expect("logUrl");
    let (status, answer) = api.post(log_url.trim_start_matches(&reply_to), log).await;
    assert_eq!(status, 200, "{answer}");
    assert_valid("log-answer", &answer);

    // A callback as the schema has it; a repeat counts once.
    let callback = delivery.callback(
        "FAILED",
        json!({"attempt": 1, "code": 7, "message": "no", "stopRetry": true, "output": "x"}),
    );
    assert_valid("callback", &callback);
    for applied in [true, false] {
        let (status, answer) = api.post("/api/callback", callback.clone()).await;
        assert_eq!(status, 200, "{answer}");
        assert_valid("callback-answer", &answer);
        assert_eq!(answer["applied"], applied);
        // stopRetry: final, though the task has retries left.
        assert_eq!(answer["status"], "FAILED");
    }

    // A registration and its answer.
    let member = json!({"url": executor.base(), "capacity": 4});
    assert_valid("member", &member);
    let (status, answer) = api.post("/api/executors/billing/members", member).await;
    assert_eq!(status, 201, "{answer}");
    assert_valid("member-answer", &answer);

    // Refusals: each an error the schema takes.
    let forged = delivery.callback("SUCCESS", json!({"callbackToken": "0".repeat(64)}));
    let (status, error) = api.post("/api/callback", forged).await;
    assert_eq!(status, 403);
    assert_valid("error", &error);
    let (status, error) = api
        .post("/api/callback", delivery.callback("DONE", json!({})))
        .await;
    assert_eq!(status, 400);
    assert_valid("error", &error);
    assert_eq!(error["error"]["field"], "status");
    executor.stop().await;
    ax.shutdown().await;
}

/// A body a schema refuses ax refuses too (400, nothing changed), and one it takes ax takes.
#[actix_rt::test(system = "crate::common::TestSystem")]
async fn bodies_the_schemas_refuse_ax_refuses() {
    let store = TestStore::sqlite();
    let ax = start_ax(&config(&store, false, "protocol-refusals")).await;
    let api = Api::new(&ax);
    let executor = Executor::start(Reply::Accepted).await;
    let task = api
        .create_task(
            json!({"name": unique_name("protocol"), "cron": "0 0 0 1 1 *",
                            "handlerUrl": executor.url, "maxRetry": 1}),
        )
        .await;
    api.trigger(&task).await;
    let delivery = executor
        .wait_for(1, Duration::from_secs(10))
        .await
        .remove(0);
    let rid = delivery.request_id.clone();
    let token = delivery.body["callbackToken"].clone();
    let log_path = format!("/api/instances/{rid}/log");
    let refused: Vec<(Schema, String, Value)> = vec![
        (
            "callback",
            "/api/callback".into(),
            delivery.callback("DONE", json!({})),
        ),
        (
            "callback",
            "/api/callback".into(),
            delivery.callback("FAILED", json!({"code": {"a": 1}})),
        ),
        (
            "callback",
            "/api/callback".into(),
            delivery.callback("FAILED", json!({"attempt": 0})),
        ),
        (
            "callback",
            "/api/callback".into(),
            delivery.callback("FAILED", json!({"stopRetry": "yes"})),
        ),
        (
            "callback",
            "/api/callback".into(),
            delivery.callback("FAILED", json!({"output": "x".repeat(65_537)})),
        ),
        (
            "callback",
            "/api/callback".into(),
            delivery.callback("FAILED", json!({"colour": "red"})),
        ),
        (
            "callback",
            "/api/callback".into(),
            json!({"callbackToken": token, "status": "SUCCESS"}),
        ),
        (
            "log",
            log_path.clone(),
            json!({"callbackToken": token, "progress": 101}),
        ),
        (
            "log",
            log_path.clone(),
            json!({"callbackToken": token, "lines": "one"}),
        ),
        ("log", log_path.clone(), json!({"callbackToken": token})),
        (
            "log",
            log_path.clone(),
            json!({"callbackToken": token, "lines": ["a"], "colour": 1}),
        ),
        (
            "member",
            "/api/executors/billing/members".into(),
            json!({"url": executor.base(), "capacity": 0}),
        ),
        (
            "member",
            "/api/executors/billing/members".into(),
            json!({"capacity": 2}),
        ),
    ];
    let cases: Vec<(Schema, &Value)> = refused.iter().map(|(s, _, body)| (*s, body)).collect();
    for ((schema, path, body), errors) in refused.iter().zip(violations(&cases)) {
        assert!(!errors.is_empty(), "{schema} takes {body}");
        let (status, error) = api.post(path, body.clone()).await;
        assert_eq!(status, 400, "ax takes {body}: {error}");
    }
    // Both words for one thing, saying opposite things: refused, naming the protocol's.
    let both = delivery.callback("FAILED", json!({"stopRetry": true, "retry": true}));
    let (status, error) = api.post("/api/callback", both).await;
    assert_eq!(status, 400, "{error}");
    assert_eq!(error["error"]["field"], "stopRetry", "{error}");
    let (_, run) = api.get(&format!("/api/instances/{rid}")).await;
    assert_eq!(run["status"], "RUNNING", "nothing changed: {run}");

    // Edges the schemas take, ax too: nulls for the optional fields, an integer code.
    let taken: Vec<(Schema, String, Value)> = vec![
        ("log", log_path.clone(), json!({"callbackToken": token, "attempt": null, "progress": 0})),
        ("callback", "/api/callback".into(), delivery.callback(
            "SUCCESS", json!({"attempt": null, "code": 0, "message": null, "stopRetry": null, "output": null}))),
    ];
    let cases: Vec<(Schema, &Value)> = taken.iter().map(|(s, _, body)| (*s, body)).collect();
    for ((schema, path, body), errors) in taken.iter().zip(violations(&cases)) {
        assert!(errors.is_empty(), "{schema} refuses {body}: {errors:?}");
        let (status, answer) = api.post(path, body.clone()).await;
        assert_eq!(status, 200, "ax refuses {body}: {answer}");
    }
    let (_, run) = api.get(&format!("/api/instances/{rid}")).await;
    assert_eq!(run["status"], "SUCCESS", "{run}");
    executor.stop().await;
    ax.shutdown().await;
}

/// A reply the reply schema takes is read as the protocol says: `stopRetry` ends the run.
#[actix_rt::test(system = "crate::common::TestSystem")]
async fn a_reply_with_stop_retry_is_final() {
    let reply = json!({"status": "FAILED", "code": "BAD_INPUT", "message": "no such region",
                       "stopRetry": true});
    assert_valid("reply", &reply);
    let store = TestStore::sqlite();
    let ax = start_ax(&config(&store, false, "protocol-reply")).await;
    let api = Api::new(&ax);
    let executor = Executor::start(Reply::Body(reply.to_string())).await;
    let task = api
        .create_task(
            json!({"name": unique_name("protocol"), "cron": "0 0 0 1 1 *",
                            "handlerUrl": executor.url, "maxRetry": 3}),
        )
        .await;
    let run = api.trigger(&task).await;
    let rid = run["requestId"].as_str().expect("requestId");
    let run = api
        .wait_status(
            &format!("/api/instances/{rid}"),
            "FAILED",
            Duration::from_secs(10),
        )
        .await;
    assert_eq!(run["code"], "BAD_INPUT", "{run}");
    assert_eq!(executor.received().len(), 1, "no retry after stopRetry");
    executor.stop().await;
    ax.shutdown().await;
}

/// A broadcast fire's shards, and a configured `executors.callback_url`, as the schema has them.
#[actix_rt::test(system = "crate::common::TestSystem")]
async fn shards_and_a_configured_callback_url_are_in_the_dispatch() {
    let store = TestStore::sqlite();
    let mut config = config(&store, false, "protocol-shards");
    config.executors.callback_url = Some("https://ax.example.com/ops/".into());
    let ax = start_ax(&config).await;
    let api = Api::new(&ax);
    let (one, two) = (
        Executor::start(Reply::Success).await,
        Executor::start(Reply::Success).await,
    );
    let (status, group) = api
        .call(
            "PUT",
            "/api/executors/pair",
            Some(json!({"routing": "BROADCAST", "members": [one.base(), two.base()]})),
        )
        .await;
    assert_eq!(status, 201, "{group}");
    api.create_task(json!({"name": unique_name("shards"), "cron": "* * * * * *",
                           "executor": {"group": "pair", "path": "/run"}}))
        .await;
    let mut shards = Vec::new();
    for executor in [&one, &two] {
        let delivery = executor
            .wait_for(1, Duration::from_secs(10))
            .await
            .remove(0);
        assert_dispatch(&delivery, "https://ax.example.com/ops");
        assert_eq!(delivery.body["shardTotal"], 2);
        shards.push(delivery.body["shardIndex"].as_i64().expect("shardIndex"));
    }
    shards.sort();
    assert_eq!(shards, [0, 1]);
    one.stop().await;
    two.stop().await;
    ax.shutdown().await;
}
