//! `src/store/queries/instances.rs`, attempts: the due attempts, dispatch claims and reclaims,
//! and the params of manual runs.

use ax::store::models::{InstanceStatus, TaskStatus, TriggerType};
use ax::store::queries::instances;
use ax::store::Db;
use chrono::NaiveDateTime;

use crate::support::{
    base, conn, fields, insert_instance, insert_task, instance, millis, new_instance,
    on_both_backends, request_id, secs,
};

on_both_backends!(due_attempts_and_claims, due_attempts_use_manual_params);

async fn due_attempts_and_claims(db: &Db) {
    use ax::store::queries::instances::Claim;
    use InstanceStatus::*;
    let t = base();
    let task = insert_task(db, fields("claims", "s", TaskStatus::Enabled, None)).await;
    let ready = |rid: &str, scheduled: NaiveDateTime, next: Option<NaiveDateTime>| {
        let mut row = new_instance(task.id, rid, scheduled, Ready);
        row.next_attempt_at = next;
        row
    };
    let (later, sooner, unclaimed, not_yet) =
        (request_id(), request_id(), request_id(), request_id());
    insert_instance(db, &ready(&later, t, Some(t + secs(2)))).await;
    insert_instance(db, &ready(&sooner, t + secs(1), Some(t + secs(1)))).await;
    insert_instance(db, &ready(&unclaimed, t + secs(2), None)).await;
    insert_instance(db, &ready(&not_yet, t + secs(3), Some(t + secs(60)))).await;

    let due = |until: NaiveDateTime, limit: i64| async move {
        instances::due_attempts(&mut conn(db).await, until, limit)
            .await
            .expect("due_attempts")
    };
    let found = due(t + secs(2), 100).await;
    let rids: Vec<&str> = found.iter().map(|d| d.request_id.as_str()).collect();
    assert_eq!(rids, vec![sooner.as_str(), later.as_str()], "soonest first");
    assert_eq!(found[0].task_id, task.id);
    assert_eq!(found[0].scheduled_at, t + secs(1));
    assert_eq!(found[0].attempt, 1);
    assert_eq!(found[0].next_attempt_at, t + secs(1));
    assert_eq!(found[0].handler_url, task.handler_url);
    assert_eq!(found[0].params, task.params);
    assert_eq!(found[0].timeout_ms, task.timeout_ms);
    assert_eq!(due(t + secs(2), 1).await.len(), 1);
    assert!(due(t, 100).await.is_empty());

    // Of two claimants of one attempt, one wins.
    let claim = |claimant: &str, expected: NaiveDateTime| Claim {
        request_id: sooner.clone(),
        attempt: 1,
        expected,
        until: t + secs(31),
        claimant: claimant.into(),
    };
    let mut c = conn(db).await;
    assert!(instances::claim(&mut c, &claim("node-b", t + secs(1)))
        .await
        .expect("claim"));
    assert!(!instances::claim(&mut c, &claim("node-c", t + secs(1)))
        .await
        .expect("claim"));
    let mut wrong_attempt = claim("node-c", t + secs(31));
    wrong_attempt.attempt = 2;
    assert!(!instances::claim(&mut c, &wrong_attempt)
        .await
        .expect("claim"));
    drop(c);
    let row = instance(db, &sooner).await;
    assert_eq!(row.fired_by, "node-b");
    assert_eq!(row.next_attempt_at, Some(t + secs(31)));
    assert_eq!(row.status, "READY");
    let rids: Vec<String> = due(t + secs(2), 100)
        .await
        .into_iter()
        .map(|d| d.request_id)
        .collect();
    assert_eq!(rids, vec![later.clone()], "a claimed attempt is not due");

    // After a restart, node-b makes its own claims due at once; others' stay.
    let now = t + secs(10);
    let reclaimed = instances::reclaim_own(&mut conn(db).await, "node-b", now)
        .await
        .expect("reclaim_own");
    assert_eq!(reclaimed, 1);
    assert_eq!(instance(db, &sooner).await.next_attempt_at, Some(now));
    assert_eq!(
        instances::reclaim_own(&mut conn(db).await, "node-z", now)
            .await
            .expect("reclaim_own"),
        0
    );
    assert_eq!(
        instance(db, &not_yet).await.next_attempt_at,
        Some(t + secs(60))
    );

    // Claims of a live process stay; those of a process that is gone are due at once.
    let live = vec!["node-test".to_string(), "node-b".to_string()];
    let reclaimed = instances::reclaim_orphans(&mut conn(db).await, &live, now)
        .await
        .expect("reclaim_orphans");
    assert_eq!(reclaimed, 0);
    assert_eq!(
        instance(db, &not_yet).await.next_attempt_at,
        Some(t + secs(60))
    );
    let live = vec!["node-b".to_string()];
    let reclaimed = instances::reclaim_orphans(&mut conn(db).await, &live, now)
        .await
        .expect("reclaim_orphans");
    assert_eq!(reclaimed, 1, "only node-test's future claim");
    assert_eq!(instance(db, &not_yet).await.next_attempt_at, Some(now));

    // A run committed ahead of its time is reclaimed for its time, never earlier.
    let ahead = request_id();
    let mut row = ready(&ahead, now + millis(400), Some(now + secs(40)));
    row.fired_by = "node-gone".into();
    insert_instance(db, &row).await;
    let reclaimed = instances::reclaim_orphans(&mut conn(db).await, &live, now)
        .await
        .expect("reclaim_orphans");
    assert_eq!(reclaimed, 1);
    assert_eq!(
        instance(db, &ahead).await.next_attempt_at,
        Some(now + millis(400))
    );
    let own = request_id();
    let mut row = ready(&own, now + millis(300), Some(now + secs(40)));
    row.fired_by = "node-b".into();
    insert_instance(db, &row).await;
    let reclaimed = instances::reclaim_own(&mut conn(db).await, "node-b", now)
        .await
        .expect("reclaim_own");
    assert_eq!(reclaimed, 1);
    assert_eq!(
        instance(db, &own).await.next_attempt_at,
        Some(now + millis(300))
    );
}

async fn due_attempts_use_manual_params(db: &Db) {
    let t = base();
    let task = insert_task(db, fields("manual", "s", TaskStatus::Enabled, None)).await;
    let (manual, scheduled) = (request_id(), request_id());
    let mut row = new_instance(task.id, &manual, t, InstanceStatus::Ready);
    row.trigger_type = TriggerType::Manual.as_str().into();
    row.next_attempt_at = Some(t);
    row.params = Some(r#"{"o":1}"#.into());
    insert_instance(db, &row).await;
    let mut row = new_instance(task.id, &scheduled, t, InstanceStatus::Ready);
    row.next_attempt_at = Some(t + secs(1));
    insert_instance(db, &row).await;

    let due = instances::due_attempts(&mut conn(db).await, t + secs(1), 100)
        .await
        .expect("due_attempts");
    let got: Vec<(&str, &str)> = due
        .iter()
        .map(|d| (d.request_id.as_str(), d.params.as_str()))
        .collect();
    assert_eq!(
        got,
        vec![
            (manual.as_str(), r#"{"o":1}"#),
            (scheduled.as_str(), task.params.as_str()),
        ]
    );
    assert_eq!(
        instance(db, &manual).await.params.as_deref(),
        Some(r#"{"o":1}"#),
        "stored as given"
    );
    assert_eq!(instance(db, &scheduled).await.params, None);
}
