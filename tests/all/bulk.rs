//! `POST /api/tasks/bulk` and unique task names, end to end on both stores: a scene's task
//! names are unique (409 `name`), a bulk call registers all its tasks or none, and with
//! `upsert` it matches them by scene and name.

use serde_json::{json, Value};

use crate::common::{config, on_each_backend, start_ax, Api, TestStore};

const HANDLER: &str = "http://127.0.0.1:9/run";

fn task(name: &str, cron: &str) -> Value {
    json!({"name": name, "scene": "bulk", "cron": cron, "handlerUrl": HANDLER})
}

async fn names_in(api: &Api, scene: &str) -> Vec<(String, String)> {
    let (status, page) = api
        .get(&format!("/api/tasks?scene={scene}&limit=500"))
        .await;
    assert_eq!(status, 200, "{page}");
    let mut names: Vec<(String, String)> = page["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|t| {
            (
                t["name"].as_str().unwrap_or("").into(),
                t["cron"].as_str().unwrap_or("").into(),
            )
        })
        .collect();
    names.sort();
    names
}

fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter()
        .map(|(n, c)| (n.to_string(), c.to_string()))
        .collect()
}

fn assert_error(reply: &(u16, Value), status: u16, code: &str, field: &str) {
    let (got, body) = reply;
    assert_eq!(*got, status, "{body}");
    assert_eq!(body["error"]["code"], code, "{body}");
    assert_eq!(body["error"]["field"], field, "{body}");
}

async fn names_are_unique_in_a_scene(store: TestStore) {
    let ax = start_ax(&config(&store, false, "names")).await;
    let api = Api::new(&ax);
    let a = api.create_task(task("report", "0 0 1 * * *")).await;
    // Another scene may use the name; names compare exactly.
    let mut elsewhere = task("report", "0 0 1 * * *");
    elsewhere["scene"] = json!("other");
    api.create_task(elsewhere).await;
    api.create_task(task("Report", "0 0 1 * * *")).await;

    let clash = api.post("/api/tasks", task("report", "0 0 2 * * *")).await;
    assert_error(&clash, 409, "CONFLICT", "name");
    let b = api.create_task(task("b", "0 0 3 * * *")).await;
    let b_path = format!("/api/tasks/{}", b["id"]);
    assert_error(
        &api.call("PUT", &b_path, Some(task("report", "0 0 3 * * *")))
            .await,
        409,
        "CONFLICT",
        "name",
    );
    assert_error(
        &api.call("PATCH", &b_path, Some(json!({"name": "report"})))
            .await,
        409,
        "CONFLICT",
        "name",
    );
    // Nothing changed; a task may keep its own name.
    assert_eq!(
        names_in(&api, "bulk").await,
        pairs(&[
            ("Report", "0 0 1 * * *"),
            ("b", "0 0 3 * * *"),
            ("report", "0 0 1 * * *")
        ])
    );
    let a_path = format!("/api/tasks/{}", a["id"]);
    let (status, kept) = api
        .call("PUT", &a_path, Some(task("report", "0 0 4 * * *")))
        .await;
    assert_eq!(
        (status, &kept["cron"]),
        (200, &json!("0 0 4 * * *")),
        "{kept}"
    );
    ax.shutdown().await;
}

on_each_backend!(
    names_are_unique_in_a_scene,
    sqlite: names_are_unique_in_a_scene_sqlite,
    mariadb: names_are_unique_in_a_scene_mysql,
    postgres: names_are_unique_in_a_scene_postgres
);

async fn bulk_registers_all_or_none(store: TestStore) {
    let ax = start_ax(&config(&store, false, "bulk")).await;
    let api = Api::new(&ax);
    let mut paused = task("c", "0 0 3 * * *");
    paused["enabled"] = json!(false);
    let first = json!({"items": [task("a", "0 0 1 * * *"), task("b", "0 0 2 * * *"), paused]});
    let (status, reply) = api.post("/api/tasks/bulk", first.clone()).await;
    assert_eq!(status, 200, "{reply}");
    assert_eq!(reply, json!({"created": 3, "updated": 0, "unchanged": 0}));
    let three = pairs(&[
        ("a", "0 0 1 * * *"),
        ("b", "0 0 2 * * *"),
        ("c", "0 0 3 * * *"),
    ]);
    assert_eq!(names_in(&api, "bulk").await, three);
    let (_, page) = api.get("/api/tasks?scene=bulk&status=PAUSED").await;
    assert_eq!(page["total"], 1, "{page}");

    // Without upsert an existing name is a conflict, and the call writes nothing.
    let mut again = first.clone();
    again["items"][0] = task("new", "0 0 9 * * *");
    assert_error(
        &api.post("/api/tasks/bulk", again).await,
        409,
        "CONFLICT",
        "items[1].name",
    );
    assert_eq!(names_in(&api, "bulk").await, three);

    // With upsert: the same definitions change nothing (not even the next run) …
    let (_, before) = api.get("/api/tasks?scene=bulk").await;
    let mut upsert = first.clone();
    upsert["upsert"] = json!(true);
    let (status, reply) = api.post("/api/tasks/bulk", upsert.clone()).await;
    assert_eq!(status, 200, "{reply}");
    assert_eq!(reply, json!({"created": 0, "updated": 0, "unchanged": 3}));
    let (_, after) = api.get("/api/tasks?scene=bulk").await;
    assert_eq!(before["items"], after["items"]);

    // … a changed one is updated, a new one created.
    upsert["items"][1] = task("b", "0 30 2 * * *");
    upsert["items"]
        .as_array_mut()
        .expect("items")
        .push(task("d", "0 0 4 * * *"));
    let (status, reply) = api.post("/api/tasks/bulk", upsert).await;
    assert_eq!(status, 200, "{reply}");
    assert_eq!(reply, json!({"created": 1, "updated": 1, "unchanged": 2}));
    let four = pairs(&[
        ("a", "0 0 1 * * *"),
        ("b", "0 30 2 * * *"),
        ("c", "0 0 3 * * *"),
        ("d", "0 0 4 * * *"),
    ]);
    assert_eq!(names_in(&api, "bulk").await, four);

    // A bad item fails the whole call, named by its index and field.
    let bad = json!({"items": [task("e", "0 0 5 * * *"), task("f", "0 0 6 * * *"), task("g", "61 * * * * *")]});
    assert_error(
        &api.post("/api/tasks/bulk", bad).await,
        400,
        "INVALID_ARGUMENT",
        "items[2].cron",
    );
    let twice = json!({"items": [task("e", "0 0 5 * * *"), task("e", "0 0 6 * * *")]});
    assert_error(
        &api.post("/api/tasks/bulk", twice).await,
        400,
        "INVALID_ARGUMENT",
        "items[1].name",
    );
    // An upstream the store does not have is found inside the transaction: still nothing.
    let mut orphan = task("f", "0 0 6 * * *");
    orphan["dependsOn"] = json!([999_999_999]);
    let unknown = json!({"items": [task("e", "0 0 5 * * *"), orphan]});
    assert_error(
        &api.post("/api/tasks/bulk", unknown).await,
        400,
        "INVALID_ARGUMENT",
        "items[1].dependsOn",
    );
    let too_many: Vec<Value> = (0..1001)
        .map(|i| task(&format!("t{i}"), "0 0 1 * * *"))
        .collect();
    assert_error(
        &api.post("/api/tasks/bulk", json!({"items": too_many}))
            .await,
        400,
        "INVALID_ARGUMENT",
        "items",
    );
    assert_error(
        &api.post("/api/tasks/bulk", json!({"items": [], "extra": 1}))
            .await,
        400,
        "INVALID_ARGUMENT",
        "extra",
    );
    assert_eq!(names_in(&api, "bulk").await, four);

    // Upstreams by id; a bulk call can depend on tasks registered before it.
    let (_, a) = api.get("/api/tasks?scene=bulk&limit=1").await;
    let a_id = a["items"][0]["id"].clone();
    let mut downstream = task("e", "0 0 5 * * *");
    downstream["dependsOn"] = json!([a_id]);
    let (status, reply) = api
        .post("/api/tasks/bulk", json!({"items": [downstream]}))
        .await;
    assert_eq!((status, &reply["created"]), (200, &json!(1)), "{reply}");
    let (_, page) = api.get("/api/tasks?scene=bulk&limit=500").await;
    let e = page["items"]
        .as_array()
        .and_then(|t| t.iter().find(|t| t["name"] == "e"))
        .cloned();
    assert_eq!(e.expect("e")["dependsOn"], json!([a_id]));
    ax.shutdown().await;
}

on_each_backend!(
    bulk_registers_all_or_none,
    sqlite: bulk_registers_all_or_none_sqlite,
    mariadb: bulk_registers_all_or_none_mysql,
    postgres: bulk_registers_all_or_none_postgres
);
