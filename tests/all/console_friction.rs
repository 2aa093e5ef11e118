//! The console's everyday friction: the runs list filtered by a task's name and several
//! statuses, its scene choice, trigger and duration columns and its previous page; ax started
//! in-process on SQLite and MariaDB, runs made through the JSON API, pages fetched over HTTP.

use std::time::Duration;

use serde_json::json;

use crate::common::{
    config, on_each_backend, start_ax, unique_name, Api, Executor, Reply, TestStore,
};

/// A page's HTML; fails the test unless it is a 200.
async fn page(ax: &ax_server::app::Ax, path: &str) -> String {
    let (status, body) = fetch(ax, path).await;
    assert_eq!(status, 200, "GET {path}: {body}");
    body
}

/// The hrefs of a page's links with this `rel`.
fn rel_link(html: &str, rel: &str) -> Option<String> {
    let at = html.find(&format!("rel=\"{rel}\""))?;
    let start = html[..at].rfind("href=\"")? + 6;
    let end = start + html[start..].find('"')?;
    Some(html[start..end].replace("&amp;", "&"))
}

/// How many runs a runs page lists (a row links to its run).
fn rows(html: &str) -> usize {
    html.matches("href=\"/console/runs/").count()
}

async fn runs_filters(store: TestStore) {
    let ax = start_ax(&config(&store, false, "friction")).await;
    let api = Api::new(&ax);
    let (good, bad) = (
        Executor::start(Reply::Success).await,
        Executor::start(Reply::Failed).await,
    );
    let scene = unique_name("friction");
    let prefix = unique_name("report");
    let create = |name: String, url: String| {
        let api = &api;
        let scene = scene.clone();
        async move {
            let task = api
                .create_task(json!({"name": name, "scene": scene, "cron": "0 0 0 1 1 *", "handlerUrl": url, "maxRetry": 0}))
                .await;
            task["id"].as_i64().expect("id")
        }
    };
    let ok_id = create(format!("{prefix}-ok"), good.url.clone()).await;
    let bad_id = create(format!("{prefix}-bad"), bad.url.clone()).await;
    // 51 runs of one, 1 of the other: two pages of 50.
    for _ in 0..51 {
        let (status, _) = api
            .post(&format!("/api/tasks/{ok_id}/trigger"), json!({}))
            .await;
        assert_eq!(status, 201, "triggered");
    }
    let (status, _) = api
        .post(&format!("/api/tasks/{bad_id}/trigger"), json!({}))
        .await;
    assert_eq!(status, 201);
    api.wait_final(ok_id, 51, Duration::from_secs(30)).await;
    api.wait_final(bad_id, 1, Duration::from_secs(10)).await;

    // A task by its exact name: its runs only; by the start of a name: every task it starts.
    let by_name = page(&ax, &format!("/console/runs?task={prefix}-bad")).await;
    assert_eq!(rows(&by_name), 1, "{by_name}");
    assert!(by_name.contains("FAILED") && by_name.contains(&format!("value=\"{prefix}-bad\"")));
    let by_prefix = page(&ax, &format!("/console/runs?task={prefix}&status=FAILED")).await;
    assert_eq!(rows(&by_prefix), 1);
    let nobody = page(&ax, &format!("/console/runs?task={prefix}-nobody")).await;
    assert!(
        nobody.contains("No runs."),
        "a name of no task lists nothing"
    );

    // Several statuses at once, as checkboxes send them.
    let failed = page(&ax, &format!("/console/runs?scene={scene}&status=FAILED")).await;
    assert_eq!(rows(&failed), 1);
    let either = page(
        &ax,
        &format!("/console/runs?scene={scene}&status=FAILED&status=SUCCESS&task={prefix}-bad"),
    )
    .await;
    assert_eq!(rows(&either), 1);
    let both = page(
        &ax,
        &format!("/console/runs?scene={scene}&status=FAILED,SUCCESS"),
    )
    .await;
    assert_eq!(rows(&both), 50, "a full page");
    assert!(
        both.contains("value=\"FAILED\" checked") && both.contains("value=\"SUCCESS\" checked")
    );
    assert!(!both.contains("value=\"RUNNING\" checked"));

    // The scene filter is a choice of the scenes, this one chosen.
    assert!(
        both.contains("<select id=\"scene\" name=\"scene\""),
        "{both}"
    );
    assert!(both.contains(&format!("<option value=\"{scene}\" selected>")));

    // Trigger and duration columns.
    assert!(both.contains(">Trigger</th>") && both.contains(">Duration</th>"));
    assert!(both.contains("<td>MANUAL</td>"));
    assert!(
        both.contains(" ms</td>") || both.contains(" s</td>"),
        "a duration"
    );

    // The next page, and back from it to the first.
    let next = rel_link(&both, "next").expect("a next page");
    assert!(
        rel_link(&both, "prev").is_none(),
        "no page before the first"
    );
    let second = page(&ax, &next).await;
    assert_eq!(rows(&second), 2);
    let previous = rel_link(&second, "prev").expect("a previous page");
    assert!(
        !previous.contains("cursor="),
        "back to the first: {previous}"
    );
    assert!(previous.contains("status=FAILED%2CSUCCESS") && previous.contains(&scene));
    assert_eq!(rows(&page(&ax, &previous).await), 50);

    // A bad status names its field.
    let client = awc::Client::default();
    let response = client
        .get(format!(
            "http://{}/console/runs?status=FAILED&status=DONE",
            ax.addr()
        ))
        .send()
        .await
        .expect("an answer");
    assert_eq!(response.status().as_u16(), 400);

    // Confirmation pages: a scene's pause says how many tasks stop firing; a run's cancel asks.
    let pause = page(&ax, &format!("/console/scenes/pause?scene={scene}")).await;
    assert!(
        pause.contains("<strong class=\"count\">2</strong> enabled tasks stop firing"),
        "{pause}"
    );
    assert!(pause.contains("action=\"/console/scenes/pause\"") && pause.contains("csrf"));
    let scenes = page(&ax, "/console/scenes").await;
    assert!(scenes.contains(&format!("href=\"/console/scenes/pause?scene={scene}\"")));
    let run = api.instances(bad_id).await;
    let request_id = run[0]["requestId"].as_str().expect("requestId");
    let cancel = page(&ax, &format!("/console/runs/{request_id}/cancel")).await;
    assert!(
        cancel.contains("nothing to cancel"),
        "the run has ended: {cancel}"
    );
    assert!(
        !cancel.contains("action=\"/console/runs/"),
        "no button for an ended run"
    );
}

on_each_backend!(
    runs_filters,
    sqlite: runs_filters_on_sqlite,
    mariadb: runs_filters_on_mysql,
    postgres: runs_filters_on_postgres
);

/// A page's status and body (no redirect followed).
async fn fetch(ax: &ax_server::app::Ax, path: &str) -> (u16, String) {
    let client = awc::Client::builder()
        .timeout(Duration::from_secs(10))
        .disable_redirects()
        .finish();
    let mut response = client
        .get(format!("http://{}{path}", ax.addr()))
        .send()
        .await
        .unwrap_or_else(|err| panic!("GET {path}: {err}"));
    let body = response.body().limit(4 << 20).await.expect("a body");
    (
        response.status().as_u16(),
        String::from_utf8_lossy(&body).into_owned(),
    )
}

/// The names a tasks page lists, in order (a row's first link is its task's).
fn task_names(html: &str) -> Vec<String> {
    let body = html.split("<tbody>").nth(1).unwrap_or_default();
    body.split("<tr>")
        .skip(1)
        .filter_map(|row| {
            let at = row.find("href=\"/console/tasks/")?;
            let start = at + row[at..].find('>')? + 1;
            let end = start + row[start..].find("</a>")?;
            Some(row[start..end].to_string())
        })
        .collect()
}

/// Opens a confirmation page (keeping its CSRF cookie) and posts its form: the status and the
/// `Location` of the answer.
async fn confirm(ax: &ax_server::app::Ax, path: &str) -> (u16, Option<String>) {
    let client = awc::Client::builder()
        .timeout(Duration::from_secs(10))
        .disable_redirects()
        .finish();
    let base = format!("http://{}", ax.addr());
    let mut response = client
        .get(format!("{base}{path}"))
        .send()
        .await
        .expect("the confirmation");
    let cookies: Vec<String> = response
        .headers()
        .get_all("set-cookie")
        .filter_map(|v| v.to_str().ok())
        .filter_map(|v| v.split(';').next().map(str::to_string))
        .collect();
    let body = response.body().limit(4 << 20).await.expect("a body");
    let body = String::from_utf8_lossy(&body).into_owned();
    assert_eq!(response.status().as_u16(), 200, "{body}");
    let form = body
        .split("<form class=\"inline\" method=\"post\" action=\"/console/tasks/bulk\">")
        .nth(1)
        .and_then(|rest| rest.split("</form>").next())
        .expect("the confirmation's form");
    let mut fields = url::form_urlencoded::Serializer::new(String::new());
    for input in form.split("<input").skip(1) {
        let attr = |name: &str| {
            let at = input.find(&format!(" {name}=\""))? + name.len() + 3;
            let end = at + input[at..].find('"')?;
            Some(input[at..end].replace("&amp;", "&").replace("&quot;", "\""))
        };
        if let (Some(name), Some(value)) = (attr("name"), attr("value")) {
            fields.append_pair(&name, &value);
        }
    }
    let response = client
        .post(format!("{base}/console/tasks/bulk"))
        .insert_header(("Cookie", cookies.join("; ")))
        .content_type("application/x-www-form-urlencoded")
        .send_body(fields.finish())
        .await
        .expect("the confirmed post");
    let location = response
        .headers()
        .get("location")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    (response.status().as_u16(), location)
}

/// The tasks page sorted by a column both ways, paged forward and back under the sort, its
/// 400 for an unknown sort; a bulk pause of every matching task (over two pages) asked on a
/// confirmation page that changes nothing, and done by its confirmation.
async fn tasks_sort_paging_and_confirmation(store: TestStore) {
    let ax = start_ax(&config(&store, false, "friction-tasks")).await;
    let api = Api::new(&ax);
    let scene = unique_name("sorted");
    // 55 tasks, their names in another order than their ids: two pages of 50.
    let count = 55;
    let (mut names, mut ids) = (Vec::new(), Vec::new());
    for n in 0..count {
        let name = format!("task-{:02}", (n * 37) % count);
        let task = api.create_task(json!({"name": name, "scene": scene, "cron": "0 0 0 1 1 *", "handlerUrl": "http://127.0.0.1:9/", "maxRetry": 0}))
            .await;
        ids.push(task["id"].as_i64().expect("id"));
        names.push(name);
    }
    names.sort();
    let listing = format!("/console/tasks?scene={scene}");

    let by_name = page(&ax, &format!("{listing}&sort=name")).await;
    assert_eq!(task_names(&by_name), names[..50].to_vec());
    assert!(
        by_name.contains("<th scope=\"col\" aria-sort=\"ascending\"><a class=\"sort\""),
        "the sorted column says so: {by_name}"
    );
    assert!(
        by_name.contains("sort=-name"),
        "the header reverses the sort"
    );
    assert!(rel_link(&by_name, "prev").is_none(), "the first page");
    let next = rel_link(&by_name, "next").expect("a next page");
    assert!(
        next.contains("sort=name") && next.contains(&scene),
        "{next}"
    );
    let second = page(&ax, &next).await;
    assert_eq!(task_names(&second), names[50..].to_vec());
    assert!(rel_link(&second, "next").is_none(), "the last page");
    let previous = rel_link(&second, "prev").expect("a previous page");
    assert!(previous.contains("before="), "{previous}");
    let back = page(&ax, &previous).await;
    assert_eq!(task_names(&back), names[..50].to_vec(), "back to the first");
    assert!(rel_link(&back, "prev").is_none(), "and it is the first");

    let mut reversed = names.clone();
    reversed.reverse();
    let by_name_desc = page(&ax, &format!("{listing}&sort=-name")).await;
    assert_eq!(task_names(&by_name_desc), reversed[..50].to_vec());
    assert!(by_name_desc.contains("aria-sort=\"descending\""));
    let second = page(&ax, &rel_link(&by_name_desc, "next").expect("next")).await;
    assert_eq!(task_names(&second), reversed[50..].to_vec());
    let back = page(&ax, &rel_link(&second, "prev").expect("prev")).await;
    assert_eq!(task_names(&back), reversed[..50].to_vec());

    // By next run (all the same here: ties go by id) and by status, over both pages.
    for sort in ["next", "-next", "status", "-status", "scene"] {
        let first = page(&ax, &format!("{listing}&sort={sort}")).await;
        let second = page(&ax, &rel_link(&first, "next").expect("next")).await;
        let mut all = task_names(&first);
        all.extend(task_names(&second));
        let mut sorted = all.clone();
        sorted.sort();
        assert_eq!(sorted, names, "sort={sort}: every task once");
        let back = page(&ax, &rel_link(&second, "prev").expect("prev")).await;
        assert_eq!(task_names(&back), task_names(&first), "sort={sort}");
    }

    // An unknown sort, or a damaged cursor, is a 400 naming its parameter.
    let (status, body) = fetch(&ax, &format!("{listing}&sort=cron")).await;
    assert_eq!(status, 400);
    assert!(body.contains("sort: sort must be one of"), "{body}");
    let (status, body) = fetch(&ax, &format!("{listing}&sort=name&after=12")).await;
    assert_eq!(status, 400);
    assert!(body.contains("after: this page link is damaged"), "{body}");

    // The bulk form asks first: its confirmation says how many and which, changes nothing.
    assert!(by_name.contains("form id=\"bulk\" method=\"get\" action=\"/console/tasks/bulk\""));
    assert!(by_name.contains("Select all 55 matching"));
    let back_to = url::form_urlencoded::byte_serialize(listing.as_bytes()).collect::<String>();
    let ask = format!("/console/tasks/bulk?action=pause&all=1&scene={scene}&back={back_to}");
    let asked = page(&ax, &ask).await;
    assert!(
        asked.contains("<strong class=\"count\">55</strong> tasks matching the filters"),
        "{asked}"
    );
    assert!(asked.contains("Pause 55 tasks") && asked.contains("and 35 more"));
    assert!(asked.contains(&format!("href=\"/console/tasks?scene={scene}\">Cancel</a>")));
    let enabled = format!("/api/tasks?scene={scene}&status=ENABLED&limit=100");
    assert_eq!(
        api.get(&enabled).await.1["total"],
        count,
        "nothing changed yet"
    );
    let one = format!(
        "/console/tasks/bulk?action=trigger&id={}&back={back_to}",
        ids[0]
    );
    assert!(page(&ax, &one).await.contains("Trigger 1 task"));
    let (status, location) = fetch_location(&ax, "/console/tasks/bulk?action=pause").await;
    assert_eq!(status, 303, "nothing selected");
    assert_eq!(
        location.as_deref(),
        Some("/console/tasks?done=none-selected")
    );
    let (status, _) = fetch(&ax, "/console/tasks/bulk?action=drop&id=1").await;
    assert_eq!(status, 400);

    // Confirmed: every matching task is paused, over both pages.
    let (status, location) = confirm(&ax, &ask).await;
    assert_eq!(status, 303);
    assert_eq!(
        location.as_deref(),
        Some(format!("{listing}&done=paused-many&n=55").as_str())
    );
    assert_eq!(api.get(&enabled).await.1["total"], 0);
    let paused = format!("/api/tasks?scene={scene}&status=PAUSED&limit=100");
    assert_eq!(api.get(&paused).await.1["total"], count);
    assert!(page(&ax, &location.unwrap_or_default())
        .await
        .contains("Paused 55 tasks."));
    ax.shutdown().await;
}

/// A page's status and `Location` (no redirect followed).
async fn fetch_location(ax: &ax_server::app::Ax, path: &str) -> (u16, Option<String>) {
    let client = awc::Client::builder()
        .timeout(Duration::from_secs(10))
        .disable_redirects()
        .finish();
    let response = client
        .get(format!("http://{}{path}", ax.addr()))
        .send()
        .await
        .unwrap_or_else(|err| panic!("GET {path}: {err}"));
    let location = response
        .headers()
        .get("location")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    (response.status().as_u16(), location)
}

on_each_backend!(
    tasks_sort_paging_and_confirmation,
    sqlite: tasks_sort_paging_and_confirmation_on_sqlite,
    mariadb: tasks_sort_paging_and_confirmation_on_mysql,
    postgres: tasks_sort_paging_and_confirmation_on_postgres
);
