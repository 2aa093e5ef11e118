//! Tasks as code: `ax apply -f FILE [--dry-run] [--prune]` and `ax export [--scene S]`.
//!
//! A file is a YAML (or JSON) list of tasks in the API's task shape, or `{executors, scenes,
//! tasks}`: the list under `tasks`, under `scenes` the pause of the scenes it names
//! (`{reports: {paused: true}}`), and under `executors` executor groups (`{name, routing?,
//! maxInFlight?, members?}`), written before the tasks so that tasks can name them. `apply`
//! matches the tasks to the stored ones by
//! `(scene, name)`, prints the difference, and writes it through `POST /api/tasks/bulk` (with
//! `--prune`, deleting the tasks of the file's scenes that the file no longer has), pausing
//! scenes before and resuming them after. Both sides are read through the API's own
//! validation, so a task reads as unchanged exactly when the server would store it as it is: a
//! second apply prints no change. Export writes `{scenes, tasks}` when one of its scenes is
//! paused, naming each of them, and the plain list otherwise. `ax executors apply -f FILE`
//! writes a file of groups alone.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::ExitCode;

use serde_json::{json, Value};

use crate::api::validate::executor::{group_input, group_name};
use crate::api::{task_body, task_input};
use crate::client::{send, Call, Connection};
use crate::routing::Routing;
use crate::security::Allowlist;
use crate::service::executors::{GroupInput, DEFAULT_MAX_IN_FLIGHT};
use crate::service::task_input::TaskInput;
use crate::task_fields;
use crate::EXIT_USAGE;

/// Tasks a bulk call takes.
const BULK_ITEMS: usize = 1000;

/// A task of the file or of the store, keyed by `(scene, name)`.
type Key = (String, String);

/// What `apply` would do.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Plan {
    pub create: Vec<Key>,
    /// With the fields that differ.
    pub change: Vec<(Key, Vec<&'static str>)>,
    /// With the stored task's id (`--prune` only).
    pub delete: Vec<(Key, i64)>,
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

    /// `+ created`, `~ changed (fields)`, `- deleted` lines, one per task, after those of the
    /// executor groups, which are written first.
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
        lines.extend(
            self.change
                .iter()
                .map(|(k, fields)| format!("~ {} ({})", name(k), fields.join(", "))),
        );
        lines.extend(self.delete.iter().map(|(k, _)| format!("- {}", name(k))));
        lines.extend(self.scenes.iter().map(|(scene, paused)| match paused {
            true => format!("~ scene {scene} (paused)"),
            false => format!("~ scene {scene} (resumed)"),
        }));
        lines
    }

    /// The closing count: what was created, changed, deleted (and scenes paused or resumed).
    fn count(&self) -> String {
        let mut count = format!(
            "{} created, {} changed, {} deleted",
            self.create.len(),
            self.change.len(),
            self.delete.len()
        );
        if !self.scenes.is_empty() {
            let paused = self.scene_moves(true).count();
            let resumed = self.scenes.len() - paused;
            count.push_str(&format!("; scenes: {paused} paused, {resumed} resumed"));
        }
        if !self.groups.is_empty() {
            let created = self
                .groups
                .iter()
                .filter(|(_, change)| *change == GroupChange::Create)
                .count();
            let replaced = self.groups.len() - created;
            count.push_str(&format!(
                "; executors: {created} created, {replaced} replaced"
            ));
        }
        count
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
    let definition = |input: &TaskInput| serde_json::to_value(input).unwrap_or(Value::Null);
    let (want, have) = (definition(want), definition(have));
    let key = [task_fields::NAME.name, task_fields::SCENE.name];
    task_fields::ALL
        .iter()
        .map(|field| field.name)
        .filter(|name| !key.contains(name) && want.get(name) != have.get(name))
        .collect()
}

/// The plan from the file's tasks to the stored ones (`stored`: every task of the file's
/// scenes, with its id).
pub fn plan(wanted: &[TaskInput], stored: &BTreeMap<Key, (i64, TaskInput)>, prune: bool) -> Plan {
    let mut plan = Plan::default();
    let mut seen = BTreeSet::new();
    for want in wanted {
        let key = (want.scene.clone(), want.name.clone());
        match stored.get(&key) {
            None => plan.create.push(key.clone()),
            Some((_, have)) => {
                let fields = changed_fields(want, have);
                if !fields.is_empty() {
                    plan.change.push((key.clone(), fields));
                }
            }
        }
        seen.insert(key);
    }
    if prune {
        plan.delete = stored
            .iter()
            .filter(|(key, _)| !seen.contains(*key))
            .map(|(key, (id, _))| (key.clone(), *id))
            .collect();
    }
    plan
}

/// Deepest nesting of a file of tasks: far more than a task with its params needs, and far
/// below the depths whose parsing takes the YAML parser seconds.
pub const MAX_FILE_DEPTH: usize = 64;

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

/// A file's YAML (or JSON), refused past `MAX_FILE_DEPTH` before it is parsed.
pub fn read_yaml(path: &Path) -> Result<Value, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|err| format!("cannot read {}: {err}", path.display()))?;
    if let Some(line) = crate::nesting::too_deep(&text, MAX_FILE_DEPTH) {
        return Err(format!(
            "{}:{line}: nested deeper than {MAX_FILE_DEPTH} levels; a file of tasks is not read \
             that deep",
            path.display()
        ));
    }
    serde_yaml::from_str(&text)
        .map_err(|err| format!("{} is not YAML or JSON: {err}", path.display()))
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
        let name = crate::api::validate::scene(scene.clone())
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

/// The file's tasks, checked as the API checks them; errors name the task and field.
fn definitions(items: &[Value]) -> Result<Vec<TaskInput>, String> {
    let allow_any = Allowlist::default();
    let mut seen = BTreeMap::new();
    let mut inputs = Vec::with_capacity(items.len());
    for (n, item) in items.iter().enumerate() {
        let input = task_input(item.clone(), &allow_any).map_err(|err| {
            let err = err.in_item(n);
            format!("{err} (field {})", field_of(&err).unwrap_or("?"))
        })?;
        let key = (input.scene.clone(), input.name.clone());
        if let Some(first) = seen.insert(key, n) {
            return Err(format!(
                "items[{n}]: the same scene and name as items[{first}]"
            ));
        }
        inputs.push(input);
    }
    Ok(inputs)
}

fn field_of(err: &crate::error::ApiError) -> Option<&str> {
    match err {
        crate::error::ApiError::Invalid { field, .. } => field.as_deref(),
        _ => None,
    }
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

/// Runs `ax apply`.
pub fn apply(conn: Connection, file: &Path, dry_run: bool, prune: bool) -> ExitCode {
    let read = read_file(file).and_then(|file| Ok((definitions(&file.tasks)?, file)));
    let inputs = match read {
        Ok(read) => read,
        Err(message) => {
            eprintln!("ax apply: {message}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let outcome = actix_rt::System::new().block_on(apply_plan(&conn, inputs, dry_run, prune));
    print_outcome("ax apply", outcome)
}

async fn apply_plan(
    conn: &Connection,
    (inputs, file): (Vec<TaskInput>, TaskFile),
    dry_run: bool,
    prune: bool,
) -> Result<Vec<String>, String> {
    let scenes: BTreeSet<String> = inputs.iter().map(|i| i.scene.clone()).collect();
    let mut plan = plan(&inputs, &stored(conn, &scenes).await?, prune);
    if !file.scenes.is_empty() {
        plan.scenes = scene_changes(&file.scenes, &paused_scenes(conn).await?);
    }
    if !file.groups.is_empty() {
        plan.groups = group_changes(&file.groups, &stored_groups(conn).await?);
    }
    let mut lines = plan.lines();
    if plan.is_empty() {
        lines.push("no change".into());
        return Ok(lines);
    }
    if dry_run {
        lines.push("dry run: nothing changed".into());
        return Ok(lines);
    }
    let changing: BTreeSet<&Key> = plan
        .create
        .iter()
        .chain(plan.change.iter().map(|(key, _)| key))
        .collect();
    // Groups first: the tasks may name them.
    for (name, _) in &plan.groups {
        if let Some(group) = file.groups.iter().find(|group| &group.name == name) {
            put_group(conn, group).await?;
        }
    }
    // Paused before the tasks are written, resumed after: no task of a paused scene fires.
    for scene in plan.scene_moves(true) {
        move_scene(conn, scene, true).await?;
    }
    let writes: Vec<Value> = inputs
        .iter()
        .zip(file.tasks)
        .filter(|(input, _)| changing.contains(&(input.scene.clone(), input.name.clone())))
        .map(|(_, item)| item)
        .collect();
    for chunk in writes.chunks(BULK_ITEMS) {
        let call = Call::new("POST", "/api/tasks/bulk".into())
            .body(json!({"items": chunk, "upsert": true}));
        send(conn, &call).await?;
    }
    for (_, id) in &plan.delete {
        send(conn, &Call::new("DELETE", format!("/api/tasks/{id}"))).await?;
    }
    for scene in plan.scene_moves(false) {
        move_scene(conn, scene, false).await?;
    }
    lines.push(plan.count());
    Ok(lines)
}

/// Runs `ax export`: the tasks (of `scene`) as a file `apply` takes, in YAML.
pub fn export(conn: Connection, scene: Option<String>) -> ExitCode {
    let read = actix_rt::System::new().block_on(async {
        let tasks = tasks_of(&conn, scene.as_deref()).await?;
        let groups = groups_of(&conn, &tasks).await?;
        Ok::<_, String>((tasks, groups, paused_scenes(&conn).await?))
    });
    let (tasks, groups, mut paused) = match read {
        Ok(read) => read,
        Err(message) => {
            eprintln!("ax export: {message}");
            return ExitCode::FAILURE;
        }
    };
    if let Some(scene) = &scene {
        paused.retain(|paused| paused == scene);
    }
    let mut bodies: Vec<Value> = tasks.into_iter().map(file_entry).collect();
    bodies.sort_by_key(|b| (b["scene"].to_string(), b["name"].to_string()));
    let file = export_file(bodies, groups, &paused);
    let text = if conn.json {
        serde_json::to_string_pretty(&file).map_err(|e| e.to_string())
    } else {
        serde_yaml::to_string(&file).map_err(|e| e.to_string())
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

/// The exported file: the list of tasks, or, when the tasks use executor groups (`groups`,
/// as file entries) or one of the scenes is paused (`paused`: the store's paused scenes among
/// those exported), `{executors, scenes, tasks}`: the groups, and every scene of the file
/// with its pause, so that `apply` restores each.
fn export_file(tasks: Vec<Value>, groups: Vec<Value>, paused: &BTreeSet<String>) -> Value {
    let mut file = serde_json::Map::new();
    if !groups.is_empty() {
        file.insert("executors".into(), Value::Array(groups));
    }
    if paused.is_empty() {
        if file.is_empty() {
            return Value::Array(tasks);
        }
        file.insert("tasks".into(), Value::Array(tasks));
        return Value::Object(file);
    }
    let mut scenes: BTreeSet<String> = tasks
        .iter()
        .filter_map(|task| task["scene"].as_str().map(str::to_string))
        .collect();
    scenes.extend(paused.iter().cloned());
    let scenes: serde_json::Map<String, Value> = scenes
        .into_iter()
        .map(|scene| {
            let state = json!({"paused": paused.contains(&scene)});
            (scene, state)
        })
        .collect();
    file.insert("scenes".into(), Value::Object(scenes));
    file.insert("tasks".into(), Value::Array(tasks));
    Value::Object(file)
}

/// The executor groups `tasks` use, as file entries: name, routing and `maxInFlight` unless
/// the defaults, and the defined members (registered ones register again themselves).
async fn groups_of(conn: &Connection, tasks: &[Value]) -> Result<Vec<Value>, String> {
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
fn group_entry(name: &str, group: &Value) -> Value {
    let mut entry = serde_json::Map::new();
    entry.insert("name".into(), json!(name));
    if group["routing"] != json!(Routing::DEFAULT.name()) {
        entry.insert("routing".into(), group["routing"].clone());
    }
    if group["maxInFlight"] != json!(DEFAULT_MAX_IN_FLIGHT) {
        entry.insert("maxInFlight".into(), group["maxInFlight"].clone());
    }
    let defined: Vec<Value> = group["members"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|member| member["registered"] != json!(true))
        .map(|member| member["url"].clone())
        .collect();
    if !defined.is_empty() {
        entry.insert("members".into(), Value::Array(defined));
    }
    Value::Object(entry)
}

/// A stored task as a file entry: its definition, without the fields left to their default
/// (see `task_fields::Field::left_out`).
pub fn file_entry(task: Value) -> Value {
    match task_body(task) {
        Value::Object(mut fields) => {
            fields.retain(|name, value| {
                task_fields::named(name).is_some_and(|field| !field.left_out(value))
            });
            Value::Object(fields)
        }
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input(name: &str, cron: &str) -> TaskInput {
        let body = json!({"name": name, "scene": "s", "cron": cron,
            "handlerUrl": "http://executor.internal:80/run"});
        task_input(body, &Allowlist::default()).expect("valid")
    }

    fn stored_as(tasks: &[(i64, TaskInput)]) -> BTreeMap<Key, (i64, TaskInput)> {
        tasks
            .iter()
            .map(|(id, t)| ((t.scene.clone(), t.name.clone()), (*id, t.clone())))
            .collect()
    }

    #[test]
    fn the_plan_creates_changes_and_prunes_by_scene_and_name() {
        let stored = stored_as(&[
            (1, input("same", "0 0 1 * * *")),
            (2, input("moved", "0 0 2 * * *")),
            (3, input("gone", "0 0 3 * * *")),
        ]);
        let wanted = [
            input("same", "0 0 1 * * *"),
            input("moved", "0 30 2 * * *"),
            input("new", "0 0 4 * * *"),
        ];
        let plan = plan(&wanted, &stored, true);
        assert_eq!(
            plan.lines(),
            ["+ s/new", "~ s/moved (cron)", "- s/gone"].map(String::from)
        );
        assert!(super::plan(&wanted, &stored, false).delete.is_empty());
    }

    #[test]
    fn a_definition_the_server_stores_the_same_way_is_unchanged() {
        // The cron is trimmed and the default port dropped, the same way on both sides.
        let stored = stored_as(&[(1, input("a", "0 0 1 * * *"))]);
        assert!(plan(&[input("a", " 0 0 1 * * * ")], &stored, true).is_empty());
    }

    #[test]
    fn groups_export_without_defaults_or_registered_members_and_read_back() {
        let shown = json!({"name": "billing", "routing": "BROADCAST", "maxInFlight": 64,
            "members": [{"url": "http://127.0.0.1:9000/", "registered": false},
                        {"url": "http://127.0.0.1:9001/", "registered": true}]});
        let entry = group_entry("billing", &shown);
        assert_eq!(
            entry,
            json!({"name": "billing", "routing": "BROADCAST",
                "members": ["http://127.0.0.1:9000/"]})
        );
        let plain = json!({"routing": "ROUND_ROBIN", "maxInFlight": 8, "members": []});
        assert_eq!(
            group_entry("g", &plain),
            json!({"name": "g", "maxInFlight": 8})
        );
        let task = json!({"name": "a", "cron": "* * * * * *",
            "executor": {"group": "billing", "path": "/run"}});
        let file = export_file(vec![task.clone()], vec![entry.clone()], &BTreeSet::new());
        assert_eq!(file, json!({"executors": [entry], "tasks": [task]}));
        let groups = group_entries(Some(file["executors"].clone())).expect("read back");
        assert_eq!(groups.len(), 1);
        assert_eq!(groups[0].name, "billing");
    }

    #[test]
    fn scene_pauses_export_and_read_back_as_changes() {
        let task = json!({"name": "a", "scene": "s", "cron": "* * * * * *"});
        assert_eq!(
            export_file(vec![task.clone()], Vec::new(), &BTreeSet::new()),
            json!([task])
        );
        let paused = BTreeSet::from(["quiet".to_string()]);
        let file = export_file(vec![task.clone()], Vec::new(), &paused);
        assert_eq!(
            file["scenes"],
            json!({"quiet": {"paused": true}, "s": {"paused": false}})
        );
        let wanted = scene_pauses(Some(file["scenes"].clone())).expect("valid");
        assert!(scene_changes(&wanted, &paused).is_empty(), "a round trip");
        assert_eq!(
            scene_changes(&wanted, &BTreeSet::from(["s".to_string()])),
            [("quiet".to_string(), true), ("s".to_string(), false)]
        );
        let plan = Plan {
            scenes: scene_changes(&wanted, &BTreeSet::new()),
            ..Plan::default()
        };
        assert_eq!(plan.lines(), ["~ scene quiet (paused)"]);
        assert_eq!(
            plan.count(),
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
        assert!(plan.count().ends_with("; executors: 1 created, 1 replaced"));
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

    #[test]
    fn export_leaves_defaults_out() {
        let task = json!({"id": 3, "name": "a", "scene": "s", "cron": "* * * * * *",
            "handlerUrl": "http://h/", "params": {}, "maxRetry": 3, "retryFactor": null,
            "dependsOn": [], "status": "ENABLED", "nextRunAt": "2027-01-01T00:00:00.000Z"});
        let entry = file_entry(task);
        assert_eq!(entry.get("retryFactor"), None);
        assert_eq!(entry.get("dependsOn"), None);
        assert_eq!(entry.get("id"), None);
        assert_eq!(entry["maxRetry"], 3);
    }
}
