//! Writing a plan: groups and calendars first (the tasks may name them), scenes paused, tasks
//! upstreams first through `POST /api/tasks/bulk`, deletes, scenes resumed.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Display;

use serde_json::{json, Value};

use super::error::ApplyError;
use super::named::{Change, Entry};
use super::prepare::Prepared;
use super::section::{Section, CALENDARS, EXECUTORS};
use super::server::{move_scene, put_entry, stored};
use super::upstreams::{self, Key, Upstream};
use crate::api::http::{send, Call};
use crate::Connection;
use ax_core::task::fields;

/// Tasks a bulk call takes.
const BULK_ITEMS: usize = 1000;

/// Writes a plan: groups and calendars first (the tasks may name them), scenes paused, tasks
/// upstreams first, deletes, scenes resumed.
pub(super) async fn write(conn: &Connection, prepared: &Prepared) -> Result<(), ApplyError> {
    let (plan, file) = (&prepared.plan, &prepared.file);
    put_changed(conn, &EXECUTORS, &plan.groups, &file.groups).await?;
    put_changed(conn, &CALENDARS, &plan.calendars, &file.calendars).await?;
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

/// Puts the file's groups or calendars (`entries`) that the plan creates or replaces
/// (`changes`).
async fn put_changed<N: PartialEq + Display, T>(
    conn: &Connection,
    section: &Section,
    changes: &[(N, Change)],
    entries: &[Entry<N, T>],
) -> Result<(), ApplyError> {
    for (name, _) in changes {
        if let Some(entry) = entries.iter().find(|entry| entry.name == *name) {
            put_entry(conn, section, entry).await?;
        }
    }
    Ok(())
}

/// Creates and changes the plan's tasks, in layers: a task after the upstreams this apply
/// creates, whose ids are read once they exist.
async fn write_tasks(conn: &Connection, prepared: &Prepared) -> Result<(), ApplyError> {
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
fn upstream_ids(upstreams: &[Upstream], ids: &BTreeMap<Key, i64>) -> Result<Value, ApplyError> {
    upstreams
        .iter()
        .map(|upstream| match upstream {
            Upstream::Id(id) => Ok(json!(id)),
            Upstream::Task(key) => {
                ids.get(key)
                    .map(|id| json!(id))
                    .ok_or_else(|| ApplyError::NotCreated {
                        upstream: upstream.label(),
                    })
            }
        })
        .collect::<Result<Vec<Value>, ApplyError>>()
        .map(Value::Array)
}
