//! The dashboard's attention list and the search box in Chromium, with screenshots: failing
//! tasks told `FAILING`, `RUNNING`, `RETRYING in …` or `RECOVERED` by their latest run; paused
//! scenes and tasks with since when and by whom; `/` to the search box of every page, where the
//! start of a request id lists its runs, a whole one opens its run and other text lists tasks.

use fantoccini::key::Key;
use serde_json::json;

use crate::common::attention::{failing_states, Answering};
use crate::common::webdriver::{Browser, LAPTOP};
use crate::common::{config, start_ax, unique_name, Api, TestStore};

#[actix_rt::test(system = "crate::common::TestSystem")]
async fn attention_list_and_search_box() {
    let store = TestStore::sqlite();
    let ax = start_ax(&config(&store, false, "browser-attention")).await;
    let api = Api::new(&ax);
    let answering = Answering::start().await;
    let scene = unique_name("billing");
    let states = failing_states(&api, &scene, &answering).await;
    let paused_scene = unique_name("reports");
    let held = api
        .create_task(
            json!({"name": unique_name("nightly-report"), "scene": paused_scene,
            "cron": "0 0 3 * * *", "handlerUrl": answering.succeeded.url}),
        )
        .await;
    let (status, body) = api
        .post(&format!("/api/scenes/{paused_scene}/pause"), json!({}))
        .await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = api
        .post(&format!("/api/tasks/{}/pause", states.failing), json!({}))
        .await;
    assert_eq!(status, 200, "{body}");
    let runs = api.instances(states.failing).await;
    let request_id = runs[0]["requestId"]
        .as_str()
        .expect("requestId")
        .to_string();

    let browser = Browser::start().await;
    browser.set_window_size(LAPTOP.0, LAPTOP.1).await;
    let base = format!("http://{}", ax.addr());
    browser.goto(&format!("{base}/console")).await;
    browser.wait_for("#failing-tasks").await;

    // Each failing task's "Now", by its latest run; a retry counts down to its attempt.
    let now_of = |id: i64| {
        format!(
            "return [...document.querySelectorAll('#failing-tasks tbody tr')]\
             .find(r => r.querySelector('a[href=\"/console/tasks/{id}\"]'))\
             .lastElementChild.textContent.trim()"
        )
    };
    for (id, want) in [
        (states.failing, "FAILING"),
        (states.running, "RUNNING"),
        (states.recovered, "RECOVERED"),
    ] {
        assert_eq!(browser.execute(&now_of(id)).await, json!(want), "task {id}");
    }
    let retrying = browser.execute(&now_of(states.retrying)).await;
    let retrying = retrying.as_str().unwrap_or_default();
    assert!(
        retrying.starts_with("RETRYING in ") && retrying.ends_with(" min"),
        "{retrying:?}"
    );

    // What is paused: the scene and the task, each linked, since when and by whom.
    let paused = browser.wait_for("#paused").await;
    let lines = paused.find_all("li").await;
    assert_eq!(lines.len(), 2);
    let scene_line = lines[0].text().await;
    assert!(
        scene_line.starts_with(&format!(
            "SCENE PAUSED scene {paused_scene} — paused since "
        )) && scene_line.ends_with(" by anonymous"),
        "{scene_line:?}"
    );
    let task_line = lines[1].text().await;
    assert!(task_line.contains("PAUSED") && task_line.contains("by anonymous"));
    browser
        .execute("document.querySelector('#attention-heading').scrollIntoView()")
        .await;
    browser
        .screenshot("console-dashboard-attention-1280x800")
        .await;
    lines[0].find("a").await.click().await;
    browser
        .wait_until(&format!(
            "return location.pathname === '/console/scenes/{paused_scene}'"
        ))
        .await;

    // `/` reaches the search box where no filter is nearer; the start of a request id lists
    // the runs it names.
    browser.goto(&format!("{base}/console")).await;
    browser.wait_for("#failing-tasks").await;
    browser.press('/').await;
    let search = browser.active().await;
    assert_eq!(search.attr("id").await.as_deref(), Some("search-q"));
    search.type_text(&request_id[..8]).await;
    browser.press(Key::Enter).await;
    browser
        .wait_until("return location.pathname === '/console/search'")
        .await;
    browser.wait_for("#runs-found").await;
    let link = browser
        .wait_for(&format!("main a[href='/console/runs/{request_id}']"))
        .await;
    assert!(link.is_displayed().await);
    browser.screenshot("console-search-runs-1280x800").await;

    // A whole request id opens its run.
    browser.press('/').await;
    let field = browser.active().await;
    field.clear().await;
    field.type_text(&request_id).await;
    browser.press(Key::Enter).await;
    browser
        .wait_until(&format!(
            "return location.pathname === '/console/runs/{request_id}'"
        ))
        .await;
    browser.wait_for("h1").await;

    // Other text lists the tasks whose scene/name contains it.
    browser.press('/').await;
    let search = browser.active().await;
    assert_eq!(search.attr("id").await.as_deref(), Some("search-q"));
    search.type_text("nightly-REP").await;
    browser.press(Key::Enter).await;
    browser.wait_for("#tasks-found-table").await;
    let found = browser.find_all("#tasks-found-table tbody tr").await;
    assert_eq!(found.len(), 1);
    let text = found[0].text().await;
    assert!(
        text.contains(&format!(
            "{paused_scene}/{}",
            held["name"].as_str().expect("name")
        )) && text.contains("SCENE PAUSED"),
        "{text:?}"
    );
    browser.screenshot("console-search-tasks-1280x800").await;
    assert!(browser.console_errors().await.is_empty());

    drop(browser);
    ax.shutdown().await;
    answering.stop().await;
}
