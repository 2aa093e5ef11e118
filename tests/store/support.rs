//! What every module of the store tests shares: connections, fixed times, task and run
//! fixtures, short forms of the queries, and `on_both_backends!`.

use ax::schedule::RetryPolicy;
use ax::store::models::{InstanceStatus, NewInstance, Task, TaskFields, TaskStatus, TriggerType};
use ax::store::queries::instances::{self, FireOutcome, FireRecord, ResultOutcome, ResultRecord};
use ax::store::queries::tasks;
use ax::store::queries::Page;
use ax::store::{to_db, Conn, Db};
use chrono::{NaiveDate, NaiveDateTime, TimeDelta, Utc};

use crate::common::TestStore;

pub(crate) async fn connect(store: &TestStore) -> Db {
    match Db::connect(&store.url(), 4).await {
        Ok(db) => db,
        Err(err) => panic!("connect to {}: {err}", store.url()),
    }
}

pub(crate) async fn conn(db: &Db) -> Conn {
    match db.conn().await {
        Ok(conn) => conn,
        Err(err) => panic!("take a connection: {err}"),
    }
}

/// A fixed, millisecond-precise reference time.
pub(crate) fn base() -> NaiveDateTime {
    NaiveDate::from_ymd_opt(2027, 3, 4)
        .and_then(|d| d.and_hms_milli_opt(5, 6, 7, 123))
        .expect("valid time")
}

pub(crate) fn secs(n: i64) -> TimeDelta {
    TimeDelta::seconds(n)
}

pub(crate) fn millis(n: i64) -> TimeDelta {
    TimeDelta::milliseconds(n)
}

pub(crate) fn now_db() -> NaiveDateTime {
    to_db(Utc::now())
}

pub(crate) fn fields(
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

pub(crate) async fn insert_task(db: &Db, fields: TaskFields) -> Task {
    tasks::insert(&mut conn(db).await, fields, Vec::new())
        .await
        .expect("insert task")
}

pub(crate) async fn find_task(db: &Db, id: i64) -> Option<Task> {
    tasks::find(&mut conn(db).await, id)
        .await
        .expect("find task")
}

pub(crate) fn request_id() -> String {
    uuid::Uuid::new_v4().to_string()
}

pub(crate) fn new_instance(
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

pub(crate) fn fire_record(
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
pub(crate) async fn record(db: &Db, fires: Vec<FireRecord>) -> Vec<FireOutcome> {
    let mut conn = conn(db).await;
    conn.transaction(move |c| Box::pin(async move { instances::record_fires(c, &fires).await }))
        .await
        .expect("record fires")
}

pub(crate) async fn insert_instance(db: &Db, instance: &NewInstance) -> FireOutcome {
    instances::insert_instance(&mut conn(db).await, instance)
        .await
        .expect("insert instance")
}

pub(crate) async fn runs_of(db: &Db, task_id: i64) -> (Vec<ax::store::models::Instance>, i64) {
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

pub(crate) async fn instance(db: &Db, request_id: &str) -> ax::store::models::Instance {
    instances::find_by_request_id(&mut conn(db).await, request_id)
        .await
        .expect("find instance")
        .unwrap_or_else(|| panic!("no instance {request_id}"))
}

pub(crate) fn result(
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

pub(crate) async fn apply(db: &Db, result: ResultRecord) -> ResultOutcome {
    instances::apply_result(&mut conn(db).await, &result, RetryPolicy::default())
        .await
        .expect("apply result")
}

pub(crate) fn ids(tasks: &[Task]) -> Vec<i64> {
    tasks.iter().map(|t| t.id).collect()
}

pub(crate) fn page(limit: i64, offset: i64) -> Page {
    Page { limit, offset }
}

/// Runs one scenario on a fresh SQLite file and on a fresh MariaDB database.
macro_rules! on_both_backends {
    ($($scenario:ident),+ $(,)?) => {
        $(
            mod $scenario {
                #[actix_rt::test]
                async fn sqlite() {
                    let store = crate::common::TestStore::sqlite();
                    let db = crate::support::connect(&store).await;
                    super::$scenario(&db).await;
                }

                #[actix_rt::test]
                async fn mysql() {
                    let store = crate::common::TestStore::mysql();
                    let db = crate::support::connect(&store).await;
                    assert_eq!(db.backend(), "mysql");
                    super::$scenario(&db).await;
                }
            }
        )+
    };
}

pub(crate) use on_both_backends;
