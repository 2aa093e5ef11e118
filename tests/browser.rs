//! The web console in a real browser: ax started in-process on SQLite with real executors, tasks
//! made through the JSON API, and Debian's Chromium (through chromedriver) visiting every page,
//! using the keyboard and the time zone switch, at laptop and phone width. A screenshot of each
//! page goes to `<target dir>/screenshots/console-{page}-{width}x{height}.png`.

mod common;

use std::time::Duration;

use common::webdriver::{keys, Browser, LAPTOP, PHONE};
use common::{config, start_ax, unique_name, Api, Executor, Reply, TestStore};
use serde_json::json;

/// The browser on one ax's console; each step a user takes is a method or a few calls.
struct Console {
    browser: Browser,
    base: String,
}

impl Console {
    /// Opens `path` and waits for its heading to read `heading`; fails on a script error.
    async fn open(&self, path: &str, heading: &str) {
        self.browser.goto(&format!("{}{path}", self.base)).await;
        self.on_page(heading).await;
    }

    /// Waits until the page's heading reads `heading` (after a click, say): its title names it
    /// too, and it logged no error.
    async fn on_page(&self, heading: &str) {
        self.browser.wait_for_text("main h1", heading).await;
        let title = self.browser.title().await;
        assert!(
            title.starts_with(heading) && title.ends_with(" · ax"),
            "title {title:?}"
        );
        let errors = self.browser.console_errors().await;
        assert!(errors.is_empty(), "{heading}: the page logged {errors:?}");
    }

    /// A screenshot of the viewport, named for `page` and the viewport's size.
    async fn shot(&self, page: &str) {
        let size = self
            .browser
            .execute("return window.innerWidth + 'x' + window.innerHeight")
            .await;
        let size = size.as_str().unwrap_or("unknown");
        self.browser
            .screenshot(&format!("console-{page}-{size}"))
            .await;
    }

    /// Fails unless the page fits the viewport's width: wide tables scroll inside their
    /// region, nothing else is wider.
    async fn fits_the_width(&self, page: &str) {
        let widths = self
            .browser
            .execute("return [document.documentElement.scrollWidth, window.innerWidth]")
            .await;
        assert!(
            widths[0].as_u64() <= widths[1].as_u64(),
            "{page} overflows sideways: [page width, viewport width] = {widths}"
        );
    }

    /// The texts of the times the zone switch shows in UTC or in the browser's zone.
    async fn switchable_times(&self) -> Vec<String> {
        let texts = self
            .browser
            .execute(
                "return [...document.querySelectorAll(\"time[datetime$='Z']:not(.fixed)\")]\
                 .map(t => t.textContent)",
            )
            .await;
        serde_json::from_value(texts).expect("texts")
    }
}

#[actix_rt::test]
async fn every_console_page_in_chromium() {
    let store = TestStore::sqlite();
    let ax = start_ax(&config(&store, false, "browser")).await;
    let api = Api::new(&ax);
    let succeeding = Executor::start(Reply::Success).await;
    let failing = Executor::start(Reply::Failed).await;
    let (billing, reports) = (unique_name("billing"), unique_name("reports"));
    let (every_second, nightly) = (unique_name("every-second"), unique_name("nightly-export"));
    let ok_task = api
        .create_task(json!({
            "name": every_second, "scene": billing, "cron": "* * * * * *",
            "handlerUrl": succeeding.url,
        }))
        .await;
    let failing_task = api
        .create_task(json!({
            "name": nightly, "scene": reports, "cron": "* * * * * *",
            "handlerUrl": failing.url, "maxRetry": 0, "timeZone": "Europe/Berlin",
        }))
        .await;
    let (ok_id, failing_id) = (ok_task["id"].as_i64(), failing_task["id"].as_i64());
    let (ok_id, failing_id) = (ok_id.expect("id"), failing_id.expect("id"));

    // The browser starts while the first runs happen.
    let (browser, _, _) = futures_util::join!(
        Browser::start(),
        api.wait_final(ok_id, 1, Duration::from_secs(10)),
        api.wait_final(failing_id, 1, Duration::from_secs(10)),
    );
    let console = Console {
        browser,
        base: format!("http://{}", ax.addr()),
    };
    let browser = &console.browser;

    // The dashboard, and the keyboard: the first Tab reaches the skip link, shown with an
    // outline; Enter on it moves the focus to the content.
    console.open("/console", "Dashboard").await;
    console.shot("dashboard").await;
    let skip = browser.press_tab().await;
    assert!(skip.same_as(&browser.find("a.skip").await));
    assert_eq!(skip.text().await, "Skip to content");
    assert_eq!(skip.css_value("outline-style").await, "solid");
    assert_ne!(skip.css_value("outline-width").await, "0px");
    let left = browser
        .execute_with(
            "return arguments[0].getBoundingClientRect().left",
            vec![skip.as_arg()],
        )
        .await;
    assert!(
        left.as_f64() >= Some(0.0),
        "the focused skip link is on screen"
    );
    browser.press(keys::ENTER).await;
    assert_eq!(
        browser.active().await.attr("id").await.as_deref(),
        Some("main")
    );
    for heading in [
        "Runs by status",
        "Health",
        "Cluster",
        "Last hour",
        "Latest failures",
    ] {
        browser.wait_for_text("main h2", heading).await;
    }
    browser.wait_for_text(".badge.bad", "FAILED").await;
    browser.wait_for_text("main", "boom").await;

    // The time switch: the script shows it; a click shows times in the browser's zone
    // (Asia/Kolkata), a second one in UTC again.
    let zone_switch = browser.find("#zone-switch").await;
    assert!(zone_switch.is_displayed().await);
    assert_eq!(zone_switch.text().await, "Times: UTC");
    let utc = console.switchable_times().await;
    assert!(
        !utc.is_empty() && utc.iter().all(|t| t.ends_with(" UTC")),
        "{utc:?}"
    );
    zone_switch.click().await;
    assert_eq!(
        zone_switch.attr("aria-pressed").await.as_deref(),
        Some("true")
    );
    assert_eq!(zone_switch.text().await, "Times: browser zone");
    let local = console.switchable_times().await;
    assert!(local.iter().all(|t| t.ends_with(" UTC+05:30")), "{local:?}");
    assert_ne!(local, utc);

    // The tasks: both, the schedule in English; the choice of zone kept from the dashboard.
    console.open("/console/tasks", "Tasks").await;
    browser.wait_for_text("td a", &every_second).await;
    browser.wait_for_text("td a", &nightly).await;
    browser.wait_for_text("td", "Every second").await;
    browser.wait_for_text("td", "Europe/Berlin").await;
    browser.wait_for_text("td .badge", "ENABLED").await;
    let kept = console.switchable_times().await;
    assert!(kept.iter().all(|t| t.ends_with(" UTC+05:30")), "{kept:?}");
    let zone_switch = browser.find("#zone-switch").await;
    zone_switch.click().await;
    assert_eq!(zone_switch.text().await, "Times: UTC");
    let back = console.switchable_times().await;
    assert!(back.iter().all(|t| t.ends_with(" UTC")), "{back:?}");
    console.shot("tasks").await;

    // Filtered by the URL, and by the form.
    console
        .open(&format!("/console/tasks?scene={reports}"), "Tasks")
        .await;
    assert_eq!(browser.find("input#scene").await.value().await, reports);
    let names = browser.find_all("tbody tr td:first-child a").await;
    assert_eq!(names.len(), 1);
    assert_eq!(names[0].text().await, nightly);
    browser.find("input#scene").await.clear().await;
    browser
        .find("input#q")
        .await
        .type_text("every-second")
        .await;
    browser.find("form.filters button").await.click().await;
    console.on_page("Tasks").await;
    assert!(browser.current_url().await.contains("q=every-second"));
    browser.wait_for_text("td a", &every_second).await;
    assert_eq!(browser.find_all("tbody tr").await.len(), 1);

    // A task: reached by its link; its definition and next fire times.
    browser
        .wait_for_text("td a", &every_second)
        .await
        .click()
        .await;
    console.on_page(&format!("Task {every_second}")).await;
    assert!(browser
        .current_url()
        .await
        .ends_with(&format!("/console/tasks/{ok_id}")));
    browser.wait_for_text("main", "Next 10 fire times").await;
    browser.wait_for_text("main", &succeeding.url).await;
    browser.wait_for_text(".badge.good", "SUCCESS").await;
    console.shot("task").await;

    // The runs: both tasks', with their status; a failed run's page reached from its link.
    console.open("/console/runs", "Runs").await;
    browser.wait_for_text(".badge.good", "SUCCESS").await;
    browser.wait_for_text(".badge.bad", "FAILED").await;
    console.shot("runs").await;
    console
        .open(
            &format!("/console/runs?task={failing_id}&status=FAILED"),
            "Runs",
        )
        .await;
    let rows = browser.find_all("tbody tr").await;
    assert!(!rows.is_empty());
    for row in &rows {
        assert_eq!(row.find(".badge").await.text().await, "FAILED");
    }
    let link = rows[0].find("a[href^='/console/runs/']").await;
    let href = link.attr("href").await.expect("a link");
    link.click().await;
    let request_id = href.trim_start_matches("/console/runs/");
    console.on_page(&format!("Run {request_id}")).await;
    browser.wait_for_text("dd .badge.bad", "FAILED").await;
    browser.wait_for_text("dd", "boom").await;
    browser.wait_for_text("dd", "E1").await;
    browser.wait_for_text("dd a", &nightly).await;
    console.shot("run").await;

    // The scenes and the audit log.
    console.open("/console/scenes", "Scenes").await;
    browser.wait_for_text("td a", &billing).await;
    browser.wait_for_text("td a", &reports).await;
    console.shot("scenes").await;
    console.open("/console/audit", "Audit log").await;
    browser.wait_for_text("td code", "task.create").await;
    browser.wait_for_text("td", "anonymous").await;
    console.shot("audit").await;

    // At phone width no page is wider than the screen; a wide table scrolls in its region.
    browser.set_window_size(PHONE.0, PHONE.1).await;
    let pages = [
        ("dashboard", "/console".to_string(), "Dashboard"),
        ("tasks", "/console/tasks".to_string(), "Tasks"),
        ("task", format!("/console/tasks/{ok_id}"), "Task"),
        ("runs", "/console/runs".to_string(), "Runs"),
        ("run", href.clone(), "Run"),
        ("scenes", "/console/scenes".to_string(), "Scenes"),
        ("audit", "/console/audit".to_string(), "Audit log"),
    ];
    for (page, path, heading) in &pages {
        console.open(path, heading).await;
        console.fits_the_width(page).await;
        if matches!(*page, "dashboard" | "tasks") {
            console.shot(page).await;
        }
    }
    console.open("/console/tasks", "Tasks").await;
    let table = browser.find(".scroll").await;
    let scrolls = browser
        .execute_with(
            "return arguments[0].scrollWidth > arguments[0].clientWidth",
            vec![table.as_arg()],
        )
        .await;
    assert_eq!(
        scrolls,
        json!(true),
        "the tasks table scrolls in its region"
    );

    browser.set_window_size(LAPTOP.0, LAPTOP.1).await;
    drop(console);
    ax.shutdown().await;
    succeeding.stop().await;
    failing.stop().await;
}
