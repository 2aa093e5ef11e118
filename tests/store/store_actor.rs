//! `src/actors/store.rs`: the StoreActor committing the results of many callers.

use std::time::Duration;

use ax::schedule::RetryPolicy;
use ax::store::models::{InstanceStatus, TaskStatus};
use ax::store::queries::instances::ResultOutcome;
use ax::store::Db;

use crate::support::{
    base, fields, insert_instance, insert_task, instance, new_instance, now_db, on_both_backends,
    request_id, result, secs,
};

on_both_backends!(store_actor_commits_a_backlog_of_results);

/// The StoreActor under a burst of results larger than one batch: every caller is answered
/// after its commit, with the outcome its result had, and every row is final.
async fn store_actor_commits_a_backlog_of_results(db: &Db) {
    use actix::Actor;
    use ax::actors::store::{StoreActor, StoreHandle};
    const RUNS: usize = 250;
    let store = StoreHandle::new(
        StoreActor::new(
            db.clone(),
            RetryPolicy::default(),
            100,
            Duration::from_millis(500),
        )
        .start(),
    );
    let task = insert_task(db, fields("burst", "s", TaskStatus::Enabled, None)).await;
    let t = base();
    let mut ids = Vec::new();
    for k in 0..RUNS as i64 {
        let id = request_id();
        let run = new_instance(task.id, &id, t + secs(k), InstanceStatus::Ready);
        insert_instance(db, &run).await;
        ids.push(id);
    }
    let results = ids.iter().enumerate().map(|(k, id)| {
        let store = store.clone();
        // Dispatcher results (batchable) and callbacks (told exactly), mixed.
        let mut record = result(id, InstanceStatus::Success, None, None, now_db(), None);
        record.batchable = k % 2 == 0;
        async move { store.record_result(record).await }
    });
    let outcomes = futures_util::future::join_all(results).await;
    for outcome in outcomes {
        assert_eq!(
            outcome.expect("committed"),
            ResultOutcome::Applied(InstanceStatus::Success)
        );
    }
    for id in &ids {
        assert_eq!(instance(db, id).await.status, "SUCCESS");
    }
}
