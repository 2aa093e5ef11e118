//! The query layer on both real backends: every scenario is written once against `Db` and run
//! on a fresh SQLite file and on a fresh MariaDB database.

mod common;

use std::time::{Duration, Instant};

use ax::schedule::RetryPolicy;
use ax::store::models::{InstanceStatus, NewInstance, Task, TaskFields, TaskStatus, TriggerType};
use ax::store::queries::instances::{self, FireOutcome, FireRecord, ResultOutcome, ResultRecord};
use ax::store::queries::tasks::{self, TaskFilter};
use ax::store::queries::Page;
use ax::store::{from_db, to_db, Conn, Db, StoreError};
use chrono::{DateTime, NaiveDate, NaiveDateTime, TimeDelta, Timelike, Utc};
use common::TestStore;

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

async fn connect(store: &TestStore) -> Db {
    match Db::connect(&store.url(), 4).await {
        Ok(db) => db,
        Err(err) => panic!("connect to {}: {err}", store.url()),
    }
}

async fn conn(db: &Db) -> Conn {
    match db.conn().await {
        Ok(conn) => conn,
        Err(err) => panic!("take a connection: {err}"),
    }
}

/// A fixed, millisecond-precise reference time.
fn base() -> NaiveDateTime {
    NaiveDate::from_ymd_opt(2027, 3, 4)
        .and_then(|d| d.and_hms_milli_opt(5, 6, 7, 123))
        .expect("valid time")
}

fn secs(n: i64) -> TimeDelta {
    TimeDelta::seconds(n)
}

fn millis(n: i64) -> TimeDelta {
    TimeDelta::milliseconds(n)
}

fn now_db() -> NaiveDateTime {
    to_db(Utc::now())
}

fn fields(
    name: &str,
    scene: &str,
    status: TaskStatus,
    next_run_at: Option<NaiveDateTime>,
) -> TaskFields {
    TaskFields {
        name: name.into(),
        scene: scene.into(),
        cron: "0 * * * * *".into(),
        handler_url: "http://127.0.0.1:9/run".into(),
        params: r#"{"k":"v"}"#.into(),
        max_retry: 3,
        timeout_ms: 30_000,
        status: status.as_str().into(),
        next_run_at,
        updated_at: now_db(),
        retry_backoff_secs: None,
        retry_factor: None,
        misfire_threshold_secs: None,
        dependency_timeout_secs: None,
    }
}

async fn insert_task(db: &Db, fields: TaskFields) -> Task {
    tasks::insert(&mut conn(db).await, fields, Vec::new())
        .await
        .expect("insert task")
}

async fn find_task(db: &Db, id: i64) -> Option<Task> {
    tasks::find(&mut conn(db).await, id)
        .await
        .expect("find task")
}

fn request_id() -> String {
    uuid::Uuid::new_v4().to_string()
}

fn new_instance(
    task_id: i64,
    request_id: &str,
    scheduled_at: NaiveDateTime,
    status: InstanceStatus,
) -> NewInstance {
    NewInstance {
        task_id,
        request_id: request_id.into(),
        trigger_type: TriggerType::Schedule.as_str().into(),
        scheduled_at,
        trigger_at: now_db(),
        status: status.as_str().into(),
        fired_by: "node-test".into(),
        created_at: now_db(),
        finished_at: None,
        next_attempt_at: None,
        deadline_at: None,
        params: None,
    }
}

fn fire_record(
    task_id: i64,
    request_id: &str,
    scheduled_at: NaiveDateTime,
    next_run_at: Option<NaiveDateTime>,
) -> FireRecord {
    FireRecord {
        scheduled_at,
        next_run_at,
        instance: new_instance(task_id, request_id, scheduled_at, InstanceStatus::Ready),
    }
}

/// Records fires in one transaction, as the StoreActor does.
async fn record(db: &Db, fires: Vec<FireRecord>) -> Vec<FireOutcome> {
    let mut conn = conn(db).await;
    conn.transaction(move |c| Box::pin(async move { instances::record_fires(c, &fires).await }))
        .await
        .expect("record fires")
}

async fn insert_instance(db: &Db, instance: &NewInstance) -> FireOutcome {
    instances::insert_instance(&mut conn(db).await, instance)
        .await
        .expect("insert instance")
}

async fn runs_of(db: &Db, task_id: i64) -> (Vec<ax::store::models::Instance>, i64) {
    instances::list_for_task(
        &mut conn(db).await,
        task_id,
        Page {
            limit: 100,
            offset: 0,
        },
    )
    .await
    .expect("list instances")
}

async fn instance(db: &Db, request_id: &str) -> ax::store::models::Instance {
    instances::find_by_request_id(&mut conn(db).await, request_id)
        .await
        .expect("find instance")
        .unwrap_or_else(|| panic!("no instance {request_id}"))
}

fn result(
    request_id: &str,
    status: InstanceStatus,
    code: Option<&str>,
    message: Option<&str>,
    at: NaiveDateTime,
    deadline: Option<NaiveDateTime>,
) -> ResultRecord {
    ResultRecord {
        request_id: request_id.into(),
        status,
        code: code.map(Into::into),
        message: message.map(Into::into),
        at,
        deadline,
        attempt: None,
        retry_allowed: true,
        batchable: false,
    }
}

async fn apply(db: &Db, result: ResultRecord) -> ResultOutcome {
    instances::apply_result(&mut conn(db).await, &result, RetryPolicy::default())
        .await
        .expect("apply result")
}

fn ids(tasks: &[Task]) -> Vec<i64> {
    tasks.iter().map(|t| t.id).collect()
}

fn page(limit: i64, offset: i64) -> Page {
    Page { limit, offset }
}

/// Runs one scenario on a fresh SQLite file and on a fresh MariaDB database.
macro_rules! on_both_backends {
    ($($scenario:ident),+ $(,)?) => {
        $(
            mod $scenario {
                use super::*;

                #[actix_rt::test]
                async fn sqlite() {
                    let store = TestStore::sqlite();
                    let db = connect(&store).await;
                    super::$scenario(&db).await;
                }

                #[actix_rt::test]
                async fn mysql() {
                    let store = TestStore::mysql();
                    let db = connect(&store).await;
                    assert_eq!(db.backend(), "mysql");
                    super::$scenario(&db).await;
                }
            }
        )+
    };
}

on_both_backends!(
    task_crud,
    record_fires_compare_and_set,
    record_fires_rolls_back_with_its_transaction,
    duplicate_request_id,
    apply_result_transitions,
    apply_result_schedules_retries,
    expired_running_runs_time_out,
    due_attempts_and_claims,
    due_until_pages_by_id,
    times_round_trip_exactly,
    pause_tasks_and_scenes,
    resume_tasks_and_scenes,
    scene_counts_by_status,
    task_dependencies,
    check_pending_follows_upstreams,
    history_filters_and_pages,
    stats_rows_in_range,
    retention_deletes_in_batches,
    signing_secret_is_shared,
    due_attempts_use_manual_params,
    results_applied_at_once,
    fires_recorded_at_once,
    fire_chains_recorded_at_once,
    store_actor_commits_a_backlog_of_results,
);

// ---------------------------------------------------------------------------------------------
// 1. Migrations are idempotent
// ---------------------------------------------------------------------------------------------

async fn migrations_are_idempotent(store: &TestStore) {
    let first = connect(store).await;
    let task = insert_task(
        &first,
        fields("kept", "s", TaskStatus::Enabled, Some(base())),
    )
    .await;
    drop(first);
    // A second start-up finds the schema in place and applies nothing; the data survives.
    let second = connect(store).await;
    let found = find_task(&second, task.id)
        .await
        .expect("the task survives a second connect");
    assert_eq!(found.name, "kept");
    ax::store::run_migrations(ax::store::StoreUrl::parse(&store.url()).expect("url"))
        .await
        .expect("running migrations a third time is a no-op");
    let (rows, total) = tasks::list(
        &mut conn(&second).await,
        &TaskFilter::default(),
        page(10, 0),
    )
    .await
    .expect("list");
    assert_eq!((ids(&rows), total), (vec![task.id], 1));
}

#[actix_rt::test]
async fn migrations_are_idempotent_sqlite() {
    let store = TestStore::sqlite();
    migrations_are_idempotent(&store).await;
    assert!(
        matches!(&store, TestStore::Sqlite(dir) if dir.path().join("ax.db").is_file()),
        "the SQLite file exists"
    );
}

#[actix_rt::test]
async fn migrations_are_idempotent_mysql() {
    migrations_are_idempotent(&TestStore::mysql()).await;
}

#[actix_rt::test]
async fn sqlite_connect_creates_missing_folders() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("a/b/ax.db");
    let db = Db::connect(&format!("sqlite://{}", path.display()), 2)
        .await
        .unwrap_or_else(|err| panic!("connect: {err}"));
    assert_eq!(db.backend(), "sqlite");
    assert!(path.is_file());
}

// ---------------------------------------------------------------------------------------------
// 2. Task CRUD
// ---------------------------------------------------------------------------------------------

async fn task_crud(db: &Db) {
    let a_fields = fields("a", "s1", TaskStatus::Enabled, Some(base()));
    let a = insert_task(db, a_fields.clone()).await;
    assert!(a.id > 0);
    assert_eq!(a.name, "a");
    assert_eq!(a.scene, "s1");
    assert_eq!(a.cron, a_fields.cron);
    assert_eq!(a.handler_url, a_fields.handler_url);
    assert_eq!(a.params, a_fields.params);
    assert_eq!(a.max_retry, 3);
    assert_eq!(a.timeout_ms, 30_000);
    assert_eq!(a.status, "ENABLED");
    assert_eq!(a.next_run_at, Some(base()));
    assert_eq!(a.updated_at, a_fields.updated_at);
    assert_eq!(a.created_at, a.updated_at, "created_at is set on insert");
    assert_eq!(
        (
            a.retry_backoff_secs,
            a.retry_factor,
            a.misfire_threshold_secs
        ),
        (None, None, None)
    );

    let b = insert_task(db, fields("b", "s1", TaskStatus::Paused, None)).await;
    let c = insert_task(db, fields("c", "s2", TaskStatus::Enabled, None)).await;
    assert!(
        a.id < b.id && b.id < c.id,
        "ids grow: {} {} {}",
        a.id,
        b.id,
        c.id
    );
    assert_eq!(b.status, "PAUSED");
    assert_eq!(b.next_run_at, None);

    // find / find_many
    let found = find_task(db, b.id).await.expect("b exists");
    assert_eq!((found.id, found.name.as_str()), (b.id, "b"));
    assert!(find_task(db, c.id + 1000).await.is_none());
    let mut many = tasks::find_many(&mut conn(db).await, vec![a.id, c.id, c.id + 1000])
        .await
        .expect("find_many");
    many.sort_by_key(|t| t.id);
    assert_eq!(ids(&many), vec![a.id, c.id]);

    // list: filters, totals, pages
    let list = |filter: TaskFilter, page: Page| async move {
        tasks::list(&mut conn(db).await, &filter, page)
            .await
            .expect("list")
    };
    let (rows, total) = list(TaskFilter::default(), page(10, 0)).await;
    assert_eq!((ids(&rows), total), (vec![a.id, b.id, c.id], 3));
    let scene = |s: &str| TaskFilter {
        scene: Some(s.into()),
        status: None,
    };
    let (rows, total) = list(scene("s1"), page(10, 0)).await;
    assert_eq!((ids(&rows), total), (vec![a.id, b.id], 2));
    let (rows, total) = list(scene("nope"), page(10, 0)).await;
    assert_eq!((ids(&rows), total), (vec![], 0));
    let enabled = TaskFilter {
        scene: None,
        status: Some(TaskStatus::Enabled),
    };
    let (rows, total) = list(enabled, page(10, 0)).await;
    assert_eq!((ids(&rows), total), (vec![a.id, c.id], 2));
    let disabled_s1 = TaskFilter {
        scene: Some("s1".into()),
        status: Some(TaskStatus::Paused),
    };
    let (rows, total) = list(disabled_s1, page(10, 0)).await;
    assert_eq!((ids(&rows), total), (vec![b.id], 1));
    let (rows, total) = list(TaskFilter::default(), page(1, 1)).await;
    assert_eq!((ids(&rows), total), (vec![b.id], 3), "limit 1 offset 1");
    let (rows, total) = list(TaskFilter::default(), page(2, 2)).await;
    assert_eq!((ids(&rows), total), (vec![c.id], 3), "the last, short page");
    let (rows, total) = list(TaskFilter::default(), page(10, 3)).await;
    assert_eq!((ids(&rows), total), (vec![], 3), "past the end");

    // update replaces every field
    let mut changed = fields("a2", "s9", TaskStatus::Paused, None);
    changed.cron = "*/5 * * * * *".into();
    changed.handler_url = "http://example.test/other".into();
    changed.params = "{}".into();
    changed.max_retry = 0;
    changed.timeout_ms = 1_500;
    changed.updated_at = a.updated_at + secs(60);
    changed.retry_backoff_secs = Some(7);
    changed.retry_factor = Some(2);
    changed.misfire_threshold_secs = Some(90);
    let updated = tasks::update(&mut conn(db).await, a.id, changed.clone(), Vec::new())
        .await
        .expect("update")
        .expect("a exists");
    assert_eq!(updated.id, a.id);
    assert_eq!(updated.name, "a2");
    assert_eq!(updated.scene, "s9");
    assert_eq!(updated.cron, "*/5 * * * * *");
    assert_eq!(updated.handler_url, "http://example.test/other");
    assert_eq!(updated.params, "{}");
    assert_eq!(updated.max_retry, 0);
    assert_eq!(updated.timeout_ms, 1_500);
    assert_eq!(updated.status, "PAUSED");
    assert_eq!(updated.next_run_at, None, "None clears next_run_at");
    assert_eq!(updated.updated_at, changed.updated_at);
    assert_eq!(updated.created_at, a.created_at, "created_at is kept");
    assert_eq!(
        (
            updated.retry_backoff_secs,
            updated.retry_factor,
            updated.misfire_threshold_secs
        ),
        (Some(7), Some(2), Some(90))
    );
    let reread = find_task(db, a.id).await.expect("a exists");
    assert_eq!((reread.name, reread.next_run_at), ("a2".to_string(), None));

    // An update that changes nothing still finds the task (MySQL must count matched rows).
    let same = tasks::update(&mut conn(db).await, a.id, changed.clone(), Vec::new())
        .await
        .expect("update");
    assert!(same.is_some(), "an identical update still returns the task");

    let missing = tasks::update(&mut conn(db).await, c.id + 1000, changed, Vec::new())
        .await
        .expect("update of a missing task is not an error");
    assert!(missing.is_none());

    // delete
    assert!(tasks::delete(&mut conn(db).await, a.id, now_db())
        .await
        .expect("delete"));
    assert!(!tasks::delete(&mut conn(db).await, a.id, now_db())
        .await
        .expect("second delete"));
    assert!(find_task(db, a.id).await.is_none());
    let (rows, total) = list(TaskFilter::default(), page(10, 0)).await;
    assert_eq!((ids(&rows), total), (vec![b.id, c.id], 2));
}

// ---------------------------------------------------------------------------------------------
// 3. record_fires compare-and-set
// ---------------------------------------------------------------------------------------------

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
    assert_eq!(row.status, "READY");
    assert_eq!(row.scheduled_at, t0);
    assert_eq!(row.trigger_type, "SCHEDULE");
    assert_eq!(row.fired_by, "node-test");
    assert_eq!((row.attempt, row.retry_count), (1, 0), "column defaults");
    assert_eq!(row.callback_code, None);
    assert_eq!(row.deadline_at, None);
    assert_eq!(row.finished_at, None);

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
        vec![fire_record(paused.id + 1000, &request_id(), t0, Some(t1))],
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
    let listed: Vec<(&str, NaiveDateTime)> = rows
        .iter()
        .map(|r| (r.request_id.as_str(), r.scheduled_at))
        .collect();
    assert_eq!(listed, vec![(y.as_str(), t1), (x.as_str(), t0)]);

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
                let outcomes = instances::record_fires(c, &fires).await?;
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

// ---------------------------------------------------------------------------------------------
// 4. Duplicate request ids
// ---------------------------------------------------------------------------------------------

async fn duplicate_request_id(db: &Db) {
    let task = insert_task(db, fields("dup", "s", TaskStatus::Enabled, None)).await;
    let rid = request_id();
    let first = new_instance(task.id, &rid, base(), InstanceStatus::Ready);
    assert_eq!(insert_instance(db, &first).await, FireOutcome::Fired);
    let mut second = new_instance(task.id, &rid, base() + secs(5), InstanceStatus::Ready);
    second.trigger_type = TriggerType::Manual.as_str().into();
    assert_eq!(insert_instance(db, &second).await, FireOutcome::Duplicate);
    let (rows, total) = runs_of(db, task.id).await;
    assert_eq!(total, 1);
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].scheduled_at, base(), "the first row is kept");
    assert_eq!(rows[0].trigger_type, "SCHEDULE");

    // The connection is still usable after the violation (also inside a transaction).
    let other = new_instance(
        task.id,
        &request_id(),
        base() + secs(1),
        InstanceStatus::Ready,
    );
    let again = new_instance(task.id, &rid, base() + secs(2), InstanceStatus::Ready);
    let mut conn = conn(db).await;
    let outcomes = conn
        .transaction(move |c| {
            Box::pin(async move {
                Ok(vec![
                    instances::insert_instance(c, &again).await?,
                    instances::insert_instance(c, &other).await?,
                ])
            })
        })
        .await
        .expect("a duplicate does not abort the transaction");
    assert_eq!(outcomes, vec![FireOutcome::Duplicate, FireOutcome::Fired]);
    drop(conn);
    assert_eq!(runs_of(db, task.id).await.1, 2);
}

// ---------------------------------------------------------------------------------------------
// 5. apply_result
// ---------------------------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------------------------
// 6. Expired RUNNING runs
// ---------------------------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------------------------
// Retries: due attempts and dispatch claims
// ---------------------------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------------------------
// 7. due_until
// ---------------------------------------------------------------------------------------------

async fn due_until_pages_by_id(db: &Db) {
    use tasks::DueCursor;
    let until = NaiveDate::from_ymd_opt(2027, 3, 4)
        .and_then(|d| d.and_hms_opt(6, 0, 0))
        .expect("valid time");
    use TaskStatus::*;
    // Inserted out of time order: the result is ordered by (next run, id).
    let plan: Vec<(&str, TaskStatus, Option<NaiveDateTime>, bool)> = vec![
        ("due-late", Enabled, Some(until - millis(1)), true),
        ("not-due-1ms", Enabled, Some(until + millis(1)), false),
        ("due-early", Enabled, Some(until - secs(86_400)), true),
        ("paused-due", Paused, Some(until - secs(5)), false),
        ("due-exactly", Enabled, Some(until), true),
        ("never", Enabled, None, false),
        ("not-due", Enabled, Some(until + secs(3600)), false),
        ("due-mid", Enabled, Some(until - secs(30)), true),
        ("due-mid-too", Enabled, Some(until - secs(30)), true),
        ("due-last", Enabled, Some(until - secs(1)), true),
    ];
    let mut due_tasks = Vec::new();
    for (name, status, next, due) in plan {
        let task = insert_task(db, fields(name, "s", status, next)).await;
        if due {
            due_tasks.push(task);
        }
    }
    due_tasks.sort_by_key(|t| (t.next_run_at, t.id));
    let expected = ids(&due_tasks);
    assert_eq!(expected.len(), 6);

    let due = |cursor: DueCursor, limit: i64| async move {
        tasks::due_until(&mut conn(db).await, cursor, until, limit)
            .await
            .expect("due_until")
    };
    let all = due(DueCursor::start(), 100).await;
    assert_eq!(ids(&all), expected);
    assert!(all.iter().all(|t| t.status == "ENABLED"));

    // Keyset pages of 4: 4, 2, then nothing — also across the two tasks due at one time.
    let mut cursor = DueCursor::start();
    let mut pages = Vec::new();
    loop {
        let page = due(cursor, 4).await;
        let Some(last) = page.last() else {
            break;
        };
        cursor = DueCursor::past(last);
        pages.push(ids(&page));
        assert!(pages.len() <= 5, "paging does not terminate: {pages:?}");
    }
    assert_eq!(pages.iter().map(Vec::len).collect::<Vec<_>>(), vec![4, 2]);
    assert_eq!(pages.concat(), expected);

    // From a time on: only what is due strictly after it (the incremental top-up).
    let after_mid = due(DueCursor::after(until - secs(30)), 100).await;
    assert_eq!(ids(&after_mid), expected[3..].to_vec());
    assert!(due(DueCursor::after(until), 100).await.is_empty());
    // An earlier horizon sees only the earliest task.
    let early = tasks::due_until(
        &mut conn(db).await,
        DueCursor::start(),
        until - secs(3600),
        100,
    )
    .await
    .expect("due_until");
    assert_eq!(ids(&early), vec![expected[0]]);
}

// ---------------------------------------------------------------------------------------------
// 8. Times round-trip exactly
// ---------------------------------------------------------------------------------------------

fn utc(rfc3339: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(rfc3339)
        .unwrap_or_else(|err| panic!("{rfc3339}: {err}"))
        .with_timezone(&Utc)
}

#[test]
fn to_db_truncates_to_milliseconds_in_utc() {
    let t = utc("2027-02-03T04:05:06.123456789Z");
    let stored = to_db(t);
    assert_eq!(stored.nanosecond(), 123_000_000);
    assert_eq!(from_db(stored), utc("2027-02-03T04:05:06.123Z"));
    // Truncated, never rounded up into the next second.
    assert_eq!(
        from_db(to_db(utc("2027-02-03T04:05:06.9999999Z"))),
        utc("2027-02-03T04:05:06.999Z")
    );
    // An offset is converted to UTC.
    assert_eq!(
        to_db(utc("2027-02-03T06:05:06.5+02:00")),
        utc("2027-02-03T04:05:06.5Z").naive_utc()
    );
    assert_eq!(from_db(to_db(t)).timezone(), Utc);
}

async fn times_round_trip_exactly(db: &Db) {
    let times = [
        "2027-02-03T04:05:06Z",
        "2027-02-03T04:05:06.001Z",
        "2027-02-03T04:05:06.010Z",
        "2027-02-03T04:05:06.100Z",
        "2027-02-03T04:05:06.123456789Z",
        "2027-02-03T04:05:06.999999Z",
        "2028-02-29T23:59:59.999Z",
        "2027-02-03T06:05:06.5+02:00",
        "1970-01-01T00:00:00.001Z",
        "9999-12-31T23:59:59.999Z",
    ];
    for text in times {
        let time = utc(text);
        let stored = to_db(time);
        let expected = from_db(stored);
        assert_eq!(
            expected.timestamp_subsec_nanos() % 1_000_000,
            0,
            "{text}: to_db keeps whole milliseconds"
        );

        let task = insert_task(db, fields(text, "times", TaskStatus::Enabled, Some(stored))).await;
        let read = find_task(db, task.id).await.expect("task");
        assert_eq!(
            read.next_run_at.map(from_db),
            Some(expected),
            "{text}: task"
        );
        assert_eq!(
            task.next_run_at,
            Some(stored),
            "{text}: as returned by insert"
        );

        let rid = request_id();
        let mut row = new_instance(task.id, &rid, stored, InstanceStatus::Ready);
        row.trigger_at = stored;
        row.created_at = stored;
        row.finished_at = Some(stored);
        row.next_attempt_at = Some(stored);
        assert_eq!(insert_instance(db, &row).await, FireOutcome::Fired);
        let read = instance(db, &rid).await;
        assert_eq!(from_db(read.scheduled_at), expected, "{text}: scheduled_at");
        assert_eq!(from_db(read.trigger_at), expected, "{text}: trigger_at");
        assert_eq!(
            read.finished_at.map(from_db),
            Some(expected),
            "{text}: finished_at"
        );
        assert_eq!(
            read.next_attempt_at.map(from_db),
            Some(expected),
            "{text}: next_attempt_at"
        );

        // The compare-and-set on next_run_at matches the exact value read back.
        let read_next = find_task(db, task.id)
            .await
            .and_then(|t| t.next_run_at)
            .expect("next_run_at");
        let outcomes = record(
            db,
            vec![fire_record(task.id, &request_id(), read_next, None)],
        )
        .await;
        assert_eq!(
            outcomes,
            vec![FireOutcome::Fired],
            "{text}: compare-and-set"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Bad URLs
// ---------------------------------------------------------------------------------------------

async fn connect_error(url: &str) -> StoreError {
    let started = Instant::now();
    let outcome = Db::connect(url, 2).await;
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "{url}: took {:?}",
        started.elapsed()
    );
    match outcome {
        Ok(db) => panic!("{url}: connected to {}", db.backend()),
        Err(err) => err,
    }
}

#[actix_rt::test]
async fn connect_rejects_unsupported_urls() {
    for url in [
        "postgres://x",
        "bogus://x",
        "sqlite://",
        "mysql://127.0.0.1:3306",
        "mysql://127.0.0.1:3306/",
        "",
    ] {
        let err = connect_error(url).await;
        assert!(matches!(err, StoreError::BadUrl(_)), "{url}: {err:?}");
        let message = err.to_string();
        assert!(
            message.contains("unsupported store URL"),
            "{url}: {message}"
        );
        assert!(message.contains(&format!("`{url}`")), "{url}: {message}");
        assert!(
            message.contains("sqlite://"),
            "names the accepted forms: {message}"
        );
    }
}

#[actix_rt::test]
async fn connect_reports_an_unreachable_mysql() {
    let err = connect_error("mysql://root@127.0.0.1:1/nope").await;
    assert!(matches!(err, StoreError::Connect(_)), "{err:?}");
    let message = err.to_string();
    assert!(
        message.starts_with("cannot connect to the store"),
        "{message}"
    );
    assert!(
        message.len() > "cannot connect to the store: ".len(),
        "{message}"
    );
}

#[actix_rt::test]
async fn connect_reports_an_unwritable_sqlite_path() {
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("plain-file");
    std::fs::write(&file, b"not a folder").expect("write");
    // The store's folder would have to be created under a regular file.
    let err = connect_error(&format!("sqlite://{}/ax.db", file.display())).await;
    assert!(matches!(err, StoreError::Connect(_)), "{err:?}");
    assert!(err.to_string().contains("plain-file"), "{err}");
}

// ---------------------------------------------------------------------------------------------
// Pause and resume
// ---------------------------------------------------------------------------------------------

/// A fixed time on the minute grid.
fn at_hms(h: u32, m: u32, s: u32, ms: u32) -> NaiveDateTime {
    NaiveDate::from_ymd_opt(2027, 3, 4)
        .and_then(|d| d.and_hms_milli_opt(h, m, s, ms))
        .expect("valid time")
}

async fn pause_tasks_and_scenes(db: &Db) {
    use TaskStatus::*;
    let t = base();
    let now = t + secs(60);
    let a = insert_task(db, fields("a", "s1", Enabled, Some(t))).await;
    let b = insert_task(db, fields("b", "s1", Enabled, Some(t + secs(1)))).await;
    let e = insert_task(db, fields("e", "s1", Enabled, None)).await;
    let c = insert_task(db, fields("c", "s1", Paused, None)).await;
    let d = insert_task(db, fields("d", "s2", Enabled, Some(t))).await;

    let pause = |id: i64, at: NaiveDateTime| async move {
        tasks::pause(&mut conn(db).await, id, at)
            .await
            .expect("pause")
    };
    assert!(pause(a.id, now).await, "an enabled task pauses");
    let row = find_task(db, a.id).await.expect("a");
    assert_eq!(row.status, "PAUSED");
    assert_eq!(row.next_run_at, None, "a paused task has no next run");
    assert_eq!(row.updated_at, now);
    assert!(!pause(a.id, now + secs(1)).await, "already paused");
    assert_eq!(
        find_task(db, a.id).await.expect("a").updated_at,
        now,
        "a second pause changes nothing"
    );
    assert!(!pause(c.id, now).await, "a task created paused");
    assert_eq!(
        find_task(db, c.id).await.expect("c").updated_at,
        c.updated_at
    );
    assert!(!pause(d.id + 1000, now).await, "a missing task");

    // The scene: only its enabled tasks (b and e), in one call.
    let pause_scene = |scene: &'static str, at: NaiveDateTime| async move {
        tasks::pause_scene(&mut conn(db).await, scene, at)
            .await
            .expect("pause_scene")
    };
    let later = now + secs(5);
    assert_eq!(pause_scene("s1", later).await, 2);
    for id in [b.id, e.id] {
        let row = find_task(db, id).await.expect("task");
        assert_eq!(
            (row.status.as_str(), row.next_run_at, row.updated_at),
            ("PAUSED", None, later),
            "task {id}"
        );
    }
    assert_eq!(
        find_task(db, a.id).await.expect("a").updated_at,
        now,
        "an already paused task is not touched again"
    );
    assert_eq!(
        find_task(db, c.id).await.expect("c").updated_at,
        c.updated_at
    );
    let other = find_task(db, d.id).await.expect("d");
    assert_eq!(
        (other.status.as_str(), other.next_run_at, other.updated_at),
        ("ENABLED", Some(t), d.updated_at),
        "another scene is untouched"
    );
    assert_eq!(pause_scene("s1", later).await, 0, "nothing left to pause");
    assert_eq!(pause_scene("nope", later).await, 0);
    assert_eq!(pause_scene("s2", later).await, 1);
}

async fn resume_tasks_and_scenes(db: &Db) {
    use TaskStatus::*;
    let t = base();
    let p1 = insert_task(db, fields("p1", "s1", Paused, None)).await;
    let p2 = insert_task(db, fields("p2", "s1", Paused, None)).await;
    let enabled = insert_task(db, fields("on", "s1", Enabled, Some(t + secs(999)))).await;
    let q = insert_task(db, fields("q", "s2", Paused, None)).await;
    let mut every_5s = fields("r", "s2", Paused, None);
    every_5s.cron = "*/5 * * * * *".into();
    let r = insert_task(db, every_5s).await;

    let resume = |which: tasks::Resume, now: NaiveDateTime| async move {
        tasks::resume(&mut conn(db).await, which, from_db(now))
            .await
            .expect("resume")
    };

    // 05:06:07.123 → the next whole minute, 05:07:00.
    let now = at_hms(5, 6, 7, 123);
    let next = at_hms(5, 7, 0, 0);
    let resumed = resume(tasks::Resume::Task(p1.id), now).await;
    assert_eq!(ids(&resumed), vec![p1.id]);
    assert_eq!(resumed[0].status, "ENABLED");
    assert_eq!(resumed[0].next_run_at, Some(next));
    assert_eq!(resumed[0].updated_at, now);
    let row = find_task(db, p1.id).await.expect("p1");
    assert_eq!(
        (row.status.as_str(), row.next_run_at, row.updated_at),
        ("ENABLED", Some(next), now),
        "as stored"
    );

    // Resuming an enabled task (or a missing one) changes nothing.
    let again = now + secs(30);
    assert!(resume(tasks::Resume::Task(p1.id), again).await.is_empty());
    let row = find_task(db, p1.id).await.expect("p1");
    assert_eq!((row.next_run_at, row.updated_at), (Some(next), now));
    assert!(resume(tasks::Resume::Task(enabled.id), again)
        .await
        .is_empty());
    let row = find_task(db, enabled.id).await.expect("enabled");
    assert_eq!(
        (row.status.as_str(), row.next_run_at, row.updated_at),
        ("ENABLED", Some(t + secs(999)), enabled.updated_at)
    );
    assert!(resume(tasks::Resume::Task(r.id + 1000), again)
        .await
        .is_empty());

    // A scene: only its paused tasks; other scenes stay paused.
    let resumed = resume(tasks::Resume::Scene("s1".into()), again).await;
    assert_eq!(ids(&resumed), vec![p2.id]);
    assert_eq!(resumed[0].next_run_at, Some(at_hms(5, 7, 0, 0)));
    let row = find_task(db, p2.id).await.expect("p2");
    assert_eq!(
        (row.status.as_str(), row.next_run_at),
        ("ENABLED", Some(next))
    );
    assert_eq!(
        find_task(db, p1.id).await.expect("p1").updated_at,
        now,
        "already enabled"
    );
    for id in [q.id, r.id] {
        let row = find_task(db, id).await.expect("s2 task");
        assert_eq!((row.status.as_str(), row.next_run_at), ("PAUSED", None));
    }
    assert!(resume(tasks::Resume::Scene("s1".into()), again)
        .await
        .is_empty());
    assert!(resume(tasks::Resume::Scene("nope".into()), again)
        .await
        .is_empty());

    // Strictly after `now`: on a fire time exactly, the next one.
    let on_the_minute = at_hms(5, 10, 0, 0);
    let mut resumed = resume(tasks::Resume::Scene("s2".into()), on_the_minute).await;
    resumed.sort_by_key(|t| t.id);
    let got: Vec<(i64, Option<NaiveDateTime>)> =
        resumed.iter().map(|t| (t.id, t.next_run_at)).collect();
    assert_eq!(
        got,
        vec![
            (q.id, Some(at_hms(5, 11, 0, 0))),
            (r.id, Some(at_hms(5, 10, 5, 0))),
        ]
    );
    for (id, next) in got {
        let row = find_task(db, id).await.expect("task");
        assert_eq!(
            (row.status.as_str(), row.next_run_at, row.updated_at),
            ("ENABLED", next, on_the_minute)
        );
    }
}

async fn scene_counts_by_status(db: &Db) {
    use TaskStatus::*;
    let counts = || async move {
        tasks::scene_counts(&mut conn(db).await)
            .await
            .expect("scene_counts")
    };
    assert!(counts().await.is_empty());
    for (name, scene, status) in [
        ("a", "s2", Enabled),
        ("b", "s1", Paused),
        ("c", "s1", Enabled),
        ("d", "s10", Paused),
        ("e", "s1", Enabled),
        ("f", "s2", Enabled),
        ("g", "s1", Enabled),
    ] {
        insert_task(db, fields(name, scene, status, None)).await;
    }
    let expected: Vec<(String, String, i64)> = [
        ("s1", "ENABLED", 3),
        ("s1", "PAUSED", 1),
        ("s10", "PAUSED", 1),
        ("s2", "ENABLED", 2),
    ]
    .into_iter()
    .map(|(scene, status, n)| (scene.to_string(), status.to_string(), n))
    .collect();
    assert_eq!(counts().await, expected);
}

// ---------------------------------------------------------------------------------------------
// Dependencies
// ---------------------------------------------------------------------------------------------

async fn task_dependencies(db: &Db) {
    use TaskStatus::*;
    let a = insert_task(db, fields("a", "s", Enabled, None)).await;
    let b = insert_task(db, fields("b", "s", Enabled, None)).await;
    let c = insert_task(db, fields("c", "s", Enabled, None)).await;
    let deps_of = |ids: Vec<i64>| async move {
        tasks::dependencies_of(&mut conn(db).await, &ids)
            .await
            .expect("dependencies_of")
    };
    let all = || async move {
        let mut edges = tasks::all_dependencies(&mut conn(db).await)
            .await
            .expect("all_dependencies");
        edges.sort();
        edges
    };
    assert!(all().await.is_empty());

    // Stored with the task, listed by upstream id.
    let d = tasks::insert(
        &mut conn(db).await,
        fields("d", "s", Enabled, None),
        vec![b.id, a.id],
    )
    .await
    .expect("insert with upstreams");
    let deps = deps_of(vec![d.id]).await;
    assert_eq!(deps.len(), 1);
    assert_eq!(deps.get(&d.id), Some(&vec![a.id, b.id]));
    assert!(deps_of(vec![a.id]).await.is_empty(), "a has no upstreams");
    assert!(deps_of(vec![]).await.is_empty());

    let e = tasks::insert(
        &mut conn(db).await,
        fields("e", "s", Enabled, None),
        vec![a.id],
    )
    .await
    .expect("insert with upstreams");
    assert_eq!(all().await, vec![(d.id, a.id), (d.id, b.id), (e.id, a.id)]);
    let deps = deps_of(vec![d.id, e.id, c.id]).await;
    assert_eq!(deps.len(), 2);
    assert_eq!(deps.get(&d.id), Some(&vec![a.id, b.id]));
    assert_eq!(deps.get(&e.id), Some(&vec![a.id]));

    // An update replaces the upstreams.
    tasks::update(
        &mut conn(db).await,
        d.id,
        fields("d", "s", Enabled, None),
        vec![c.id],
    )
    .await
    .expect("update")
    .expect("d exists");
    assert_eq!(deps_of(vec![d.id]).await.get(&d.id), Some(&vec![c.id]));
    assert_eq!(all().await, vec![(d.id, c.id), (e.id, a.id)]);
    // An update of a missing task stores none.
    let missing = tasks::update(
        &mut conn(db).await,
        e.id + 1000,
        fields("x", "s", Enabled, None),
        vec![a.id],
    )
    .await
    .expect("update");
    assert!(missing.is_none());
    assert_eq!(all().await, vec![(d.id, c.id), (e.id, a.id)]);
    // No upstreams clears them.
    tasks::update(
        &mut conn(db).await,
        d.id,
        fields("d", "s", Enabled, None),
        Vec::new(),
    )
    .await
    .expect("update")
    .expect("d exists");
    assert!(deps_of(vec![d.id]).await.is_empty());
    assert_eq!(all().await, vec![(e.id, a.id)]);

    // existing
    let existing = |ids: Vec<i64>| async move {
        let mut found = tasks::existing(&mut conn(db).await, &ids)
            .await
            .expect("existing");
        found.sort();
        found
    };
    assert_eq!(
        existing(vec![e.id, a.id, e.id + 1000]).await,
        vec![a.id, e.id]
    );
    assert!(existing(vec![]).await.is_empty());
    assert!(existing(vec![-1, 0]).await.is_empty());

    // Deleting a task removes its dependency rows.
    assert!(tasks::delete(&mut conn(db).await, e.id, now_db())
        .await
        .expect("delete"));
    assert!(deps_of(vec![e.id]).await.is_empty());
    assert!(all().await.is_empty());
    assert_eq!(existing(vec![e.id, a.id]).await, vec![a.id]);
}

// ---------------------------------------------------------------------------------------------
// check_pending: runs waiting on their upstreams
// ---------------------------------------------------------------------------------------------

async fn check_pending_follows_upstreams(db: &Db) {
    use InstanceStatus::*;
    let t = base();
    let a = insert_task(db, fields("up", "s", TaskStatus::Enabled, None)).await;
    let b = tasks::insert(
        &mut conn(db).await,
        fields("down", "s", TaskStatus::Enabled, None),
        vec![a.id],
    )
    .await
    .expect("insert downstream");

    // The upstream's history.
    let upstream = |at: NaiveDateTime, status: InstanceStatus| {
        let rid = request_id();
        let mut row = new_instance(a.id, &rid, at, status);
        if status.is_final() {
            row.finished_at = Some(at + secs(1));
        }
        (rid, row)
    };
    let (_, a_ok) = upstream(t, Success);
    let (_, a_failed) = upstream(t + secs(10), Failed);
    let (_, a_missed) = upstream(t + secs(20), Missed);
    let (a_running, a_running_row) = upstream(t + secs(30), Running);
    for row in [&a_ok, &a_failed, &a_missed, &a_running_row] {
        assert_eq!(insert_instance(db, row).await, FireOutcome::Fired);
    }

    let now1 = t + secs(100);
    let deadline = t + secs(200);
    let pending = |at: NaiveDateTime, deadline: NaiveDateTime| {
        let rid = request_id();
        let mut row = new_instance(b.id, &rid, at, Pending);
        row.deadline_at = Some(deadline);
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
        assert_eq!(insert_instance(db, row).await, FireOutcome::Fired);
    }
    // A run that is not PENDING is not looked at.
    let ready = request_id();
    insert_instance(db, &new_instance(b.id, &ready, t + secs(7), Ready)).await;

    let check = |now: NaiveDateTime, limit: i64| async move {
        instances::check_pending(&mut conn(db).await, from_db(now), limit)
            .await
            .expect("check_pending")
    };

    // Oldest first, `limit` of them: `early` waits, then `ok` is released.
    assert_eq!(check(now1, 1).await, (0, 0));
    assert_eq!(check(now1, 2).await, (1, 0));
    let row = instance(db, &ok).await;
    assert_eq!(row.status, "READY");
    assert_eq!(row.next_attempt_at, Some(now1), "due at once");
    assert_eq!(row.deadline_at, None);
    assert_eq!((row.finished_at, row.callback_code), (None, None));
    assert_eq!(check(now1, 100).await, (0, 2));

    for (rid, scheduled) in [(&failed, t + secs(10)), (&missed, t + secs(25))] {
        let row = instance(db, rid).await;
        assert_eq!(row.status, "FAILED", "scheduled at {scheduled}");
        assert_eq!(row.callback_code.as_deref(), Some("UPSTREAM_FAILED"));
        assert!(row.callback_message.is_some());
        assert_eq!(row.finished_at, Some(now1));
        assert_eq!(row.deadline_at, None);
        assert_eq!(row.next_attempt_at, None, "no retry");
    }
    for rid in [&early, &waiting] {
        let row = instance(db, rid).await;
        assert_eq!(row.status, "PENDING");
        assert_eq!(row.deadline_at, Some(deadline), "the deadline is kept");
        assert_eq!((row.finished_at, row.callback_code), (None, None));
    }
    let row = instance(db, &ready).await;
    assert_eq!((row.status.as_str(), row.next_attempt_at), ("READY", None));
    assert_eq!(check(now1, 100).await, (0, 0), "nothing changed since");

    // The running upstream succeeds: its downstream is released at the next check.
    let outcome = apply(
        db,
        result(&a_running, Success, None, None, now1 + secs(1), None),
    )
    .await;
    assert_eq!(outcome, ResultOutcome::Applied(Success));
    let now2 = now1 + secs(2);
    assert_eq!(check(now2, 100).await, (1, 0));
    let row = instance(db, &waiting).await;
    assert_eq!(
        (row.status.as_str(), row.next_attempt_at, row.deadline_at),
        ("READY", Some(now2), None)
    );

    // `early` has no upstream run at or before it: PENDING until its deadline, then FAILED.
    assert_eq!(check(deadline - millis(1), 100).await, (0, 0));
    assert_eq!(instance(db, &early).await.status, "PENDING");
    assert_eq!(check(deadline, 100).await, (0, 1));
    let row = instance(db, &early).await;
    assert_eq!(row.status, "FAILED");
    assert_eq!(row.callback_code.as_deref(), Some("DEPENDENCY_TIMEOUT"));
    assert!(row.callback_message.is_some());
    assert_eq!(row.finished_at, Some(deadline));
    assert_eq!(row.deadline_at, None);
    assert_eq!(check(deadline + secs(1), 100).await, (0, 0));

    // A PENDING run that is past its deadline while its upstream still runs times out too.
    let (_, late_running) = upstream(t + secs(300), Running);
    insert_instance(db, &late_running).await;
    let (late, late_row) = pending(t + secs(300), t + secs(310));
    insert_instance(db, &late_row).await;
    assert_eq!(check(t + secs(305), 100).await, (0, 0));
    assert_eq!(check(t + secs(310), 100).await, (0, 1));
    assert_eq!(
        instance(db, &late).await.callback_code.as_deref(),
        Some("DEPENDENCY_TIMEOUT")
    );
}

// ---------------------------------------------------------------------------------------------
// History, stats, retention
// ---------------------------------------------------------------------------------------------

async fn history_filters_and_pages(db: &Db) {
    use ax::store::queries::instances::{Cursor, InstanceFilter};
    use InstanceStatus::*;
    let t = base();
    let x = insert_task(db, fields("x", "s1", TaskStatus::Enabled, None)).await;
    let y = insert_task(db, fields("y", "s2", TaskStatus::Enabled, None)).await;
    // Inserted in this order, so ids grow down the list.
    let plan = [
        ("r1", x.id, t, Success),
        ("r2", x.id, t + secs(10), Failed),
        ("r3", x.id, t + secs(10), Success),
        ("r4", x.id, t + secs(20), Ready),
        ("r5", x.id, t + secs(30), Success),
        ("y1", y.id, t + secs(10), Success),
        ("y2", y.id, t + secs(40), Failed),
    ];
    let mut rid_of = std::collections::HashMap::new();
    for (name, task, at, status) in plan {
        let rid = request_id();
        insert_instance(db, &new_instance(task, &rid, at, status)).await;
        rid_of.insert(rid, name);
    }

    let history = |filter: InstanceFilter, cursor: Option<Cursor>, limit: i64| {
        let rid_of = rid_of.clone();
        async move {
            let rows = instances::history(&mut conn(db).await, &filter, cursor, limit)
                .await
                .expect("history");
            let names: Vec<&str> = rows.iter().map(|r| rid_of[&r.request_id]).collect();
            (names, rows)
        }
    };
    let names = |filter: InstanceFilter| {
        let history = &history;
        async move { history(filter, None, 100).await.0 }
    };
    let all = InstanceFilter::default;

    // Newest scheduled first; the same time by id, newest first.
    assert_eq!(
        names(all()).await,
        vec!["y2", "r5", "r4", "y1", "r3", "r2", "r1"]
    );
    let by_task = InstanceFilter {
        task_id: Some(x.id),
        ..all()
    };
    assert_eq!(
        names(by_task.clone()).await,
        vec!["r5", "r4", "r3", "r2", "r1"]
    );
    let by_scene = |scene: &str| InstanceFilter {
        scene: Some(scene.into()),
        ..all()
    };
    assert_eq!(names(by_scene("s2")).await, vec!["y2", "y1"]);
    assert_eq!(
        names(by_scene("s1")).await,
        vec!["r5", "r4", "r3", "r2", "r1"]
    );
    assert!(names(by_scene("nope")).await.is_empty());
    let by_status = |status: InstanceStatus| InstanceFilter {
        status: Some(status),
        ..all()
    };
    assert_eq!(
        names(by_status(Success)).await,
        vec!["r5", "y1", "r3", "r1"]
    );
    assert_eq!(names(by_status(Failed)).await, vec!["y2", "r2"]);
    assert!(names(by_status(Running)).await.is_empty());
    let from = InstanceFilter {
        from: Some(t + secs(10)),
        ..all()
    };
    assert_eq!(
        names(from).await,
        vec!["y2", "r5", "r4", "y1", "r3", "r2"],
        "from is inclusive"
    );
    let to = InstanceFilter {
        to: Some(t + secs(30)),
        ..all()
    };
    assert_eq!(
        names(to).await,
        vec!["r4", "y1", "r3", "r2", "r1"],
        "to is exclusive"
    );
    let combined = InstanceFilter {
        task_id: Some(x.id),
        scene: Some("s1".into()),
        status: Some(Success),
        from: Some(t + secs(10)),
        to: Some(t + secs(30)),
    };
    assert_eq!(names(combined).await, vec!["r3"]);
    let mismatch = InstanceFilter {
        task_id: Some(x.id),
        scene: Some("s2".into()),
        ..all()
    };
    assert!(names(mismatch).await.is_empty());
    let (limited, _) = history(all(), None, 3).await;
    assert_eq!(limited, vec!["y2", "r5", "r4"]);

    // Cursor pages of 2: every row exactly once, across the tie at t+10.
    let pages_of = |filter: InstanceFilter| {
        let history = &history;
        async move {
            let mut pages: Vec<Vec<&str>> = Vec::new();
            let mut cursor = None;
            loop {
                let (names, rows) = history(filter.clone(), cursor, 2).await;
                if rows.is_empty() {
                    break;
                }
                let last = rows.last().expect("non-empty");
                cursor = Some(Cursor {
                    scheduled_at: last.scheduled_at,
                    id: last.id,
                });
                pages.push(names);
                assert!(pages.len() <= 10, "paging does not terminate: {pages:?}");
            }
            pages
        }
    };
    assert_eq!(
        pages_of(all()).await,
        vec![
            vec!["y2", "r5"],
            vec!["r4", "y1"],
            vec!["r3", "r2"],
            vec!["r1"]
        ]
    );
    assert_eq!(
        pages_of(by_task).await,
        vec![vec!["r5", "r4"], vec!["r3", "r2"], vec!["r1"]]
    );
}

async fn stats_rows_in_range(db: &Db) {
    use InstanceStatus::*;
    let t = base();
    let x = insert_task(db, fields("x", "s", TaskStatus::Enabled, None)).await;
    let y = insert_task(db, fields("y", "s", TaskStatus::Enabled, None)).await;
    let mut expected = Vec::new();
    for (task, at, status, counted) in [
        (x.id, t - millis(1), Success, false),
        (x.id, t, Success, true),
        (x.id, t + secs(5), Failed, true),
        (x.id, t + secs(5), Missed, true),
        (x.id, t + secs(10) - millis(1), Running, true),
        (x.id, t + secs(10), Success, false),
        (y.id, t + secs(5), Success, false),
    ] {
        let mut row = new_instance(task, &request_id(), at, status);
        row.trigger_at = at + millis(250);
        insert_instance(db, &row).await;
        if counted {
            expected.push((status.as_str().to_string(), at, at + millis(250)));
        }
    }
    let mut rows = instances::for_stats(&mut conn(db).await, x.id, t, t + secs(10))
        .await
        .expect("for_stats");
    rows.sort();
    expected.sort();
    assert_eq!(rows, expected);
    let none = instances::for_stats(&mut conn(db).await, x.id, t + secs(20), t + secs(30))
        .await
        .expect("for_stats");
    assert!(none.is_empty());
    let missing = instances::for_stats(&mut conn(db).await, y.id + 1000, t, t + secs(10))
        .await
        .expect("for_stats");
    assert!(missing.is_empty());
}

async fn retention_deletes_in_batches(db: &Db) {
    use InstanceStatus::*;
    let t = base();
    let task = insert_task(db, fields("old", "s", TaskStatus::Enabled, None)).await;
    let before = t + secs(3);
    // Inserted out of order: the oldest finished go first, not the lowest ids.
    let mut rids = std::collections::HashMap::new();
    for (name, status, finished) in [
        ("f3", Success, Some(t + secs(2))),
        ("f1", Failed, Some(t)),
        ("f5", Success, Some(t + secs(10))),
        ("open-ready", Ready, None),
        ("f2", Missed, Some(t + secs(1))),
        ("f4", Success, Some(before)),
        ("open-running", Running, None),
        ("open-pending", Pending, None),
    ] {
        let rid = request_id();
        // Scheduled long ago, so only finished_at decides.
        let mut row = new_instance(task.id, &rid, t - secs(86_400), status);
        row.finished_at = finished;
        insert_instance(db, &row).await;
        rids.insert(name, rid);
    }
    let remaining = || {
        let rids = rids.clone();
        async move {
            let (rows, _) = runs_of(db, task.id).await;
            let mut names: Vec<&str> = rids
                .iter()
                .filter(|(_, rid)| rows.iter().any(|r| &r.request_id == *rid))
                .map(|(name, _)| *name)
                .collect();
            names.sort();
            names
        }
    };
    let delete = |before: NaiveDateTime, limit: i64| async move {
        instances::delete_finished_before(&mut conn(db).await, before, limit)
            .await
            .expect("delete_finished_before")
    };

    assert_eq!(delete(before, 2).await, 2);
    assert_eq!(
        remaining().await,
        vec![
            "f3",
            "f4",
            "f5",
            "open-pending",
            "open-ready",
            "open-running"
        ],
        "the two oldest go first"
    );
    assert_eq!(delete(before, 2).await, 1);
    assert_eq!(
        remaining().await,
        vec!["f4", "f5", "open-pending", "open-ready", "open-running"],
        "finished exactly at `before` stays"
    );
    assert_eq!(delete(before, 2).await, 0, "done");
    // Far in the future: every finished row, but never an open one.
    let future = t + secs(86_400 * 365);
    assert_eq!(delete(future, 100).await, 2);
    assert_eq!(
        remaining().await,
        vec!["open-pending", "open-ready", "open-running"]
    );
    assert_eq!(delete(future, 100).await, 0);
}

// ---------------------------------------------------------------------------------------------
// Meta and manual params
// ---------------------------------------------------------------------------------------------

async fn signing_secret_is_shared(db: &Db) {
    use ax::store::queries::meta;
    let first = meta::signing_secret(&mut conn(db).await, "first-secret".into())
        .await
        .expect("signing_secret");
    assert_eq!(first, "first-secret", "the first call stores its value");
    let second = meta::signing_secret(&mut conn(db).await, "second-secret".into())
        .await
        .expect("signing_secret");
    assert_eq!(second, "first-secret", "later calls read the stored one");
    // Every caller gets the same one.
    let third = meta::signing_secret(&mut conn(db).await, "third-secret".into())
        .await
        .expect("signing_secret");
    assert_eq!(third, "first-secret");
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

// ---------------------------------------------------------------------------------------------
// Many results, and many fires, per statement
// ---------------------------------------------------------------------------------------------

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
    insert_instance(db, &existing).await;
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
        assert_eq!(row.status, "READY");
    }
    let (runs, _) = runs_of(db, tasks_[3].id).await;
    assert_eq!(runs.len(), 1, "no second row for a duplicate");
}

/// A late tick's catch-up fires a task twice in one batch, as a chain: fresh or stale whole.
async fn fire_chains_recorded_at_once(db: &Db) {
    let t = base();
    let a = insert_task(db, fields("a", "s", TaskStatus::Enabled, Some(t))).await;
    let b = insert_task(db, fields("b", "s", TaskStatus::Enabled, Some(t))).await;
    let moved_on = Some(t + secs(5));
    let c = insert_task(db, fields("c", "s", TaskStatus::Enabled, moved_on)).await;
    let fires = vec![
        fire_record(a.id, &request_id(), t, Some(t + secs(1))),
        fire_record(b.id, &request_id(), t, Some(t + secs(1))),
        fire_record(a.id, &request_id(), t + secs(1), Some(t + secs(2))),
        fire_record(c.id, &request_id(), t, Some(t + secs(1))),
        fire_record(c.id, &request_id(), t + secs(1), Some(t + secs(2))),
    ];
    use FireOutcome::*;
    assert_eq!(
        record(db, fires).await,
        vec![Fired, Fired, Fired, Stale, Stale]
    );
    for (task, next, rows) in [
        (&a, Some(t + secs(2)), 2),
        (&b, Some(t + secs(1)), 1),
        (&c, moved_on, 0),
    ] {
        let found = find_task(db, task.id).await.expect("task");
        assert_eq!(found.next_run_at, next, "task {}", task.name);
        assert_eq!(runs_of(db, task.id).await.1, rows, "task {}", task.name);
    }
}

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

/// Fire batches commit side by side on MySQL while tasks are being created, and a tick's
/// batches can overlap the next tick's, which hold the same tasks: none may deadlock.
#[actix_rt::test]
async fn concurrent_fire_batches_do_not_deadlock_mysql() {
    const BATCHES: usize = 8;
    const PER_BATCH: usize = 40;
    let store = TestStore::mysql();
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
    let fire = |ids: &[i64], at: NaiveDateTime| {
        let db = db.clone();
        let fires: Vec<FireRecord> = ids
            .iter()
            .map(|&id| fire_record(id, &request_id(), at, Some(at + secs(1))))
            .collect();
        async move {
            let mut conn = conn(&db).await;
            conn.transaction(move |c| {
                Box::pin(async move { instances::record_fires(c, &fires).await })
            })
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
