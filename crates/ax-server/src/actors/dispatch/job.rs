//! What the dispatchers are handed: one attempt of a run, with where it goes and the claim it
//! is sent under.

use std::sync::Arc;

use chrono::{DateTime, Utc};

use ax_core::run::{RequestId, Shard, TaskId};
use ax_core::task::executor::TaskExecutor;

/// One delivery of a run's attempt to its handler.
#[derive(Debug, Clone)]
pub struct DispatchJob {
    pub task_id: TaskId,
    pub request_id: RequestId,
    /// Where the attempt is sent: the task's handler URL, or its group member's URL + path.
    pub handler_url: String,
    /// The executor group the task's runs go to, instead of one handler URL.
    pub executor: Option<Arc<TaskExecutor>>,
    /// The group member the attempt goes to: a broadcast shard's own (given at fire time, or
    /// the one that served its last attempt) until routed, then the one routed to.
    pub member: Option<Arc<str>>,
    /// A broadcast run's shard, sent with the attempt.
    pub shard: Option<Shard>,
    /// The members this attempt could not connect to (it goes to another at once).
    pub tried: Vec<Arc<str>>,
    /// When it was offered a slot: its wait for one is measured from here.
    pub queued_at: Option<std::time::Instant>,
    /// The params as JSON text, sent as they are.
    pub params: Arc<str>,
    pub scheduled_at: DateTime<Utc>,
    /// When the first attempt was due: the scheduled time, plus the task's jitter offset for
    /// a scheduled run. Trigger lag counts from here.
    pub due_at: DateTime<Utc>,
    pub attempt: i32,
    pub timeout_ms: i64,
    /// When this process's claim on the attempt lapses, as handed over (the dispatchers renew
    /// it while they hold the attempt).
    pub claimed_until: DateTime<Utc>,
    /// The fencing generation its claim was taken in: a claim from before this process was
    /// fenced or paused is checked again before it is sent (see `ax_core::cluster::fencing`).
    pub generation: u64,
}
