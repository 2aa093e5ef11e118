//! What a queued event asks of the folder: about whom, under which rule, which events it makes
//! and whether it resolves. The store reads the queue and the facts of the events' tasks; the
//! asking is decided here, on plain values.

use std::collections::HashMap;

use chrono::{DateTime, Utc};

use super::group::{group_of, Group};
use super::rule::{event_of, most_specific, AlertEvent, AlertRule};
use crate::run::{RunStatus, TaskId};

/// A queued event: a run's end (its task, status and code, recorded by the store's triggers),
/// or an event about no run (`event` and `subject` set, task 0).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueuedEvent {
    pub id: i64,
    pub request_id: String,
    pub task_id: TaskId,
    pub status: String,
    pub code: Option<String>,
    pub message: Option<String>,
    pub at: DateTime<Utc>,
    pub subject: Option<String>,
    pub event: Option<String>,
    /// A run's first dispatch after it was due, in milliseconds.
    pub lag_ms: Option<i64>,
}

/// What the folder knows of an event's task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskFacts {
    /// `scene/name`, as alerts name it.
    pub subject: String,
    pub scene: String,
    /// The task or its scene is paused: its events tell nothing.
    pub muted: bool,
    pub own_rule: Option<AlertRule>,
    pub scene_rule: Option<AlertRule>,
    pub alert_lag_ms: Option<i64>,
}

/// Who an alert is about: its fold key, its name in the alert, and its task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subject {
    pub key: String,
    pub name: String,
    pub task_id: Option<TaskId>,
    pub scene: Option<String>,
}

impl Subject {
    /// A subject that is no task's (a member, a process, a group of them): its name is its key.
    pub fn named(name: String) -> Self {
        Subject {
            key: name.clone(),
            name,
            task_id: None,
            scene: None,
        }
    }
}

/// What one queued event asks of the folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Asked<'e> {
    pub subject: Subject,
    /// The group it folds in, for an event about a member or a process.
    pub group: Option<Group>,
    pub rule: &'e AlertRule,
    /// A success (or a return) that resolves what was alerted of the subject, bar `keep`.
    pub resolves: bool,
    pub keep: Option<AlertEvent>,
    pub events: Vec<AlertEvent>,
}

/// What a queued event asks: about whom, under which rule, which events it makes and
/// whether it resolves; `None` when it asks nothing (a muted or deleted task's).
pub fn asked<'e>(
    event: &QueuedEvent,
    facts: &'e HashMap<TaskId, TaskFacts>,
    default_rule: &'e AlertRule,
) -> Option<Asked<'e>> {
    if let Some(kind) = event.event.as_deref().and_then(AlertEvent::parse) {
        let name = event.subject.clone().unwrap_or_default();
        let resolves = kind == AlertEvent::Resolved;
        return Some(Asked {
            group: Some(group_of(&name)),
            subject: Subject::named(name),
            rule: default_rule,
            resolves,
            keep: None,
            events: if resolves { Vec::new() } else { vec![kind] },
        });
    }
    let task = facts.get(&event.task_id).filter(|task| !task.muted)?;
    let status = RunStatus::parse(&event.status)?;
    let lagging = event
        .lag_ms
        .zip(task.alert_lag_ms)
        .is_some_and(|(lag, most)| lag > most);
    let mut events: Vec<AlertEvent> = event_of(status, event.code.as_deref())
        .filter(|kind| *kind != AlertEvent::Resolved)
        .into_iter()
        .collect();
    if lagging {
        events.push(AlertEvent::Lag);
    }
    Some(Asked {
        group: None,
        subject: Subject {
            key: format!("task:{}", event.task_id),
            name: task.subject.clone(),
            task_id: Some(event.task_id),
            scene: Some(task.scene.clone()),
        },
        rule: most_specific(
            task.own_rule.as_ref(),
            task.scene_rule.as_ref(),
            default_rule,
        ),
        resolves: status == RunStatus::Success,
        // A late success resolves its task's failures, not its lateness.
        keep: lagging.then_some(AlertEvent::Lag),
        events,
    })
}

/// Queued events as tests write them, `secs` after a fixed instant.
#[cfg(test)]
impl QueuedEvent {
    /// The end of a run of task `task`.
    pub(crate) fn run_end(id: i64, task: i64, status: RunStatus, secs: i64) -> Self {
        QueuedEvent {
            id,
            request_id: format!("run-{id}"),
            task_id: TaskId(task),
            status: status.as_str().into(),
            code: None,
            message: None,
            at: test_time(secs),
            subject: None,
            event: None,
            lag_ms: None,
        }
    }

    /// An event about no run.
    pub(crate) fn about(id: i64, subject: &str, event: AlertEvent, secs: i64) -> Self {
        QueuedEvent {
            request_id: String::new(),
            task_id: TaskId(0),
            status: String::new(),
            subject: Some(subject.into()),
            event: Some(event.as_str().into()),
            ..QueuedEvent::run_end(id, 0, RunStatus::Success, secs)
        }
    }
}

/// The instant `secs` after a fixed one, for tests.
#[cfg(test)]
pub(crate) fn test_time(secs: i64) -> DateTime<Utc> {
    DateTime::from_timestamp(1_800_000_000 + secs, 0).unwrap_or_default()
}

#[cfg(test)]
mod tests;
