//! Finding anything by id: the console's search (`/console/search?q=`: a request id opens its
//! run, its start lists the runs it names, other text the tasks whose `scene/name` contains
//! it), the API's `GET /api/instances?requestIdPrefix=` and `ax runs get` with the start of a
//! request id — on SQLite and MariaDB.

use std::process::Output;
use std::time::Duration;

use serde_json::json;

use crate::common::{
    config, on_each_backend, start_ax, unique_name, Api, Executor, Reply, TestStore,
};

on_each_backend!(
    finds_runs_and_tasks,
    sqlite: search_on_sqlite,
    mariadb: search_on_mysql,
    postgres: search_on_postgres
);

/// A GET without following redirects: its status, `Location` and body.
async fn get(ax: &ax_server::app::Ax, path: &str) -> (u16, Option<String>, String) {
    let client = awc::Client::builder()
        .timeout(Duration::from_secs(10))
        .disable_redirects()
        .finish();
    let mut response = client
        .get(format!("http://{}{path}", ax.addr()))
        .send()
        .await
        .unwrap_or_else(|err| panic!("GET {path}: {err}"));
    let location = response
        .headers()
        .get("location")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let body = response.body().limit(4 << 20).await.expect("a body");
    (
        response.status().as_u16(),
        location,
        String::from_utf8_lossy(&body).into_owned(),
    )
}

/// `ax ARGS… --url` against `ax`, run off the runtime (which serves it meanwhile).
async fn ax_cli(ax: &ax_server::app::Ax, args: &[&str]) -> Output {
    let mut command = crate::common::ax_command();
    command
        .args(args)
        .args(["--url", &format!("http://{}", ax.addr())]);
    actix_rt::task::spawn_blocking(move || command.output().expect("run ax"))
        .await
        .expect("the command ends")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

async fn finds_runs_and_tasks(store: TestStore) {
    let ax = start_ax(&config(&store, false, "search")).await;
    let api = Api::new(&ax);
    let executor = Executor::start(Reply::Success).await;
    let scene = unique_name("billing");
    let name = unique_name("charge-cards");
    let task = api
        .create_task(json!({"name": name, "scene": scene, "cron": "0 0 3 1 1 *", "handlerUrl": executor.url}))
        .await;
    let id = task["id"].as_i64().expect("id");
    let other = api
        .create_task(json!({"name": unique_name("nightly"), "scene": unique_name("reports"), "cron": "0 0 3 1 1 *", "handlerUrl": executor.url}))
        .await;
    let mut ids = Vec::new();
    for _ in 0..3 {
        let (status, run) = api
            .post(&format!("/api/tasks/{id}/trigger"), json!({}))
            .await;
        assert_eq!(status, 201, "{run}");
        ids.push(run["requestId"].as_str().expect("requestId").to_string());
    }
    let (status, run) = api
        .post(
            &format!("/api/tasks/{}/trigger", other["id"].as_i64().expect("id")),
            json!({}),
        )
        .await;
    assert_eq!(status, 201, "{run}");
    let elsewhere = run["requestId"].as_str().expect("requestId").to_string();
    for request_id in &ids {
        api.wait_status(
            &format!("/api/instances/{request_id}"),
            "SUCCESS",
            Duration::from_secs(10),
        )
        .await;
    }
    // Runs made in the same 65 s share their first 8 hex digits (the time they were made);
    // the runs of the largest such group are those a prefix of 8 names.
    let start = |id: &String| id[..8].to_string();
    let shared = ids
        .iter()
        .map(start)
        .max_by_key(|prefix| ids.iter().filter(|id| id.starts_with(prefix)).count())
        .expect("a prefix");
    let sharing: Vec<&String> = ids.iter().filter(|id| id.starts_with(&shared)).collect();
    assert!(sharing.len() >= 2, "{ids:?}");

    // A whole request id opens its run, as typed in any case.
    let target = &ids[1];
    let (status, location, _) = get(&ax, &format!("/console/search?q={target}")).await;
    assert_eq!(status, 303);
    assert_eq!(
        location.as_deref(),
        Some(&*format!("/console/runs/{target}"))
    );
    let upper = target.to_uppercase();
    let (_, location, _) = get(&ax, &format!("/console/search?q=+{upper}+")).await;
    assert_eq!(
        location.as_deref(),
        Some(&*format!("/console/runs/{target}"))
    );
    let unknown = "0b6f1c52-8a47-4cf5-9d3e-2f7c1a9e4b10";
    let (status, _, page) = get(&ax, &format!("/console/search?q={unknown}")).await;
    assert_eq!(status, 200);
    assert!(page.contains("No run has request id"), "{page}");

    // Its start lists the runs it names, with their task; no other run.
    let (status, _, page) = get(&ax, &format!("/console/search?q={shared}")).await;
    assert_eq!(status, 200, "{page}");
    assert!(page.contains("Runs whose request id starts with"), "{page}");
    for id in &sharing {
        assert!(
            page.contains(&format!("/console/runs/{id}")),
            "{id}: {page}"
        );
    }
    if !elsewhere.starts_with(&shared) {
        assert!(!page.contains(&elsewhere));
    }
    assert!(page.contains(&name), "the runs' task named");

    // Other text: the tasks whose scene/name contains it, in any case, across the slash.
    for typed in [
        name.to_uppercase(),
        format!("{}/{}", &scene[3..], &name[..6]),
    ] {
        let (status, _, page) = get(&ax, &format!("/console/search?q={typed}")).await;
        assert_eq!(status, 200, "{page}");
        assert!(page.contains("Tasks whose scene/name contains"), "{page}");
        assert!(
            page.contains(&format!("/console/tasks/{id}\"")),
            "{typed}: {page}"
        );
        assert!(!page.contains(&other["name"].as_str().expect("name").to_string()));
    }
    let (_, _, page) = get(&ax, "/console/search?q=nothing-is-called-this").await;
    assert!(page.contains("None."), "{page}");
    let (status, _, page) = get(&ax, &format!("/console/search?q={}", "x".repeat(200))).await;
    assert_eq!(status, 400, "{page}");
    assert!(page.contains("at most 193 characters"), "{page}");
    // Every page carries the search box.
    let (_, _, page) = get(&ax, "/console/audit").await;
    assert!(page.contains(r#"id="search-q""#) && page.contains(r#"action="/console/search""#));

    // The API: runs by the start of their request id, the latest made first, in one page;
    // a bad prefix, or a filter beside it, is refused naming it.
    let (status, page) = api
        .get(&format!("/api/instances?requestIdPrefix={shared}&limit=1"))
        .await;
    assert_eq!(status, 200, "{page}");
    let items = page["items"].as_array().expect("items");
    let latest = sharing
        .iter()
        .copied()
        .chain(Some(&elsewhere).filter(|id| id.starts_with(&shared)))
        .max()
        .expect("a run");
    assert_eq!(items.len(), 1);
    assert_eq!(items[0]["requestId"], json!(latest));
    assert_eq!(page["nextCursor"], json!(null));
    for (query, field) in [
        ("requestIdPrefix=abc12", "requestIdPrefix"),
        ("requestIdPrefix=abcdefgh", "requestIdPrefix"),
        (
            &*format!("requestIdPrefix={shared}&status=FAILED"),
            "status",
        ),
        (&*format!("requestIdPrefix={shared}&cursor=1.1"), "cursor"),
    ] {
        let (status, body) = api.get(&format!("/api/instances?{query}")).await;
        assert_eq!(status, 400, "{query}: {body}");
        assert_eq!(body["error"]["field"], field, "{query}: {body}");
    }

    // `ax runs get` with the start of a request id that no other run's shares; with one
    // several share, or none, exit 2 naming it.
    let unique = &target[..23];
    let found = ax_cli(&ax, &["runs", "get", unique]).await;
    assert_eq!(found.status.code(), Some(0), "{}", text(&found.stderr));
    assert!(
        text(&found.stdout).contains(target.as_str()),
        "{}",
        text(&found.stdout)
    );
    let several = ax_cli(&ax, &["runs", "get", &shared]).await;
    assert_eq!(several.status.code(), Some(2));
    let said = text(&several.stderr);
    assert!(
        said.contains(&shared) && said.contains("several runs"),
        "{said}"
    );
    for id in &sharing {
        assert!(said.contains(id.as_str()), "{said}");
    }
    let none = ax_cli(&ax, &["runs", "get", "ffffffff-ff"]).await;
    assert_eq!(none.status.code(), Some(2));
    assert!(
        text(&none.stderr).contains("no run's request id starts with ffffffff-ff"),
        "{}",
        text(&none.stderr)
    );
    let short = ax_cli(&ax, &["runs", "get", "abc12"]).await;
    assert_eq!(short.status.code(), Some(2));
    assert!(
        text(&short.stderr).contains("abc12"),
        "{}",
        text(&short.stderr)
    );

    ax.shutdown().await;
    executor.stop().await;
}
