//! Reading files: a file of tasks (the list, or `{calendars, executors, scenes, tasks}`), a
//! file of executor groups, and the tasks of a file checked as the API checks them. Errors
//! name the file, or the item and field (`items[1].cron`), as the API would.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;

use super::calendars::{calendar_entries, CalendarEntry};
use super::error::ApplyError;
use super::groups::{group_entries, GroupEntry};
use super::upstreams::{self, Key, Written};
use ax_core::security::Allowlist;
use ax_core::task::fields;
use ax_core::text::yaml;
use ax_server::api::task_input;
use ax_server::service::task_input::TaskInput;

/// The top-level keys of a file that is not a bare list.
const FILE_KEYS: [&str; 4] = ["calendars", "executors", "scenes", "tasks"];

/// The keys that make a mapping a file of tasks (`scenes` alone does not).
const SECTIONS: [&str; 3] = ["calendars", "executors", "tasks"];

/// A file's contents: its tasks, the pause of the scenes it names, its executor groups and its
/// calendars.
#[derive(Debug, Default, PartialEq)]
pub struct TaskFile {
    pub tasks: Vec<Value>,
    pub scenes: BTreeMap<String, bool>,
    pub groups: Vec<GroupEntry>,
    pub calendars: Vec<CalendarEntry>,
}

/// A task of a file: its definition as the API reads it (upstreams aside), its upstreams as
/// the file writes them, and the body to send, whose `dependsOn` is set once they are
/// resolved to ids.
#[derive(Debug, Clone)]
pub struct FileTask {
    pub input: TaskInput,
    pub upstreams: Vec<Written>,
    pub(super) body: Value,
}

impl FileTask {
    pub(super) fn key(&self) -> Key {
        (self.input.scene.to_string(), self.input.name.clone())
    }
}

/// Reads a file of tasks: a YAML (JSON is YAML) list of task bodies, or `{tasks: [...]}` with
/// optional `scenes: {name: {paused: bool}}`, `executors: [{name, …}]` and `calendars:
/// [{name, …}]` (any two of `tasks`, `executors` and `calendars` may be left out).
pub fn read_file(path: &Path) -> Result<TaskFile, ApplyError> {
    let in_file = |problem: ApplyError| problem.in_file(path);
    match read_yaml(path)? {
        Value::Array(tasks) => Ok(TaskFile {
            tasks,
            ..TaskFile::default()
        }),
        Value::Object(mut file) if SECTIONS.iter().any(|key| file.contains_key(*key)) => {
            if let Some(key) = file.keys().find(|key| !FILE_KEYS.contains(&key.as_str())) {
                return Err(in_file(ApplyError::UnknownKey {
                    key: key.clone(),
                    known: &FILE_KEYS,
                }));
            }
            let tasks = match file.remove("tasks") {
                None | Some(Value::Null) => Vec::new(),
                Some(Value::Array(tasks)) => tasks,
                Some(_) => return Err(in_file(ApplyError::TasksNotAList)),
            };
            let scenes = scene_pauses(file.remove("scenes")).map_err(in_file)?;
            let groups = group_entries(file.remove("executors")).map_err(in_file)?;
            let calendars = calendar_entries(file.remove("calendars")).map_err(in_file)?;
            Ok(TaskFile {
                tasks,
                scenes,
                groups,
                calendars,
            })
        }
        _ => Err(in_file(ApplyError::NotTasks)),
    }
}

/// Reads a file of executor groups: a YAML (or JSON) list of `{name, routing?, maxInFlight?,
/// members?}`, or `{executors: [...]}`.
pub fn read_groups_file(path: &Path) -> Result<Vec<GroupEntry>, ApplyError> {
    let in_file = |problem: ApplyError| problem.in_file(path);
    match read_yaml(path)? {
        list @ Value::Array(_) => group_entries(Some(list)).map_err(in_file),
        Value::Object(mut file) if file.len() == 1 && file.contains_key("executors") => {
            group_entries(file.remove("executors")).map_err(in_file)
        }
        _ => Err(in_file(ApplyError::NotGroups)),
    }
}

/// A file's YAML (or JSON), refused as soon as it nests deeper than [`yaml::MAX_DEPTH`].
pub fn read_yaml(path: &Path) -> Result<Value, ApplyError> {
    let text = std::fs::read_to_string(path).map_err(|source| ApplyError::Unreadable {
        path: path.to_path_buf(),
        source,
    })?;
    yaml::from_str(&text).map_err(|err| match err {
        yaml::Error::TooDeep { line } => ApplyError::TooDeep {
            path: path.to_path_buf(),
            line,
        },
        source => ApplyError::NotYaml {
            path: path.to_path_buf(),
            source,
        },
    })
}

/// Reads the file and its tasks.
pub(super) fn read_tasks(path: &Path) -> Result<(TaskFile, Vec<FileTask>), ApplyError> {
    let file = read_file(path)?;
    let tasks = definitions(&file.tasks)?;
    Ok((file, tasks))
}

/// The `scenes` of a file: each scene's name, checked as the API checks it, and its pause.
pub(super) fn scene_pauses(value: Option<Value>) -> Result<BTreeMap<String, bool>, ApplyError> {
    let scenes = match value {
        None | Some(Value::Null) => return Ok(BTreeMap::new()),
        Some(Value::Object(scenes)) => scenes,
        Some(_) => return Err(ApplyError::ScenesNotAMap),
    };
    let mut pauses = BTreeMap::new();
    for (scene, state) in scenes {
        let name = ax_server::api::validate::scene(scene.clone()).map_err(|source| {
            ApplyError::SceneRefused {
                scene: scene.clone(),
                source,
            }
        })?;
        match state.get("paused") {
            Some(Value::Bool(paused)) if state.as_object().is_some_and(|s| s.len() == 1) => {
                pauses.insert(name.into(), *paused);
            }
            _ => return Err(ApplyError::PauseNotABool { scene }),
        }
    }
    Ok(pauses)
}

/// The file's tasks, checked as the API checks them (their upstreams apart: names are
/// resolved against the store); errors name the task and field.
pub(super) fn definitions(items: &[Value]) -> Result<Vec<FileTask>, ApplyError> {
    let allow_any = Allowlist::default();
    let mut seen = BTreeMap::new();
    let mut tasks = Vec::with_capacity(items.len());
    for (index, item) in items.iter().enumerate() {
        let mut body = item.clone();
        let written = match body.as_object_mut() {
            Some(fields) => upstreams::written(fields.remove(fields::DEPENDS_ON.name))
                .map_err(|problem| ApplyError::Upstreams { index, problem })?,
            None => Vec::new(),
        };
        let input = task_input(body.clone(), &allow_any)
            .map_err(|err| ApplyError::TaskRefused(err.in_item(index)))?;
        let key = (input.scene.clone(), input.name.clone());
        if let Some(first) = seen.insert(key, index) {
            return Err(ApplyError::TaskTwice { index, first });
        }
        tasks.push(FileTask {
            input,
            upstreams: written,
            body,
        });
    }
    Ok(tasks)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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
            let err = read_yaml(&path).expect_err(text).to_string();
            let file = path.display().to_string();
            assert!(
                err.starts_with(&format!("{file} is not YAML or JSON: ")),
                "{err}"
            );
            assert!(err.contains(said), "{err}");
        }
    }

    #[test]
    fn a_task_of_the_file_is_refused_for_each_bad_field() {
        let good = json!({"name": "a", "cron": "* * * * * *", "handlerUrl": "http://x.internal/"});
        let mut bad = good.clone();
        bad["cron"] = json!("nope");
        bad["maxRetry"] = json!(11);
        let message = definitions(&[good, bad]).expect_err("refused").to_string();
        assert!(message.contains("(field items[1].cron); "), "{message}");
        assert!(
            message.ends_with(
                "items[1]: maxRetry must be an integer from 0 to 10 (field items[1].maxRetry)"
            ),
            "{message}"
        );
    }
}
