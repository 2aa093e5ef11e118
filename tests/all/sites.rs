//! Requests from other sites and for other hosts: a change sent by a page of another site is
//! refused (403) token or not, a body must say it is JSON (415), a `Host` ax does not answer
//! to is refused without a token (421), the console's tokenless CSRF cookie cannot be planted,
//! and a console session ends with the token it signed in with.

use std::net::SocketAddr;
use std::time::Duration;

use serde_json::{json, Value};

use crate::common::{
    config, on_each_backend, raw_exchange, start_ax, unique_name, Api, AxProcess, Executor, Reply,
};
use crate::common::{TestStore, SECRET};

/// Sends one request as written: `Host` is ax's own address unless `headers` gives one, and a
/// `Content-Length` goes with a body only (as curl sends a body-less POST). Answers the status
/// and the JSON body.
async fn send(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (u16, Value) {
    let mut head = format!("{method} {path} HTTP/1.1\r\nConnection: close\r\n");
    if !headers
        .iter()
        .any(|(name, _)| name.eq_ignore_ascii_case("host"))
    {
        head.push_str(&format!("Host: {addr}\r\n"));
    }
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    if !body.is_empty() {
        head.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    let request = format!("{head}\r\n{body}").into_bytes();
    let (status, _, reply) = raw_exchange(addr, request).await;
    (status, reply)
}

/// Asserts an error reply: its status, code and the field (header) it names.
fn refused(what: &str, (status, reply): &(u16, Value), want: (u16, &str, &str)) {
    assert_eq!(
        (*status, &reply["error"]["code"], &reply["error"]["field"]),
        (want.0, &json!(want.1), &json!(want.2)),
        "{what}: {reply}"
    );
}

fn task(scene: &str, handler: &str) -> Value {
    json!({"name": unique_name("t"), "scene": scene, "cron": "0 0 0 1 1 *", "handlerUrl": handler,
        "timeoutMs": 60_000})
}

/// The headers of `a`, then those of `b`.
fn joined<'a>(a: &[(&'a str, &'a str)], b: &[(&'a str, &'a str)]) -> Vec<(&'a str, &'a str)> {
    a.iter().chain(b).copied().collect()
}

const FORM: (&str, &str) = ("Content-Type", "application/x-www-form-urlencoded");
const TEXT: (&str, &str) = ("Content-Type", "text/plain");
const JSON: (&str, &str) = ("Content-Type", "application/json");

/// Every change the issue names, sent as a page of another site sends it (a form, text/plain
/// or nothing, with its `Origin` or `Sec-Fetch-Site`): refused 403, nothing changes. The same
/// page of ax's own origin, and curl, pass.
async fn cross_site_changes(token: Option<&str>) {
    let store = TestStore::sqlite();
    let mut settings = config(&store, false, "cross-site");
    settings.server.admin_token = token.map(String::from);
    let ax = start_ax(&settings).await;
    let addr = ax.addr();
    let bearer = token.map(|t| format!("Bearer {t}")).unwrap_or_default();
    let auth: Vec<(&str, &str)> = match token {
        Some(_) => vec![("Authorization", bearer.as_str())],
        None => vec![],
    };
    let with = |extra: &[(&'static str, &'static str)]| joined(&auth, extra);
    let executor = Executor::start(Reply::Accepted).await;
    let scene = unique_name("site");
    let body = task(&scene, &executor.url).to_string();
    let (status, created) = send(addr, "POST", "/api/tasks", &with(&[JSON]), &body).await;
    assert_eq!(status, 201, "{created}");
    let id = created["id"].as_i64().expect("id");
    let (status, run) = send(
        addr,
        "POST",
        &format!("/api/tasks/{id}/trigger"),
        &with(&[]),
        "",
    )
    .await;
    assert_eq!(status, 201, "curl's body-less POST: {run}");
    let request_id = run["requestId"].as_str().expect("requestId").to_string();

    let bulk = json!({"items": [task(&scene, "http://127.0.0.2:9/internal")]}).to_string();
    let range = "from=2026-01-01T00:00:00Z&to=2026-01-02T00:00:00Z";
    let changes: Vec<(String, (&str, &str), String)> = vec![
        ("/api/tasks/bulk".into(), TEXT, bulk.clone()),
        (format!("/api/tasks/{id}/pause"), FORM, String::new()),
        (format!("/api/tasks/{id}/trigger"), FORM, "a=1".into()),
        (format!("/api/tasks/{id}/backfill"), FORM, range.into()),
        (
            format!("/api/instances/{request_id}/cancel"),
            FORM,
            String::new(),
        ),
        (format!("/api/scenes/{scene}/pause"), TEXT, String::new()),
    ];
    let pages: [(&'static str, &'static str, &'static str); 5] = [
        ("Origin", "http://evil.example", "Origin"),
        ("Origin", "http://127.0.0.1:3000", "Origin"),
        ("Origin", "null", "Origin"),
        ("Sec-Fetch-Site", "cross-site", "Sec-Fetch-Site"),
        ("Sec-Fetch-Site", "same-site", "Sec-Fetch-Site"),
    ];
    for (path, content_type, body) in &changes {
        for (header, value, field) in pages {
            let headers = with(&[(header, value)]);
            let headers: Vec<(&str, &str)> = headers.into_iter().chain([*content_type]).collect();
            let reply = send(addr, "POST", path, &headers, body).await;
            refused(
                &format!("{path} {header}: {value}"),
                &reply,
                (403, "FORBIDDEN", field),
            );
        }
    }
    // A JSON body does not help a page of another site.
    let headers = with(&[JSON, ("Origin", "http://evil.example")]);
    let reply = send(addr, "POST", "/api/tasks/bulk", &headers, &bulk).await;
    refused("JSON bulk", &reply, (403, "FORBIDDEN", "Origin"));
    // A foreign Origin on a read changes nothing and is served.
    let headers = with(&[("Origin", "http://evil.example")]);
    let api = format!("/api/tasks?scene={scene}");
    let (status, page) = send(addr, "GET", &api, &headers, "").await;
    assert_eq!((status, &page["total"]), (200, &json!(1)), "{page}");
    let (_, the_task) = send(addr, "GET", &format!("/api/tasks/{id}"), &with(&[]), "").await;
    assert_eq!(the_task["status"], "ENABLED", "not paused: {the_task}");
    let run_path = format!("/api/instances/{request_id}");
    let (_, the_run) = send(addr, "GET", &run_path, &with(&[]), "").await;
    assert!(
        matches!(the_run["status"].as_str(), Some("READY" | "RUNNING")),
        "not cancelled: {the_run}"
    );
    let runs = format!("/api/tasks/{id}/instances");
    let (_, runs) = send(addr, "GET", &runs, &with(&[]), "").await;
    assert_eq!(
        runs["items"].as_array().map(Vec::len),
        Some(1),
        "none triggered or backfilled: {runs}"
    );

    // A page of ax's own origin, as the browser says so, and a user typing a URL, pass.
    let own = format!("http://{addr}");
    let same_origin = [("Origin", own.as_str()), ("Sec-Fetch-Site", "same-origin")];
    let headers = joined(&auth, &same_origin);
    let (status, paused) = send(
        addr,
        "POST",
        &format!("/api/tasks/{id}/pause"),
        &headers,
        "",
    )
    .await;
    assert_eq!(
        (status, &paused["status"]),
        (200, &json!("PAUSED")),
        "{paused}"
    );
    let headers = with(&[("Sec-Fetch-Site", "none")]);
    let resume = format!("/api/tasks/{id}/resume");
    assert_eq!(send(addr, "POST", &resume, &headers, "").await.0, 200);
    let (_, log) = send(addr, "GET", "/api/audit", &with(&[]), "").await;
    let actions: Vec<&str> = log["items"]
        .as_array()
        .expect("items")
        .iter()
        .filter_map(|e| e["action"].as_str())
        .collect();
    assert_eq!(
        actions,
        ["task.resume", "task.pause", "task.trigger", "task.create"],
        "only the changes that passed"
    );
    ax.shutdown().await;
    executor.stop().await;
}

#[actix_rt::test(system = "crate::common::TestSystem")]
async fn cross_site_changes_are_refused_without_a_token() {
    cross_site_changes(None).await;
}

#[actix_rt::test(system = "crate::common::TestSystem")]
async fn cross_site_changes_are_refused_with_a_token_too() {
    cross_site_changes(Some("admin-token-0123456789")).await;
}

/// A body must say it is JSON: text/plain and forms are 415 naming `Content-Type`, and store
/// nothing; JSON with parameters, merge-patch JSON and body-less POSTs pass.
#[actix_rt::test(system = "crate::common::TestSystem")]
async fn bodies_must_say_they_are_json() {
    let store = TestStore::sqlite();
    let ax = start_ax(&config(&store, false, "json-only")).await;
    let addr = ax.addr();
    let scene = unique_name("typed");
    let body = task(&scene, "http://127.0.0.1:9/run").to_string();
    let bulk = json!({"items": [task(&scene, "http://127.0.0.1:9/run")]}).to_string();
    for (path, headers, body) in [
        ("/api/tasks/bulk", vec![TEXT], bulk.as_str()),
        ("/api/tasks", vec![FORM], body.as_str()),
        ("/api/tasks", vec![], body.as_str()),
        (
            "/api/tasks",
            vec![("Content-Type", "text/json")],
            body.as_str(),
        ),
        ("/api/callback", vec![TEXT], r#"{"requestId": "x"}"#),
    ] {
        let reply = send(addr, "POST", path, &headers, body).await;
        refused(
            &format!("{path} {headers:?}"),
            &reply,
            (415, "UNSUPPORTED_MEDIA_TYPE", "Content-Type"),
        );
    }
    let api = Api::new(&ax);
    let (_, page) = api.get(&format!("/api/tasks?scene={scene}")).await;
    assert_eq!(page["total"], 0, "nothing stored: {page}");

    let charset = ("Content-Type", "application/json; charset=utf-8");
    let (status, created) = send(addr, "POST", "/api/tasks", &[charset], &body).await;
    assert_eq!(status, 201, "{created}");
    let id = created["id"].as_i64().expect("id");
    let merge = ("Content-Type", "application/merge-patch+json");
    let patch = r#"{"cron": "0 30 0 1 1 *"}"#;
    let (status, patched) = send(addr, "PATCH", &format!("/api/tasks/{id}"), &[merge], patch).await;
    assert_eq!(
        (status, &patched["cron"]),
        (200, &json!("0 30 0 1 1 *")),
        "{patched}"
    );
    // curl -X POST: no body, no content type.
    for action in ["pause", "resume", "trigger"] {
        let (status, reply) =
            send(addr, "POST", &format!("/api/tasks/{id}/{action}"), &[], "").await;
        assert!(matches!(status, 200 | 201), "{action}: {status} {reply}");
    }
    let (status, reply) = send(addr, "POST", &format!("/api/scenes/{scene}/pause"), &[], "").await;
    assert_eq!((status, &reply["paused"]), (200, &json!(1)), "{reply}");
    ax.shutdown().await;
}

/// Without a token only ax's own names are served (a rebinding page's `Host` is its own
/// name); `server.allowed_hosts` adds names, and with a token it is the only check.
#[actix_rt::test(system = "crate::common::TestSystem")]
async fn foreign_hosts_are_refused_without_a_token() {
    let store = TestStore::sqlite();
    let mut settings = config(&store, false, "hosts");
    let ax = start_ax(&settings).await;
    let addr = ax.addr();
    let port = addr.port();
    let evil = format!("evil.example:{port}");
    for (method, path) in [
        ("GET", "/api/tasks"),
        ("GET", "/api/openapi.json"),
        ("GET", "/metrics"),
        ("POST", "/api/scenes/default/pause"),
    ] {
        let reply = send(addr, method, path, &[("Host", &evil)], "").await;
        refused(
            &format!("{method} {path}"),
            &reply,
            (421, "MISDIRECTED_REQUEST", "Host"),
        );
    }
    // The console's refusal is a console page.
    let (status, page) = send(addr, "GET", "/console", &[("Host", &evil)], "").await;
    assert_eq!(status, 421, "{page}");
    // A request in absolute form names its host in its target.
    let absolute = format!("http://evil.example:{port}/api/tasks");
    let reply = send(addr, "GET", &absolute, &[], "").await;
    refused(
        "absolute form",
        &reply,
        (421, "MISDIRECTED_REQUEST", "Host"),
    );
    for host in [
        format!("127.0.0.1:{port}"),
        format!("localhost:{port}"),
        "localhost".to_string(),
        format!("[::1]:{port}"),
    ] {
        let (status, reply) = send(addr, "GET", "/api/tasks", &[("Host", &host)], "").await;
        assert_eq!(status, 200, "{host}: {reply}");
    }
    // HTTP/1.0 without a Host: no browser sends that.
    let (status, _, _) = raw_exchange(addr, b"GET /api/tasks HTTP/1.0\r\n\r\n".to_vec()).await;
    assert_eq!(status, 200);
    ax.shutdown().await;

    settings.server.allowed_hosts = vec!["ax.example.com".into()];
    let ax = start_ax(&settings).await;
    let addr = ax.addr();
    let public = [("Host", "ax.example.com")];
    assert_eq!(send(addr, "GET", "/api/tasks", &public, "").await.0, 200);
    let reply = send(addr, "GET", "/api/tasks", &[("Host", "evil.example")], "").await;
    refused("not listed", &reply, (421, "MISDIRECTED_REQUEST", "Host"));
    // Behind a proxy passing ax's own Host, the listed public name is ax's origin.
    let from_public = [("Origin", "https://ax.example.com")];
    let (status, reply) = send(addr, "POST", "/api/scenes/default/pause", &from_public, "").await;
    assert_eq!(status, 200, "{reply}");
    ax.shutdown().await;

    // With a token: any Host, unless allowed_hosts is set.
    let token = "admin-token-0123456789";
    let bearer = format!("Bearer {token}");
    settings.server.admin_token = Some(token.into());
    settings.server.allowed_hosts = Vec::new();
    let ax = start_ax(&settings).await;
    let headers = [("Host", "evil.example"), ("Authorization", bearer.as_str())];
    assert_eq!(
        send(ax.addr(), "GET", "/api/tasks", &headers, "").await.0,
        200
    );
    ax.shutdown().await;
    settings.server.allowed_hosts = vec!["ax.example.com".into()];
    let ax = start_ax(&settings).await;
    let reply = send(ax.addr(), "GET", "/api/tasks", &headers, "").await;
    refused(
        "token and a list",
        &reply,
        (421, "MISDIRECTED_REQUEST", "Host"),
    );
    ax.shutdown().await;
}

/// A GET of a console page, or a form POST, with these cookies; status, `Location`, the
/// `Set-Cookie` values by name and the body.
async fn console(
    base: &str,
    method: &str,
    path: &str,
    cookies: &str,
    form: &[(&str, &str)],
) -> (u16, Option<String>, Vec<(String, String)>, String) {
    let client = awc::Client::builder()
        .timeout(Duration::from_secs(10))
        .disable_redirects()
        .finish();
    let url = format!("{base}{path}");
    let request = match method {
        "GET" => client.get(url),
        _ => client.post(url),
    };
    let request = match cookies {
        "" => request,
        jar => request.insert_header(("Cookie", jar)),
    };
    let mut response = match method {
        "GET" => request.send().await,
        _ => {
            let mut body = url::form_urlencoded::Serializer::new(String::new());
            body.extend_pairs(form);
            request
                .content_type("application/x-www-form-urlencoded")
                .send_body(body.finish())
                .await
        }
    }
    .unwrap_or_else(|err| panic!("{method} {path}: {err}"));
    let set: Vec<(String, String)> = response
        .headers()
        .get_all("set-cookie")
        .filter_map(|v| v.to_str().ok())
        .filter_map(|v| v.split(';').next()?.split_once('='))
        .map(|(name, value)| (name.to_string(), value.to_string()))
        .collect();
    let location = response
        .headers()
        .get("location")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let body = response.body().limit(4 << 20).await.expect("a body");
    let status = response.status().as_u16();
    (
        status,
        location,
        set,
        String::from_utf8_lossy(&body).into_owned(),
    )
}

/// The CSRF token a page's forms carry.
fn csrf_of(html: &str) -> String {
    let marker = r#"name="csrf" value=""#;
    let at = html.find(marker).expect("a form with a CSRF token") + marker.len();
    html[at..].split('"').next().unwrap_or_default().to_string()
}

/// Without tokens the CSRF token is ax's HMAC of the cookie, not the cookie: a cookie planted
/// by another app on this host (with a token equal to it, as a double submit had it) is
/// refused; the token ax gave for that cookie passes.
#[actix_rt::test(system = "crate::common::TestSystem")]
async fn a_planted_csrf_cookie_is_refused() {
    let store = TestStore::sqlite();
    let ax = start_ax(&config(&store, false, "planted")).await;
    let base = format!("http://{}", ax.addr());
    let api = Api::new(&ax);
    let scene = unique_name("planted");
    api.create_task(task(&scene, "http://127.0.0.1:9/run"))
        .await;
    let planted = "ab".repeat(32);
    let jar = format!("ax_csrf={planted}");
    // The scene's pause confirmation carries the form.
    let confirm = format!("/console/scenes/pause?scene={scene}");
    let (status, _, set, page) = console(&base, "GET", &confirm, &jar, &[]).await;
    assert_eq!(status, 200);
    assert!(set.is_empty(), "the cookie is kept: {set:?}");
    let minted = csrf_of(&page);
    assert_ne!(minted, planted, "the form's token is not the cookie");
    let pause = [("scene", scene.as_str()), ("csrf", planted.as_str())];
    let (status, _, _, body) = console(&base, "POST", "/console/scenes/pause", &jar, &pause).await;
    assert_eq!(status, 403, "{body}");
    let (_, tasks) = api.get(&format!("/api/tasks?scene={scene}")).await;
    assert_eq!(tasks["items"][0]["scenePaused"], false, "nothing paused");
    // Another cookie's token does not pass either.
    let (_, _, set, fresh) = console(&base, "GET", &confirm, "", &[]).await;
    let (_, other) = set.iter().find(|(n, _)| n == "ax_csrf").expect("a cookie");
    assert_ne!(csrf_of(&fresh), *other);
    let fresh_csrf = csrf_of(&fresh);
    let foreign = [("scene", scene.as_str()), ("csrf", fresh_csrf.as_str())];
    let (status, ..) = console(&base, "POST", "/console/scenes/pause", &jar, &foreign).await;
    assert_eq!(status, 403);
    // The token ax gave for this cookie passes.
    let own = [("scene", scene.as_str()), ("csrf", minted.as_str())];
    let (status, location, ..) = console(&base, "POST", "/console/scenes/pause", &jar, &own).await;
    assert_eq!(status, 303);
    assert_eq!(
        location.as_deref(),
        Some("/console/scenes?done=scene-paused&n=1")
    );
    let (_, tasks) = api.get(&format!("/api/tasks?scene={scene}")).await;
    assert_eq!(tasks["items"][0]["scenePaused"], true);
    ax.shutdown().await;
}

/// `ax serve` with this admin token on `store`, its logs in `dir`.
async fn serve(dir: &std::path::Path, store: &TestStore, token: &str) -> AxProcess {
    let env = [
        ("AX_STORE_URL", store.url()),
        ("AX_ADMIN_TOKEN", token.to_string()),
        ("AX_SIGNING_SECRET", SECRET.to_string()),
    ];
    let env = env
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect();
    AxProcess::start(dir, "sessions", env).await
}

/// Signs in with `token`; the session's cookie.
async fn sign_in(base: &str, token: &str) -> String {
    let (_, _, set, page) = console(base, "GET", "/console/sign-in", "", &[]).await;
    let (_, csrf_cookie) = set.iter().find(|(n, _)| n == "ax_csrf").expect("a cookie");
    let jar = format!("ax_csrf={csrf_cookie}");
    let csrf = csrf_of(&page);
    let form = [("token", token), ("csrf", csrf.as_str())];
    let (status, _, set, body) = console(base, "POST", "/console/sign-in", &jar, &form).await;
    assert_eq!(status, 303, "{body}");
    let (_, session) = set
        .iter()
        .find(|(n, _)| n == "ax_session")
        .expect("a session");
    format!("ax_session={session}")
}

/// A session outlives a restart with the same admin token, and ends at once when ax restarts
/// with another: its pages go to the sign-in page, the API reads with its cookie get 401.
async fn sessions_end_with_their_token(store: TestStore) {
    let dir = tempfile::tempdir().expect("temp dir");
    let (old, new) = ("admin-token-before-0123", "admin-token-after-01234");
    let mut ax = serve(dir.path(), &store, old).await;
    let session = sign_in(&ax.base(), old).await;
    let (status, ..) = console(&ax.base(), "GET", "/console/tasks", &session, &[]).await;
    assert_eq!(status, 200, "signed in");
    ax.stop().await;
    ax.restart().await;
    let (status, _, _, page) = console(&ax.base(), "GET", "/console/tasks", &session, &[]).await;
    assert_eq!(status, 200, "the same token: the session stands");
    assert!(page.contains("Signed in as") && page.contains("admin"));
    let (status, ..) = console(&ax.base(), "GET", "/api/tasks", &session, &[]).await;
    assert_eq!(status, 200);
    assert_eq!(ax.terminate().await, Some(0));

    let ax = serve(dir.path(), &store, new).await;
    let (status, location, ..) = console(&ax.base(), "GET", "/console/tasks", &session, &[]).await;
    assert_eq!(status, 303, "the admin token changed: the session ended");
    assert!(location.is_some_and(|l| l.starts_with("/console/sign-in")));
    let (status, _, _, reply) = console(&ax.base(), "GET", "/api/tasks", &session, &[]).await;
    assert_eq!(status, 401, "{reply}");
    // A change through the old session is refused too.
    let form = [("scene", "default"), ("csrf", "0")];
    let (status, ..) = console(&ax.base(), "POST", "/console/scenes/pause", &session, &form).await;
    assert_eq!(status, 401);
    // The new token signs in, as `admin`.
    let session = sign_in(&ax.base(), new).await;
    let (status, ..) = console(&ax.base(), "GET", "/console/tasks", &session, &[]).await;
    assert_eq!(status, 200);
    assert_eq!(ax.terminate().await, Some(0));
}

on_each_backend!(
    sessions_end_with_their_token,
    sqlite: sessions_end_with_their_token_on_sqlite,
    mariadb: sessions_end_with_their_token_on_mysql,
    postgres: sessions_end_with_their_token_on_postgres
);
