//! A run waiting for its upstreams: its deadline, and what their runs make of it.

use chrono::{DateTime, Duration, Utc};

use super::event::Event;
use crate::run::status::RunStatus;

/// The deadline of a run waiting for its upstreams.
pub fn dependency_deadline(scheduled_at: DateTime<Utc>, timeout_secs: i64) -> DateTime<Utc> {
    scheduled_at
        .checked_add_signed(Duration::seconds(timeout_secs))
        .unwrap_or(DateTime::<Utc>::MAX_UTC)
}

/// What a run waiting for its upstreams does now, given each upstream's latest run scheduled
/// at or before it (`None`: no such run yet): released once every one succeeded, failed as
/// soon as one did not, timed out at its deadline; `None` while it keeps waiting.
pub fn upstream_event(
    upstreams: &[Option<RunStatus>],
    now: DateTime<Utc>,
    deadline: DateTime<Utc>,
) -> Option<Event> {
    let failed = |s: &Option<RunStatus>| s.is_some_and(|s| s.is_final() && s != RunStatus::Success);
    if upstreams.iter().any(failed) {
        Some(Event::UpstreamFailed { at: now })
    } else if upstreams.iter().all(|s| *s == Some(RunStatus::Success)) {
        Some(Event::Released { at: now })
    } else if now >= deadline {
        Some(Event::DependencyTimedOut { at: now })
    } else {
        None
    }
}
