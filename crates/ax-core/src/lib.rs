//! ax's domain, pure: what a task and a run are, and every decision about them that needs no
//! I/O. No actor, HTTP client, Redis or database connection lives here; the `diesel` dependency
//! only maps ids and stored vocabularies to their SQL types.

#[macro_use]
mod text_enum;

pub mod alerting;
pub mod clock;
pub mod dependencies;
pub mod dispatch;
pub mod fencing;
pub mod group_commit;
pub mod labels;
pub mod metrics;
pub mod nesting;
pub mod percentile;
pub mod plan;
pub mod run;
pub mod run_feed;
pub mod run_history;
pub mod run_log;
pub mod schedule_load;
pub mod search;
pub mod security;
pub mod task_executor;
pub mod task_fields;
pub mod text;
pub mod wheel;

/// The exit status of every `ax` command for bad input (an invalid expression, option, config
/// or file), with a message on stderr.
pub const EXIT_USAGE: u8 = 2;
