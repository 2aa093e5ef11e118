//! Group windows over the queue: which queued events about members and processes a closed
//! window takes, and what one window tells of one kind of event (see [`super::group`]).

use chrono::{DateTime, Duration, Utc};

use super::fold::Verdict;
use super::group::{closed_window, group_message, group_of};
use super::outbox::{outbox_rows, NewAlert};
use super::queued::{QueuedEvent, Subject};
use super::rule::{AlertEvent, AlertRule};

/// The queued events about members and processes whose group's window closed at `now`, by
/// group, each group's in queue order.
pub fn closed_groups(
    queued: &[QueuedEvent],
    now: DateTime<Utc>,
    window: Duration,
) -> Vec<(String, Vec<&QueuedEvent>)> {
    let mut groups: Vec<(String, Vec<&QueuedEvent>)> = Vec::new();
    for event in queued {
        let name = group_of(event.subject.as_deref().unwrap_or_default()).name;
        match groups.iter_mut().find(|(of, _)| *of == name) {
            Some((_, events)) => events.push(event),
            None => groups.push((name, vec![event])),
        }
    }
    groups
        .into_iter()
        .filter_map(|(name, events)| {
            let ats: Vec<DateTime<Utc>> = events.iter().map(|event| event.at).collect();
            let taken: Vec<&QueuedEvent> = closed_window(&ats, now, window)
                .into_iter()
                .map(|n| events[n])
                .collect();
            (!taken.is_empty()).then_some((name, taken))
        })
        .collect()
}

/// The outbox rows of one group's window for one kind of event: the verdicts that alert, told
/// as the event itself when it is alone, else as one alert naming how many and the first of
/// them (its id from the window's first event); nothing when none alerts (their members'
/// silences count the rest for their next alert).
pub fn window_rows(
    group: &str,
    kind: AlertEvent,
    told: &[(&QueuedEvent, Verdict)],
    rule: &AlertRule,
) -> Vec<NewAlert> {
    let alerting: Vec<(&QueuedEvent, u32, Option<DateTime<Utc>>)> = told
        .iter()
        .filter_map(|(event, verdict)| match verdict {
            Verdict::Alert {
                folded,
                folded_since,
                ..
            } => Some((*event, *folded, *folded_since)),
            _ => None,
        })
        .collect();
    let Some(&(first, _, _)) = <[_]>::first(&alerting) else {
        return Vec::new();
    };
    let folded = alerting.iter().map(|(_, n, _)| n).sum();
    let verdict = Verdict::Alert {
        count: u32::try_from(alerting.len()).unwrap_or(u32::MAX),
        folded,
        folded_since: alerting.iter().filter_map(|(_, _, since)| *since).min(),
    };
    if alerting.len() == 1 {
        let name = first.subject.clone().unwrap_or_default();
        return outbox_rows(first, &Subject::named(name), (kind, &verdict), rule);
    }
    let members: Vec<String> = alerting
        .iter()
        .map(|(event, _, _)| group_of(event.subject.as_deref().unwrap_or_default()).member)
        .collect();
    let members: Vec<&str> = members.iter().map(String::as_str).collect();
    let window = QueuedEvent {
        message: Some(group_message(group, kind, &members)),
        at: alerting
            .iter()
            .map(|(event, _, _)| event.at)
            .max()
            .unwrap_or(first.at),
        ..first.clone()
    };
    outbox_rows(
        &window,
        &Subject::named(group.to_string()),
        (kind, &verdict),
        rule,
    )
}

#[cfg(test)]
mod tests;
