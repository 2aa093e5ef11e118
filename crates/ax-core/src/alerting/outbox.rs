//! What a verdict writes to the outbox: an alert per channel, a folded row, or nothing. The
//! store adds what every new row starts with (no tries yet, due now).

use chrono::{DateTime, Utc};

use super::fold::Verdict;
use super::queued::{QueuedEvent, Subject};
use super::rule::{AlertEvent, AlertRule, AlertStatus};
use crate::run::TaskId;

/// A new outbox row: one alert on one channel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewAlert {
    /// Stable over every channel and resend: receivers de-duplicate by it.
    pub id: String,
    /// Empty for a folded event: it goes out with the next alert.
    pub channel: String,
    pub event: AlertEvent,
    pub subject: String,
    pub task_id: Option<TaskId>,
    pub scene: Option<String>,
    pub request_id: Option<String>,
    pub code: Option<String>,
    pub message: Option<String>,
    /// Events it tells of within the window, and folded from the last silence since when.
    pub count: u32,
    pub folded: u32,
    pub folded_since: Option<DateTime<Utc>>,
    pub at: DateTime<Utc>,
    pub status: AlertStatus,
}

/// The outbox rows of one verdict: one per channel for an alert, one without a channel for a
/// folded event, none below the threshold.
pub fn outbox_rows(
    event: &QueuedEvent,
    subject: &Subject,
    (kind, verdict): (AlertEvent, &Verdict),
    rule: &AlertRule,
) -> Vec<NewAlert> {
    let (status, channels, count, folded, folded_since) = match verdict {
        Verdict::Below => return Vec::new(),
        Verdict::Folded => (AlertStatus::Folded, vec![String::new()], 1, 0, None),
        Verdict::Alert {
            count,
            folded,
            folded_since,
        } => (
            AlertStatus::Pending,
            rule.channels.clone(),
            *count,
            *folded,
            *folded_since,
        ),
    };
    let id = alert_id(event, kind);
    let request_id = Some(event.request_id.clone()).filter(|id| !id.is_empty());
    channels
        .into_iter()
        .map(|channel| NewAlert {
            id: id.clone(),
            channel,
            event: kind,
            subject: subject.name.clone(),
            task_id: subject.task_id,
            scene: subject.scene.clone(),
            request_id: request_id.clone(),
            code: event.code.clone(),
            message: match (kind, event.lag_ms) {
                (AlertEvent::Lag, Some(lag)) => Some(format!("first dispatched {lag} ms late")),
                _ => event.message.clone(),
            },
            count,
            folded,
            folded_since,
            at: event.at,
            status,
        })
        .collect()
}

/// An alert's id, stable over every channel and resend: the queued event and what it made.
fn alert_id(event: &QueuedEvent, kind: AlertEvent) -> String {
    uuid::Uuid::new_v5(
        &uuid::Uuid::NAMESPACE_OID,
        format!("ax-alert:{}:{}:{kind}", event.request_id, event.id).as_bytes(),
    )
    .to_string()
}

#[cfg(test)]
mod tests;
