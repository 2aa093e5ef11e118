use super::*;
use crate::alerting::group::{member_subject, process_subject};
use crate::alerting::queued::test_time;
use crate::alerting::rule::AlertStatus;

fn member_down(id: i64, url: &str, secs: i64) -> QueuedEvent {
    let subject = member_subject("billing", url);
    QueuedEvent::about(id, &subject, AlertEvent::MemberUnhealthy, secs)
}

fn alert(folded: u32, since: Option<i64>) -> Verdict {
    Verdict::Alert {
        count: 1,
        folded,
        folded_since: since.map(test_time),
    }
}

fn hook() -> AlertRule {
    AlertRule {
        channels: vec!["ops-hook".into()],
        ..AlertRule::default()
    }
}

#[test]
fn closed_windows_are_taken_by_group_in_queue_order() {
    let window = Duration::seconds(10);
    let queued = vec![
        member_down(1, "http://a/", 0),
        QueuedEvent::about(2, &process_subject("ax-2"), AlertEvent::ProcessLeft, 5),
        member_down(3, "http://b/", 4),
        member_down(4, "http://c/", 12),
    ];
    let closed = closed_groups(&queued, test_time(10), window);
    let ids: Vec<(&str, Vec<i64>)> = closed
        .iter()
        .map(|(name, events)| (name.as_str(), events.iter().map(|e| e.id).collect()))
        .collect();
    // The processes' window opened at 5: still open at 10.
    assert_eq!(ids, vec![("members of billing", vec![1, 3])]);
    let later = closed_groups(&queued, test_time(15), window);
    let names: Vec<&str> = later.iter().map(|(name, _)| name.as_str()).collect();
    assert_eq!(names, ["members of billing", "ax processes"]);
    assert!(closed_groups(&queued, test_time(9), window).is_empty());
}

#[test]
fn a_window_where_nothing_alerts_tells_nothing() {
    let (a, b) = (
        member_down(1, "http://a/", 0),
        member_down(2, "http://b/", 1),
    );
    let told = [(&a, Verdict::Folded), (&b, Verdict::Below)];
    let rows = window_rows(
        "members of billing",
        AlertEvent::MemberUnhealthy,
        &told,
        &hook(),
    );
    assert!(rows.is_empty());
}

#[test]
fn one_alert_in_a_window_is_told_as_itself() {
    let (a, b) = (
        member_down(1, "http://a/", 0),
        member_down(2, "http://b/", 1),
    );
    let told = [(&a, Verdict::Folded), (&b, alert(2, Some(-30)))];
    let rows = window_rows(
        "members of billing",
        AlertEvent::MemberUnhealthy,
        &told,
        &hook(),
    );
    let alone = outbox_rows(
        &b,
        &Subject::named(member_subject("billing", "http://b/")),
        (AlertEvent::MemberUnhealthy, &alert(2, Some(-30))),
        &hook(),
    );
    assert_eq!(rows, alone);
    assert_eq!(rows[0].subject, "member billing http://b/");
}

#[test]
fn several_alerts_in_a_window_are_one_naming_the_count_and_members() {
    let events: Vec<QueuedEvent> = (0..7)
        .map(|n| member_down(n + 1, &format!("m{n}"), 6 - n))
        .collect();
    let told: Vec<(&QueuedEvent, Verdict)> = events
        .iter()
        .enumerate()
        .map(|(n, event)| match n {
            0 => (event, Verdict::Folded),
            2 => (event, alert(3, Some(-20))),
            4 => (event, alert(1, Some(-50))),
            _ => (event, alert(0, None)),
        })
        .collect();
    let rows = window_rows(
        "members of billing",
        AlertEvent::MemberUnhealthy,
        &told,
        &hook(),
    );
    assert_eq!(rows.len(), 1);
    let row = &rows[0];
    assert_eq!(row.subject, "members of billing");
    assert_eq!(
        row.message.as_deref(),
        Some("6 members of billing unhealthy: m1, m2, m3, m4, m5, …")
    );
    assert_eq!((row.count, row.folded), (6, 4));
    assert_eq!(row.folded_since, Some(test_time(-50)));
    // The latest of the alerting events, under the first alerting one's id.
    assert_eq!(row.at, test_time(5));
    let first = outbox_rows(
        &events[1],
        &Subject::named("x".into()),
        (AlertEvent::MemberUnhealthy, &alert(0, None)),
        &hook(),
    );
    assert_eq!(row.id, first[0].id);
    assert_eq!((row.status, row.task_id), (AlertStatus::Pending, None));
}
