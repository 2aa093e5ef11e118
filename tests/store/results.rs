//! `src/store/queries/instances.rs`, results: `apply_result`'s transitions and retries, many
//! results per statement, and RUNNING runs past their deadline.

use ax::store::models::{InstanceStatus, TaskFields, TaskStatus};
use ax::store::queries::instances::{self, ResultOutcome, ResultRecord};
use ax::store::queries::tasks;
use ax::store::Db;
use chrono::NaiveDateTime;

use crate::support::{
    apply, base, conn, fields, insert_instance, insert_task, instance, millis, new_instance,
    on_both_backends, request_id, result, runs_of, secs,
};

on_both_backends!(
    apply_result_transitions,
    apply_result_schedules_retries,
    results_applied_at_once,
    expired_running_runs_time_out,
);

fn with_retry(mut fields: TaskFields, max_retry: i32) -> TaskFields {
    fields.max_retry = max_retry;
    fields
}

async fn apply_result_transitions(db: &Db) {
    use InstanceStatus::*;
    let task = insert_task(db, fields("results", "s", TaskStatus::Enabled, None)).await;
    assert_eq!(task.max_retry, 3);
    let at = base();
    let deadline = at + secs(30);

    // READY → RUNNING sets the deadline.
    let r1 = request_id();
    insert_instance(db, &new_instance(task.id, &r1, at, Ready)).await;
    let outcome = apply(db, result(&r1, Running, None, None, at, Some(deadline))).await;
    assert_eq!(outcome, ResultOutcome::Applied(Running));
    let row = instance(db, &r1).await;
    assert_eq!(row.status, "RUNNING");
    assert_eq!(row.deadline_at, Some(deadline));
    assert_eq!(row.finished_at, None);

    // RUNNING applies only to READY: a second RUNNING changes nothing.
    let outcome = apply(
        db,
        result(&r1, Running, None, None, at, Some(deadline + secs(99))),
    )
    .await;
    assert_eq!(outcome, ResultOutcome::Superseded);
    assert_eq!(instance(db, &r1).await.deadline_at, Some(deadline));

    // RUNNING → SUCCESS.
    let done_at = at + secs(3);
    let outcome = apply(
        db,
        result(&r1, Success, Some("OK"), Some("fine"), done_at, None),
    )
    .await;
    assert_eq!(outcome, ResultOutcome::Applied(Success));
    let done = instance(db, &r1).await;
    assert_eq!(done.status, "SUCCESS");
    assert_eq!(done.callback_code.as_deref(), Some("OK"));
    assert_eq!(done.callback_message.as_deref(), Some("fine"));
    assert_eq!(done.finished_at, Some(done_at));
    assert_eq!(done.deadline_at, Some(deadline));
    assert_eq!((done.attempt, done.retry_count), (1, 0));

    // A late FAILED, a repeated SUCCESS and a late RUNNING never overwrite the final state.
    let late = at + secs(9);
    let outcome = apply(
        db,
        result(&r1, Failed, Some("E1"), Some("boom"), late, None),
    )
    .await;
    assert_eq!(outcome, ResultOutcome::AlreadyFinal(Success));
    let outcome = apply(db, result(&r1, Success, Some("OK2"), None, late, None)).await;
    assert_eq!(outcome, ResultOutcome::AlreadyFinal(Success));
    let outcome = apply(
        db,
        result(&r1, Running, None, None, late, Some(late + secs(30))),
    )
    .await;
    assert!(
        matches!(
            outcome,
            ResultOutcome::AlreadyFinal(Success) | ResultOutcome::Superseded
        ),
        "{outcome:?}"
    );
    let after = instance(db, &r1).await;
    assert_eq!(after.status, "SUCCESS");
    assert_eq!(after.callback_code.as_deref(), Some("OK"));
    assert_eq!(after.callback_message.as_deref(), Some("fine"));
    assert_eq!(after.finished_at, Some(done_at));
    assert_eq!(after.deadline_at, Some(deadline));
    assert_eq!((after.attempt, after.retry_count), (1, 0));

    // RUNNING does not apply to PENDING; a final state does.
    let r3 = request_id();
    insert_instance(db, &new_instance(task.id, &r3, at + secs(2), Pending)).await;
    let outcome = apply(db, result(&r3, Running, None, None, at, Some(deadline))).await;
    assert_eq!(outcome, ResultOutcome::Superseded);
    let row = instance(db, &r3).await;
    assert_eq!((row.status.as_str(), row.deadline_at), ("PENDING", None));
    let outcome = apply(db, result(&r3, Success, None, None, done_at, None)).await;
    assert_eq!(outcome, ResultOutcome::Applied(Success));

    // A MISSED run is final.
    let r4 = request_id();
    let mut missed = new_instance(task.id, &r4, at + secs(3), Missed);
    missed.finished_at = Some(at);
    insert_instance(db, &missed).await;
    let outcome = apply(db, result(&r4, Success, None, None, done_at, None)).await;
    assert_eq!(outcome, ResultOutcome::AlreadyFinal(Missed));
    assert_eq!(instance(db, &r4).await.status, "MISSED");

    // Unknown request ids.
    let unknown = request_id();
    let outcome = apply(db, result(&unknown, Success, None, None, at, None)).await;
    assert_eq!(outcome, ResultOutcome::Unknown);
    let outcome = apply(
        db,
        result(&unknown, Running, None, None, at, Some(deadline)),
    )
    .await;
    assert_eq!(outcome, ResultOutcome::Unknown);
    assert!(
        instances::find_by_request_id(&mut conn(db).await, &unknown)
            .await
            .expect("find")
            .is_none(),
        "a result never creates a row"
    );

    // A synchronous failure of a task without retries: READY → FAILED, final.
    let no_retry = insert_task(
        db,
        with_retry(fields("no-retry", "s", TaskStatus::Enabled, None), 0),
    )
    .await;
    let r2 = request_id();
    insert_instance(db, &new_instance(no_retry.id, &r2, at + secs(1), Ready)).await;
    let outcome = apply(db, result(&r2, Failed, Some("E2"), None, done_at, None)).await;
    assert_eq!(outcome, ResultOutcome::Applied(Failed));
    let row = instance(db, &r2).await;
    assert_eq!(row.status, "FAILED");
    assert_eq!(row.callback_code.as_deref(), Some("E2"));
    assert_eq!(row.callback_message, None);
    assert_eq!(row.deadline_at, None);
    assert_eq!(row.finished_at, Some(done_at));
    assert_eq!((row.attempt, row.retry_count), (1, 0));
    let outcome = apply(db, result(&r2, Success, None, None, late, None)).await;
    assert_eq!(outcome, ResultOutcome::AlreadyFinal(Failed));
    assert_eq!(instance(db, &r2).await.status, "FAILED");
}

async fn apply_result_schedules_retries(db: &Db) {
    use InstanceStatus::*;
    let at = base();
    // max_retry 3 with the default back-off (5 s, ×5).
    let task = insert_task(db, fields("retries", "s", TaskStatus::Enabled, None)).await;
    let rid = request_id();
    insert_instance(db, &new_instance(task.id, &rid, at, Ready)).await;
    let outcome = apply(
        db,
        result(&rid, Running, None, None, at, Some(at + secs(30))),
    )
    .await;
    assert_eq!(outcome, ResultOutcome::Applied(Running));
    let failed_at = at + secs(1);
    let outcome = apply(
        db,
        result(&rid, Failed, Some("E1"), Some("boom"), failed_at, None),
    )
    .await;
    assert_eq!(
        outcome,
        ResultOutcome::RetryScheduled {
            at: failed_at + secs(5),
            attempt: 2
        }
    );
    let row = instance(db, &rid).await;
    assert_eq!(row.status, "READY", "waiting for its retry");
    assert_eq!((row.attempt, row.retry_count), (2, 1));
    assert_eq!(row.next_attempt_at, Some(failed_at + secs(5)));
    assert_eq!(row.deadline_at, None);
    assert_eq!(row.finished_at, None);
    assert_eq!(row.callback_code.as_deref(), Some("E1"));
    assert_eq!(row.callback_message.as_deref(), Some("boom"));

    // A late failure or RUNNING of attempt 1 changes nothing (a late SUCCESS would end the
    // run: see schedule::decide_report).
    let mut stale = result(&rid, Failed, Some("E0"), None, failed_at, None);
    stale.attempt = Some(1);
    assert_eq!(apply(db, stale).await, ResultOutcome::Superseded);
    let mut stale_running = result(&rid, Running, None, None, failed_at, Some(at + secs(99)));
    stale_running.attempt = Some(1);
    assert_eq!(apply(db, stale_running).await, ResultOutcome::Superseded);
    let row = instance(db, &rid).await;
    assert_eq!((row.status.as_str(), row.attempt), ("READY", 2));
    assert_eq!(row.deadline_at, None);

    // Attempt 2 runs; the executor fails it and forbids a retry.
    let mut running = result(&rid, Running, None, None, at, Some(at + secs(60)));
    running.attempt = Some(2);
    assert_eq!(apply(db, running).await, ResultOutcome::Applied(Running));
    let row = instance(db, &rid).await;
    assert_eq!(
        (row.status.as_str(), row.next_attempt_at),
        ("RUNNING", None)
    );
    let mut fatal = result(&rid, Failed, Some("E2"), None, at + secs(10), None);
    fatal.retry_allowed = false;
    assert_eq!(apply(db, fatal).await, ResultOutcome::Applied(Failed));
    let row = instance(db, &rid).await;
    assert_eq!(row.status, "FAILED");
    assert_eq!((row.attempt, row.retry_count), (2, 1));
    assert_eq!(row.callback_code.as_deref(), Some("E2"));
    assert_eq!(row.finished_at, Some(at + secs(10)));
    assert_eq!(row.next_attempt_at, None);

    // A task's own back-off, until its retries are used up.
    let mut custom = with_retry(fields("custom", "s", TaskStatus::Enabled, None), 2);
    custom.retry_backoff_secs = Some(2);
    custom.retry_factor = Some(3);
    let custom = insert_task(db, custom).await;
    assert_eq!(
        (custom.retry_backoff_secs, custom.retry_factor),
        (Some(2), Some(3))
    );
    let rid = request_id();
    insert_instance(db, &new_instance(custom.id, &rid, at, Ready)).await;
    let outcome = apply(db, result(&rid, Failed, None, None, at, None)).await;
    assert_eq!(
        outcome,
        ResultOutcome::RetryScheduled {
            at: at + secs(2),
            attempt: 2
        }
    );
    let outcome = apply(db, result(&rid, Failed, None, None, at + secs(2), None)).await;
    assert_eq!(
        outcome,
        ResultOutcome::RetryScheduled {
            at: at + secs(2 + 6),
            attempt: 3
        }
    );
    let outcome = apply(
        db,
        result(&rid, Failed, Some("E3"), None, at + secs(8), None),
    )
    .await;
    assert_eq!(outcome, ResultOutcome::Applied(Failed));
    let row = instance(db, &rid).await;
    assert_eq!(row.status, "FAILED");
    assert_eq!((row.attempt, row.retry_count), (3, 2));
    assert_eq!(row.finished_at, Some(at + secs(8)));

    // Deleting a task ends its open runs; a later result is not applied.
    let gone = insert_task(db, fields("gone", "s", TaskStatus::Enabled, None)).await;
    let (open, running, done) = (request_id(), request_id(), request_id());
    insert_instance(db, &new_instance(gone.id, &open, at, Ready)).await;
    insert_instance(db, &new_instance(gone.id, &running, at + secs(1), Ready)).await;
    insert_instance(db, &new_instance(gone.id, &done, at + secs(2), Ready)).await;
    let outcome = apply(
        db,
        result(&running, Running, None, None, at, Some(at + secs(30))),
    )
    .await;
    assert_eq!(outcome, ResultOutcome::Applied(Running));
    let outcome = apply(db, result(&done, Success, Some("OK"), None, at, None)).await;
    assert_eq!(outcome, ResultOutcome::Applied(Success));
    let deleted_at = at + secs(5);
    assert!(tasks::delete(&mut conn(db).await, gone.id, deleted_at)
        .await
        .expect("delete"));
    for rid in [&open, &running] {
        let row = instance(db, rid).await;
        assert_eq!(row.status, "FAILED");
        assert_eq!(row.callback_code.as_deref(), Some("TASK_DELETED"));
        assert_eq!(row.finished_at, Some(deleted_at));
        assert_eq!(row.next_attempt_at, None);
    }
    let row = instance(db, &done).await;
    assert_eq!(
        (row.status.as_str(), row.callback_code.as_deref()),
        ("SUCCESS", Some("OK")),
        "final runs are kept as they were"
    );
    assert_eq!(runs_of(db, gone.id).await.1, 3, "the history stays");
    let outcome = apply(db, result(&open, Failed, None, None, at, None)).await;
    assert_eq!(outcome, ResultOutcome::AlreadyFinal(Failed));
    // The runs of other tasks are untouched.
    assert_eq!(instance(db, &rid).await.status, "FAILED");
    assert_eq!(
        instance(db, &rid).await.callback_code.as_deref(),
        Some("E3")
    );
}

async fn results_applied_at_once(db: &Db) {
    use InstanceStatus::*;
    let t = base();
    let task = insert_task(db, fields("bulk", "s", TaskStatus::Enabled, None)).await;
    let rids: Vec<String> = (0..4).map(|_| request_id()).collect();
    for (k, rid) in rids.iter().enumerate() {
        insert_instance(db, &new_instance(task.id, rid, t + secs(k as i64), Ready)).await;
    }
    // RUNNING applies to READY runs of the reported attempt only.
    let running: Vec<ResultRecord> = rids
        .iter()
        .enumerate()
        .map(|(k, rid)| {
            let mut r = result(rid, Running, None, None, t, Some(t + secs(100 + k as i64)));
            r.attempt = Some(if k == 3 { 2 } else { 1 });
            r
        })
        .collect();
    let refs: Vec<&ResultRecord> = running
        .iter()
        .take(3)
        .chain(running.iter().skip(3))
        .collect();
    let changed = instances::apply_results_at_once(&mut conn(db).await, Running, &refs)
        .await
        .expect("bulk running");
    assert_eq!(changed, 3, "the stale attempt is left alone");
    for (k, rid) in rids.iter().enumerate().take(3) {
        let row = instance(db, rid).await;
        assert_eq!(row.status, "RUNNING");
        assert_eq!(row.deadline_at, Some(t + secs(100 + k as i64)));
    }
    assert_eq!(instance(db, &rids[3]).await.status, "READY");

    // Run 0 is final already; SUCCESS reaches the open ones, READY or RUNNING, each with its
    // own code, message and time.
    let mut fatal = result(&rids[0], Failed, Some("E"), None, t, None);
    fatal.retry_allowed = false;
    assert_eq!(apply(db, fatal).await, ResultOutcome::Applied(Failed));
    let successes: Vec<ResultRecord> = rids
        .iter()
        .enumerate()
        .map(|(k, rid)| {
            let code = format!("c{k}");
            result(
                rid,
                Success,
                Some(&code),
                Some("ok"),
                t + secs(10 + k as i64),
                None,
            )
        })
        .collect();
    let refs: Vec<&ResultRecord> = successes.iter().collect();
    let changed = instances::apply_results_at_once(&mut conn(db).await, Success, &refs)
        .await
        .expect("bulk success");
    assert_eq!(changed, 3);
    let first = instance(db, &rids[0]).await;
    assert_eq!(
        (first.status.as_str(), first.callback_code.as_deref()),
        ("FAILED", Some("E"))
    );
    for (k, rid) in rids.iter().enumerate().skip(1) {
        let row = instance(db, rid).await;
        assert_eq!(row.status, "SUCCESS");
        assert_eq!(row.callback_code, Some(format!("c{k}")));
        assert_eq!(row.callback_message.as_deref(), Some("ok"));
        assert_eq!(row.finished_at, Some(t + secs(10 + k as i64)));
        assert_eq!(row.next_attempt_at, None);
    }
}

async fn expired_running_runs_time_out(db: &Db) {
    use InstanceStatus::*;
    let task = insert_task(
        db,
        with_retry(fields("expiry", "s", TaskStatus::Enabled, None), 0),
    )
    .await;
    let now = base() + secs(100);
    let mut n = 0;
    let mut running = |deadline: NaiveDateTime| {
        n += 1;
        let rid = request_id();
        let scheduled = base() + secs(n);
        async move {
            insert_instance(db, &new_instance(task.id, &rid, scheduled, Ready)).await;
            let outcome = apply(
                db,
                result(&rid, Running, None, None, base(), Some(deadline)),
            )
            .await;
            assert_eq!(outcome, ResultOutcome::Applied(Running));
            rid
        }
    };
    let just_expired = running(now - millis(1)).await;
    let expired = running(now - secs(10)).await;
    let exactly_now = running(now).await;
    let future = running(now + secs(10)).await;
    let finished = running(now - secs(20)).await;
    let ready = request_id();
    insert_instance(db, &new_instance(task.id, &ready, base() + secs(50), Ready)).await;
    let outcome = apply(
        db,
        result(&finished, Success, Some("OK"), None, base(), None),
    )
    .await;
    assert_eq!(outcome, ResultOutcome::Applied(Success));

    let expired_at = |at: NaiveDateTime, limit: i64| async move {
        instances::expired_running(&mut conn(db).await, at, limit)
            .await
            .expect("expired_running")
    };
    // Only RUNNING runs past their deadline, the most overdue first.
    assert_eq!(
        expired_at(now, 100).await,
        vec![(expired.clone(), 1), (just_expired.clone(), 1)]
    );
    assert_eq!(expired_at(now, 1).await, vec![(expired.clone(), 1)]);
    assert_eq!(
        expired_at(now + secs(11), 100).await,
        vec![
            (expired.clone(), 1),
            (just_expired.clone(), 1),
            (exactly_now.clone(), 1),
            (future.clone(), 1),
        ]
    );

    // Timing out is a FAILED result for the attempt that expired.
    for rid in [&expired, &just_expired] {
        let mut timeout = result(
            rid,
            Failed,
            Some("TIMEOUT"),
            Some("no result before the task's timeoutMs"),
            now,
            None,
        );
        timeout.attempt = Some(1);
        assert_eq!(apply(db, timeout).await, ResultOutcome::Applied(Failed));
        let row = instance(db, rid).await;
        assert_eq!(row.status, "FAILED");
        assert_eq!(row.callback_code.as_deref(), Some("TIMEOUT"));
        assert_eq!(row.finished_at, Some(now));
    }
    assert!(expired_at(now, 100).await.is_empty());
    for rid in [&exactly_now, &future] {
        let row = instance(db, rid).await;
        assert_eq!(row.status, "RUNNING", "deadline not passed yet");
        assert_eq!((row.callback_code, row.finished_at), (None, None));
    }
    let row = instance(db, &finished).await;
    assert_eq!(row.status, "SUCCESS");
    assert_eq!(row.callback_code.as_deref(), Some("OK"));
    assert_eq!(row.finished_at, Some(base()));
    assert_eq!(instance(db, &ready).await.status, "READY");
    // A result arriving after the timeout does not resurrect the run.
    let outcome = apply(db, result(&expired, Success, None, None, now, None)).await;
    assert_eq!(outcome, ResultOutcome::AlreadyFinal(Failed));
}
