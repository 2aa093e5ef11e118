//! `crates/ax-store/src/queries/task_changes.rs`: the change feed the database writes for every change of
//! a task, and the fire's compare-and-set on the task's version.

use ax_core::run::TaskId;
use ax_store::queries::runs::FireOutcome;
use ax_store::queries::task_changes;
use ax_store::queries::tasks::{self, Versions};
use ax_store::rows::models::TaskStatus;
use ax_store::{from_db, Db};

use crate::store::support::{
    base, conn, fields, fire_record, insert_task, on_every_backend, record, request_id, secs,
};

on_every_backend!(
    every_change_of_a_task_is_in_the_feed,
    a_read_takes_the_gaps_and_the_new_from_where_its_last_page_ended,
    a_fire_planned_from_an_older_version_is_stale,
);

/// The tasks the feed names after `floor`, in order.
async fn changed_after(db: &Db, floor: i64) -> Vec<TaskId> {
    task_changes::read(&mut conn(db).await, (&[], floor), floor)
        .await
        .expect("read")
        .into_iter()
        .map(|(_, task)| task)
        .collect()
}

async fn a_read_takes_the_gaps_and_the_new_from_where_its_last_page_ended(db: &Db) {
    let t = base();
    let start = latest(db).await;
    let mut made = Vec::new();
    for name in ["a", "b", "c", "d"] {
        let task = insert_task(db, fields(name, "s1", TaskStatus::Enabled, Some(t))).await;
        made.push((latest(db).await, task.id));
    }
    let ids: Vec<i64> = made.iter().map(|(id, _)| *id).collect();
    let read = |wanted: (Vec<(i64, i64)>, i64), from: i64| async move {
        task_changes::read(&mut conn(db).await, (&wanted.0, wanted.1), from)
            .await
            .expect("read")
    };
    // The gap below the last id read, and what is new.
    assert_eq!(
        read((vec![(ids[0], ids[1])], ids[2]), start).await,
        vec![made[0], made[1], made[3]]
    );
    // A later page of the same read: only what lies past where the last page ended.
    assert_eq!(read((vec![], ids[0]), ids[2]).await, vec![made[3]]);
    assert_eq!(
        read((vec![(ids[0], ids[1])], ids[2]), ids[0]).await,
        vec![made[1], made[3]]
    );
}

async fn latest(db: &Db) -> i64 {
    task_changes::latest(&mut conn(db).await)
        .await
        .expect("latest")
}

async fn every_change_of_a_task_is_in_the_feed(db: &Db) {
    let t = base();
    let start = latest(db).await;
    let a = insert_task(db, fields("a", "s1", TaskStatus::Enabled, Some(t))).await;
    let b = insert_task(db, fields("b", "s1", TaskStatus::Enabled, Some(t))).await;
    assert_eq!(changed_after(db, start).await, vec![a.id, b.id], "created");

    let mark = latest(db).await;
    // A fire's advance is not a change.
    let outcomes = record(
        db,
        vec![fire_record(a.id, &request_id(), t, Some(t + secs(1)))],
    )
    .await;
    assert_eq!(outcomes, vec![FireOutcome::Fired]);
    assert_eq!(changed_after(db, mark).await, vec![], "a fire is no change");

    let now = t + secs(10);
    tasks::pause(&mut conn(db).await, a.id, now)
        .await
        .expect("pause");
    tasks::resume(&mut conn(db).await, a.id, from_db(now))
        .await
        .expect("resume");
    tasks::pause_scene(&mut conn(db).await, &"s1".into(), now, "ops")
        .await
        .expect("pause scene");
    tasks::resume_scene(&mut conn(db).await, &"s1".into(), from_db(now))
        .await
        .expect("resume scene");
    let mut changed = fields("b", "s1", TaskStatus::Enabled, Some(t + secs(30)));
    changed.params = r#"{"v":2}"#.into();
    tasks::update(&mut conn(db).await, b.id, Versions::Any, changed, vec![])
        .await
        .expect("update");
    tasks::delete(&mut conn(db).await, a.id, Versions::Any, from_db(now))
        .await
        .expect("delete");
    // Paused, resumed, its scene paused (no next run) and resumed (one again), deleted; b: its
    // scene paused and resumed, changed.
    let mut changed = changed_after(db, mark).await;
    changed.sort();
    let mut expected = vec![a.id; 5];
    expected.extend([b.id; 3]);
    assert_eq!(changed, expected);

    // Pruning keeps the newest change, so ids go on rising.
    let newest = latest(db).await;
    let later = chrono::Utc::now().naive_utc() + chrono::Duration::hours(1);
    task_changes::prune(&mut conn(db).await, later)
        .await
        .expect("prune");
    assert_eq!(latest(db).await, newest);
    assert_eq!(changed_after(db, start).await, vec![a.id]);
}

async fn a_fire_planned_from_an_older_version_is_stale(db: &Db) {
    let t = base();
    let task = insert_task(db, fields("v", "s", TaskStatus::Enabled, Some(t))).await;
    let changed = fields("v", "s", TaskStatus::Enabled, Some(t));
    tasks::update(&mut conn(db).await, task.id, Versions::Any, changed, vec![])
        .await
        .expect("update");
    // Planned from version 1; the task is at version 2 with the same next run.
    let one = fire_record(task.id, &request_id(), t, Some(t + secs(1)));
    assert_eq!(record(db, vec![one]).await, vec![FireOutcome::Stale]);
    // Several at once take the other path through the store: stale the same.
    let chain = vec![
        fire_record(task.id, &request_id(), t, Some(t + secs(1))),
        fire_record(task.id, &request_id(), t + secs(1), Some(t + secs(2))),
    ];
    assert_eq!(
        record(db, chain).await,
        vec![FireOutcome::Stale, FireOutcome::Stale]
    );
    let mut current = fire_record(task.id, &request_id(), t, Some(t + secs(1)));
    current.version = 2;
    assert_eq!(record(db, vec![current]).await, vec![FireOutcome::Fired]);
}
