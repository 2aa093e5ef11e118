//! Tasks as code: `ax apply -f FILE [--dry-run] [--prune]` and `ax export [--scene S]`.
//!
//! A file is a YAML (or JSON) list of tasks in the API's task shape. `apply` matches them to
//! the stored tasks by `(scene, name)`, prints the difference, and writes it through
//! `POST /api/tasks/bulk` (with `--prune`, deleting the tasks of the file's scenes that the
//! file no longer has). Both sides are read through the API's own validation, so a task reads
//! as unchanged exactly when the server would store it as it is: a second apply prints no
//! change.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::ExitCode;

use serde_json::{json, Value};

use crate::api::{task_body, task_input};
use crate::client::{send, Call, Connection};
use crate::security::Allowlist;
use crate::service::TaskInput;
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
}

impl Plan {
    pub fn is_empty(&self) -> bool {
        self.create.is_empty() && self.change.is_empty() && self.delete.is_empty()
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
        lines
    }
}

/// The fields in which two definitions differ, named as in the API.
pub fn changed_fields(want: &TaskInput, have: &TaskInput) -> Vec<&'static str> {
    let mut fields = Vec::new();
    let mut differ = |name, same: bool| {
        if !same {
            fields.push(name);
        }
    };
    differ("cron", want.cron.expression() == have.cron.expression());
    differ("timeZone", want.cron.zone() == have.cron.zone());
    differ("handlerUrl", want.handler_url == have.handler_url);
    differ("params", want.params == have.params);
    differ("maxRetry", want.max_retry == have.max_retry);
    differ("timeoutMs", want.timeout_ms == have.timeout_ms);
    differ("enabled", want.enabled == have.enabled);
    differ(
        "retryBackoffSecs",
        want.retry_backoff_secs == have.retry_backoff_secs,
    );
    differ("retryFactor", want.retry_factor == have.retry_factor);
    differ(
        "misfireThresholdSecs",
        want.misfire_threshold_secs == have.misfire_threshold_secs,
    );
    differ(
        "dependencyTimeoutSecs",
        want.dependency_timeout_secs == have.dependency_timeout_secs,
    );
    differ("dependsOn", want.depends_on == have.depends_on);
    differ("overlap", want.overlap == have.overlap);
    differ("jitterSecs", want.jitter_secs == have.jitter_secs);
    fields
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

/// Reads a file of tasks: a YAML (JSON is YAML) list of task bodies, or `{tasks: [...]}`.
pub fn read_file(path: &Path) -> Result<Vec<Value>, String> {
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
    match value {
        Value::Array(items) => Ok(items),
        Value::Object(mut file) if file.contains_key("tasks") => match file.remove("tasks") {
            Some(Value::Array(items)) => Ok(items),
            _ => Err(format!("{}: `tasks` must be a list", path.display())),
        },
        _ => Err(format!("{}: expected a list of tasks", path.display())),
    }
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

/// Runs `ax apply`.
pub fn apply(conn: Connection, file: &Path, dry_run: bool, prune: bool) -> ExitCode {
    let inputs = match read_file(file).and_then(|items| Ok((definitions(&items)?, items))) {
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
    (inputs, items): (Vec<TaskInput>, Vec<Value>),
    dry_run: bool,
    prune: bool,
) -> Result<Vec<String>, String> {
    let scenes: BTreeSet<String> = inputs.iter().map(|i| i.scene.clone()).collect();
    let plan = plan(&inputs, &stored(conn, &scenes).await?, prune);
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
    let writes: Vec<Value> = inputs
        .iter()
        .zip(items)
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
    lines.push(format!(
        "{} created, {} changed, {} deleted",
        plan.create.len(),
        plan.change.len(),
        plan.delete.len()
    ));
    Ok(lines)
}

/// Runs `ax export`: the tasks (of `scene`) as a file `apply` takes, in YAML.
pub fn export(conn: Connection, scene: Option<String>) -> ExitCode {
    let tasks = actix_rt::System::new().block_on(tasks_of(&conn, scene.as_deref()));
    let tasks = match tasks {
        Ok(tasks) => tasks,
        Err(message) => {
            eprintln!("ax export: {message}");
            return ExitCode::FAILURE;
        }
    };
    let mut bodies: Vec<Value> = tasks.into_iter().map(file_entry).collect();
    bodies.sort_by_key(|b| (b["scene"].to_string(), b["name"].to_string()));
    let text = if conn.json {
        serde_json::to_string_pretty(&bodies).map_err(|e| e.to_string())
    } else {
        serde_yaml::to_string(&bodies).map_err(|e| e.to_string())
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

/// A stored task as a file entry: its definition, without the fields left to their default.
fn file_entry(task: Value) -> Value {
    match task_body(task) {
        Value::Object(mut fields) => {
            fields.retain(|_, value| !value.is_null() && *value != json!([]));
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
