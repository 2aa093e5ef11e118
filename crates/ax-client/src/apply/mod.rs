//! Tasks as code: `ax apply -f FILE [--dry-run] [--prune [--yes]]`, `ax diff -f FILE` and
//! `ax export [--scene S]`.
//!
//! A file is a YAML (or JSON) list of tasks in the API's task shape, or `{executors, scenes,
//! tasks}`: the list under `tasks`, under `scenes` the pause of the scenes it names
//! (`{reports: {paused: true}}`), and under `executors` executor groups (`{name, routing?,
//! maxInFlight?, members?}`), written before the tasks so that tasks can name them. A task's
//! `dependsOn` may name its upstreams (`name`, `scene/name`) instead of giving their ids, so
//! that a file applies to another ax (see `upstreams`). `apply` matches the tasks to the stored
//! ones by `(scene, name)`, prints the difference field by field, old → new (see `changes`),
//! and writes it through `POST /api/tasks/bulk`, upstreams first (with `--prune`, deleting the
//! tasks of the file's scenes that the file no longer has, after asking), pausing scenes
//! before and resuming them after. Both sides are read through the API's own validation, so a
//! task reads as unchanged exactly when the server would store it as it is: a second apply
//! prints no change. Export writes each task's fields in their declared order, leaving out
//! those at their default, and its upstreams by name; `{scenes, tasks}` when one of its scenes
//! is paused, naming each of them, and the plain list otherwise. `ax executors apply -f FILE`
//! writes a file of groups alone.

mod changes;
#[cfg(test)]
mod field_views;
mod upstreams;

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, IsTerminal, Write};
use std::path::Path;
use std::process::ExitCode;

use serde::Serialize;
use serde_json::{json, Value};

use crate::api::http::{send, Call};
use crate::Connection;
use ax_core::dispatch::routing::Routing;
use ax_core::security::Allowlist;
use ax_core::task::fields;
use ax_core::text::yaml;
use ax_core::EXIT_USAGE;
use ax_server::api::validate::executor::{group_input, group_name};
use ax_server::api::{task_body, task_input};
use ax_server::error::ApiError;
use ax_server::service::executors::{GroupInput, DEFAULT_MAX_IN_FLIGHT};
use ax_server::service::task_input::TaskInput;

pub use changes::Difference;
use upstreams::Directory;
pub use upstreams::{Key, Resolved, Upstream, Written};

/// Tasks a bulk call takes.
const BULK_ITEMS: usize = 1000;

/// `ax diff`'s exit status when the file and the store differ (0 when they do not, 2 for a
/// bad file or option).
const EXIT_DIFFERENCES: u8 = 1;

/// `ax diff`'s exit status when the server cannot be reached or refuses a request: not 1,
/// which says the two differ.
const EXIT_UNREACHABLE: u8 = 3;

/// What `apply` would do.
#[derive(Debug, Default, PartialEq)]
pub struct Plan {
    pub create: Vec<Key>,
    /// With the fields that differ, old → new.
    pub change: Vec<(Key, Vec<Difference>)>,
    /// With the stored task's id (`--prune` only).
    pub delete: Vec<(Key, i64)>,
    /// How many stored tasks of the file's scenes the file does not have, left as they are
    /// (without `--prune`).
    pub kept: usize,
    /// Scenes to pause (`true`) or resume.
    pub scenes: Vec<(String, bool)>,
    /// Executor groups to create or replace, by name.
    pub groups: Vec<(String, GroupChange)>,
}

/// A file's contents: its tasks, the pause of the scenes it names, and its executor groups.
#[derive(Debug, Default, PartialEq)]
pub struct TaskFile {
    pub tasks: Vec<Value>,
    pub scenes: BTreeMap<String, bool>,
    pub groups: Vec<GroupEntry>,
}

/// An executor group of a file: its name, its definition as the API reads it, and the body
/// to `PUT /api/executors/{name}`.
#[derive(Debug, Clone, PartialEq)]
pub struct GroupEntry {
    pub name: String,
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

/// A task of a file: its definition as the API reads it (upstreams aside), its upstreams as
/// the file writes them, and the body to send, whose `dependsOn` is set once they are
/// resolved to ids.
#[derive(Debug, Clone)]
pub struct FileTask {
    pub input: TaskInput,
    pub upstreams: Vec<Written>,
    body: Value,
}

impl FileTask {
    fn key(&self) -> Key {
        (self.input.scene.clone(), self.input.name.clone())
    }
}

/// How `ax apply` goes about it.
#[derive(Debug, Clone, Copy, Default)]
pub struct ApplyOptions {
    /// Print the plan; change nothing.
    pub dry_run: bool,
    /// Delete the tasks of the file's scenes that it does not have.
    pub prune: bool,
    /// Delete without asking.
    pub yes: bool,
}

impl Plan {
    pub fn is_empty(&self) -> bool {
        self.create.is_empty()
            && self.change.is_empty()
            && self.delete.is_empty()
            && self.scenes.is_empty()
            && self.groups.is_empty()
    }

    /// The scenes to pause, and those to resume.
    fn scene_moves(&self, pause: bool) -> impl Iterator<Item = &str> {
        self.scenes
            .iter()
            .filter(move |(_, paused)| *paused == pause)
            .map(|(scene, _)| scene.as_str())
    }

    /// `+ created`, `~ changed: field old → new, …`, `- deleted` lines, one per task, after
    /// those of the executor groups, which are written first.
    pub fn lines(&self) -> Vec<String> {
        let name = |(scene, name): &Key| format!("{scene}/{name}");
        let mut lines: Vec<String> = self
            .groups
            .iter()
            .map(|(group, change)| match change {
                GroupChange::Create => format!("+ executor {group}"),
                GroupChange::Replace(keys) => format!("~ executor {group} ({})", keys.join(", ")),
            })
            .collect();
        lines.extend(self.create.iter().map(|k| format!("+ {}", name(k))));
        lines.extend(self.change.iter().map(|(k, differences)| {
            let fields: Vec<String> = differences.iter().map(Difference::line).collect();
            format!("~ {}: {}", name(k), fields.join(", "))
        }));
        lines.extend(self.delete.iter().map(|(k, _)| format!("- {}", name(k))));
        lines.extend(self.scenes.iter().map(|(scene, paused)| match paused {
            true => format!("~ scene {scene} (paused)"),
            false => format!("~ scene {scene} (resumed)"),
        }));
        lines
    }

    /// The closing count: what was (or, on a dry run, would be) created, changed, deleted,
    /// and scenes paused or resumed, groups created or replaced; then the tasks kept.
    fn count(&self, dry_run: bool) -> String {
        let n = |count: usize, done: &str| match dry_run {
            true => format!("{count} would be {done}"),
            false => format!("{count} {done}"),
        };
        let mut count = [
            n(self.create.len(), "created"),
            n(self.change.len(), "changed"),
            n(self.delete.len(), "deleted"),
        ]
        .join(", ");
        if !self.scenes.is_empty() {
            let paused = self.scene_moves(true).count();
            let resumed = self.scenes.len() - paused;
            let (paused, resumed) = (n(paused, "paused"), n(resumed, "resumed"));
            count.push_str(&format!("; scenes: {paused}, {resumed}"));
        }
        if !self.groups.is_empty() {
            let created = self
                .groups
                .iter()
                .filter(|(_, change)| *change == GroupChange::Create)
                .count();
            let replaced = self.groups.len() - created;
            let (created, replaced) = (n(created, "created"), n(replaced, "replaced"));
            count.push_str(&format!("; executors: {created}, {replaced}"));
        }
        count.push_str(&self.kept_note());
        count
    }

    /// What an apply that changes nothing prints.
    fn no_change(&self) -> String {
        format!("no change{}", self.kept_note())
    }

    /// `; N not in the file, kept (--prune deletes them)`, when there are such tasks.
    fn kept_note(&self) -> String {
        match self.kept {
            0 => String::new(),
            kept => format!("; {kept} not in the file, kept (--prune deletes them)"),
        }
    }
}

/// The scenes whose pause the file asks to change: (scene, pause it), by name.
pub fn scene_changes(
    wanted: &BTreeMap<String, bool>,
    paused: &BTreeSet<String>,
) -> Vec<(String, bool)> {
    wanted
        .iter()
        .filter(|(scene, pause)| paused.contains(*scene) != **pause)
        .map(|(scene, pause)| (scene.clone(), *pause))
        .collect()
}

/// The fields in which two definitions differ, named as in the API, in their declared order;
/// not `name` and `scene`, by which the two were matched.
pub fn changed_fields(want: &TaskInput, have: &TaskInput) -> Vec<&'static str> {
    let (want, have) = (
        changes::definition(want, None),
        changes::definition(have, None),
    );
    changes::differences(&want, &have)
        .iter()
        .map(|difference| difference.field.name)
        .collect()
}

/// The plan from the file's tasks (`wanted`: each one's key and definition, see
/// `changes::definition`) to the stored ones (`stored`: every task of the file's scenes, with
/// its id and definition).
pub fn plan(wanted: &[(Key, Value)], stored: &BTreeMap<Key, (i64, Value)>, prune: bool) -> Plan {
    let mut plan = Plan::default();
    let mut seen = BTreeSet::new();
    for (key, want) in wanted {
        match stored.get(key) {
            None => plan.create.push(key.clone()),
            Some((_, have)) => {
                let differences = changes::differences(want, have);
                if !differences.is_empty() {
                    plan.change.push((key.clone(), differences));
                }
            }
        }
        seen.insert(key);
    }
    let left = stored.iter().filter(|(key, _)| !seen.contains(key));
    match prune {
        true => plan.delete = left.map(|(key, (id, _))| (key.clone(), *id)).collect(),
        false => plan.kept = left.count(),
    }
    plan
}

/// The file's tasks against the stored ones read (`stored`: those of the file's scenes and of
/// the scenes its names point into): the plan, and each file task's key and upstreams. An
/// unknown upstream name or a cycle is an error naming the task's `dependsOn`.
pub fn task_plan(
    tasks: &[FileTask],
    stored: &BTreeMap<Key, (i64, TaskInput)>,
    prune: bool,
) -> Result<(Plan, Resolved), String> {
    let directory = Directory::new(
        stored.iter().map(|(key, (id, _))| (key, *id)),
        tasks.iter().map(FileTask::key),
    );
    let mut resolved = Vec::with_capacity(tasks.len());
    for (n, task) in tasks.iter().enumerate() {
        let upstreams = directory
            .resolve(&task.input.scene, &task.upstreams)
            .map_err(|message| upstreams_error(n, &message))?;
        resolved.push((task.key(), upstreams));
    }
    check_cycles(&resolved, stored, &directory)?;
    let scenes: BTreeSet<&str> = tasks.iter().map(|t| t.input.scene.as_str()).collect();
    let wanted: Vec<(Key, Value)> = tasks
        .iter()
        .zip(&resolved)
        .map(|(task, (key, ups))| (key.clone(), changes::definition(&task.input, Some(ups))))
        .collect();
    let have: BTreeMap<Key, (i64, Value)> = stored
        .iter()
        .filter(|((scene, _), _)| scenes.contains(scene.as_str()))
        .map(|(key, (id, input))| {
            let ups = directory.of_ids(&input.depends_on);
            (key.clone(), (*id, changes::definition(input, Some(&ups))))
        })
        .collect();
    Ok((plan(&wanted, &have, prune), resolved))
}

/// A cycle through the file's tasks, by their upstreams and those the stored tasks it does
/// not have keep, refused before anything is written: an error naming the first task of the
/// file on it.
fn check_cycles(
    resolved: &[(Key, Vec<Upstream>)],
    stored: &BTreeMap<Key, (i64, TaskInput)>,
    directory: &Directory,
) -> Result<(), String> {
    let known = |ups: &[Upstream]| -> Vec<Key> {
        ups.iter()
            .filter_map(|up| match up {
                Upstream::Task(key) => Some(key.clone()),
                Upstream::Id(_) => None,
            })
            .collect()
    };
    let in_file: BTreeMap<&Key, usize> = resolved
        .iter()
        .enumerate()
        .map(|(n, (key, _))| (key, n))
        .collect();
    let mut owned: BTreeMap<&Key, Vec<Key>> = stored
        .iter()
        .filter(|(key, _)| !in_file.contains_key(key))
        .map(|(key, (_, input))| (key, known(&directory.of_ids(&input.depends_on))))
        .collect();
    owned.extend(resolved.iter().map(|(key, ups)| (key, known(ups))));
    let edges: BTreeMap<&Key, Vec<&Key>> = owned
        .iter()
        .map(|(key, ups)| (*key, ups.iter().collect()))
        .collect();
    let starts: Vec<&Key> = resolved.iter().map(|(key, _)| key).collect();
    let Some(path) = upstreams::cycle(&edges, &starts) else {
        return Ok(());
    };
    let first = path.iter().filter_map(|key| in_file.get(key)).min();
    let names: Vec<String> = path.iter().map(|(s, n)| format!("{s}/{n}")).collect();
    let message = format!("a cycle of upstreams: {}", names.join(" → "));
    Err(upstreams_error(first.copied().unwrap_or(0), &message))
}

/// An error of the `dependsOn` of the file's `n`th task, worded as the others of a file.
fn upstreams_error(n: usize, message: &str) -> String {
    refusal_text(&ApiError::invalid(fields::DEPENDS_ON.name, message).in_item(n))
}

/// The top-level keys of a file that is not a bare list.
const FILE_KEYS: [&str; 3] = ["executors", "scenes", "tasks"];

/// Reads a file of tasks: a YAML (JSON is YAML) list of task bodies, or `{tasks: [...]}` with
/// optional `scenes: {name: {paused: bool}}` and `executors: [{name, …}]` (either of `tasks`
/// and `executors` may be left out).
pub fn read_file(path: &Path) -> Result<TaskFile, String> {
    let in_file = |message: String| format!("{}: {message}", path.display());
    match read_yaml(path)? {
        Value::Array(tasks) => Ok(TaskFile {
            tasks,
            ..TaskFile::default()
        }),
        Value::Object(mut file) if file.contains_key("tasks") || file.contains_key("executors") => {
            if let Some(key) = file.keys().find(|key| !FILE_KEYS.contains(&key.as_str())) {
                return Err(in_file(format!(
                    "unknown key `{key}` (a file has {})",
                    FILE_KEYS.join(", ")
                )));
            }
            let tasks = match file.remove("tasks") {
                None | Some(Value::Null) => Vec::new(),
                Some(Value::Array(tasks)) => tasks,
                Some(_) => return Err(in_file("`tasks` must be a list".into())),
            };
            let scenes = scene_pauses(file.remove("scenes")).map_err(in_file)?;
            let groups = group_entries(file.remove("executors")).map_err(in_file)?;
            Ok(TaskFile {
                tasks,
                scenes,
                groups,
            })
        }
        _ => Err(in_file(
            "expected a list of tasks, or {executors, scenes, tasks}".into(),
        )),
    }
}

/// Reads a file of executor groups: a YAML (or JSON) list of `{name, routing?, maxInFlight?,
/// members?}`, or `{executors: [...]}`.
pub fn read_groups_file(path: &Path) -> Result<Vec<GroupEntry>, String> {
    let in_file = |message: String| format!("{}: {message}", path.display());
    match read_yaml(path)? {
        list @ Value::Array(_) => group_entries(Some(list)).map_err(in_file),
        Value::Object(mut file) if file.len() == 1 && file.contains_key("executors") => {
            group_entries(file.remove("executors")).map_err(in_file)
        }
        _ => Err(in_file(
            "expected a list of executor groups, or {executors: [...]}".into(),
        )),
    }
}

/// A file's YAML (or JSON), refused as soon as it nests deeper than [`yaml::MAX_DEPTH`].
pub fn read_yaml(path: &Path) -> Result<Value, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|err| format!("cannot read {}: {err}", path.display()))?;
    yaml::from_str(&text).map_err(|err| match err {
        yaml::Error::TooDeep { line } => format!(
            "{}:{line}: nested deeper than {} levels; a file of tasks is not read that deep",
            path.display(),
            yaml::MAX_DEPTH
        ),
        invalid => format!("{} is not YAML or JSON: {invalid}", path.display()),
    })
}

/// The `executors` of a file, each checked as the API checks it; errors name the group's index
/// and key (`executors[0].routing`).
fn group_entries(value: Option<Value>) -> Result<Vec<GroupEntry>, String> {
    let items = match value {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Array(items)) => items,
        Some(_) => return Err("`executors` must be a list of groups".into()),
    };
    let allow_any = Allowlist::default();
    let mut entries: Vec<GroupEntry> = Vec::with_capacity(items.len());
    for (n, item) in items.into_iter().enumerate() {
        let at = |key: &str, message: String| format!("executors[{n}].{key}: {message}");
        let Value::Object(mut body) = item else {
            return Err(format!(
                "executors[{n}]: a group is {{name, routing?, maxInFlight?, members?}}"
            ));
        };
        let name = match body.remove("name") {
            Some(Value::String(name)) => {
                group_name(name, "name").map_err(|err| at("name", err.to_string()))?
            }
            _ => return Err(at("name", "name is required: the group's name".into())),
        };
        if let Some(first) = entries.iter().position(|entry| entry.name == name) {
            return Err(format!(
                "executors[{n}]: the same name as executors[{first}]"
            ));
        }
        let body = Value::Object(body);
        let input = group_input(body.clone(), &allow_any)
            .map_err(|err| at(err.field().unwrap_or("?"), err.to_string()))?;
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
) -> Vec<(String, GroupChange)> {
    wanted
        .iter()
        .filter_map(|want| {
            let change = match stored.get(&want.name) {
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

/// The store's groups as definitions: their defined members, not those that registered
/// themselves.
async fn stored_groups(conn: &Connection) -> Result<BTreeMap<String, GroupInput>, String> {
    let listing = send(conn, &Call::new("GET", "/api/executors".into())).await?;
    let mut groups = BTreeMap::new();
    for group in listing["items"].as_array().into_iter().flatten() {
        let name = group["name"].as_str().unwrap_or_default().to_string();
        let routing = group["routing"].as_str().unwrap_or_default();
        let routing = Routing::parse(routing)
            .ok_or_else(|| format!("stored group {name} has an unknown routing `{routing}`"))?;
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

/// Creates or replaces a group.
async fn put_group(conn: &Connection, group: &GroupEntry) -> Result<(), String> {
    // Group names (`a-z 0-9 _ . -`) need no escaping in a path.
    let call = Call::new("PUT", format!("/api/executors/{}", group.name)).body(group.body.clone());
    send(conn, &call).await.map(drop)
}

/// Runs `ax executors apply`: PUTs every group of the file, printing `+ NAME (created)` or
/// `~ NAME (replaced)` for each, then a count.
pub fn apply_groups(conn: Connection, file: &Path) -> ExitCode {
    let groups = match read_groups_file(file) {
        Ok(groups) => groups,
        Err(message) => {
            eprintln!("ax executors apply: {message}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let outcome = actix_rt::System::new().block_on(async {
        let stored = stored_groups(&conn).await?;
        let mut lines = Vec::with_capacity(groups.len() + 1);
        for group in &groups {
            put_group(&conn, group).await?;
            lines.push(match stored.contains_key(&group.name) {
                true => format!("~ {} (replaced)", group.name),
                false => format!("+ {} (created)", group.name),
            });
        }
        let replaced = groups
            .iter()
            .filter(|group| stored.contains_key(&group.name))
            .count();
        lines.push(format!(
            "{} created, {replaced} replaced",
            groups.len() - replaced
        ));
        Ok::<_, String>(lines)
    });
    print_outcome("ax executors apply", outcome)
}

/// The lines of a command that went through, or its error: exit 1.
fn print_outcome(command: &str, outcome: Result<Vec<String>, String>) -> ExitCode {
    match outcome {
        Ok(lines) => {
            lines.iter().for_each(|line| println!("{line}"));
            ExitCode::SUCCESS
        }
        Err(message) => {
            eprintln!("{command}: {message}");
            ExitCode::FAILURE
        }
    }
}

/// The `scenes` of a file: each scene's name, checked as the API checks it, and its pause.
fn scene_pauses(value: Option<Value>) -> Result<BTreeMap<String, bool>, String> {
    let scenes = match value {
        None | Some(Value::Null) => return Ok(BTreeMap::new()),
        Some(Value::Object(scenes)) => scenes,
        Some(_) => return Err("`scenes` must map scene names to {paused: true|false}".into()),
    };
    let mut pauses = BTreeMap::new();
    for (scene, state) in scenes {
        let name = ax_server::api::validate::scene(scene.clone())
            .map_err(|err| format!("scenes.{scene}: {err}"))?;
        match state.get("paused") {
            Some(Value::Bool(paused)) if state.as_object().is_some_and(|s| s.len() == 1) => {
                pauses.insert(name, *paused);
            }
            _ => return Err(format!("scenes.{scene}.paused must be true or false")),
        }
    }
    Ok(pauses)
}

/// The file's tasks, checked as the API checks them (their upstreams apart: names are
/// resolved against the store); errors name the task and field.
fn definitions(items: &[Value]) -> Result<Vec<FileTask>, String> {
    let allow_any = Allowlist::default();
    let mut seen = BTreeMap::new();
    let mut tasks = Vec::with_capacity(items.len());
    for (n, item) in items.iter().enumerate() {
        let mut body = item.clone();
        let written = match body.as_object_mut() {
            Some(fields) => upstreams::written(fields.remove(fields::DEPENDS_ON.name))
                .map_err(|message| upstreams_error(n, &message))?,
            None => Vec::new(),
        };
        let input =
            task_input(body.clone(), &allow_any).map_err(|err| refusal_text(&err.in_item(n)))?;
        let key = (input.scene.clone(), input.name.clone());
        if let Some(first) = seen.insert(key, n) {
            return Err(format!(
                "items[{n}]: the same scene and name as items[{first}]"
            ));
        }
        tasks.push(FileTask {
            input,
            upstreams: written,
            body,
        });
    }
    Ok(tasks)
}

/// A task of the file refused, as `ax apply` says it: each field refused, with its message.
fn refusal_text(err: &ApiError) -> String {
    let fields = err.field_errors();
    if fields.is_empty() {
        return format!("{err} (field ?)");
    }
    let each: Vec<String> = fields
        .iter()
        .map(|refused| format!("{} (field {})", refused.message, refused.field))
        .collect();
    each.join("; ")
}

/// Every stored task of these scenes, as definitions, by `(scene, name)`.
async fn stored(
    conn: &Connection,
    scenes: &BTreeSet<String>,
) -> Result<BTreeMap<Key, (i64, TaskInput)>, String> {
    let allow_any = Allowlist::default();
    let mut found = BTreeMap::new();
    for scene in scenes {
        for task in tasks_of(conn, Some(scene)).await? {
            let id = task["id"].as_i64().unwrap_or_default();
            let input = task_input(task_body(task), &allow_any)
                .map_err(|err| format!("stored task {id} reads back invalid: {err}"))?;
            found.insert((input.scene.clone(), input.name.clone()), (id, input));
        }
    }
    Ok(found)
}

/// Every task (of `scene`), all pages.
async fn tasks_of(conn: &Connection, scene: Option<&str>) -> Result<Vec<Value>, String> {
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
async fn paused_scenes(conn: &Connection) -> Result<BTreeSet<String>, String> {
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
async fn move_scene(conn: &Connection, scene: &str, pause: bool) -> Result<(), String> {
    let verb = if pause { "pause" } else { "resume" };
    // Scene names (`A-Z a-z 0-9 _ . : -`) need no escaping in a path.
    let path = format!("/api/scenes/{scene}/{verb}");
    send(conn, &Call::new("POST", path)).await.map(drop)
}

/// Why `apply` or `diff` stopped.
#[derive(Debug)]
enum Failure {
    /// The file or the options: nothing was written.
    Input(String),
    /// The server could not be reached, or refused a request.
    Server(String),
    /// The deletes were not confirmed: nothing was written.
    Declined,
}

impl From<String> for Failure {
    fn from(message: String) -> Self {
        Failure::Server(message)
    }
}

impl Failure {
    /// Says why on stderr; the exit status (`server`: that of a server's failure).
    fn report(self, command: &str, server: u8) -> ExitCode {
        let (message, code) = match self {
            Failure::Input(message) => (message, EXIT_USAGE),
            Failure::Server(message) => (message, server),
            Failure::Declined => ("not confirmed; nothing changed".to_string(), 1),
        };
        eprintln!("{command}: {message}");
        ExitCode::from(code)
    }
}

/// A file's tasks with their plan: what `apply` writes and `diff` shows.
struct Prepared {
    file: TaskFile,
    tasks: Vec<FileTask>,
    plan: Plan,
    /// Each file task's key and upstreams.
    upstreams: Resolved,
    /// The ids of the stored tasks read.
    ids: BTreeMap<Key, i64>,
}

/// Reads the file and its tasks; a bad one is an input failure.
fn read_tasks(path: &Path) -> Result<(TaskFile, Vec<FileTask>), Failure> {
    let file = read_file(path).map_err(Failure::Input)?;
    let tasks = definitions(&file.tasks).map_err(Failure::Input)?;
    Ok((file, tasks))
}

/// The plan of a file: the stored tasks of its scenes (and of the scenes its upstream names
/// point into), scenes and groups read and compared with it.
async fn prepare(
    conn: &Connection,
    (file, tasks): (TaskFile, Vec<FileTask>),
    prune: bool,
) -> Result<Prepared, Failure> {
    let mut scenes: BTreeSet<String> = tasks.iter().map(|t| t.input.scene.clone()).collect();
    let named = upstreams::named_scenes(tasks.iter().flat_map(|t| &t.upstreams));
    // A name's prefix that is no scene name is a task's name with a `/`.
    scenes.extend(
        named
            .into_iter()
            .filter(|scene| ax_server::api::validate::scene(scene.clone()).is_ok()),
    );
    let stored = stored(conn, &scenes).await?;
    let (mut plan, upstreams) = task_plan(&tasks, &stored, prune).map_err(Failure::Input)?;
    if !file.scenes.is_empty() {
        plan.scenes = scene_changes(&file.scenes, &paused_scenes(conn).await?);
    }
    if !file.groups.is_empty() {
        plan.groups = group_changes(&file.groups, &stored_groups(conn).await?);
    }
    let ids = stored.into_iter().map(|(key, (id, _))| (key, id)).collect();
    Ok(Prepared {
        file,
        tasks,
        plan,
        upstreams,
        ids,
    })
}

/// Whether `--prune`'s deletes may go ahead.
#[derive(Debug, PartialEq, Eq)]
enum Consent {
    Given,
    /// Ask on the terminal.
    Ask,
    /// No terminal to ask on, and no `--yes`.
    Missing,
}

/// Deleting asks first, on a terminal, unless `--yes` says to go ahead.
fn consent(deletes: usize, yes: bool, terminal: bool) -> Consent {
    match (deletes, yes, terminal) {
        (0, _, _) | (_, true, _) => Consent::Given,
        (_, false, true) => Consent::Ask,
        (_, false, false) => Consent::Missing,
    }
}

/// Asks `Delete N tasks? [y/N]` on the terminal: whether the answer is yes.
fn ask_to_delete(deletes: usize) -> bool {
    eprint!("Delete {deletes} tasks? [y/N] ");
    let _ = std::io::stderr().flush();
    let mut answer = String::new();
    match std::io::stdin().lock().read_line(&mut answer) {
        Ok(_) => matches!(answer.trim().to_lowercase().as_str(), "y" | "yes"),
        Err(_) => false,
    }
}

/// Runs `ax apply`: prints the plan's lines, then (unless a dry run) writes it and prints the
/// count. Exit 2 for a bad file, or deletes without `--yes` off a terminal; 1 when the
/// server refuses or cannot be reached, or the deletes are not confirmed.
pub fn apply(conn: Connection, file: &Path, options: ApplyOptions) -> ExitCode {
    let outcome = read_tasks(file).map(|read| {
        actix_rt::System::new().block_on(async {
            let prepared = prepare(&conn, read, options.prune).await?;
            apply_prepared(&conn, prepared, options).await
        })
    });
    match outcome.and_then(|done| done) {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => failure.report("ax apply", 1),
    }
}

async fn apply_prepared(
    conn: &Connection,
    prepared: Prepared,
    options: ApplyOptions,
) -> Result<(), Failure> {
    let plan = &prepared.plan;
    plan.lines().iter().for_each(|line| println!("{line}"));
    if plan.is_empty() {
        println!("{}", plan.no_change());
        return Ok(());
    }
    if options.dry_run {
        println!("{}", plan.count(true));
        return Ok(());
    }
    let deletes = plan.delete.len();
    match consent(deletes, options.yes, std::io::stdin().is_terminal()) {
        Consent::Given => {}
        Consent::Ask if ask_to_delete(deletes) => {}
        Consent::Ask => return Err(Failure::Declined),
        Consent::Missing => {
            return Err(Failure::Input(format!(
                "--prune would delete {deletes} tasks: pass --yes to delete them (no terminal \
                 to ask on); nothing changed"
            )))
        }
    }
    write(conn, &prepared).await?;
    println!("{}", plan.count(false));
    Ok(())
}

/// Writes a plan: groups first (the tasks may name them), scenes paused, tasks upstreams
/// first, deletes, scenes resumed.
async fn write(conn: &Connection, prepared: &Prepared) -> Result<(), String> {
    let (plan, file) = (&prepared.plan, &prepared.file);
    for (name, _) in &plan.groups {
        if let Some(group) = file.groups.iter().find(|group| &group.name == name) {
            put_group(conn, group).await?;
        }
    }
    // Paused before the tasks are written, resumed after: no task of a paused scene fires.
    for scene in plan.scene_moves(true) {
        move_scene(conn, scene, true).await?;
    }
    write_tasks(conn, prepared).await?;
    for (_, id) in &plan.delete {
        send(conn, &Call::new("DELETE", format!("/api/tasks/{id}"))).await?;
    }
    for scene in plan.scene_moves(false) {
        move_scene(conn, scene, false).await?;
    }
    Ok(())
}

/// Creates and changes the plan's tasks, in layers: a task after the upstreams this apply
/// creates, whose ids are read once they exist.
async fn write_tasks(conn: &Connection, prepared: &Prepared) -> Result<(), String> {
    let plan = &prepared.plan;
    let creates: BTreeSet<Key> = plan.create.iter().cloned().collect();
    let changes: BTreeSet<&Key> = plan.change.iter().map(|(key, _)| key).collect();
    let writes: Vec<usize> = (0..prepared.tasks.len())
        .filter(|n| {
            let key = &prepared.upstreams[*n].0;
            creates.contains(key) || changes.contains(key)
        })
        .collect();
    let mut ids = prepared.ids.clone();
    let mut created_scenes = BTreeSet::new();
    for layer in upstreams::layers(&prepared.upstreams, &writes, &creates) {
        if !created_scenes.is_empty() {
            // The tasks the previous layer created: upstreams of this one.
            for (key, (id, _)) in stored(conn, &created_scenes).await? {
                ids.insert(key, id);
            }
        }
        created_scenes = layer
            .iter()
            .map(|n| &prepared.upstreams[*n].0)
            .filter(|key| creates.contains(*key))
            .map(|(scene, _)| scene.clone())
            .collect();
        let mut bodies = Vec::with_capacity(layer.len());
        for &n in &layer {
            let mut body = prepared.tasks[n].body.clone();
            body[fields::DEPENDS_ON.name] = upstream_ids(&prepared.upstreams[n].1, &ids)?;
            bodies.push(body);
        }
        for chunk in bodies.chunks(BULK_ITEMS) {
            let call = Call::new("POST", "/api/tasks/bulk".into())
                .body(json!({"items": chunk, "upsert": true}));
            send(conn, &call).await?;
        }
    }
    Ok(())
}

/// A task's upstreams as the ids the API takes.
fn upstream_ids(upstreams: &[Upstream], ids: &BTreeMap<Key, i64>) -> Result<Value, String> {
    upstreams
        .iter()
        .map(|upstream| match upstream {
            Upstream::Id(id) => Ok(json!(id)),
            Upstream::Task(key) => ids.get(key).map(|id| json!(id)).ok_or_else(|| {
                format!(
                    "upstream {} has no id: it was not created",
                    upstream.label()
                )
            }),
        })
        .collect::<Result<Vec<Value>, String>>()
        .map(Value::Array)
}

/// Runs `ax diff`: prints the lines `apply` would print, without the count; exit 0 when
/// there are none, 1 when there are, 2 for a bad file, 3 when the server refuses or cannot be
/// reached.
pub fn diff(conn: Connection, file: &Path, prune: bool) -> ExitCode {
    let outcome = read_tasks(file)
        .and_then(|read| actix_rt::System::new().block_on(prepare(&conn, read, prune)));
    match outcome {
        Ok(prepared) if prepared.plan.is_empty() => ExitCode::SUCCESS,
        Ok(prepared) => {
            prepared
                .plan
                .lines()
                .iter()
                .for_each(|line| println!("{line}"));
            ExitCode::from(EXIT_DIFFERENCES)
        }
        Err(failure) => failure.report("ax diff", EXIT_UNREACHABLE),
    }
}

/// A JSON object whose keys are written in the order they were put in (serde_json's map
/// sorts them): a task's fields in their declared order, a group's name first.
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
        #[serde(skip_serializing_if = "Option::is_none")]
        scenes: Option<BTreeMap<String, Value>>,
        tasks: Vec<Ordered>,
    },
}

/// Runs `ax export`: the tasks (of `scene`) as a file `apply` takes, in YAML (JSON with
/// `--json`).
pub fn export(conn: Connection, scene: Option<String>) -> ExitCode {
    let read = actix_rt::System::new().block_on(async {
        let mut tasks = tasks_of(&conn, scene.as_deref()).await?;
        tasks.sort_by_key(|t| (t["scene"].to_string(), t["name"].to_string()));
        let groups = groups_of(&conn, &tasks).await?;
        let directory = upstream_directory(&conn, &tasks).await?;
        Ok::<_, String>((tasks, groups, directory, paused_scenes(&conn).await?))
    });
    let (tasks, groups, directory, mut paused) = match read {
        Ok(read) => read,
        Err(message) => {
            eprintln!("ax export: {message}");
            return ExitCode::FAILURE;
        }
    };
    if let Some(scene) = &scene {
        paused.retain(|paused| paused == scene);
    }
    let entries: Vec<Ordered> = tasks
        .into_iter()
        .map(|task| file_entry(task, &directory))
        .collect();
    let file = export_file(entries, groups, &paused);
    let text = if conn.json {
        serde_json::to_string_pretty(&file).map_err(|e| e.to_string())
    } else {
        yaml::to_string(&file).map_err(|e| e.to_string())
    };
    match text {
        Ok(text) => {
            println!("{}", text.trim_end());
            ExitCode::SUCCESS
        }
        Err(message) => {
            eprintln!("ax export: {message}");
            ExitCode::FAILURE
        }
    }
}

/// The scene a task (as the API shows it, or as a file entry) is in.
fn scene_of(task: Option<&Value>) -> &str {
    task.and_then(Value::as_str)
        .unwrap_or(fields::SCENE.default_text())
}

/// The upstreams of `tasks` (as the API shows them) by id: the tasks themselves, and those
/// of other scenes they wait on, read one by one.
async fn upstream_directory(conn: &Connection, tasks: &[Value]) -> Result<Directory, String> {
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
            Err(message) if message.starts_with("NOT_FOUND") => {}
            Err(message) => return Err(message),
        }
    }
    let keys: Vec<(Key, i64)> = known.into_iter().map(|(id, key)| (key, id)).collect();
    Ok(Directory::new(keys.iter().map(|(key, id)| (key, *id)), []))
}

/// The exported file: the list of tasks, or, when the tasks use executor groups (`groups`,
/// as file entries) or one of the scenes is paused (`paused`: the store's paused scenes among
/// those exported), `{executors, scenes, tasks}`: the groups, and every scene of the file
/// with its pause, so that `apply` restores each.
fn export_file(
    tasks: Vec<Ordered>,
    executors: Vec<Ordered>,
    paused: &BTreeSet<String>,
) -> ExportFile {
    if paused.is_empty() {
        if executors.is_empty() {
            return ExportFile::List(tasks);
        }
        return ExportFile::Sections {
            executors,
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
        scenes: Some(scenes),
        tasks,
    }
}

/// The executor groups `tasks` use, as file entries: name, routing and `maxInFlight` unless
/// the defaults, and the defined members (registered ones register again themselves).
async fn groups_of(conn: &Connection, tasks: &[Value]) -> Result<Vec<Ordered>, String> {
    let names: BTreeSet<&str> = tasks
        .iter()
        .filter_map(|task| task["executor"]["group"].as_str())
        .collect();
    let mut groups = Vec::new();
    for name in names {
        // Group names (`a-z 0-9 _ . -`) need no escaping in a path.
        let call = Call::new("GET", format!("/api/executors/{name}"));
        match send(conn, &call).await {
            Ok(group) => groups.push(group_entry(name, &group)),
            // Named by a task before it exists: nothing to export.
            Err(message) if message.starts_with("NOT_FOUND") => {}
            Err(message) => return Err(message),
        }
    }
    Ok(groups)
}

/// A group as `GET /api/executors/{name}` shows it, as a file entry.
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
mod tests {
    use super::*;
    use proptest::prelude::*;

    const HANDLER: &str = "http://executor.internal:80/run";

    fn body(scene: &str, name: &str, cron: &str) -> Value {
        json!({"name": name, "scene": scene, "cron": cron, "handlerUrl": HANDLER})
    }

    fn input(name: &str, cron: &str) -> TaskInput {
        task_input(body("s", name, cron), &Allowlist::default()).expect("valid")
    }

    fn stored_as(tasks: &[(i64, TaskInput)]) -> BTreeMap<Key, (i64, TaskInput)> {
        tasks
            .iter()
            .map(|(id, t)| ((t.scene.clone(), t.name.clone()), (*id, t.clone())))
            .collect()
    }

    fn file_tasks(items: &[Value]) -> Vec<FileTask> {
        definitions(items).expect("a valid file")
    }

    /// The plan of `items` against `stored` (keyed by the tasks themselves).
    fn plan_of(items: &[Value], stored: &[(i64, TaskInput)], prune: bool) -> Plan {
        task_plan(&file_tasks(items), &stored_as(stored), prune)
            .expect("resolved")
            .0
    }

    #[test]
    fn the_plan_creates_changes_and_prunes_by_scene_and_name() {
        let stored = [
            (1, input("same", "0 0 1 * * *")),
            (2, input("moved", "0 0 2 * * *")),
            (3, input("gone", "0 0 3 * * *")),
        ];
        let mut retried = body("s", "moved", "0 30 2 * * *");
        retried["maxRetry"] = json!(1);
        let wanted = [
            body("s", "same", "0 0 1 * * *"),
            retried,
            body("s", "new", "0 0 4 * * *"),
        ];
        let plan = plan_of(&wanted, &stored, true);
        assert_eq!(
            plan.lines(),
            [
                "+ s/new",
                r#"~ s/moved: cron "0 0 2 * * *" → "0 30 2 * * *", maxRetry 3 → 1"#,
                "- s/gone"
            ]
        );
        assert_eq!(plan.count(false), "1 created, 1 changed, 1 deleted");
        assert_eq!(
            plan.count(true),
            "1 would be created, 1 would be changed, 1 would be deleted"
        );
        let kept = plan_of(&wanted, &stored, false);
        assert!(kept.delete.is_empty());
        assert_eq!(
            kept.count(false),
            "1 created, 1 changed, 0 deleted; 1 not in the file, kept (--prune deletes them)"
        );
    }

    #[test]
    fn a_definition_the_server_stores_the_same_way_is_unchanged() {
        // The cron is trimmed and the default port dropped, the same way on both sides.
        let stored = [(1, input("a", "0 0 1 * * *"))];
        let plan = plan_of(&[body("s", "a", " 0 0 1 * * * ")], &stored, true);
        assert!(plan.is_empty());
        assert_eq!(plan.no_change(), "no change");
    }

    #[test]
    fn tasks_of_other_scenes_are_neither_pruned_nor_counted() {
        let other = task_input(body("t", "x", "0 0 1 * * *"), &Allowlist::default());
        let stored = [(1, input("a", "0 0 1 * * *")), (2, other.expect("valid"))];
        let plan = plan_of(&[body("s", "a", "0 0 1 * * *")], &stored, true);
        assert!(plan.is_empty(), "{plan:?}");
        assert_eq!(plan_of(&[], &stored, false).kept, 0, "no scene in the file");
    }

    #[test]
    fn upstreams_by_name_match_the_stored_ids() {
        let mut report = input("report", "0 0 2 * * *");
        report.depends_on = vec![ax_core::run::TaskId(1)];
        let stored = [(1, input("extract", "0 0 1 * * *")), (2, report)];
        let mut wanted = vec![
            body("s", "extract", "0 0 1 * * *"),
            body("s", "report", "0 0 2 * * *"),
        ];
        for same in [json!(["extract"]), json!(["s/extract"]), json!([1])] {
            wanted[1]["dependsOn"] = same.clone();
            assert!(plan_of(&wanted, &stored, true).is_empty(), "{same}");
        }
        wanted.push(body("s", "load", "0 0 3 * * *"));
        wanted[1]["dependsOn"] = json!(["extract", "load"]);
        let (plan, upstreams) =
            task_plan(&file_tasks(&wanted), &stored_as(&stored), true).expect("resolved");
        assert_eq!(
            plan.lines(),
            [
                "+ s/load",
                r#"~ s/report: dependsOn ["s/extract"] → ["s/extract","s/load"]"#
            ]
        );
        let creates = BTreeSet::from([("s".to_string(), "load".to_string())]);
        assert_eq!(
            upstreams::layers(&upstreams, &[1, 2], &creates),
            [vec![2], vec![1]],
            "load is created before report waits on it"
        );
    }

    #[test]
    fn an_unknown_upstream_or_a_cycle_names_the_task_and_field() {
        let stored = [(1, input("a", "0 0 1 * * *"))];
        let mut wanted = vec![body("s", "x", "0 0 1 * * *"), body("s", "y", "0 0 1 * * *")];
        wanted[1]["dependsOn"] = json!(["nope"]);
        let err = task_plan(&file_tasks(&wanted), &stored_as(&stored), false).expect_err("unknown");
        assert!(
            err.contains("items[1].dependsOn") && err.contains("`nope`"),
            "{err}"
        );
        wanted[0]["dependsOn"] = json!(["y"]);
        wanted[1]["dependsOn"] = json!(["s/x"]);
        let err = task_plan(&file_tasks(&wanted), &stored_as(&stored), false).expect_err("a cycle");
        assert!(err.contains("(field items[0].dependsOn)"), "{err}");
        assert!(err.contains("s/x → s/y → s/x"), "{err}");
        // Through a stored task the file does not have: a waits on x.
        let mut a = input("a", "0 0 1 * * *");
        a.depends_on = vec![ax_core::run::TaskId(2)];
        let stored = [(1, a), (2, input("x", "0 0 1 * * *"))];
        let wanted = [json!({"name": "x", "scene": "s", "cron": "0 0 1 * * *",
            "handlerUrl": HANDLER, "dependsOn": ["a"]})];
        let err = task_plan(&file_tasks(&wanted), &stored_as(&stored), false)
            .expect_err("a cycle through a");
        assert!(err.contains("s/x → s/a → s/x"), "{err}");
        let bad = [
            json!({"name": "x", "cron": "0 0 1 * * *", "handlerUrl": HANDLER,
            "dependsOn": [true]}),
        ];
        let err = definitions(&bad).expect_err("not an upstream");
        assert!(err.contains("items[0].dependsOn"), "{err}");
    }

    #[test]
    fn deletes_ask_on_a_terminal_and_need_yes_off_one() {
        assert_eq!(consent(0, false, false), Consent::Given);
        assert_eq!(consent(3, true, false), Consent::Given);
        assert_eq!(consent(3, false, true), Consent::Ask);
        assert_eq!(consent(3, false, false), Consent::Missing);
    }

    fn yaml(file: &ExportFile) -> String {
        yaml::to_string(file).expect("YAML")
    }

    #[test]
    fn a_file_that_is_not_yaml_is_refused_naming_the_file_and_the_line() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("tasks.yaml");
        for (text, said) in [
            (
                "- name: a\n  name: b\n",
                "duplicate mapping key `name` is not allowed here at line 2, column 3",
            ),
            ("- name: a\n   cron: b\n", "at line 2, column 8"),
            ("- name: a\n  scene: \"ops\n", "unclosed quote at line 2"),
        ] {
            std::fs::write(&path, text).expect("write");
            let err = read_yaml(&path).expect_err(text);
            let file = path.display().to_string();
            assert!(
                err.starts_with(&format!("{file} is not YAML or JSON: ")),
                "{err}"
            );
            assert!(err.contains(said), "{err}");
        }
    }

    #[test]
    fn export_writes_the_fields_in_order_without_defaults() {
        let view = json!({"id": 3, "name": "a", "scene": "s", "cron": "* * * * * *",
            "timeZone": "UTC", "handlerUrl": "http://h/", "executor": null, "params": {},
            "maxRetry": 3, "retryFactor": null, "jitterSecs": 5, "labels": {"team": "x"},
            "dependsOn": [], "overlap": "ALLOW", "enabled": true, "status": "ENABLED",
            "nextRunAt": "2027-01-01T00:00:00.000Z"});
        let entry = file_entry(view, &Directory::default());
        let keys: Vec<&str> = entry.0.iter().map(|(key, _)| *key).collect();
        assert_eq!(
            keys,
            [
                "name",
                "scene",
                "cron",
                "handlerUrl",
                "jitterSecs",
                "labels"
            ]
        );
        let text = yaml(&ExportFile::List(vec![entry.clone()]));
        assert!(
            text.starts_with("- name: a\n  scene: s\n  cron: \"* * * * * *\"\n  handlerUrl:"),
            "{text}"
        );
        let json = serde_json::to_string_pretty(&ExportFile::List(vec![entry])).expect("JSON");
        let order = [
            "\"name\"",
            "\"scene\"",
            "\"cron\"",
            "\"handlerUrl\"",
            "\"jitterSecs\"",
        ];
        let at: Vec<usize> = order.iter().filter_map(|key| json.find(key)).collect();
        assert!(at.len() == order.len() && at.is_sorted(), "{json}");
    }

    #[test]
    fn export_names_upstreams_by_scene_and_name() {
        let keys = [
            (("s".to_string(), "a".to_string()), 7),
            (("t".into(), "b".into()), 9),
        ];
        let directory = Directory::new(keys.iter().map(|(key, id)| (key, *id)), []);
        let view = json!({"name": "c", "scene": "s", "cron": "* * * * * *",
            "handlerUrl": "http://h/", "dependsOn": [7, 9, 11]});
        let entry = file_entry(view, &directory);
        assert_eq!(entry.get("dependsOn"), Some(&json!(["s/a", "t/b", 11])));
    }

    #[test]
    fn groups_export_without_defaults_or_registered_members_and_read_back() {
        let shown = json!({"name": "billing", "routing": "BROADCAST", "maxInFlight": 64,
            "members": [{"url": "http://127.0.0.1:9000/", "registered": false},
                        {"url": "http://127.0.0.1:9001/", "registered": true}]});
        let entry = group_entry("billing", &shown);
        assert_eq!(
            entry.0,
            [
                ("name", json!("billing")),
                ("routing", json!("BROADCAST")),
                ("members", json!(["http://127.0.0.1:9000/"]))
            ]
        );
        let plain = json!({"routing": "ROUND_ROBIN", "maxInFlight": 8, "members": []});
        assert_eq!(
            group_entry("g", &plain).0,
            [("name", json!("g")), ("maxInFlight", json!(8))]
        );
        let task = Ordered(vec![("name", json!("a")), ("cron", json!("* * * * * *"))]);
        let file = export_file(vec![task], vec![entry], &BTreeSet::new());
        let text = yaml(&file);
        assert!(text.starts_with("executors:\n- name: billing\n"), "{text}");
        let file: Value = yaml::from_str(&text).expect("reads back");
        assert_eq!(file["tasks"], json!([{"name": "a", "cron": "* * * * * *"}]));
        let groups = group_entries(Some(file["executors"].clone())).expect("read back");
        assert_eq!(groups.len(), 1);
        assert_eq!(groups[0].name, "billing");
    }

    #[test]
    fn scene_pauses_export_and_read_back_as_changes() {
        let task = || Ordered(vec![("name", json!("a")), ("cron", json!("* * * * * *"))]);
        let plain = serde_json::to_value(export_file(vec![task()], Vec::new(), &BTreeSet::new()));
        assert_eq!(
            plain.ok(),
            Some(json!([{"name": "a", "cron": "* * * * * *"}]))
        );
        let paused = BTreeSet::from(["quiet".to_string()]);
        let file = serde_json::to_value(export_file(vec![task()], Vec::new(), &paused));
        let file = file.expect("JSON");
        assert_eq!(
            file["scenes"],
            json!({"quiet": {"paused": true}, "default": {"paused": false}}),
            "a task without a scene is in the default one"
        );
        let wanted = scene_pauses(Some(file["scenes"].clone())).expect("valid");
        assert!(scene_changes(&wanted, &paused).is_empty(), "a round trip");
        assert_eq!(
            scene_changes(&wanted, &BTreeSet::from(["default".to_string()])),
            [("default".to_string(), false), ("quiet".to_string(), true)]
        );
        let plan = Plan {
            scenes: scene_changes(&wanted, &BTreeSet::new()),
            ..Plan::default()
        };
        assert_eq!(plan.lines(), ["~ scene quiet (paused)"]);
        assert_eq!(
            plan.count(false),
            "0 created, 0 changed, 0 deleted; scenes: 1 paused, 0 resumed"
        );
        for bad in [
            json!({"s": true}),
            json!({"s": {"paused": "yes"}}),
            json!({"a b": {"paused": true}}),
        ] {
            assert!(scene_pauses(Some(bad.clone())).is_err(), "{bad}");
        }
    }

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
            let err = group_entries(Some(bad.clone())).expect_err(&bad.to_string());
            assert!(err.starts_with(key), "{bad}: {err}");
        }
    }

    /// A task as the API would show it: fields drawn at their default or another value, and
    /// upstreams among the tasks before it (so no cycle), in this scene or another.
    fn arbitrary_task() -> impl Strategy<Value = (Value, Vec<prop::sample::Index>)> {
        (
            prop::sample::select(vec!["etl", "default", "ops"]),
            prop::sample::select(vec!["0 0 1 * * *", "*/5 * * * * *"]),
            prop::option::of(0..=10i64),
            prop::option::of(prop::sample::select(vec!["UTC", "Europe/Berlin"])),
            prop::option::of(prop::sample::select(vec!["ALLOW", "SKIP"])),
            prop::option::of(1..=5i64),
            any::<bool>(),
            prop::collection::vec(any::<prop::sample::Index>(), 0..3),
        )
            .prop_map(
                |(scene, cron, retry, zone, overlap, factor, enabled, ups)| {
                    let mut task = json!({"scene": scene, "cron": cron, "handlerUrl": HANDLER,
                        "params": {}, "labels": {}, "enabled": enabled, "retryFactor": factor});
                    for (key, value) in [
                        ("maxRetry", retry.map(Value::from)),
                        ("timeZone", zone.map(Value::from)),
                        ("overlap", overlap.map(Value::from)),
                    ] {
                        if let Some(value) = value {
                            task[key] = value;
                        }
                    }
                    (task, ups)
                },
            )
    }

    proptest! {
        /// What export writes, applied back to the same store, changes nothing.
        #[test]
        fn an_export_applied_back_is_no_change(
            drawn in prop::collection::vec(arbitrary_task(), 1..12)
        ) {
            let mut views = Vec::new();
            for (n, (mut task, ups)) in drawn.into_iter().enumerate() {
                let id = n as i64 * 3 + 10;
                task["id"] = json!(id);
                task["name"] = json!(format!("t{n}"));
                let mut upstreams: Vec<i64> = match n {
                    0 => Vec::new(),
                    _ => ups.iter().map(|up| up.index(n) as i64 * 3 + 10).collect(),
                };
                upstreams.sort();
                upstreams.dedup();
                task["dependsOn"] = json!(upstreams);
                views.push(task);
            }
            let stored: BTreeMap<Key, (i64, TaskInput)> = views
                .iter()
                .map(|view| {
                    let input = task_input(task_body(view.clone()), &Allowlist::default())
                        .expect("a valid view");
                    let id = view["id"].as_i64().unwrap_or_default();
                    ((input.scene.clone(), input.name.clone()), (id, input))
                })
                .collect();
            let keys: Vec<(Key, i64)> = stored.iter().map(|(k, (id, _))| (k.clone(), *id)).collect();
            let directory = Directory::new(keys.iter().map(|(k, id)| (k, *id)), []);
            let entries = views.into_iter().map(|view| file_entry(view, &directory)).collect();
            let text = yaml(&export_file(entries, Vec::new(), &BTreeSet::new()));
            let items: Vec<Value> = yaml::from_str(&text).expect("YAML");
            let tasks = definitions(&items).expect("valid");
            let (plan, _) = task_plan(&tasks, &stored, true).expect("resolved");
            prop_assert!(plan.is_empty(), "{:?}\n{}", plan.lines(), text);
        }
    }

    #[test]
    fn a_task_of_the_file_is_refused_for_each_bad_field() {
        let good = json!({"name": "a", "cron": "* * * * * *", "handlerUrl": "http://x.internal/"});
        let mut bad = good.clone();
        bad["cron"] = json!("nope");
        bad["maxRetry"] = json!(11);
        let message = definitions(&[good, bad]).expect_err("refused");
        assert!(message.contains("(field items[1].cron); "), "{message}");
        assert!(
            message.ends_with(
                "items[1]: maxRetry must be an integer from 0 to 10 (field items[1].maxRetry)"
            ),
            "{message}"
        );
    }
}
