//! Scenes: their pause and their task counts.

use ax_core::ids::SceneName;
use std::collections::HashMap;

use chrono::{DateTime, Utc};

use super::error::Result;
use super::Service;
use crate::actors::store::boxed;
use ax_core::security::Principal;
use ax_store::queries::tasks;
use ax_store::rows::models::AuditAction;
use ax_store::{from_db, to_db};

/// A scene, its task counts by status, and since when it is paused, if it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SceneCounts {
    pub scene: String,
    pub by_status: HashMap<String, i64>,
    pub paused_at: Option<DateTime<Utc>>,
}

impl Service {
    /// Pauses a scene: none of its tasks fires, on any ax process, until it is resumed; their
    /// own state stays. Returns how many of its tasks stop firing (0 if it was paused already).
    pub async fn pause_scene(&self, scene: SceneName, actor: &Principal) -> Result<usize> {
        let now = to_db(self.clock.now());
        let (name, by) = (scene.clone(), actor.name.clone());
        let count = self
            .store
            .write((name, by), move |conn, (name, by)| {
                boxed(async move { tasks::pause_scene(conn, &name, now, &by).await })
            })
            .await?;
        // Wheel entries of these tasks (here and on other processes) fail their
        // compare-and-set on `next_run_at` and leave the wheel when they come due.
        log::info!("scene `{scene}` paused: {count} tasks stop firing");
        let summary = format!("scene paused: {count} tasks stop firing");
        self.audit(
            actor,
            AuditAction::ScenePause,
            format!("scene {scene}"),
            summary,
        )
        .await;
        Ok(count)
    }

    /// Resumes a paused scene: its enabled tasks fire again, each from now; those paused one by
    /// one stay paused. Returns how many fire again.
    pub async fn resume_scene(&self, scene: SceneName, actor: &Principal) -> Result<usize> {
        let now = self.clock.now();
        let name = scene.clone();
        let resumed = self
            .store
            .write(name, move |conn, name| {
                boxed(async move { tasks::resume_scene(conn, &name, now).await })
            })
            .await?;
        let count = resumed.len();
        self.reschedule(resumed).await?;
        log::info!("scene `{scene}` resumed: {count} tasks fire again");
        let summary = format!("scene resumed: {count} tasks fire again");
        self.audit(
            actor,
            AuditAction::SceneResume,
            format!("scene {scene}"),
            summary,
        )
        .await;
        Ok(count)
    }

    /// Every scene with its task counts by status and its pause, by name: those with tasks,
    /// and paused ones without.
    pub async fn scenes(&self) -> Result<Vec<SceneCounts>> {
        let (rows, mut paused) = self
            .store
            .query(move |conn| {
                boxed(async move {
                    let counts = tasks::scene_counts(conn).await?;
                    Ok((counts, tasks::paused_scenes(conn, None).await?))
                })
            })
            .await?;
        let mut scenes: Vec<SceneCounts> = Vec::new();
        for (scene, status, count) in rows {
            match scenes.last_mut().filter(|last| last.scene == scene) {
                Some(last) => {
                    last.by_status.insert(status.to_string(), count);
                }
                None => scenes.push(SceneCounts {
                    paused_at: paused.remove(&scene).map(from_db),
                    scene,
                    by_status: HashMap::from([(status.to_string(), count)]),
                }),
            }
        }
        scenes.extend(paused.into_iter().map(|(scene, at)| SceneCounts {
            scene,
            by_status: HashMap::new(),
            paused_at: Some(from_db(at)),
        }));
        scenes.sort_by(|a, b| a.scene.cmp(&b.scene));
        Ok(scenes)
    }
}
