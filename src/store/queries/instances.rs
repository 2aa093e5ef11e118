//! Instance rows: recording fires, applying results, and the run history.

use chrono::NaiveDateTime;
use diesel::prelude::*;
use diesel::result::{DatabaseErrorKind, Error as DieselError};
use diesel_async::RunQueryDsl;

use super::Page;
use crate::store::models::{Instance, InstanceStatus, NewInstance, TaskStatus};
use crate::store::schema::ax_instance::dsl as i;
use crate::store::schema::ax_task::dsl as t;
use crate::store::{Conn, StoreError};
use crate::with_conn;

/// A due run to record: advance the task from `scheduled_at` to `next_run_at` and insert the run.
#[derive(Debug, Clone)]
pub struct FireRecord {
    pub scheduled_at: NaiveDateTime,
    pub next_run_at: Option<NaiveDateTime>,
    pub instance: NewInstance,
}

/// What became of one fire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FireOutcome {
    /// The run's row is committed; it may be dispatched.
    Fired,
    /// The task no longer holds the scheduled time (fired elsewhere, changed, paused, deleted).
    Stale,
    /// A row with this request id exists already.
    Duplicate,
}

/// Records a batch of fires in the caller's transaction: for each, compare-and-set the task's
/// `next_run_at` on the scheduled value, and insert the run only if that succeeded.
pub async fn record_fires(
    conn: &mut Conn,
    fires: &[FireRecord],
) -> Result<Vec<FireOutcome>, StoreError> {
    let mut outcomes = Vec::with_capacity(fires.len());
    for fire in fires {
        let advanced = with_conn!(conn, |c| diesel::update(
            t::ax_task
                .filter(t::id.eq(fire.instance.task_id))
                .filter(t::status.eq(TaskStatus::Enabled.as_str()))
                .filter(t::next_run_at.eq(fire.scheduled_at))
        )
        .set(t::next_run_at.eq(fire.next_run_at))
        .execute(c)
        .await)?;
        if advanced == 0 {
            outcomes.push(FireOutcome::Stale);
            continue;
        }
        outcomes.push(insert_instance(conn, &fire.instance).await?);
    }
    Ok(outcomes)
}

/// Inserts a run; a duplicate request id is an outcome, not an error (the unique key is the
/// last guard against a second row for one run).
pub async fn insert_instance(
    conn: &mut Conn,
    instance: &NewInstance,
) -> Result<FireOutcome, StoreError> {
    let inserted = with_conn!(conn, |c| diesel::insert_into(i::ax_instance)
        .values(instance)
        .execute(c)
        .await);
    match inserted {
        Ok(_) => Ok(FireOutcome::Fired),
        Err(DieselError::DatabaseError(DatabaseErrorKind::UniqueViolation, _)) => {
            Ok(FireOutcome::Duplicate)
        }
        Err(err) => Err(err.into()),
    }
}

/// A reported state of a run: from the dispatcher (RUNNING, or a synchronous result) or from
/// the executor's callback.
#[derive(Debug, Clone)]
pub struct ResultRecord {
    pub request_id: String,
    pub status: InstanceStatus,
    pub code: Option<String>,
    pub message: Option<String>,
    pub at: NaiveDateTime,
    /// For RUNNING: when the run times out without a result.
    pub deadline: Option<NaiveDateTime>,
}

/// What became of one result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResultOutcome {
    Applied,
    /// The run had already reached this final state; nothing changed.
    AlreadyFinal(InstanceStatus),
    /// RUNNING reported for a run that had moved on already; nothing changed.
    Superseded,
    Unknown,
}

const OPEN: [&str; 3] = ["PENDING", "READY", "RUNNING"];

/// Applies one result: RUNNING only to a READY run, a final state only to an open run, so a
/// late or repeated report never overwrites a final one.
pub async fn apply_result(
    conn: &mut Conn,
    result: &ResultRecord,
) -> Result<ResultOutcome, StoreError> {
    let target = i::ax_instance.filter(i::request_id.eq(&result.request_id));
    let changed = if result.status == InstanceStatus::Running {
        with_conn!(conn, |c| diesel::update(
            target.filter(i::status.eq(InstanceStatus::Ready.as_str()))
        )
        .set((
            i::status.eq(InstanceStatus::Running.as_str()),
            i::deadline_at.eq(result.deadline),
        ))
        .execute(c)
        .await)?
    } else {
        with_conn!(conn, |c| diesel::update(
            target.filter(i::status.eq_any(OPEN))
        )
        .set((
            i::status.eq(result.status.as_str()),
            i::callback_code.eq(&result.code),
            i::callback_message.eq(&result.message),
            i::finished_at.eq(result.at),
        ))
        .execute(c)
        .await)?
    };
    if changed > 0 {
        return Ok(ResultOutcome::Applied);
    }
    let current: Option<String> =
        with_conn!(conn, |c| target.select(i::status).first(c).await.optional())?;
    Ok(match current.as_deref().and_then(InstanceStatus::parse) {
        None => ResultOutcome::Unknown,
        Some(status) if status.is_final() => ResultOutcome::AlreadyFinal(status),
        Some(_) => ResultOutcome::Superseded,
    })
}

/// Fails RUNNING runs whose deadline passed with no result; returns how many.
pub async fn fail_expired(conn: &mut Conn, now: NaiveDateTime) -> Result<usize, StoreError> {
    Ok(with_conn!(conn, |c| diesel::update(
        i::ax_instance
            .filter(i::status.eq(InstanceStatus::Running.as_str()))
            .filter(i::deadline_at.lt(now))
    )
    .set((
        i::status.eq(InstanceStatus::Failed.as_str()),
        i::callback_code.eq("TIMEOUT"),
        i::callback_message.eq("no result before the task's timeoutMs"),
        i::finished_at.eq(now),
    ))
    .execute(c)
    .await)?)
}

/// The run with this request id.
pub async fn find_by_request_id(
    conn: &mut Conn,
    request_id: &str,
) -> Result<Option<Instance>, StoreError> {
    Ok(with_conn!(conn, |c| i::ax_instance
        .filter(i::request_id.eq(request_id))
        .select(Instance::as_select())
        .first(c)
        .await
        .optional())?)
}

/// A task's runs, newest scheduled first, with their total count.
pub async fn list_for_task(
    conn: &mut Conn,
    task_id: i64,
    page: Page,
) -> Result<(Vec<Instance>, i64), StoreError> {
    Ok(with_conn!(conn, |c| {
        let total: i64 = i::ax_instance
            .filter(i::task_id.eq(task_id))
            .count()
            .get_result(c)
            .await?;
        let rows = i::ax_instance
            .filter(i::task_id.eq(task_id))
            .order((i::scheduled_at.desc(), i::id.desc()))
            .limit(page.limit)
            .offset(page.offset)
            .select(Instance::as_select())
            .load(c)
            .await?;
        (rows, total)
    }))
}
