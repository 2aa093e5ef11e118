use super::*;
use crate::alerting::group::member_subject;

fn facts(muted: bool) -> TaskFacts {
    TaskFacts {
        subject: "etl/report".into(),
        scene: "etl".into(),
        muted,
        own_rule: None,
        scene_rule: None,
        alert_lag_ms: Some(1000),
    }
}

fn rule(threshold: u32) -> AlertRule {
    AlertRule {
        threshold,
        ..AlertRule::default()
    }
}

#[test]
fn a_run_end_asks_about_its_task_under_the_most_specific_rule() {
    let default = rule(1);
    let mut known = HashMap::from([(TaskId(7), facts(false))]);
    let failed = QueuedEvent::run_end(1, 7, RunStatus::Failed, 0);
    let asked = asked(&failed, &known, &default).expect("asks");
    assert_eq!(
        asked.subject,
        Subject {
            key: "task:7".into(),
            name: "etl/report".into(),
            task_id: Some(TaskId(7)),
            scene: Some("etl".into()),
        }
    );
    assert_eq!(asked.events, vec![AlertEvent::Failed]);
    assert_eq!(
        (asked.group, asked.resolves, asked.keep),
        (None, false, None)
    );
    assert_eq!(asked.rule, &default);

    let (scene, own) = (rule(2), rule(3));
    known.insert(
        TaskId(7),
        TaskFacts {
            scene_rule: Some(scene.clone()),
            ..facts(false)
        },
    );
    assert_eq!(asked_rule(&failed, &known, &default), scene);
    known.insert(
        TaskId(7),
        TaskFacts {
            scene_rule: Some(scene),
            own_rule: Some(own.clone()),
            ..facts(false)
        },
    );
    assert_eq!(asked_rule(&failed, &known, &default), own);
}

fn asked_rule(
    event: &QueuedEvent,
    known: &HashMap<TaskId, TaskFacts>,
    default: &AlertRule,
) -> AlertRule {
    asked(event, known, default).expect("asks").rule.clone()
}

#[test]
fn a_muted_deleted_or_unknown_status_asks_nothing() {
    let default = AlertRule::default();
    let muted = HashMap::from([(TaskId(7), facts(true))]);
    let failed = QueuedEvent::run_end(1, 7, RunStatus::Failed, 0);
    assert_eq!(asked(&failed, &muted, &default), None, "paused");
    assert_eq!(asked(&failed, &HashMap::new(), &default), None, "deleted");
    let known = HashMap::from([(TaskId(7), facts(false))]);
    let odd = QueuedEvent {
        status: "BOOM".into(),
        ..failed
    };
    assert_eq!(asked(&odd, &known, &default), None);
}

#[test]
fn a_success_resolves_and_a_late_one_keeps_its_lateness() {
    let default = AlertRule::default();
    let known = HashMap::from([(TaskId(7), facts(false))]);
    let success = QueuedEvent::run_end(1, 7, RunStatus::Success, 0);
    let on_time = asked(&success, &known, &default).expect("asks");
    assert!(on_time.resolves && on_time.events.is_empty() && on_time.keep.is_none());

    let late = QueuedEvent {
        lag_ms: Some(1001),
        ..success.clone()
    };
    let late = asked(&late, &known, &default).expect("asks");
    assert!(late.resolves);
    assert_eq!(late.events, vec![AlertEvent::Lag]);
    assert_eq!(late.keep, Some(AlertEvent::Lag));

    let at_the_bound = QueuedEvent {
        lag_ms: Some(1000),
        ..success
    };
    let at_the_bound = asked(&at_the_bound, &known, &default).expect("asks");
    assert!(at_the_bound.events.is_empty() && at_the_bound.keep.is_none());
}

#[test]
fn a_late_failure_tells_both() {
    let default = AlertRule::default();
    let known = HashMap::from([(TaskId(7), facts(false))]);
    let failed = QueuedEvent {
        lag_ms: Some(5000),
        ..QueuedEvent::run_end(1, 7, RunStatus::Failed, 0)
    };
    let asked = asked(&failed, &known, &default).expect("asks");
    assert_eq!(asked.events, vec![AlertEvent::Failed, AlertEvent::Lag]);
    assert!(!asked.resolves);
}

#[test]
fn an_event_about_no_run_asks_about_its_subject_in_its_group() {
    let default = rule(4);
    let subject = member_subject("billing", "http://10.0.0.7/");
    let no_tasks = HashMap::new();
    let down = QueuedEvent::about(1, &subject, AlertEvent::MemberUnhealthy, 0);
    let asked_down = asked(&down, &no_tasks, &default).expect("asks");
    assert_eq!(asked_down.subject, Subject::named(subject.clone()));
    assert_eq!(asked_down.group, Some(group_of(&subject)));
    assert_eq!(asked_down.events, vec![AlertEvent::MemberUnhealthy]);
    assert!(!asked_down.resolves);
    assert_eq!(asked_down.rule, &default);

    let back = QueuedEvent::about(2, &subject, AlertEvent::Resolved, 0);
    let asked_back = asked(&back, &no_tasks, &default).expect("asks");
    assert!(asked_back.resolves && asked_back.events.is_empty());
}
