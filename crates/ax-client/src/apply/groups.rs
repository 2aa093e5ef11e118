//! The executor groups of a file (`executors: [{name, routing?, maxInFlight?, members?}]`):
//! each read as the API reads it, and compared with the stored ones (see `named`). Pure: the
//! caller reads the store.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::error::ApplyError;
use super::named::{self, Change, Entry};
use super::section::EXECUTORS;
use ax_core::ids::GroupName;
use ax_core::security::Allowlist;
use ax_server::api::validate::executor::{group_input, group_name};
use ax_server::service::executors::GroupInput;

/// An executor group of a file: its name, its definition as the API reads it, and the body
/// to `PUT /api/executors/{name}`.
pub type GroupEntry = Entry<GroupName, GroupInput>;

/// The `executors` of a file, each checked as the API checks it; errors name the group's index
/// and key (`executors[0].routing`).
pub(super) fn group_entries(value: Option<Value>) -> Result<Vec<GroupEntry>, ApplyError> {
    let allow_any = Allowlist::default();
    named::entries(
        &EXECUTORS,
        value,
        |name| group_name(name, "name"),
        |body| group_input(body.clone(), &allow_any),
    )
}

/// The keys in which a group's definition differs from the stored one. Members are compared
/// as a set: a replace keeps the stored members' order.
pub fn group_keys_changed(want: &GroupInput, have: &GroupInput) -> Vec<&'static str> {
    let set = |members: &[String]| members.iter().cloned().collect::<BTreeSet<String>>();
    [
        ("routing", want.routing != have.routing),
        ("maxInFlight", want.max_in_flight != have.max_in_flight),
        ("members", set(&want.members) != set(&have.members)),
    ]
    .into_iter()
    .filter(|(_, differs)| *differs)
    .map(|(key, _)| key)
    .collect()
}

/// The groups to create or replace (`stored`: the store's groups by name); unchanged groups
/// are left out.
pub fn group_changes(
    wanted: &[GroupEntry],
    stored: &BTreeMap<String, GroupInput>,
) -> Vec<(GroupName, Change)> {
    named::changes(wanted, stored, group_keys_changed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apply::plan::Plan;
    use serde_json::json;

    #[test]
    fn groups_are_created_replaced_or_left_and_a_bad_one_is_named() {
        let entries = group_entries(Some(json!([
            {"name": "new"},
            {"name": "same", "routing": "FIRST", "members": ["http://b:1", "http://a:1"]},
            {"name": "moved", "maxInFlight": 8},
        ])))
        .expect("valid");
        let stored_input = |body: Value| group_input(body, &Allowlist::default()).expect("valid");
        let stored = BTreeMap::from([
            (
                "same".to_string(),
                stored_input(
                    json!({"routing": "FIRST", "members": ["http://a:1/", "http://b:1/"]}),
                ),
            ),
            ("moved".to_string(), stored_input(json!({}))),
        ]);
        let plan = Plan {
            groups: group_changes(&entries, &stored),
            ..Plan::default()
        };
        assert_eq!(
            plan.lines(),
            ["+ executor new", "~ executor moved (maxInFlight)"]
        );
        assert!(plan
            .count(false)
            .ends_with("; executors: 1 created, 1 replaced"));
        for (bad, key) in [
            (json!([{"routing": "FIRST"}]), "executors[0].name"),
            (json!([{"name": "Bad"}]), "executors[0].name"),
            (
                json!([{"name": "a", "routing": "ROUND"}]),
                "executors[0].routing",
            ),
            (
                json!([{"name": "a", "members": ["ftp://x"]}]),
                "executors[0].members[0]",
            ),
            (json!([{"name": "a", "host": "x"}]), "executors[0].host"),
            (json!([{"name": "a"}, {"name": "a"}]), "executors[1]"),
            (json!({"name": "a"}), "`executors` must be a list"),
        ] {
            let err = group_entries(Some(bad.clone()))
                .expect_err(&bad.to_string())
                .to_string();
            assert!(err.starts_with(key), "{bad}: {err}");
        }
    }
}
