//! Broadcast fires (`queries/instances.rs`, `queries/pending.rs`): a fire's shards are
//! recorded, left by the overlap policy and waited for by dependants as one run.

use ax_core::run::{shards, NewRun, OverlapPolicy, RequestId, RunStatus, Shard};
use ax_store::queries::runs::{FireOutcome, FireRecord};
use ax_store::queries::{pending, tasks};
use ax_store::rows::models::{NewRunRow, TaskStatus};
use ax_store::Db;
use chrono::NaiveDateTime;

use crate::store::support::{
    at, base, born, conn, fields, fire_record, fired, insert_run, insert_task, instance,
    new_instance, on_every_backend, record, request_id, runs_of, secs,
};

on_every_backend!(
    a_broadcast_fire_is_recorded_as_one,
    a_broadcast_upstream_succeeded_when_every_shard_did,
);

const MEMBERS: [&str; 3] = [
    "http://127.0.0.1:1",
    "http://127.0.0.1:2",
    "http://127.0.0.1:3",
];

/// `run` as a fire over the three members: shard 0 and its siblings.
fn broadcast(run: NewRunRow, scheduled_at: NaiveDateTime, policy: OverlapPolicy) -> FireRecord {
    let mut runs: Vec<NewRunRow> = shards(MEMBERS.len())
        .map(|shard| run.shard(shard, Some(MEMBERS[shard.index as usize])))
        .collect();
    let instance = runs.remove(0);
    FireRecord {
        scheduled_at,
        next_run_at: Some(scheduled_at + secs(1)),
        instance,
        siblings: runs,
        overlap: policy,
        version: 1,
    }
}

async fn a_broadcast_fire_is_recorded_as_one(db: &Db) {
    let t = base();
    let task = insert_task(db, fields("bc", "s", TaskStatus::Enabled, Some(t))).await;
    let plain = insert_task(db, fields("plain", "s", TaskStatus::Enabled, Some(t))).await;
    let id = RequestId::scheduled(task.id, at(t));
    let fire = broadcast(fired(task.id, &id, t), t, OverlapPolicy::Allow);
    // Beside another task's fire: the batch goes in one statement.
    let other = fire_record(plain.id, &request_id(), t, Some(t + secs(1)));
    let outcomes = record(db, vec![fire.clone(), other]).await;
    assert_eq!(outcomes, vec![FireOutcome::Fired, FireOutcome::Fired]);
    let (mut rows, total) = runs_of(db, task.id).await;
    assert_eq!(total, 3);
    rows.sort_by_key(|row| row.shard_index);
    for (k, row) in rows.iter().enumerate() {
        let shard = Shard {
            index: k as i32,
            total: 3,
        };
        assert_eq!(row.request_id, shard.request_id(task.id, at(t)));
        assert_eq!(
            (row.shard_index, row.shard_total),
            (Some(k as i32), Some(3))
        );
        assert_eq!(row.member.as_deref(), Some(MEMBERS[k]));
        assert_eq!((row.status, row.dispatched_attempt), (RunStatus::Ready, 1));
    }
    assert_eq!(rows[0].request_id, id, "shard 0 has the run's own id");

    // Recorded again (another process): stale as a whole.
    assert_eq!(record(db, vec![fire]).await, vec![FireOutcome::Stale]);
    assert_eq!(runs_of(db, task.id).await.1, 3);

    // Its shard 0 exists already: a duplicate, and none of its siblings is added, in a batch
    // beside another fire too (recorded).
    let t2 = t + secs(1);
    let id2 = RequestId::scheduled(task.id, at(t2));
    insert_run(db, &fired(task.id, &id2, t2)).await;
    let again = broadcast(fired(task.id, &id2, t2), t2, OverlapPolicy::Allow);
    let other = fire_record(plain.id, &request_id(), t2, Some(t2 + secs(1)));
    let outcomes = record(db, vec![again, other]).await;
    assert_eq!(outcomes, vec![FireOutcome::Duplicate, FireOutcome::Fired]);
    assert_eq!(runs_of(db, task.id).await.1, 4);
    assert_eq!(runs_of(db, plain.id).await.1, 2);

    // Under SKIP with an earlier fire's shards open: every shard is skipped together, and
    // shards of one fire never skip each other.
    let t3 = t + secs(2);
    let skipping = insert_task(db, fields("skip", "s", TaskStatus::Enabled, Some(t3))).await;
    let first = broadcast(
        fired(skipping.id, &RequestId::scheduled(skipping.id, at(t3)), t3),
        t3,
        OverlapPolicy::Skip,
    );
    assert_eq!(record(db, vec![first]).await, vec![FireOutcome::Fired]);
    let t4 = t3 + secs(1);
    let second = broadcast(
        fired(skipping.id, &RequestId::scheduled(skipping.id, at(t4)), t4),
        t4,
        OverlapPolicy::Skip,
    );
    let outcomes = record(db, vec![second]).await;
    assert_eq!(outcomes, vec![FireOutcome::Overlapped(RunStatus::Skipped)]);
    let (rows, _) = runs_of(db, skipping.id).await;
    let status_at = |when: NaiveDateTime| {
        rows.iter()
            .filter(|row| row.scheduled_at == when)
            .map(|row| row.status)
            .collect::<Vec<_>>()
    };
    assert_eq!(status_at(t3), vec![RunStatus::Ready; 3]);
    assert_eq!(status_at(t4), vec![RunStatus::Skipped; 3]);
}

async fn a_broadcast_upstream_succeeded_when_every_shard_did(db: &Db) {
    use RunStatus::*;
    let t = base();
    let up = insert_task(db, fields("bc-up", "s", TaskStatus::Enabled, None)).await;
    let down = tasks::insert(
        &mut conn(db).await,
        fields("bc-down", "s", TaskStatus::Enabled, None),
        vec![up.id],
    )
    .await
    .expect("insert downstream")
    .expect("upstreams accepted");
    // The upstream's fire at t: three shards, one still running.
    let fire_id = RequestId::scheduled(up.id, at(t));
    let base_row = new_instance(up.id, &fire_id, t, Success);
    let mut shard_ids = Vec::new();
    for (shard, status) in shards(3).zip([Success, Running, Success]) {
        let mut row = base_row.shard(shard, Some(MEMBERS[shard.index as usize]));
        row.status = status;
        shard_ids.push(row.request_id.clone());
        assert_eq!(insert_run(db, &row).await, FireOutcome::Fired);
    }
    let waiting = request_id();
    let deadline = at(t + secs(600));
    let row = born(
        down.id,
        &waiting,
        t + secs(1),
        &NewRun::waiting_for_upstreams(deadline),
    );
    insert_run(db, &row).await;

    let check = |now: NaiveDateTime| async move {
        pending::check_pending(&mut conn(db).await, at(now), 100)
            .await
            .expect("check_pending")
    };
    assert_eq!(
        check(t + secs(5)).await,
        (0, 0),
        "a shard still runs: the fire is not done"
    );
    assert_eq!(instance(db, &waiting).await.status, Pending);

    // Every shard succeeded: released.
    set_status(db, &shard_ids[1], Success).await;
    assert_eq!(check(t + secs(5)).await, (1, 0));
    assert_eq!(instance(db, &waiting).await.status, Ready);

    // A later fire with one failed shard fails its dependant.
    let t2 = t + secs(10);
    let fire_id = RequestId::scheduled(up.id, at(t2));
    let base_row = new_instance(up.id, &fire_id, t2, Success);
    for (shard, status) in shards(3).zip([Success, Failed, Success]) {
        let mut row = base_row.shard(shard, None);
        row.status = status;
        insert_run(db, &row).await;
    }
    let failing = request_id();
    let row = born(
        down.id,
        &failing,
        t2 + secs(1),
        &NewRun::waiting_for_upstreams(deadline),
    );
    insert_run(db, &row).await;
    assert_eq!(check(t2 + secs(5)).await, (0, 1));
    assert_eq!(instance(db, &failing).await.status, Failed);
}

async fn set_status(db: &Db, request_id: &RequestId, status: RunStatus) {
    use ax_store::rows::schema::ax_instance::dsl as i;
    use diesel::prelude::*;
    use diesel_async::RunQueryDsl;
    let mut c = conn(db).await;
    let updated = ax_store::with_conn!(&mut c, |c| diesel::update(
        i::ax_instance.filter(i::request_id.eq(request_id))
    )
    .set(i::status.eq(status))
    .execute(c)
    .await)
    .expect("set status");
    assert_eq!(updated, 1);
}
