//! The run's lifecycle, in one home: its stored states, and every transition of its
//! row (`on_event`). Pure logic, no I/O: the fire pipeline, the dispatchers, the callback, the
//! supervisor and the API all ask this module what a run becomes, and the store applies the
//! write it returns.

mod codes;
mod decided;
pub mod feed;
pub mod group_commit;
pub mod history;
mod jitter;
mod lifecycle;
pub mod logs;
mod notes;
mod overlap;
pub mod percentile;
mod retry;
mod shard;
mod status;
#[cfg(test)]
mod tests;

pub use crate::ids::{RequestId, RequestIdPrefix, TaskId};
pub use codes::*;
pub use decided::Decided;
pub use jitter::{jitter_offset, jittered};
pub use lifecycle::{
    blind, dependency_deadline, ended_attempt, on_event, rejected_result, supersede,
    upstream_event, Change, EndedAttempt, Event, Expect, NewRun, Outcome, Refusal, Report,
    RunState, Write,
};
pub use notes::failed_attempt;
pub use overlap::{
    buffer_released, claim_asks_overlap, held_by_overlap, left_by_overlap, on_due, on_due_runs,
    tasks_to_settle, DueRun, OpenRun, Overlap, OverlapPolicy, Settled,
};
pub use retry::{
    claim_covers, claim_until, renewed_claim, RetryLimits, RetryPolicy, CLAIM_MARGIN_SECS,
    MAX_RETRY_DELAY_SECS,
};
pub use shard::{fire_status, sharded, shards, Shard};
pub use status::{ReportedStatus, RunStatus, TriggerType, DISPATCHABLE, OPEN};
