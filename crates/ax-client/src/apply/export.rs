//! `ax export`: the stored tasks (of a scene) as a file `apply` takes. Each task's fields in
//! their declared order, leaving out those at their default, and its upstreams by name; the
//! executor groups and the calendars its tasks name; `{executors, calendars, scenes, tasks}`
//! when there are groups or calendars or one of its scenes is paused, naming each of them, and
//! the plain list otherwise. `ax tasks edit` opens a task the same way.

use std::collections::{BTreeMap, BTreeSet};
use std::process::ExitCode;

use serde::Serialize;
use serde_json::{json, Value};

use super::calendars::shown_days;
use super::error::ApplyError;
use super::section::{Section, CALENDARS, EXECUTORS};
use super::server::{paused_scenes, tasks_of};
use super::upstreams::{Directory, Key};
use crate::api::error::ClientError;
use crate::api::http::{send, Call};
use crate::Connection;
use ax_core::dispatch::routing::Routing;
use ax_core::task::fields;
use ax_core::text::yaml;
use ax_server::api::task_body;
use ax_server::service::executors::DEFAULT_MAX_IN_FLIGHT;

/// A JSON object whose keys are written in the order they were put in (serde_json's map
/// sorts them): a task's fields in their declared order, a group's or calendar's name first.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Ordered(pub Vec<(&'static str, Value)>);

impl Ordered {
    fn get(&self, key: &str) -> Option<&Value> {
        self.0
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, value)| value)
    }
}

impl Serialize for Ordered {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (key, value) in &self.0 {
            map.serialize_entry(key, value)?;
        }
        map.end()
    }
}

/// An exported file: the plain list of tasks, or its sections.
#[derive(Debug, Serialize)]
#[serde(untagged)]
enum ExportFile {
    List(Vec<Ordered>),
    Sections {
        #[serde(skip_serializing_if = "Vec::is_empty")]
        executors: Vec<Ordered>,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        calendars: Vec<Ordered>,
        #[serde(skip_serializing_if = "Option::is_none")]
        scenes: Option<BTreeMap<String, Value>>,
        tasks: Vec<Ordered>,
    },
}

/// Runs `ax export`: the tasks (of `scene`) as a file `apply` takes, in YAML (JSON with
/// `--json`). Exit 1 when the server refuses or cannot be reached.
pub fn export(conn: Connection, scene: Option<String>) -> ExitCode {
    let outcome = actix_rt::System::new()
        .block_on(exported(&conn, scene))
        .and_then(|file| text(&file, conn.json));
    match outcome {
        Ok(text) => {
            println!("{}", text.trim_end());
            ExitCode::SUCCESS
        }
        Err(err) => err.report("ax export", 1),
    }
}

/// The file of the tasks (of `scene`), read from the server.
async fn exported(conn: &Connection, scene: Option<String>) -> Result<ExportFile, ApplyError> {
    let mut tasks = tasks_of(conn, scene.as_deref()).await?;
    tasks.sort_by_key(|t| (t["scene"].to_string(), t["name"].to_string()));
    let named = Named {
        executors: groups_of(conn, &tasks).await?,
        calendars: calendars_of(conn, &tasks).await?,
    };
    let directory = upstream_directory(conn, &tasks).await?;
    let mut paused = paused_scenes(conn).await?;
    if let Some(scene) = &scene {
        paused.retain(|paused| paused == scene);
    }
    let entries: Vec<Ordered> = tasks
        .into_iter()
        .map(|task| file_entry(task, &directory))
        .collect();
    Ok(export_file(entries, named, &paused))
}

/// The file as text: JSON (`json`) or YAML.
fn text(file: &ExportFile, json: bool) -> Result<String, ApplyError> {
    let text = match json {
        true => serde_json::to_string_pretty(file).map_err(|e| e.to_string()),
        false => yaml::to_string(file).map_err(|e| e.to_string()),
    };
    text.map_err(ApplyError::Unwritable)
}

/// Whether the server answered that what was asked for is not there.
fn not_found(err: &ClientError) -> bool {
    matches!(err, ClientError::Refused { code, .. } if code == "NOT_FOUND")
}

/// The scene a task (as the API shows it, or as a file entry) is in.
fn scene_of(task: Option<&Value>) -> &str {
    task.and_then(Value::as_str)
        .unwrap_or(fields::SCENE.default_text())
}

/// The upstreams of `tasks` (as the API shows them) by id: the tasks themselves, and those
/// of other scenes they wait on, read one by one.
async fn upstream_directory(conn: &Connection, tasks: &[Value]) -> Result<Directory, ClientError> {
    let key = |task: &Value| {
        let name = task["name"].as_str().unwrap_or_default().to_string();
        (scene_of(task.get("scene")).to_string(), name)
    };
    let mut known: BTreeMap<i64, Key> = tasks
        .iter()
        .filter_map(|task| Some((task["id"].as_i64()?, key(task))))
        .collect();
    let wanted: BTreeSet<i64> = tasks
        .iter()
        .flat_map(|task| task["dependsOn"].as_array().into_iter().flatten())
        .filter_map(Value::as_i64)
        .filter(|id| !known.contains_key(id))
        .collect();
    for id in wanted {
        match send(conn, &Call::new("GET", format!("/api/tasks/{id}"))).await {
            Ok(task) => {
                known.insert(id, key(&task));
            }
            // Deleted meanwhile: written by id.
            Err(err) if not_found(&err) => {}
            Err(err) => return Err(err),
        }
    }
    let keys: Vec<(Key, i64)> = known.into_iter().map(|(id, key)| (key, id)).collect();
    Ok(Directory::new(keys.iter().map(|(key, id)| (key, *id)), []))
}

/// The executor groups and calendars the exported tasks name, as file entries.
#[derive(Debug, Default)]
struct Named {
    executors: Vec<Ordered>,
    calendars: Vec<Ordered>,
}

/// The exported file: the list of tasks, or, when the tasks name executor groups or calendars
/// (`named`) or one of the scenes is paused (`paused`: the store's paused scenes among those
/// exported), `{executors, calendars, scenes, tasks}`: the groups, the calendars, and every
/// scene of the file with its pause, so that `apply` restores each.
fn export_file(tasks: Vec<Ordered>, named: Named, paused: &BTreeSet<String>) -> ExportFile {
    let Named {
        executors,
        calendars,
    } = named;
    if paused.is_empty() {
        if executors.is_empty() && calendars.is_empty() {
            return ExportFile::List(tasks);
        }
        return ExportFile::Sections {
            executors,
            calendars,
            scenes: None,
            tasks,
        };
    }
    let mut scenes: BTreeSet<String> = tasks
        .iter()
        .map(|task| scene_of(task.get(fields::SCENE.name)).to_string())
        .collect();
    scenes.extend(paused.iter().cloned());
    let scenes = scenes
        .into_iter()
        .map(|scene| {
            let state = json!({"paused": paused.contains(&scene)});
            (scene, state)
        })
        .collect();
    ExportFile::Sections {
        executors,
        calendars,
        scenes: Some(scenes),
        tasks,
    }
}

/// The executor groups `tasks` use, as file entries (see `group_entry`).
async fn groups_of(conn: &Connection, tasks: &[Value]) -> Result<Vec<Ordered>, ClientError> {
    let names = tasks
        .iter()
        .filter_map(|task| task["executor"]["group"].as_str());
    entries_of(conn, &EXECUTORS, names.collect(), group_entry).await
}

/// The calendars `tasks` exclude, as file entries (see `calendar_entry`).
async fn calendars_of(conn: &Connection, tasks: &[Value]) -> Result<Vec<Ordered>, ClientError> {
    let names = tasks
        .iter()
        .flat_map(|task| {
            task["calendars"]["exclude"]
                .as_array()
                .into_iter()
                .flatten()
        })
        .filter_map(Value::as_str);
    entries_of(conn, &CALENDARS, names.collect(), calendar_entry).await
}

/// The groups or calendars (`section`) of these names, read one by one, as file entries
/// (`entry`, from the name and the API's reply).
async fn entries_of(
    conn: &Connection,
    section: &Section,
    names: BTreeSet<&str>,
    entry: fn(&str, &Value) -> Ordered,
) -> Result<Vec<Ordered>, ClientError> {
    let mut entries = Vec::new();
    for name in names {
        // Group and calendar names (`a-z 0-9 _ . -`) need no escaping in a path.
        let call = Call::new("GET", format!("{}/{name}", section.path));
        match send(conn, &call).await {
            Ok(shown) => entries.push(entry(name, &shown)),
            // Named by a task before it exists: nothing to export.
            Err(err) if not_found(&err) => {}
            Err(err) => return Err(err),
        }
    }
    Ok(entries)
}

/// A group as `GET /api/executors/{name}` shows it, as a file entry: name, routing and
/// `maxInFlight` unless the defaults, and the defined members (registered ones register again
/// themselves).
fn group_entry(name: &str, group: &Value) -> Ordered {
    let mut entry = vec![("name", json!(name))];
    if group["routing"] != json!(Routing::DEFAULT.name()) {
        entry.push(("routing", group["routing"].clone()));
    }
    if group["maxInFlight"] != json!(DEFAULT_MAX_IN_FLIGHT) {
        entry.push(("maxInFlight", group["maxInFlight"].clone()));
    }
    let defined: Vec<Value> = group["members"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|member| member["registered"] != json!(true))
        .map(|member| member["url"].clone())
        .collect();
    if !defined.is_empty() {
        entry.push(("members", Value::Array(defined)));
    }
    Ordered(entry)
}

/// A calendar as `GET /api/calendars/{name}` shows it, as a file entry: name, then its
/// `dates`, `ranges` and `weekdays` as written, each left out when empty.
fn calendar_entry(name: &str, calendar: &Value) -> Ordered {
    Ordered(
        std::iter::once(("name", json!(name)))
            .chain(shown_days(calendar))
            .collect(),
    )
}

/// A stored task as `ax tasks edit` opens it: a file entry whose upstreams stay ids (the API
/// takes the edit back as it is).
pub fn edit_entry(task: Value) -> Ordered {
    file_entry(task, &Directory::default())
}

/// A stored task (as the API shows it) as a file entry: its definition's fields in their
/// declared order, without those at their default (see `fields::Field::left_out`), its
/// upstreams by name (see `Directory::export_name`).
fn file_entry(task: Value, directory: &Directory) -> Ordered {
    let scene = scene_of(task.get(fields::SCENE.name)).to_string();
    let body = task_body(task);
    let value_of = |field: &fields::Field| {
        let value = body.get(field.name)?;
        if field.name != fields::DEPENDS_ON.name {
            return Some(value.clone());
        }
        let ids = value
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_i64);
        Some(Value::Array(
            ids.map(|id| directory.export_name(&scene, id)).collect(),
        ))
    };
    Ordered(
        fields::ALL
            .into_iter()
            .filter_map(|field| {
                let value = value_of(field)?;
                (!field.left_out(&value)).then_some((field.name, value))
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests;
