//! The task editor (`/console/tasks/new`, `/console/tasks/{id}/edit`): every field of a task,
//! sent through the API's own validation and the same service calls, with each error beside
//! the field it names. A preview lists the next fire times; the script keeps it up to date from
//! `GET /api/cron/next` as the expression or the zone is typed.

mod draft;
mod handlers;
mod page;
mod refusals;
mod upstreams;

pub use handlers::{create, edit_form, new_form, update};
pub(super) use refusals::Refusal;

#[cfg(test)]
mod tests;
