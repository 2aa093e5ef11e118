//! The plan of a file: what applying it creates, changes, deletes or leaves, which scenes it
//! pauses or resumes and which executor groups and calendars it writes, with how `apply` and
//! `diff` print it. Pure: the caller reads the store (see `prepare`).

use ax_core::ids::{CalendarName, GroupName};
use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::changes::{self, Difference};
use super::error::ApplyError;
use super::named::{self, Change};
use super::read::FileTask;
use super::section::{CALENDARS, EXECUTORS};
use super::upstreams::{self, Directory, Key, Resolved, Upstream, UpstreamError};
use ax_server::service::task_input::TaskInput;

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
    pub groups: Vec<(GroupName, Change)>,
    /// Calendars to create or replace, by name.
    pub calendars: Vec<(CalendarName, Change)>,
}

impl Plan {
    pub fn is_empty(&self) -> bool {
        self.create.is_empty()
            && self.change.is_empty()
            && self.delete.is_empty()
            && self.scenes.is_empty()
            && self.groups.is_empty()
            && self.calendars.is_empty()
    }

    /// The scenes to pause, and those to resume.
    pub(super) fn scene_moves(&self, pause: bool) -> impl Iterator<Item = &str> {
        self.scenes
            .iter()
            .filter(move |(_, paused)| *paused == pause)
            .map(|(scene, _)| scene.as_str())
    }

    /// `+ created`, `~ changed: field old → new, …`, `- deleted` lines, one per task, after
    /// those of the executor groups and the calendars, which are written first.
    pub fn lines(&self) -> Vec<String> {
        let name = |(scene, name): &Key| format!("{scene}/{name}");
        let mut lines: Vec<String> = named::lines(&EXECUTORS, &self.groups)
            .chain(named::lines(&CALENDARS, &self.calendars))
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
    /// and scenes paused or resumed, groups and calendars created or replaced; then the tasks
    /// kept.
    pub(super) fn count(&self, dry_run: bool) -> String {
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
        count.push_str(&named::count(&EXECUTORS, &self.groups, n));
        count.push_str(&named::count(&CALENDARS, &self.calendars, n));
        count.push_str(&self.kept_note());
        count
    }

    /// What an apply that changes nothing prints.
    pub(super) fn no_change(&self) -> String {
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
) -> Result<(Plan, Resolved), ApplyError> {
    let directory = Directory::new(
        stored.iter().map(|(key, (id, _))| (key, *id)),
        tasks.iter().map(FileTask::key),
    );
    let mut resolved = Vec::with_capacity(tasks.len());
    for (n, task) in tasks.iter().enumerate() {
        let upstreams = directory
            .resolve(&task.input.scene, &task.upstreams)
            .map_err(|problem| ApplyError::Upstreams { index: n, problem })?;
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
) -> Result<(), ApplyError> {
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
    Err(ApplyError::Upstreams {
        index: first.copied().unwrap_or(0),
        problem: UpstreamError::Cycle { path },
    })
}

#[cfg(test)]
mod tests;
