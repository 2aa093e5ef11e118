//! The outbox's lanes: alerts about runs are claimed and sent on a lane of their own, so a
//! backlog of alerts about members and processes (or a channel slow to take them) never
//! delays a task's `FAILED`.

/// Which sender an outbox row goes out on. Not stored: a row's lane is whether it is about a
/// task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AlertLane {
    /// Alerts about a task's runs.
    Runs,
    /// The rest: members, processes, Redis.
    Others,
}
