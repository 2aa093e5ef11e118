//! A task's id read back from a console path (its link is `console::paths::task_href`).

use crate::console::ConsoleError;
use ax_core::run::TaskId;

/// A task id in a console path; anything else is a page that is not there.
pub fn parse_task_id(raw: &str) -> Result<TaskId, ConsoleError> {
    raw.parse::<i64>()
        .ok()
        .filter(|id| *id > 0)
        .map(TaskId)
        .ok_or_else(|| ConsoleError::NotFound(format!("There is no task {raw}.")))
}
