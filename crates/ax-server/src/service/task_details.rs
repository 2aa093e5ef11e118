//! A stored task with its upstreams and its scene's pause.

use ax_core::run::TaskId;
use ax_store::queries::tasks;
use ax_store::rows::models::Task;
use ax_store::{Conn, StoreError};

/// A task with its upstreams, and whether its scene is paused (a task fires when neither it
/// nor its scene is).
#[derive(Debug, Clone)]
pub struct TaskDetails {
    pub task: Task,
    pub depends_on: Vec<TaskId>,
    pub scene_paused: bool,
}

/// These tasks with their upstreams and whether their scenes are paused.
pub(super) async fn with_details(
    conn: &mut Conn,
    tasks: Vec<Task>,
) -> std::result::Result<Vec<TaskDetails>, StoreError> {
    let ids: Vec<TaskId> = tasks.iter().map(|task| task.id).collect();
    let mut upstreams = tasks::dependencies_of(conn, &ids).await?;
    let scenes: Vec<&str> = tasks.iter().map(|task| task.scene.as_str()).collect();
    let paused = tasks::paused_scenes(conn, Some(&scenes)).await?;
    Ok(tasks
        .into_iter()
        .map(|task| TaskDetails {
            depends_on: upstreams.remove(&task.id).unwrap_or_default(),
            scene_paused: paused.contains_key(task.scene.as_str()),
            task,
        })
        .collect())
}
