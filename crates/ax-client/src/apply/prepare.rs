//! A file against the server: the stored tasks, scenes, groups and calendars it touches, read,
//! and its plan, which `apply` writes and `diff` shows.

use std::collections::{BTreeMap, BTreeSet};

use super::calendars::calendar_changes;
use super::error::ApplyError;
use super::groups::group_changes;
use super::plan::{scene_changes, task_plan, Plan};
use super::read::{FileTask, TaskFile};
use super::server::{paused_scenes, stored, stored_calendars, stored_groups};
use super::upstreams::{self, Key, Resolved};
use crate::Connection;

/// A file's tasks with their plan: what `apply` writes and `diff` shows.
pub(super) struct Prepared {
    pub file: TaskFile,
    pub tasks: Vec<FileTask>,
    pub plan: Plan,
    /// Each file task's key and upstreams.
    pub upstreams: Resolved,
    /// The ids of the stored tasks read.
    pub ids: BTreeMap<Key, i64>,
}

/// The plan of a file: the stored tasks of its scenes (and of the scenes its upstream names
/// point into), scenes, groups and calendars read and compared with it.
pub(super) async fn prepare(
    conn: &Connection,
    (file, tasks): (TaskFile, Vec<FileTask>),
    prune: bool,
) -> Result<Prepared, ApplyError> {
    let mut scenes: BTreeSet<String> = tasks.iter().map(|t| t.input.scene.to_string()).collect();
    let named = upstreams::named_scenes(tasks.iter().flat_map(|t| &t.upstreams));
    // A name's prefix that is no scene name is a task's name with a `/`.
    scenes.extend(
        named
            .into_iter()
            .filter(|scene| ax_server::api::validate::scene(scene.clone()).is_ok()),
    );
    let stored = stored(conn, &scenes).await?;
    let (mut plan, upstreams) = task_plan(&tasks, &stored, prune)?;
    if !file.scenes.is_empty() {
        plan.scenes = scene_changes(&file.scenes, &paused_scenes(conn).await?);
    }
    if !file.groups.is_empty() {
        plan.groups = group_changes(&file.groups, &stored_groups(conn).await?);
    }
    if !file.calendars.is_empty() {
        plan.calendars = calendar_changes(&file.calendars, &stored_calendars(conn).await?);
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
