//! The web console in a real browser: ax started in-process on SQLite with real executors, tasks
//! made through the JSON API, and Debian's Chromium (through chromedriver) visiting every page,
//! using the keyboard and the time zone switch, at laptop and phone width; and an admin's day
//! with tokens configured: signing in, making a task through the editor, pausing its scene,
//! triggering a run with other params, reading the audit log, signing out; and the alerts of a
//! failing task told on a webhook channel, on the alerts page, its task's and its scene's. A
//! screenshot of each page goes to `<target dir>/screenshots/console-{page}-{width}x{height}.png`.

use std::time::{Duration, Instant};

use fantoccini::key::Key;
use serde_json::json;

use crate::common::webdriver::{Browser, LAPTOP, PHONE, WAIT};
use crate::common::{config, start_ax, unique_name, with_webhook, Api, Executor, Reply, TestStore};

/// The browser on one ax's console; each step a user takes is a method or a few calls (the
/// other browser modules' console too).
pub(crate) struct Console {
    pub(crate) browser: Browser,
    pub(crate) base: String,
}

impl Console {
    /// Opens `path` and waits for its heading to read `heading`; fails on a script error.
    pub(crate) async fn open(&self, path: &str, heading: &str) {
        self.browser.goto(&format!("{}{path}", self.base)).await;
        self.on_page(heading).await;
    }

    /// Waits until the page's heading reads `heading` (after a click, say): its title names it
    /// too, and it logged no error.
    pub(crate) async fn on_page(&self, heading: &str) {
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
    pub(crate) async fn shot(&self, page: &str) {
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
    pub(crate) async fn fits_the_width(&self, page: &str) {
        let widths = self
            .browser
            .execute("return [document.documentElement.scrollWidth, window.innerWidth]")
            .await;
        assert!(
            widths[0].as_u64() <= widths[1].as_u64(),
            "{page} overflows sideways: [page width, viewport width] = {widths}"
        );
    }

    /// Opens `path` again until an element matching `css` shows `text` (runs that happen in
    /// the meantime, say).
    async fn reload_until(&self, path: &str, heading: &str, css: &str, text: &str) {
        let deadline = Instant::now() + WAIT;
        loop {
            self.open(path, heading).await;
            if self.shows(css, text).await {
                return;
            }
            if Instant::now() > deadline {
                let what = format!("no {css:?} showed {text:?} within {WAIT:?} of reloads");
                return self.browser.fail(&what).await;
            }
            actix_rt::time::sleep(Duration::from_millis(250)).await;
        }
    }

    /// Whether an element matching `css` shows `text` now.
    async fn shows(&self, css: &str, text: &str) -> bool {
        self.browser.find_text(css, text).await.is_ok()
    }

    /// Empties the field `#{id}` and types `text` into it.
    pub(crate) async fn fill(&self, id: &str, text: &str) {
        let field = self.browser.find(&format!("#{id}")).await;
        field.clear().await;
        field.type_text(text).await;
    }

    /// Clicks the button showing `label` (the first one).
    pub(crate) async fn press_button(&self, label: &str) {
        self.browser.click_text("button", label).await;
    }

    /// What the pages logged as errors since the last look, each of which must be one of the
    /// answers the test asked for: a message naming one of `expected` (a path) and its status.
    pub(crate) async fn expected_errors(&self, expected: &[(&str, u16)]) {
        for error in self.browser.console_errors().await {
            let known = expected.iter().any(|(path, status)| {
                error.contains(path) && error.contains(&format!("status of {status}"))
            });
            assert!(known, "an error the test did not ask for: {error}");
        }
    }

    /// The instants the zone switch shows in UTC or in the browser's zone: a relative time's
    /// on hover, another's as its text.
    async fn switchable_times(&self) -> Vec<String> {
        let texts = self
            .browser
            .execute(
                "return [...document.querySelectorAll(\"time[datetime$='Z']:not(.fixed)\")]\
                 .map(t => t.classList.contains('relative') ? t.title : t.textContent)",
            )
            .await;
        serde_json::from_value(texts).expect("texts")
    }
}

#[actix_rt::test(system = "crate::common::TestSystem")]
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
    let group = unique_name("workers");
    let (status, created) = api
        .call(
            "PUT",
            &format!("/api/executors/{group}"),
            Some(json!({"members": [succeeding.base()]})),
        )
        .await;
    assert_eq!(status, 201, "{created}");

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
    // The browser enforces the console's Content-Security-Policy: an inline style and an
    // inline script are refused, and each refusal is logged. So no page needed one, as every
    // page is checked for logged errors.
    let inline = browser
        .execute(
            "const p = document.createElement('p'); p.setAttribute('style', 'color: rgb(1, 2, 3)'); \
             const s = document.createElement('script'); s.textContent = 'window.axInline = 1'; \
             document.body.append(p, s); const color = getComputedStyle(p).color; \
             p.remove(); s.remove(); return [color, window.axInline === 1]",
        )
        .await;
    assert_ne!(inline[0], "rgb(1, 2, 3)", "an inline style applied");
    assert_eq!(inline[1], false, "an inline script ran");
    let refused = browser.console_errors().await;
    let policy = "Content Security Policy";
    assert_eq!(
        refused.iter().filter(|e| e.contains(policy)).count(),
        2,
        "{refused:?}"
    );
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
    browser.press(Key::Enter).await;
    assert_eq!(
        browser.active().await.attr("id").await.as_deref(),
        Some("main")
    );
    for heading in [
        "Needs attention",
        "Next runs",
        "Runs by status",
        "Last hour",
    ] {
        browser.wait_for_text("main h2", heading).await;
    }
    browser
        .wait_for_text("#failing-tasks .badge.bad", "FAILING")
        .await;
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
    let names = browser
        .find_all("tbody tr td a[href^='/console/tasks/']")
        .await;
    assert_eq!(names.len(), 1);
    assert_eq!(names[0].text().await, nightly);
    browser.find("input#scene").await.clear().await;
    browser
        .find("input#q")
        .await
        .type_text("every-second")
        .await;
    browser.find("form.filters button").await.click().await;
    browser.wait_for_query("q=every-second").await;
    console.on_page("Tasks").await;
    browser.wait_for_text("td a", &every_second).await;
    assert_eq!(browser.find_all("tbody tr").await.len(), 1);

    // A task: reached by its link; its definition and next fire times.
    browser.click_text("td a", &every_second).await;
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
    // The list is live (the task fails every second): its rows are read and the first run's
    // link clicked in one script, before a refresh can replace them.
    let listed = browser
        .execute(
            "const rows = [...document.querySelectorAll('tbody tr')];\
             const link = rows.length && rows[0].querySelector(\"a[href^='/console/runs/']\");\
             if (link) link.click();\
             return {badges: rows.map(r => r.querySelector('.badge')?.textContent),\
                     href: link ? link.getAttribute('href') : null}",
        )
        .await;
    let badges = listed["badges"].as_array().expect("badges");
    assert!(!badges.is_empty());
    assert!(badges.iter().all(|badge| badge == "FAILED"), "{badges:?}");
    let href = listed["href"].as_str().expect("a link").to_string();
    let request_id = href.trim_start_matches("/console/runs/");
    console.on_page(&format!("Run {request_id}")).await;
    browser.wait_for_text("dd .badge.bad", "FAILED").await;
    browser.wait_for_text("dd", "boom").await;
    browser.wait_for_text("dd", "E1").await;
    browser.wait_for_text("dd a", &nightly).await;
    console.shot("run").await;

    // The scenes, the executor groups and the audit log.
    console.open("/console/scenes", "Scenes").await;
    browser.wait_for_text("td a", &billing).await;
    browser.wait_for_text("td a", &reports).await;
    console.shot("scenes").await;
    console.open("/console/executors", "Executors").await;
    browser.wait_for_text("h2", &group).await;
    browser.wait_for_text("td .badge.good", "HEALTHY").await;
    console.shot("executors").await;
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
        ("executors", "/console/executors".to_string(), "Executors"),
        ("calendars", "/console/calendars".to_string(), "Calendars"),
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

#[actix_rt::test(system = "crate::common::TestSystem")]
async fn alerts_in_chromium() {
    let store = TestStore::sqlite();
    let hook = Executor::start(Reply::Success).await;
    let settings = with_webhook(
        config(&store, false, "browser-alerts"),
        format!("{}hook", hook.base()),
    );
    let ax = start_ax(&settings).await;
    let api = Api::new(&ax);
    let failing = Executor::start(Reply::Failed).await;
    let (scene, name) = (unique_name("reports"), unique_name("nightly-export"));
    let task = api
        .create_task(json!({
            "name": name, "scene": scene, "cron": "* * * * * *",
            "handlerUrl": failing.url, "maxRetry": 0,
        }))
        .await;
    let id = task["id"].as_i64().expect("id");

    // The browser starts while the task fails and the webhook is told.
    let (browser, _) = futures_util::join!(Browser::start(), hook.wait_for(1, WAIT));
    let console = Console {
        browser,
        base: format!("http://{}", ax.addr()),
    };
    let browser = &console.browser;

    // The alerts page, from the navigation: the alert sent, its repeats folded.
    console.open("/console", "Dashboard").await;
    browser.click_text("nav a", "Alerts").await;
    console.on_page("Alerts").await;
    console
        .reload_until("/console/alerts", "Alerts", "td .badge.good", "sent")
        .await;
    console
        .reload_until("/console/alerts", "Alerts", "td .badge.idle", "folded")
        .await;
    browser.wait_for_text("td .badge.bad", "FAILED").await;
    browser.wait_for_text("td code", "E1").await;
    browser
        .wait_for_text("td a", &format!("{scene}/{name}"))
        .await;
    browser.wait_for_text("td", "ops-hook").await;
    console.shot("alerts").await;

    // Filtered through the form: only the sent alert, whose run is a click away.
    let status = browser.find("select#status option[value='sent']").await;
    status.click().await;
    browser.find("form.filters button").await.click().await;
    browser.wait_for_query("status=sent").await;
    console.on_page("Alerts").await;
    let rows = browser.find_all("main tbody tr").await;
    assert_eq!(rows.len(), 1, "one alert sent, on one channel");
    assert_eq!(rows[0].find(".badge.good").await.text().await, "sent");
    rows[0].find("a[aria-label^='run ']").await.click().await;
    browser.wait_for_text("main h1", "Run ").await;
    browser.wait_for_text("dd .badge.bad", "FAILED").await;

    // The task's page: the rule it follows, its last alerts, all of them a link away.
    console
        .open(&format!("/console/tasks/{id}"), &format!("Task {name}"))
        .await;
    browser.wait_for_text("h2", "Alerts").await;
    browser
        .wait_for_text("main strong", "the default rule")
        .await;
    browser.wait_for_text("dd code", "ops-hook").await;
    browser
        .click_text("main a", "All alerts of this task")
        .await;
    console.on_page("Alerts").await;
    assert!(browser
        .current_url()
        .await
        .ends_with(&format!("/console/alerts?task={id}")));

    // The scene's page, from the scenes page.
    console.open("/console/scenes", "Scenes").await;
    browser.click_text("td a", &scene).await;
    console.on_page(&format!("Scene {scene}")).await;
    browser
        .wait_for_text("main strong", "the default rule")
        .await;
    browser.wait_for_text("td .badge.bad", "FAILED").await;
    console.shot("scene").await;

    // At phone width the alerts page fits; its table scrolls in its region.
    browser.set_window_size(PHONE.0, PHONE.1).await;
    console.open("/console/alerts", "Alerts").await;
    console.fits_the_width("alerts").await;
    browser.set_window_size(LAPTOP.0, LAPTOP.1).await;

    drop(console);
    ax.shutdown().await;
    hook.stop().await;
    failing.stop().await;
}

const ADMIN_TOKEN: &str = "admin-token-for-the-browser";

/// The live pages: a task's page shows a run triggered elsewhere without a reload, keeping a
/// half-typed form and its focus; the run's page then shows the executor's log lines and
/// progress as they are sent, and its end; the runs list and the dashboard follow too.
#[actix_rt::test(system = "crate::common::TestSystem")]
async fn live_pages_in_chromium() {
    let store = TestStore::sqlite();
    let ax = start_ax(&config(&store, false, "browser-live")).await;
    let api = Api::new(&ax);
    let executor = Executor::start(Reply::Accepted).await;
    let name = unique_name("live-export");
    let task = api
        .create_task(json!({
            "name": name, "cron": "0 0 0 1 1 *", "handlerUrl": executor.url, "maxRetry": 0,
        }))
        .await;
    let id = task["id"].as_i64().expect("id");
    let console = Console {
        browser: Browser::start().await,
        base: format!("http://{}", ax.addr()),
    };
    let browser = &console.browser;
    let live = "#live-status";
    // A page that reloaded would lose this.
    let mark = "window.axNotReloaded = true; return true";
    let not_reloaded = "return window.axNotReloaded === true";

    // The task's page: a half-typed params form with the keyboard in it.
    let task_path = format!("/console/tasks/{id}");
    console.open(&task_path, &format!("Task {name}")).await;
    browser.wait_for_text(live, "Live").await;
    browser.wait_for_text("main p.muted", "No runs.").await;
    let half = r#"{"region": "#;
    console.fill("params", half).await;
    browser.execute(mark).await;
    let (status, run) = api
        .post(&format!("/api/tasks/{id}/trigger"), json!({}))
        .await;
    assert_eq!(status, 201, "{run}");
    let request_id = run["requestId"].as_str().expect("requestId").to_string();
    browser
        .wait_for_text("#task-runs-live td .badge", "RUNNING")
        .await;
    assert_eq!(browser.execute(not_reloaded).await, json!(true));
    assert_eq!(browser.find("#params").await.value().await, half);
    assert_eq!(
        browser.active().await.attr("id").await.as_deref(),
        Some("params")
    );
    console.shot("live-task").await;

    // The run's page: lines and progress appear as the executor sends them, then its end.
    let delivery = executor
        .wait_for(1, WAIT)
        .await
        .into_iter()
        .next()
        .expect("the executor got the run");
    assert_eq!(delivery.request_id, request_id);
    let run_path = format!("/console/runs/{request_id}");
    console.open(&run_path, "Run").await;
    browser.wait_for_text("dd .badge", "RUNNING").await;
    browser.wait_for_text(live, "Live").await;
    browser.execute(mark).await;
    let log_path = format!("/api/instances/{request_id}/log");
    let token = delivery.body["callbackToken"].clone();
    for (lines, progress) in [
        (vec!["reading 3 files"], 10),
        (vec!["file 1 of 3 done", "file 2 of 3 done"], 66),
    ] {
        let (status, reply) = api
            .post(
                &log_path,
                json!({"callbackToken": token, "lines": lines, "progress": progress}),
            )
            .await;
        assert_eq!(status, 200, "{reply}");
        browser
            .wait_for_text("pre.lines", lines[lines.len() - 1])
            .await;
        browser
            .wait_until(&format!(
                "return document.querySelector('progress#progress-1')?.value === {progress}"
            ))
            .await;
    }
    assert!(browser
        .find("pre.lines")
        .await
        .text()
        .await
        .contains("reading 3 files"));
    browser
        .execute("document.getElementById('log-heading').scrollIntoView(); return true")
        .await;
    console.shot("live-run-log").await;
    let (status, reply) = api
        .post(
            "/api/callback",
            delivery.callback("SUCCESS", json!({"output": "3 files exported"})),
        )
        .await;
    assert_eq!(status, 200, "{reply}");
    browser.wait_for_text("dd .badge.good", "SUCCESS").await;
    browser
        .wait_for_text("pre.output", "3 files exported")
        .await;
    assert_eq!(browser.execute(not_reloaded).await, json!(true));
    assert!(
        browser.try_find("form[action$='/cancel']").await.is_none(),
        "an ended run has no cancel"
    );
    console.shot("live-run-ended").await;

    // The runs list of the task and the dashboard take in the next run.
    console
        .open(&format!("/console/runs?task={id}"), "Runs")
        .await;
    browser.wait_for_text(live, "Live").await;
    browser.execute(mark).await;
    api.post(&format!("/api/tasks/{id}/trigger"), json!({}))
        .await;
    browser
        .wait_until("return document.querySelectorAll('#runs-live tbody tr').length === 2")
        .await;
    assert_eq!(browser.execute(not_reloaded).await, json!(true));
    console.open("/console", "Dashboard").await;
    browser.wait_for_text(live, "Live").await;
    browser.execute(mark).await;
    let before = browser.find("#dashboard-live").await.text().await;
    for delivery in executor.wait_for(2, WAIT).await.iter().skip(1) {
        api.post(
            "/api/callback",
            delivery.callback("FAILED", json!({"message": "disk full"})),
        )
        .await;
    }
    browser
        .wait_for_text("#dashboard-live td", "disk full")
        .await;
    assert_ne!(browser.find("#dashboard-live").await.text().await, before);
    assert_eq!(browser.execute(not_reloaded).await, json!(true));
    console.shot("live-dashboard").await;

    drop(console);
    ax.shutdown().await;
    executor.stop().await;
}

/// `2026-12-01 10:00:00 UTC`, as the preview's UTC column shows it, in `zone`'s local time as
/// its other column shows it: `2026-12-01 11:00:00 +01:00`.
fn local_text(utc: &str, zone: &str) -> String {
    let instant: jiff::Timestamp = format!("{}Z", utc.trim_end_matches(" UTC").replace(' ', "T"))
        .parse()
        .unwrap_or_else(|err| panic!("{utc:?}: {err}"));
    let zoned = instant.in_tz(zone).expect("a known zone");
    zoned.strftime("%Y-%m-%d %H:%M:%S %:z").to_string()
}

/// An admin's round with tokens configured: signs in; makes a task in the editor (a bad cron
/// refused beside its field, the live preview in English and in the task's zone); watches its
/// runs; pauses and resumes its scene; triggers a run with other params, which the executor
/// receives; looks at the delete confirmation and the audit log; signs out.
#[actix_rt::test(system = "crate::common::TestSystem")]
async fn an_admin_signs_in_makes_a_task_and_runs_it() {
    let started = Instant::now();
    let store = TestStore::sqlite();
    let mut settings = config(&store, false, "browser-admin");
    settings.server.admin_token = Some(ADMIN_TOKEN.into());
    let ax = start_ax(&settings).await;
    let executor = Executor::start(Reply::Success).await;
    let console = Console {
        browser: Browser::start().await,
        base: format!("http://{}", ax.addr()),
    };
    let browser = &console.browser;
    let (scene, name) = (unique_name("payroll"), unique_name("every-second"));

    // A page sends a stranger to the sign-in page, and back to it after signing in.
    console.open("/console", "Sign in").await;
    assert!(browser
        .current_url()
        .await
        .ends_with("/console/sign-in?next=%2Fconsole"));
    console.shot("scenario-sign-in").await;
    console.fill("token", ADMIN_TOKEN).await;
    console.press_button("Sign in").await;
    console.on_page("Dashboard").await;
    browser
        .wait_for_text("header .who", "Signed in as admin")
        .await;
    console.shot("scenario-dashboard").await;

    // The editor, from the tasks page: a cron with second 61 first.
    console.open("/console/tasks", "Tasks").await;
    console.shot("scenario-tasks-empty").await;
    browser.click_text("a.button", "New task").await;
    console.on_page("New task").await;
    browser
        .wait_for_text("#preview-description", "Every minute")
        .await;
    console.shot("scenario-editor").await;
    console.fill("name", &name).await;
    console.fill("scene", &scene).await;
    console.fill("handlerUrl", &executor.url).await;
    console.fill("params", r#"{"source": "schedule"}"#).await;
    browser
        .wait_for_text("#params-check", "Valid JSON object.")
        .await;
    console.fill("cron", "61 * * * * *").await;
    // The live preview says what is wrong before the form is sent.
    browser.wait_for_text("#preview p.error", "61").await;
    console.expected_errors(&[("/api/cron/next", 400)]).await;
    console.press_button("Save task").await;
    // The refused form's page logs its 400 once it has loaded.
    let error = browser.wait_for("span.field-error#cron-error").await;
    console
        .expected_errors(&[("/console/tasks/new", 400)])
        .await;
    console.on_page("New task").await;
    assert!(error.text().await.contains("61"), "{}", error.text().await);
    assert_eq!(
        browser
            .find("#cron")
            .await
            .attr("aria-describedby")
            .await
            .as_deref(),
        Some("cron-error")
    );
    browser.wait_for_text("#form-error", "Not saved").await;
    assert!(
        browser
            .try_find(".field-error:not(#cron-error)")
            .await
            .is_none(),
        "only the cron is wrong"
    );
    // What was typed stays.
    assert_eq!(browser.find("#cron").await.value().await, "61 * * * * *");
    assert_eq!(browser.find("#name").await.value().await, name);
    assert_eq!(browser.find("#scene").await.value().await, scene);
    assert_eq!(
        browser.find("#handlerUrl").await.value().await,
        executor.url
    );
    assert_eq!(
        browser.find("#params").await.value().await,
        r#"{"source": "schedule"}"#
    );
    console.shot("scenario-editor-cron-error").await;

    // A good cron: the preview reads it in English as it is typed; in Berlin's zone it lists
    // Berlin's local times beside UTC.
    console.fill("cron", "* * * * * *").await;
    browser
        .wait_for_text("#preview #preview-description", "Every second")
        .await;
    browser.wait_for_text("#preview th", "In UTC").await;
    console.fill("timeZone", "Europe/Berlin").await;
    browser
        .wait_for_text("#preview th", "In Europe/Berlin")
        .await;
    console.expected_errors(&[("/api/cron/next", 400)]).await;
    let cells = browser
        .execute(
            "return [...document.querySelectorAll('#preview tbody tr:first-child td')]\
             .map(td => td.textContent)",
        )
        .await;
    let (local, utc) = (
        cells[0].as_str().expect("local"),
        cells[1].as_str().expect("UTC"),
    );
    assert_eq!(local, local_text(utc, "Europe/Berlin"), "{cells}");
    assert_eq!(
        browser.find_all("#preview tbody tr").await.len(),
        10,
        "the next 10 fire times"
    );
    browser
        .wait_for_text("#preview-description", "Every second (Europe/Berlin time)")
        .await;
    console.shot("scenario-editor-preview").await;
    console.press_button("Save task").await;
    console.on_page(&format!("Task {name}")).await;
    browser.wait_for_text("p.notice", "Task created.").await;
    let url = browser.current_url().await;
    let task_path = url[url.find("/console/tasks/").expect("the task's page")..]
        .split('?')
        .next()
        .expect("a path")
        .to_string();
    browser.wait_for_text("dd", "Europe/Berlin").await;
    browser.wait_for_text("dd code", "* * * * * *").await;
    browser.wait_for_text("dd .badge.good", "ENABLED").await;
    console.shot("scenario-task-created").await;

    // It fires every second: its runs appear on its page.
    console
        .reload_until(
            &task_path,
            &format!("Task {name}"),
            "td .badge.good",
            "SUCCESS",
        )
        .await;
    let scheduled = executor.wait_for(1, WAIT).await;
    assert!(!scheduled.is_empty(), "the executor got the runs");
    assert_eq!(scheduled[0].body["params"], json!({"source": "schedule"}));
    console.shot("scenario-task-runs").await;

    // Its scene paused and resumed from the scenes page: the notice counts the task, which
    // keeps its own status and shows its scene's pause beside it.
    console.open("/console/scenes", "Scenes").await;
    browser.wait_for_text("td a", &scene).await;
    console.shot("scenario-scenes").await;
    let count_of = |status: &str| format!("a[href='/console/tasks?scene={scene}&status={status}']");
    // The scenes page links to a confirmation, which does it.
    let pause = format!("a[aria-label='Pause scene {scene}']");
    browser.find(&pause).await.click().await;
    console.on_page(&format!("Pause scene {scene}?")).await;
    browser.find("main form.inline button").await.click().await;
    console.on_page("Scenes").await;
    browser
        .wait_for_text("p.notice", "Scene paused: 1 task stops firing.")
        .await;
    assert_eq!(browser.find(&count_of("PAUSED")).await.text().await, "0");
    assert_eq!(browser.find(&count_of("ENABLED")).await.text().await, "1");
    console.shot("scenario-scene-paused").await;
    console.open(&task_path, &format!("Task {name}")).await;
    browser.wait_for_text("dd .badge", "SCENE PAUSED").await;
    browser.wait_for_text("dd .badge.good", "ENABLED").await;
    console.shot("scenario-task-paused").await;
    console.open("/console/scenes", "Scenes").await;
    // The scenes page links to a confirmation, which does it.
    let resume = format!("a[aria-label='Resume scene {scene}']");
    browser.find(&resume).await.click().await;
    console.on_page(&format!("Resume scene {scene}?")).await;
    browser.find("main form.inline button").await.click().await;
    console.on_page("Scenes").await;
    browser
        .wait_for_text("p.notice", "Scene resumed: 1 task fires again.")
        .await;
    assert_eq!(browser.find(&count_of("ENABLED")).await.text().await, "1");
    console.shot("scenario-scene-resumed").await;
    console.open(&task_path, &format!("Task {name}")).await;
    browser.wait_for_text("dd .badge.good", "ENABLED").await;

    // A run now, with other params: the form goes on to the run's page; the executor gets them.
    let params = json!({"source": "browser", "batch": 7});
    console.fill("params", &params.to_string()).await;
    console.press_button("Trigger run").await;
    console.on_page("Run").await;
    browser.wait_for_text("p.notice", "Run triggered.").await;
    let url = browser.current_url().await;
    let run_path = url[url.find("/console/runs/").expect("the run's page")..]
        .split('?')
        .next()
        .expect("a path")
        .to_string();
    let request_id = run_path.trim_start_matches("/console/runs/").to_string();
    browser.wait_for_text("dd", "MANUAL").await;
    browser.wait_for_text("dd pre", "\"browser\"").await;
    let deadline = Instant::now() + WAIT;
    let delivered = loop {
        let found = executor
            .received()
            .into_iter()
            .find(|r| r.request_id == request_id);
        match found {
            Some(delivery) => break delivery,
            None if Instant::now() > deadline => panic!("the executor never got {request_id}"),
            None => actix_rt::time::sleep(Duration::from_millis(50)).await,
        }
    };
    assert_eq!(delivered.body["params"], params);
    console
        .reload_until(&run_path, "Run", "dd .badge.good", "SUCCESS")
        .await;
    browser.wait_for_text("dd a", &name).await;
    browser.wait_for_text("button", "Run again").await;
    console.shot("scenario-run").await;

    // The delete confirmation says what happens, and nothing is deleted without its button.
    console.open(&task_path, &format!("Task {name}")).await;
    browser.click_text("a.button.danger", "Delete").await;
    console.on_page(&format!("Delete task {name}?")).await;
    browser
        .wait_for_text("main p", "stops firing on every ax process")
        .await;
    browser
        .wait_for_text("p[role=note]", "Its run history stays.")
        .await;
    browser.wait_for_text("button.danger", "Delete task").await;
    console.shot("scenario-delete-confirmation").await;
    browser.click_text("main a", "Keep it").await;
    console.on_page(&format!("Task {name}")).await;

    // The audit log: each change, by the admin.
    console.open("/console/audit", "Audit log").await;
    browser.wait_for_text("td code", "scene.resume").await;
    let rows = browser
        .execute(
            "return [...document.querySelectorAll('main tbody tr')]\
             .map(tr => [tr.cells[1].textContent, tr.cells[2].textContent, tr.cells[3].textContent])",
        )
        .await;
    let rows: Vec<(String, String, String)> = serde_json::from_value(rows).expect("rows");
    for (action, target) in [
        ("task.create", &name),
        ("scene.pause", &scene),
        ("scene.resume", &scene),
        ("task.trigger", &name),
    ] {
        assert!(
            rows.iter().any(|(actor, a, t)| actor == "admin"
                && a == action
                && t.contains(target.as_str())),
            "no {action} of {target} by admin in {rows:?}"
        );
    }
    assert!(
        rows.iter().all(|(actor, _, _)| actor == "admin"),
        "{rows:?}"
    );
    console.shot("scenario-audit").await;

    // Signing out: back at the sign-in page, and the pages ask for it again.
    console.press_button("Sign out").await;
    console.on_page("Sign in").await;
    browser.wait_for_text("p.notice", "Signed out.").await;
    console.shot("scenario-signed-out").await;
    console.open(&task_path, "Sign in").await;
    let url = browser.current_url().await;
    assert!(
        url.contains("/console/sign-in?next=%2Fconsole%2Ftasks%2F"),
        "{url}"
    );
    assert!(browser.try_find("header .who").await.is_none());

    drop(console);
    ax.shutdown().await;
    executor.stop().await;
    println!("the admin's round took {:?}", started.elapsed());
}
