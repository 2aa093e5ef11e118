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

/// A visitor of the console over plain HTTP: keeps its cookies, reads each page's CSRF
/// token, and sends forms as a browser would.
struct Visitor {
    base: String,
    cookies: std::collections::BTreeMap<String, String>,
    /// The `Set-Cookie` headers of the last response.
    set_cookies: Vec<String>,
    csrf: Option<String>,
}

impl Visitor {
    fn new(ax: &ax::app::Ax) -> Visitor {
        Visitor {
            base: format!("http://{}", ax.addr()),
            cookies: Default::default(),
            set_cookies: Vec::new(),
            csrf: None,
        }
    }

    /// GET or POST (form fields, the page's CSRF token added unless `csrf` says otherwise);
    /// no redirect followed. Returns the status, the `Location` and the body.
    async fn send(
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

    async fn get(&mut self, path: &str) -> (u16, Option<String>, String) {
        self.send("GET", path, &[], None).await
    }

    async fn post(&mut self, path: &str, fields: &[(&str, &str)]) -> (u16, Option<String>, String) {
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

/// The id in a `/console/tasks/{id}?…` location.
fn task_id_in(location: &str) -> i64 {
    location
        .trim_start_matches("/console/tasks/")
        .split('?')
        .next()
        .and_then(|id| id.parse().ok())
        .unwrap_or_else(|| panic!("no task id in {location}"))
}

const ADMIN_TOKEN: &str = "admin-token-for-the-console";
const VIEWER_TOKEN: &str = "viewer-token-for-the-console";

async fn signing_in_sessions_and_csrf(store: TestStore) {
    let mut settings = config(&store, false, "console-token");
    settings.server.admin_token = Some(ADMIN_TOKEN.into());
    settings.server.tokens = vec![ax::config::NamedToken {
        name: "ops-viewer".into(),
        token: VIEWER_TOKEN.into(),
        role: ax::security::Role::Viewer,
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

#[actix_rt::test]
async fn signing_in_on_sqlite() {
    signing_in_sessions_and_csrf(TestStore::sqlite()).await;
}

#[actix_rt::test]
async fn signing_in_on_mysql() {
    signing_in_sessions_and_csrf(TestStore::mysql()).await;
}
