use super::*;
use crate::console::session::tests::visitor;
use ax_core::security::{Principal, Role};

fn days(dates: &str, ranges: &str, weekdays: &[&str]) -> Days {
    Days {
        dates: dates.into(),
        ranges: ranges.into(),
        weekdays: weekdays.iter().map(|day| day.to_string()).collect(),
    }
}

fn date(text: &str) -> NaiveDate {
    text.parse().expect("a date")
}

/// The field and message of the form's refusal of `days`.
fn refused(days: &Days) -> (Option<String>, String) {
    let err = days.calendar().expect_err("refused");
    (err.field().map(str::to_string), err.to_string())
}

#[test]
fn the_forms_days_make_the_apis_calendar_and_back() {
    let typed = days(
        "2030-12-26\n\n 2030-12-25 \r\n",
        "2030-12-30..2031-01-01\n2031-04-01 .. 2031-04-02",
        &["SUN", "SAT"],
    );
    let calendar = typed.calendar().expect("a calendar");
    assert_eq!(calendar.dates.len(), 2);
    assert!(calendar.holds(date("2030-12-31")) && calendar.holds(date("2031-04-02")));
    assert_eq!(calendar.weekdays.len(), 2);
    let shown = Days::of(&calendar);
    assert_eq!(shown.dates, "2030-12-25\n2030-12-26", "in order");
    assert_eq!(
        shown.ranges,
        "2030-12-30..2031-01-01\n2031-04-01..2031-04-02"
    );
    assert_eq!(shown.weekdays, ["SAT", "SUN"]);
    assert_eq!(shown.calendar().ok(), Some(calendar));
    assert_eq!(days("", "", &[]).calendar().ok(), Some(Calendar::default()));
}

#[test]
fn a_refused_item_names_its_text_area_and_line() {
    // Blank lines count: the third date is on line 4.
    let (field, message) = refused(&days("2030-01-01\n2030-01-02\n\n2030-02-30", "", &[]));
    assert_eq!(field.as_deref(), Some("dates"));
    assert!(message.starts_with("line 4: must be a date"), "{message}");
    assert!(message.contains("2030-02-30"), "{message}");

    let (field, message) = refused(&days("", "2030-01-01..2030-01-02\n2030-01-05", &[]));
    assert_eq!(field.as_deref(), Some("ranges"));
    assert!(
        message.starts_with("line 2: `2030-01-05` is not a range"),
        "{message}"
    );
    assert!(
        !message.contains("\"from\""),
        "in the form's terms: {message}"
    );

    let (field, message) = refused(&days("", "2030-01-05..2030-01-01", &[]));
    assert_eq!(field.as_deref(), Some("ranges"));
    assert_eq!(message, "line 1: from 2030-01-05 is after to 2030-01-01");

    // A weekday no checkbox sends.
    let (field, message) = refused(&days("", "", &["MON", "FUNDAY"]));
    assert_eq!(field.as_deref(), Some("weekdays"));
    assert!(message.contains("FUNDAY"), "{message}");

    // Out of the years: the date is named.
    let (field, message) = refused(&days("1900-01-01", "", &[]));
    assert_eq!(field.as_deref(), Some("dates"));
    assert!(message.contains("1900-01-01"), "{message}");
}

#[test]
fn a_new_calendar_is_refused_for_its_name_and_days_at_once() {
    let new = NewCalendar {
        name: "Bad Name".into(),
        days: days("nope", "", &[]),
    };
    let err = new.read().expect_err("refused");
    let fields: Vec<String> = err.field_errors().into_iter().map(|e| e.field).collect();
    assert_eq!(fields, ["name", "dates"]);
    let new = NewCalendar {
        name: "de-holidays".into(),
        days: days("2030-12-25", "", &[]),
    };
    assert_eq!(
        new.read().ok().map(|(name, _)| name.to_string()).as_deref(),
        Some("de-holidays")
    );
}

fn shown(count: i64) -> Shown {
    let calendar = days("2030-12-25", "2030-12-30..2031-01-01", &["SUN"])
        .calendar()
        .expect("a calendar");
    Shown {
        row: CalendarRow {
            name: "holidays".into(),
            calendar,
            updated_at: chrono::DateTime::UNIX_EPOCH.naive_utc(),
        },
        tasks: (1..=count.min(2))
            .map(|id| TaskUsing {
                id: ax_core::run::TaskId(id),
                scene: "ops".into(),
                name: format!("task-{id}"),
            })
            .collect(),
        count,
    }
}

fn viewer() -> Visitor {
    let principal = Principal {
        role: Role::Viewer,
        ..Principal::admin("wallboard")
    };
    Visitor {
        principal,
        ..visitor()
    }
}

#[test]
fn a_calendars_page_shows_its_days_year_and_tasks_and_the_form_to_admins() {
    let shown = shown(3);
    let days = Days::of(&shown.row.calendar);
    let html = calendar_page(&visitor(), &shown, 2030, &days, &[]).into_string();
    assert!(html.contains(r#"aria-current="page">Calendars"#), "{html}");
    assert!(html.contains("2030-12-30 to 2031-01-01"), "{html}");
    assert!(html.contains(r#"<a href="/console/tasks/2">ops/task-2</a>"#));
    assert!(html.contains("The first 2 of 3, by id."), "{html}");
    // December 2030: the 25th a date off, the 30th and 31st in the range, Sundays off.
    let december = html.split_once(r#"id="month-12""#).expect("December").1;
    for day in ["2030-12-25", "2030-12-30", "2030-12-31", "2030-12-01"] {
        assert!(
            december.contains(&format!(r#"title="{day}: off""#)),
            "{day}"
        );
    }
    assert!(!december.contains(r#"title="2030-12-24: off""#));
    assert!(html.contains(r#"href="/console/calendars/holidays?year=2031""#));
    // The form holds its days, its weekdays checked; a change's links.
    assert!(
        html.contains(r#"action="/console/calendars/holidays""#),
        "{html}"
    );
    assert!(html.contains(">2030-12-25</textarea>"), "{html}");
    assert!(html.contains(r#"value="SUN" checked"#), "{html}");
    assert!(!html.contains(r#"value="SAT" checked"#), "{html}");
    assert!(html.contains(r#"href="/console/calendars/holidays/delete""#));

    let html = calendar_page(&viewer(), &shown, 2030, &days, &[]).into_string();
    assert!(!html.contains("<form class=\"editor") && !html.contains("/delete\""));
    assert!(html.contains("ops/task-1"));
}

#[test]
fn a_refusal_is_beside_its_field_and_summed_up_above() {
    let shown = shown(0);
    let typed = days("2030-01-01\n2030-13-01", "", &[]);
    let refusals = Refusal::all(&typed.calendar().expect_err("refused"));
    let html = calendar_page(&visitor(), &shown, 2030, &typed, &refusals).into_string();
    assert!(
        html.contains(r#"<span class="field-error" id="dates-error">line 2: must be a date"#),
        "{html}"
    );
    assert!(html.contains(r#"aria-describedby="dates-error""#));
    assert!(html.contains(r##"<a href="#dates">Dates off"##), "{html}");
    assert!(
        html.contains("2030-13-01</textarea>"),
        "what was typed stays"
    );
    assert!(html.contains("No task names it."));
}

#[test]
fn the_name_hint_states_the_bound_the_api_enforces() {
    let (_, hint) = declared("name").expect("the name field");
    let bound = format!("1 to {} of a-z 0-9 _ . -", calendar::MAX_NAME_CHARS);
    assert!(hint.starts_with(&bound), "{hint}");
    assert!(calendar::name(&"a".repeat(calendar::MAX_NAME_CHARS)).is_ok());
    assert!(calendar::name(&"a".repeat(calendar::MAX_NAME_CHARS + 1)).is_err());
}

#[test]
fn the_list_offers_a_new_calendar_to_admins_only() {
    let calendars = [CalendarUse {
        row: shown(0).row,
        tasks: 4,
    }];
    let new = NewCalendar::default();
    let html = list_page(&visitor(), &calendars, &new, &[]).into_string();
    assert!(html.contains(r#"<a href="/console/calendars/holidays">holidays</a>"#));
    assert!(html.contains(r#"<td class="num">4</td>"#), "{html}");
    assert!(html.contains("<td>SUN</td>"), "{html}");
    assert!(html.contains(r#"action="/console/calendars""#) && html.contains(r#"name="name""#));
    let html = list_page(&viewer(), &calendars, &new, &[]).into_string();
    assert!(!html.contains("<form class=\"editor") && !html.contains(r#"name="name""#));
}

#[test]
fn deleting_one_in_use_names_its_tasks() {
    let html = delete_page(
        &visitor(),
        &shown(2),
        Some("calendar `holidays` is used by 2 tasks"),
    )
    .into_string();
    assert!(
        html.contains(r#"<p class="error" role="alert">calendar `holidays`"#),
        "{html}"
    );
    assert!(html.contains("2 tasks name it"), "{html}");
    assert!(html.contains(r#"href="/console/tasks/1""#));
    let html = delete_page(&visitor(), &shown(0), None).into_string();
    assert!(html.contains("No task names it: deleting it changes no schedule."));
}
