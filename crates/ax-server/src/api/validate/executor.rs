//! Executor groups' bodies and names, and a task's `executor` field.

use serde_json::{Map, Value};

use super::body::object;
use super::handler_url::callable_url;
use crate::error::ApiError;
use crate::service::executors::{GroupInput, Registration, DEFAULT_MAX_IN_FLIGHT};
use ax_core::dispatch::routing::{valid_group_name, Routing};
use ax_core::ids::GroupName;
use ax_core::security::Allowlist;
use ax_core::task::executor::TaskExecutor;
use ax_core::task::fields;

/// Longest member base URL (the column's limit).
pub const MAX_MEMBER_URL_CHARS: usize = 512;
/// Longest path on a member.
const MAX_PATH_CHARS: usize = 1024;
/// Most requests in flight to one member.
const MAX_IN_FLIGHT: i64 = crate::config::MAX_IN_FLIGHT_PER_HOST;
/// Most members a group's definition lists.
const MAX_MEMBERS: usize = ax_core::dispatch::routing::MAX_DEFINED_MEMBERS;

/// A group's name, as a path gives it.
pub fn group_name(name: String, field: &str) -> Result<GroupName, ApiError> {
    if valid_group_name(&name) {
        Ok(name.into())
    } else {
        Err(ApiError::invalid(
            field,
            format!(
                "{field} must be 1-64 of a-z 0-9 _ . - (got `{}`)",
                name.escape_debug()
            ),
        ))
    }
}

fn routing(value: Option<Value>, field: &str) -> Result<Option<Routing>, ApiError> {
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(name)) => Routing::parse(&name).map(Some).ok_or_else(|| {
            ApiError::invalid(
                field,
                format!(
                    "{field} must be one of {} (got `{name}`)",
                    Routing::NAMES.join(", ")
                ),
            )
        }),
        Some(_) => Err(ApiError::invalid(
            field,
            format!("{field} must be a string"),
        )),
    }
}

fn count(value: Option<Value>, field: &str) -> Result<Option<i32>, ApiError> {
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(value) => value
            .as_i64()
            .filter(|n| (1..=MAX_IN_FLIGHT).contains(n))
            .map(|n| Some(n as i32))
            .ok_or_else(|| {
                ApiError::invalid(
                    field,
                    format!("{field} must be an integer from 1 to {MAX_IN_FLIGHT}"),
                )
            }),
    }
}

fn member_url(value: Value, field: &str, allowlist: &Allowlist) -> Result<String, ApiError> {
    let Value::String(url) = value else {
        return Err(ApiError::invalid(field, format!("{field} must be a URL")));
    };
    callable_url(url, allowlist, field, MAX_MEMBER_URL_CHARS)
}

/// `PUT /api/executors/{group}`: `{routing?, maxInFlight?, members?}`.
pub fn group_input(body: Value, allowlist: &Allowlist) -> Result<GroupInput, ApiError> {
    let mut body = object(body, &["routing", "maxInFlight", "members"])?;
    let members = match body.remove("members") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) if items.len() <= MAX_MEMBERS => {
            let mut urls: Vec<String> = Vec::new();
            for (n, item) in items.into_iter().enumerate() {
                let url = member_url(item, &format!("members[{n}]"), allowlist)?;
                if !urls.contains(&url) {
                    urls.push(url);
                }
            }
            urls
        }
        Some(_) => {
            return Err(ApiError::invalid(
                "members",
                format!("members must be a list of at most {MAX_MEMBERS} URLs"),
            ))
        }
    };
    Ok(GroupInput {
        routing: routing(body.remove("routing"), "routing")?.unwrap_or(Routing::DEFAULT),
        max_in_flight: count(body.remove("maxInFlight"), "maxInFlight")?
            .unwrap_or(DEFAULT_MAX_IN_FLIGHT),
        members,
    })
}

/// `POST /api/executors/{group}/members`: `{url, capacity?}`.
pub fn registration(body: Value, allowlist: &Allowlist) -> Result<Registration, ApiError> {
    let mut body = object(body, &["url", "capacity"])?;
    let url = body
        .remove("url")
        .ok_or_else(|| ApiError::invalid("url", "url is required"))?;
    Ok(Registration {
        url: member_url(url, "url", allowlist)?,
        capacity: count(body.remove("capacity"), "capacity")?,
    })
}

/// The member a `DELETE /api/executors/{group}/members?url=…` names, as it was registered.
pub fn member(url: String, allowlist: &Allowlist) -> Result<String, ApiError> {
    member_url(Value::String(url), "url", allowlist)
}

/// A task's `executor`: `{group, path?, routing?}`, or none.
pub(super) fn task_executor(value: Option<Value>) -> Result<Option<TaskExecutor>, ApiError> {
    let field = fields::EXECUTOR.name;
    let mut body: Map<String, Value> = match value {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::Object(body)) => body,
        Some(_) => {
            return Err(ApiError::invalid(
                field,
                "executor must be an object {group, path, routing?}",
            ))
        }
    };
    if let Some(unknown) = body
        .keys()
        .find(|key| !["group", "path", "routing"].contains(&key.as_str()))
    {
        return Err(ApiError::invalid(
            format!("{field}.{unknown}"),
            format!("unknown field `{field}.{unknown}`"),
        ));
    }
    let group = match body.remove("group") {
        Some(Value::String(name)) => group_name(name, "executor.group")?,
        _ => {
            return Err(ApiError::invalid(
                "executor.group",
                "executor.group is required: the name of an executor group",
            ))
        }
    };
    let path = match body.remove("path") {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(path)) => checked_path(path)?,
        Some(_) => {
            return Err(ApiError::invalid(
                "executor.path",
                "executor.path must be a string",
            ))
        }
    };
    Ok(Some(TaskExecutor {
        group,
        path,
        routing: routing(body.remove("routing"), "executor.routing")?,
    }))
}

/// A path on a member: no scheme or host of its own, nothing the URL parser would repair.
fn checked_path(path: String) -> Result<String, ApiError> {
    let refuse = |why: &str| ApiError::invalid("executor.path", format!("executor.path {why}"));
    if path.chars().count() > MAX_PATH_CHARS {
        return Err(refuse(&format!(
            "is longer than {MAX_PATH_CHARS} characters"
        )));
    }
    if path.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(refuse(
            "contains whitespace or a control character; percent-encode it",
        ));
    }
    if path.contains("://") || path.starts_with("//") || path.contains('\\') {
        return Err(refuse("must be a path such as /jobs/reconcile, not a URL"));
    }
    if path.contains('#') {
        return Err(refuse(
            "must not have a #fragment: it is never sent to the member",
        ));
    }
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn field_of(err: ApiError) -> Option<String> {
        match err {
            ApiError::Invalid { field, .. } => field,
            _ => None,
        }
    }

    #[test]
    fn a_group_takes_its_defaults() {
        let group = group_input(json!({}), &Allowlist::default()).unwrap();
        assert_eq!(
            (group.routing, group.max_in_flight, group.members.len()),
            (Routing::RoundRobin, 64, 0)
        );
    }

    #[test]
    fn each_bad_part_of_a_group_is_named() {
        let allow = Allowlist::default();
        for (body, field) in [
            (json!({"routing": "ROUND"}), "routing"),
            (json!({"maxInFlight": 0}), "maxInFlight"),
            (json!({"maxInFlight": "8"}), "maxInFlight"),
            (json!({"members": "http://a"}), "members"),
            (json!({"members": ["http://a:1", "ftp://b"]}), "members[1]"),
            (
                json!({"members": ["http://169.254.169.254/"]}),
                "members[0]",
            ),
            (json!({"extra": 1}), "extra"),
        ] {
            let err = group_input(body.clone(), &allow).expect_err(&body.to_string());
            assert_eq!(field_of(err).as_deref(), Some(field), "{body}");
        }
        assert_eq!(
            field_of(group_name("Billing".into(), "group").unwrap_err()).as_deref(),
            Some("group")
        );
    }

    #[test]
    fn a_registration_needs_a_url_and_may_give_a_capacity() {
        let allow = Allowlist::default();
        let member = registration(
            json!({"url": "http://127.0.0.1:9000", "capacity": 8}),
            &allow,
        )
        .unwrap();
        assert_eq!(
            (member.url.as_str(), member.capacity),
            ("http://127.0.0.1:9000/", Some(8))
        );
        for (body, field) in [
            (json!({}), "url"),
            (
                json!({"url": "http://127.0.0.1:9000", "capacity": -1}),
                "capacity",
            ),
            (json!({"url": "not a url"}), "url"),
        ] {
            let err = registration(body.clone(), &allow).expect_err(&body.to_string());
            assert_eq!(field_of(err).as_deref(), Some(field), "{body}");
        }
    }

    #[test]
    fn a_task_executor_is_read_and_a_bad_one_is_named() {
        let executor = task_executor(Some(
            json!({"group": "billing", "path": "/jobs/x?y=1", "routing": "LEAST_BUSY"}),
        ))
        .unwrap()
        .unwrap();
        assert_eq!(executor.routing, Some(Routing::LeastBusy));
        assert_eq!(task_executor(Some(Value::Null)).unwrap(), None);
        for (value, field) in [
            (json!("billing"), "executor"),
            (json!({"path": "/x"}), "executor.group"),
            (json!({"group": "a b"}), "executor.group"),
            (
                json!({"group": "a", "path": "http://evil/x"}),
                "executor.path",
            ),
            (json!({"group": "a", "path": "/x#y"}), "executor.path"),
            (
                json!({"group": "a", "routing": "NEAREST"}),
                "executor.routing",
            ),
            (json!({"group": "a", "host": "x"}), "executor.host"),
        ] {
            let err = task_executor(Some(value.clone())).expect_err(&value.to_string());
            assert_eq!(field_of(err).as_deref(), Some(field), "{value}");
        }
    }
}
