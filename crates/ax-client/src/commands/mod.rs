//! The commands, a module per resource of the API, and the flags they share.

pub mod alerts;
pub mod audit;
pub mod calendars;
pub mod cluster;
pub mod cron;
pub mod executor_check;
pub mod executors;
pub mod flags;
pub mod logs;
pub mod plan;
pub mod runs;
pub mod scenes;
pub mod task_files;
pub mod task_ref;
pub mod tasks;
pub mod watch;
