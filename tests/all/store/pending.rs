//! `crates/ax-store/src/queries/transitions.rs`, `check_pending`: runs waiting on their upstreams.

use ax_core::run::{NewRun, RunStatus};
use ax_store::queries::runs::FireOutcome;
use ax_store::queries::{due, pending, tasks};
use ax_store::rows::models::TaskStatus;
use ax_store::Db;
use chrono::NaiveDateTime;

use crate::store::support::{
    applied, at, base, born, conn, decide, fields, insert_run, insert_task, instance, millis,
    new_instance, on_every_backend, report, request_id, secs, succeeded,
};

on_every_backend!(check_pending_follows_upstreams);

async fn check_pending_follows_upstreams(db: &Db) {
    use RunStatus::*;
    let t = base();
    let a = insert_task(db, fields("up", "s", TaskStatus::Enabled, None)).await;
    let b = tasks::insert(
        &mut conn(db).await,
        fields("down", "s", TaskStatus::Enabled, None),
        vec![a.id],
    )
    .await
    .expect("insert downstream")
    .expect("upstreams accepted");

    // The upstream's history.
    let upstream = |when: NaiveDateTime, status: RunStatus| {
        let rid = request_id();
        let mut row = new_instance(a.id, &rid, when, status);
        if status.is_final() {
            row.finished_at = Some(when + secs(1));
        }
        (rid, row)
    };
    let (_, a_ok) = upstream(t, Success);
    let (_, a_failed) = upstream(t + secs(10), Failed);
    let (_, a_missed) = upstream(t + secs(20), Missed);
    let (a_running, a_running_row) = upstream(t + secs(30), Running);
    for row in [&a_ok, &a_failed, &a_missed, &a_running_row] {
        assert_eq!(insert_run(db, row).await, FireOutcome::Fired);
    }

    let now1 = t + secs(100);
    let deadline = t + secs(200);
    let pending = |scheduled: NaiveDateTime, deadline: NaiveDateTime| {
        let rid = request_id();
        let row = born(
            b.id,
            &rid,
            scheduled,
            &NewRun::waiting_for_upstreams(at(deadline)),
        );
        (rid, row)
    };
    // Before any upstream run: waits until its deadline (later upstream runs do not count).
    let (early, early_row) = pending(t - secs(10), deadline);
    // After a SUCCESS (and before a FAILED): released, even past its own deadline.
    let (ok, ok_row) = pending(t + secs(5), now1 - secs(1));
    // At the very time of a FAILED upstream run: failed.
    let (failed, failed_row) = pending(t + secs(10), deadline);
    // After a MISSED: failed.
    let (missed, missed_row) = pending(t + secs(25), deadline);
    // The upstream still runs: waits.
    let (waiting, waiting_row) = pending(t + secs(30), deadline);
    for row in [&early_row, &ok_row, &failed_row, &missed_row, &waiting_row] {
        assert_eq!(insert_run(db, row).await, FireOutcome::Fired);
    }
    // A run that is not PENDING is not looked at.
    let ready = request_id();
    insert_run(db, &new_instance(b.id, &ready, t + secs(7), Ready)).await;

    let check = |now: NaiveDateTime, limit: i64| async move {
        pending::check_pending(&mut conn(db).await, at(now), limit)
            .await
            .expect("check_pending")
    };

    // Oldest first, `limit` of them: `early` waits, then `ok` is released.
    assert_eq!(check(now1, 1).await, (0, 0));
    assert_eq!(check(now1, 2).await, (1, 0));
    let row = instance(db, &ok).await;
    assert_eq!(row.status, Ready);
    assert_eq!(row.next_attempt_at, Some(now1), "due at once");
    assert_eq!(
        (row.dispatched_attempt, row.claimed_until),
        (0, None),
        "not dispatched yet"
    );
    assert_eq!(row.deadline_at, None);
    assert_eq!((row.finished_at, row.callback_code), (None, None));
    let due = due::due_attempts(&mut conn(db).await, at(now1), 100)
        .await
        .expect("due_attempts");
    let due: Vec<_> = due.iter().map(|d| &d.request_id).collect();
    assert_eq!(due, vec![&ok], "the attempt scan dispatches it");
    assert_eq!(check(now1, 100).await, (0, 2));

    for (rid, scheduled) in [(&failed, t + secs(10)), (&missed, t + secs(25))] {
        let row = instance(db, rid).await;
        assert_eq!(row.status, Failed, "scheduled at {scheduled}");
        assert_eq!(row.callback_code.as_deref(), Some("UPSTREAM_FAILED"));
        assert!(row.callback_message.is_some());
        assert_eq!(row.finished_at, Some(now1));
        assert_eq!(row.deadline_at, None);
        assert_eq!(row.next_attempt_at, None, "no retry");
    }
    for rid in [&early, &waiting] {
        let row = instance(db, rid).await;
        assert_eq!(row.status, Pending);
        assert_eq!(row.deadline_at, Some(deadline), "the deadline is kept");
        assert_eq!((row.finished_at, row.callback_code), (None, None));
    }
    let row = instance(db, &ready).await;
    assert_eq!((row.status, row.next_attempt_at), (Ready, None));
    assert_eq!(check(now1, 100).await, (0, 0), "nothing changed since");

    // The running upstream succeeds: its downstream is released at the next check.
    let outcome = decide(
        db,
        &a_running,
        &report(None, succeeded(None, None), now1 + secs(1)),
    )
    .await;
    assert_eq!(applied(outcome).status, Success);
    let now2 = now1 + secs(2);
    assert_eq!(check(now2, 100).await, (1, 0));
    let row = instance(db, &waiting).await;
    assert_eq!(
        (row.status, row.next_attempt_at, row.deadline_at),
        (Ready, Some(now2), None)
    );

    // `early` has no upstream run at or before it: PENDING until its deadline, then FAILED.
    assert_eq!(check(deadline - millis(1), 100).await, (0, 0));
    assert_eq!(instance(db, &early).await.status, Pending);
    assert_eq!(check(deadline, 100).await, (0, 1));
    let row = instance(db, &early).await;
    assert_eq!(row.status, Failed);
    assert_eq!(row.callback_code.as_deref(), Some("DEPENDENCY_TIMEOUT"));
    assert!(row.callback_message.is_some());
    assert_eq!(row.finished_at, Some(deadline));
    assert_eq!(row.deadline_at, None);
    assert_eq!(check(deadline + secs(1), 100).await, (0, 0));

    // A PENDING run that is past its deadline while its upstream still runs times out too.
    let (_, late_running) = upstream(t + secs(300), Running);
    insert_run(db, &late_running).await;
    let (late, late_row) = pending(t + secs(300), t + secs(310));
    insert_run(db, &late_row).await;
    assert_eq!(check(t + secs(305), 100).await, (0, 0));
    assert_eq!(check(t + secs(310), 100).await, (0, 1));
    assert_eq!(
        instance(db, &late).await.callback_code.as_deref(),
        Some("DEPENDENCY_TIMEOUT")
    );
}
