//! The tasks page's selection in Chromium: a checked row brings the sticky "1 selected" bar;
//! the whole page checked offers every matching task; the bulk pause asks on a confirmation
//! page, and its confirmation pauses every matching task (over two pages), with screenshots.

use serde_json::json;

use crate::common::webdriver::{Browser, LAPTOP};
use crate::common::{config, start_ax, unique_name, Api, TestStore};

#[actix_rt::test(system = "crate::common::TestSystem")]
async fn selection_bar_select_all_matching_and_confirmation() {
    let store = TestStore::sqlite();
    let ax = start_ax(&config(&store, false, "browser-tasks")).await;
    let api = Api::new(&ax);
    let scene = unique_name("selection");
    // More than a page of 50: "all matching" reaches past the page.
    let count = 53;
    for n in 0..count {
        api.create_task(json!({"name": format!("job-{n:02}"), "scene": scene, "cron": "0 0 0 1 1 *", "handlerUrl": "http://127.0.0.1:9/", "maxRetry": 0}))
            .await;
    }

    let browser = Browser::start().await;
    browser.set_window_size(LAPTOP.0, LAPTOP.1).await;
    let base = format!("http://{}", ax.addr());
    browser
        .goto(&format!("{base}/console/tasks?scene={scene}&sort=name"))
        .await;
    browser.wait_for("#select-all:not([hidden])").await;
    let bar_position = "return getComputedStyle(document.querySelector('.bulk-bar')).position";
    assert_eq!(browser.execute(bar_position).await, "static", "no bar yet");

    // One row checked: the bar sticks to the bottom of the window and counts it.
    browser.find("input.select").await.click().await;
    browser.wait_for_text("#selected-count", "1 selected").await;
    assert_eq!(browser.execute(bar_position).await, "sticky");
    let in_view = "const r = document.querySelector('.bulk-bar').getBoundingClientRect(); \
                   return r.bottom <= window.innerHeight + 1 && r.top >= 0";
    browser.wait_until(in_view).await;
    assert!(
        browser
            .execute("return document.getElementById('select-matching').hidden")
            .await
            .as_bool()
            .unwrap_or(false),
        "not before the whole page is selected"
    );
    browser.screenshot("console-tasks-selection-1280x800").await;

    // The whole page, then every matching task.
    browser.find("#select-all").await.click().await;
    browser
        .wait_for_text("#selected-count", "50 selected")
        .await;
    browser
        .wait_for_text("#select-matching", &format!("Select all {count} matching"))
        .await
        .click()
        .await;
    browser
        .wait_for_text("#selected-count", &format!("All {count} matching selected"))
        .await;
    browser
        .screenshot("console-tasks-all-matching-1280x800")
        .await;
    browser.click_text("#bulk button", "Pause selected").await;

    // The confirmation: how many, which; nothing paused yet.
    browser
        .wait_for_text("h1", &format!("Pause {count} tasks?"))
        .await;
    browser
        .wait_for_text("p[role=note]", "tasks matching the filters")
        .await;
    assert_eq!(browser.find_all("ul.names li a").await.len(), 20);
    let enabled = format!("/api/tasks?scene={scene}&status=ENABLED&limit=100");
    assert_eq!(api.get(&enabled).await.1["total"], count);
    browser.screenshot("console-tasks-confirm-1280x800").await;
    browser
        .click_text("form button", &format!("Pause {count} tasks"))
        .await;

    // Back on the listing, sorted as it was, with the notice.
    browser
        .wait_for_text("[role=status], .notice", &format!("Paused {count} tasks."))
        .await;
    assert!(browser.current_url().await.contains("sort=name"));
    assert_eq!(api.get(&enabled).await.1["total"], 0);
    browser.screenshot("console-tasks-paused-1280x800").await;
    assert!(browser.console_errors().await.is_empty());
    ax.shutdown().await;
}
