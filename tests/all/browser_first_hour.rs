//! What a new user and an operator on call see first, in Chromium: a task's page shows its
//! scene, its status and its actions (Edit, Pause, Trigger) within the first viewport, at
//! laptop and phone size, and its stats, heat-maps and alerts after them; the scenes page shows
//! a paused scene's badge. Screenshots of both.

use std::time::Duration;

use serde_json::{json, Value};

use crate::common::webdriver::{Browser, LAPTOP, PHONE};
use crate::common::{config, start_ax, unique_name, Api, Executor, Reply, TestStore};

/// Where an element is on the page: its top and bottom in CSS pixels from the top of the
/// page, the viewport's height and how far the page is scrolled.
const PLACE: &str = "const r = arguments[0].getBoundingClientRect(); \
    return {top: r.top + window.scrollY, bottom: r.bottom + window.scrollY, \
            viewport: window.innerHeight, scrolled: window.scrollY};";

/// The place of the first `css` element showing `text`.
async fn place(browser: &Browser, css: &str, text: &str) -> Value {
    let element = browser.wait_for_text(css, text).await;
    browser.execute_with(PLACE, vec![element.as_arg()]).await
}

fn number(place: &Value, key: &str) -> f64 {
    place[key]
        .as_f64()
        .unwrap_or_else(|| panic!("no {key} in {place}"))
}

#[actix_rt::test(system = "crate::common::TestSystem")]
async fn a_tasks_page_shows_its_scene_status_and_actions_above_the_fold() {
    let store = TestStore::sqlite();
    let ax = start_ax(&config(&store, false, "browser-first-hour")).await;
    let api = Api::new(&ax);
    let executor = Executor::start(Reply::Success).await;
    let scene = unique_name("fold");
    let name = unique_name("report");
    let task = api
        .create_task(json!({"name": name, "scene": scene, "cron": "* * * * * *",
            "handlerUrl": executor.url, "maxRetry": 0}))
        .await;
    let id = task["id"].as_i64().expect("id");
    // Runs, so the runs table, the timeline and the stats have something to show.
    executor.wait_for(3, Duration::from_secs(15)).await;

    let browser = Browser::start().await;
    let path = format!("http://{}/console/tasks/{id}", ax.addr());
    for (width, height) in [LAPTOP, PHONE] {
        browser.set_window_size(width, height).await;
        browser.goto(&path).await;
        browser
            .wait_for_text("main h1", &format!("Task {name}"))
            .await;
        let first_screen = [
            ("dl.summary dd.scene a", scene.as_str()),
            ("dl.summary dd.status .badge", "ENABLED"),
            (".task-actions a.button", "Edit"),
            (".task-actions button", "Pause"),
            (".task-actions button", "Trigger now"),
        ];
        let mut lowest: f64 = 0.0;
        for (css, text) in first_screen {
            let at = place(&browser, css, text).await;
            assert_eq!(number(&at, "scrolled"), 0.0, "{width}x{height}: {at}");
            assert!(
                number(&at, "top") >= 0.0 && number(&at, "bottom") <= number(&at, "viewport"),
                "{width}x{height}: {text} ({css}) is not within the first viewport: {at}"
            );
            lowest = lowest.max(number(&at, "bottom"));
        }
        // The stats, heat-maps and alerts follow them.
        for (css, text) in [
            ("h2#stats-heading", "Stats"),
            ("h2#failures-heading", "Failures"),
            ("h2#alerts-heading", "Alerts"),
        ] {
            let at = place(&browser, css, text).await;
            assert!(
                number(&at, "top") > lowest,
                "{width}x{height}: {text} is above the task's actions: {at}"
            );
        }
        browser
            .screenshot(&format!("console-task-fold-{width}x{height}"))
            .await;
    }

    // Trigger: one click fires a run with the task's params, and goes on to it.
    browser.set_window_size(LAPTOP.0, LAPTOP.1).await;
    browser.goto(&path).await;
    browser
        .click_text(".task-actions button", "Trigger now")
        .await;
    browser.wait_for_text("p.notice", "Run triggered.").await;
    browser.wait_for_text("dd", "MANUAL").await;

    // Paused, its scene paused: the status says both, still in the first screen.
    api.post(&format!("/api/scenes/{scene}/pause"), json!({}))
        .await;
    browser.goto(&path).await;
    let at = place(&browser, "dl.summary dd.status", "SCENE PAUSED").await;
    assert!(number(&at, "bottom") <= number(&at, "viewport"), "{at}");
    browser.wait_for_text(".task-actions button", "Pause").await;
    browser
        .screenshot("console-task-scene-paused-1280x800")
        .await;
    executor.stop().await;
    ax.shutdown().await;
}

#[actix_rt::test(system = "crate::common::TestSystem")]
async fn the_scenes_page_shows_a_paused_scenes_badge() {
    let store = TestStore::sqlite();
    let ax = start_ax(&config(&store, false, "browser-scenes")).await;
    let api = Api::new(&ax);
    let (paused, running) = (unique_name("paused"), unique_name("running"));
    for scene in [&paused, &running] {
        api.create_task(json!({"name": "job", "scene": scene, "cron": "0 0 0 1 1 *",
            "handlerUrl": "http://127.0.0.1:9/", "maxRetry": 0}))
            .await;
    }
    let (status, reply) = api
        .post(&format!("/api/scenes/{paused}/pause"), json!({}))
        .await;
    assert_eq!(status, 200, "{reply}");

    let browser = Browser::start().await;
    let base = format!("http://{}", ax.addr());
    browser.goto(&format!("{base}/console/scenes")).await;
    browser.wait_for_text("main h1", "Scenes").await;
    // The badge is in the paused scene's row, beside its name, and in no other row.
    let badges = "return [...document.querySelectorAll('tbody tr')].map(tr => \
        [tr.querySelector('td a').textContent, \
         [...tr.querySelectorAll('td:first-child .badge')].map(b => b.textContent)])";
    let rows = browser.execute(badges).await;
    let row = |scene: &str| {
        rows.as_array()
            .into_iter()
            .flatten()
            .find(|row| row[0] == scene)
            .map(|row| row[1].clone())
            .unwrap_or_else(|| panic!("no row of {scene}: {rows}"))
    };
    assert_eq!(row(&paused), json!(["PAUSED"]), "{rows}");
    assert_eq!(row(&running), json!([]), "{rows}");
    browser.screenshot("console-scenes-paused-1280x800").await;

    // The scene's own page says so too.
    browser
        .goto(&format!("{base}/console/scenes/{paused}"))
        .await;
    browser
        .wait_for_text("main h1", &format!("Scene {paused}"))
        .await;
    browser.wait_for_text("main .badge", "PAUSED").await;
    browser
        .goto(&format!("{base}/console/scenes/{running}"))
        .await;
    browser
        .wait_for_text("main h1", &format!("Scene {running}"))
        .await;
    let shown = browser
        .execute("return [...document.querySelectorAll('main p .badge')].map(b => b.textContent)")
        .await;
    assert_eq!(shown, json!([]), "no pause shown for a running scene");
    ax.shutdown().await;
}
