//! The console's keyboard shortcuts and relative times in Chromium: `/` to the search field,
//! `g r` / `g t` between sections, `j`/`k` through a table's rows and Enter to open one, `?`
//! for the list of keys; a table's times read "… ago" with the instant on hover.

use std::time::Duration;

use fantoccini::key::Key;
use serde_json::json;

use crate::common::webdriver::{Browser, LAPTOP};
use crate::common::{config, start_ax, unique_name, Api, Executor, Reply, TestStore};

#[actix_rt::test(system = "crate::common::TestSystem")]
async fn keyboard_shortcuts_and_relative_times() {
    let store = TestStore::sqlite();
    let ax = start_ax(&config(&store, false, "browser-keys")).await;
    let api = Api::new(&ax);
    let executor = Executor::start(Reply::Success).await;
    let scene = unique_name("keys");
    let mut ids = Vec::new();
    for name in ["alpha", "beta", "gamma"] {
        let task = api
            .create_task(json!({"name": unique_name(name), "scene": scene, "cron": "* * * * * *", "handlerUrl": executor.url, "maxRetry": 0}))
            .await;
        ids.push(task["id"].as_i64().expect("id"));
    }
    api.wait_final(ids[0], 2, Duration::from_secs(15)).await;

    let browser = Browser::start().await;
    browser.set_window_size(LAPTOP.0, LAPTOP.1).await;
    let base = format!("http://{}", ax.addr());
    browser
        .goto(&format!("{base}/console/tasks?scene={scene}"))
        .await;
    browser.wait_for("tbody tr").await;

    // A table's times are relative, the instant on hover in UTC; a definition's are instants.
    let relative = browser.wait_for("td time.relative").await;
    let text = relative.text().await;
    assert!(
        text.ends_with(" ago") || text.starts_with("in ") || text == "now",
        "{text:?}"
    );
    let title = relative.attr("title").await.unwrap_or_default();
    assert!(
        title.starts_with("20") && title.ends_with(" UTC"),
        "{title:?}"
    );

    // `/` puts the keyboard in the name search; Escape takes it out again.
    browser.press('/').await;
    assert_eq!(
        browser.active().await.attr("id").await.as_deref(),
        Some("q")
    );
    browser.press('x').await;
    assert_eq!(
        browser.find("#q").await.value().await,
        "x",
        "typing goes to the field"
    );
    browser.press(Key::Escape).await;
    assert_ne!(
        browser.active().await.attr("id").await.as_deref(),
        Some("q")
    );

    // j, j, k: the second row is current; Enter opens its task.
    for key in ['j', 'j', 'j', 'k'] {
        browser.press(key).await;
    }
    let current = browser.find_all("tbody tr.current").await;
    assert_eq!(current.len(), 1, "one current row");
    let rows = browser.find_all("tbody tr").await;
    assert!(
        current[0].same_as(&rows[1]),
        "j j j k ends on the second row"
    );
    let href = current[0]
        .find("a[href^='/console/tasks/']")
        .await
        .attr("href")
        .await
        .expect("the row's task link");
    browser.screenshot("console-keys-rows-1280x800").await;
    browser.press(Key::Enter).await;
    browser
        .wait_until(&format!("return location.pathname === '{href}'"))
        .await;
    browser.wait_for("dl dd time").await;
    let instant = browser.find("dl dd time").await;
    assert!(instant.text().await.ends_with(" UTC"));
    assert!(!instant.attr("title").await.unwrap_or_default().is_empty());

    // `?` lists the keys; `g r` goes to the runs, `g t` back to the tasks.
    browser.press('?').await;
    assert!(browser.find("#keys-help").await.is_displayed().await);
    browser.screenshot("console-keys-help-1280x800").await;
    browser.press(Key::Escape).await;
    assert!(!browser.find("#keys-help").await.is_displayed().await);
    browser.press('g').await;
    browser.press('r').await;
    browser
        .wait_until("return location.pathname === '/console/runs'")
        .await;
    browser.wait_for("h1").await;
    browser.press('g').await;
    browser.press('t').await;
    browser
        .wait_until("return location.pathname === '/console/tasks'")
        .await;
    assert!(browser.console_errors().await.is_empty());

    drop(browser);
    ax.shutdown().await;
    executor.stop().await;
}
