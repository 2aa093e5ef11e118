//! Tasks as code: `ax apply -f FILE [--dry-run] [--prune]` and `ax export [--scene S]`.
//!
//! A file is a YAML (or JSON) list of tasks in the API's task shape, or `{scenes, tasks}`:
//! the list under `tasks`, and under `scenes` the pause of the scenes it names
//! (`{reports: {paused: true}}`). `apply` matches the tasks to the stored ones by
//! `(scene, name)`, prints the difference, and writes it through `POST /api/tasks/bulk` (with
//! `--prune`, deleting the tasks of the file's scenes that the file no longer has), pausing
//! scenes before and resuming them after. Both sides are read through the API's own
//! validation, so a task reads as unchanged exactly when the server would store it as it is: a
//! second apply prints no change. Export writes `{scenes, tasks}` when one of its scenes is
//! paused, naming each of them, and the plain list otherwise.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::ExitCode;

use serde_json::{json, Value};

use crate::api::{task_body, task_input};
use crate::client::{send, Call, Connection};
use crate::security::Allowlist;
use crate::service::TaskInput;
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
}

/// A file's contents: its tasks, and the pause of the scenes it names.
#[derive(Debug, Default, PartialEq)]
pub struct TaskFile {
    pub tasks: Vec<Value>,
    pub scenes: BTreeMap<String, bool>,
}

impl Plan {
    pub fn is_empty(&self) -> bool {
        self.create.is_empty()
            && self.change.is_empty()
            && self.delete.is_empty()
            && self.scenes.is_empty()
    }

    /// The scenes to pause, and those to resume.
    fn scene_moves(&self, pause: bool) -> impl Iterator<Item = &str> {
        self.scenes
            .iter()
            .filter(move |(_, paused)| *paused == pause)
            .map(|(scene, _)| scene.as_str())
    }

    /// `+ created`, `~ changed (fields)`, `- deleted` lines, one per task.
    pub fn lines(&self) -> Vec<String> {
        let name = |(scene, name): &Key| format!("{scene}/{name}");
        let mut lines: Vec<String> = self
            .create
            .iter()
            .map(|k| format!("+ {}", name(k)))
            .collect();
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

/// Reads a file of tasks: a YAML (JSON is YAML) list of task bodies, or `{tasks: [...]}` with
/// optional `scenes: {name: {paused: bool}}`.
pub fn read_file(path: &Path) -> Result<TaskFile, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|err| format!("cannot read {}: {err}", path.display()))?;
    if let Some(line) = crate::nesting::too_deep(&text, MAX_FILE_DEPTH) {
        return Err(format!(
            "{}:{line}: nested deeper than {MAX_FILE_DEPTH} levels; a file of tasks is not read \
             that deep",
            path.display()
        ));
    }
    let value: Value = serde_yaml::from_str(&text)
        .map_err(|err| format!("{} is not YAML or JSON: {err}", path.display()))?;
    let in_file = |message: String| format!("{}: {message}", path.display());
    match value {
        Value::Array(tasks) => Ok(TaskFile {
            tasks,
            scenes: BTreeMap::new(),
        }),
        Value::Object(mut file) if file.contains_key("tasks") => {
            let tasks = match file.remove("tasks") {
                Some(Value::Array(tasks)) => tasks,
                _ => return Err(in_file("`tasks` must be a list".into())),
            };
            let scenes = scene_pauses(file.remove("scenes")).map_err(in_file)?;
            Ok(TaskFile { tasks, scenes })
        }
        _ => Err(in_file("expected a list of tasks".into())),
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
    match outcome {
        Ok(lines) => {
            lines.iter().for_each(|line| println!("{line}"));
            ExitCode::SUCCESS
        }
        Err(message) => {
            eprintln!("ax apply: {message}");
            ExitCode::FAILURE
        }
    }
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
        Ok::<_, String>((tasks, paused_scenes(&conn).await?))
    });
    let (tasks, mut paused) = match read {
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
    let file = export_file(bodies, &paused);
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

/// The exported file: the list of tasks, or, when one of the scenes is paused (`paused`: the
/// store's paused scenes among those exported), `{scenes, tasks}` naming every scene of the
/// file with its pause, so that `apply` restores each.
fn export_file(tasks: Vec<Value>, paused: &BTreeSet<String>) -> Value {
    if paused.is_empty() {
        return Value::Array(tasks);
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
    json!({"scenes": scenes, "tasks": tasks})
}

/// A stored task as a file entry: its definition, without the fields left to their default
/// (see `task_fields::Field::left_out`).
fn file_entry(task: Value) -> Value {
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
    fn scene_pauses_export_and_read_back_as_changes() {
        let task = json!({"name": "a", "scene": "s", "cron": "* * * * * *"});
        assert_eq!(
            export_file(vec![task.clone()], &BTreeSet::new()),
            json!([task])
        );
        let paused = BTreeSet::from(["quiet".to_string()]);
        let file = export_file(vec![task.clone()], &paused);
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
