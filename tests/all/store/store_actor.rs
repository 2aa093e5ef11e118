//! `crates/ax-server/src/actors/store.rs`: the StoreActor committing the results of many callers, and claims.

use std::time::Duration;

use ax_core::run::{Decided, NewRun, RetryPolicy, RunStatus};
use ax_server::actors::store::{LaneCommits, RunEvent, StoreActor, StoreHandle};
use ax_store::rows::models::TaskStatus;
use ax_store::Db;

use crate::common::{on_each_backend, TestStore};
use crate::store::support::{
    accepted, applied, at, base, born, claim_event, due_attempt, fields, fired, insert_run,
    insert_task, instance, now_db, on_every_backend, report, request_id, secs, succeeded,
};

on_every_backend!(
    store_actor_commits_a_backlog_of_results,
    store_actor_records_claims,
    a_lone_result_commits_at_once,
);

/// A StoreActor on `db` committing at most 100 rows at a time, two fire and four result
/// commits at once on MySQL.
fn start_store(db: &Db, max_wait: Duration) -> StoreHandle {
    use actix::Actor;
    let commits = LaneCommits::on(db, 2, 4);
    let store = StoreActor::new(db.clone(), RetryPolicy::default(), 100, max_wait, commits);
    StoreHandle::new(store.start())
}

/// Natural group commit: on an idle store a result is committed at once, not after the batch
/// interval (here far longer than the test may take).
async fn a_lone_result_commits_at_once(db: &Db) {
    let store = start_store(db, Duration::from_secs(600));
    let task = insert_task(db, fields("lone", "s", TaskStatus::Enabled, None)).await;
    let id = request_id();
    insert_run(db, &fired(task.id, &id, base())).await;
    let event = report(Some(1), succeeded(None, None), now_db());
    let decided = actix_rt::time::timeout(Duration::from_secs(30), store.decide(id.clone(), event))
        .await
        .expect("committed without waiting for the interval");
    assert_eq!(
        applied(decided.expect("committed")).status,
        RunStatus::Success
    );
    assert_eq!(instance(db, &id).await.status, RunStatus::Success);
}

/// The StoreActor under a burst of results larger than one batch: every caller is answered
/// after its commit, with the outcome its result had, and every row is final.
async fn store_actor_commits_a_backlog_of_results(db: &Db) {
    const RUNS: usize = 250;
    let store = start_store(db, Duration::from_millis(500));
    let task = insert_task(db, fields("burst", "s", TaskStatus::Enabled, None)).await;
    let t = base();
    let mut ids = Vec::new();
    for k in 0..RUNS as i64 {
        let id = request_id();
        insert_run(db, &fired(task.id, &id, t + secs(k))).await;
        ids.push(id);
    }
    let results = ids.iter().enumerate().map(|(k, id)| {
        let store = store.clone();
        // Dispatcher replies (written blind, naming their attempt) and callbacks (decided
        // exactly, some without an attempt), mixed.
        let blind = k % 2 == 0;
        let attempt = (k % 4 != 1).then_some(1);
        let event = RunEvent {
            request_id: id.clone(),
            task_id: None,
            event: report(attempt, succeeded(None, None), now_db()),
            blind,
        };
        async move { (blind, store.record_event(event).await) }
    });
    let outcomes = futures_util::future::join_all(results).await;
    for (blind, outcome) in outcomes {
        match outcome.expect("committed") {
            None => assert!(blind, "only a blind write has no outcome"),
            Some(Decided::Applied(run)) => {
                assert!(!blind);
                assert_eq!(run.status, RunStatus::Success);
            }
            other => panic!("{other:?}"),
        }
    }
    for id in &ids {
        assert_eq!(instance(db, id).await.status, RunStatus::Success);
    }
}

/// Claims go through the StoreActor too: of two claims of one attempt in a batch, the first
/// wins; the winner's reports are decided exactly (`StoreHandle::decide`).
async fn store_actor_records_claims(db: &Db) {
    let store = start_store(db, Duration::from_millis(50));
    let task = insert_task(db, fields("claims", "s", TaskStatus::Enabled, None)).await;
    let t = base();
    let (first, second) = (request_id(), request_id());
    for id in [&first, &second] {
        let run = NewRun::due(at(t));
        insert_run(db, &born(task.id, id, t, &run)).await;
    }
    let due = |id| async move { due_attempt(db, id).await };
    let (a, b) = (due(&first).await, due(&second).await);
    let claims = vec![
        (a.clone(), claim_event(&a, "node-a", t)),
        (a.clone(), claim_event(&a, "node-b", t)),
        (b.clone(), claim_event(&b, "node-b", t)),
    ];
    let won = store.record_claims(claims).await.expect("claims committed");
    assert_eq!(won, vec![true, false, true]);
    assert_eq!(instance(db, &first).await.fired_by, "node-a");
    assert_eq!(instance(db, &second).await.fired_by, "node-b");
    assert_eq!(instance(db, &first).await.dispatched_attempt, 1);

    let running = report(Some(1), accepted(t + secs(30)), t + secs(1));
    let decided = store.decide(first.clone(), running.clone()).await;
    let run = applied(decided.expect("committed"));
    assert_eq!(run.status, RunStatus::Running);
    let decided = store.decide(request_id(), running).await;
    assert_eq!(decided.expect("committed"), Decided::Unknown);
    assert_eq!(instance(db, &first).await.status, RunStatus::Running);
}

on_each_backend!(one_refused_write_fails_alone_on, mariadb: one_refused_write_fails_alone_mysql, postgres: one_refused_write_fails_alone_postgres);

/// A group commit that the database refuses for one write's sake (a `code` longer than its
/// column, MariaDB in strict mode) is committed again one write at a time: the bad result is
/// recorded as the run's failure (`RESULT_REJECTED`, with the reason), every other result of
/// the batch commits.
async fn one_refused_write_fails_alone_on(test_store: TestStore) {
    const RUNS: usize = 20;
    let db = crate::store::support::connect(&test_store).await;
    // The first result commits alone; the others, queued while it commits, join one group
    // commit.
    let store = start_store(&db, Duration::from_secs(1));
    let task = insert_task(&db, fields("refused", "s", TaskStatus::Enabled, None)).await;
    let t = base();
    let mut ids = Vec::new();
    for k in 0..RUNS as i64 {
        let id = request_id();
        insert_run(&db, &fired(task.id, &id, t + secs(k))).await;
        ids.push(id);
    }
    let too_long = "x".repeat(100);
    let results = ids.iter().enumerate().map(|(k, id)| {
        let store = store.clone();
        let code = (k == 7).then_some(too_long.as_str());
        let event = RunEvent {
            request_id: id.clone(),
            task_id: None,
            event: report(Some(1), succeeded(code, None), now_db()),
            blind: true,
        };
        async move { store.record_event(event).await }
    });
    let outcomes = futures_util::future::join_all(results).await;
    for (k, (id, outcome)) in ids.iter().zip(outcomes).enumerate() {
        let row = instance(&db, id).await;
        if k == 7 {
            // Recorded as the attempt's failure, final: never retried as a whole batch.
            match outcome.expect("recorded") {
                Some(Decided::Applied(run)) => assert_eq!(run.status, RunStatus::Failed),
                other => panic!("{other:?}"),
            }
            assert_eq!(row.status, RunStatus::Failed);
            assert_eq!(row.callback_code.as_deref(), Some("RESULT_REJECTED"));
            assert!(
                row.callback_message
                    .as_deref()
                    .is_some_and(|m| m.contains("could not be stored")),
                "{row:?}"
            );
        } else {
            outcome.unwrap_or_else(|err| panic!("run {k}: {err}"));
            assert_eq!(row.status, RunStatus::Success, "run {k}");
        }
    }
}
