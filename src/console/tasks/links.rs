//! A task's page in console paths: its link, and its id read back.

use crate::console::ConsoleError;
use crate::run::TaskId;

/// The link to a task's page.
pub fn task_href(id: TaskId) -> String {
    format!("/console/tasks/{id}")
}

/// A task id in a console path; anything else is a page that is not there.
pub fn parse_task_id(raw: &str) -> Result<TaskId, ConsoleError> {
    raw.parse::<i64>()
        .ok()
        .filter(|id| *id > 0)
        .map(TaskId)
        .ok_or_else(|| ConsoleError::NotFound(format!("There is no task {raw}.")))
}
