//! `crates/ax-store/src/queries/transitions.rs`, results: `decide` of reports and their retries, blind writes
//! many to a statement (`apply`, `apply_all`), a result counted once per attempt, and RUNNING
//! runs past their deadline (`expired_running`).

use ax_core::run::{blind, Decided, Event, Refusal, RequestId, RetryPolicy, RunStatus, Write};
use ax_store::queries::run_writes::Target;
use ax_store::queries::tasks::{Conditional, Versions};
use ax_store::queries::{recovery, run_writes, transitions};
use ax_store::queries::{runs, tasks};
use ax_store::rows::models::TaskStatus;
use ax_store::Db;
use chrono::NaiveDateTime;

use crate::store::support::{
    accepted, applied, at, base, claim, columns_of, conn, decide, failed, failed_for_good, fields,
    fired, fired_claim, insert_run, insert_task, instance, millis, new_instance, on_every_backend,
    refused, report, request_id, runs_of, secs, succeeded, with_retry,
};

on_every_backend!(
    apply_result_transitions,
    apply_result_schedules_retries,
    results_applied_at_once,
    results_count_once_per_attempt,
    expired_running_runs_time_out,
);

async fn apply_result_transitions(db: &Db) {
    use RunStatus::*;
    let task = insert_task(db, fields("results", "s", TaskStatus::Enabled, None)).await;
    assert_eq!(task.max_retry, 3);
    let t = base();
    let deadline = t + secs(30);

    // READY → RUNNING sets the deadline; the dispatcher's claim is done with.
    let r1 = request_id();
    insert_run(db, &fired(task.id, &r1, t)).await;
    let run = applied(decide(db, &r1, &report(Some(1), accepted(deadline), t)).await);
    assert_eq!((run.status, run.attempt, run.dispatched), (Running, 1, 1));
    let row = instance(db, &r1).await;
    assert_eq!(row.status, Running);
    assert_eq!(row.deadline_at, Some(deadline));
    assert_eq!(row.claimed_until, None);
    assert_eq!(row.finished_at, None);

    // RUNNING applies only to READY: a second RUNNING changes nothing.
    let again = report(None, accepted(deadline + secs(99)), t);
    assert_eq!(refused(decide(db, &r1, &again).await), Refusal::Superseded);
    assert_eq!(instance(db, &r1).await.deadline_at, Some(deadline));

    // RUNNING → SUCCESS: final, nothing left to wait for.
    let done_at = t + secs(3);
    let ok = report(None, succeeded(Some("OK"), Some("fine")), done_at);
    assert_eq!(applied(decide(db, &r1, &ok).await).status, Success);
    let done = instance(db, &r1).await;
    assert_eq!(done.status, Success);
    assert_eq!(done.callback_code.as_deref(), Some("OK"));
    assert_eq!(done.callback_message.as_deref(), Some("fine"));
    assert_eq!(done.finished_at, Some(done_at));
    assert_eq!(done.deadline_at, None, "a final run has no deadline");
    assert_eq!((done.attempt, done.retry_count), (1, 0));
    let kept = columns_of(db, &r1).await;

    // A late FAILED, a repeated SUCCESS and a late RUNNING never overwrite the final state.
    let late = t + secs(9);
    for event in [
        report(Some(1), failed(Some("E1"), Some("boom")), late),
        report(None, succeeded(Some("OK2"), None), late),
        report(Some(1), accepted(late + secs(30)), late),
    ] {
        let outcome = decide(db, &r1, &event).await;
        assert_eq!(refused(outcome), Refusal::Final(Success), "{event:?}");
    }
    assert_eq!(columns_of(db, &r1).await, kept);

    // A PENDING run was never dispatched: no result applies to it, not even a final one.
    let r3 = request_id();
    insert_run(db, &new_instance(task.id, &r3, t + secs(2), Pending)).await;
    let never = Refusal::NotDispatched {
        attempt: 0,
        dispatched: 0,
    };
    let running = report(None, accepted(deadline), t);
    assert_eq!(refused(decide(db, &r3, &running).await), never);
    let success = report(None, succeeded(None, None), done_at);
    assert_eq!(refused(decide(db, &r3, &success).await), never);
    let row = instance(db, &r3).await;
    assert_eq!((row.status, row.deadline_at), (Pending, None));
    assert_eq!((row.finished_at, row.callback_code), (None, None));

    // A MISSED run is final.
    let r4 = request_id();
    let mut missed = new_instance(task.id, &r4, t + secs(3), Missed);
    missed.finished_at = Some(t);
    insert_run(db, &missed).await;
    let outcome = decide(db, &r4, &report(None, succeeded(None, None), done_at)).await;
    assert_eq!(refused(outcome), Refusal::Final(Missed));
    assert_eq!(instance(db, &r4).await.status, Missed);

    // Unknown request ids.
    let unknown = request_id();
    let outcome = decide(db, &unknown, &report(None, succeeded(None, None), t)).await;
    assert_eq!(outcome, Decided::Unknown);
    let outcome = decide(db, &unknown, &report(Some(1), accepted(deadline), t)).await;
    assert_eq!(outcome, Decided::Unknown);
    assert!(
        runs::find_by_request_id(&mut conn(db).await, &unknown)
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
    insert_run(db, &fired(no_retry.id, &r2, t + secs(1))).await;
    let outcome = decide(db, &r2, &report(None, failed(Some("E2"), None), done_at)).await;
    assert_eq!(applied(outcome).status, Failed);
    let row = instance(db, &r2).await;
    assert_eq!(row.status, Failed);
    assert_eq!(row.callback_code.as_deref(), Some("E2"));
    assert_eq!(row.callback_message, None);
    assert_eq!(row.deadline_at, None);
    assert_eq!(row.claimed_until, None);
    assert_eq!(row.finished_at, Some(done_at));
    assert_eq!((row.attempt, row.retry_count), (1, 0));
    let outcome = decide(db, &r2, &report(None, succeeded(None, None), late)).await;
    assert_eq!(refused(outcome), Refusal::Final(Failed));
    assert_eq!(instance(db, &r2).await.status, Failed);
}

async fn apply_result_schedules_retries(db: &Db) {
    use RunStatus::*;
    let t = base();
    // max_retry 3 with the default back-off (5 s, ×5).
    let task = insert_task(db, fields("retries", "s", TaskStatus::Enabled, None)).await;
    let rid = request_id();
    insert_run(db, &fired(task.id, &rid, t)).await;
    let run = applied(decide(db, &rid, &report(Some(1), accepted(t + secs(30)), t)).await);
    assert_eq!(run.status, Running);
    let failed_at = t + secs(1);
    let boom = report(None, failed(Some("E1"), Some("boom")), failed_at);
    let run = applied(decide(db, &rid, &boom).await);
    assert_eq!(
        (run.status, run.attempt, run.dispatched, run.retries_used),
        (Ready, 2, 1, 1),
        "attempt 2 waits for its time"
    );
    assert_eq!(run.next_attempt_at, Some(at(failed_at + secs(5))));
    assert_eq!(run.claimed_until, None);
    let row = instance(db, &rid).await;
    assert_eq!(row.status, Ready, "waiting for its retry");
    assert_eq!((row.attempt, row.retry_count), (2, 1));
    assert_eq!(row.dispatched_attempt, 1);
    assert_eq!(row.next_attempt_at, Some(failed_at + secs(5)));
    assert_eq!(row.claimed_until, None);
    assert_eq!(row.deadline_at, None);
    assert_eq!(row.finished_at, None);
    assert_eq!(row.callback_code.as_deref(), Some("E1"));
    assert_eq!(row.callback_message.as_deref(), Some("boom"));

    // A late failure or RUNNING of attempt 1 changes nothing (a late SUCCESS would end the
    // run: see `decide_many_orders_events_of_one_run`).
    let stale = report(Some(1), failed(Some("E0"), None), failed_at);
    assert_eq!(refused(decide(db, &rid, &stale).await), Refusal::Superseded);
    let stale_running = report(Some(1), accepted(t + secs(99)), failed_at);
    assert_eq!(
        refused(decide(db, &rid, &stale_running).await),
        Refusal::Superseded
    );
    // Nor does a result for attempt 2 before it is dispatched.
    let early = report(Some(2), accepted(t + secs(60)), failed_at);
    assert_eq!(
        refused(decide(db, &rid, &early).await),
        Refusal::NotDispatched {
            attempt: 2,
            dispatched: 1
        }
    );
    let row = instance(db, &rid).await;
    assert_eq!((row.status, row.attempt), (Ready, 2));
    assert_eq!(row.deadline_at, None);
    assert_eq!(row.next_attempt_at, Some(failed_at + secs(5)));

    // Attempt 2 is claimed at its time and runs; the executor fails it and forbids a retry.
    assert!(claim(db, &rid, "node-b", failed_at + secs(5)).await);
    let running = report(Some(2), accepted(t + secs(60)), failed_at + secs(5));
    assert_eq!(applied(decide(db, &rid, &running).await).status, Running);
    let row = instance(db, &rid).await;
    assert_eq!(
        (row.status, row.dispatched_attempt, row.next_attempt_at),
        (Running, 2, None)
    );
    assert_eq!(row.fired_by, "node-b");
    let fatal = report(None, failed_for_good(Some("E2")), t + secs(10));
    assert_eq!(applied(decide(db, &rid, &fatal).await).status, Failed);
    let row = instance(db, &rid).await;
    assert_eq!(row.status, Failed);
    assert_eq!((row.attempt, row.retry_count), (2, 1));
    assert_eq!(row.callback_code.as_deref(), Some("E2"));
    assert_eq!(row.finished_at, Some(t + secs(10)));
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
    insert_run(db, &fired(custom.id, &rid, t)).await;
    let run = applied(decide(db, &rid, &report(None, failed(None, None), t)).await);
    assert_eq!(
        (run.status, run.attempt, run.next_attempt_at),
        (Ready, 2, Some(at(t + secs(2))))
    );
    assert!(claim(db, &rid, "node-test", t + secs(2)).await);
    let second = report(None, failed(None, None), t + secs(2));
    let run = applied(decide(db, &rid, &second).await);
    assert_eq!(
        (run.status, run.attempt, run.next_attempt_at),
        (Ready, 3, Some(at(t + secs(2 + 6))))
    );
    assert!(claim(db, &rid, "node-test", t + secs(8)).await);
    let third = report(None, failed(Some("E3"), None), t + secs(8));
    assert_eq!(applied(decide(db, &rid, &third).await).status, Failed);
    let row = instance(db, &rid).await;
    assert_eq!(row.status, Failed);
    assert_eq!((row.attempt, row.retry_count), (3, 2));
    assert_eq!(row.finished_at, Some(t + secs(8)));

    // Deleting a task ends its open runs (`cancel_open`); a later result is not applied.
    let gone = insert_task(db, fields("gone", "s", TaskStatus::Enabled, None)).await;
    let (open, running, done, waiting) = (request_id(), request_id(), request_id(), request_id());
    insert_run(db, &fired(gone.id, &open, t)).await;
    insert_run(db, &fired(gone.id, &running, t + secs(1))).await;
    insert_run(db, &fired(gone.id, &done, t + secs(2))).await;
    insert_run(db, &fired(gone.id, &waiting, t + secs(3))).await;
    let outcome = decide(db, &running, &report(Some(1), accepted(t + secs(30)), t)).await;
    assert_eq!(applied(outcome).status, Running);
    let outcome = decide(db, &done, &report(Some(1), succeeded(Some("OK"), None), t)).await;
    assert_eq!(applied(outcome).status, Success);
    let outcome = decide(db, &waiting, &report(Some(1), failed(None, None), t)).await;
    assert_eq!(applied(outcome).status, Ready);
    let deleted_at = t + secs(5);
    let deleted = tasks::delete(&mut conn(db).await, gone.id, Versions::Any, at(deleted_at))
        .await
        .expect("delete");
    assert!(matches!(deleted, Conditional::Done(())));
    for rid in [&open, &running, &waiting] {
        let row = instance(db, rid).await;
        assert_eq!(row.status, Failed);
        assert_eq!(row.callback_code.as_deref(), Some("TASK_DELETED"));
        assert!(row.callback_message.is_some());
        assert_eq!(row.finished_at, Some(deleted_at));
        assert_eq!(
            (row.next_attempt_at, row.claimed_until, row.deadline_at),
            (None, None, None),
            "nothing left to wait for"
        );
    }
    let row = instance(db, &done).await;
    assert_eq!(
        (row.status, row.callback_code.as_deref()),
        (Success, Some("OK")),
        "final runs are kept as they were"
    );
    assert_eq!(runs_of(db, gone.id).await.1, 4, "the history stays");
    let outcome = decide(db, &open, &report(None, failed(None, None), t)).await;
    assert_eq!(refused(outcome), Refusal::Final(Failed));
    // The runs of other tasks are untouched.
    assert_eq!(instance(db, &rid).await.status, Failed);
    assert_eq!(
        instance(db, &rid).await.callback_code.as_deref(),
        Some("E3")
    );
}

/// Dispatcher replies written blind (`ax_core::run::blind`), many to a statement.
async fn results_applied_at_once(db: &Db) {
    use RunStatus::*;
    let t = base();
    let task = insert_task(db, fields("bulk", "s", TaskStatus::Enabled, None)).await;
    let rids: Vec<RequestId> = (0..6).map(|_| request_id()).collect();
    for (k, rid) in rids.iter().enumerate() {
        insert_run(db, &fired(task.id, rid, t + secs(k as i64))).await;
    }
    let blind_write = |event: &Event| blind(event).expect("a blind write");
    // RUNNING applies to READY runs of the reported attempt only: one statement.
    let running: Vec<Write> = (0..4)
        .map(|k| {
            let attempt = if k == 3 { 2 } else { 1 };
            blind_write(&report(
                Some(attempt),
                accepted(t + secs(100 + k as i64)),
                t,
            ))
        })
        .collect();
    let batch: Vec<(Target, &Write)> = rids.iter().map(Target::from).zip(&running).collect();
    let changed = run_writes::apply(&mut conn(db).await, &batch, None)
        .await
        .expect("bulk running");
    assert_eq!(changed, 3, "the attempt never dispatched is left alone");
    for (k, rid) in rids.iter().enumerate().take(3) {
        let row = instance(db, rid).await;
        assert_eq!(row.status, Running);
        assert_eq!(row.deadline_at, Some(t + secs(100 + k as i64)));
        assert_eq!(row.claimed_until, None);
    }
    let row = instance(db, &rids[3]).await;
    assert_eq!(row.status, Ready);
    assert_eq!(row.claimed_until, Some(fired_claim(t + secs(3))));

    // Run 0 is final already; SUCCESS reaches the open ones, READY or RUNNING, each with its
    // own code, message and time — in the same call as a RUNNING of run 4 (two shapes), and
    // a SUCCESS of run 5's attempt 2, which was never dispatched.
    let fatal = report(Some(1), failed_for_good(Some("E")), t);
    assert_eq!(applied(decide(db, &rids[0], &fatal).await).status, Failed);
    let mut writes: Vec<(RequestId, Write)> = rids
        .iter()
        .take(4)
        .enumerate()
        .map(|(k, rid)| {
            let code = format!("c{k}");
            let ok = succeeded(Some(&code), Some("ok"));
            (
                rid.clone(),
                blind_write(&report(Some(1), ok, t + secs(10 + k as i64))),
            )
        })
        .collect();
    writes.insert(
        2,
        (
            rids[4].clone(),
            blind_write(&report(Some(1), accepted(t + secs(104)), t)),
        ),
    );
    writes.push((
        rids[5].clone(),
        blind_write(&report(Some(2), succeeded(None, None), t)),
    ));
    let batch: Vec<(Target, &Write)> = writes.iter().map(|(id, w)| (id.into(), w)).collect();
    let changed = run_writes::apply_all(&mut conn(db).await, &batch, None)
        .await
        .expect("bulk success");
    assert_eq!(changed, 4);
    let first = instance(db, &rids[0]).await;
    assert_eq!(
        (first.status, first.callback_code.as_deref()),
        (Failed, Some("E"))
    );
    for (k, rid) in rids.iter().enumerate().take(4).skip(1) {
        let row = instance(db, rid).await;
        assert_eq!(row.status, Success);
        assert_eq!(row.callback_code, Some(format!("c{k}")));
        assert_eq!(row.callback_message.as_deref(), Some("ok"));
        assert_eq!(row.finished_at, Some(t + secs(10 + k as i64)));
        assert_eq!(
            (row.next_attempt_at, row.claimed_until, row.deadline_at),
            (None, None, None)
        );
    }
    let row = instance(db, &rids[4]).await;
    assert_eq!(
        (row.status, row.deadline_at, row.claimed_until),
        (Running, Some(t + secs(104)), None)
    );
    let row = instance(db, &rids[5]).await;
    assert_eq!(
        (row.status, row.claimed_until, row.finished_at),
        (Ready, Some(fired_claim(t + secs(5))), None),
        "a SUCCESS of an attempt never dispatched is refused"
    );
}

/// A run dispatched once gets three FAILED reports for its attempt (the dispatcher's reply
/// and callbacks with and without the attempt): one retry is scheduled, not three.
async fn results_count_once_per_attempt(db: &Db) {
    use RunStatus::*;
    let t = base();
    let task = insert_task(db, fields("once", "s", TaskStatus::Enabled, None)).await;
    assert_eq!(task.max_retry, 3);
    let boom = |attempt: Option<i32>, after: i64| {
        report(attempt, failed(Some("E"), None), t + secs(after))
    };
    // The attempt named first, or the reports without one first; or all in one batch.
    let orders = [
        vec![boom(Some(1), 1), boom(None, 2), boom(None, 3)],
        vec![boom(None, 1), boom(Some(1), 2), boom(None, 3)],
    ];
    let mut rids = Vec::new();
    for (n, reports) in orders.iter().enumerate() {
        let rid = request_id();
        insert_run(db, &fired(task.id, &rid, t)).await;
        let outcomes = [
            decide(db, &rid, &reports[0]).await,
            decide(db, &rid, &reports[1]).await,
            decide(db, &rid, &reports[2]).await,
        ];
        let [first, second, third] = outcomes;
        let run = applied(first);
        assert_eq!(
            (run.status, run.attempt, run.retries_used),
            (Ready, 2, 1),
            "order {n}"
        );
        assert_eq!(refused(second), Refusal::Superseded, "order {n}");
        assert_eq!(refused(third), Refusal::Superseded, "order {n}");
        rids.push(rid);
    }
    let batched = request_id();
    insert_run(db, &fired(task.id, &batched, t)).await;
    let events: Vec<(RequestId, Event)> = orders[0]
        .iter()
        .map(|event| (batched.clone(), event.clone()))
        .collect();
    let outcomes =
        transitions::decide_many(&mut conn(db).await, &events, RetryPolicy::default(), None)
            .await
            .expect("decide_many");
    let mut outcomes = outcomes.into_iter();
    let run = applied(outcomes.next().expect("three outcomes"));
    assert_eq!((run.status, run.attempt, run.retries_used), (Ready, 2, 1));
    for outcome in outcomes {
        assert_eq!(refused(outcome), Refusal::Superseded);
    }
    rids.push(batched);

    for rid in &rids {
        let row = instance(db, rid).await;
        assert_eq!(row.status, Ready);
        assert_eq!((row.attempt, row.dispatched_attempt), (2, 1));
        assert_eq!(row.retry_count, 1);
        assert_eq!(
            row.next_attempt_at,
            Some(t + secs(1 + 5)),
            "the first report's retry"
        );
        assert_eq!(row.claimed_until, None);
        // A report for an attempt never dispatched is refused and changes nothing.
        let kept = columns_of(db, rid).await;
        let outcome = decide(db, rid, &report(Some(99), failed(None, None), t)).await;
        assert_eq!(
            refused(outcome),
            Refusal::NotDispatched {
                attempt: 99,
                dispatched: 1
            }
        );
        let outcome = decide(db, rid, &report(Some(99), succeeded(None, None), t)).await;
        assert_eq!(
            refused(outcome),
            Refusal::NotDispatched {
                attempt: 99,
                dispatched: 1
            },
            "not even a SUCCESS"
        );
        assert_eq!(columns_of(db, rid).await, kept);
    }
}

async fn expired_running_runs_time_out(db: &Db) {
    use RunStatus::*;
    let t = base();
    let task = insert_task(
        db,
        with_retry(fields("expiry", "s", TaskStatus::Enabled, None), 0),
    )
    .await;
    let now = t + secs(100);
    let mut n = 0;
    let mut running = |deadline: NaiveDateTime| {
        n += 1;
        let rid = request_id();
        let scheduled = t + secs(n);
        async move {
            insert_run(db, &fired(task.id, &rid, scheduled)).await;
            let outcome = decide(db, &rid, &report(Some(1), accepted(deadline), t)).await;
            assert_eq!(applied(outcome).status, Running);
            rid
        }
    };
    let just_expired = running(now - millis(1)).await;
    let expired = running(now - secs(10)).await;
    let exactly_now = running(now).await;
    let future = running(now + secs(10)).await;
    let finished = running(now - secs(20)).await;
    let ready = request_id();
    insert_run(db, &fired(task.id, &ready, t + secs(50))).await;
    let outcome = decide(db, &finished, &report(None, succeeded(Some("OK"), None), t)).await;
    assert_eq!(applied(outcome).status, Success);

    let expired_at = |when: NaiveDateTime, limit: i64| async move {
        recovery::expired_running(&mut conn(db).await, at(when), limit)
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

    // Timing out is a failure of the attempt that expired.
    for (rid, attempt) in expired_at(now, 100).await {
        let timeout = Event::TimedOut {
            attempt,
            at: at(now),
        };
        assert_eq!(applied(decide(db, &rid, &timeout).await).status, Failed);
        let row = instance(db, &rid).await;
        assert_eq!(row.status, Failed);
        assert_eq!(row.callback_code.as_deref(), Some("TIMEOUT"));
        assert!(row.callback_message.is_some());
        assert_eq!(row.finished_at, Some(now));
        assert_eq!(row.deadline_at, None);
    }
    assert!(expired_at(now, 100).await.is_empty());
    // A time-out of a run that is not RUNNING changes nothing.
    let timeout = Event::TimedOut {
        attempt: 1,
        at: at(now),
    };
    assert_eq!(
        refused(decide(db, &ready, &timeout).await),
        Refusal::Superseded
    );
    assert_eq!(
        refused(decide(db, &expired, &timeout).await),
        Refusal::Final(Failed)
    );
    for rid in [&exactly_now, &future] {
        let row = instance(db, rid).await;
        assert_eq!(row.status, Running, "deadline not passed yet");
        assert_eq!((row.callback_code, row.finished_at), (None, None));
    }
    let row = instance(db, &finished).await;
    assert_eq!(row.status, Success);
    assert_eq!(row.callback_code.as_deref(), Some("OK"));
    assert_eq!(row.finished_at, Some(t));
    let row = instance(db, &ready).await;
    assert_eq!((row.status, row.callback_code), (Ready, None));
    // A result arriving after the timeout does not resurrect the run.
    let outcome = decide(db, &expired, &report(None, succeeded(None, None), now)).await;
    assert_eq!(refused(outcome), Refusal::Final(Failed));
}
