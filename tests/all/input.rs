//! Input the stores or the HTTP client cannot take is a 400 naming its field, on every store:
//! never a task whose every run fails, never a 503 answered as if the store were down.

use serde_json::{json, Value};

use crate::common::{config, on_each_backend, raw_exchange, start_ax, unique_name, Api, TestStore};

fn task(cron: &str, handler: &str) -> Value {
    json!({"name": unique_name("input"), "cron": cron, "handlerUrl": handler})
}

/// A valid cron of exactly `len` (at least 181) characters: a seconds list of every second,
/// padded with repeats.
fn cron_of_len(len: usize) -> String {
    let seconds: Vec<String> = (0..60).map(|s| s.to_string()).collect();
    let mut cron = seconds.join(",");
    // Midnight of 1 January only: the tasks must not fire while the test reads the runs.
    let fields = " 0 0 1 1 *";
    if (len - cron.len() - fields.len()) % 2 == 1 {
        cron.push_str(",10");
    }
    while cron.len() + fields.len() < len {
        cron.push_str(",0");
    }
    cron + fields
}

async fn task_total(api: &Api) -> i64 {
    let (status, page) = api.get("/api/tasks").await;
    assert_eq!(status, 200, "{page}");
    page["total"].as_i64().expect("total")
}

/// Asserts a 400 naming `field` (so no 5xx either).
fn assert_refused(answer: (u16, Value), field: &str, what: &str) {
    let (status, body) = answer;
    assert_eq!(status, 400, "{what}: {body}");
    assert_eq!(body["error"]["field"], field, "{what}: {body}");
}

#[actix_rt::test(system = "crate::common::TestSystem")]
async fn handler_urls_that_cannot_be_called_are_refused() {
    let store = TestStore::sqlite();
    let ax = start_ax(&config(&store, false, "input")).await;
    let api = Api::new(&ax);
    let before = task_total(&api).await;
    for url in [
        "http:///path",
        "http://:80/",
        "http://127.0.0.1:9/o k",
        "http://127.0.0.1:9/x\r\n",
        "http://127.0.0.1:9/x\t",
        " http://127.0.0.1:9/x",
        "http:\\\\host\\x",
        "http://user:pass@127.0.0.1:9/x",
        "http://127.0.0.1:9/x#frag",
        "http://a{b}.example/x",
    ] {
        let answer = api.post("/api/tasks", task("0 0 0 1 1 *", url)).await;
        assert_refused(answer, "handlerUrl", &format!("{url:?}"));
    }
    assert_eq!(task_total(&api).await, before, "a refused task was stored");

    for (url, stored) in [
        ("http://bücher.example/x", "http://xn--bcher-kva.example/x"),
        (
            "http://127.0.0.1:9/pfad/ä",
            "http://127.0.0.1:9/pfad/%C3%A4",
        ),
    ] {
        let created = api.create_task(task("0 0 0 1 1 *", url)).await;
        assert_eq!(created["handlerUrl"], stored, "{url:?}");
        let (status, read) = api.get(&format!("/api/tasks/{}", created["id"])).await;
        assert_eq!((status, &read["handlerUrl"]), (200, &json!(stored)));
    }
    ax.shutdown().await;
}

/// A task body with three bad fields is one 400 naming all three (`errors`), the first as its
/// `field` and message, as a body with that one bad field would be; nothing is stored. A bulk
/// item's are named within it.
#[actix_rt::test(system = "crate::common::TestSystem")]
async fn every_bad_field_of_a_task_is_named_at_once() {
    let store = TestStore::sqlite();
    let ax = start_ax(&config(&store, false, "input-all")).await;
    let api = Api::new(&ax);
    let before = task_total(&api).await;
    let mut body = task("61 * * * * *", "http://127.0.0.1:9/run");
    body["maxRetry"] = json!(11);
    body["overlap"] = json!("SOMETIMES");
    let (status, refused) = api.post("/api/tasks", body.clone()).await;
    assert_eq!(status, 400, "{refused}");
    let error = &refused["error"];
    assert_eq!(error["code"], "INVALID_ARGUMENT", "{refused}");
    let fields: Vec<&str> = error["errors"]
        .as_array()
        .map(|errors| errors.iter().filter_map(|e| e["field"].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(fields, ["cron", "maxRetry", "overlap"], "{refused}");
    assert_eq!(error["field"], "cron", "the first: {refused}");
    assert_eq!(error["message"], error["errors"][0]["message"], "{refused}");
    assert_eq!(
        error["errors"][1]["message"], "maxRetry must be an integer from 0 to 10",
        "{refused}"
    );
    // The cron alone: the same first error, and only it.
    let alone = task("61 * * * * *", "http://127.0.0.1:9/run");
    let (status, only) = api.post("/api/tasks", alone).await;
    assert_eq!(status, 400, "{only}");
    assert_eq!(only["error"]["field"], "cron");
    assert_eq!(only["error"]["message"], error["message"]);
    assert_eq!(only["error"]["errors"].as_array().map(Vec::len), Some(1));
    assert_eq!(task_total(&api).await, before, "a refused task was stored");

    let bulk = json!({"items": [task("0 0 0 1 1 *", "http://127.0.0.1:9/run"), body]});
    let (status, refused) = api.post("/api/tasks/bulk", bulk).await;
    assert_eq!(status, 400, "{refused}");
    assert_eq!(refused["error"]["field"], "items[1].cron", "{refused}");
    assert_eq!(
        refused["error"]["errors"][2]["field"], "items[1].overlap",
        "{refused}"
    );
    assert_eq!(
        task_total(&api).await,
        before,
        "a refused bulk stored a task"
    );
    ax.shutdown().await;
}

/// A step larger than its field's range (`*/99` seconds would fire once a minute) is a 400
/// naming `cron` on create, replace, change and bulk, and `expr` in a preview; nothing stored.
#[actix_rt::test(system = "crate::common::TestSystem")]
async fn a_step_larger_than_its_fields_range_is_refused() {
    let store = TestStore::sqlite();
    let ax = start_ax(&config(&store, false, "input-steps")).await;
    let api = Api::new(&ax);
    let handler = "http://127.0.0.1:9/run";
    let kept = api.create_task(task("0 0 0 1 1 *", handler)).await;
    let id = kept["id"].as_i64().expect("id");
    let before = task_total(&api).await;
    for cron in ["*/99 * * * * *", "25 */61 * * * *", "0 0 */25 * * *"] {
        let what = |how: &str| format!("{cron} ({how})");
        let answer = api.post("/api/tasks", task(cron, handler)).await;
        assert!(answer.1["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("larger than the field's range")));
        assert_refused(answer, "cron", &what("create"));
        let mut replaced = task(cron, handler);
        replaced["name"] = kept["name"].clone();
        let path = format!("/api/tasks/{id}");
        let answer = api.call("PUT", &path, Some(replaced)).await;
        assert_refused(answer, "cron", &what("replace"));
        let answer = api.call("PATCH", &path, Some(json!({"cron": cron}))).await;
        assert_refused(answer, "cron", &what("change"));
        let bulk = json!({"items": [task(cron, handler)]});
        let answer = api.post("/api/tasks/bulk", bulk).await;
        assert_refused(answer, "items[0].cron", &what("bulk"));
        let query = format!(
            "/api/cron/next?expr={}",
            cron.replace(' ', "%20").replace('/', "%2F")
        );
        assert_refused(api.get(&query).await, "expr", &what("preview"));
    }
    assert_eq!(task_total(&api).await, before, "a refused task was stored");
    let (_, read) = api.get(&format!("/api/tasks/{id}")).await;
    assert_eq!(read["cron"], "0 0 0 1 1 *", "unchanged: {read}");
    ax.shutdown().await;
}

/// A cron longer than its column and times outside what a store holds, on `store`.
async fn input_beyond_the_store_is_refused(store: TestStore) {
    let ax = start_ax(&config(&store, false, "input")).await;
    let api = Api::new(&ax);
    let handler = "http://127.0.0.1:9/run";

    let longest = cron_of_len(255);
    assert_eq!(longest.len(), 255);
    let created = api.create_task(task(&longest, handler)).await;
    assert_eq!(created["cron"], longest.as_str());
    // Stored trimmed: surrounding blanks do not count.
    let padded = api
        .create_task(task(&format!("  {longest}  "), handler))
        .await;
    assert_eq!(padded["cron"], longest.as_str());
    let too_long = cron_of_len(256);
    assert_eq!(too_long.len(), 256);
    let answer = api.post("/api/tasks", task(&too_long, handler)).await;
    assert_refused(answer, "cron", "a 256-character cron");
    let id = created["id"].as_i64().expect("id");
    let answer = api
        .call(
            "PUT",
            &format!("/api/tasks/{id}"),
            Some(task(&too_long, handler)),
        )
        .await;
    assert_refused(answer, "cron", "a 256-character cron on update");
    assert_eq!(
        task_total(&api).await,
        2,
        "nothing stored for the refused ones"
    );

    for (query, field) in [
        ("cursor=-8334601228800000.1", "cursor"),
        ("cursor=99999999999999999.1", "cursor"),
        ("cursor=253402300800000.1", "cursor"),
        ("cursor=1800000000000.0", "cursor"),
        ("from=0001-01-01T00:00:00Z", "from"),
        ("to=0001-01-01T00:00:00Z", "to"),
        ("from=9999-12-31T23:59:59-01:00", "from"),
    ] {
        let answer = api.get(&format!("/api/instances?{query}")).await;
        assert_refused(answer, field, query);
    }
    // The ends of the range are storable: answered, with nothing in them.
    let query = "from=1970-01-01T00:00:00Z&to=9999-12-31T23:59:59Z&cursor=253402300799000.1";
    let (status, page) = api.get(&format!("/api/instances?{query}")).await;
    assert_eq!((status, &page["items"]), (200, &json!([])), "{page}");
    ax.shutdown().await;
}

on_each_backend!(
    input_beyond_the_store_is_refused,
    sqlite: input_beyond_the_store_is_refused_on_sqlite,
    mariadb: input_beyond_the_store_is_refused_on_mariadb,
    postgres: input_beyond_the_store_is_refused_on_postgres
);

/// Requests the HTTP layer refuses before any handler sees them — a 100 KB URI, a malformed
/// request line, a head over the buffer — are answered in the JSON error shape too, and the
/// server goes on serving.
#[actix_rt::test(system = "crate::common::TestSystem")]
async fn protocol_errors_are_in_the_json_shape() {
    let store = TestStore::sqlite();
    let ax = start_ax(&config(&store, false, "protocol")).await;
    let long_uri = format!(
        "GET /api/tasks?q={} HTTP/1.1\r\nHost: x\r\n\r\n",
        "a".repeat(100_000)
    );
    let long_header = format!(
        "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: {}\r\n\r\n",
        "b".repeat(140_000)
    );
    for (request, status, code) in [
        (long_uri, 400, "BAD_REQUEST"),
        (
            "GET /a b HTTP/1.1\r\nHost: x\r\n\r\n".to_string(),
            400,
            "BAD_REQUEST",
        ),
        (
            "GET / HTTP/1.1\r\nBad Header\r\n\r\n".to_string(),
            400,
            "BAD_REQUEST",
        ),
        (long_header, 431, "HEADERS_TOO_LARGE"),
    ] {
        let (got, head, body) = raw_exchange(ax.addr(), request.clone().into_bytes()).await;
        let what = &request[..request.len().min(40)];
        assert_eq!(got, status, "{what}: {head}");
        assert!(
            head.contains("content-type: application/json"),
            "{what}: {head}"
        );
        assert_eq!(body["error"]["code"], code, "{what}: {body}");
    }
    let api = Api::new(&ax);
    let (status, _) = api.get("/healthz").await;
    assert_eq!(status, 200, "still serving");
    // Handlers' own 400s keep their bodies.
    let (status, reply) = api.post("/api/tasks", json!({"name": "x"})).await;
    assert_eq!(
        (status, &reply["error"]["field"]),
        (400, &json!("cron")),
        "{reply}"
    );
    ax.shutdown().await;
}

/// A key given twice, at any depth of any JSON body, is a 400 naming it, and changes nothing:
/// a proxy reading the first and ax the last would not agree on what was asked.
async fn duplicate_keys_are_refused(store: TestStore) {
    let ax = start_ax(&config(&store, false, "duplicates")).await;
    let api = Api::new(&ax);
    let task = api
        .create_task(task("0 0 0 1 1 *", "http://127.0.0.1:9/run"))
        .await;
    let id = task["id"].as_i64().expect("id");
    let fields = r#""cron": "0 0 0 1 1 *", "handlerUrl": "http://127.0.0.1:9/run""#;
    let cases = [
        (
            "POST",
            "/api/tasks".to_string(),
            format!(r#"{{"name": "d", {fields}, "handlerUrl": "http://127.0.0.1:8/x"}}"#),
            "handlerUrl",
        ),
        (
            "PUT",
            format!("/api/tasks/{id}"),
            format!(r#"{{"name": "d", "name": "e", {fields}}}"#),
            "name",
        ),
        (
            "PATCH",
            format!("/api/tasks/{id}"),
            r#"{"params": {"region": "eu", "region": "us"}}"#.to_string(),
            "params.region",
        ),
        (
            "POST",
            "/api/tasks/bulk".to_string(),
            format!(r#"{{"items": [{{"name": "a", {fields}}}, {{"name": "b", {fields}, "cron": "* * * * * *"}}]}}"#),
            "items[1].cron",
        ),
        (
            "POST",
            format!("/api/tasks/{id}/trigger"),
            r#"{"params": {"a": 1, "a": 2}}"#.to_string(),
            "params.a",
        ),
        (
            "POST",
            format!("/api/tasks/{id}/backfill"),
            r#"{"from": "2020-01-01T00:00:00Z", "from": "2021-01-01T00:00:00Z", "to": "2022-01-01T00:00:00Z"}"#.to_string(),
            "from",
        ),
        (
            "POST",
            "/api/callback".to_string(),
            r#"{"status": "SUCCESS", "status": "FAILED"}"#.to_string(),
            "status",
        ),
    ];
    for (method, path, body, field) in cases {
        let answer = api
            .raw(method, &path, "application/json", body.into_bytes())
            .await;
        assert!(
            answer.1["error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("duplicate key")),
            "{method} {path}: {}",
            answer.1
        );
        assert_refused(answer, field, &format!("{method} {path}"));
    }
    assert_eq!(task_total(&api).await, 1, "nothing created");
    let (_, after) = api.get(&format!("/api/tasks/{id}")).await;
    assert_eq!(after["updatedAt"], task["updatedAt"], "nothing changed");
    let (_, runs) = api.get(&format!("/api/tasks/{id}/instances")).await;
    assert_eq!(runs["items"], json!([]), "nothing triggered or backfilled");
    // The same key in two objects is no duplicate.
    let body = format!(r#"{{"name": "twice", {fields}, "params": {{"name": "x"}}}}"#);
    let (status, created) = api
        .raw("POST", "/api/tasks", "application/json", body.into_bytes())
        .await;
    assert_eq!((status, &created["params"]), (201, &json!({"name": "x"})));
    ax.shutdown().await;
}

on_each_backend!(
    duplicate_keys_are_refused,
    sqlite: duplicate_keys_are_refused_on_sqlite,
    mariadb: duplicate_keys_are_refused_on_mariadb,
    postgres: duplicate_keys_are_refused_on_postgres
);

/// Names and scenes holding invisible or reordering characters (bidi overrides, zero-width
/// ones) are refused wherever a task is written: they can look empty or read as another name.
#[actix_rt::test(system = "crate::common::TestSystem")]
async fn names_with_format_characters_are_refused() {
    let store = TestStore::sqlite();
    let ax = start_ax(&config(&store, false, "names")).await;
    let api = Api::new(&ax);
    let handler = "http://127.0.0.1:9/run";
    let existing = api.create_task(task("0 0 0 1 1 *", handler)).await;
    for (field, value) in [
        ("name", "\u{202e}"),
        ("name", "invoice\u{202e}gnp.exe"),
        ("name", "re\u{200b}port"),
        ("name", "\u{2066}x\u{2069}"),
        ("scene", "ops\u{200d}"),
    ] {
        let mut body = task("0 0 0 1 1 *", handler);
        body[field] = json!(value);
        let answer = api.post("/api/tasks", body.clone()).await;
        assert_refused(answer, field, &format!("create {value:?}"));
        let put = format!("/api/tasks/{}", existing["id"]);
        let answer = api.call("PUT", &put, Some(body.clone())).await;
        assert_refused(answer, field, &format!("update {value:?}"));
        let answer = api
            .post("/api/tasks/bulk", json!({"items": [body], "upsert": true}))
            .await;
        assert_refused(
            answer,
            &format!("items[0].{field}"),
            &format!("bulk {value:?}"),
        );
    }
    assert_eq!(task_total(&api).await, 1, "nothing stored");
    let (_, kept) = api.get(&format!("/api/tasks/{}", existing["id"])).await;
    assert_eq!(kept["name"], existing["name"]);
    ax.shutdown().await;
}

/// A JSON body is read as JSON only when it says so: `application/json` or a `+json` type
/// (a merge patch's `application/merge-patch+json`); another type is a 400.
#[actix_rt::test(system = "crate::common::TestSystem")]
async fn json_bodies_need_a_json_content_type() {
    let store = TestStore::sqlite();
    let ax = start_ax(&config(&store, false, "content-type")).await;
    let api = Api::new(&ax);
    let created = api
        .create_task(task("0 0 0 1 1 *", "http://127.0.0.1:9/run"))
        .await;
    let path = format!("/api/tasks/{}", created["id"]);
    let patch = br#"{"maxRetry": 7}"#.to_vec();
    let (status, patched) = api
        .raw(
            "PATCH",
            &path,
            "application/merge-patch+json",
            patch.clone(),
        )
        .await;
    assert_eq!(
        (status, &patched["maxRetry"]),
        (200, &json!(7)),
        "{patched}"
    );
    for content_type in ["text/plain", "application/x-www-form-urlencoded", "json"] {
        let (status, reply) = api.raw("PATCH", &path, content_type, patch.clone()).await;
        assert_eq!(status, 415, "{content_type}: {reply}");
        assert_eq!(
            reply["error"]["field"], "Content-Type",
            "{content_type}: {reply}"
        );
    }
    ax.shutdown().await;
}
