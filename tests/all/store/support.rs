//! What every module of the store tests shares: connections, fixed times, task and run
//! fixtures, events and short forms of the queries, and `on_every_backend!`.

use ax_core::run::{
    claim_until, Decided, Event, NewRun, Outcome, OverlapPolicy, Refusal, Report, RequestId,
    RetryPolicy, RunState, RunStatus, TaskId, TriggerType,
};
use ax_store::queries::due::{self, DueAttempt};
use ax_store::queries::runs::{self, FireOutcome, FireRecord};
use ax_store::queries::tasks;
use ax_store::queries::transitions;
use ax_store::queries::Page;
use ax_store::rows::models::{NewRunRow, Run, RunOrigin, Task, TaskFields, TaskStatus};
use ax_store::{from_db, to_db, Conn, Db};
use chrono::{DateTime, NaiveDate, NaiveDateTime, TimeDelta, Utc};

use crate::common::TestStore;

pub(crate) async fn connect(store: &TestStore) -> Db {
    let db = match Db::connect(&store.url(), 4).await {
        Ok(db) => db,
        Err(err) => panic!("connect to {}: {err}", store.url()),
    };
    assert_eq!(db.backend(), store.backend(), "{}", store.url());
    db
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

/// A stored time as the lifecycle takes it.
pub(crate) fn at(time: NaiveDateTime) -> DateTime<Utc> {
    from_db(time)
}

/// The timeout of the tasks `fields` makes.
pub(crate) const TIMEOUT_MS: i64 = 30_000;

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
        timeout_ms: TIMEOUT_MS,
        status,
        next_run_at,
        updated_at: now_db(),
        retry_backoff_secs: None,
        retry_factor: None,
        misfire_threshold_secs: None,
        dependency_timeout_secs: None,
        time_zone: "UTC".into(),
        overlap: OverlapPolicy::Allow,
        jitter_secs: 0,
        labels: ax_core::task::labels::Labels::default(),
        executor: None,
        alerts: None,
        alert_lag_ms: None,
        calendars: None,
    }
}

pub(crate) fn with_retry(mut fields: TaskFields, max_retry: i32) -> TaskFields {
    fields.max_retry = max_retry;
    fields
}

pub(crate) async fn insert_task(db: &Db, fields: TaskFields) -> Task {
    tasks::insert(&mut conn(db).await, fields, Vec::new())
        .await
        .expect("insert task")
        .expect("no upstreams to refuse")
}

pub(crate) async fn find_task(db: &Db, id: TaskId) -> Option<Task> {
    tasks::find(&mut conn(db).await, id)
        .await
        .expect("find task")
}

pub(crate) fn request_id() -> RequestId {
    RequestId::manual()
}

/// Who a test run is: a scheduled run of `task_id`, fired by "node-test" now.
pub(crate) fn origin(
    task_id: TaskId,
    request_id: &RequestId,
    scheduled_at: NaiveDateTime,
) -> RunOrigin {
    RunOrigin {
        task_id,
        request_id: request_id.clone(),
        trigger_type: TriggerType::Schedule,
        scheduled_at: at(scheduled_at),
        trigger_at: Utc::now(),
        created_at: Utc::now(),
        fired_by: "node-test".into(),
        params: None,
    }
}

/// A run born as `run`.
pub(crate) fn born(
    task_id: TaskId,
    request_id: &RequestId,
    scheduled_at: NaiveDateTime,
    run: &NewRun,
) -> NewRunRow {
    NewRunRow::new(origin(task_id, request_id, scheduled_at), run)
}

/// A row in `status` with nothing else set: not due, not claimed, no deadline; its first
/// attempt counts as dispatched once the run is past READY (as the migration made them).
pub(crate) fn new_instance(
    task_id: TaskId,
    request_id: &RequestId,
    scheduled_at: NaiveDateTime,
    status: RunStatus,
) -> NewRunRow {
    let dispatched = matches!(
        status,
        RunStatus::Running | RunStatus::Success | RunStatus::Failed
    );
    let run = NewRun {
        status,
        dispatched: i32::from(dispatched),
        next_attempt_at: None,
        claimed_until: None,
        deadline_at: None,
        finished_at: None,
        code: None,
        message: None,
    };
    born(task_id, request_id, scheduled_at, &run)
}

/// When the claim of a run fired for `scheduled_at` lapses (tasks of `fields`).
pub(crate) fn fired_claim(scheduled_at: NaiveDateTime) -> NaiveDateTime {
    to_db(claim_until(at(scheduled_at), TIMEOUT_MS))
}

/// A scheduled run as the fire pipeline commits it: READY, its first attempt claimed by
/// "node-test" until [`fired_claim`].
pub(crate) fn fired(
    task_id: TaskId,
    request_id: &RequestId,
    scheduled_at: NaiveDateTime,
) -> NewRunRow {
    let run = NewRun::fired(at(fired_claim(scheduled_at)));
    born(task_id, request_id, scheduled_at, &run)
}

pub(crate) fn fire_record(
    task_id: TaskId,
    request_id: &RequestId,
    scheduled_at: NaiveDateTime,
    next_run_at: Option<NaiveDateTime>,
) -> FireRecord {
    FireRecord {
        scheduled_at,
        next_run_at,
        instance: fired(task_id, request_id, scheduled_at),
        siblings: Vec::new(),
        overlap: OverlapPolicy::Allow,
        version: 1,
    }
}

/// Records fires in one transaction, as the StoreActor does.
pub(crate) async fn record(db: &Db, fires: Vec<FireRecord>) -> Vec<FireOutcome> {
    let mut conn = conn(db).await;
    conn.transaction(move |c| Box::pin(async move { runs::record_fires(c, &fires).await }))
        .await
        .expect("record fires")
}

pub(crate) async fn insert_run(db: &Db, instance: &NewRunRow) -> FireOutcome {
    runs::insert_run(&mut conn(db).await, instance)
        .await
        .expect("insert instance")
}

pub(crate) async fn runs_of(db: &Db, task_id: TaskId) -> (Vec<Run>, i64) {
    runs::list_for_task(
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

pub(crate) async fn instance(db: &Db, request_id: &RequestId) -> Run {
    runs::find_by_request_id(&mut conn(db).await, request_id)
        .await
        .expect("find instance")
        .unwrap_or_else(|| panic!("no instance {request_id}"))
}

/// Every column of a run's row that a transition can change.
pub(crate) type Columns = (
    RunStatus,
    i32,
    i32,
    i32,
    Option<String>,
    Option<String>,
    Option<NaiveDateTime>,
    Option<NaiveDateTime>,
    Option<NaiveDateTime>,
    Option<NaiveDateTime>,
    String,
);

/// (status, attempt, dispatched, retries, code, message, next attempt, claimed until,
/// deadline, finished, claimant) of a row.
pub(crate) fn columns(row: &Run) -> Columns {
    (
        row.status,
        row.attempt,
        row.dispatched_attempt,
        row.retry_count,
        row.callback_code.clone(),
        row.callback_message.clone(),
        row.next_attempt_at,
        row.claimed_until,
        row.deadline_at,
        row.finished_at,
        row.fired_by.to_string(),
    )
}

pub(crate) async fn columns_of(db: &Db, request_id: &RequestId) -> Columns {
    columns(&instance(db, request_id).await)
}

/// The run's state as the lifecycle sees it (default back-off).
pub(crate) async fn state(db: &Db, request_id: &RequestId) -> RunState {
    transitions::states(
        &mut conn(db).await,
        std::slice::from_ref(request_id),
        RetryPolicy::default(),
    )
    .await
    .expect("states")
    .remove(request_id)
    .unwrap_or_else(|| panic!("no state of {request_id}"))
}

pub(crate) fn report(attempt: Option<i32>, outcome: Outcome, when: NaiveDateTime) -> Event {
    Event::Report(Report {
        attempt,
        outcome,
        at: at(when),
        sent_at: None,
        member: None,
    })
}

pub(crate) fn succeeded(code: Option<&str>, message: Option<&str>) -> Outcome {
    Outcome::Succeeded {
        code: code.map(Into::into),
        message: message.map(Into::into),
    }
}

/// A failure the executor allows a retry of.
pub(crate) fn failed(code: Option<&str>, message: Option<&str>) -> Outcome {
    Outcome::Failed {
        code: code.map(Into::into),
        message: message.map(Into::into),
        retry: true,
    }
}

/// A failure the executor said not to retry.
pub(crate) fn failed_for_good(code: Option<&str>) -> Outcome {
    Outcome::Failed {
        code: code.map(Into::into),
        message: None,
        retry: false,
    }
}

pub(crate) fn accepted(deadline: NaiveDateTime) -> Outcome {
    Outcome::Accepted {
        deadline: at(deadline),
    }
}

/// Decides `event` for a run and writes it (`transitions::decide`, default back-off).
pub(crate) async fn decide(db: &Db, request_id: &RequestId, event: &Event) -> Decided {
    transitions::decide(
        &mut conn(db).await,
        request_id,
        event,
        RetryPolicy::default(),
    )
    .await
    .expect("decide")
}

/// The state an event left, which it must have changed.
#[track_caller]
pub(crate) fn applied(decided: Decided) -> RunState {
    match decided {
        Decided::Applied(run) => run,
        other => panic!("expected a write, got {other:?}"),
    }
}

/// Why an event changed nothing, which it must have.
#[track_caller]
pub(crate) fn refused(decided: Decided) -> Refusal {
    match decided {
        Decided::Refused(refusal, _) => refusal,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

/// The run with what its dispatch needs, as the attempt scan reads it.
pub(crate) async fn due_attempt(db: &Db, request_id: &RequestId) -> DueAttempt {
    due::attempts_of(&mut conn(db).await, std::slice::from_ref(request_id))
        .await
        .expect("attempts_of")
        .pop()
        .unwrap_or_else(|| panic!("no attempt of {request_id}"))
}

/// The claim a dispatcher of `claimant` makes at `now` on the attempt it read.
pub(crate) fn claim_event(due: &DueAttempt, claimant: &str, now: NaiveDateTime) -> Event {
    Event::Claim {
        attempt: due.run.attempt,
        claimant: claimant.into(),
        until: claim_until(at(now), due.timeout_ms),
        at: at(now),
    }
}

/// Claims the run's current attempt for `claimant` at `now` (`due::claim`, as the fire
/// pipeline does); returns whether the claim won.
pub(crate) async fn claim(
    db: &Db,
    request_id: &RequestId,
    claimant: &str,
    now: NaiveDateTime,
) -> bool {
    let due = due_attempt(db, request_id).await;
    let event = claim_event(&due, claimant, now);
    due::claim(&mut conn(db).await, &due, &event)
        .await
        .expect("claim")
}

pub(crate) fn ids(tasks: &[Task]) -> Vec<TaskId> {
    tasks.iter().map(|t| t.id).collect()
}

pub(crate) fn page(limit: i64, offset: i64) -> Page {
    Page { limit, offset }
}

/// Runs each scenario, an `async fn(&Db)`, on a fresh SQLite file, MariaDB database and
/// PostgreSQL database: [`on_each_backend!`](crate::common::on_each_backend) with the store
/// connected, as the tests `{scenario}::sqlite`, `{scenario}::mysql` and
/// `{scenario}::postgres`.
macro_rules! on_every_backend {
    ($($scenario:ident),+ $(,)?) => {
        $(
            mod $scenario {
                async fn on(store: crate::common::TestStore) {
                    let db = crate::store::support::connect(&store).await;
                    super::$scenario(&db).await;
                }

                crate::common::on_each_backend!(
                    on,
                    sqlite: sqlite,
                    mariadb: mysql,
                    postgres: postgres
                );
            }
        )+
    };
}

pub(crate) use on_every_backend;

/// Sets when a run's first attempt was sent, as its reply would.
pub(crate) async fn set_dispatched_at(db: &Db, request_id: &RequestId, at: NaiveDateTime) {
    use ax_store::rows::schema::ax_instance::dsl as i;
    use diesel::prelude::*;
    use diesel_async::RunQueryDsl;
    let mut c = conn(db).await;
    let changed = ax_store::with_conn!(&mut c, |c| diesel::update(
        i::ax_instance.filter(i::request_id.eq(request_id))
    )
    .set(i::dispatched_at.eq(Some(at)))
    .execute(c)
    .await)
    .expect("set dispatched_at");
    assert_eq!(changed, 1);
}
