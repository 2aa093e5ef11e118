//! What task files read from the server and write besides the tasks: the stored tasks (every
//! page), the paused scenes, the executor groups and the calendars as definitions; pausing a
//! scene, putting a group or a calendar.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Display;

use serde_json::{json, Value};

use super::calendars::shown_days;
use super::error::ApplyError;
use super::named::Entry;
use super::section::{Section, CALENDARS, EXECUTORS};
use super::upstreams::Key;
use crate::api::error::ClientError;
use crate::api::http::{send, Call};
use crate::Connection;
use ax_core::calendar::Calendar;
use ax_core::dispatch::routing::Routing;
use ax_core::security::Allowlist;
use ax_server::api::{task_body, task_input};
use ax_server::service::executors::GroupInput;
use ax_server::service::task_input::TaskInput;

/// Every stored task of these scenes, as definitions, by `(scene, name)`.
pub(super) async fn stored(
    conn: &Connection,
    scenes: &BTreeSet<String>,
) -> Result<BTreeMap<Key, (i64, TaskInput)>, ApplyError> {
    let allow_any = Allowlist::default();
    let mut found = BTreeMap::new();
    for scene in scenes {
        for task in tasks_of(conn, Some(scene)).await? {
            let id = task["id"].as_i64().unwrap_or_default();
            let input = task_input(task_body(task), &allow_any)
                .map_err(|source| ApplyError::StoredInvalid { id, source })?;
            found.insert((input.scene.to_string(), input.name.clone()), (id, input));
        }
    }
    Ok(found)
}

/// Every task (of `scene`), all pages.
pub(super) async fn tasks_of(
    conn: &Connection,
    scene: Option<&str>,
) -> Result<Vec<Value>, ClientError> {
    const PAGE: usize = 500;
    let mut all = Vec::new();
    loop {
        let call = Call::new("GET", "/api/tasks".into())
            .with("scene", scene.map(str::to_string))
            .with("limit", Some(PAGE.to_string()))
            .with("offset", Some(all.len().to_string()));
        let page = send(conn, &call).await?;
        let items = page["items"].as_array().cloned().unwrap_or_default();
        let last = items.len() < PAGE;
        all.extend(items);
        if last {
            return Ok(all);
        }
    }
}

/// The paused scenes of the store.
pub(super) async fn paused_scenes(conn: &Connection) -> Result<BTreeSet<String>, ClientError> {
    let scenes = send(conn, &Call::new("GET", "/api/scenes".into())).await?;
    Ok(scenes["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|scene| scene["paused"] == json!(true))
        .filter_map(|scene| scene["scene"].as_str().map(str::to_string))
        .collect())
}

/// Pauses or resumes a scene.
pub(super) async fn move_scene(
    conn: &Connection,
    scene: &str,
    pause: bool,
) -> Result<(), ClientError> {
    let verb = if pause { "pause" } else { "resume" };
    // Scene names (`A-Z a-z 0-9 _ . : -`) need no escaping in a path.
    let path = format!("/api/scenes/{scene}/{verb}");
    send(conn, &Call::new("POST", path)).await.map(drop)
}

/// The store's groups as definitions: their defined members, not those that registered
/// themselves.
pub(super) async fn stored_groups(
    conn: &Connection,
) -> Result<BTreeMap<String, GroupInput>, ApplyError> {
    let listing = send(conn, &Call::new("GET", EXECUTORS.path.into())).await?;
    let mut groups = BTreeMap::new();
    for group in listing["items"].as_array().into_iter().flatten() {
        let name = group["name"].as_str().unwrap_or_default().to_string();
        let routing = group["routing"].as_str().unwrap_or_default();
        let Some(routing) = Routing::parse(routing) else {
            let routing = routing.to_string();
            return Err(ApplyError::StoredRouting { name, routing });
        };
        let members = group["members"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|member| member["registered"] == json!(false))
            .filter_map(|member| member["url"].as_str().map(str::to_string))
            .collect();
        let input = GroupInput {
            routing,
            max_in_flight: group["maxInFlight"].as_i64().unwrap_or_default() as i32,
            members,
        };
        groups.insert(name, input);
    }
    Ok(groups)
}

/// The store's calendars as definitions, by name.
pub(super) async fn stored_calendars(
    conn: &Connection,
) -> Result<BTreeMap<String, Calendar>, ApplyError> {
    let listing = send(conn, &Call::new("GET", CALENDARS.path.into())).await?;
    let mut calendars = BTreeMap::new();
    for shown in listing["items"].as_array().into_iter().flatten() {
        let name = shown["name"].as_str().unwrap_or_default().to_string();
        let days = shown_days(shown).map(|(key, days)| (key.to_string(), days));
        let calendar = Calendar::from_json(&Value::Object(days.collect())).map_err(|source| {
            ApplyError::StoredCalendar {
                name: name.clone(),
                source,
            }
        })?;
        calendars.insert(name, calendar);
    }
    Ok(calendars)
}

/// Creates or replaces a group or a calendar of `section`.
pub(super) async fn put_entry<N: Display, T>(
    conn: &Connection,
    section: &Section,
    entry: &Entry<N, T>,
) -> Result<(), ClientError> {
    // Group and calendar names (`a-z 0-9 _ . -`) need no escaping in a path.
    let path = format!("{}/{}", section.path, entry.name);
    let call = Call::new("PUT", path).body(entry.body.clone());
    send(conn, &call).await.map(drop)
}
