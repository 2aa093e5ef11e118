//! The calendars of a file (`calendars: [{name, dates?, ranges?, weekdays?}]`): each read as
//! the API reads it, and compared with the stored ones (see `named`). Pure: the caller reads
//! the store.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::error::ApplyError;
use super::named::{self, Change, Entry};
use super::section::CALENDARS;
use ax_core::calendar::{self, Calendar, CalendarError};
use ax_core::ids::CalendarName;
use ax_server::error::ApiError;

/// A calendar of a file: its name, its days as the API reads them, and the body to
/// `PUT /api/calendars/{name}`.
pub type CalendarEntry = Entry<CalendarName, Calendar>;

/// The `calendars` of a file, each checked as the API checks it; errors name the calendar's
/// index and key (`calendars[0].dates[1]`).
pub(super) fn calendar_entries(value: Option<Value>) -> Result<Vec<CalendarEntry>, ApplyError> {
    named::entries(
        &CALENDARS,
        value,
        |name| calendar::name(&name).map_err(refusal),
        |body| Calendar::from_json(body).map_err(refusal),
    )
}

/// The days of a calendar as the API shows it (`GET /api/calendars/{name}`), as a file writes
/// them: `dates`, `ranges` and `weekdays`, each left out when empty.
pub(super) fn shown_days(shown: &Value) -> impl Iterator<Item = (&'static str, Value)> + '_ {
    ["dates", "ranges", "weekdays"]
        .into_iter()
        .filter_map(|key| match shown.get(key) {
            Some(Value::Array(days)) if !days.is_empty() => Some((key, Value::Array(days.clone()))),
            _ => None,
        })
}

/// A calendar refused, as the API refuses it.
fn refusal(err: CalendarError) -> ApiError {
    ApiError::invalid(err.field(), err.message())
}

/// The keys in which a calendar's days differ from the stored ones. Ranges are compared as a
/// set: a replace keeps the stored ranges' order.
pub fn calendar_keys_changed(want: &Calendar, have: &Calendar) -> Vec<&'static str> {
    let set = |calendar: &Calendar| calendar.ranges.iter().copied().collect::<BTreeSet<_>>();
    [
        ("dates", want.dates != have.dates),
        ("ranges", set(want) != set(have)),
        ("weekdays", want.weekdays != have.weekdays),
    ]
    .into_iter()
    .filter(|(_, differs)| *differs)
    .map(|(key, _)| key)
    .collect()
}

/// The calendars to create or replace (`stored`: the store's calendars by name); unchanged
/// calendars are left out.
pub fn calendar_changes(
    wanted: &[CalendarEntry],
    stored: &BTreeMap<String, Calendar>,
) -> Vec<(CalendarName, Change)> {
    named::changes(wanted, stored, calendar_keys_changed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apply::plan::Plan;
    use serde_json::json;

    fn days(body: Value) -> Calendar {
        Calendar::from_json(&body).expect("valid")
    }

    #[test]
    fn calendars_are_created_replaced_or_left_and_a_bad_one_is_named() {
        let entries = calendar_entries(Some(json!([
            {"name": "new", "weekdays": ["SAT", "SUN"]},
            {"name": "same", "dates": ["2026-12-25", "2026-12-24"], "weekdays": ["sat"],
             "ranges": [{"from": "2027-08-01", "to": "2027-08-14"},
                        {"from": "2026-07-01", "to": "2026-07-02"}]},
            {"name": "moved", "dates": ["2026-12-25"], "ranges": []},
        ])))
        .expect("valid");
        assert_eq!(entries[0].body, json!({"weekdays": ["SAT", "SUN"]}));
        let stored = BTreeMap::from([
            (
                "same".to_string(),
                days(
                    json!({"dates": ["2026-12-24", "2026-12-25"], "weekdays": ["SAT"],
                    "ranges": [{"from": "2026-07-01", "to": "2026-07-02"},
                               {"from": "2027-08-01", "to": "2027-08-14"}]}),
                ),
            ),
            (
                "moved".to_string(),
                days(json!({"dates": ["2026-12-26"], "weekdays": ["SUN"]})),
            ),
        ]);
        let plan = Plan {
            calendars: calendar_changes(&entries, &stored),
            ..Plan::default()
        };
        assert_eq!(
            plan.lines(),
            ["+ calendar new", "~ calendar moved (dates, weekdays)"]
        );
        assert!(plan
            .count(false)
            .ends_with("; calendars: 1 created, 1 replaced"));
        for (bad, key) in [
            (
                json!([{"dates": []}]),
                "calendars[0].name: name is required",
            ),
            (
                json!([{"name": "Bad"}]),
                "calendars[0].name: a calendar's name",
            ),
            (
                json!([{"name": "a", "dates": ["2026-12-25", "soon"]}]),
                "calendars[0].dates[1]: must be a date",
            ),
            (
                json!([{"name": "a", "ranges": [{"from": "2027-01-02", "to": "2027-01-01"}]}]),
                "calendars[0].ranges[0]: from 2027-01-02 is after to 2027-01-01",
            ),
            (
                json!([{"name": "a", "weekdays": ["FUN"]}]),
                "calendars[0].weekdays[0]",
            ),
            (json!([{"name": "a", "days": []}]), "calendars[0].days"),
            (
                json!([{"name": "a"}, "b"]),
                "calendars[1]: a calendar is {name",
            ),
            (
                json!([{"name": "a"}, {"name": "a"}]),
                "calendars[1]: the same name as calendars[0]",
            ),
            (
                json!({"name": "a"}),
                "`calendars` must be a list of calendars",
            ),
        ] {
            let err = calendar_entries(Some(bad.clone()))
                .expect_err(&bad.to_string())
                .to_string();
            assert!(err.starts_with(key), "{bad}: {err}");
        }
    }
}
