//! A task's and a scene's history in Chromium: the timeline's bars, both failure heat-maps and
//! the dependency links (from the downstream task to its upstream), with screenshots.

use serde_json::json;

use crate::common::webdriver::{Browser, LAPTOP};
use crate::common::{config, start_ax, unique_name, Api, Executor, Reply, TestStore};

#[actix_rt::test(system = "crate::common::TestSystem")]
async fn timeline_heatmaps_and_dependency_links() {
    let store = TestStore::sqlite();
    let ax = start_ax(&config(&store, false, "browser-history")).await;
    let api = Api::new(&ax);
    let failing = Executor::start(Reply::Failed).await;
    let ok = Executor::start(Reply::Success).await;
    let scene = unique_name("history");
    let upstream = api
        .create_task(json!({"name": unique_name("upstream"), "scene": scene, "cron": "* * * * * *", "handlerUrl": failing.url, "maxRetry": 0}))
        .await;
    let up = upstream["id"].as_i64().expect("id");
    let downstream = api
        .create_task(json!({"name": unique_name("downstream"), "scene": scene, "cron": "* * * * * *", "handlerUrl": ok.url, "maxRetry": 0, "dependsOn": [up]}))
        .await;
    let down = downstream["id"].as_i64().expect("id");
    api.wait_final(up, 3, std::time::Duration::from_secs(15))
        .await;

    let browser = Browser::start().await;
    browser.set_window_size(LAPTOP.0, LAPTOP.1).await;
    let base = format!("http://{}", ax.addr());
    browser.goto(&format!("{base}/console/tasks/{up}")).await;
    browser.wait_for("svg.timeline rect.run.bad").await;
    assert!(!browser.find_all("svg.timeline rect.run").await.is_empty());
    assert_eq!(
        browser.find_all("svg.heatmap.by-day rect.cell").await.len(),
        90
    );
    assert_eq!(
        browser
            .find_all("svg.heatmap.by-hour rect.cell")
            .await
            .len(),
        168
    );
    let failed_cells = browser
        .execute(
            "return document.querySelectorAll('svg.heatmap.by-hour rect.cell:not(.l0)').length",
        )
        .await;
    assert!(
        failed_cells.as_u64().unwrap_or(0) >= 1,
        "a failed hour is coloured"
    );
    browser
        .execute("document.querySelector('svg.timeline').scrollIntoView()")
        .await;
    browser.screenshot("console-timeline-1280x800").await;
    browser
        .execute("document.querySelector('#failures-heading').scrollIntoView()")
        .await;
    browser.screenshot("console-heatmap-1280x800").await;

    // From the downstream task to its upstream by its link.
    browser.goto(&format!("{base}/console/tasks/{down}")).await;
    let link = browser.wait_for("dd.upstream a").await;
    assert_eq!(link.text().await, upstream["name"].as_str().expect("name"));
    browser
        .execute("document.querySelector('#dependencies-heading').scrollIntoView()")
        .await;
    browser.screenshot("console-dependencies-1280x800").await;
    link.click().await;
    browser.wait_for("dd.downstream a").await;
    assert!(browser
        .current_url()
        .await
        .ends_with(&format!("/console/tasks/{up}")));

    // The scene's page draws its timeline and both heat-maps.
    browser
        .goto(&format!("{base}/console/scenes/{scene}"))
        .await;
    browser.wait_for("svg.timeline rect.run").await;
    assert_eq!(browser.find_all("svg.heatmap").await.len(), 2);
    for task in [up, down] {
        api.call("POST", &format!("/api/tasks/{task}/pause"), None)
            .await;
    }
    ax.shutdown().await;
}
