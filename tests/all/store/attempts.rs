//! `crates/ax-store/src/queries/transitions.rs`, attempts: the due attempts (`due_attempts`, `attempts_of`),
//! dispatch claims (`claim`), recovery of claims (`recover_own`, `fence_stale`), and the
//! params of manual runs.

use ax_core::run::{claim_until, Event, NewRun, RequestId, RunStatus, TaskId, TriggerType};
use ax_store::queries::{due, processes, recovery};
use ax_store::rows::models::{NewRunRow, TaskStatus};
use ax_store::Db;
use chrono::NaiveDateTime;

use crate::store::support::{
    accepted, applied, at, base, born, claim_event, conn, decide, due_attempt, failed, fields,
    fired, fired_claim, insert_run, insert_task, instance, millis, new_instance, on_every_backend,
    origin, report, request_id, secs,
};

on_every_backend!(
    due_attempts_and_claims,
    due_attempts_use_manual_params,
    recovery_makes_own_claims_due_at_once,
    an_ended_attempt_names_the_member_it_was_sent_to,
);

/// An attempt ended by a callback or a timeout carries no member: its row takes the run's.
async fn an_ended_attempt_names_the_member_it_was_sent_to(db: &Db) {
    use ax_core::run::EndedAttempt;
    use ax_store::queries::attempts;
    let task = insert_task(db, fields("member", "s", TaskStatus::Enabled, None)).await;
    let rid = request_id();
    let mut row = new_instance(task.id, &rid, base(), RunStatus::Ready);
    row.member = Some("http://127.0.0.1:7/".into());
    insert_run(db, &row).await;
    let ended = |attempt: i32, member: Option<&str>| EndedAttempt {
        attempt,
        at: at(base() + secs(attempt.into())),
        code: Some("TIMEOUT".into()),
        message: None,
        process: "node-test".into(),
        member: member.map(str::to_string),
    };
    let mut c = conn(db).await;
    let written = vec![
        (rid.clone(), ended(1, None)),
        (rid.clone(), ended(2, Some("http://127.0.0.1:8/"))),
    ];
    attempts::record(&mut c, &written).await.expect("record");
    let rows = attempts::of_run(&mut c, &rid).await.expect("read");
    let members: Vec<Option<&str>> = rows.iter().map(|r| r.member.as_deref()).collect();
    assert_eq!(
        members,
        vec![Some("http://127.0.0.1:7/"), Some("http://127.0.0.1:8/")]
    );
}

async fn due(db: &Db, until: NaiveDateTime, limit: i64) -> Vec<RequestId> {
    due::due_attempts(&mut conn(db).await, at(until), limit)
        .await
        .expect("due_attempts")
        .into_iter()
        .map(|d| d.request_id)
        .collect()
}

/// A READY run waiting for its attempt, due at `due`, never dispatched (a released run).
fn waiting(
    task_id: TaskId,
    rid: &RequestId,
    scheduled: NaiveDateTime,
    due: NaiveDateTime,
) -> NewRunRow {
    born(task_id, rid, scheduled, &NewRun::due(at(due)))
}

/// A fired run whose first attempt "node-test" holds until `until`.
fn held(
    task_id: TaskId,
    rid: &RequestId,
    scheduled: NaiveDateTime,
    until: NaiveDateTime,
) -> NewRunRow {
    born(task_id, rid, scheduled, &NewRun::fired(at(until)))
}

async fn due_attempts_and_claims(db: &Db) {
    use RunStatus::*;
    let t = base();
    let task = insert_task(db, fields("claims", "s", TaskStatus::Enabled, None)).await;
    let (later, sooner, lapsed, not_yet, running, pending) = (
        request_id(),
        request_id(),
        request_id(),
        request_id(),
        request_id(),
        request_id(),
    );
    insert_run(db, &waiting(task.id, &later, t, t + secs(2))).await;
    insert_run(db, &waiting(task.id, &sooner, t + secs(1), t + secs(1))).await;
    // A dispatcher's claim that lapsed: the attempt is due again.
    insert_run(db, &held(task.id, &lapsed, t, t + millis(1500))).await;
    // A claim that holds.
    insert_run(db, &held(task.id, &not_yet, t + secs(3), t + secs(60))).await;
    // Neither a RUNNING nor a PENDING run is an attempt to dispatch.
    insert_run(db, &fired(task.id, &running, t - secs(60))).await;
    let outcome = decide(db, &running, &report(Some(1), accepted(t - secs(1)), t)).await;
    assert_eq!(applied(outcome).status, Running);
    insert_run(db, &new_instance(task.id, &pending, t, Pending)).await;

    let found = due::due_attempts(&mut conn(db).await, at(t + secs(2)), 100)
        .await
        .expect("due_attempts");
    let rids: Vec<&RequestId> = found.iter().map(|d| &d.request_id).collect();
    assert_eq!(rids, vec![&sooner, &lapsed, &later], "soonest first");
    let first = &found[0];
    assert_eq!(first.task_id, task.id);
    assert_eq!(first.run.scheduled_at, at(t + secs(1)));
    assert_eq!((first.run.status, first.run.attempt), (Ready, 1));
    assert_eq!(first.run.dispatched, 0);
    assert_eq!(first.due_at(), at(t + secs(1)));
    assert_eq!(first.handler_url, task.handler_url);
    assert_eq!(first.params, task.params);
    assert_eq!(first.timeout_ms, task.timeout_ms);
    let second = &found[1];
    assert_eq!((second.run.attempt, second.run.dispatched), (1, 1));
    assert_eq!(second.run.claimant, "node-test");
    assert_eq!(
        second.due_at(),
        at(t + millis(1500)),
        "when the claim lapsed"
    );
    // `limit` is per kind: the earliest waiting attempt and the earliest lapsed claim.
    assert_eq!(
        due(db, t + secs(2), 1).await,
        vec![sooner.clone(), lapsed.clone()]
    );
    assert!(due(db, t, 100).await.is_empty());

    // Of two claimants of one attempt, one wins.
    let attempt = due_attempt(db, &sooner).await;
    let mut c = conn(db).await;
    let by_b = claim_event(&attempt, "node-b", t + secs(1));
    assert!(due::claim(&mut c, &attempt, &by_b).await.expect("claim"));
    let by_c = claim_event(&attempt, "node-c", t + secs(1));
    assert!(!due::claim(&mut c, &attempt, &by_c).await.expect("claim"));
    // Nor a claim of an attempt that is not the current one.
    let wrong_attempt = Event::Claim {
        attempt: 2,
        claimant: "node-c".into(),
        until: claim_until(at(t + secs(1)), task.timeout_ms),
        at: at(t + secs(1)),
    };
    let fresh = due_attempt(db, &sooner).await;
    assert!(!due::claim(&mut c, &fresh, &wrong_attempt)
        .await
        .expect("claim"));
    // Nor is an attempt claimed before it is due.
    let early = due_attempt(db, &later).await;
    let too_soon = claim_event(&early, "node-c", t + secs(1));
    assert!(!due::claim(&mut c, &early, &too_soon).await.expect("claim"));
    drop(c);
    let row = instance(db, &sooner).await;
    assert_eq!(row.fired_by, "node-b");
    assert_eq!(row.status, Ready);
    assert_eq!(row.dispatched_attempt, 1);
    assert_eq!(row.next_attempt_at, None);
    assert_eq!(row.claimed_until, Some(t + secs(1 + 30 + 10)));
    assert_eq!(
        instance(db, &later).await.next_attempt_at,
        Some(t + secs(2))
    );

    // A lapsed claim is taken over once: the second claimant read the claim that lapsed.
    let lapsed_attempt = due_attempt(db, &lapsed).await;
    let mut c = conn(db).await;
    let by_c = claim_event(&lapsed_attempt, "node-c", t + secs(2));
    assert!(due::claim(&mut c, &lapsed_attempt, &by_c)
        .await
        .expect("claim"));
    let by_d = claim_event(&lapsed_attempt, "node-d", t + secs(2));
    assert!(!due::claim(&mut c, &lapsed_attempt, &by_d)
        .await
        .expect("claim"));
    drop(c);
    let row = instance(db, &lapsed).await;
    assert_eq!(
        (
            row.fired_by.as_str(),
            row.dispatched_attempt,
            row.claimed_until
        ),
        ("node-c", 1, Some(t + secs(2 + 30 + 10)))
    );
    assert_eq!(
        due(db, t + secs(2), 100).await,
        vec![later.clone()],
        "a claimed attempt is not due"
    );

    // After a restart, node-b makes its own claims due at once; others' stay.
    let now = t + secs(10);
    let recovered = recovery::recover_own(&mut conn(db).await, &"node-b".into(), at(now))
        .await
        .expect("recover_own");
    assert_eq!(recovered, 1);
    let row = instance(db, &sooner).await;
    assert_eq!(
        (
            row.claimed_until,
            row.next_attempt_at,
            row.fired_by.as_str()
        ),
        (Some(now), None, "node-b")
    );
    assert_eq!(
        recovery::recover_own(&mut conn(db).await, &"node-z".into(), at(now))
            .await
            .expect("recover_own"),
        0
    );
    assert_eq!(
        instance(db, &not_yet).await.claimed_until,
        Some(t + secs(60))
    );
    assert_eq!(
        instance(db, &lapsed).await.claimed_until,
        Some(t + secs(42))
    );

    // A process whose promise went stale is fenced: its claims on runs fired for a second
    // after its promise lapse (they were never sent); one it may have sent keeps its claim.
    let sent = request_id();
    insert_run(db, &held(task.id, &sent, t + secs(2), t + secs(60))).await;
    let mut c = conn(db).await;
    processes::begin_epoch(&mut c, &"node-c".into(), now.and_utc().timestamp(), at(now))
        .await
        .expect("begin_epoch");
    let through = (t + secs(2)).and_utc().timestamp();
    let epoch = processes::begin_epoch(&mut c, &"node-test".into(), through, at(now - secs(5)))
        .await
        .expect("begin_epoch");
    let fenced = recovery::fence_stale(&mut c, &"node-b".into(), at(now - secs(4)))
        .await
        .expect("fence_stale");
    assert_eq!(fenced, 0, "a promise 1 s old stands");
    // A promise made between another's look and its fence makes the fence miss.
    let seen = processes::stale(&mut c, &"node-b".into(), at(now))
        .await
        .expect("stale");
    assert_eq!(
        seen.iter()
            .map(|p| p.instance_id.as_str())
            .collect::<Vec<_>>(),
        ["node-test"]
    );
    assert!(processes::promise(
        &mut c,
        &"node-test".into(),
        epoch,
        through,
        at(now - secs(5)) + chrono::TimeDelta::milliseconds(1)
    )
    .await
    .expect("promise"));
    assert!(!processes::fence(&mut c, &seen[0], at(now))
        .await
        .expect("fence"));
    let taken = recovery::fence_stale(&mut c, &"node-b".into(), at(now))
        .await
        .expect("fence_stale");
    assert_eq!(taken, 1, "only the run fired for after the promise");
    assert_eq!(instance(db, &not_yet).await.claimed_until, Some(now));
    assert_eq!(
        instance(db, &sent).await.claimed_until,
        Some(t + secs(60)),
        "a run it may have sent waits for its claim to expire"
    );
    assert_eq!(
        instance(db, &lapsed).await.claimed_until,
        Some(t + secs(42)),
        "node-c's promise stands"
    );
    assert_eq!(
        recovery::fence_stale(&mut c, &"node-b".into(), at(now))
            .await
            .expect("fence_stale"),
        0,
        "fenced once"
    );
    // The fenced process's next promise fails; it takes a new epoch and promises under it.
    assert!(
        !processes::promise(&mut c, &"node-test".into(), epoch, through + 1, at(now))
            .await
            .expect("promise")
    );
    let epoch = processes::begin_epoch(&mut c, &"node-test".into(), through + 1, at(now))
        .await
        .expect("begin_epoch");
    assert!(
        processes::promise(&mut c, &"node-test".into(), epoch, through + 2, at(now))
            .await
            .expect("promise")
    );
    drop(c);
    // Due now: the waiting attempt first, then the two claims that lapsed now.
    let mut due_now = due(db, now, 100).await;
    assert_eq!(due_now.first(), Some(&later));
    due_now.sort();
    let mut expected = vec![later.clone(), sooner.clone(), not_yet.clone()];
    expected.sort();
    assert_eq!(due_now, expected);

    // A run committed ahead of its time is reclaimed for its time, never earlier.
    let ahead = request_id();
    let mut row = held(task.id, &ahead, now + millis(400), now + secs(40));
    row.fired_by = "node-gone".into();
    insert_run(db, &row).await;
    let mut c = conn(db).await;
    processes::begin_epoch(
        &mut c,
        &"node-gone".into(),
        now.and_utc().timestamp() - 1,
        at(now - secs(10)),
    )
    .await
    .expect("begin_epoch");
    let taken = recovery::fence_stale(&mut c, &"node-b".into(), at(now))
        .await
        .expect("fence_stale");
    drop(c);
    assert_eq!(taken, 1);
    assert_eq!(
        instance(db, &ahead).await.claimed_until,
        Some(now + millis(400))
    );
    let own = request_id();
    let mut row = held(task.id, &own, now + millis(300), now + secs(40));
    row.fired_by = "node-b".into();
    insert_run(db, &row).await;
    let recovered = recovery::recover_own(&mut conn(db).await, &"node-b".into(), at(now))
        .await
        .expect("recover_own");
    assert_eq!(recovered, 1);
    assert_eq!(
        instance(db, &own).await.claimed_until,
        Some(now + millis(300))
    );
    let due_now = due(db, now, 100).await;
    assert!(
        !due_now.contains(&ahead) && !due_now.contains(&own),
        "not before their time: {due_now:?}"
    );
    let due_then = due(db, now + millis(400), 100).await;
    assert!(due_then.contains(&ahead) && due_then.contains(&own));
}

async fn due_attempts_use_manual_params(db: &Db) {
    let t = base();
    let task = insert_task(db, fields("manual", "s", TaskStatus::Enabled, None)).await;
    let (manual, scheduled) = (request_id(), request_id());
    let mut manual_origin = origin(task.id, &manual, t);
    manual_origin.trigger_type = TriggerType::Manual;
    manual_origin.params = Some(r#"{"o":1}"#.into());
    let row = NewRunRow::new(manual_origin, &NewRun::due(at(t)));
    insert_run(db, &row).await;
    // A scheduled run whose dispatcher's claim lapsed.
    insert_run(db, &held(task.id, &scheduled, t, t + secs(1))).await;

    let due = due::due_attempts(&mut conn(db).await, at(t + secs(1)), 100)
        .await
        .expect("due_attempts");
    let got: Vec<(&RequestId, &str)> = due
        .iter()
        .map(|d| (&d.request_id, d.params.as_str()))
        .collect();
    assert_eq!(
        got,
        vec![(&manual, r#"{"o":1}"#), (&scheduled, task.params.as_str()),]
    );
    let row = instance(db, &manual).await;
    assert_eq!(row.params.as_deref(), Some(r#"{"o":1}"#), "stored as given");
    assert_eq!(row.trigger_type, TriggerType::Manual);
    assert_eq!(
        (row.status, row.dispatched_attempt, row.next_attempt_at),
        (RunStatus::Ready, 0, Some(t)),
        "born due now, not dispatched"
    );
    assert_eq!(row.claimed_until, None);
    assert_eq!(instance(db, &scheduled).await.params, None);
}

/// After a restart, the process's own claims lapse at once (a run committed ahead of its
/// time, at that time); another process's claims, and runs that hold no claim, are left.
async fn recovery_makes_own_claims_due_at_once(db: &Db) {
    use RunStatus::*;
    let now = base() + secs(100);
    let task = insert_task(db, fields("recover", "s", TaskStatus::Enabled, None)).await;
    let fired_by = |rid: &RequestId, scheduled: NaiveDateTime, by: &str| {
        let mut row = fired(task.id, rid, scheduled);
        row.fired_by = by.into();
        row
    };
    let (a_due, a_ahead, b_due, a_running, a_retry) = (
        request_id(),
        request_id(),
        request_id(),
        request_id(),
        request_id(),
    );
    insert_run(db, &fired_by(&a_due, now - secs(5), "a")).await;
    insert_run(db, &fired_by(&a_ahead, now + millis(400), "a")).await;
    insert_run(db, &fired_by(&b_due, now - secs(5), "b")).await;
    // a's run the handler took, and a's run waiting for its retry (due after `now`): no
    // claim to lapse.
    insert_run(db, &fired_by(&a_running, now - secs(6), "a")).await;
    let outcome = decide(
        db,
        &a_running,
        &report(Some(1), accepted(now + secs(30)), now - secs(6)),
    )
    .await;
    assert_eq!(applied(outcome).status, Running);
    insert_run(db, &fired_by(&a_retry, now - secs(7), "a")).await;
    let outcome = decide(db, &a_retry, &report(None, failed(None, None), now)).await;
    assert_eq!(applied(outcome).next_attempt_at, Some(at(now + secs(5))));
    let before = |rid: &RequestId| {
        let rid = rid.clone();
        async move { crate::store::support::columns_of(db, &rid).await }
    };
    let (b_before, running_before, retry_before) = (
        before(&b_due).await,
        before(&a_running).await,
        before(&a_retry).await,
    );
    assert!(
        due(db, now + millis(400), 100).await.is_empty(),
        "every fired run is claimed"
    );

    let recovered = recovery::recover_own(&mut conn(db).await, &"a".into(), at(now))
        .await
        .expect("recover_own");
    assert_eq!(recovered, 2);
    let row = instance(db, &a_due).await;
    assert_eq!(
        (row.status, row.dispatched_attempt, row.fired_by.as_str()),
        (Ready, 1, "a")
    );
    assert_eq!((row.claimed_until, row.next_attempt_at), (Some(now), None));
    let row = instance(db, &a_ahead).await;
    assert_eq!(
        row.claimed_until,
        Some(now + millis(400)),
        "at its scheduled time"
    );
    assert_eq!(before(&b_due).await, b_before, "b's claim holds");
    assert_eq!(before(&a_running).await, running_before);
    assert_eq!(before(&a_retry).await, retry_before);
    assert_eq!(
        instance(db, &b_due).await.claimed_until,
        Some(fired_claim(now - secs(5)))
    );

    // The attempt scan offers exactly a's due run now, and the one ahead at its time.
    assert_eq!(due(db, now, 100).await, vec![a_due.clone()]);
    assert_eq!(
        due(db, now + millis(400), 100).await,
        vec![a_due.clone(), a_ahead.clone()]
    );
    assert_eq!(
        due(db, now + secs(5), 100).await,
        vec![a_due.clone(), a_ahead.clone(), a_retry.clone()]
    );
    // Recovering again changes nothing.
    let rows = [&a_due, &a_ahead, &b_due, &a_running, &a_retry];
    let mut kept = Vec::new();
    for rid in rows {
        kept.push(before(rid).await);
    }
    let again = recovery::recover_own(&mut conn(db).await, &"a".into(), at(now))
        .await
        .expect("recover_own");
    assert_eq!(again, 0, "nothing left to recover");
    for (rid, kept) in rows.into_iter().zip(kept) {
        assert_eq!(before(rid).await, kept);
    }
}
