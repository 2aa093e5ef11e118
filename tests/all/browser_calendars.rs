//! Calendars in Chromium: one made through its form (a date and a range off), a bad line of its
//! days refused beside its text area; two tasks naming it (made through the API) show in their
//! next fire times the fire left out on a day off (`SKIP`) and the fire moved from one
//! (`NEXT_OPEN_DAY`), and their definitions link to the calendar, whose page lists them. The
//! pages fit a phone's width. Screenshots `console-calendars-*`, `console-calendar-*`.

use chrono::{Datelike, Days, NaiveDate, Utc};
use serde_json::json;

use crate::browser::Console;
use crate::common::webdriver::{Browser, LAPTOP, PHONE};
use crate::common::{config, start_ax, unique_name, Api, TestStore};

/// A day `n` days from today (UTC).
fn in_days(n: u64) -> NaiveDate {
    Utc::now().date_naive() + Days::new(n)
}

#[actix_rt::test(system = "crate::common::TestSystem")]
async fn calendars_in_chromium() {
    let store = TestStore::sqlite();
    let ax = start_ax(&config(&store, false, "browser-calendars")).await;
    let api = Api::new(&ax);
    let console = Console {
        browser: Browser::start().await,
        base: format!("http://{}", ax.addr()),
    };
    let browser = &console.browser;
    browser.set_window_size(LAPTOP.0, LAPTOP.1).await;
    // Off: a day two days on, and two days from four days on; every day between is open.
    let (off, range) = (in_days(2), (in_days(4), in_days(5)));

    // Made through the list's form, from the navigation.
    console.open("/console", "Dashboard").await;
    browser.click_text("nav a", "Calendars").await;
    console.on_page("Calendars").await;
    browser.wait_for_text("main p", "No calendars yet.").await;
    console.fill("name", "holidays").await;
    console.fill("dates", &off.to_string()).await;
    console
        .fill("ranges", &format!("{}..{}", range.0, range.1))
        .await;
    console.press_button("Create calendar").await;
    browser.wait_for_query("done=calendar-created").await;
    console.on_page("Calendar holidays").await;
    browser.wait_for_text("p.notice", "Calendar created.").await;
    console.shot("calendar").await;
    // This year's grid marks its days off (the one two days on may be next year's).
    if off.year() == Utc::now().year() {
        let marked = browser
            .wait_for(&format!("span.off[title='{off}: off']"))
            .await;
        browser
            .execute_with(
                "arguments[0].scrollIntoView({block: 'center'})",
                vec![marked.as_arg()],
            )
            .await;
        console.shot("calendar-year").await;
    }

    // A bad second line: refused beside the dates, naming the line; nothing saved.
    console
        .fill("dates", &format!("{off}\n{}-02-30", off.year()))
        .await;
    console.press_button("Save calendar").await;
    let error = browser
        .wait_for_text("span.field-error#dates-error", "line 2")
        .await;
    assert!(error.text().await.contains("must be a date"));
    // The refused form's page logs its 400 once it has loaded.
    console
        .expected_errors(&[("/console/calendars/holidays", 400)])
        .await;
    console.on_page("Calendar holidays").await;
    browser.wait_for_text("#form-error a", "Dates off").await;
    assert_eq!(
        browser
            .find("#dates")
            .await
            .attr("aria-invalid")
            .await
            .as_deref(),
        Some("true")
    );
    console.shot("calendar-refused").await;
    let (_, held) = api.get("/api/calendars/holidays").await;
    assert_eq!(held["dates"], json!([off.to_string()]), "{held}");

    // Two tasks naming it: every day at 09:00 UTC, leaving out the day off; and on the day
    // off's weekday only, moving its fire to the next open day.
    let scene = unique_name("calendars");
    let weekday = off.format("%a").to_string().to_uppercase();
    let mut ids = Vec::new();
    for (name, cron, policy) in [
        ("daily", "0 0 9 * * *".to_string(), "SKIP"),
        ("weekly", format!("0 0 9 * * {weekday}"), "NEXT_OPEN_DAY"),
    ] {
        let task = api
            .create_task(json!({
                "name": name, "scene": scene, "cron": cron, "timeZone": "UTC",
                "handlerUrl": "http://127.0.0.1:9/run", "enabled": false,
                "calendars": {"exclude": ["holidays"], "policy": policy},
            }))
            .await;
        ids.push(task["id"].as_i64().expect("id"));
    }

    // The daily task's next fire times: the day off's fire left out, struck through.
    console
        .open(&format!("/console/tasks/{}", ids[0]), "Task daily")
        .await;
    let left_out = browser
        .wait_for_text("tr.day-off .badge.idle", "day off in holidays: left out")
        .await;
    browser
        .execute_with(
            "arguments[0].scrollIntoView({block: 'center'})",
            vec![left_out.as_arg()],
        )
        .await;
    browser
        .wait_for_text("tr.day-off td.mono", &format!("{off} 09:00:00"))
        .await;
    console.shot("calendar-task-left-out").await;

    // The weekly task's: its fire moved from the day off to the next day, at the same time.
    console
        .open(&format!("/console/tasks/{}", ids[1]), "Task weekly")
        .await;
    let moved = browser
        .wait_for_text(
            ".badge.busy",
            &format!("moved from {} (holidays)", off.format("%a %Y-%m-%d")),
        )
        .await;
    browser
        .execute_with(
            "arguments[0].scrollIntoView({block: 'center'})",
            vec![moved.as_arg()],
        )
        .await;
    let next_day = off + Days::new(1);
    browser
        .wait_for_text("tr td.mono", &format!("{next_day} 09:00:00"))
        .await;
    console.shot("calendar-task-moved").await;

    // Its definition links to the calendar, whose page lists both tasks.
    browser
        .wait_for_text("dd.calendars", "Policy NEXT_OPEN_DAY")
        .await;
    browser.click_text("dd.calendars a", "holidays").await;
    console.on_page("Calendar holidays").await;
    for name in ["daily", "weekly"] {
        browser
            .wait_for_text("ul.tasks-naming a", &format!("{scene}/{name}"))
            .await;
    }

    // A phone's width: the list and the calendar's page fit it.
    browser.set_window_size(PHONE.0, PHONE.1).await;
    for (page, path, heading) in [
        ("calendars", "/console/calendars", "Calendars"),
        (
            "calendar",
            "/console/calendars/holidays",
            "Calendar holidays",
        ),
    ] {
        console.open(path, heading).await;
        console.fits_the_width(page).await;
        console.shot(page).await;
    }
    browser.set_window_size(LAPTOP.0, LAPTOP.1).await;
    console.open("/console/calendars", "Calendars").await;
    browser.wait_for_text("td a", "holidays").await;
    browser.wait_for_text("td.num", "2").await;
    console.shot("calendars").await;
    drop(console);
    ax.shutdown().await;
}
