//! Named tokens with roles, and the audit log: a viewer reads and is refused every change, an
//! executor's token stays in its groups and with its own members; each change through the API
//! is recorded with the token's name as its actor.

use std::time::Duration;

use ax_core::security::Role;
use ax_server::config::NamedToken;
use serde_json::{json, Value};

use crate::common::{
    config, on_each_backend, start_ax, unique_name, Api, Executor, Reply, TestStore,
};

const ADMIN: &str = "admin-token-0123456789";
const OPS: &str = "ops-token-0123456789ab";
const VIEWER: &str = "viewer-token-0123456789";
const EXECUTOR: &str = "executor-token-0123456789";

/// A request with a bearer token; (status, JSON body).
async fn call(
    base: &str,
    token: Option<&str>,
    method: &str,
    path: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let method = actix_web::http::Method::from_bytes(method.as_bytes()).expect("method");
    let mut request = awc::Client::default().request(method, format!("{base}{path}"));
    if let Some(token) = token {
        request = request.insert_header(("Authorization", format!("Bearer {token}")));
    }
    let mut response = match body {
        Some(body) => request.send_json(&body).await,
        None => request.send().await,
    }
    .expect("an answer");
    let bytes = response.body().await.expect("a body");
    (
        response.status().as_u16(),
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

async fn roles_and_audit(store: TestStore) {
    let mut config = config(&store, false, "access");
    config.server.admin_token = Some(ADMIN.into());
    config.server.tokens = vec![
        NamedToken {
            name: "ops".into(),
            token: OPS.into(),
            role: Role::Admin,
            groups: None,
        },
        NamedToken {
            name: "dashboard".into(),
            token: VIEWER.into(),
            role: Role::Viewer,
            groups: None,
        },
        NamedToken {
            name: "workers".into(),
            token: EXECUTOR.into(),
            role: Role::Executor,
            groups: Some(vec!["workers".into()]),
        },
    ];
    let ax = start_ax(&config).await;
    let base = format!("http://{}", ax.addr());
    let executor = Executor::start(Reply::Accepted).await;
    let task = json!({"name": unique_name("audited"), "scene": "audit", "cron": "0 0 0 1 1 *",
        "handlerUrl": executor.url, "timeoutMs": 60_000});

    // No token, or a wrong one: 401. A viewer: reads, and 403 on every change.
    assert_eq!(call(&base, None, "GET", "/api/tasks", None).await.0, 401);
    assert_eq!(
        call(&base, Some("nope"), "GET", "/api/tasks", None).await.0,
        401
    );
    assert_eq!(
        call(&base, Some(VIEWER), "GET", "/api/tasks", None).await.0,
        200
    );
    let (status, refused) = call(
        &base,
        Some(VIEWER),
        "POST",
        "/api/tasks",
        Some(task.clone()),
    )
    .await;
    assert_eq!(status, 403, "{refused}");
    assert_eq!(refused["error"]["code"], "FORBIDDEN");
    assert!(refused["error"]["message"]
        .as_str()
        .is_some_and(|m| m.contains("dashboard")));
    let (_, tasks) = call(&base, Some(ADMIN), "GET", "/api/tasks?scene=audit", None).await;
    assert_eq!(tasks["total"], 0, "a refused change changes nothing");

    // An executor's token registers members and leaves, nothing else.
    let member = Some(json!({"url": executor.url}));
    let members = "/api/executors/workers/members";
    let joined = call(&base, Some(EXECUTOR), "POST", members, member.clone()).await;
    assert_eq!(joined.0, 201, "{}", joined.1);
    assert_eq!(joined.1["heartbeatSecs"], 10);
    let renewed = call(&base, Some(EXECUTOR), "POST", members, member).await;
    assert_eq!(renewed.0, 200, "a heartbeat: {}", renewed.1);
    for (method, path) in [
        ("GET", "/api/tasks"),
        ("GET", "/api/executors"),
        ("POST", "/api/tasks"),
        ("PUT", "/api/executors/workers"),
        ("DELETE", "/api/executors/workers"),
    ] {
        let body = (method != "GET").then(|| json!({}));
        let (status, refused) = call(&base, Some(EXECUTOR), method, path, body).await;
        assert_eq!(status, 403, "{method} {path}: {refused}");
    }
    let leave = format!("{members}?url={}", executor.url);
    assert_eq!(
        call(&base, Some(EXECUTOR), "DELETE", &leave, None).await.0,
        204
    );
    assert_eq!(
        call(&base, Some(EXECUTOR), "DELETE", &leave, None).await.0,
        404
    );
    assert_eq!(
        call(
            &base,
            Some(VIEWER),
            "POST",
            members,
            Some(json!({"url": executor.url}))
        )
        .await
        .0,
        403
    );

    // Every change, by whoever made it.
    let (status, created) = call(&base, Some(OPS), "POST", "/api/tasks", Some(task)).await;
    assert_eq!(status, 201, "{created}");
    let id = created["id"].as_i64().expect("id");
    let path = format!("/api/tasks/{id}");
    assert_eq!(
        call(&base, Some(VIEWER), "DELETE", &path, None).await.0,
        403
    );
    let patch = Some(json!({"cron": "0 30 0 1 1 *", "timeZone": "Europe/Berlin"}));
    assert_eq!(call(&base, Some(ADMIN), "PATCH", &path, patch).await.0, 200);
    assert_eq!(
        call(&base, Some(OPS), "POST", &format!("{path}/pause"), None)
            .await
            .0,
        200
    );
    assert_eq!(
        call(&base, Some(OPS), "POST", &format!("{path}/resume"), None)
            .await
            .0,
        200
    );
    assert_eq!(
        call(&base, Some(OPS), "POST", "/api/scenes/audit/pause", None)
            .await
            .0,
        200
    );
    assert_eq!(
        call(&base, Some(OPS), "POST", "/api/scenes/audit/resume", None)
            .await
            .0,
        200
    );
    let params = Some(json!({"params": {"edited": true}}));
    let (status, run) = call(&base, Some(OPS), "POST", &format!("{path}/trigger"), params).await;
    assert_eq!(status, 201, "{run}");
    executor.wait_for(1, Duration::from_secs(5)).await;
    let request_id = run["requestId"].as_str().expect("requestId");
    let cancel = format!("/api/instances/{request_id}/cancel");
    assert_eq!(
        call(&base, Some(VIEWER), "POST", &cancel, None).await.0,
        403
    );
    assert_eq!(call(&base, Some(OPS), "POST", &cancel, None).await.0, 200);
    let range = Some(json!({"from": "2026-01-01T00:00:00Z", "to": "2026-01-02T00:00:00Z"}));
    assert_eq!(
        call(&base, Some(OPS), "POST", &format!("{path}/backfill"), range)
            .await
            .0,
        202
    );
    assert_eq!(call(&base, Some(ADMIN), "DELETE", &path, None).await.0, 204);

    let (status, log) = call(&base, Some(VIEWER), "GET", "/api/audit?limit=500", None).await;
    assert_eq!(status, 200, "{log}");
    let entries: Vec<(String, String)> = log["items"]
        .as_array()
        .expect("items")
        .iter()
        .rev()
        .map(|e| {
            (
                e["actor"].as_str().unwrap_or("").into(),
                e["action"].as_str().unwrap_or("").into(),
            )
        })
        .collect();
    let want: Vec<(String, String)> = [
        ("workers", "executor.join"),
        ("workers", "executor.leave"),
        ("ops", "task.create"),
        ("admin", "task.update"),
        ("ops", "task.pause"),
        ("ops", "task.resume"),
        ("ops", "scene.pause"),
        ("ops", "scene.resume"),
        ("ops", "task.trigger"),
        ("ops", "run.cancel"),
        ("ops", "task.backfill"),
        ("admin", "task.delete"),
    ]
    .iter()
    .map(|(a, b)| (a.to_string(), b.to_string()))
    .collect();
    assert_eq!(entries, want);
    let items = log["items"].as_array().expect("items");
    let update = items
        .iter()
        .find(|item| item["action"] == "task.update")
        .expect("the update");
    assert!(
        update["summary"]
            .as_str()
            .is_some_and(|s| s.contains("cron: 0 0 0 1 1 * → 0 30 0 1 1 *")
                && s.contains("timeZone: UTC → Europe/Berlin")),
        "{update}"
    );
    assert!(update["target"]
        .as_str()
        .is_some_and(|t| t.starts_with(&format!("task {id} (audit/"))));
    let trigger = &items[3];
    assert!(
        trigger["summary"]
            .as_str()
            .is_some_and(|s| s.contains(r#"{"edited":true}"#)),
        "{trigger}"
    );
    assert!(items
        .iter()
        .all(|e| e["at"].as_str().is_some_and(|at| at.ends_with('Z'))));

    // Paging: a cursor walks the log newest first, each entry once.
    let (_, first) = call(&base, Some(VIEWER), "GET", "/api/audit?limit=4", None).await;
    let cursor = first["nextCursor"]
        .as_str()
        .expect("a next page")
        .to_string();
    let (_, second) = call(
        &base,
        Some(VIEWER),
        "GET",
        &format!("/api/audit?limit=4&cursor={cursor}"),
        None,
    )
    .await;
    let ids = |page: &Value| -> Vec<i64> {
        page["items"]
            .as_array()
            .expect("items")
            .iter()
            .filter_map(|e| e["id"].as_i64())
            .collect()
    };
    let (a, b) = (ids(&first), ids(&second));
    assert_eq!(a.len(), 4);
    assert!(
        a.iter().all(|x| b.iter().all(|y| x > y)),
        "{a:?} then {b:?}"
    );
    let (status, bad) = call(&base, Some(VIEWER), "GET", "/api/audit?cursor=abc", None).await;
    assert_eq!((status, &bad["error"]["field"]), (400, &json!("cursor")));
    executor.stop().await;
}

on_each_backend!(
    roles_and_audit,
    sqlite: roles_and_audit_sqlite,
    mariadb: roles_and_audit_mysql,
    postgres: roles_and_audit_postgres
);

const BILLING: &str = "billing-token-0123456789";
const FLEET: &str = "fleet-token-0123456789ab";

/// An executor's token of `groups`.
fn executor_token(name: &str, token: &str, groups: &[&str]) -> NamedToken {
    NamedToken {
        name: name.into(),
        token: token.into(),
        role: Role::Executor,
        groups: Some(groups.iter().map(|group| group.to_string()).collect()),
    }
}

/// The URLs of group `group`'s members in it now, as an admin reads them (those gone within
/// the hour are listed too, `GONE`).
async fn member_urls(base: &str, group: &str) -> Vec<String> {
    let (status, body) = call(
        base,
        Some(ADMIN),
        "GET",
        &format!("/api/executors/{group}"),
        None,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    body["members"]
        .as_array()
        .expect("members")
        .iter()
        .filter(|member| member["state"] != "GONE")
        .filter_map(|member| member["url"].as_str().map(String::from))
        .collect()
}

/// The status of a refusal, with its code and the field it names.
fn refusal(answer: &(u16, Value)) -> (u16, &str, &str) {
    let error = &answer.1["error"];
    (
        answer.0,
        error["code"].as_str().unwrap_or_default(),
        error["field"].as_str().unwrap_or_default(),
    )
}

/// An executor's token registers only into its groups, renews and removes only the members it
/// registered (an admin's defined ones stay), and a group takes a capped number of registered
/// members (`executors.max_registered_members`).
async fn executor_tokens_stay_in_their_groups(store: TestStore) {
    let mut config = config(&store, false, "access");
    config.server.admin_token = Some(ADMIN.into());
    config.server.tokens = vec![
        executor_token("billing-workers", BILLING, &["billing"]),
        executor_token("fleet", FLEET, &["*"]),
    ];
    config.executors.max_registered_members = 2;
    let ax = start_ax(&config).await;
    let base = format!("http://{}", ax.addr());
    let members = |group: &str| format!("/api/executors/{group}/members");
    let url = |port: u16| format!("http://127.0.0.1:{port}/");
    let (defined, mine, theirs, more) = (url(9101), url(9102), url(9103), url(9104));
    let register = |token, group: &str, url: &str| {
        let (base, path, body) = (base.clone(), members(group), json!({ "url": url }));
        async move { call(&base, Some(token), "POST", &path, Some(body)).await }
    };
    let remove = |token, group: &str, url: &str| {
        let (base, path) = (base.clone(), format!("{}?url={url}", members(group)));
        async move { call(&base, Some(token), "DELETE", &path, None).await }
    };

    // Outside its groups: 403 naming the group, and nothing registered.
    let outside = register(BILLING, "payroll", &mine).await;
    assert_eq!(
        refusal(&outside),
        (403, "FORBIDDEN", "group"),
        "{}",
        outside.1
    );
    let message = outside.1["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("billing-workers") && message.contains("`payroll`"),
        "{message}"
    );
    assert!(!message.contains(BILLING), "a token never shows: {message}");
    let (status, _) = call(&base, Some(ADMIN), "GET", "/api/executors/payroll", None).await;
    assert_eq!(status, 404, "no group was made");
    let outside = remove(BILLING, "payroll", &mine).await;
    assert_eq!(
        refusal(&outside),
        (403, "FORBIDDEN", "group"),
        "{}",
        outside.1
    );

    // An admin defines a member; each token registers its own.
    let put = call(
        &base,
        Some(ADMIN),
        "PUT",
        "/api/executors/billing",
        Some(json!({"members": [defined]})),
    )
    .await;
    assert_eq!(put.0, 201, "{}", put.1);
    assert_eq!(register(BILLING, "billing", &mine).await.0, 201);
    assert_eq!(register(FLEET, "billing", &theirs).await.0, 201);
    assert_eq!(
        register(BILLING, "billing", &mine).await.0,
        200,
        "a heartbeat"
    );

    // Another token's member, or an admin's: 403 naming the member, and it stays.
    for (token, url, by) in [
        (FLEET, &mine, "another token"),
        (BILLING, &theirs, "another token"),
        (BILLING, &defined, "defined by an admin"),
        (FLEET, &defined, "defined by an admin"),
    ] {
        let refused = remove(token, "billing", url).await;
        assert_eq!(
            refusal(&refused),
            (403, "FORBIDDEN", "url"),
            "{}",
            refused.1
        );
        let message = refused.1["error"]["message"].as_str().unwrap_or_default();
        assert!(
            message.contains(by) && message.contains(url.as_str()),
            "{message}"
        );
    }
    let taken = register(FLEET, "billing", &mine).await;
    assert_eq!(refusal(&taken), (403, "FORBIDDEN", "url"), "{}", taken.1);
    assert_eq!(
        member_urls(&base, "billing").await,
        [defined.clone(), mine.clone(), theirs.clone()]
    );

    // Two registered members are the cap: a third is refused, a heartbeat is not, and the
    // defined member never counted.
    let full = register(FLEET, "billing", &more).await;
    assert_eq!(refusal(&full), (409, "CONFLICT", "group"), "{}", full.1);
    let message = full.1["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("`billing`") && message.contains("executors.max_registered_members"),
        "{message}"
    );
    assert_eq!(register(FLEET, "billing", &theirs).await.0, 200);

    // Each token removes its own; an admin removes any, the defined one too.
    assert_eq!(remove(BILLING, "billing", &mine).await.0, 204);
    assert_eq!(register(FLEET, "billing", &more).await.0, 201, "room again");
    assert_eq!(remove(ADMIN, "billing", &theirs).await.0, 204);
    assert_eq!(remove(ADMIN, "billing", &defined).await.0, 204);
    assert_eq!(member_urls(&base, "billing").await, [more.as_str()]);

    // Defined by an admin after it registered itself: the admins' member from then on.
    let put = call(
        &base,
        Some(ADMIN),
        "PUT",
        "/api/executors/billing",
        Some(json!({"members": [more]})),
    )
    .await;
    assert_eq!(put.0, 200, "{}", put.1);
    let refused = remove(FLEET, "billing", &more).await;
    assert_eq!(
        refusal(&refused),
        (403, "FORBIDDEN", "url"),
        "{}",
        refused.1
    );

    let (_, log) = call(&base, Some(ADMIN), "GET", "/api/audit?limit=500", None).await;
    let actors: Vec<(&str, &str)> = log["items"]
        .as_array()
        .expect("items")
        .iter()
        .rev()
        .filter(|e| {
            e["action"]
                .as_str()
                .is_some_and(|a| a.starts_with("executor."))
        })
        .map(|e| {
            let actor = e["actor"].as_str().unwrap_or_default();
            (actor, e["action"].as_str().unwrap_or_default())
        })
        .collect();
    assert_eq!(
        actors,
        [
            ("admin", "executor.put"),
            ("billing-workers", "executor.join"),
            ("fleet", "executor.join"),
            ("billing-workers", "executor.leave"),
            ("fleet", "executor.join"),
            ("admin", "executor.leave"),
            ("admin", "executor.leave"),
            ("admin", "executor.put"),
        ]
    );
}

on_each_backend!(
    executor_tokens_stay_in_their_groups,
    sqlite: executor_tokens_stay_in_their_groups_sqlite,
    mariadb: executor_tokens_stay_in_their_groups_mysql,
    postgres: executor_tokens_stay_in_their_groups_postgres
);

/// Without any token, changes are the anonymous actor's.
#[actix_rt::test(system = "crate::common::TestSystem")]
async fn without_tokens_the_actor_is_anonymous() {
    let store = TestStore::sqlite();
    let ax = start_ax(&config(&store, false, "access")).await;
    let api = Api::new(&ax);
    api.create_task(json!({"name": unique_name("anon"), "cron": "0 0 0 1 1 *",
        "handlerUrl": "http://127.0.0.1:9/run"}))
        .await;
    let (_, log) = api.get("/api/audit").await;
    assert_eq!(log["items"][0]["actor"], "anonymous");
    assert_eq!(log["items"][0]["action"], "task.create");
}
