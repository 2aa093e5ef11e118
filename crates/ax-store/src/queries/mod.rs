//! Every query ax runs, written once for all backends (see `with_conn!`).

pub mod advisory_locks;
pub mod alerts;
pub mod attempts;
pub mod audit;
pub mod calendars;
pub mod due;
pub mod executors;

pub mod leases;
pub mod meta;
pub mod named_locks;
pub mod overlap;
pub mod overview;
pub mod pending;
pub mod processes;
pub mod recovery;
pub mod run_feed;
pub mod run_history;
pub mod run_log;
pub mod run_writes;
pub mod runs;
pub mod search;
pub mod sessions;
pub mod shares;
pub mod success_watch;
pub mod task_changes;
mod task_locks;
pub mod task_pages;
pub mod tasks;
pub mod transitions;
pub mod wsrep;

/// One page of a listing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Page {
    pub limit: i64,
    pub offset: i64,
}
