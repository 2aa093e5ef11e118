//! ax (Action eXecutor): a distributed cron scheduler that calls HTTP handlers.
//!
//! The `ax` binary's crate; the code lives in the workspace's crates (see docs/architecture.md),
//! re-exported here under the paths the integration tests name.

pub use ax_bench as bench;
pub use ax_client as client;
pub use ax_core::{
    alerting, clock, dependencies, dispatch, fencing, group_commit, labels, metrics, nesting,
    percentile, plan, run, run_feed, run_history, run_log, schedule_load, search, security,
    task_executor, task_fields, text, wheel, EXIT_USAGE,
};
pub use ax_server::{
    actors, api, app, attention, audit, auth_throttle, cluster, config, console, error, etag,
    health, http_errors, notify, service, web,
};
pub use ax_store as store;
pub use ax_store::with_conn;
