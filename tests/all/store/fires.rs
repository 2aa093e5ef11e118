//! `crates/ax-store/src/queries/runs.rs`, fires: `record_fires`' compare-and-set, duplicate request
//! ids, many fires and fire chains per statement, and fire batches committing side by side.

use ax_core::run::{
    dependency_deadline, NewRun, OverlapPolicy, RequestId, RunStatus, TaskId, TriggerType,
};
use ax_store::queries::runs::{self, FireOutcome, FireRecord};
use ax_store::queries::tasks;
use ax_store::rows::models::{NewRunRow, Run, TaskStatus};
use ax_store::{Db, StoreError};
use chrono::NaiveDateTime;

use crate::common::{on_each_backend, TestStore};
use crate::store::support::{
    at, base, born, conn, connect, fields, find_task, fire_record, fired_claim, insert_run,
    insert_task, instance, millis, new_instance, now_db, on_every_backend, origin, record,
    request_id, runs_of, secs,
};

on_every_backend!(
    record_fires_compare_and_set,
    record_fires_rolls_back_with_its_transaction,
    duplicate_request_id,
    fires_recorded_at_once,
    a_duplicate_in_a_later_statement_leaves_the_others_fired,
    fire_chains_recorded_at_once,
    a_backfill_finds_runs_by_their_second_whatever_their_id,
);

async fn record_fires_compare_and_set(db: &Db) {
    let t0 = base();
    let (t1, t2) = (t0 + secs(1), t0 + secs(2));
    let task = insert_task(db, fields("cas", "s", TaskStatus::Enabled, Some(t0))).await;

    // The holder of T advances to T+1 and gets a READY row.
    let first = request_id();
    let outcomes = record(db, vec![fire_record(task.id, &first, t0, Some(t1))]).await;
    assert_eq!(outcomes, vec![FireOutcome::Fired]);
    assert_eq!(
        find_task(db, task.id).await.expect("task").next_run_at,
        Some(t1)
    );
    let row = instance(db, &first).await;
    assert_eq!(row.task_id, task.id);
    assert_fired(&row, t0);
    assert_eq!(row.trigger_type, TriggerType::Schedule);
    assert_eq!((row.attempt, row.retry_count), (1, 0), "column defaults");
    assert_eq!(row.callback_code, None);
    assert_eq!(row.params, None);

    // The same fire again (another node, or a retry) is stale: no second row.
    let outcomes = record(db, vec![fire_record(task.id, &first, t0, Some(t1))]).await;
    assert_eq!(outcomes, vec![FireOutcome::Stale]);
    // Also stale with a fresh request id: the compare-and-set is what guards, not the id.
    let outcomes = record(db, vec![fire_record(task.id, &request_id(), t0, Some(t1))]).await;
    assert_eq!(outcomes, vec![FireOutcome::Stale]);
    assert_eq!(
        find_task(db, task.id).await.expect("task").next_run_at,
        Some(t1)
    );
    assert_eq!(runs_of(db, task.id).await.1, 1);

    // A scheduled time off by one millisecond is stale too.
    let outcomes = record(
        db,
        vec![fire_record(
            task.id,
            &request_id(),
            t1 + millis(1),
            Some(t2),
        )],
    )
    .await;
    assert_eq!(outcomes, vec![FireOutcome::Stale]);
    assert_eq!(runs_of(db, task.id).await.1, 1);

    // A paused task never fires.
    let paused = insert_task(db, fields("paused", "s", TaskStatus::Paused, Some(t0))).await;
    let outcomes = record(
        db,
        vec![fire_record(paused.id, &request_id(), t0, Some(t1))],
    )
    .await;
    assert_eq!(outcomes, vec![FireOutcome::Stale]);
    assert_eq!(
        find_task(db, paused.id).await.expect("task").next_run_at,
        Some(t0)
    );
    assert_eq!(runs_of(db, paused.id).await.1, 0);

    // Nor does a deleted one.
    let outcomes = record(
        db,
        vec![fire_record(
            TaskId(paused.id.0 + 1000),
            &request_id(),
            t0,
            Some(t1),
        )],
    )
    .await;
    assert_eq!(outcomes, vec![FireOutcome::Stale]);

    // A chain of catch-up runs in one call: each advances from its own time.
    let chained = insert_task(db, fields("chain", "s", TaskStatus::Enabled, Some(t0))).await;
    let (x, y) = (request_id(), request_id());
    let outcomes = record(
        db,
        vec![
            fire_record(chained.id, &x, t0, Some(t1)),
            fire_record(chained.id, &y, t1, Some(t2)),
        ],
    )
    .await;
    assert_eq!(outcomes, vec![FireOutcome::Fired, FireOutcome::Fired]);
    assert_eq!(
        find_task(db, chained.id).await.expect("task").next_run_at,
        Some(t2)
    );
    let (rows, total) = runs_of(db, chained.id).await;
    assert_eq!(total, 2);
    // Newest scheduled first.
    let listed: Vec<(&RequestId, NaiveDateTime)> = rows
        .iter()
        .map(|r| (&r.request_id, r.scheduled_at))
        .collect();
    assert_eq!(listed, vec![(&y, t1), (&x, t0)]);
    for row in &rows {
        assert_fired(row, row.scheduled_at);
    }

    // A mixed batch: each record gets its own outcome, in order.
    let other = insert_task(db, fields("other", "s", TaskStatus::Enabled, Some(t0))).await;
    let outcomes = record(
        db,
        vec![
            fire_record(chained.id, &request_id(), t0, Some(t1)),
            fire_record(other.id, &request_id(), t0, None),
        ],
    )
    .await;
    assert_eq!(outcomes, vec![FireOutcome::Stale, FireOutcome::Fired]);
    // The last run of a task clears next_run_at.
    assert_eq!(
        find_task(db, other.id).await.expect("task").next_run_at,
        None
    );
    assert_eq!(runs_of(db, chained.id).await.1, 2);
}

async fn record_fires_rolls_back_with_its_transaction(db: &Db) {
    let t0 = base();
    let task = insert_task(db, fields("rollback", "s", TaskStatus::Enabled, Some(t0))).await;
    let rid = request_id();
    let fires = vec![fire_record(task.id, &rid, t0, Some(t0 + secs(1)))];
    let mut conn = conn(db).await;
    let failed: Result<(), StoreError> = conn
        .transaction(move |c| {
            Box::pin(async move {
                let outcomes = runs::record_fires(c, &fires).await?;
                assert_eq!(outcomes, vec![FireOutcome::Fired]);
                Err(StoreError::Pool("abort on purpose".into()))
            })
        })
        .await;
    assert!(matches!(failed, Err(StoreError::Pool(_))), "{failed:?}");
    drop(conn);
    assert_eq!(
        find_task(db, task.id).await.expect("task").next_run_at,
        Some(t0),
        "the advance is rolled back"
    );
    assert_eq!(runs_of(db, task.id).await.1, 0, "the row is rolled back");
    // And the fire can then be recorded for real.
    let outcomes = record(db, vec![fire_record(task.id, &rid, t0, Some(t0 + secs(1)))]).await;
    assert_eq!(outcomes, vec![FireOutcome::Fired]);
}

async fn duplicate_request_id(db: &Db) {
    let task = insert_task(db, fields("dup", "s", TaskStatus::Enabled, None)).await;
    let rid = request_id();
    let first = new_instance(task.id, &rid, base(), RunStatus::Ready);
    assert_eq!(insert_run(db, &first).await, FireOutcome::Fired);
    let mut second = new_instance(task.id, &rid, base() + secs(5), RunStatus::Ready);
    second.trigger_type = TriggerType::Manual;
    assert_eq!(insert_run(db, &second).await, FireOutcome::Duplicate);
    let (rows, total) = runs_of(db, task.id).await;
    assert_eq!(total, 1);
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].scheduled_at, base(), "the first row is kept");
    assert_eq!(rows[0].trigger_type, TriggerType::Schedule);

    // The connection is still usable after the violation (also inside a transaction).
    let other = new_instance(task.id, &request_id(), base() + secs(1), RunStatus::Ready);
    let again = new_instance(task.id, &rid, base() + secs(2), RunStatus::Ready);
    let mut conn = conn(db).await;
    let outcomes = conn
        .transaction(move |c| {
            Box::pin(async move {
                Ok(vec![
                    runs::insert_run(c, &again).await?,
                    runs::insert_run(c, &other).await?,
                ])
            })
        })
        .await
        .expect("a duplicate does not abort the transaction");
    assert_eq!(outcomes, vec![FireOutcome::Duplicate, FireOutcome::Fired]);
    drop(conn);
    assert_eq!(runs_of(db, task.id).await.1, 2);
}

async fn fires_recorded_at_once(db: &Db) {
    let t = base();
    let mut records = Vec::new();
    let mut tasks_ = Vec::new();
    for k in 0..5 {
        let task = insert_task(
            db,
            fields(&format!("f{k}"), "s", TaskStatus::Enabled, Some(t)),
        )
        .await;
        let rid = request_id();
        records.push(fire_record(task.id, &rid, t, Some(t + secs(1))));
        tasks_.push(task);
    }
    // Task 1 moved on elsewhere; task 2 is paused; task 3's run exists already.
    let moved = fire_record(tasks_[1].id, &request_id(), t, Some(t + secs(1)));
    assert_eq!(record(db, vec![moved]).await, vec![FireOutcome::Fired]);
    tasks::pause(&mut conn(db).await, tasks_[2].id, now_db())
        .await
        .expect("pause");
    let existing = records[3].instance.clone();
    insert_run(db, &existing).await;
    let outcomes = record(db, records.clone()).await;
    assert_eq!(
        outcomes,
        vec![
            FireOutcome::Fired,
            FireOutcome::Stale,
            FireOutcome::Stale,
            FireOutcome::Duplicate,
            FireOutcome::Fired,
        ]
    );
    for k in [0, 3, 4] {
        assert_eq!(
            find_task(db, tasks_[k].id)
                .await
                .and_then(|t| t.next_run_at),
            Some(t + secs(1))
        );
    }
    for k in [0, 4] {
        let row = instance(db, &records[k].instance.request_id).await;
        assert_fired(&row, t);
        assert_eq!(row.task_id, tasks_[k].id);
        assert_eq!(row.trigger_type, TriggerType::Schedule);
        assert_eq!(row.trigger_at, records[k].instance.trigger_at);
        assert_eq!(row.created_at, records[k].instance.created_at);
        assert_eq!(row.params, None);
    }
    let (runs, _) = runs_of(db, tasks_[3].id).await;
    assert_eq!(runs.len(), 1, "no second row for a duplicate");
}

/// A batch's rows go in statements of power-of-two sizes (five rows: four, then one); a
/// duplicate in the last statement must not turn the rows of the first into duplicates.
async fn a_duplicate_in_a_later_statement_leaves_the_others_fired(db: &Db) {
    let t = base();
    let mut records = Vec::new();
    for k in 0..5 {
        let task = insert_task(
            db,
            fields(&format!("later{k}"), "s", TaskStatus::Enabled, Some(t)),
        )
        .await;
        records.push(fire_record(task.id, &request_id(), t, Some(t + secs(1))));
    }
    insert_run(db, &records[4].instance.clone()).await;
    let outcomes = record(db, records.clone()).await;
    let mut expected = vec![FireOutcome::Fired; 4];
    expected.push(FireOutcome::Duplicate);
    assert_eq!(outcomes, expected);
    for record in &records {
        let (runs, _) = runs_of(db, record.instance.task_id).await;
        assert_eq!(runs.len(), 1, "one row for {:?}", record.instance.task_id);
    }
}

/// A late tick's catch-up fires a task twice in one batch, as a chain: fresh or stale whole.
async fn fire_chains_recorded_at_once(db: &Db) {
    let t = base();
    let a = insert_task(db, fields("a", "s", TaskStatus::Enabled, Some(t))).await;
    let b = insert_task(db, fields("b", "s", TaskStatus::Enabled, Some(t))).await;
    let moved_on = Some(t + secs(5));
    let c = insert_task(db, fields("c", "s", TaskStatus::Enabled, moved_on)).await;
    // Runs of every birth go in the one multi-row insert: waiting for upstreams, missed.
    let d = insert_task(db, fields("d", "s", TaskStatus::Enabled, Some(t))).await;
    let e = insert_task(db, fields("e", "s", TaskStatus::Enabled, Some(t))).await;
    let deadline = dependency_deadline(at(t), 60);
    let later = |task: TaskId, run: &NewRun| FireRecord {
        scheduled_at: t,
        next_run_at: Some(t + secs(1)),
        instance: born(task, &request_id(), t, run),
        siblings: Vec::new(),
        overlap: OverlapPolicy::Allow,
        version: 1,
    };
    let fires = vec![
        fire_record(a.id, &request_id(), t, Some(t + secs(1))),
        fire_record(b.id, &request_id(), t, Some(t + secs(1))),
        fire_record(a.id, &request_id(), t + secs(1), Some(t + secs(2))),
        fire_record(c.id, &request_id(), t, Some(t + secs(1))),
        fire_record(c.id, &request_id(), t + secs(1), Some(t + secs(2))),
        later(d.id, &NewRun::waiting_for_upstreams(deadline)),
        later(e.id, &NewRun::missed(at(t + millis(700)))),
    ];
    use FireOutcome::*;
    assert_eq!(
        record(db, fires.clone()).await,
        vec![Fired, Fired, Fired, Stale, Stale, Fired, Fired]
    );
    for (task, next, rows) in [
        (&a, Some(t + secs(2)), 2),
        (&b, Some(t + secs(1)), 1),
        (&c, moved_on, 0),
        (&d, Some(t + secs(1)), 1),
        (&e, Some(t + secs(1)), 1),
    ] {
        let found = find_task(db, task.id).await.expect("task");
        assert_eq!(found.next_run_at, next, "task {}", task.name);
        assert_eq!(runs_of(db, task.id).await.1, rows, "task {}", task.name);
    }
    // Every column as given, in its place.
    for fire in fires.iter().filter(|f| f.instance.task_id != c.id) {
        let row = instance(db, &fire.instance.request_id).await;
        let new = &fire.instance;
        assert_eq!(
            (row.task_id, row.trigger_type, row.scheduled_at),
            (new.task_id, TriggerType::Schedule, fire.scheduled_at)
        );
        assert_eq!(
            (row.trigger_at, row.created_at),
            (new.trigger_at, new.created_at)
        );
        assert_eq!(
            (row.fired_by.as_str(), row.params.as_deref()),
            ("node-test", None)
        );
        assert_eq!((row.attempt, row.retry_count), (1, 0));
        match row.status {
            RunStatus::Ready => assert_fired(&row, fire.scheduled_at),
            RunStatus::Pending => {
                assert_eq!(row.deadline_at, Some(t + secs(60)));
                assert_eq!((row.dispatched_attempt, row.claimed_until), (0, None));
                assert_eq!((row.next_attempt_at, row.finished_at), (None, None));
            }
            RunStatus::Missed => {
                assert_eq!(row.finished_at, Some(t + millis(700)));
                assert_eq!((row.dispatched_attempt, row.claimed_until), (0, None));
                assert_eq!((row.next_attempt_at, row.deadline_at), (None, None));
            }
            other => panic!("{other:?}"),
        }
    }
}

on_each_backend!(concurrent_fire_batches_do_not_deadlock_on, mariadb: concurrent_fire_batches_do_not_deadlock_mysql, postgres: concurrent_fire_batches_do_not_deadlock_postgres);

/// Fire batches commit side by side on a database server while tasks are being created, and a
/// tick's batches can overlap the next tick's, which hold the same tasks: none may deadlock.
async fn concurrent_fire_batches_do_not_deadlock_on(store: TestStore) {
    const BATCHES: usize = 8;
    const PER_BATCH: usize = 40;
    let db = connect(&store).await;
    let t = base();
    let mut tasks_ = Vec::new();
    for k in 0..BATCHES * PER_BATCH {
        let task = insert_task(
            &db,
            fields(&format!("d{k}"), "s", TaskStatus::Enabled, Some(t)),
        )
        .await;
        tasks_.push(task.id);
    }
    let fire = |ids: &[TaskId], when: NaiveDateTime| {
        let db = db.clone();
        let fires: Vec<FireRecord> = ids
            .iter()
            .map(|&id| fire_record(id, &request_id(), when, Some(when + secs(1))))
            .collect();
        async move {
            let mut conn = conn(&db).await;
            conn.transaction(move |c| Box::pin(async move { runs::record_fires(c, &fires).await }))
                .await
        }
    };
    for round in 0..10i64 {
        // This second's batches and the next second's, for the same tasks, at once.
        let at = t + secs(round);
        let batches = tasks_
            .chunks(PER_BATCH)
            .flat_map(|ids| [fire(ids, at), fire(ids, at + secs(1))]);
        let creates = (0..BATCHES).map(|k| {
            let db = db.clone();
            async move {
                let name = format!("new-{round}-{k}");
                tasks::insert(
                    &mut conn(&db).await,
                    fields(&name, "s", TaskStatus::Enabled, Some(t)),
                    Vec::new(),
                )
                .await
                .map(|_| ())
            }
        });
        let (fired, created) = futures_util::future::join(
            futures_util::future::join_all(batches),
            futures_util::future::join_all(creates),
        )
        .await;
        for outcome in fired {
            outcome.expect("a fire batch failed");
        }
        for result in created {
            result.expect("a task create failed");
        }
    }
    // Every task fired at every second once: the overlapping batch of a second either fired
    // it or found it stale and the next round fired it.
    for &id in &tasks_ {
        let (runs, _) = runs_of(&db, id).await;
        let mut seconds: Vec<_> = runs.iter().map(|r| r.scheduled_at).collect();
        seconds.sort();
        seconds.dedup();
        assert_eq!(seconds.len(), runs.len(), "task {id}: one run per second");
    }
}

/// A run as the fire pipeline commits it: READY, its first attempt dispatched and claimed by
/// the firing process until the task's timeout and the claim margin have passed.
#[track_caller]
fn assert_fired(row: &Run, scheduled_at: NaiveDateTime) {
    assert_eq!(row.status, RunStatus::Ready);
    assert_eq!(row.scheduled_at, scheduled_at);
    assert_eq!(row.fired_by, "node-test");
    assert_eq!(row.dispatched_attempt, 1, "claimed at birth");
    assert_eq!(row.claimed_until, Some(fired_claim(scheduled_at)));
    assert_eq!(row.claimed_until, Some(scheduled_at + secs(30 + 10)));
    assert_eq!(row.next_attempt_at, None, "not waiting: dispatched");
    assert_eq!((row.deadline_at, row.finished_at), (None, None));
}

/// A backfill leaves a second alone when its task has a scheduled run of it, also one recorded
/// under an id of another form (an older ax's UUID v5); a manual run does not count.
async fn a_backfill_finds_runs_by_their_second_whatever_their_id(db: &Db) {
    let t0 = base();
    let task = insert_task(db, fields("backfill-ids", "s", TaskStatus::Paused, None)).await;
    let older = RequestId::parse("6f1e0ac4-3b1f-5c43-9d0e-2a7b41c09e55").expect("uuid");
    insert_run(db, &new_instance(task.id, &older, t0, RunStatus::Success)).await;
    let mut manual = origin(task.id, &request_id(), t0 + secs(1));
    manual.trigger_type = TriggerType::Manual;
    insert_run(db, &NewRunRow::new(manual, &NewRun::due(at(t0)))).await;

    let runs: Vec<NewRunRow> = (0..3)
        .map(|k| {
            let second = t0 + secs(k);
            let id = RequestId::scheduled(task.id, at(second));
            let mut backfilled = origin(task.id, &id, second);
            backfilled.trigger_type = TriggerType::Backfill;
            NewRunRow::new(backfilled, &NewRun::due(at(t0)))
        })
        .collect();
    // In a transaction, as the API records one.
    let mut c = conn(db).await;
    let done = c
        .transaction(|c| Box::pin(runs::backfill(c, runs, move |_| NewRun::due(at(t0)))))
        .await
        .expect("backfill");
    assert_eq!((done.runs, done.existing), (2, 1));
    let (rows, _) = runs_of(db, task.id).await;
    let at_t0: Vec<&RequestId> = rows
        .iter()
        .filter(|run| run.scheduled_at == t0)
        .map(|run| &run.request_id)
        .collect();
    assert_eq!(at_t0, vec![&older], "the second recorded once");
    assert_eq!(rows.len(), 4, "{rows:?}");
}
