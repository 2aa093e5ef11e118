//! Tasks as code: `ax apply -f FILE [--dry-run] [--prune [--yes]]`, `ax diff -f FILE` and
//! `ax export [--scene S]`.
//!
//! A file is a YAML (or JSON) list of tasks in the API's task shape, or `{calendars, executors,
//! scenes, tasks}`: the list under `tasks`, under `scenes` the pause of the scenes it names
//! (`{reports: {paused: true}}`), under `executors` executor groups (`{name, routing?,
//! maxInFlight?, members?}`) and under `calendars` calendars (`{name, dates?, ranges?,
//! weekdays?}`), both written before the tasks so that tasks can name them, and never deleted
//! (see `named`). A task's `dependsOn` may name its upstreams (`name`, `scene/name`) instead of
//! giving their ids, so that a file applies to another ax (see `upstreams`). `apply` matches
//! the tasks to the stored ones by `(scene, name)`, prints the difference field by field, old
//! → new (see `changes`), and writes it through `POST /api/tasks/bulk`, upstreams first (with
//! `--prune`, deleting the tasks of the file's scenes that the file no longer has, after
//! asking), pausing scenes before and resuming them after. Both sides are read through the
//! API's own validation, so a task reads as unchanged exactly when the server would store it
//! as it is: a second apply prints no change. Export writes each task's fields in their
//! declared order, leaving out those at their default, and its upstreams by name; in sections
//! when its tasks name executor groups or calendars (written with them) or one of its scenes
//! is paused (naming each of them), the plain list otherwise. `ax executors apply -f FILE`
//! writes a file of groups alone.
//!
//! The work, stage by stage: `read` (the file, its tasks checked as the API checks them, its
//! `scenes`, `executors` (see `groups`) and `calendars`), `prepare` (the stored side read
//! through `server`, and the `plan`), `write` (the plan, through the API), `commands`
//! (`apply`, `diff`, `executors apply`), `export`; every failure an [`ApplyError`].

mod calendars;
mod changes;
mod commands;
mod error;
mod export;
#[cfg(test)]
mod field_views;
mod groups;
mod named;
mod plan;
mod prepare;
mod read;
mod section;
mod server;
mod upstreams;
mod write;

pub use calendars::{calendar_changes, calendar_keys_changed, CalendarEntry};
pub use changes::Difference;
pub use commands::{apply, apply_groups, diff, ApplyOptions};
pub use error::ApplyError;
pub use export::{edit_entry, export, Ordered};
pub use groups::{group_changes, group_keys_changed, GroupEntry};
pub use named::{Change, Entry};
pub use plan::{changed_fields, plan, scene_changes, task_plan, Plan};
pub use read::{read_file, read_groups_file, read_yaml, FileTask, TaskFile};
pub use section::Section;
pub use upstreams::{Key, Resolved, Upstream, UpstreamError, Written};
