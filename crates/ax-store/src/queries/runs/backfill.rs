//! Recording a backfill's runs, paced after the task's last one.

use std::collections::HashSet;

use chrono::NaiveDateTime;
use diesel::prelude::*;
use diesel::result::{DatabaseErrorKind, Error as DieselError};
use diesel_async::RunQueryDsl;

use super::fires::{insert_run, insert_runs, FireOutcome};
use crate::rows::models::NewRunRow;
use crate::rows::schema::ax_instance::dsl as i;
use crate::with_conn;
use crate::{Conn, StoreError};
use ax_core::run::{NewRun, RunStatus, TaskId, TriggerType};

/// What a backfill recorded: new runs, and runs that existed already (left alone).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backfilled {
    pub runs: usize,
    pub existing: usize,
}

/// Records a backfill's runs in the caller's transaction: each of `runs` whose task has no
/// scheduled or backfilled run of that second yet is inserted as it is, the `n`-th new one
/// due at `due(n)`; the others are left alone. Many rows to a statement. Runs are found by
/// (task, second), not by request id: a run recorded before scheduled ids sorted by time (a
/// UUID v5 then) counts too.
pub async fn backfill(
    conn: &mut Conn,
    mut runs: Vec<NewRunRow>,
    due: impl Fn(usize) -> NewRun,
) -> Result<Backfilled, StoreError> {
    let total = runs.len();
    let mut existing = HashSet::new();
    for chunk in runs.chunks(1000) {
        let tasks: HashSet<TaskId> = chunk.iter().map(|run| run.task_id).collect();
        let seconds: Vec<NaiveDateTime> = chunk.iter().map(|run| run.scheduled_at).collect();
        let found: Vec<(TaskId, NaiveDateTime)> = with_conn!(conn, |c| i::ax_instance
            .filter(i::task_id.eq_any(tasks.iter().copied()))
            .filter(i::scheduled_at.eq_any(&seconds))
            .filter(i::trigger_type.ne(TriggerType::Manual))
            .select((i::task_id, i::scheduled_at))
            .load(c)
            .await)?;
        existing.extend(found);
    }
    runs.retain(|run| !existing.contains(&(run.task_id, run.scheduled_at)));
    for (n, run) in runs.iter_mut().enumerate() {
        run.set_state(&due(n));
    }
    let mut inserted = 0;
    for chunk in runs.chunks(200) {
        let chunk: Vec<&NewRunRow> = chunk.iter().collect();
        inserted += match insert_runs(conn, &chunk).await {
            Ok(()) => chunk.len(),
            // The scheduler fired one of them meanwhile: the rest go one by one.
            Err(StoreError::Query(DieselError::DatabaseError(
                DatabaseErrorKind::UniqueViolation,
                _,
            ))) => {
                let mut added = 0;
                for run in chunk {
                    added += usize::from(insert_run(conn, run).await? == FireOutcome::Fired);
                }
                added
            }
            Err(err) => return Err(err),
        };
    }
    Ok(Backfilled {
        runs: inserted,
        existing: total - inserted,
    })
}

/// When the last backfilled run of the task still waiting for its first attempt is due: a
/// new backfill is paced after it, so two of them never go out faster together.
pub async fn last_backfill_due(
    conn: &mut Conn,
    task_id: TaskId,
) -> Result<Option<NaiveDateTime>, StoreError> {
    Ok(with_conn!(conn, |c| i::ax_instance
        .filter(i::task_id.eq(task_id))
        .filter(i::status.eq(RunStatus::Ready))
        .filter(i::trigger_type.eq(TriggerType::Backfill))
        .filter(i::dispatched_attempt.eq(0))
        .select(diesel::dsl::max(i::next_attempt_at))
        .first(c)
        .await)?)
}
