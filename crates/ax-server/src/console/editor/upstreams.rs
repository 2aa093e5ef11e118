//! Upstream resolution: the dependency field names upstream tasks, one a line, as a task of
//! its scene sees them; saving reads each name back to its task's id.

use ax_core::ids::SceneName;
use std::collections::HashMap;

use crate::console::ConsoleError;
use crate::error::ApiError;
use crate::service::Service;
use ax_core::run::TaskId;
use ax_store::rows::models::Task;

/// How an upstream is named from a task of `scene`.
pub(super) fn upstream_name(scene: &str, upstream: &Task) -> String {
    if upstream.scene == scene {
        upstream.name.clone()
    } else {
        format!("{}/{}", upstream.scene, upstream.name)
    }
}

/// The (scene, name) pairs a line of the dependency field may mean, in order of preference: a
/// name in the task's own scene, else `scene/name` (scenes hold no `/`).
pub(super) fn candidates(scene: &str, line: &str) -> Vec<(SceneName, String)> {
    let mut pairs = vec![(scene.into(), line.to_string())];
    if let Some((other, name)) = line.split_once('/') {
        pairs.push((other.into(), name.to_string()));
    }
    pairs
}

/// The ids of the upstreams named by `lines` of the dependency field of a task of `scene`; an
/// unknown name is an error of `dependsOn`.
pub(super) async fn resolve_upstreams(
    service: &Service,
    scene: &str,
    lines: Vec<&str>,
) -> Result<Vec<TaskId>, ConsoleError> {
    if lines.is_empty() {
        return Ok(Vec::new());
    }
    let wanted: Vec<(SceneName, String)> = lines
        .iter()
        .flat_map(|line| candidates(scene, line))
        .collect();
    let found = service.tasks_named(wanted).await?;
    let by_name: HashMap<(&str, &str), TaskId> = found
        .iter()
        .map(|task| ((task.scene.as_str(), task.name.as_str()), task.id))
        .collect();
    let mut ids = Vec::with_capacity(lines.len());
    for line in lines {
        let id = candidates(scene, line)
            .iter()
            .find_map(|(s, n)| by_name.get(&(s.as_str(), n.as_str())).copied());
        match id {
            Some(id) => ids.push(id),
            None => {
                let message = format!("no task is named `{line}` in scene `{scene}` (another scene's task: scene/name)");
                return Err(ApiError::invalid("dependsOn", message).into());
            }
        }
    }
    Ok(ids)
}
