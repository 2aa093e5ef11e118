//! Alert rules: the events a rule alerts on, its channels, its threshold and silence; and
//! which rule applies (the task's, else its scene's, else the configured default).

use serde::{Deserialize, Serialize};

use crate::run::{RunStatus, DEPENDENCY_TIMEOUT_CODE, TASK_DELETED_CODE, UPSTREAM_FAILED_CODE};

crate::text_enum! {
    /// What an alert is about (`TEST`: sent by `POST /api/alerts/test` only).
    AlertEvent {
        Failed => "FAILED",
        Missed => "MISSED",
        UpstreamFailed => "UPSTREAM_FAILED",
        DependencyTimeout => "DEPENDENCY_TIMEOUT",
        Skipped => "SKIPPED",
        Lag => "LAG",
        MemberUnhealthy => "MEMBER_UNHEALTHY",
        ProcessLeft => "PROCESS_LEFT",
        StoreUnreachable => "STORE_UNREACHABLE",
        RedisUnreachable => "REDIS_UNREACHABLE",
        ClockSkew => "CLOCK_SKEW",
        Resolved => "RESOLVED",
        Test => "TEST",
    }
}

crate::text_enum! {
    /// Where an alert is: waiting to be sent (or tried again), sent, folded into a silence
    /// (sent with the next alert), or given up after the retry time.
    AlertStatus { Pending => "pending", Sent => "sent", Folded => "folded", Failed => "failed" }
}

/// The event a run's end makes, by its final status and code; `None`: no alert is about it
/// (cancelled, replaced, its task deleted).
pub fn event_of(status: RunStatus, code: Option<&str>) -> Option<AlertEvent> {
    match (status, code) {
        (RunStatus::Success, _) => Some(AlertEvent::Resolved),
        (RunStatus::Missed, _) => Some(AlertEvent::Missed),
        (RunStatus::Skipped, _) => Some(AlertEvent::Skipped),
        (RunStatus::Failed, Some(UPSTREAM_FAILED_CODE)) => Some(AlertEvent::UpstreamFailed),
        (RunStatus::Failed, Some(DEPENDENCY_TIMEOUT_CODE)) => Some(AlertEvent::DependencyTimeout),
        (RunStatus::Failed, Some(TASK_DELETED_CODE)) => None,
        (RunStatus::Failed, _) => Some(AlertEvent::Failed),
        _ => None,
    }
}

/// When and where to alert: `threshold` events of one kind about one subject within
/// `window_secs` make an alert; after it, that (subject, event) stays silent for
/// `silence_secs`, its events folded into the next alert.
#[derive(
    Debug,
    Clone,
    PartialEq,
    Eq,
    Serialize,
    Deserialize,
    diesel::expression::AsExpression,
    diesel::deserialize::FromSqlRow,
)]
#[diesel(sql_type = diesel::sql_types::Text)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct AlertRule {
    pub events: Vec<AlertEvent>,
    /// Channel names, as configured under `alerts.channels`.
    pub channels: Vec<String>,
    pub threshold: u32,
    pub window_secs: i64,
    pub silence_secs: i64,
}

impl Default for AlertRule {
    fn default() -> Self {
        AlertRule {
            events: vec![
                AlertEvent::Failed,
                AlertEvent::Missed,
                AlertEvent::UpstreamFailed,
                AlertEvent::Lag,
                AlertEvent::MemberUnhealthy,
                AlertEvent::ProcessLeft,
                AlertEvent::StoreUnreachable,
                AlertEvent::RedisUnreachable,
                AlertEvent::ClockSkew,
                AlertEvent::Resolved,
            ],
            channels: Vec::new(),
            threshold: 1,
            window_secs: 300,
            silence_secs: 1800,
        }
    }
}

crate::json_text!(AlertRule, "alert rule");

/// A rule that cannot be used: the key, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct RuleError {
    pub field: &'static str,
    pub message: String,
}

/// Longest window or silence: a week.
const MAX_SECS: i64 = 7 * 24 * 3600;

impl AlertRule {
    fn to_text(&self) -> String {
        // Names, numbers and unit enums always serialize.
        serde_json::to_string(self).unwrap_or_default()
    }

    /// Whether the rule alerts on `event`.
    pub fn wants(&self, event: AlertEvent) -> bool {
        self.events.contains(&event)
    }

    /// Checks the rule: its values, and its channels against the configured names.
    pub fn check(&self, channels: &[&str]) -> Result<(), RuleError> {
        if let Some(unknown) = self
            .channels
            .iter()
            .find(|name| !channels.contains(&name.as_str()))
        {
            let known = if channels.is_empty() {
                "none is configured (alerts.channels)".to_string()
            } else {
                format!("the configured ones are {}", channels.join(", "))
            };
            return Err(RuleError {
                field: "channels",
                message: format!("no channel `{unknown}`: {known}"),
            });
        }
        self.check_values()
    }

    /// Checks the rule's threshold, window and silence.
    pub fn check_values(&self) -> Result<(), RuleError> {
        let refuse = |field, message: String| Err(RuleError { field, message });
        if self.threshold == 0 {
            return refuse("threshold", "must be at least 1".into());
        }
        if !(1..=MAX_SECS).contains(&self.window_secs) {
            return refuse("windowSecs", format!("must be 1 to {MAX_SECS}"));
        }
        if !(0..=MAX_SECS).contains(&self.silence_secs) {
            return refuse("silenceSecs", format!("must be 0 to {MAX_SECS}"));
        }
        Ok(())
    }
}

/// The rule for a task: its own, else its scene's, else the default.
pub fn most_specific<'a>(
    task: Option<&'a AlertRule>,
    scene: Option<&'a AlertRule>,
    default: &'a AlertRule,
) -> &'a AlertRule {
    task.or(scene).unwrap_or(default)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_rule_is_the_documented_one() {
        let rule: AlertRule = serde_json::from_str("{}").expect("defaults");
        assert_eq!(rule, AlertRule::default());
        assert_eq!(
            (rule.threshold, rule.window_secs, rule.silence_secs),
            (1, 300, 1800)
        );
        assert!(rule.wants(AlertEvent::Failed) && rule.wants(AlertEvent::Resolved));
        assert!(!rule.wants(AlertEvent::Skipped));
    }

    #[test]
    fn a_rule_reads_in_the_files_shape_and_refuses_unknown_keys() {
        let rule: AlertRule = serde_json::from_str(
            r#"{"events": ["FAILED", "SKIPPED"], "channels": ["ops-hook"], "threshold": 3,
                "windowSecs": 60, "silenceSecs": 0}"#,
        )
        .expect("rule");
        assert_eq!(rule.events, vec![AlertEvent::Failed, AlertEvent::Skipped]);
        assert_eq!(rule.check(&["ops-hook"]), Ok(()));
        assert!(serde_json::from_str::<AlertRule>(r#"{"treshold": 3}"#).is_err());
        assert!(serde_json::from_str::<AlertRule>(r#"{"events": ["BOOM"]}"#).is_err());
    }

    #[test]
    fn a_bad_rule_names_its_key() {
        let field = |rule: AlertRule| rule.check(&["a"]).map_err(|e| e.field);
        let base = AlertRule::default();
        let unknown = AlertRule {
            channels: vec!["b".into()],
            ..base.clone()
        };
        assert_eq!(field(unknown), Err("channels"));
        assert_eq!(
            field(AlertRule {
                threshold: 0,
                ..base.clone()
            }),
            Err("threshold")
        );
        assert_eq!(
            field(AlertRule {
                window_secs: 0,
                ..base.clone()
            }),
            Err("windowSecs")
        );
        assert_eq!(
            field(AlertRule {
                silence_secs: -1,
                ..base.clone()
            }),
            Err("silenceSecs")
        );
        assert_eq!(field(base), Ok(()));
    }

    #[test]
    fn a_runs_end_is_its_event_by_status_and_code() {
        let event = |status, code| event_of(status, code);
        assert_eq!(
            event(RunStatus::Failed, Some("HTTP_500")),
            Some(AlertEvent::Failed)
        );
        assert_eq!(
            event(RunStatus::Failed, Some(UPSTREAM_FAILED_CODE)),
            Some(AlertEvent::UpstreamFailed)
        );
        assert_eq!(
            event(RunStatus::Failed, Some(DEPENDENCY_TIMEOUT_CODE)),
            Some(AlertEvent::DependencyTimeout)
        );
        assert_eq!(event(RunStatus::Failed, Some(TASK_DELETED_CODE)), None);
        assert_eq!(event(RunStatus::Missed, None), Some(AlertEvent::Missed));
        assert_eq!(
            event(RunStatus::Skipped, Some("OVERLAP")),
            Some(AlertEvent::Skipped)
        );
        assert_eq!(event(RunStatus::Success, None), Some(AlertEvent::Resolved));
        assert_eq!(event(RunStatus::Cancelled, None), None);
    }

    #[test]
    fn the_most_specific_rule_applies() {
        let default = AlertRule::default();
        let scene = AlertRule {
            threshold: 2,
            ..AlertRule::default()
        };
        let task = AlertRule {
            threshold: 3,
            ..AlertRule::default()
        };
        assert_eq!(most_specific(Some(&task), Some(&scene), &default), &task);
        assert_eq!(most_specific(None, Some(&scene), &default), &scene);
        assert_eq!(most_specific(None, None, &default), &default);
    }
}
