//! The calendars pages: `/console/calendars` lists every calendar (and makes one, for those who
//! may change), `/console/calendars/{name}` shows one's days, a year of them and the tasks
//! naming it, with the form that changes its days; `…/delete` asks before deleting it.
//!
//! The forms' days are read by [`Calendar::from_json`], as the API reads its body, so a form is
//! refused for what the API would refuse; the refusal of an item of a list (`dates[2]`) is shown
//! beside the text area it was typed in, naming its line.

use actix_web::http::StatusCode;
use actix_web::{web, HttpRequest, HttpResponse, ResponseError};
use chrono::{Datelike, NaiveDate};
use maud::{html, Markup};
use serde_json::{json, Value};

use super::editor::Refusal;
use super::layout::{self, none, notice_link, page, scrolling, stored_time, Notice, Section};
use super::paths::{calendar_href, task_href, CALENDARS};
use super::session::{csrf_field, Submitted, Visitor};
use super::{admins_only, filters, html as respond, ok, see_other, ConsoleError};
use crate::error::ApiError;
use crate::service::calendars::CalendarUse;
use crate::service::error::ServiceError;
use crate::web::ApiState;
use ax_core::calendar::{self, Calendar, CalendarError, Weekday3, YEARS};
use ax_core::ids::CalendarName;
use ax_store::queries::calendars::{CalendarRow, TaskUsing};

/// The forms' fields, by their names (the API's), with their labels and hints.
const FIELDS: [(&str, &str, &str); 4] = [
    (
        "name",
        "Name",
        "1 to 64 of a-z 0-9 _ . -; tasks name it in their calendars.",
    ),
    ("dates", "Dates off", "One a line: YYYY-MM-DD."),
    (
        "ranges",
        "Ranges off",
        "One a line: the first and last days off, YYYY-MM-DD..YYYY-MM-DD.",
    ),
    (
        "weekdays",
        "Weekdays off",
        "Each such day of every week is off.",
    ),
];

/// What separates the first and the last day of a range on its line.
const RANGE_SEPARATOR: &str = "..";

/// `GET /console/calendars`.
pub async fn list(
    state: web::Data<ApiState>,
    visitor: Visitor,
) -> Result<HttpResponse, ConsoleError> {
    let calendars = state.service.calendars().await?;
    let new = NewCalendar::default();
    Ok(ok(list_page(&visitor, &calendars, &new, &[])))
}

/// `POST /console/calendars` (`name`, `dates`, `ranges`, `weekdays`): makes a calendar; a name
/// taken already is refused, the calendar of that name left as it is.
pub async fn create(
    state: web::Data<ApiState>,
    visitor: Visitor,
    form: Submitted,
) -> Result<HttpResponse, ConsoleError> {
    let sent = NewCalendar::sent(&form);
    let created = async {
        let (name, calendar) = sent.read()?;
        let actor = &visitor.principal;
        state
            .service
            .create_calendar(name.clone(), calendar, actor)
            .await?;
        Ok::<_, ConsoleError>(name)
    };
    match created.await {
        Ok(name) => Ok(see_other(&notice_link(
            &calendar_href(&name),
            Notice::CalendarCreated,
        ))),
        Err(err) => {
            let (status, refusals) = refused(err)?;
            let calendars = state.service.calendars().await?;
            let page = list_page(&visitor, &calendars, &sent, &refusals);
            Ok(respond(status, page))
        }
    }
}

/// `GET /console/calendars/{name}?year=`: the calendar, and its days in `year`: this year when
/// none is asked, or one no calendar may hold (the page's own links lead to the others).
pub async fn detail(
    state: web::Data<ApiState>,
    visitor: Visitor,
    path: web::Path<String>,
    req: HttpRequest,
) -> Result<HttpResponse, ConsoleError> {
    let shown = Shown::read(&state, name_in(&path)?).await?;
    let year = filters::params(&req)
        .get("year")
        .and_then(|year| year.parse().ok())
        .filter(|year| (YEARS.0..=YEARS.1).contains(year))
        .unwrap_or_else(|| state.service.now().year());
    let days = Days::of(&shown.row.calendar);
    Ok(ok(calendar_page(&visitor, &shown, year, &days, &[])))
}

/// `POST /console/calendars/{name}` (`dates`, `ranges`, `weekdays`): replaces its days; the
/// tasks naming it move their next runs onto the new days at once.
pub async fn save(
    state: web::Data<ApiState>,
    visitor: Visitor,
    path: web::Path<String>,
    form: Submitted,
) -> Result<HttpResponse, ConsoleError> {
    let name = name_in(&path)?;
    let sent = Days::sent(&form);
    let saved = async {
        let calendar = sent.calendar()?;
        let actor = &visitor.principal;
        state
            .service
            .put_calendar(name.clone(), calendar, actor)
            .await?;
        Ok::<_, ConsoleError>(())
    };
    match saved.await {
        Ok(()) => Ok(see_other(&notice_link(
            &calendar_href(&name),
            Notice::CalendarSaved,
        ))),
        Err(err) => {
            let (status, refusals) = refused(err)?;
            let shown = Shown::read(&state, name).await?;
            let year = state.service.now().year();
            let page = calendar_page(&visitor, &shown, year, &sent, &refusals);
            Ok(respond(status, page))
        }
    }
}

/// `GET /console/calendars/{name}/delete`: names the tasks that keep it from being deleted,
/// if any, and asks.
pub async fn confirm_delete(
    state: web::Data<ApiState>,
    visitor: Visitor,
    path: web::Path<String>,
) -> Result<HttpResponse, ConsoleError> {
    admins_only(&visitor)?;
    let shown = Shown::read(&state, name_in(&path)?).await?;
    Ok(ok(delete_page(&visitor, &shown, None)))
}

/// `POST /console/calendars/{name}/delete`: deletes it; while tasks name it, the page asks
/// again with the API's refusal (409), naming them.
pub async fn delete(
    state: web::Data<ApiState>,
    visitor: Visitor,
    path: web::Path<String>,
    _form: Submitted,
) -> Result<HttpResponse, ConsoleError> {
    let name = name_in(&path)?;
    let deleted = state
        .service
        .delete_calendar(name.clone(), &visitor.principal)
        .await;
    match deleted {
        Ok(()) => Ok(see_other(&notice_link(CALENDARS, Notice::CalendarDeleted))),
        Err(err @ ServiceError::CalendarInUse { .. }) => {
            let shown = Shown::read(&state, name).await?;
            let page = delete_page(&visitor, &shown, Some(&err.to_string()));
            Ok(respond(StatusCode::CONFLICT, page))
        }
        Err(err) => Err(err.into()),
    }
}

/// A calendar's name in a console path; anything else is a page that is not there.
fn name_in(path: &str) -> Result<CalendarName, ConsoleError> {
    calendar::name(path)
        .map_err(|_| ConsoleError::NotFound(format!("There is no calendar {path}.")))
}

/// A form's refusal as its page shows it again: the status and each field refused. Any other
/// error is the console's error page.
fn refused(err: ConsoleError) -> Result<(StatusCode, Vec<Refusal>), ConsoleError> {
    match err {
        ConsoleError::Refused(err) => Ok((err.status_code(), Refusal::all(&err))),
        other => Err(other),
    }
}

/// A calendar as its pages show it: its row, the first tasks naming it, how many do.
struct Shown {
    row: CalendarRow,
    tasks: Vec<TaskUsing>,
    count: i64,
}

impl Shown {
    async fn read(state: &ApiState, name: CalendarName) -> Result<Shown, ConsoleError> {
        let (row, tasks) = state.service.calendar(name).await?;
        let count = state.service.calendar_use_count(&row.name).await?;
        Ok(Shown { row, tasks, count })
    }
}

/// A calendar's days as its form shows them and sends them back.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Days {
    /// A date a line.
    dates: String,
    /// A range a line, its first and last days around [`RANGE_SEPARATOR`].
    ranges: String,
    /// The weekdays checked, as sent (`MON` … `SUN`).
    weekdays: Vec<String>,
}

impl Days {
    fn of(calendar: &Calendar) -> Days {
        let lines = |lines: Vec<String>| lines.join("\n");
        Days {
            dates: lines(calendar.dates.iter().map(NaiveDate::to_string).collect()),
            ranges: lines(
                calendar
                    .ranges
                    .iter()
                    .map(|range| format!("{}{RANGE_SEPARATOR}{}", range.from, range.to))
                    .collect(),
            ),
            weekdays: calendar
                .weekdays
                .iter()
                .map(|day| day.name().to_string())
                .collect(),
        }
    }

    fn sent(form: &Submitted) -> Days {
        let text = |name: &str| form.raw(name).unwrap_or_default().trim().to_string();
        Days {
            dates: text("dates"),
            ranges: text("ranges"),
            weekdays: form.all("weekdays").map(str::to_string).collect(),
        }
    }

    fn checked(&self, day: &str) -> bool {
        self.weekdays.iter().any(|checked| checked == day)
    }

    /// The calendar these days make, read as the API reads its body: an item of a list is a
    /// line of its text area, and the refusal of one names that line.
    fn calendar(&self) -> Result<Calendar, ApiError> {
        let (dates, ranges) = (filled_lines(&self.dates), filled_lines(&self.ranges));
        let body = json!({
            "dates": dates.iter().map(|(_, line)| *line).collect::<Vec<_>>(),
            "ranges": ranges.iter().map(|(_, line)| range_item(line)).collect::<Vec<_>>(),
            "weekdays": self.weekdays,
        });
        Calendar::from_json(&body).map_err(|err| refusal(&err, &dates, &ranges))
    }
}

/// The lines of a text area that hold something, trimmed, each with its number (from 1,
/// blank lines counted: the number the visitor finds it at).
fn filled_lines(text: &str) -> Vec<(usize, &str)> {
    text.lines()
        .map(str::trim)
        .enumerate()
        .filter(|(_, line)| !line.is_empty())
        .map(|(at, line)| (at + 1, line))
        .collect()
}

/// A range's line as the API's item: `{"from", "to"}` around the separator; without one, its
/// text, which the API refuses as the item it is.
fn range_item(line: &str) -> Value {
    match line.split_once(RANGE_SEPARATOR) {
        Some((from, to)) => json!({"from": from.trim(), "to": to.trim()}),
        None => Value::String(line.to_string()),
    }
}

/// Whether a range's line holds a date on each side of the separator.
fn reads_as_range(line: &str) -> bool {
    let date = |text: &str| text.trim().parse::<NaiveDate>().is_ok();
    line.split_once(RANGE_SEPARATOR)
        .is_some_and(|(from, to)| date(from) && date(to))
}

/// The API's refusal of a calendar as the form's: `dates[2]` is the text area `dates`, at the
/// line the third date came from. A range's line that does not read as one is told in the
/// form's terms (the API's speak of its JSON).
fn refusal(err: &CalendarError, dates: &[(usize, &str)], ranges: &[(usize, &str)]) -> ApiError {
    let (list, item) = match err.field().split_once('[') {
        Some((list, rest)) => (list, rest.trim_end_matches(']').parse::<usize>().ok()),
        None => (err.field(), None),
    };
    let lines = match list {
        "dates" => dates,
        "ranges" => ranges,
        "weekdays" => &[],
        _ => return ApiError::invalid_body(err.to_string()),
    };
    let message = match item.and_then(|at| lines.get(at)) {
        Some((number, line)) if list == "ranges" && !reads_as_range(line) => format!(
            "line {number}: `{line}` is not a range: its first and last days, \
             YYYY-MM-DD{RANGE_SEPARATOR}YYYY-MM-DD"
        ),
        Some((number, _)) => format!("line {number}: {}", err.message()),
        None => err.message().to_string(),
    };
    ApiError::invalid(list, message)
}

/// The new calendar's form: its name and days.
#[derive(Debug, Clone, Default)]
struct NewCalendar {
    name: String,
    days: Days,
}

impl NewCalendar {
    fn sent(form: &Submitted) -> NewCalendar {
        NewCalendar {
            name: form.get("name").unwrap_or_default().to_string(),
            days: Days::sent(form),
        }
    }

    /// Its name and calendar, each checked as the API checks them; both refused at once when
    /// both are wrong.
    fn read(&self) -> Result<(CalendarName, Calendar), ApiError> {
        let name =
            calendar::name(&self.name).map_err(|err| ApiError::invalid(err.field(), err.message()));
        match (name, self.days.calendar()) {
            (Ok(name), Ok(calendar)) => Ok((name, calendar)),
            (name, calendar) => Err(ApiError::all(
                name.err().into_iter().chain(calendar.err()).collect(),
            )),
        }
    }
}

/// The label of a form's field.
fn label(field: &str) -> Option<&'static str> {
    declared(field).map(|(label, _)| label)
}

/// The label and the hint of a form's field.
fn declared(field: &str) -> Option<(&'static str, &'static str)> {
    FIELDS
        .iter()
        .find(|(name, _, _)| *name == field)
        .map(|(_, label, hint)| (*label, *hint))
}

fn list_page(
    visitor: &Visitor,
    calendars: &[CalendarUse],
    new: &NewCalendar,
    refusals: &[Refusal],
) -> Markup {
    page(
        visitor,
        "Calendars",
        Some(Section::Calendars),
        html! {
            p.hint {
                "A calendar is a named set of days off: dates, ranges of dates, days of the week. A task whose "
                code { "calendars" } " name it does not fire on them, its days read in its time zone: its policy leaves such a fire out ("
                code { "SKIP" } ") or moves it to the nearest open day before or after ("
                code { "PREVIOUS_OPEN_DAY" } ", " code { "NEXT_OPEN_DAY" } ")."
            }
            @if calendars.is_empty() {
                p.muted { "No calendars yet." }
            } @else {
                (calendar_table(calendars))
            }
            @if visitor.may_change() {
                section.new-calendar aria-labelledby="new-heading" {
                    h2 #new-heading { "New calendar" }
                    (refusal_summary(refusals))
                    (days_form(visitor, CALENDARS, Some(&new.name), &new.days, refusals))
                }
            }
        },
    )
}

fn calendar_table(calendars: &[CalendarUse]) -> Markup {
    scrolling(
        "Calendars",
        html! {
            table.calendars {
                thead {
                    tr {
                        th scope="col" { "Name" }
                        th.num scope="col" { "Dates" }
                        th.num scope="col" { "Ranges" }
                        th scope="col" { "Weekdays" }
                        th.num scope="col" { "Tasks naming it" }
                        th scope="col" { "Updated" }
                    }
                }
                tbody {
                    @for used in calendars {
                        @let (row, days) = (&used.row, &used.row.calendar);
                        tr {
                            td { a href=(calendar_href(&row.name)) { (row.name) } }
                            td.num { (days.dates.len()) }
                            td.num { (days.ranges.len()) }
                            td { (weekday_names(days)) }
                            td.num { (used.tasks) }
                            td { (stored_time(row.updated_at)) }
                        }
                    }
                }
            }
        },
    )
}

/// A calendar's weekdays off, `SAT, SUN`; a dash when it has none.
fn weekday_names(calendar: &Calendar) -> Markup {
    let names: Vec<&str> = calendar.weekdays.iter().map(|day| day.name()).collect();
    match names.is_empty() {
        true => none(),
        false => html! { (names.join(", ")) },
    }
}

fn calendar_page(
    visitor: &Visitor,
    shown: &Shown,
    year: i32,
    days: &Days,
    refusals: &[Refusal],
) -> Markup {
    let (name, calendar) = (&shown.row.name, &shown.row.calendar);
    let href = calendar_href(name);
    page(
        visitor,
        &format!("Calendar {name}"),
        Some(Section::Calendars),
        html! {
            (refusal_summary(refusals))
            dl.fields {
                dt { "Days named" } dd { (calendar.day_count()) " (its dates, and the days of its ranges)" }
                dt { "Weekdays" } dd { (weekday_names(calendar)) }
                dt { "Tasks naming it" } dd { (shown.count) }
                dt { "Updated" } dd { (stored_time(shown.row.updated_at)) }
            }
            h2 #days-heading { "Days off" }
            (day_lists(calendar))
            h2 #tasks-heading { "Tasks naming it" }
            (tasks_naming(shown))
            h2 #year-heading { "Its days in " (year) }
            nav.paging aria-label="Years" {
                @if year > YEARS.0 { a href=(format!("{href}?year={}", year - 1)) rel="prev" { "Previous year, " (year - 1) } }
                @if year < YEARS.1 { a href=(format!("{href}?year={}", year + 1)) rel="next" { "Next year, " (year + 1) } }
            }
            (year_grid(calendar, year))
            @if visitor.may_change() {
                h2 #edit-heading { "Change its days" }
                (days_form(visitor, &href, None, days, refusals))
                div.actions { a.button.danger href=(format!("{href}/delete")) { "Delete…" } }
            }
        },
    )
}

/// The dates and ranges a calendar holds, as written.
fn day_lists(calendar: &Calendar) -> Markup {
    html! {
        dl.fields.day-lists {
            dt { "Dates" }
            dd {
                @if calendar.dates.is_empty() { (none()) }
                @else { ul.names { @for date in &calendar.dates { li.mono { (date) } } } }
            }
            dt { "Ranges" }
            dd {
                @if calendar.ranges.is_empty() { (none()) }
                @else {
                    ul.names {
                        @for range in &calendar.ranges {
                            li.mono {
                                (range.from) " to " (range.to)
                                span.muted { " (" ((range.to - range.from).num_days() + 1) " days)" }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// The months of `year`, a small grid each, the calendar's days off marked.
fn year_grid(calendar: &Calendar, year: i32) -> Markup {
    html! {
        p.hint { span.off-sample { "25" } " a day off (a date, in a range, or a weekday off)" }
        div.months {
            @for month in 1..=12 {
                @if let Some(first) = NaiveDate::from_ymd_opt(year, month, 1) {
                    (month_grid(calendar, first))
                }
            }
        }
    }
}

/// The month starting on `first`, in weeks from Monday.
fn month_grid(calendar: &Calendar, first: NaiveDate) -> Markup {
    let heading = format!("month-{}", first.month());
    let days = first
        .iter_days()
        .take_while(|day| day.month() == first.month());
    html! {
        section.month aria-labelledby=(heading) {
            h3 #(heading) { (first.format("%B")) }
            div.days {
                @for name in Weekday3::NAMES { span.weekday aria-hidden="true" { (&name[..2]) } }
                @for _ in 0..first.weekday().num_days_from_monday() { span aria-hidden="true" {} }
                @for day in days {
                    @if calendar.holds(day) {
                        span.off title=(format!("{day}: off")) { (day.day()) span.hidden-label { " off" } }
                    } @else {
                        span { (day.day()) }
                    }
                }
            }
        }
    }
}

/// The tasks naming the calendar, each linked to its page; the first of them when many do.
fn tasks_naming(shown: &Shown) -> Markup {
    let listed = shown.tasks.len() as i64;
    html! {
        @if shown.tasks.is_empty() {
            p.muted { "No task names it." }
        } @else {
            ul.names.tasks-naming {
                @for task in &shown.tasks {
                    li { a href=(task_href(task.id)) { (task.scene) "/" (task.name) } }
                }
            }
            @if shown.count > listed {
                p.muted { "The first " (listed) " of " (shown.count) ", by id." }
            }
        }
    }
}

/// Why the last form sent was not saved, each refusal linking to its field.
fn refusal_summary(refusals: &[Refusal]) -> Markup {
    html! {
        @if !refusals.is_empty() {
            div.error role="alert" #form-error {
                "Not saved:"
                ul.refusals {
                    @for refusal in refusals {
                        li {
                            @if let Some((field, label)) = refusal.field.as_deref().and_then(|f| Some((f, label(f)?))) {
                                a href=(format!("#{field}")) { (label) } ": "
                            }
                            (refusal.message)
                        }
                    }
                }
            }
        }
    }
}

/// The form of a calendar's days posting to `action`; with a name field when `name` is given
/// (a new calendar).
fn days_form(
    visitor: &Visitor,
    action: &str,
    name: Option<&str>,
    days: &Days,
    refusals: &[Refusal],
) -> Markup {
    let error = |field: &str| Refusal::for_field(refusals, field);
    let (name_label, name_hint) = declared("name").unwrap_or_default();
    let text = |field: &str, value: &str, rows: u32| {
        let (label, hint) = declared(field).unwrap_or_default();
        html! {
            (layout::textarea(field, label, value, rows, error(field).as_deref()))
            p.hint { (hint) }
        }
    };
    html! {
        form.editor.calendar-form method="post" action=(action) novalidate {
            (csrf_field(visitor))
            @if let Some(name) = name {
                (layout::input("name", name_label, "text", Some(name), error("name").as_deref()))
                p.hint { (name_hint) }
            }
            (text("dates", &days.dates, 6))
            (text("ranges", &days.ranges, 4))
            (weekday_boxes(days, error("weekdays").as_deref()))
            div.actions {
                button type="submit" {
                    @if name.is_some() { "Create calendar" } @else { "Save calendar" }
                }
            }
        }
    }
}

/// A checkbox a weekday, with the refusal of the weekdays beside them.
fn weekday_boxes(days: &Days, error: Option<&str>) -> Markup {
    let (label, hint) = declared("weekdays").unwrap_or_default();
    html! {
        fieldset #weekdays aria-describedby=[error.map(|_| "weekdays-error")] {
            legend { (label) }
            p.hint { (hint) }
            div.checks {
                @for name in Weekday3::NAMES {
                    @let id = format!("weekday-{name}");
                    div.field.check {
                        input #(id) type="checkbox" name="weekdays" value=(name) checked[days.checked(name)];
                        label for=(id) { (name) }
                    }
                }
            }
            @if let Some(error) = error { span.field-error #weekdays-error { (error) } }
        }
    }
}

fn delete_page(visitor: &Visitor, shown: &Shown, refusal: Option<&str>) -> Markup {
    let name = &shown.row.name;
    let href = calendar_href(name);
    page(
        visitor,
        &format!("Delete calendar {name}?"),
        Some(Section::Calendars),
        html! {
            @if let Some(refusal) = refusal { p.error role="alert" { (refusal) } }
            p role="note" {
                @match shown.count {
                    0 => { "No task names it: deleting it changes no schedule." }
                    n => {
                        (n) @if n == 1 { " task names" } @else { " tasks name" }
                        " it: deleting it is refused until none does. Take it out of their "
                        code { "calendars" } " first."
                    }
                }
            }
            @if shown.count > 0 { (tasks_naming(shown)) }
            div.actions {
                form.inline method="post" action=(format!("{href}/delete")) {
                    (csrf_field(visitor))
                    button.danger type="submit" { "Delete calendar" }
                }
                a href=(href) { "Keep it" }
            }
        },
    )
}

#[cfg(test)]
mod tests;
