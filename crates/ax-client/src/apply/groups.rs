//! The executor groups of a file (`executors: [{name, routing?, maxInFlight?, members?}]`):
//! each read as the API reads it, and compared with the stored ones. Pure: the caller reads
//! the store.

use ax_core::ids::GroupName;
use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::error::ApplyError;
use ax_core::security::Allowlist;
use ax_server::api::validate::executor::{group_input, group_name};
use ax_server::service::executors::GroupInput;

/// An executor group of a file: its name, its definition as the API reads it, and the body
/// to `PUT /api/executors/{name}`.
#[derive(Debug, Clone, PartialEq)]
pub struct GroupEntry {
    pub name: GroupName,
    pub input: GroupInput,
    pub body: Value,
}

/// What applying a file does to one of its executor groups.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GroupChange {
    Create,
    /// With the keys that differ.
    Replace(Vec<&'static str>),
}

/// The `executors` of a file, each checked as the API checks it; errors name the group's index
/// and key (`executors[0].routing`).
pub(super) fn group_entries(value: Option<Value>) -> Result<Vec<GroupEntry>, ApplyError> {
    let items = match value {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Array(items)) => items,
        Some(_) => return Err(ApplyError::GroupsNotAList),
    };
    let allow_any = Allowlist::default();
    let mut entries: Vec<GroupEntry> = Vec::with_capacity(items.len());
    for (index, item) in items.into_iter().enumerate() {
        let Value::Object(mut body) = item else {
            return Err(ApplyError::GroupNotAMapping { index });
        };
        let name = match body.remove("name") {
            Some(Value::String(name)) => {
                group_name(name, "name").map_err(|source| ApplyError::GroupRefused {
                    index,
                    key: "name".into(),
                    source,
                })?
            }
            _ => return Err(ApplyError::GroupUnnamed { index }),
        };
        if let Some(first) = entries.iter().position(|entry| entry.name == name) {
            return Err(ApplyError::GroupTwice { index, first });
        }
        let body = Value::Object(body);
        let input =
            group_input(body.clone(), &allow_any).map_err(|source| ApplyError::GroupRefused {
                index,
                key: source.field().unwrap_or("?").to_string(),
                source,
            })?;
        entries.push(GroupEntry { name, input, body });
    }
    Ok(entries)
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
) -> Vec<(GroupName, GroupChange)> {
    wanted
        .iter()
        .filter_map(|want| {
            let change = match stored.get(want.name.as_str()) {
                None => GroupChange::Create,
                Some(have) => match group_keys_changed(&want.input, have) {
                    keys if keys.is_empty() => return None,
                    keys => GroupChange::Replace(keys),
                },
            };
            Some((want.name.clone(), change))
        })
        .collect()
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
