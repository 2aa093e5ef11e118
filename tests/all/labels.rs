//! A task's labels on both stores: set by create, PUT, PATCH and bulk, shown in every view and
//! in the audit log, filtered by (`GET /api/tasks?label=KEY=VALUE`), and refused with a 400
//! naming the field (`labels`, `labels.KEY`) that changes nothing.

use serde_json::{json, Value};

use crate::common::{config, on_each_backend, start_ax, Api, TestStore};

const HANDLER: &str = "http://127.0.0.1:9/run";

fn task(name: &str, labels: Option<Value>) -> Value {
    let mut body = json!({"name": name, "scene": "labelled", "cron": "0 0 0 1 1 *",
        "handlerUrl": HANDLER});
    if let Some(labels) = labels {
        body["labels"] = labels;
    }
    body
}

/// The ids the task list answers for this query, in order.
async fn listed(api: &Api, query: &str) -> Vec<i64> {
    let (status, page) = api.get(&format!("/api/tasks?{query}")).await;
    assert_eq!(status, 200, "{query}: {page}");
    page["items"]
        .as_array()
        .expect("items")
        .iter()
        .filter_map(|task| task["id"].as_i64())
        .collect()
}

/// Asserts a 400 naming `field`.
fn assert_refused((status, body): (u16, Value), field: &str, what: &str) {
    assert_eq!(status, 400, "{what}: {body}");
    assert_eq!(body["error"]["field"], field, "{what}: {body}");
}

async fn labels_are_stored_filtered_and_refused(store: TestStore) {
    let ax = start_ax(&config(&store, false, "labels")).await;
    let api = Api::new(&ax);
    let billing = api
        .create_task(task(
            "billing",
            Some(json!({"team": "billing", "tier": "1"})),
        ))
        .await;
    assert_eq!(billing["labels"], json!({"team": "billing", "tier": "1"}));
    let capital = api
        .create_task(task("capital", Some(json!({"team": "Billing"}))))
        .await;
    let plain = api.create_task(task("plain", None)).await;
    assert_eq!(plain["labels"], json!({}), "none by default");
    let (a, b, c) = (
        billing["id"].as_i64().expect("id"),
        capital["id"].as_i64().expect("id"),
        plain["id"].as_i64().expect("id"),
    );
    let (_, read) = api.get(&format!("/api/tasks/{a}")).await;
    assert_eq!(read["labels"], billing["labels"], "as stored: {read}");

    // A filter matches key and value exactly, case included.
    assert_eq!(listed(&api, "label=team=billing").await, [a]);
    assert_eq!(listed(&api, "label=team%3Dbilling").await, [a]);
    assert_eq!(listed(&api, "label=team=Billing").await, [b]);
    assert_eq!(listed(&api, "label=tier=1").await, [a]);
    assert_eq!(listed(&api, "label=team=bill").await, Vec::<i64>::new());
    assert_eq!(
        listed(&api, "label=tier=1&scene=other").await,
        Vec::<i64>::new()
    );
    assert_eq!(listed(&api, "scene=labelled").await, [a, b, c]);
    let (_, page) = api.get("/api/tasks?label=team=billing&limit=1").await;
    assert_eq!(page["total"], 1, "{page}");
    for bad in [
        "label=team",
        "label=Team=billing",
        "label==billing",
        "label=a%20b=c",
    ] {
        assert_refused(api.get(&format!("/api/tasks?{bad}")).await, "label", bad);
    }

    // PUT replaces them; a PATCH merges them key by key (null removes one).
    let path = format!("/api/tasks/{c}");
    let (status, put) = api
        .call(
            "PUT",
            &path,
            Some(task("plain", Some(json!({"env": "prod"})))),
        )
        .await;
    assert_eq!(
        (status, &put["labels"]),
        (200, &json!({"env": "prod"})),
        "{put}"
    );
    let patch = json!({"labels": {"env": null, "team": "billing"}});
    let (status, patched) = api.call("PATCH", &path, Some(patch)).await;
    assert_eq!(status, 200, "{patched}");
    assert_eq!(patched["labels"], json!({"team": "billing"}));
    assert_eq!(listed(&api, "label=team=billing").await, [a, c]);
    let (_, audit) = api.get("/api/audit?limit=1").await;
    let summary = audit["items"][0]["summary"].as_str().unwrap_or_default();
    assert_eq!(
        summary, r#"labels: {"env":"prod"} → {"team":"billing"}"#,
        "{audit}"
    );

    // Bad labels are refused, naming the field, and nothing changes.
    let many: serde_json::Map<String, Value> =
        (0..17).map(|n| (format!("k{n}"), json!("v"))).collect();
    let cases = [
        (json!(["team"]), "labels"),
        (json!("team=billing"), "labels"),
        (Value::Object(many), "labels"),
        (json!({"Team": "billing"}), "labels.Team"),
        (json!({"": "x"}), "labels."),
        (
            json!({"k".repeat(64): "x"}),
            &format!("labels.{}", "k".repeat(64)),
        ),
        (json!({"team": 7}), "labels.team"),
        (json!({"team": "x".repeat(257)}), "labels.team"),
    ];
    let (_, before) = api.get("/api/tasks?limit=500").await;
    for (labels, field) in &cases {
        let what = labels.to_string();
        let body = task("refused", Some(labels.clone()));
        assert_refused(api.post("/api/tasks", body.clone()).await, field, &what);
        let replace = task("plain", Some(labels.clone()));
        assert_refused(api.call("PUT", &path, Some(replace)).await, field, &what);
        let patch = json!({ "labels": labels });
        assert_refused(api.call("PATCH", &path, Some(patch)).await, field, &what);
        let bulk = json!({"items": [body], "upsert": true});
        let items_field = format!("items[0].{field}");
        assert_refused(api.post("/api/tasks/bulk", bulk).await, &items_field, &what);
    }
    let (_, after) = api.get("/api/tasks?limit=500").await;
    assert_eq!(before, after, "nothing changed");
    let longest = json!({"k".repeat(63): "ü".repeat(256)});
    let kept = api
        .create_task(task("longest", Some(longest.clone())))
        .await;
    assert_eq!(kept["labels"], longest);

    // A bulk registration sets them, and an upsert with other labels changes the task.
    let bulk = |labels: Value| json!({"items": [task("bulk", Some(labels))], "upsert": true});
    let (status, done) = api
        .post("/api/tasks/bulk", bulk(json!({"team": "ops"})))
        .await;
    assert_eq!((status, &done["created"]), (200, &json!(1)), "{done}");
    let (_, again) = api
        .post("/api/tasks/bulk", bulk(json!({"team": "ops"})))
        .await;
    assert_eq!(again["unchanged"], 1, "{again}");
    let (_, moved) = api
        .post("/api/tasks/bulk", bulk(json!({"team": "billing"})))
        .await;
    assert_eq!(moved["updated"], 1, "{moved}");
    assert_eq!(listed(&api, "label=team=billing").await.len(), 3);
    ax.shutdown().await;
}

on_each_backend!(
    labels_are_stored_filtered_and_refused,
    sqlite: labels_are_stored_filtered_and_refused_on_sqlite,
    mariadb: labels_are_stored_filtered_and_refused_on_mariadb,
    postgres: labels_are_stored_filtered_and_refused_on_postgres
);
