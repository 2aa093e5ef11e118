//! The web console: ax started in-process on SQLite and MariaDB, tasks and runs made through
//! the JSON API, each page fetched over HTTP and read as a user would read it.

use std::time::Duration;

use serde_json::{json, Value};

use crate::common::{
    config, on_each_backend, refusing_base, start_ax, unique_name, with_webhook, Api, Executor,
    Reply, TestStore,
};

/// A GET without following redirects: status, content type, a header and the body as text.
struct Fetched {
    status: u16,
    content_type: String,
    header: Option<String>,
    body: String,
}

async fn fetch(ax: &ax_server::app::Ax, path: &str, header: &str) -> Fetched {
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
async fn page(ax: &ax_server::app::Ax, path: &str) -> String {
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

    // The dashboard: the failing task first, folded, linking to its latest run; the cluster
    // and health in one line; counts.
    let dashboard = page(&ax, "/console").await;
    assert!(dashboard.contains("Last hour") && dashboard.contains("Needs attention"));
    let attention = &dashboard[dashboard.find("Needs attention").expect("attention")..];
    let folded = &attention[attention
        .find(r#"id="failing-tasks""#)
        .expect("failing tasks")..];
    assert!(
        folded.contains(r#"<span class="badge bad">FAILING</span>"#),
        "still failing is red"
    );
    assert!(
        folded.contains("/console/runs/"),
        "links to its latest failed run"
    );
    assert!(
        folded.contains(&format!("task={id}&amp;status=FAILED")),
        "the count links to the task's failures"
    );
    assert!(
        dashboard.contains(r#"id="status-line""#),
        "health and cluster in one line"
    );
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

/// A run waiting for its retry is listed as such, its task as failing; a healthy dashboard
/// says nothing needs attention.
async fn the_dashboard_shows_what_needs_attention(store: TestStore) {
    let ax = start_ax(&config(&store, false, "attention")).await;
    let api = Api::new(&ax);
    if !store.is_shared() {
        let quiet = page(&ax, "/console").await;
        assert!(
            quiet.contains(r#"id="attention-none""#),
            "a new store: nothing to see"
        );
    }
    let failing = Executor::start(Reply::Failed).await;
    let name = unique_name("retrying");
    let task = api
        .create_task(
            json!({"name": name, "cron": "* * * * * *", "handlerUrl": failing.url,
            "maxRetry": 1, "retryBackoffSecs": 600}),
        )
        .await;
    let id = task["id"].as_i64().expect("id");
    failing.wait_for(1, Duration::from_secs(10)).await;
    let mut shown = String::new();
    for _ in 0..50 {
        shown = page(&ax, "/console").await;
        if shown.contains("attempt 2 in") {
            break;
        }
        actix_rt::time::sleep(Duration::from_millis(200)).await;
    }
    let runs = &shown[shown.find(r#"id="troubled-runs""#).expect("troubled runs")..];
    assert!(runs.contains("attempt 1 failed; attempt 2 in"), "{runs}");
    assert!(
        runs.contains(&format!("/console/tasks/{id}")),
        "links to the task"
    );
    assert!(runs.contains(">READY<"), "{runs}");
    let (status, _) = api.call("DELETE", &format!("/api/tasks/{id}"), None).await;
    assert_eq!(status, 204);
    ax.shutdown().await;
    failing.stop().await;
}

on_each_backend!(
    the_dashboard_shows_what_needs_attention,
    sqlite: the_dashboard_shows_what_needs_attention_on_sqlite,
    mariadb: the_dashboard_shows_what_needs_attention_on_mariadb,
    postgres: the_dashboard_shows_what_needs_attention_on_postgres
);

on_each_backend!(
    pages_show_tasks_and_runs,
    sqlite: pages_on_sqlite,
    mariadb: pages_on_mysql,
    postgres: pages_on_postgres
);

#[actix_rt::test(system = "crate::common::TestSystem")]
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

#[actix_rt::test(system = "crate::common::TestSystem")]
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
        "/console/scenes/no-such-scene",
        "/console/scenes/a%20b",
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

    // With no channel configured, the alerts page says how to configure one.
    let alerts = page(&ax, "/console/alerts").await;
    assert!(alerts.contains("<code>alerts.channels</code>"), "{alerts}");

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

/// A visitor of the console over plain HTTP: keeps its cookies, reads each page's CSRF
/// token, and sends forms as a browser would (the other console modules' visitor too).
pub(crate) struct Visitor {
    base: String,
    cookies: std::collections::BTreeMap<String, String>,
    /// The `Set-Cookie` headers of the last response.
    set_cookies: Vec<String>,
    /// Every header of the last response.
    headers: actix_web::http::header::HeaderMap,
    csrf: Option<String>,
}

impl Visitor {
    pub(crate) fn new(ax: &ax_server::app::Ax) -> Visitor {
        Visitor {
            base: format!("http://{}", ax.addr()),
            cookies: Default::default(),
            set_cookies: Vec::new(),
            headers: Default::default(),
            csrf: None,
        }
    }

    /// GET or POST (form fields, the page's CSRF token added unless `csrf` says otherwise);
    /// no redirect followed. Returns the status, the `Location` and the body.
    pub(crate) async fn send(
        &mut self,
        method: &str,
        path: &str,
        fields: &[(&str, &str)],
        csrf: Option<&str>,
    ) -> (u16, Option<String>, String) {
        let client = awc::Client::builder()
            .timeout(Duration::from_secs(10))
            .disable_redirects()
            .finish();
        let url = format!("{}{path}", self.base);
        let mut request = match method {
            "GET" => client.get(url),
            _ => client.post(url),
        };
        if !self.cookies.is_empty() {
            let jar: Vec<String> = self
                .cookies
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect();
            request = request.insert_header(("Cookie", jar.join("; ")));
        }
        let mut response = if method == "GET" {
            request.send().await
        } else {
            let mut form = url::form_urlencoded::Serializer::new(String::new());
            if let Some(csrf) = csrf.map(str::to_string).or_else(|| self.csrf.clone()) {
                form.append_pair("csrf", &csrf);
            }
            for (key, value) in fields {
                form.append_pair(key, value);
            }
            request
                .content_type("application/x-www-form-urlencoded")
                .send_body(form.finish())
                .await
        }
        .unwrap_or_else(|err| panic!("{method} {path}: {err}"));
        self.headers = response.headers().clone();
        self.set_cookies = response
            .headers()
            .get_all("set-cookie")
            .filter_map(|v| v.to_str().ok().map(str::to_string))
            .collect();
        for header in &self.set_cookies {
            let pair = header.split(';').next().unwrap_or_default();
            if let Some((name, value)) = pair.split_once('=') {
                if value.is_empty() || header.contains("Max-Age=0") {
                    self.cookies.remove(name);
                } else {
                    self.cookies.insert(name.to_string(), value.to_string());
                }
            }
        }
        let location = response
            .headers()
            .get("location")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let body = response.body().limit(4 << 20).await.expect("a body");
        let body = String::from_utf8_lossy(&body).into_owned();
        if let Some(csrf) = csrf_of(&body) {
            self.csrf = Some(csrf);
        }
        (response.status().as_u16(), location, body)
    }

    pub(crate) async fn get(&mut self, path: &str) -> (u16, Option<String>, String) {
        self.send("GET", path, &[], None).await
    }

    pub(crate) async fn post(
        &mut self,
        path: &str,
        fields: &[(&str, &str)],
    ) -> (u16, Option<String>, String) {
        self.send("POST", path, fields, None).await
    }

    /// The `Set-Cookie` header of `name` in the last response.
    fn set_cookie(&self, name: &str) -> Option<&String> {
        self.set_cookies
            .iter()
            .find(|h| h.starts_with(&format!("{name}=")))
    }
}

/// The CSRF token a page's forms carry.
fn csrf_of(html: &str) -> Option<String> {
    let at = html.find(r#"name="csrf" value=""#)? + r#"name="csrf" value=""#.len();
    Some(html[at..].split('"').next()?.to_string())
}

/// Form fields as the visitor sends them.
fn refs<'a>(fields: &'a [(&'a str, String)]) -> Vec<(&'a str, &'a str)> {
    fields.iter().map(|(k, v)| (*k, v.as_str())).collect()
}

/// The version an editor form carries (its hidden field), as JSON.
fn version_of(html: &str) -> Value {
    let marker = r#"name="version" value=""#;
    let at = html
        .find(marker)
        .unwrap_or_else(|| panic!("no version: {html}"))
        + marker.len();
    let version = html[at..]
        .split('"')
        .next()
        .and_then(|v| v.parse::<i64>().ok());
    json!(version.unwrap_or_else(|| panic!("a bad version: {html}")))
}

/// The id in a `/console/tasks/{id}?…` location.
fn task_id_in(location: &str) -> i64 {
    location
        .trim_start_matches("/console/tasks/")
        .split('?')
        .next()
        .and_then(|id| id.parse().ok())
        .unwrap_or_else(|| panic!("no task id in {location}"))
}

pub(crate) const ADMIN_TOKEN: &str = "admin-token-for-the-console";
pub(crate) const VIEWER_TOKEN: &str = "viewer-token-for-the-console";

async fn signing_in_sessions_and_csrf(store: TestStore) {
    let mut settings = config(&store, false, "console-token");
    settings.server.admin_token = Some(ADMIN_TOKEN.into());
    settings.server.tokens = vec![ax_server::config::NamedToken {
        name: "ops-viewer".into(),
        token: VIEWER_TOKEN.into(),
        role: ax_core::security::Role::Viewer,
        groups: None,
    }];
    let ax = start_ax(&settings).await;
    let executor = Executor::start(Reply::Success).await;
    let mut admin = Visitor::new(&ax);

    // Pages send a stranger to the sign-in page, and back where they were going after it.
    let (status, location, _) = admin.get("/console/tasks?scene=a").await;
    assert_eq!(status, 303);
    assert_eq!(
        location.as_deref(),
        Some("/console/sign-in?next=%2Fconsole%2Ftasks%3Fscene%3Da")
    );
    let (status, _, body) = admin
        .get("/console/sign-in?next=%2Fconsole%2Ftasks%3Fscene%3Da")
        .await;
    assert_eq!(status, 200);
    assert!(body.contains(r#"type="password""#) && body.contains(r#"<label for="token">"#));
    let csrf_cookie = admin.set_cookie("ax_csrf").expect("a CSRF cookie").clone();
    assert!(
        csrf_cookie.contains("HttpOnly") && csrf_cookie.contains("SameSite=Strict"),
        "{csrf_cookie}"
    );
    // A form from another site (no token) and a wrong token are refused.
    let (status, _, _) = admin
        .send(
            "POST",
            "/console/sign-in",
            &[("token", ADMIN_TOKEN)],
            Some("f".repeat(64).as_str()),
        )
        .await;
    assert_eq!(status, 403);
    let (status, _, body) = admin
        .post("/console/sign-in", &[("token", "not-the-token-at-all")])
        .await;
    assert_eq!(status, 401);
    assert!(
        body.contains("token-error") && body.contains("not a token of this ax"),
        "{body}"
    );
    let (status, location, _) = admin
        .post(
            "/console/sign-in",
            &[("token", ADMIN_TOKEN), ("next", "/console/tasks?scene=a")],
        )
        .await;
    assert_eq!(status, 303);
    assert_eq!(location.as_deref(), Some("/console/tasks?scene=a"));
    let session = admin
        .set_cookie("ax_session")
        .expect("a session cookie")
        .clone();
    assert!(
        session.contains("HttpOnly") && session.contains("SameSite=Strict"),
        "{session}"
    );
    let (status, _, body) = admin.get("/console/tasks").await;
    assert_eq!(status, 200);
    assert!(body.contains("Signed in as <strong>admin</strong>"));
    // The session reads the API (the editor's preview), but changes nothing there.
    let (status, _, body) = admin
        .get("/api/cron/next?expr=0%200%209%20*%20*%20MON-FRI&tz=Europe/Berlin")
        .await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("Monday through Friday"), "{body}");
    let (status, _, _) = admin.post("/api/scenes/a/pause", &[]).await;
    assert_eq!(
        status, 401,
        "a cookie does not change things through the API"
    );

    // A task made through the form: a bad cron first, its error beside the field.
    let (_, _, form) = admin.get("/console/tasks/new").await;
    assert!(
        form.contains(r#"id="preview""#) && form.contains("Every minute"),
        "the server's preview"
    );
    let scene = unique_name("signed");
    let fields = |cron: &'static str| {
        vec![
            ("name", "from-the-form".to_string()),
            ("scene", scene.clone()),
            ("cron", cron.to_string()),
            ("timeZone", "UTC".to_string()),
            ("handlerUrl", executor.url.clone()),
            ("params", r#"{"via": "console"}"#.to_string()),
            ("maxRetry", "0".to_string()),
            ("enabled", "true".to_string()),
        ]
    };
    let (status, _, body) = admin
        .post("/console/tasks/new", &refs(&fields("61 * * * * *")))
        .await;
    assert_eq!(status, 400, "{body}");
    assert!(body.contains(r#"id="cron-error""#), "{body}");
    assert!(
        body.contains(r#"value="61 * * * * *""#),
        "what was typed stays"
    );
    let (status, location, _) = admin
        .post("/console/tasks/new", &refs(&fields("0 0 0 1 1 *")))
        .await;
    assert_eq!(status, 303);
    let location = location.expect("to the task");
    assert!(location.ends_with("?done=created"), "{location}");
    let id = task_id_in(&location);

    // A form without the session's CSRF token changes nothing.
    for csrf in ["", &"0".repeat(64)] {
        let (status, _, _) = admin
            .send(
                "POST",
                &format!("/console/tasks/{id}/pause"),
                &[],
                Some(csrf),
            )
            .await;
        assert_eq!(status, 403);
    }
    let (_, _, body) = admin.get(&format!("/console/tasks/{id}")).await;
    assert!(body.contains("badge good\">ENABLED"), "still enabled");

    // A viewer looks, but every change is refused, and no page offers one.
    let mut viewer = Visitor::new(&ax);
    viewer.get("/console/sign-in").await;
    let (status, _, _) = viewer
        .post("/console/sign-in", &[("token", VIEWER_TOKEN)])
        .await;
    assert_eq!(status, 303);
    let (status, _, body) = viewer.get(&format!("/console/tasks/{id}")).await;
    assert_eq!(status, 200);
    assert!(body.contains("Signed in as <strong>ops-viewer</strong>"));
    assert!(
        !body.contains("/pause\"") && !body.contains("Trigger run"),
        "no actions for a viewer"
    );
    let (status, _, body) = viewer
        .post(&format!("/console/tasks/{id}/pause"), &[])
        .await;
    assert_eq!(status, 403);
    assert!(body.contains("ops-viewer"), "the refusal names the token");

    // The audit log names who made the task.
    let (_, _, audit) = admin.get("/console/audit").await;
    assert!(
        audit.contains("task.create") && audit.contains("<td>admin</td>"),
        "{audit}"
    );

    // Signing out ends the session in the store: its cookie opens nothing any more.
    let stolen = admin.cookies.get("ax_session").expect("a session").clone();
    let (status, location, _) = admin.post("/console/sign-out", &[]).await;
    assert_eq!(status, 303);
    assert_eq!(
        location.as_deref(),
        Some("/console/sign-in?done=signed-out")
    );
    assert!(
        !admin.cookies.contains_key("ax_session"),
        "the cookie is dropped"
    );
    admin.cookies.insert("ax_session".into(), stolen);
    let (status, location, _) = admin.get("/console").await;
    assert_eq!(status, 303, "the old session is over");
    assert!(location.is_some_and(|l| l.starts_with("/console/sign-in")));
    // A bearer token opens a page too, for scripts.
    let bearer = awc::Client::default()
        .get(format!("http://{}/console/scenes", ax.addr()))
        .insert_header(("Authorization", format!("Bearer {VIEWER_TOKEN}")))
        .send()
        .await
        .expect("an answer");
    assert_eq!(bearer.status().as_u16(), 200);
    ax.shutdown().await;
    executor.stop().await;
}

on_each_backend!(
    signing_in_sessions_and_csrf,
    sqlite: signing_in_on_sqlite,
    mariadb: signing_in_on_mysql,
    postgres: signing_in_on_postgres
);

impl Visitor {
    /// A header of the last response.
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|value| value.to_str().ok())
    }

    /// Signs in with `token` and reads the session's CSRF token off the dashboard; fails the
    /// test unless it worked.
    pub(crate) async fn sign_in(&mut self, token: &str) {
        self.get("/console/sign-in").await;
        let (status, _, body) = self.post("/console/sign-in", &[("token", token)]).await;
        assert_eq!(status, 303, "{body}");
        assert!(self.set_cookie("ax_session").is_some(), "signed in");
        assert_eq!(self.get("/console").await.0, 200);
    }
}

/// The policy every console answer carries: nothing inline, nothing from elsewhere, no frame.
const POLICY: &str = "default-src 'self'; script-src 'self'; style-src 'self'; \
    img-src 'self' data:; object-src 'none'; frame-ancestors 'none'; base-uri 'none'; \
    form-action 'self'";

/// Fails unless the last answer carries the console's headers, and is kept from every cache
/// when `private`.
fn assert_console_headers(visitor: &Visitor, what: &str, private: bool) {
    assert_eq!(
        visitor.header("content-security-policy"),
        Some(POLICY),
        "{what}"
    );
    assert_eq!(
        visitor.header("x-content-type-options"),
        Some("nosniff"),
        "{what}"
    );
    assert_eq!(
        visitor.header("referrer-policy"),
        Some("same-origin"),
        "{what}"
    );
    let no_store = visitor.header("cache-control") == Some("no-store");
    assert_eq!(
        no_store,
        private,
        "{what}: {:?}",
        visitor.header("cache-control")
    );
}

/// A console error page: the layout's navigation around the message.
pub(crate) fn assert_error_page(visitor: &Visitor, body: &str, title: &str, message: &str) {
    let kind = visitor.header("content-type").unwrap_or_default();
    assert!(kind.starts_with("text/html"), "{title}: {kind}");
    assert!(
        body.contains("<nav") && body.contains(&format!("<h1>{title}</h1>")),
        "{body}"
    );
    assert!(body.contains(message), "{message}: {body}");
}

/// A console with tokens: every answer (a page, a redirect, an error, an asset) carries its
/// headers, and whatever a visitor with a session sees is not stored; an error the pages did
/// not render themselves (a form too large) is a console page too; a `next` that is no console
/// page (CR/LF in it) is refused before any session opens.
#[actix_rt::test(system = "crate::common::TestSystem")]
async fn answers_carry_the_console_headers_and_errors_its_page() {
    let store = TestStore::sqlite();
    let mut settings = config(&store, false, "console-headers");
    settings.server.admin_token = Some(ADMIN_TOKEN.into());
    let ax = start_ax(&settings).await;
    let mut visitor = Visitor::new(&ax);

    let (status, _, _) = visitor.get("/console/tasks").await;
    assert_eq!(status, 303);
    assert_console_headers(&visitor, "the redirect to the sign-in", false);
    let (status, _, _) = visitor.get("/console/assets/console.js").await;
    assert_eq!(status, 200);
    assert_console_headers(&visitor, "an asset", false);
    let (status, _, body) = visitor.get("/console/sign-in").await;
    assert_eq!(status, 200);
    assert!(
        !body.contains(" style=") && !body.contains("<style"),
        "nothing inline"
    );
    assert_console_headers(&visitor, "the sign-in page, which sets a cookie", true);

    // A `next` no Location may hold: 400 in the console's shape, and no session.
    let next = "/console/tasks\r\nSet-Cookie: ax_session=forged";
    let query = format!(
        "/console/sign-in?next={}",
        url::form_urlencoded::byte_serialize(next.as_bytes()).collect::<String>()
    );
    let (status, _, body) = visitor.get(&query).await;
    assert_eq!(status, 400);
    assert_error_page(
        &visitor,
        &body,
        "Bad Request",
        "next must be a page of the console",
    );
    let (status, _, body) = visitor
        .post(
            "/console/sign-in",
            &[("token", ADMIN_TOKEN), ("next", next)],
        )
        .await;
    assert_eq!(status, 400, "{body}");
    assert_error_page(
        &visitor,
        &body,
        "Bad Request",
        "next must be a page of the console",
    );
    assert!(visitor.set_cookies.is_empty(), "{:?}", visitor.set_cookies);
    assert_console_headers(&visitor, "the refused sign-in", false);
    assert_eq!(visitor.get("/console").await.0, 303, "not signed in");

    visitor.sign_in(ADMIN_TOKEN).await;
    for (path, status) in [("/console/tasks", 200), ("/console/nothing", 404)] {
        assert_eq!(visitor.get(path).await.0, status, "{path}");
        assert_console_headers(&visitor, path, true);
    }
    // The assets are the same for everyone: kept by browsers, with a session too.
    assert_eq!(visitor.get("/console/assets/console.css").await.0, 200);
    assert_eq!(
        visitor.header("cache-control"),
        Some("public, max-age=3600")
    );
    assert_eq!(visitor.header("content-security-policy"), Some(POLICY));
    let (status, _, body) = visitor.get("/console/assets/").await;
    assert_eq!(status, 404);
    assert_error_page(
        &visitor,
        &body,
        "Not Found",
        "no route for GET /console/assets/",
    );

    // A form larger than the console reads: 413, as a console page, the headers on it.
    let big = "x".repeat(300 * 1024);
    let (status, _, body) = visitor.post("/console/tasks/new", &[("name", &big)]).await;
    assert_eq!(status, 413);
    assert_error_page(
        &visitor,
        &body,
        "Payload Too Large",
        "payload reached size limit",
    );
    assert_console_headers(&visitor, "the 413", true);
    // The API's errors stay JSON.
    let (status, _, body) = visitor.get("/api/nothing").await;
    assert_eq!(status, 404);
    let error: Value = serde_json::from_str(&body).expect("a JSON error");
    assert_eq!(error["error"]["code"], "NOT_FOUND");
    assert!(visitor.header("content-security-policy").is_none());
    ax.shutdown().await;
}

/// `GET path` with `Authorization: Bearer token`: the status and how long it took.
async fn timed_bearer_get(ax: &ax_server::app::Ax, path: &str, token: &str) -> (u16, Duration) {
    let started = std::time::Instant::now();
    let response = awc::Client::builder()
        .disable_redirects()
        .timeout(Duration::from_secs(10))
        .finish()
        .get(format!("http://{}{path}", ax.addr()))
        .insert_header(("Authorization", format!("Bearer {token}")))
        .send()
        .await
        .unwrap_or_else(|err| panic!("GET {path}: {err}"));
    (response.status().as_u16(), started.elapsed())
}

/// Wrong tokens — at the sign-in, on a console page, to the API — count together: ten a
/// minute from one address are answered at once, the 11th a second later; the right token is
/// not held up.
#[actix_rt::test(system = "crate::common::TestSystem")]
async fn failed_sign_ins_slow_down() {
    let store = TestStore::sqlite();
    let mut settings = config(&store, false, "console-throttle");
    settings.server.admin_token = Some(ADMIN_TOKEN.into());
    let ax = start_ax(&settings).await;
    let mut visitor = Visitor::new(&ax);
    visitor.get("/console/sign-in").await;
    let guess = |n: usize| format!("guess-{n:02}-0123456789abcdef");
    let fast = Duration::from_millis(900);
    for n in 1..=10 {
        let (status, took) = match n % 3 {
            0 => timed_bearer_get(&ax, "/console/tasks", &guess(n)).await,
            1 => timed_bearer_get(&ax, "/api/tasks", &guess(n)).await,
            _ => {
                let started = std::time::Instant::now();
                let (status, _, body) = visitor
                    .post("/console/sign-in", &[("token", &guess(n))])
                    .await;
                assert!(body.contains("not a token of this ax"), "{body}");
                (status, started.elapsed())
            }
        };
        let want = if n % 3 == 0 { 303 } else { 401 };
        assert_eq!(status, want, "failure {n}");
        assert!(took < fast, "failure {n} took {took:?}");
    }
    let started = std::time::Instant::now();
    let (status, _, _) = visitor
        .post("/console/sign-in", &[("token", &guess(11))])
        .await;
    assert_eq!(status, 401);
    let took = started.elapsed();
    assert!(took >= Duration::from_millis(950), "the 11th took {took:?}");
    let (status, took) = timed_bearer_get(&ax, "/console/tasks", ADMIN_TOKEN).await;
    assert_eq!(status, 200);
    assert!(took < fast, "the right token took {took:?}");
    let started = std::time::Instant::now();
    visitor.sign_in(ADMIN_TOKEN).await;
    let took = started.elapsed();
    assert!(took < fast, "signing in took {took:?}");
    ax.shutdown().await;
}

/// A viewer's pages offer no change: no editor, delete, pause, trigger, backfill, cancel or
/// bulk form, where an admin's do; and the pages that only lead to a change are refused, 403
/// in the console's shape naming the token.
async fn a_viewer_is_offered_no_change(store: TestStore) {
    let mut settings = config(&store, false, "console-viewer");
    settings.server.admin_token = Some(ADMIN_TOKEN.into());
    settings.server.tokens = vec![ax_server::config::NamedToken {
        name: "wallboard".into(),
        token: VIEWER_TOKEN.into(),
        role: ax_core::security::Role::Viewer,
        groups: None,
    }];
    let ax = start_ax(&settings).await;
    let executor = Executor::start(Reply::Accepted).await;
    let mut admin = Visitor::new(&ax);
    admin.sign_in(ADMIN_TOKEN).await;
    let scene = unique_name("viewed");
    let (status, location, body) = admin
        .post(
            "/console/tasks/new",
            &[
                ("name", "watched"),
                ("scene", &scene),
                ("cron", "0 0 0 1 1 *"),
                ("timeZone", "UTC"),
                ("handlerUrl", &executor.url),
                ("enabled", "true"),
            ],
        )
        .await;
    assert_eq!(status, 303, "{body}");
    let task = location.expect("the task's page");
    let id = task_id_in(&task);
    let task = format!("/console/tasks/{id}");
    let (status, location, _) = admin.post(&format!("{task}/trigger"), &[]).await;
    assert_eq!(status, 303);
    let run = format!(
        "/console/runs/{}",
        run_in(&location.expect("the run's page"))
    );

    let mut viewer = Visitor::new(&ax);
    viewer.sign_in(VIEWER_TOKEN).await;
    let offers = [
        (
            "/console/tasks",
            vec!["/console/tasks/new", "action=\"/console/tasks/bulk\""],
        ),
        (
            task.as_str(),
            vec![
                "/edit\"",
                "/delete\"",
                "/pause\"",
                "/trigger\"",
                "/backfill\"",
            ],
        ),
        (run.as_str(), vec!["/cancel\"", "/rerun\""]),
        ("/console/scenes", vec!["/console/scenes/pause"]),
    ];
    for (page, changes) in offers {
        let (status, _, as_admin) = admin.get(page).await;
        assert_eq!(status, 200, "{page}");
        let (status, _, as_viewer) = viewer.get(page).await;
        assert_eq!(status, 200, "{page}");
        assert!(as_viewer.contains("Signed in as <strong>wallboard</strong>"));
        for change in changes {
            assert!(as_admin.contains(change), "{page} offers an admin {change}");
            assert!(
                !as_viewer.contains(change),
                "{page} offers a viewer {change}"
            );
        }
    }
    for page in [
        "/console/tasks/new".to_string(),
        format!("{task}/edit"),
        format!("{task}/delete"),
    ] {
        assert_eq!(admin.get(&page).await.0, 200, "{page}");
        let (status, _, body) = viewer.get(&page).await;
        assert_eq!(status, 403, "{page}");
        assert_error_page(
            &viewer,
            &body,
            "Forbidden",
            "The token `wallboard` is a viewer",
        );
    }
    ax.shutdown().await;
    executor.stop().await;
}

on_each_backend!(
    a_viewer_is_offered_no_change,
    sqlite: a_viewer_is_offered_no_change_on_sqlite,
    mariadb: a_viewer_is_offered_no_change_on_mysql,
    postgres: a_viewer_is_offered_no_change_on_postgres
);

/// The request id in a `/console/runs/{requestId}?…` location.
fn run_in(location: &str) -> String {
    let rest = location
        .strip_prefix("/console/runs/")
        .unwrap_or_else(|| panic!("not a run's page: {location}"));
    rest.split('?').next().unwrap_or_default().to_string()
}

/// A task as the JSON API shows it.
async fn task_of(api: &Api, id: i64) -> Value {
    let (status, task) = api.get(&format!("/api/tasks/{id}")).await;
    assert_eq!(status, 200, "task {id}: {task}");
    task
}

/// A run as the JSON API shows it.
async fn run_of(api: &Api, request_id: &str) -> Value {
    let (status, run) = api.get(&format!("/api/instances/{request_id}")).await;
    assert_eq!(status, 200, "run {request_id}: {run}");
    run
}

/// Fails unless the audit log (`GET /api/audit`) holds each `(action, target)`: an entry of
/// that action on a target naming `target`; every entry is by the anonymous actor.
async fn audited(api: &Api, expected: &[(&str, &str)]) {
    let (status, page) = api.get("/api/audit?limit=200").await;
    assert_eq!(status, 200, "{page}");
    let items = page["items"].as_array().cloned().unwrap_or_default();
    for (action, target) in expected {
        assert!(
            items.iter().any(|item| item["action"] == *action
                && item["target"].as_str().is_some_and(|t| t.contains(target))),
            "no {action} of {target} in {page}"
        );
    }
    assert!(
        items.iter().all(|item| item["actor"] == "anonymous"),
        "{page}"
    );
}

/// The delivery of run `request_id` the executor received, waiting for it.
async fn delivery_of(executor: &Executor, request_id: &str) -> crate::common::Received {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let found = executor
            .received()
            .into_iter()
            .find(|r| r.request_id == request_id);
        match found {
            Some(delivery) => return delivery,
            None if std::time::Instant::now() > deadline => {
                panic!("the executor never got {request_id}")
            }
            None => actix_rt::time::sleep(Duration::from_millis(50)).await,
        }
    }
}

/// The console's task actions, without tokens: bulk pause, resume and trigger of selected
/// tasks; a task's pause, resume and trigger with params; backfill; the delete confirmation
/// and delete; the editor's edit path with dependencies by name. The JSON API sees each
/// change, and the audit log names the anonymous actor.
async fn task_actions(store: TestStore) {
    let ax = start_ax(&config(&store, false, "console-actions")).await;
    let api = Api::new(&ax);
    let executor = Executor::start(Reply::Success).await;
    let accepting = Executor::start(Reply::Accepted).await;
    let (scene, other_scene) = (unique_name("ops"), unique_name("reports"));
    let make = |name: &str, scene: &str, cron: &str, url: &str| json!({"name": name, "scene": scene, "cron": cron, "handlerUrl": url, "maxRetry": 0});
    // Once a year: nothing fires on its own while the test runs.
    let yearly = "0 0 0 1 1 *";
    let mut ids = Vec::new();
    let names: Vec<String> = ["alpha", "beta", "gamma"].map(unique_name).to_vec();
    for name in &names {
        let task = api
            .create_task(make(name, &scene, yearly, &executor.url))
            .await;
        ids.push(task["id"].as_i64().expect("id"));
    }
    let (a, b, c) = (ids[0], ids[1], ids[2]);
    let mut visitor = Visitor::new(&ax);

    // The listing offers a checkbox a task; the selection is paused, resumed, triggered, and
    // each time the redirect goes back to the same filters.
    let listing = format!("/console/tasks?scene={scene}&status=ENABLED");
    let (status, _, body) = visitor.get(&listing).await;
    assert_eq!(status, 200);
    for id in &ids {
        assert!(
            body.contains(&format!(
                r#"class="select" type="checkbox" name="id" value="{id}""#
            )),
            "a checkbox for task {id}: {body}"
        );
    }
    assert!(body.contains("Pause selected") && body.contains("Trigger selected"));
    let back = format!("{listing}&done=triggered&n=9");
    let bulk = |action: &'static str| {
        vec![
            ("action", action.to_string()),
            ("id", a.to_string()),
            ("id", b.to_string()),
            ("back", back.clone()),
        ]
    };
    // The listing's buttons ask first: the confirmation names the tasks and changes nothing.
    let confirm = format!("/console/tasks/bulk?action=pause&id={a}&id={b}");
    let (status, _, body) = visitor.get(&confirm).await;
    assert_eq!(status, 200, "{body}");
    assert!(
        body.contains(&names[0]) && body.contains(&names[1]),
        "{body}"
    );
    for id in [a, b] {
        assert_eq!(task_of(&api, id).await["status"], "ENABLED", "task {id}");
    }
    let (status, location, _) = visitor
        .post("/console/tasks/bulk", &refs(&bulk("pause")))
        .await;
    assert_eq!(status, 303);
    let location = location.expect("back to the listing");
    assert_eq!(
        location,
        format!("{listing}&done=paused-many&n=2"),
        "the filters kept, the old notice not"
    );
    for (id, want) in [(a, "PAUSED"), (b, "PAUSED"), (c, "ENABLED")] {
        assert_eq!(task_of(&api, id).await["status"], want, "task {id}");
    }
    let (_, _, body) = visitor.get(&location).await;
    assert!(body.contains("Paused 2 tasks."), "{body}");
    let (status, location, _) = visitor
        .post("/console/tasks/bulk", &refs(&bulk("resume")))
        .await;
    assert_eq!(status, 303);
    assert_eq!(
        location.as_deref(),
        Some(format!("{listing}&done=resumed-many&n=2").as_str())
    );
    for id in [a, b] {
        assert_eq!(task_of(&api, id).await["status"], "ENABLED");
    }
    let (status, location, _) = visitor
        .post("/console/tasks/bulk", &refs(&bulk("trigger")))
        .await;
    assert_eq!(status, 303);
    assert_eq!(
        location.as_deref(),
        Some(format!("{listing}&done=triggered-many&n=2").as_str())
    );
    for id in [a, b] {
        let runs = api.wait_final(id, 1, Duration::from_secs(10)).await;
        assert_eq!(runs.len(), 1, "one manual run of task {id}: {runs:?}");
        assert_eq!(runs[0]["triggerType"], "MANUAL");
        assert_eq!(runs[0]["status"], "SUCCESS");
    }
    assert!(api.instances(c).await.is_empty(), "c was not selected");
    // No selection, an unknown action, a way back to another site.
    let (status, location, _) = visitor
        .post("/console/tasks/bulk", &[("action", "pause")])
        .await;
    assert_eq!(status, 303, "nothing selected: back to the listing");
    let location = location.expect("back to the listing");
    assert_eq!(location, "/console/tasks?done=none-selected");
    let (status, _, body) = visitor.get(&location).await;
    assert_eq!(status, 200);
    assert!(body.contains("no task was selected"), "{body}");
    let c_text = c.to_string();
    let (status, _, _) = visitor
        .post(
            "/console/tasks/bulk",
            &[("action", "delete"), ("id", &c_text)],
        )
        .await;
    assert_eq!(status, 400);
    assert_eq!(task_of(&api, c).await["status"], "ENABLED");
    let (_, location, _) = visitor
        .post(
            "/console/tasks/bulk",
            &[
                ("action", "pause"),
                ("id", &c_text),
                ("back", "https://evil.example/"),
            ],
        )
        .await;
    assert_eq!(
        location.as_deref(),
        Some("/console/tasks?done=paused-many&n=1")
    );

    // A task's own pause and resume.
    let task_page = format!("/console/tasks/{c}");
    let (status, location, _) = visitor.post(&format!("{task_page}/resume"), &[]).await;
    assert_eq!(status, 303);
    assert_eq!(location, Some(format!("{task_page}?done=resumed")));
    assert_eq!(task_of(&api, c).await["status"], "ENABLED");
    let (status, location, _) = visitor.post(&format!("{task_page}/pause"), &[]).await;
    assert_eq!(status, 303);
    assert_eq!(location, Some(format!("{task_page}?done=paused")));
    assert_eq!(task_of(&api, c).await["status"], "PAUSED");
    let (_, _, body) = visitor.get(&format!("{task_page}?done=paused")).await;
    assert!(body.contains("Task paused.") && body.contains(">Resume</button>"));
    let (_, location, _) = visitor.post(&format!("{task_page}/resume"), &[]).await;
    let (_, _, body) = visitor.get(&location.expect("the task")).await;
    assert!(body.contains("Task resumed.") && body.contains(">Pause</button>"));
    assert_eq!(task_of(&api, c).await["status"], "ENABLED");

    // A trigger with params: the run has them, and so does its delivery.
    let (status, location, _) = visitor
        .post(
            &format!("{task_page}/trigger"),
            &[("params", "{\"region\": \"eu\",\n \"batch\": 3}\n")],
        )
        .await;
    assert_eq!(status, 303);
    let location = location.expect("to the run");
    assert!(location.ends_with("?done=triggered"), "{location}");
    let request_id = run_in(&location);
    let run = run_of(&api, &request_id).await;
    assert_eq!(run["taskId"], c);
    assert_eq!(run["triggerType"], "MANUAL");
    assert_eq!(run["params"], json!({"region": "eu", "batch": 3}));
    let delivered = delivery_of(&executor, &request_id).await;
    assert_eq!(
        delivered.body["params"],
        json!({"region": "eu", "batch": 3})
    );
    let (_, _, body) = visitor.get(&location).await;
    assert!(body.contains("Run triggered."), "{body}");
    // Params that are not JSON, or not an object: refused beside the field, nothing triggered.
    let before = api.instances(c).await.len();
    for bad in ["{\"region\":", "[1, 2]"] {
        let (status, _, body) = visitor
            .post(&format!("{task_page}/trigger"), &[("params", bad)])
            .await;
        assert_eq!(status, 400, "{bad}: {body}");
        assert!(
            body.contains(r#"<span class="field-error" id="params-error">"#),
            "{bad}: {body}"
        );
        assert!(body.contains(r#"aria-describedby="params-error""#));
        assert!(
            body.contains(&bad.replace('"', "&quot;")),
            "what was typed stays: {body}"
        );
    }
    assert_eq!(api.instances(c).await.len(), before, "nothing triggered");

    // Backfill: a bad range is refused beside `to`; a good one adds a run a minute.
    let minutely = api
        .create_task(json!({
            "name": unique_name("minutely"), "scene": scene, "cron": "0 * * * * *",
            "handlerUrl": executor.url, "enabled": false,
        }))
        .await;
    let m = minutely["id"].as_i64().expect("id");
    let m_page = format!("/console/tasks/{m}");
    let hour_ago = chrono::Utc::now() - chrono::Duration::hours(1);
    let minute = |at: chrono::DateTime<chrono::Utc>| at.format("%Y-%m-%dT%H:%M").to_string();
    let (from, to) = (
        minute(hour_ago),
        minute(hour_ago + chrono::Duration::minutes(5)),
    );
    let (status, _, body) = visitor
        .post(
            &format!("{m_page}/backfill"),
            &[("from", &to), ("to", &from)],
        )
        .await;
    assert_eq!(status, 400, "{body}");
    assert!(
        body.contains(r#"<span class="field-error" id="to-error">to must be later than from"#),
        "{body}"
    );
    assert!(
        body.contains(&format!(r#"value="{to}""#)) && body.contains(&format!(r#"value="{from}""#)),
        "what was typed stays"
    );
    let tomorrow = minute(chrono::Utc::now() + chrono::Duration::days(1));
    let (status, _, body) = visitor
        .post(
            &format!("{m_page}/backfill"),
            &[("from", &from), ("to", &tomorrow)],
        )
        .await;
    assert_eq!(status, 400);
    assert!(
        body.contains(r#"id="to-error">to must not be later than now"#),
        "{body}"
    );
    let (status, _, body) = visitor
        .post(
            &format!("{m_page}/backfill"),
            &[("from", "yesterday"), ("to", &to)],
        )
        .await;
    assert_eq!(status, 400);
    assert!(body.contains(r#"id="from-error""#), "{body}");
    // Not a time, with a letter of two bytes where a plain time has its tenth: refused too.
    let (status, _, body) = visitor
        .post(
            &format!("{m_page}/backfill"),
            &[("from", "2026-12-0é 10:00:00"), ("to", &to)],
        )
        .await;
    assert_eq!(status, 400, "{body}");
    assert!(
        body.contains(r#"id="from-error">from must be an RFC3339 time"#),
        "{body}"
    );
    assert!(api.instances(m).await.is_empty(), "nothing backfilled yet");
    let (status, location, _) = visitor
        .post(
            &format!("{m_page}/backfill"),
            &[("from", &from), ("to", &to)],
        )
        .await;
    assert_eq!(status, 303);
    let location = location.expect("the task");
    assert_eq!(location, format!("{m_page}?done=backfilled&n=5"));
    let (_, _, body) = visitor.get(&location).await;
    assert!(body.contains("Backfill: 5 runs added."), "{body}");
    let runs = api.instances(m).await;
    assert_eq!(runs.len(), 5, "{runs:?}");
    for run in &runs {
        assert_eq!(run["triggerType"], "BACKFILL");
        let at = run["scheduledAt"].as_str().expect("scheduledAt");
        assert!(
            at >= from.as_str() && at < to.as_str(),
            "{at} in [{from}, {to})"
        );
        assert!(at.ends_with(":00.000Z"), "{at}: on the minute");
    }

    // The delete confirmation counts the open runs and says how they end; then the delete.
    let doomed = api
        .create_task(make(&unique_name("doomed"), &scene, yearly, &accepting.url))
        .await;
    let d = doomed["id"].as_i64().expect("id");
    let mut open = Vec::new();
    for _ in 0..2 {
        let (status, run) = api
            .post(&format!("/api/tasks/{d}/trigger"), json!({}))
            .await;
        assert_eq!(status, 201, "{run}");
        open.push(run["requestId"].as_str().expect("requestId").to_string());
    }
    for request_id in &open {
        let path = format!("/api/instances/{request_id}");
        api.wait_status(&path, "RUNNING", Duration::from_secs(10))
            .await;
    }
    let (status, _, body) = visitor.get(&format!("/console/tasks/{d}/delete")).await;
    assert_eq!(status, 200);
    assert!(body.contains("<strong>2 open runs</strong>"), "{body}");
    assert!(body.contains("end FAILED with code TASK_DELETED"), "{body}");
    assert!(body.contains(&format!(r#"action="/console/tasks/{d}/delete""#)));
    assert_eq!(task_of(&api, d).await["id"], d, "asking deletes nothing");
    // The backfilled runs are paced and delivered meanwhile: once they are all final, none is
    // open.
    api.wait_final(m, 5, Duration::from_secs(10)).await;
    let (_, _, body) = visitor.get(&format!("/console/tasks/{m}/delete")).await;
    assert!(body.contains("It has no open runs."), "{body}");
    let (status, location, _) = visitor
        .post(&format!("/console/tasks/{d}/delete"), &[])
        .await;
    assert_eq!(status, 303);
    assert_eq!(location.as_deref(), Some("/console/tasks?done=deleted"));
    assert_eq!(api.get(&format!("/api/tasks/{d}")).await.0, 404);
    for request_id in &open {
        let run = run_of(&api, request_id).await;
        assert_eq!(
            (&run["status"], &run["code"]),
            (&json!("FAILED"), &json!("TASK_DELETED")),
            "{run}"
        );
    }
    let (status, _, _) = visitor.get(&format!("/console/tasks/{d}")).await;
    assert_eq!(status, 404);

    // The editor's edit path: the form shows the task; a new cron is saved; upstreams by name
    // (in the scene, or scene/name) resolve to their ids; an unknown name is refused beside
    // the field, and nothing changes.
    let upstream = unique_name("upstream");
    let elsewhere = api
        .create_task(make(&upstream, &other_scene, yearly, &executor.url))
        .await;
    let e = elsewhere["id"].as_i64().expect("id");
    let edit = format!("/console/tasks/{b}/edit");
    let (status, _, form) = visitor.get(&edit).await;
    assert_eq!(status, 200);
    assert!(form.contains(&format!(r#"value="{}""#, names[1])), "{form}");
    assert!(form.contains(&format!(r#"value="{yearly}""#)));
    assert!(form.contains(&format!(r#"action="{edit}""#)));
    let fields = |depends_on: &str| {
        vec![
            ("name", names[1].clone()),
            ("scene", scene.clone()),
            ("cron", "0 30 * * * *".to_string()),
            ("timeZone", "UTC".to_string()),
            ("handlerUrl", executor.url.clone()),
            ("params", r#"{"edited": true}"#.to_string()),
            ("maxRetry", "2".to_string()),
            ("timeoutMs", "30000".to_string()),
            ("overlap", "ALLOW".to_string()),
            ("jitterSecs", "0".to_string()),
            ("enabled", "true".to_string()),
            ("dependsOn", depends_on.to_string()),
        ]
    };
    let both = format!("{}\n{other_scene}/{upstream}\n", names[0]);
    let (status, location, body) = visitor.post(&edit, &refs(&fields(&both))).await;
    assert_eq!(status, 303, "{body}");
    assert_eq!(location, Some(format!("/console/tasks/{b}?done=saved")));
    let saved = task_of(&api, b).await;
    assert_eq!(saved["cron"], "0 30 * * * *");
    assert_eq!(saved["maxRetry"], 2);
    assert_eq!(saved["params"], json!({"edited": true}));
    assert_eq!(saved["dependsOn"], json!([a, e]), "{saved}");
    let (_, _, form) = visitor.get(&edit).await;
    assert!(
        form.contains(&format!(
            "{}\n{other_scene}/{upstream}</textarea>",
            names[0]
        )),
        "the upstreams by name: {form}"
    );
    let (status, _, body) = visitor
        .post(&edit, &refs(&fields("nobody-is-called-this")))
        .await;
    assert_eq!(status, 400, "{body}");
    assert!(
        body.contains(r#"<span class="field-error" id="dependsOn-error">no task is named `nobody-is-called-this`"#),
        "{body}"
    );
    assert!(
        body.contains("nobody-is-called-this</textarea>"),
        "what was typed stays"
    );
    assert_eq!(
        task_of(&api, b).await["dependsOn"],
        json!([a, e]),
        "unchanged"
    );

    // A form opened before the task changed through the API: its save is refused, the page
    // says so and shows the task as it is now, and the API's change stays.
    let (_, _, form) = visitor.get(&edit).await;
    let opened = version_of(&form);
    assert_eq!(opened, task_of(&api, b).await["version"], "{form}");
    let (status, changed) = api
        .call(
            "PATCH",
            &format!("/api/tasks/{b}"),
            Some(json!({"timeoutMs": 45678, "params": {"from": "api"}})),
        )
        .await;
    assert_eq!(status, 200, "{changed}");
    let mut edited = fields(&both);
    edited.push(("version", opened.to_string()));
    if let Some(retries) = edited.iter_mut().find(|(name, _)| *name == "maxRetry") {
        retries.1 = "5".into();
    }
    let (status, _, body) = visitor.post(&edit, &refs(&edited)).await;
    assert_eq!(status, 412, "{body}");
    assert!(body.contains("changed since you opened it"), "{body}");
    assert!(body.contains(r#"value="45678""#), "the new timeout: {body}");
    assert!(
        body.contains("&quot;from&quot;: &quot;api&quot;"),
        "the new params: {body}"
    );
    assert!(
        body.contains("<code>maxRetry</code>: <code>5</code>"),
        "the edit sent: {body}"
    );
    let now = task_of(&api, b).await;
    assert_eq!(
        (&now["timeoutMs"], &now["params"]),
        (&json!(45678), &json!({"edited": true, "from": "api"}))
    );
    assert_eq!(
        (&now["maxRetry"], &now["version"]),
        (&json!(2), &changed["version"])
    );
    // Sent again from the page shown, on the version it carries: saved.
    assert_eq!(version_of(&body), changed["version"]);
    let mut again = edited.clone();
    if let Some(version) = again.iter_mut().find(|(name, _)| *name == "version") {
        version.1 = changed["version"].to_string();
    }
    let (status, _, body) = visitor.post(&edit, &refs(&again)).await;
    assert_eq!(status, 303, "{body}");
    assert_eq!(task_of(&api, b).await["maxRetry"], 5);

    let in_scene = format!("({scene}/");
    audited(
        &api,
        &[
            ("task.pause", &in_scene),
            ("task.resume", &in_scene),
            ("task.trigger", &in_scene),
            ("task.backfill", &format!("task {m} ")),
            ("task.delete", &format!("task {d} ")),
            ("task.update", &format!("task {b} ")),
        ],
    )
    .await;
    ax.shutdown().await;
    executor.stop().await;
    accepting.stop().await;
}

on_each_backend!(
    task_actions,
    sqlite: task_actions_on_sqlite,
    mariadb: task_actions_on_mysql,
    postgres: task_actions_on_postgres
);

/// A run cancelled from its page (and a second cancel refused), run again with its params;
/// a scene paused and resumed, the notices counting its tasks; all in the audit log by the
/// anonymous actor.
async fn run_and_scene_actions(store: TestStore) {
    let ax = start_ax(&config(&store, false, "console-runs")).await;
    let api = Api::new(&ax);
    // Answers 202 and never calls back: a run stays RUNNING until it is cancelled.
    let accepting = Executor::start(Reply::Accepted).await;
    let scene = unique_name("batch");
    let mut ids = Vec::new();
    for enabled in [true, true, false] {
        let task = api
            .create_task(json!({
                "name": unique_name("job"), "scene": scene, "cron": "0 0 0 1 1 *",
                "handlerUrl": accepting.url, "enabled": enabled,
            }))
            .await;
        ids.push(task["id"].as_i64().expect("id"));
    }
    let mut visitor = Visitor::new(&ax);
    // A page with a form, for its CSRF token (the scenes page links to confirmations).
    visitor
        .get(&format!("/console/scenes/pause?scene={scene}"))
        .await;

    // A run with its own params, open while the executor works on it: cancelled from its page.
    let (status, location, _) = visitor
        .post(
            &format!("/console/tasks/{}/trigger", ids[0]),
            &[("params", r#"{"day": "2026-11-30"}"#)],
        )
        .await;
    assert_eq!(status, 303);
    let request_id = run_in(&location.expect("to the run"));
    let run_api = format!("/api/instances/{request_id}");
    api.wait_status(&run_api, "RUNNING", Duration::from_secs(10))
        .await;
    let run_page = format!("/console/runs/{request_id}");
    let (status, _, body) = visitor.get(&run_page).await;
    assert_eq!(status, 200);
    assert!(
        body.contains(&format!(r#"action="{run_page}/cancel""#)),
        "{body}"
    );
    assert!(body.contains("Cancel run") && body.contains("Run again"));
    let (status, location, _) = visitor.post(&format!("{run_page}/cancel"), &[]).await;
    assert_eq!(status, 303);
    assert_eq!(location, Some(format!("{run_page}?done=cancelled")));
    assert_eq!(run_of(&api, &request_id).await["status"], "CANCELLED");
    let (_, _, body) = visitor.get(&format!("{run_page}?done=cancelled")).await;
    assert!(body.contains("Run cancelled.") && body.contains("CANCELLED"));
    assert!(!body.contains("Cancel run"), "a final run offers no cancel");
    // Cancelling again: the API's 409, as a page.
    let (status, _, body) = visitor.post(&format!("{run_page}/cancel"), &[]).await;
    assert_eq!(status, 409, "{body}");
    assert!(
        body.contains("<main") && body.contains("role=\"alert\""),
        "{body}"
    );
    assert_eq!(run_of(&api, &request_id).await["status"], "CANCELLED");

    // Run again: a new manual run of the task with the same params.
    let (status, location, _) = visitor.post(&format!("{run_page}/rerun"), &[]).await;
    assert_eq!(status, 303);
    let location = location.expect("to the new run");
    assert!(location.ends_with("?done=triggered"), "{location}");
    let again = run_in(&location);
    assert_ne!(again, request_id);
    let rerun = run_of(&api, &again).await;
    assert_eq!(rerun["taskId"], ids[0]);
    assert_eq!(rerun["triggerType"], "MANUAL");
    assert_eq!(rerun["params"], json!({"day": "2026-11-30"}));
    let delivered = delivery_of(&accepting, &again).await;
    assert_eq!(delivered.body["params"], json!({"day": "2026-11-30"}));

    // The scene: paused (its two enabled tasks stop firing), its own state beside its tasks';
    // resumed, the task paused by itself stays paused.
    let states = || async {
        let mut states = Vec::new();
        for id in &ids {
            let task = task_of(&api, *id).await;
            states.push((task["status"].clone(), task["scenePaused"].clone()));
        }
        states
    };
    let (status, location, _) = visitor
        .post("/console/scenes/pause", &[("scene", &scene)])
        .await;
    assert_eq!(status, 303);
    let location = location.expect("the scenes");
    assert_eq!(location, "/console/scenes?done=scene-paused&n=2");
    let (_, _, body) = visitor.get(&location).await;
    assert!(
        body.contains("Scene paused: 2 tasks stop firing."),
        "{body}"
    );
    let resume_button = format!(r#"aria-label="Resume scene {scene}""#);
    assert!(body.contains(&resume_button), "{body}");
    assert!(!body.contains(&format!(r#"aria-label="Pause scene {scene}""#)));
    let (enabled, paused) = (json!("ENABLED"), json!("PAUSED"));
    let (yes, no) = (json!(true), json!(false));
    assert_eq!(
        states().await,
        [
            (enabled.clone(), yes.clone()),
            (enabled.clone(), yes.clone()),
            (paused.clone(), yes)
        ]
    );
    let (_, _, task_page) = visitor.get(&format!("/console/tasks/{}", ids[0])).await;
    assert!(task_page.contains("SCENE PAUSED"), "{task_page}");
    let (_, _, listing) = visitor.get(&format!("/console/tasks?scene={scene}")).await;
    assert!(listing.contains("SCENE PAUSED"), "{listing}");
    let (status, location, _) = visitor
        .post("/console/scenes/resume", &[("scene", &scene)])
        .await;
    assert_eq!(status, 303);
    let location = location.expect("the scenes");
    assert_eq!(location, "/console/scenes?done=scene-resumed&n=2");
    let (_, _, body) = visitor.get(&location).await;
    assert!(
        body.contains("Scene resumed: 2 tasks fire again."),
        "{body}"
    );
    assert_eq!(
        states().await,
        [
            (enabled.clone(), no.clone()),
            (enabled, no.clone()),
            (paused, no)
        ]
    );
    let (status, _, _) = visitor
        .post("/console/scenes/pause", &[("scene", "")])
        .await;
    assert_eq!(status, 400, "a scene is needed");

    let scene_target = format!("scene {scene}");
    audited(
        &api,
        &[
            ("task.trigger", &format!("task {} ", ids[0])),
            ("run.cancel", &format!("run {request_id} ")),
            ("scene.pause", &scene_target),
            ("scene.resume", &scene_target),
        ],
    )
    .await;
    ax.shutdown().await;
    accepting.stop().await;
}

on_each_backend!(
    run_and_scene_actions,
    sqlite: run_and_scene_actions_on_sqlite,
    mariadb: run_and_scene_actions_on_mysql,
    postgres: run_and_scene_actions_on_postgres
);

/// Labels in the console: the tasks filter (`label=KEY=VALUE`, a bad one beside its input), a
/// task's page, and the editor (one `key=value` a line; a bad label beside the field, nothing
/// changed).
async fn labels_in_the_console(store: TestStore) {
    let ax = start_ax(&config(&store, false, "console-labels")).await;
    let api = Api::new(&ax);
    let scene = unique_name("labelled");
    let make = |name: &str| {
        json!({"name": name, "scene": scene, "cron": "0 0 0 1 1 *",
            "handlerUrl": "http://127.0.0.1:9/run"})
    };
    let (billing, plain) = (unique_name("billing"), unique_name("plain"));
    let mut body = make(&billing);
    body["labels"] = json!({"team": "billing"});
    let a = api.create_task(body).await["id"].as_i64().expect("id");
    let b = api.create_task(make(&plain)).await["id"]
        .as_i64()
        .expect("id");
    let mut visitor = Visitor::new(&ax);

    let (status, _, listing) = visitor.get("/console/tasks?label=team%3Dbilling").await;
    assert_eq!(status, 200, "{listing}");
    assert!(
        listing.contains(&billing) && !listing.contains(&plain),
        "{listing}"
    );
    assert!(listing.contains(r#"name="label""#) && listing.contains(r#"value="team=billing""#));
    let (status, _, refused) = visitor.get("/console/tasks?label=team").await;
    assert_eq!(status, 400, "{refused}");
    assert!(
        refused
            .contains(r#"<span class="field-error" id="label-error">a label filter is KEY=VALUE"#),
        "{refused}"
    );
    let (_, _, task_page) = visitor.get(&format!("/console/tasks/{a}")).await;
    assert!(
        task_page.contains("<code>team=billing</code>"),
        "{task_page}"
    );

    let edit = format!("/console/tasks/{b}/edit");
    let (status, _, form) = visitor.get(&edit).await;
    assert_eq!(status, 200);
    assert!(form.contains(r#"name="labels""#), "{form}");
    let fields = |labels: &str| {
        vec![
            ("name", plain.clone()),
            ("scene", scene.clone()),
            ("cron", "0 0 0 1 1 *".to_string()),
            ("timeZone", "UTC".to_string()),
            ("handlerUrl", "http://127.0.0.1:9/run".to_string()),
            ("params", "{}".to_string()),
            ("maxRetry", "3".to_string()),
            ("timeoutMs", "30000".to_string()),
            ("overlap", "ALLOW".to_string()),
            ("jitterSecs", "0".to_string()),
            ("enabled", "true".to_string()),
            ("labels", labels.to_string()),
        ]
    };
    let (status, location, body) = visitor
        .post(&edit, &refs(&fields("team=ops\ntier=2\n")))
        .await;
    assert_eq!(status, 303, "{body}");
    assert_eq!(location, Some(format!("/console/tasks/{b}?done=saved")));
    assert_eq!(
        task_of(&api, b).await["labels"],
        json!({"team": "ops", "tier": "2"})
    );
    let (_, _, form) = visitor.get(&edit).await;
    assert!(form.contains("team=ops\ntier=2</textarea>"), "{form}");
    let (status, _, body) = visitor.post(&edit, &refs(&fields("Team=ops"))).await;
    assert_eq!(status, 400, "{body}");
    assert!(
        body.contains(r#"<span class="field-error" id="labels-error">a label key must be"#),
        "{body}"
    );
    assert!(body.contains("Team=ops</textarea>"), "what was typed stays");
    assert_eq!(
        task_of(&api, b).await["labels"],
        json!({"team": "ops", "tier": "2"}),
        "unchanged"
    );
    ax.shutdown().await;
}

on_each_backend!(
    labels_in_the_console,
    sqlite: labels_in_the_console_on_sqlite,
    mariadb: labels_in_the_console_on_mysql,
    postgres: labels_in_the_console_on_postgres
);

/// The executors page while `wanted` is not on it yet (the dispatchers' counts settle as runs
/// end), for up to 10 s; then the page as it is.
async fn executors_page_showing(ax: &ax_server::app::Ax, wanted: &[&str]) -> String {
    let mut html = String::new();
    for _ in 0..100 {
        html = page(ax, "/console/executors").await;
        if wanted.iter().all(|text| html.contains(text)) {
            break;
        }
        actix_rt::time::sleep(Duration::from_millis(100)).await;
    }
    html
}

/// Executor groups in the console: the executors page lists each group with its members and
/// their health here, a task's page names its group (linked to it) instead of a handler URL,
/// and a run's page names the member that served it.
async fn executors_in_the_console(store: TestStore) {
    let ax = start_ax(&config(&store, false, "console-executors")).await;
    let api = Api::new(&ax);
    let empty = page(&ax, "/console/executors").await;
    assert!(
        empty.contains("No executor groups yet") && empty.contains("PUT /api/executors/{group}"),
        "{empty}"
    );
    assert!(empty.contains(r#"href="/console/executors" aria-current="page">Executors"#));

    let live = Executor::start(Reply::Success).await;
    let refused = refusing_base();
    let group = unique_name("billing");
    let (status, created) = api
        .call(
            "PUT",
            &format!("/api/executors/{group}"),
            Some(
                json!({"routing": "FAILOVER", "maxInFlight": 8, "members": [refused, live.base()]}),
            ),
        )
        .await;
    assert_eq!(status, 201, "{created}");
    let task = api
        .create_task(
            json!({"name": unique_name("reconcile"), "cron": "* * * * * *",
            "executor": {"group": group, "path": "/run"}, "maxRetry": 0}),
        )
        .await;
    let id = task["id"].as_i64().expect("id");
    let run = first_final_run(&api, id).await;
    assert_eq!(run["status"], "SUCCESS", "{run}");
    let request_id = run["requestId"].as_str().expect("requestId");
    // Three refusals in a row cool the refused member down.
    live.wait_for(4, Duration::from_secs(10)).await;
    let registered = refusing_base();
    let (status, joined) = api
        .post(
            &format!("/api/executors/{group}/members"),
            json!({"url": registered, "capacity": 3}),
        )
        .await;
    assert_eq!(status, 201, "{joined}");

    let executors = executors_page_showing(&ax, &["UNHEALTHY", "100.0 %"]).await;
    assert!(
        executors.contains(&format!(r#"<section id="group-{group}""#)),
        "{executors}"
    );
    assert!(executors.contains("FAILOVER") && executors.contains("8 per member"));
    for url in [&refused, &live.base(), &registered] {
        assert!(executors.contains(&format!("<code>{url}</code>")), "{url}");
    }
    assert!(executors.contains(r#"<span class="badge bad">UNHEALTHY</span>"#));
    assert!(executors.contains(r#"<span class="badge good">HEALTHY</span>"#));
    assert!(
        executors.contains("100.0 %") && executors.contains("0.0 %"),
        "the refused member's error rate and the live one's: {executors}"
    );
    assert!(executors.contains("defined") && executors.contains("registered"));

    let detail = page(&ax, &format!("/console/tasks/{id}")).await;
    assert!(detail.contains("Executor group"), "{detail}");
    assert!(detail.contains(&format!(
        r#"<a href="/console/executors#group-{group}">{group}</a>"#
    )));
    assert!(detail.contains("<code>/run</code>") && detail.contains("the group's"));
    assert!(!detail.contains("Handler URL"));

    let run_page = page(&ax, &format!("/console/runs/{request_id}")).await;
    assert!(run_page.contains("Executor member"), "{run_page}");
    assert!(run_page.contains(&format!("<code>{}</code>", live.base())));

    ax.shutdown().await;
    live.stop().await;
}

on_each_backend!(
    executors_in_the_console,
    sqlite: executors_in_the_console_on_sqlite,
    mariadb: executors_in_the_console_on_mysql,
    postgres: executors_in_the_console_on_postgres
);

/// Waits until `GET /api/alerts{query}` lists `n` alerts of which one matches `wanted`;
/// returns them.
async fn alerts_listed(
    api: &Api,
    query: &str,
    n: usize,
    wanted: impl Fn(&Value) -> bool,
) -> Vec<Value> {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let (status, page) = api.get(&format!("/api/alerts{query}")).await;
        assert_eq!(status, 200, "{page}");
        let items = page["items"].as_array().cloned().unwrap_or_default();
        if items.len() >= n && items.iter().any(&wanted) {
            return items;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no {n} alerts as wanted for {query}: {page}"
        );
        actix_rt::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The link of a page's "Next page", as a browser follows it.
fn next_page_link(html: &str) -> Option<String> {
    let end = html.find("\" rel=\"next\"")?;
    let start = html[..end].rfind("href=\"")? + "href=\"".len();
    Some(html[start..end].replace("&amp;", "&"))
}

/// The rows of a page's alert table (each starts with its time).
fn alert_rows(html: &str) -> usize {
    html.matches("<tr><td><time").count()
}

async fn alerts_in_the_console(store: TestStore) {
    let hook = Executor::start(Reply::Success).await;
    let mut config = with_webhook(
        config(&store, false, "console-alerts"),
        format!("{}hook", hook.base()),
    );
    // A short silence, so that alerts telling folded repeats come within the test.
    config.alerts.default_rule.silence_secs = 2;
    let ax = start_ax(&config).await;
    let api = Api::new(&ax);
    let none_yet = page(&ax, "/console/alerts").await;
    assert!(none_yet.contains("No alerts yet."), "{none_yet}");
    assert!(none_yet.contains(r#"<a href="/console/alerts" aria-current="page">Alerts</a>"#));

    // Six failing tasks in one scene, a succeeding one in another.
    let failing = Executor::start(Reply::FailNoRetry).await;
    let succeeding = Executor::start(Reply::Success).await;
    let (scene, quiet) = (unique_name("billing"), unique_name("quiet"));
    let mut ids = Vec::new();
    for _ in 0..6 {
        let task = api
            .create_task(json!({"name": unique_name("nightly"), "scene": scene,
                "cron": "* * * * * *", "handlerUrl": failing.url, "maxRetry": 0}))
            .await;
        ids.push(task["id"].as_i64().expect("id"));
    }
    let quiet_task = api
        .create_task(json!({"name": unique_name("fine"), "scene": quiet,
            "cron": "* * * * * *", "handlerUrl": succeeding.url}))
        .await;
    let (id, quiet_id) = (ids[0], quiet_task["id"].as_i64().expect("id"));
    // More than a page of alerts, one of them telling folded repeats; then the scene is
    // paused, so the pages hold still.
    let told_folded = |alert: &Value| alert["folded"].as_i64() > Some(0);
    let sent = alerts_listed(&api, &format!("?task={id}&status=sent"), 1, told_folded).await;
    let scene_query = format!("?scene={scene}&limit=51");
    alerts_listed(&api, &scene_query, 51, |_| true).await;
    let (status, _) = api
        .post(&format!("/api/scenes/{scene}/pause"), json!({}))
        .await;
    assert_eq!(status, 200);
    let request_id = sent[0]["requestId"].as_str().expect("requestId");

    // The API's scene filter.
    let (_, of_scene) = api.get(&format!("/api/alerts?scene={scene}")).await;
    let items = of_scene["items"].as_array().expect("items");
    assert!(!items.is_empty() && items.iter().all(|a| a["scene"] == scene.as_str()));
    let (_, of_quiet) = api.get(&format!("/api/alerts?scene={quiet}")).await;
    assert_eq!(of_quiet["items"], json!([]), "{of_quiet}");
    for (query, field) in [("scene=a%20b", "scene"), ("task=x", "task")] {
        let (status, bad) = api.get(&format!("/api/alerts?{query}")).await;
        assert_eq!((status, bad["error"]["field"].as_str()), (400, Some(field)));
    }

    // The alerts page: a task's sent alerts, each row's event, subject linking to its task and
    // run, channel, status, tries and the repeats it tells.
    let listed = page(&ax, &format!("/console/alerts?task={id}&status=sent")).await;
    for part in [
        r#"<span class="badge bad">FAILED</span> <code>FATAL</code>"#,
        &format!(r#"href="/console/tasks/{id}""#),
        &format!(r#"href="/console/runs/{request_id}""#),
        "<td>ops-hook</td>",
        r#"<span class="badge good">sent</span>"#,
        r#"<td class="num">1</td>"#,
        " folded since <time datetime=",
        r#"<option value="sent" selected>sent</option>"#,
        &format!(r#"value="{id}""#),
    ] {
        assert!(listed.contains(part), "{part}: {listed}");
    }
    assert!(!listed.contains(r#"<span class="badge idle">folded</span>"#));
    let folded = page(&ax, &format!("/console/alerts?task={id}&status=folded")).await;
    assert!(folded.contains(r#"<span class="badge idle">folded</span>"#));
    assert!(!folded.contains(r#"<span class="badge good">sent</span>"#));
    for other in [format!("scene={quiet}"), format!("task={quiet_id}")] {
        let none = page(&ax, &format!("/console/alerts?{other}")).await;
        assert!(none.contains("No alerts match these filters."), "{other}");
    }

    // Paged by the API's cursor, the filters kept.
    let first = page(&ax, &format!("/console/alerts?scene={scene}")).await;
    assert_eq!(alert_rows(&first), 50);
    assert!(!first.contains("First page"));
    let next = next_page_link(&first).expect("a next page");
    assert!(
        next.starts_with(&format!("/console/alerts?scene={scene}&cursor=")),
        "{next}"
    );
    let second = page(&ax, &next).await;
    assert!(alert_rows(&second) >= 1 && second.contains("First page"));
    assert_ne!(first, second);

    // Bad input: 400, the message beside the field it names.
    for (query, error) in [
        ("status=lost", "status-error"),
        ("task=x", "task-error"),
        ("scene=a%20b", "scene-error"),
    ] {
        let bad = fetch(&ax, &format!("/console/alerts?{query}"), "x").await;
        assert_eq!(bad.status, 400, "{query}");
        assert!(
            bad.body.contains(&format!(r#"id="{error}""#)),
            "{query}: {}",
            bad.body
        );
    }
    let damaged = fetch(&ax, "/console/alerts?cursor=nonsense", "x").await;
    assert_eq!(damaged.status, 400);
    assert!(
        damaged.body.contains("this page link is damaged") && damaged.body.contains("First page")
    );

    // A task's page: the rule it follows and where it comes from, its last alerts.
    let task_page = page(&ax, &format!("/console/tasks/{id}")).await;
    for part in [
        "<h2 id=\"alerts-heading\">Alerts</h2>",
        "<strong>the default rule</strong>",
        "<code>ops-hook</code>",
        "<dd>2 s</dd>",
        &format!(r#"href="/console/alerts?task={id}""#),
        &format!(r#"href="/console/scenes/{scene}""#),
    ] {
        assert!(task_page.contains(part), "{part}: {task_page}");
    }
    assert!(alert_rows(&task_page) >= 1 && alert_rows(&task_page) <= 10);

    // A scene's page, reached from the scenes page: its counts, its rule, its last alerts.
    let scenes = page(&ax, "/console/scenes").await;
    assert!(scenes.contains(&format!(r#"<a href="/console/scenes/{scene}">{scene}</a>"#)));
    let scene_page = page(&ax, &format!("/console/scenes/{scene}")).await;
    for part in [
        &format!("<h1>Scene {scene}</h1>"),
        &format!(r#"<a href="/console/tasks?scene={scene}">6</a>"#),
        "<strong>the default rule</strong>",
        &format!(r#"href="/console/alerts?scene={scene}""#),
    ] {
        assert!(scene_page.contains(part), "{part}: {scene_page}");
    }
    assert_eq!(alert_rows(&scene_page), 10);
    let quiet_page = page(&ax, &format!("/console/scenes/{quiet}")).await;
    assert!(quiet_page.contains("No alerts yet."));
    let own = json!({"events": ["FAILED"], "channels": ["ops-hook"], "threshold": 2,
        "windowSecs": 60, "silenceSecs": 600});
    let (status, set) = api
        .call("PUT", &format!("/api/scenes/{scene}/alerts"), Some(own))
        .await;
    assert_eq!(status, 200, "{set}");
    let scene_page = page(&ax, &format!("/console/scenes/{scene}")).await;
    for part in [
        "<strong>the scene's own rule</strong>",
        "<dd><code>FAILED</code></dd>",
        "<dd>2 events of one kind within the window</dd>",
        "<dd>60 s</dd>",
        "<dd>600 s</dd>",
    ] {
        assert!(scene_page.contains(part), "{part}: {scene_page}");
    }
    let task_page = page(&ax, &format!("/console/tasks/{id}")).await;
    assert!(task_page.contains("<strong>the scene's own rule</strong>"));

    ax.shutdown().await;
    for executor in [hook, failing, succeeding] {
        executor.stop().await;
    }
}

on_each_backend!(
    alerts_in_the_console,
    sqlite: alerts_in_the_console_on_sqlite,
    mariadb: alerts_in_the_console_on_mysql,
    postgres: alerts_in_the_console_on_postgres
);

/// A save refused for several fields shows each error beside its field and a summary at the
/// top linking to each; what was typed stays and nothing is saved. The time zone is offered
/// from every zone ax takes, on the editor only.
#[actix_rt::test(system = "crate::common::TestSystem")]
async fn the_editor_shows_every_refused_field_at_once() {
    let store = TestStore::sqlite();
    let ax = start_ax(&config(&store, false, "console-editor-errors")).await;
    let api = Api::new(&ax);
    let mut visitor = Visitor::new(&ax);
    let (status, _, form) = visitor.get("/console/tasks/new").await;
    assert_eq!(status, 200, "{form}");
    assert!(
        form.contains(r#"list="timeZone-choices""#)
            && form.contains(r#"<option value="Europe/Berlin">"#)
            && form.contains(r#"<option value="America/Argentina/Buenos_Aires">"#),
        "{form}"
    );
    let (_, _, listing) = visitor.get("/console/tasks").await;
    assert!(
        !listing.contains("<datalist"),
        "the zones on the editor only"
    );

    let name = unique_name("refused");
    let fields = [
        ("name", name.as_str()),
        ("scene", "default"),
        ("cron", "61 * * * * *"),
        ("timeZone", "Europe/Berlin"),
        ("handlerUrl", "http://127.0.0.1:9/run"),
        ("params", "{nope"),
        ("maxRetry", "11"),
        ("timeoutMs", "30000"),
        ("overlap", "ALLOW"),
        ("jitterSecs", "0"),
        ("enabled", "true"),
        ("labels", "team=billing\nTeam=ops"),
    ];
    let (status, _, body) = visitor.post("/console/tasks/new", &fields).await;
    assert_eq!(status, 400, "{body}");
    let expected = [
        ("cron", "61"),
        ("params", "params is not valid JSON"),
        ("maxRetry", "maxRetry must be an integer from 0 to 10"),
        ("labels", "a label key must be"),
    ];
    let summary = body
        .split_once(r#"id="form-error""#)
        .and_then(|(_, rest)| rest.split_once("</div>"))
        .map(|(summary, _)| summary)
        .unwrap_or_else(|| panic!("no summary: {body}"));
    assert!(summary.contains("change these 4 fields"), "{summary}");
    let mut listed = Vec::new();
    for (field, words) in expected {
        let beside = format!(r#"<span class="field-error" id="{field}-error">"#);
        let error = body
            .split_once(&beside)
            .and_then(|(_, rest)| rest.split_once("</span>"))
            .map(|(error, _)| error)
            .unwrap_or_else(|| panic!("no error beside {field}: {body}"));
        assert!(error.contains(words), "{field}: {error}");
        let described = [
            format!(r#"aria-describedby="{field}-error""#),
            format!(r#"aria-describedby="{field}-hint {field}-error""#),
        ];
        assert!(
            described.iter().any(|d| body.contains(d)),
            "{field}: {body}"
        );
        let link = format!(r##"<a href="#{field}">"##);
        listed.push(
            summary
                .find(&link)
                .unwrap_or_else(|| panic!("{field}: {summary}")),
        );
    }
    assert!(listed.windows(2).all(|w| w[0] < w[1]), "in field order");
    assert_eq!(summary.matches("<li>").count(), 4, "{summary}");
    assert!(
        body.contains(r#"value="61 * * * * *""#),
        "what was typed stays"
    );
    assert!(body.contains("{nope</textarea>"), "what was typed stays");
    let (_, listing) = api.get("/api/tasks?limit=500").await;
    assert!(!listing.to_string().contains(&name), "nothing saved");
    ax.shutdown().await;
}
