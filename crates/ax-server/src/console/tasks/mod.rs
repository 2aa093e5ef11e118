//! The tasks page (`/console/tasks`, filtered in the URL, with pause, resume and trigger of the
//! selected tasks) and a task's page (`/console/tasks/{id}`): its definition, its next fire
//! times, its latest runs, and its actions (pause, resume, trigger with params, backfill,
//! delete after a confirmation).

mod actions;
mod bulk;
mod links;
mod list;
mod page;

pub use actions::{backfill, confirm_delete, delete, pause, resume, trigger};
pub use bulk::{apply as bulk, confirm as confirm_bulk};
pub use links::parse_task_id;
pub use list::list;
pub use page::detail;
pub(in crate::console) use page::upcoming;
