//! The web console: ax started in-process on SQLite and MariaDB, tasks and runs made through
//! the JSON API, each page fetched over HTTP and read as a user would read it.

mod common;

use std::time::Duration;

use common::{config, start_ax, unique_name, Api, Executor, Reply, TestStore};
use serde_json::{json, Value};

/// A GET without following redirects: status, content type, a header and the body as text.
struct Fetched {
    status: u16,
    content_type: String,
    header: Option<String>,
    body: String,
}

async fn fetch(ax: &ax::app::Ax, path: &str, header: &str) -> Fetched {
    let client = awc::Client::builder()
        .timeout(Duration::from_secs(10))
        .disable_redirects()
        .finish();
    let mut response = client
        .get(format!("http://{}{path}", ax.addr()))
        .send()
        .await
        .unwrap_or_else(|err| panic!("GET {path}: {err}"));
    let text = |name: &str| {
        response
            .headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    };
    let (content_type, header) = (text("content-type").unwrap_or_default(), text(header));
    let body = response.body().limit(4 << 20).await.expect("a body");
    Fetched {
        status: response.status().as_u16(),
        content_type,
        header,
        body: String::from_utf8_lossy(&body).into_owned(),
    }
}

/// A page's HTML; fails the test unless it is a 200 HTML page.
async fn page(ax: &ax::app::Ax, path: &str) -> String {
    let fetched = fetch(ax, path, "cache-control").await;
    assert_eq!(fetched.status, 200, "GET {path}: {}", fetched.body);
    assert!(
        fetched.content_type.starts_with("text/html"),
        "{path}: {}",
        fetched.content_type
    );
    fetched.body
}

/// Waits for a task's first final run; returns it.
async fn first_final_run(api: &Api, task_id: i64) -> Value {
    let runs = api.wait_final(task_id, 1, Duration::from_secs(10)).await;
    runs.into_iter()
        .find(|run| matches!(run["status"].as_str(), Some("SUCCESS" | "FAILED")))
        .unwrap_or_else(|| panic!("task {task_id} has no final run"))
}

async fn pages_show_tasks_and_runs(store: TestStore) {
    let ax = start_ax(&config(&store, false, "console")).await;
    let api = Api::new(&ax);
    let failing = Executor::start(Reply::Failed).await;
    let scene = unique_name("billing");
    let name = unique_name("nightly<b>");
    let task = api
        .create_task(json!({"name": name, "scene": scene, "cron": "* * * * * *", "handlerUrl": failing.url, "maxRetry": 0}))
        .await;
    let id = task["id"].as_i64().expect("id");
    let zoned = api
        .create_task(json!({
            "name": unique_name("berlin"), "scene": scene, "cron": "0 30 2 * * *",
            "timeZone": "Europe/Berlin", "handlerUrl": failing.url, "enabled": false,
        }))
        .await;
    let zoned_id = zoned["id"].as_i64().expect("id");
    let run = first_final_run(&api, id).await;
    let request_id = run["requestId"].as_str().expect("requestId").to_string();
    assert_eq!(run["status"], "FAILED");

    // The dashboard: counts, the failure linking to its run, the cluster, health.
    let dashboard = page(&ax, "/console").await;
    assert!(dashboard.contains("Last hour") && dashboard.contains("Latest failures"));
    assert!(dashboard.contains("badge bad"), "FAILED is red");
    assert!(dashboard.contains("boom"), "the failure's message");
    assert!(
        dashboard.contains("console</code>"),
        "this process in the cluster"
    );
    assert!(dashboard.contains("HEALTHY"));
    assert!(dashboard.contains("<svg") && dashboard.contains("runs in the last hour"));
    assert!(!dashboard.contains(&name), "task names are escaped");
    assert!(dashboard.contains(&name.replace('<', "&lt;").replace('>', "&gt;")));

    // The tasks page: the cron in English, the zone, the last run's status linking to it.
    let tasks = page(&ax, &format!("/console/tasks?scene={scene}")).await;
    assert!(
        tasks.contains("Every second"),
        "the cron described: {tasks}"
    );
    assert!(tasks.contains("Europe/Berlin"));
    assert!(tasks.contains(&format!("/console/tasks/{id}")));
    assert!(tasks.contains("/console/runs/"), "the last run links to it");
    // The name search, and the filters kept in the form.
    let searched = page(&ax, &format!("/console/tasks?scene={scene}&q=berlin")).await;
    assert!(searched.contains(&format!("/console/tasks/{zoned_id}")));
    assert!(!searched.contains(&format!("/console/tasks/{id}\"")));
    assert!(searched.contains("value=\"berlin\""));
    let paused = page(&ax, &format!("/console/tasks?scene={scene}&status=PAUSED")).await;
    assert!(paused.contains(&format!("/console/tasks/{zoned_id}")));
    assert!(!paused.contains(&format!("/console/tasks/{id}\"")));

    // A task's page: its definition, its next fire times with a DST note, its runs.
    let detail = page(&ax, &format!("/console/tasks/{zoned_id}")).await;
    assert!(detail.contains("Europe/Berlin") && detail.contains("Next 10 fire times"));
    assert!(
        detail.contains("(Europe/Berlin time)"),
        "described in its zone"
    );
    let detail = page(&ax, &format!("/console/tasks/{id}")).await;
    assert!(detail.contains(&request_id), "the latest runs");
    assert!(detail.contains("Handler URL") && detail.contains(&failing.url));

    // The runs page, filtered, with the filters kept in the next page's link.
    let runs = page(&ax, &format!("/console/runs?task={id}&status=FAILED")).await;
    assert!(runs.contains(&request_id) && runs.contains("E1"));
    assert!(!runs.contains("badge good"));
    let all = page(&ax, &format!("/console/runs?scene={scene}")).await;
    assert!(all.contains(&request_id));
    // More runs than a page holds: the next page's link keeps the filters.
    let (from, to) = (
        chrono::Utc::now() - chrono::Duration::seconds(200),
        chrono::Utc::now() - chrono::Duration::seconds(100),
    );
    let (status, body) = api
        .post(
            &format!("/api/tasks/{id}/backfill"),
            json!({"from": from.to_rfc3339(), "to": to.to_rfc3339()}),
        )
        .await;
    assert_eq!(status, 202, "{body}");
    let first = page(&ax, &format!("/console/runs?task={id}&scene={scene}")).await;
    let next = format!("/console/runs?task={id}&amp;scene={scene}&amp;cursor=");
    let at = first
        .find(&next)
        .unwrap_or_else(|| panic!("a next page: {first}"));
    let link = &first[at..];
    let link = link[..link.find('"').expect("the link ends")].replace("&amp;", "&");
    let second = page(&ax, &link).await;
    assert!(second.contains("First page"));
    assert!(
        second.contains(&format!("value=\"{id}\"")),
        "the filter kept"
    );

    // A run's page.
    let run_page = page(&ax, &format!("/console/runs/{request_id}")).await;
    assert!(run_page.contains("FAILED") && run_page.contains("boom"));
    assert!(run_page.contains("Fired by") && run_page.contains("console"));

    // The audit log page: the changes made above, by the anonymous actor.
    let audit = page(&ax, "/console/audit").await;
    assert!(
        audit.contains("task.create") && audit.contains("anonymous"),
        "{audit}"
    );
    assert!(audit.contains(&scene));

    // The scenes page.
    let scenes = page(&ax, "/console/scenes").await;
    assert!(scenes.contains(&scene));
    assert!(scenes.contains(&format!("/console/tasks?scene={scene}&amp;status=PAUSED")));

    ax.shutdown().await;
    failing.stop().await;
}

#[actix_rt::test]
async fn pages_on_sqlite() {
    pages_show_tasks_and_runs(TestStore::sqlite()).await;
}

#[actix_rt::test]
async fn pages_on_mysql() {
    pages_show_tasks_and_runs(TestStore::mysql()).await;
}

#[actix_rt::test]
async fn a_zoned_task_shows_its_dst_notes() {
    let store = TestStore::sqlite();
    let ax = start_ax(&config(&store, false, "console-dst")).await;
    let api = Api::new(&ax);
    // Every half hour from 01:00 on the day New York falls back: 01:00 and 01:30 happen
    // twice, and the second copies are noted (it is always within the next ten fires).
    let task = api
        .create_task(json!({
            "name": unique_name("dst"), "cron": "0 */30 1 * 11 SUN#1", "timeZone": "America/New_York",
            "handlerUrl": "http://127.0.0.1:9/none", "enabled": false,
        }))
        .await;
    let id = task["id"].as_i64().expect("id");
    let detail = page(&ax, &format!("/console/tasks/{id}")).await;
    assert!(detail.contains("(DST overlap)"), "{detail}");
    ax.shutdown().await;
}

#[actix_rt::test]
async fn unknown_pages_bad_filters_redirects_and_assets() {
    let store = TestStore::sqlite();
    let ax = start_ax(&config(&store, false, "console-misc")).await;

    let root = fetch(&ax, "/", "location").await;
    assert!(matches!(root.status, 302 | 303), "{}", root.status);
    assert_eq!(root.header.as_deref(), Some("/console"));

    for path in [
        "/console/tasks/999",
        "/console/tasks/x",
        "/console/runs/nope",
        "/console/nothing",
    ] {
        let missing = fetch(&ax, path, "cache-control").await;
        assert_eq!(missing.status, 404, "{path}");
        assert!(missing.content_type.starts_with("text/html"));
        assert!(
            missing.body.contains("<nav") && missing.body.contains("Not Found"),
            "{path}"
        );
    }
    let unknown_run = fetch(
        &ax,
        "/console/runs/6a1c52e4-93b7-4c0e-8f2d-3b5a7e91c4d8",
        "x",
    )
    .await;
    assert_eq!(unknown_run.status, 404);

    // A bad filter: 400, the message beside the field it names, the value kept.
    let bad = fetch(&ax, "/console/runs?status=DONE&scene=s1", "x").await;
    assert_eq!(bad.status, 400);
    assert!(
        bad.body
            .contains(r#"<span class="field-error" id="status-error">status must be"#),
        "{}",
        bad.body
    );
    assert!(bad.body.contains(r#"aria-describedby="status-error""#));
    assert!(bad.body.contains(r#"value="s1""#));
    let bad = fetch(&ax, "/console/tasks?status=ON", "x").await;
    assert_eq!(bad.status, 400);
    assert!(bad.body.contains("status-error"));

    // Assets: their content types, cached, and within the first-load budget together.
    let mut size = 0;
    for (name, kind) in [
        ("console.css", "text/css"),
        ("console.js", "text/javascript"),
        ("favicon.svg", "image/svg+xml"),
    ] {
        let asset = fetch(&ax, &format!("/console/assets/{name}"), "cache-control").await;
        assert_eq!(asset.status, 200, "{name}");
        assert!(
            asset.content_type.starts_with(kind),
            "{name}: {}",
            asset.content_type
        );
        assert!(
            asset.header.is_some_and(|c| c.contains("max-age")),
            "{name}"
        );
        if !name.ends_with(".svg") {
            size += asset.body.len();
        }
    }
    assert!(size <= 150 * 1024, "{size} bytes of CSS and JS");
    assert_eq!(fetch(&ax, "/console/assets/nope.js", "x").await.status, 404);

    // Every page links its assets, a skip link and the navigation.
    let home = page(&ax, "/console").await;
    for part in [
        "/console/assets/console.css",
        "/console/assets/console.js",
        "href=\"#main\"",
        "<main",
        "aria-current=\"page\"",
    ] {
        assert!(home.contains(part), "{part}");
    }
    ax.shutdown().await;
}

#[actix_rt::test]
async fn with_an_admin_token_the_console_is_closed() {
    let store = TestStore::sqlite();
    let mut settings = config(&store, false, "console-token");
    settings.server.admin_token = Some("s3cret".into());
    let ax = start_ax(&settings).await;
    for path in ["/console", "/console/tasks", "/"] {
        assert_eq!(fetch(&ax, path, "x").await.status, 401, "{path}");
    }
    ax.shutdown().await;
}
