//! The console's calendar pages over HTTP, ax started in-process on each store: the list, a
//! calendar made through its form (a name taken refused, not overwritten), its days changed
//! (a line refused beside its text area, naming the line), the tasks naming it on its page and
//! its calendars on theirs, its delete refused while a task names it and done when none does;
//! and a viewer, who is offered no form and whose every change is refused.

use serde_json::{json, Value};

use crate::common::{config, on_each_backend, start_ax, unique_name, Api, TestStore};
use crate::console::{assert_error_page, Visitor, ADMIN_TOKEN, VIEWER_TOKEN};

const HANDLER: &str = "http://127.0.0.1:9/run";

/// The text of the refusal beside field `field`; fails the test when there is none.
fn error_beside<'a>(body: &'a str, field: &str) -> &'a str {
    let beside = format!(r#"<span class="field-error" id="{field}-error">"#);
    body.split_once(&beside)
        .and_then(|(_, rest)| rest.split_once("</span>"))
        .map(|(error, _)| error)
        .unwrap_or_else(|| panic!("no error beside {field}: {body}"))
}

/// A calendar as the JSON API shows it, after a 200.
async fn calendar_of(api: &Api, name: &str) -> Value {
    let (status, calendar) = api.get(&format!("/api/calendars/{name}")).await;
    assert_eq!(status, 200, "calendar {name}: {calendar}");
    calendar
}

/// The calendar form's fields: the text areas as typed, a `weekdays` field a day checked.
fn days<'a>(dates: &'a str, ranges: &'a str, weekdays: &[&'a str]) -> Vec<(&'a str, &'a str)> {
    let mut fields = vec![("dates", dates), ("ranges", ranges)];
    fields.extend(weekdays.iter().map(|day| ("weekdays", *day)));
    fields
}

/// `days` with a `name` first: the new calendar's form.
fn named<'a>(name: &'a str, days: Vec<(&'a str, &'a str)>) -> Vec<(&'a str, &'a str)> {
    std::iter::once(("name", name)).chain(days).collect()
}

async fn calendars_in_the_console(store: TestStore) {
    let ax = start_ax(&config(&store, false, "console-calendars")).await;
    let api = Api::new(&ax);
    let mut visitor = Visitor::new(&ax);

    // No calendar yet: the list says so and offers the form, under its own navigation entry.
    let (status, _, list) = visitor.get("/console/calendars").await;
    assert_eq!(status, 200, "{list}");
    assert!(list.contains("No calendars yet."), "{list}");
    assert!(list.contains(r#"href="/console/calendars" aria-current="page">Calendars"#));
    assert!(list.contains(r#"action="/console/calendars""#) && list.contains(r#"name="dates""#));

    // Made through the form: on to its page, which says so.
    let made = days(
        "2030-12-25\r\n2030-12-26",
        "2030-12-30..2031-01-01",
        &["SAT"],
    );
    let (status, location, body) = visitor
        .post("/console/calendars", &named("holidays", made.clone()))
        .await;
    assert_eq!(status, 303, "{body}");
    let page = location.expect("to its page");
    assert_eq!(page, "/console/calendars/holidays?done=calendar-created");
    let held = calendar_of(&api, "holidays").await;
    assert_eq!(held["dates"], json!(["2030-12-25", "2030-12-26"]));
    assert_eq!(
        held["ranges"],
        json!([{"from": "2030-12-30", "to": "2031-01-01"}])
    );
    assert_eq!(held["weekdays"], json!(["SAT"]));
    let (status, _, shown) = visitor.get(&page).await;
    assert_eq!(status, 200, "{shown}");
    assert!(shown.contains("Calendar created."), "{shown}");
    assert!(shown.contains("2030-12-30 to 2031-01-01"), "{shown}");
    assert!(shown.contains("No task names it."), "{shown}");

    // A name taken already is refused beside the name; the calendar stays as it was.
    let other = days("2031-05-01", "", &[]);
    let (status, _, body) = visitor
        .post("/console/calendars", &named("holidays", other))
        .await;
    assert_eq!(status, 409, "{body}");
    assert!(
        error_beside(&body, "name").contains("exists already"),
        "{body}"
    );
    assert!(
        body.contains(">2031-05-01</textarea>"),
        "what was typed stays"
    );
    assert_eq!(calendar_of(&api, "holidays").await, held, "not overwritten");
    // A bad name and a bad date: both refused at once, nothing made.
    let bad = days("2031-02-30", "", &[]);
    let (status, _, body) = visitor
        .post("/console/calendars", &named("Bad Name", bad))
        .await;
    assert_eq!(status, 400, "{body}");
    assert!(error_beside(&body, "name").contains("a-z 0-9"), "{body}");
    assert!(
        error_beside(&body, "dates").starts_with("line 1: must be a date"),
        "{body}"
    );
    assert!(body.contains(r##"<a href="#name">"##) && body.contains(r##"<a href="#dates">"##));
    let (_, all) = api.get("/api/calendars").await;
    assert_eq!(all["items"].as_array().map(Vec::len), Some(1), "{all}");

    // The list: its counts, linked to its page.
    let (_, _, list) = visitor.get("/console/calendars").await;
    assert!(list.contains(r#"<a href="/console/calendars/holidays">holidays</a>"#));
    assert!(
        list.contains(
            r#"<td class="num">2</td><td class="num">1</td><td>SAT</td><td class="num">0</td>"#
        ),
        "{list}"
    );

    // A change with a date that is none: refused beside the dates, on its line (blank lines
    // counted), what was typed kept and nothing changed.
    let refused = days(
        "2030-12-25\n\n2030-02-30",
        "2030-12-30..2031-01-01",
        &["SAT"],
    );
    let (status, _, body) = visitor.post("/console/calendars/holidays", &refused).await;
    assert_eq!(status, 400, "{body}");
    let error = error_beside(&body, "dates");
    assert!(error.starts_with("line 3: must be a date"), "{error}");
    assert!(error.contains("2030-02-30"), "{error}");
    assert!(
        body.contains("2030-02-30</textarea>"),
        "what was typed stays"
    );
    assert_eq!(calendar_of(&api, "holidays").await, held, "nothing saved");
    // A range's line that is not one, in the form's terms.
    let refused = days("", "2030-12-30..2031-01-01\n2031-01-05", &[]);
    let (status, _, body) = visitor.post("/console/calendars/holidays", &refused).await;
    assert_eq!(status, 400, "{body}");
    assert!(
        error_beside(&body, "ranges").starts_with("line 2: `2031-01-05` is not a range"),
        "{body}"
    );
    // Saved: its new days, on its page with the notice.
    let changed = days("2030-12-24", "", &["SAT", "SUN"]);
    let (status, location, body) = visitor.post("/console/calendars/holidays", &changed).await;
    assert_eq!(status, 303, "{body}");
    let page = location.expect("to its page");
    assert_eq!(page, "/console/calendars/holidays?done=calendar-saved");
    let now = calendar_of(&api, "holidays").await;
    assert_eq!(now["dates"], json!(["2030-12-24"]));
    assert_eq!(now["ranges"], json!([]));
    assert_eq!(now["weekdays"], json!(["SAT", "SUN"]));
    let (_, _, shown) = visitor.get(&page).await;
    assert!(shown.contains("Calendar saved"), "{shown}");
    assert!(shown.contains(r#"value="SUN" checked"#), "{shown}");

    // A task naming it: listed on the calendar's page, and the calendar on the task's.
    let scene = unique_name("payroll");
    let task = api
        .create_task(json!({
            "name": "monthly", "scene": scene, "cron": "0 0 9 1 * *", "handlerUrl": HANDLER,
            "enabled": false, "calendars": {"exclude": ["holidays"], "policy": "NEXT_OPEN_DAY"},
        }))
        .await;
    let id = task["id"].as_i64().expect("id");
    let (_, _, shown) = visitor.get("/console/calendars/holidays").await;
    assert!(
        shown.contains(&format!(
            r#"<a href="/console/tasks/{id}">{scene}/monthly</a>"#
        )),
        "{shown}"
    );
    let (_, _, task_page) = visitor.get(&format!("/console/tasks/{id}")).await;
    let calendars = task_page
        .split_once("<dt>Calendars</dt>")
        .map(|(_, rest)| rest)
        .unwrap_or_else(|| panic!("no calendars in the definition: {task_page}"));
    assert!(
        calendars.contains(r#"<a href="/console/calendars/holidays">holidays</a>"#),
        "{calendars}"
    );
    assert!(
        calendars.contains("<code>NEXT_OPEN_DAY</code>"),
        "{calendars}"
    );
    let (_, _, list) = visitor.get("/console/calendars").await;
    assert!(list.contains(r#"<td class="num">1</td>"#), "{list}");

    // Its delete: asked, then refused while the task names it, naming the task.
    let (status, _, confirm) = visitor.get("/console/calendars/holidays/delete").await;
    assert_eq!(status, 200, "{confirm}");
    assert!(confirm.contains("1 task names it"), "{confirm}");
    let (status, _, body) = visitor
        .post("/console/calendars/holidays/delete", &[])
        .await;
    assert_eq!(status, 409, "{body}");
    assert!(
        body.contains(&format!("{scene}/monthly ({id})")),
        "the refusal names the task: {body}"
    );
    assert!(body.contains(&format!(r#"href="/console/tasks/{id}""#)));
    calendar_of(&api, "holidays").await;
    // Taken out of the task's calendars, it is deleted.
    let (status, body) = api
        .call(
            "PATCH",
            &format!("/api/tasks/{id}"),
            Some(json!({"calendars": null})),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let (status, location, body) = visitor
        .post("/console/calendars/holidays/delete", &[])
        .await;
    assert_eq!(status, 303, "{body}");
    let list = location.expect("to the list");
    assert_eq!(list, "/console/calendars?done=calendar-deleted");
    assert_eq!(api.get("/api/calendars/holidays").await.0, 404);
    let (_, _, list) = visitor.get(&list).await;
    assert!(
        list.contains("Calendar deleted.") && list.contains("No calendars yet."),
        "{list}"
    );
    // A calendar that is not there, or could not be.
    for path in [
        "/console/calendars/holidays",
        "/console/calendars/Not%20One",
    ] {
        let (status, _, body) = visitor.get(path).await;
        assert_eq!(status, 404, "{path}: {body}");
    }
    ax.shutdown().await;
}

on_each_backend!(
    calendars_in_the_console,
    sqlite: calendars_on_sqlite,
    mariadb: calendars_on_mysql,
    postgres: calendars_on_postgres
);

/// A viewer reads the calendars and the tasks naming them, but no page offers a change, the
/// delete confirmation is refused, and every change sent is refused (403 naming the token).
#[actix_rt::test(system = "crate::common::TestSystem")]
async fn a_viewer_reads_calendars_and_changes_none() {
    let store = TestStore::sqlite();
    let mut settings = config(&store, false, "console-calendars-viewer");
    settings.server.admin_token = Some(ADMIN_TOKEN.into());
    settings.server.tokens = vec![ax_server::config::NamedToken {
        name: "wallboard".into(),
        token: VIEWER_TOKEN.into(),
        role: ax_core::security::Role::Viewer,
        groups: None,
    }];
    let ax = start_ax(&settings).await;
    let mut admin = Visitor::new(&ax);
    admin.sign_in(ADMIN_TOKEN).await;
    let (status, _, body) = admin
        .post(
            "/console/calendars",
            &named("weekends", days("", "", &["SAT", "SUN"])),
        )
        .await;
    assert_eq!(status, 303, "{body}");

    let mut viewer = Visitor::new(&ax);
    viewer.sign_in(VIEWER_TOKEN).await;
    let changes = [
        r#"action="/console/calendars""#,
        r#"action="/console/calendars/weekends""#,
        r#"name="dates""#,
        r#"name="weekdays""#,
        "/console/calendars/weekends/delete",
    ];
    for page in ["/console/calendars", "/console/calendars/weekends"] {
        let (status, _, as_admin) = admin.get(page).await;
        assert_eq!(status, 200, "{page}");
        let (status, _, as_viewer) = viewer.get(page).await;
        assert_eq!(status, 200, "{page}: {as_viewer}");
        assert!(as_viewer.contains("Signed in as <strong>wallboard</strong>"));
        assert!(as_viewer.contains("weekends"), "{page}: {as_viewer}");
        for change in changes {
            let offered = as_viewer.contains(change);
            assert!(!offered, "{page} offers a viewer {change}: {as_viewer}");
        }
        assert!(
            changes.iter().any(|change| as_admin.contains(change)),
            "{page} offers an admin a change"
        );
    }
    let (_, _, weekends) = viewer.get("/console/calendars/weekends").await;
    assert!(
        weekends.contains(": off\""),
        "its weekends marked: {weekends}"
    );
    let (status, _, body) = viewer.get("/console/calendars/weekends/delete").await;
    assert_eq!(status, 403);
    assert_error_page(
        &viewer,
        &body,
        "Forbidden",
        "The token `wallboard` is a viewer",
    );
    // The CSRF token of the viewer's own session, so only the role refuses each.
    let sent = [
        (
            "/console/calendars",
            named("mine", days("2031-01-01", "", &[])),
        ),
        ("/console/calendars/weekends", days("2031-01-01", "", &[])),
        ("/console/calendars/weekends/delete", Vec::new()),
    ];
    for (path, fields) in sent {
        let (status, _, body) = viewer.post(path, &fields).await;
        assert_eq!(status, 403, "{path}: {body}");
        assert!(body.contains("wallboard"), "the refusal names the token");
    }
    let api = admin_api(&ax).await;
    assert_eq!(api["items"].as_array().map(Vec::len), Some(1), "{api}");
    assert_eq!(api["items"][0]["weekdays"], json!(["SAT", "SUN"]));
    assert_eq!(api["items"][0]["dates"], json!([]));
    ax.shutdown().await;
}

/// `GET /api/calendars` with the admin token.
async fn admin_api(ax: &ax_server::app::Ax) -> Value {
    let mut response = awc::Client::default()
        .get(format!("http://{}/api/calendars", ax.addr()))
        .insert_header(("Authorization", format!("Bearer {ADMIN_TOKEN}")))
        .send()
        .await
        .expect("an answer");
    assert_eq!(response.status().as_u16(), 200);
    response.json().await.expect("JSON")
}
