//! The task editor in Chromium: a save refused for two fields shows both errors at once, each
//! beside its field and listed at the top with a link to it; the time zone field offers the
//! zones matching what is typed. Screenshot `console-editor-errors-1280x800`.

use crate::common::webdriver::{Browser, LAPTOP};
use crate::common::{config, start_ax, unique_name, Api, TestStore};

/// Replaces what field `id` holds with `text`, typed.
async fn fill(browser: &Browser, id: &str, text: &str) {
    let field = browser.find(&format!("#{id}")).await;
    field.clear().await;
    field.type_text(text).await;
}

#[actix_rt::test(system = "crate::common::TestSystem")]
async fn the_editor_shows_every_error_and_offers_the_zones() {
    let store = TestStore::sqlite();
    let ax = start_ax(&config(&store, false, "browser-editor")).await;
    let api = Api::new(&ax);
    let browser = Browser::start().await;
    browser.set_window_size(LAPTOP.0, LAPTOP.1).await;
    let base = format!("http://{}", ax.addr());
    let name = unique_name("two-errors");

    browser.goto(&format!("{base}/console/tasks/new")).await;
    browser
        .wait_for_text("#preview-description", "Every minute")
        .await;
    // The zone field offers the zones matching what is typed (the browser's own list, from
    // the datalist), and takes any text.
    fill(&browser, "timeZone", "europe/ber").await;
    let offered = browser
        .execute(
            "const input = document.getElementById('timeZone');\
             const typed = input.value.toLowerCase();\
             return [...input.list.options].map(o => o.value)\
             .filter(v => v.toLowerCase().includes(typed));",
        )
        .await;
    assert_eq!(offered, serde_json::json!(["Europe/Berlin"]), "{offered}");
    fill(&browser, "timeZone", "Europe/Berlin").await;
    browser
        .wait_for_text("#preview th", "In Europe/Berlin")
        .await;

    // Two bad fields: a second 61 and eleven retries.
    fill(&browser, "name", &name).await;
    fill(&browser, "handlerUrl", "http://127.0.0.1:9/run").await;
    fill(&browser, "cron", "61 * * * * *").await;
    browser.wait_for_text("#preview p.error", "61").await;
    fill(&browser, "maxRetry", "11").await;
    browser.click_text("button", "Save task").await;
    let cron_error = browser.wait_for("span.field-error#cron-error").await;
    assert!(cron_error.text().await.contains("61"));
    let retry_error = browser.find("span.field-error#maxRetry-error").await;
    assert_eq!(
        retry_error.text().await,
        "maxRetry must be an integer from 0 to 10"
    );
    assert_eq!(browser.find_all(".field-error").await.len(), 2);
    let summary = browser
        .wait_for_text("#form-error", "change these 2 fields")
        .await;
    let links = summary.find_all("a").await;
    let mut targets = Vec::new();
    for link in &links {
        targets.push(link.attr("href").await.unwrap_or_default());
    }
    assert_eq!(targets, ["#cron", "#maxRetry"]);
    // What was typed stays, the zone too.
    assert_eq!(browser.find("#maxRetry").await.value().await, "11");
    assert_eq!(
        browser.find("#timeZone").await.value().await,
        "Europe/Berlin"
    );
    browser.screenshot("console-editor-errors-1280x800").await;
    // A link of the summary leads to its field.
    links[1].click().await;
    browser
        .wait_until("return location.hash === '#maxRetry'")
        .await;
    let (_, listing) = api.get("/api/tasks?limit=500").await;
    assert!(!listing.to_string().contains(&name), "nothing saved");
    ax.shutdown().await;
}
