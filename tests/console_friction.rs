//! The console's everyday friction: the runs list filtered by a task's name and several
//! statuses, its scene choice, trigger and duration columns and its previous page; ax started
//! in-process on SQLite and MariaDB, runs made through the JSON API, pages fetched over HTTP.

mod common;

use std::time::Duration;

use common::{config, start_ax, unique_name, Api, Executor, Reply, TestStore};
use serde_json::json;

/// A page's HTML; fails the test unless it is a 200.
async fn page(ax: &ax::app::Ax, path: &str) -> String {
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
    let body = String::from_utf8_lossy(&body).into_owned();
    assert_eq!(response.status().as_u16(), 200, "GET {path}: {body}");
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

#[actix_rt::test]
async fn runs_filters_on_sqlite() {
    runs_filters(TestStore::sqlite()).await;
}

#[actix_rt::test]
async fn runs_filters_on_mysql() {
    runs_filters(TestStore::mysql()).await;
}
