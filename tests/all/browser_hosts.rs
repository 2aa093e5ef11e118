//! The Executors page's Hosts section in Chromium: a handler that takes 2 s, with a cap of 4
//! slots on its host and a slow lane of half of them, shows its host's slots in both lanes and
//! the handler counted slow.

use std::time::Duration;

use serde_json::json;

use crate::common::webdriver::{Browser, LAPTOP};
use crate::common::{config, start_ax, unique_name, Api, Executor, Reply, TestStore};

#[actix_rt::test(system = "crate::common::TestSystem")]
async fn the_executors_page_shows_each_hosts_lanes() {
    let store = TestStore::sqlite();
    let mut config = config(&store, false, "browser-hosts");
    config.dispatch.max_in_flight_per_host = 4;
    config.dispatch.slow_after_ms = 500;
    let ax = start_ax(&config).await;
    let api = Api::new(&ax);
    let slow = Executor::start(Reply::Slow(Duration::from_secs(2))).await;
    let mut ids = Vec::new();
    for _ in 0..6 {
        let task = api
            .create_task(json!({"name": unique_name("slow"), "cron": "* * * * * *",
                "handlerUrl": slow.url, "timeoutMs": 10_000, "maxRetry": 0}))
            .await;
        ids.push(task["id"].as_i64().expect("id"));
    }
    let host = slow
        .url
        .trim_start_matches("http://")
        .split('/')
        .next()
        .expect("host")
        .to_string();

    let browser = Browser::start().await;
    browser.set_window_size(LAPTOP.0, LAPTOP.1).await;
    let page = format!("http://{}/console/executors", ax.addr());
    // Its first attempts end after 2 s: from then on its attempts take the slow lane.
    let mut shown = false;
    for _ in 0..20 {
        browser.goto(&page).await;
        browser.wait_for("#hosts").await;
        let hint = browser.find("#hosts p.hint").await.text().await;
        if hint.contains("1 handler is slow now.") {
            shown = true;
            break;
        }
        actix_rt::time::sleep(Duration::from_millis(500)).await;
    }
    assert!(shown, "the handler is counted slow");
    // The attempts sent before it was known to be slow end within a second of the first.
    actix_rt::time::sleep(Duration::from_secs(1)).await;
    browser.goto(&page).await;
    let row = browser.wait_for_text("#hosts tbody tr", &host).await;
    let cells: Vec<String> = {
        let mut texts = Vec::new();
        for cell in row.find_all("td").await {
            texts.push(cell.text().await);
        }
        texts
    };
    assert_eq!(cells[0], host, "{cells:?}");
    assert_eq!(
        cells[1], "2 of 4",
        "in flight: the slow lane's share: {cells:?}"
    );
    assert_eq!(cells[3], "2 of 2", "the slow lane is full: {cells:?}");
    assert!(
        cells[2].parse::<usize>().expect("waiting") > 0,
        "runs wait: {cells:?}"
    );
    browser.screenshot("console-executors-hosts").await;

    for id in ids {
        api.call("DELETE", &format!("/api/tasks/{id}"), None).await;
    }
    ax.shutdown().await;
}
