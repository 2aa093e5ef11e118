//! What a handler is given: the run, its typed params, and its log, progress and shutdown.

use std::fmt;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use tokio::sync::watch;

use crate::logs::RunLog;

/// One run of a handler: a dispatch's fields, its `params` as `P`, and the run's log.
pub struct Run<P> {
    /// The run's id, the same on every delivery: key side effects on it.
    pub request_id: String,
    pub task_id: i64,
    /// The delivery that started this run (1, 2, …).
    pub attempt: u32,
    /// The fire time the run is for (a manual run: when it was asked for).
    pub scheduled_at: DateTime<Utc>,
    pub params: P,
    /// For a `BROADCAST` task, this run's part of the work: the rows with
    /// `id % shard_total == shard_index`. `0` without shards.
    pub shard_index: u32,
    /// How many parts the fire has; `1` without shards.
    pub shard_total: u32,
    pub(crate) log: Arc<RunLog>,
    pub(crate) stopping: watch::Receiver<bool>,
}

impl<P> Run<P> {
    /// Adds a line to the run's log in ax (sent in batches; `ax runs logs REQUEST_ID`).
    pub fn log(&self, line: impl Into<String>) {
        self.log.push([line.into()]);
    }

    /// Adds several lines at once.
    pub fn log_lines<S: Into<String>>(&self, lines: impl IntoIterator<Item = S>) {
        self.log.push(lines.into_iter().map(Into::into));
    }

    /// Sets the run's progress, 0 to 100 (more is 100).
    pub fn progress(&self, percent: u8) {
        self.log.progress(percent);
    }

    /// Whether the executor is shutting down: a long job may stop at its next checkpoint
    /// (it still has `shutdown_grace` to end; past it, the run is reported
    /// `EXECUTOR_SHUTDOWN` and retried).
    pub fn stopping(&self) -> bool {
        *self.stopping.borrow()
    }

    /// Resolves once the executor starts shutting down (never, if it does not), for
    /// `tokio::select!` against the work.
    pub async fn stopped(&self) {
        let mut stopping = self.stopping.clone();
        if stopping.wait_for(|stopping| *stopping).await.is_err() {
            // The executor is gone without saying it stops: nothing will ever say it.
            std::future::pending::<()>().await;
        }
    }
}

impl<P: fmt::Debug> fmt::Debug for Run<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Run")
            .field("request_id", &self.request_id)
            .field("task_id", &self.task_id)
            .field("attempt", &self.attempt)
            .field("scheduled_at", &self.scheduled_at)
            .field("params", &self.params)
            .field("shard_index", &self.shard_index)
            .field("shard_total", &self.shard_total)
            .finish_non_exhaustive()
    }
}
