use super::*;
use crate::alerting::group::member_subject;
use crate::alerting::queued::{asked, test_time, TaskFacts};
use crate::run::RunStatus;

fn known() -> HashMap<TaskId, TaskFacts> {
    let facts = |name: &str| TaskFacts {
        subject: format!("etl/{name}"),
        scene: "etl".into(),
        muted: false,
        own_rule: None,
        scene_rule: None,
        alert_lag_ms: Some(1000),
    };
    HashMap::from([(TaskId(7), facts("report")), (TaskId(8), facts("load"))])
}

fn rule(threshold: u32) -> AlertRule {
    AlertRule {
        channels: vec!["ops-hook".into()],
        threshold,
        ..AlertRule::default()
    }
}

/// Folds `events` as the store does: each one's ask, then the fold.
fn fold(events: &[QueuedEvent], stored: &FoldStates, rule: &AlertRule) -> Folded {
    let known = known();
    let asks: Vec<(&QueuedEvent, Asked)> = events
        .iter()
        .filter_map(|event| Some((event, asked(event, &known, rule)?)))
        .collect();
    fold_asks(&asks, stored, rule)
}

fn kinds(folded: &Folded) -> Vec<(&str, AlertEvent)> {
    let rows = folded.alerts.iter();
    rows.map(|row| (row.subject.as_str(), row.event)).collect()
}

#[test]
fn the_threshold_alerts_and_the_task_is_watched_from_its_alert() {
    let events = [
        QueuedEvent::run_end(1, 7, RunStatus::Failed, 0),
        QueuedEvent::run_end(2, 8, RunStatus::Failed, 1),
        QueuedEvent::run_end(3, 7, RunStatus::Failed, 2),
    ];
    let folded = fold(&events, &FoldStates::new(), &rule(2));
    assert_eq!(kinds(&folded), [("etl/report", AlertEvent::Failed)]);
    assert_eq!(folded.alerts[0].count, 2);
    let report = &folded.states[&("task:7".to_string(), AlertEvent::Failed)];
    let load = &folded.states[&("task:8".to_string(), AlertEvent::Failed)];
    assert!(report.alerted && !load.alerted);
    assert_eq!(
        folded.watch,
        WatchChanges {
            changed: true,
            alerted: vec![(TaskId(7), test_time(2))],
        }
    );
}

#[test]
fn a_success_resolves_what_was_alerted_once() {
    let failed = [QueuedEvent::run_end(1, 7, RunStatus::Failed, 0)];
    let alerted = fold(&failed, &FoldStates::new(), &rule(1)).states;
    let success = [
        QueuedEvent::run_end(2, 7, RunStatus::Success, 5),
        QueuedEvent::run_end(3, 7, RunStatus::Success, 6),
        QueuedEvent::run_end(4, 8, RunStatus::Success, 7),
    ];
    let folded = fold(&success, &alerted, &rule(1));
    assert_eq!(kinds(&folded), [("etl/report", AlertEvent::Resolved)]);
    assert!(!folded.states[&("task:7".to_string(), AlertEvent::Failed)].alerted);
    assert_eq!(
        folded.watch,
        WatchChanges {
            changed: true,
            alerted: Vec::new(),
        }
    );

    let quiet = AlertRule {
        events: vec![AlertEvent::Failed],
        ..rule(1)
    };
    let folded = fold(&success, &alerted, &quiet);
    assert!(folded.alerts.is_empty(), "the rule does not want RESOLVED");
    assert!(!folded.states[&("task:7".to_string(), AlertEvent::Failed)].alerted);
}

#[test]
fn a_late_success_resolves_failures_but_not_lateness() {
    let late = |id, secs| QueuedEvent {
        lag_ms: Some(5000),
        ..QueuedEvent::run_end(id, 7, RunStatus::Success, secs)
    };
    let first = fold(&[late(1, 0)], &FoldStates::new(), &rule(1));
    assert_eq!(kinds(&first), [("etl/report", AlertEvent::Lag)]);
    let failed = [QueuedEvent::run_end(2, 7, RunStatus::Failed, 1)];
    let both = fold(&failed, &first.states, &rule(1)).states;
    let folded = fold(&[late(3, 2)], &both, &rule(1));
    let state = |kind| folded.states[&("task:7".to_string(), kind)].alerted;
    assert!(!state(AlertEvent::Failed) && state(AlertEvent::Lag));
    // Resolved, then a late event again within the lateness's silence: folded.
    assert_eq!(
        folded
            .alerts
            .iter()
            .map(|row| (row.event, row.channel.as_str()))
            .collect::<Vec<_>>(),
        [(AlertEvent::Resolved, "ops-hook"), (AlertEvent::Lag, "")]
    );
}

#[test]
fn a_task_alerted_before_is_not_newly_watched() {
    let failed = [QueuedEvent::run_end(1, 7, RunStatus::Failed, 0)];
    let alerted = fold(&failed, &FoldStates::new(), &rule(1)).states;
    let again = [QueuedEvent::run_end(2, 7, RunStatus::Failed, 4000)];
    let folded = fold(&again, &alerted, &rule(1));
    assert_eq!(kinds(&folded), [("etl/report", AlertEvent::Failed)]);
    assert_eq!(
        folded.watch,
        WatchChanges {
            changed: false,
            alerted: Vec::new(),
        }
    );
}

#[test]
fn events_about_members_fold_per_window_and_never_touch_the_watch() {
    let events: Vec<QueuedEvent> = (1..=3)
        .map(|n| {
            let subject = member_subject("billing", &format!("http://m{n}/"));
            QueuedEvent::about(n, &subject, AlertEvent::MemberUnhealthy, n)
        })
        .collect();
    let folded = fold(&events, &FoldStates::new(), &rule(1));
    assert_eq!(
        kinds(&folded),
        [("members of billing", AlertEvent::MemberUnhealthy)]
    );
    assert_eq!(folded.alerts[0].count, 3);
    assert_eq!(
        folded.watch,
        WatchChanges {
            changed: false,
            alerted: Vec::new(),
        }
    );
    let back: Vec<QueuedEvent> = (1..=2)
        .map(|n| {
            let subject = member_subject("billing", &format!("http://m{n}/"));
            QueuedEvent::about(n + 3, &subject, AlertEvent::Resolved, 10)
        })
        .collect();
    let resolved = fold(&back, &folded.states, &rule(1));
    assert_eq!(
        resolved.alerts[0].message.as_deref(),
        Some("2 members of billing back: http://m1/, http://m2/")
    );
}

#[test]
fn an_event_the_rule_does_not_want_leaves_no_state() {
    let skipped = [QueuedEvent::run_end(1, 7, RunStatus::Skipped, 0)];
    let folded = fold(&skipped, &FoldStates::new(), &rule(1));
    assert!(folded.alerts.is_empty() && folded.states.is_empty());
}
