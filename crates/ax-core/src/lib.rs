//! ax's domain, pure: what a task and a run are, and every decision about them that needs no
//! I/O. No actor, HTTP client, Redis or database connection lives here; the `diesel` dependency
//! only maps ids and stored vocabularies to their SQL types.

pub mod alerting;
pub mod calendar;
pub mod cluster;
pub mod dispatch;
pub mod hash;
pub mod ids;
pub mod metrics;
pub mod plan;
pub mod run;
pub mod security;
pub mod task;
pub mod text;
pub mod time;
pub mod wheel;

/// The exit status of every `ax` command for bad input (an invalid expression, option, config
/// or file), with a message on stderr.
pub const EXIT_USAGE: u8 = 2;
