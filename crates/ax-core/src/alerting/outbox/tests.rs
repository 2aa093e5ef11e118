use super::*;
use crate::alerting::queued::test_time;
use crate::run::RunStatus;

fn task_subject() -> Subject {
    Subject {
        key: "task:7".into(),
        name: "etl/report".into(),
        task_id: Some(TaskId(7)),
        scene: Some("etl".into()),
    }
}

fn two_channels() -> AlertRule {
    AlertRule {
        channels: vec!["ops-hook".into(), "mail".into()],
        ..AlertRule::default()
    }
}

fn alert(count: u32, folded: u32) -> Verdict {
    Verdict::Alert {
        count,
        folded,
        folded_since: (folded > 0).then(|| test_time(-60)),
    }
}

#[test]
fn an_alert_goes_out_on_every_channel_under_one_id() {
    let failed = QueuedEvent {
        code: Some("HTTP_500".into()),
        message: Some("boom".into()),
        ..QueuedEvent::run_end(4, 7, RunStatus::Failed, 0)
    };
    let verdict = alert(3, 2);
    let rows = outbox_rows(
        &failed,
        &task_subject(),
        (AlertEvent::Failed, &verdict),
        &two_channels(),
    );
    let channels: Vec<&str> = rows.iter().map(|row| row.channel.as_str()).collect();
    assert_eq!(channels, ["ops-hook", "mail"]);
    assert_eq!(rows[0].id, rows[1].id);
    let row = &rows[0];
    assert_eq!(row.status, AlertStatus::Pending);
    assert_eq!(
        (row.count, row.folded, row.folded_since),
        (3, 2, Some(test_time(-60)))
    );
    assert_eq!(
        (row.subject.as_str(), row.task_id, row.scene.as_deref()),
        ("etl/report", Some(TaskId(7)), Some("etl"))
    );
    assert_eq!(row.request_id.as_deref(), Some("run-4"));
    assert_eq!(
        (row.code.as_deref(), row.message.as_deref()),
        (Some("HTTP_500"), Some("boom"))
    );
    assert_eq!((row.event, row.at), (AlertEvent::Failed, test_time(0)));
}

#[test]
fn the_id_is_stable_for_one_event_and_kind_and_differs_otherwise() {
    let failed = QueuedEvent::run_end(4, 7, RunStatus::Failed, 0);
    let verdict = alert(1, 0);
    let rule = two_channels();
    let id_of = |event: &QueuedEvent, kind| {
        outbox_rows(event, &task_subject(), (kind, &verdict), &rule)[0]
            .id
            .clone()
    };
    let once = id_of(&failed, AlertEvent::Failed);
    assert_eq!(once, id_of(&failed.clone(), AlertEvent::Failed));
    assert_ne!(once, id_of(&failed, AlertEvent::Lag));
    let another = QueuedEvent::run_end(5, 7, RunStatus::Failed, 0);
    assert_ne!(once, id_of(&another, AlertEvent::Failed));
}

#[test]
fn a_folded_event_is_one_row_without_a_channel_and_below_is_none() {
    let failed = QueuedEvent::run_end(4, 7, RunStatus::Failed, 0);
    let folded = outbox_rows(
        &failed,
        &task_subject(),
        (AlertEvent::Failed, &Verdict::Folded),
        &two_channels(),
    );
    assert_eq!(folded.len(), 1);
    assert_eq!(
        (folded[0].channel.as_str(), folded[0].status),
        ("", AlertStatus::Folded)
    );
    assert_eq!((folded[0].count, folded[0].folded), (1, 0));
    let below = outbox_rows(
        &failed,
        &task_subject(),
        (AlertEvent::Failed, &Verdict::Below),
        &two_channels(),
    );
    assert!(below.is_empty());
}

#[test]
fn lateness_says_how_late_and_an_event_about_no_run_has_no_request() {
    let late = QueuedEvent {
        lag_ms: Some(1500),
        message: Some("ok".into()),
        ..QueuedEvent::run_end(4, 7, RunStatus::Success, 0)
    };
    let verdict = alert(1, 0);
    let rows = outbox_rows(
        &late,
        &task_subject(),
        (AlertEvent::Lag, &verdict),
        &two_channels(),
    );
    assert_eq!(
        rows[0].message.as_deref(),
        Some("first dispatched 1500 ms late")
    );
    let down = QueuedEvent::about(9, "redis", AlertEvent::RedisUnreachable, 0);
    let rows = outbox_rows(
        &down,
        &Subject::named("redis".into()),
        (AlertEvent::RedisUnreachable, &verdict),
        &two_channels(),
    );
    assert_eq!(
        (rows[0].request_id.as_deref(), rows[0].task_id),
        (None, None)
    );
}
