//! One fold of the queue, decided: the asks of a batch of queued events (see
//! [`super::queued`]) against the stored fold states give the states after, the outbox rows,
//! and how the set of tasks whose successes are watched changes. The store reads the batch and
//! the states, and writes what this returns.

use std::collections::HashMap;

use chrono::{DateTime, Utc};

use super::fold::{FoldState, Verdict};
use super::outbox::{outbox_rows, NewAlert};
use super::queued::{Asked, QueuedEvent};
use super::rule::{AlertEvent, AlertRule};
use super::window::window_rows;
use crate::run::TaskId;

/// Fold states by (subject, event).
pub type FoldStates = HashMap<(String, AlertEvent), FoldState>;

/// What one fold decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Folded {
    /// Every state the fold read or made, as it leaves them.
    pub states: FoldStates,
    /// The outbox rows to write.
    pub alerts: Vec<NewAlert>,
    pub watch: WatchChanges,
}

/// How a fold changed which tasks' successes are watched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WatchChanges {
    /// A task was alerted or resolved.
    pub changed: bool,
    /// The tasks newly alerted, each since when.
    pub alerted: Vec<(TaskId, DateTime<Utc>)>,
}

/// A group's window for one kind of event: the group's name and the kind.
type WindowKey = (String, AlertEvent);

/// Folds `asks` (in queue order) into the `stored` states: each event under its rule alerts,
/// folds or waits for its threshold; a success after an alert resolves it. The events about
/// members and processes (whose windows closed) are told per group and kind, as one alert of
/// the window under `default_rule`.
pub fn fold_asks(
    asks: &[(&QueuedEvent, Asked)],
    stored: &FoldStates,
    default_rule: &AlertRule,
) -> Folded {
    let mut states = stored.clone();
    let mut alerts = Vec::new();
    // When each task subject last alerted, in this fold.
    let mut alerted_at: HashMap<&str, DateTime<Utc>> = HashMap::new();
    // What each group's window tells, by (group, event): its events and verdicts.
    let mut windows: Vec<(WindowKey, Vec<(&QueuedEvent, Verdict)>)> = Vec::new();
    for (event, asked) in asks {
        let key = asked.subject.key.clone();
        let group = asked.group.as_ref();
        let mut tell = |kind: AlertEvent, verdict: Verdict| match group {
            Some(group) => {
                let at = (group.name.clone(), kind);
                match windows.iter_mut().find(|(of, _)| *of == at) {
                    Some((_, told)) => told.push((*event, verdict)),
                    None => windows.push((at, vec![(*event, verdict)])),
                }
            }
            None => alerts.extend(outbox_rows(
                event,
                &asked.subject,
                (kind, &verdict),
                asked.rule,
            )),
        };
        if asked.resolves {
            let resolved = resolve(&key, asked.keep, &mut states);
            if resolved && asked.rule.wants(AlertEvent::Resolved) {
                let verdict = Verdict::Alert {
                    count: 1,
                    folded: 0,
                    folded_since: None,
                };
                tell(AlertEvent::Resolved, verdict);
            }
        }
        for kind in asked.events.iter().copied() {
            if !asked.rule.wants(kind) {
                continue;
            }
            let state = states.entry((key.clone(), kind)).or_default();
            let verdict = state.on_event(asked.rule, event.at);
            if matches!(verdict, Verdict::Alert { .. }) && group.is_none() {
                alerted_at.insert(&asked.subject.key, event.at);
            }
            tell(kind, verdict);
        }
    }
    for ((group, kind), told) in &windows {
        alerts.extend(window_rows(group, *kind, told, default_rule));
    }
    let watch = watch_changes(stored, &states, &alerted_at);
    Folded {
        states,
        alerts,
        watch,
    }
}

/// A success of `subject`: every alerted event of it but `keep` resolves (and starts
/// over). Whether any was alerted.
fn resolve(subject: &str, keep: Option<AlertEvent>, states: &mut FoldStates) -> bool {
    let mut resolved = false;
    for ((of, event), state) in states.iter_mut() {
        if of == subject && Some(*event) != keep && state.on_success() {
            resolved = true;
        }
    }
    resolved
}

/// Which tasks were alerted or resolved from `stored` to `states`, and which were newly
/// alerted (at their time in `alerted_at`): their first success since then resolves them.
fn watch_changes(
    stored: &FoldStates,
    states: &FoldStates,
    alerted_at: &HashMap<&str, DateTime<Utc>>,
) -> WatchChanges {
    let task_of = |subject: &str| subject.strip_prefix("task:")?.parse().ok().map(TaskId);
    let was_alerted = |subject: &str| {
        stored
            .iter()
            .any(|((of, _), state)| of == subject && state.alerted)
    };
    let mut changes = WatchChanges {
        changed: false,
        alerted: Vec::new(),
    };
    for ((subject, event), state) in states {
        let Some(task) = task_of(subject) else {
            continue;
        };
        let before = stored
            .get(&(subject.clone(), *event))
            .is_some_and(|s| s.alerted);
        changes.changed |= before != state.alerted;
        if state.alerted
            && !was_alerted(subject)
            && !changes.alerted.iter().any(|(t, _)| *t == task)
        {
            if let Some(at) = alerted_at.get(subject.as_str()) {
                changes.alerted.push((task, *at));
            }
        }
    }
    changes
}

#[cfg(test)]
mod tests;
