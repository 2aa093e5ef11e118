//! The overlap policy, applied: a due run's task's open runs are read while the caller holds
//! the task's row lock (so of several ax processes one decides at a time), the decisions are
//! asked of `ax_core::run`, and the runs they replace are ended here.

use std::collections::HashMap;

use chrono::{DateTime, NaiveDateTime, Utc};
use diesel::prelude::*;
use diesel_async::RunQueryDsl;

use super::run_writes::{apply, Target};
use crate::rows::schema::ax_instance::dsl as i;
use crate::with_conn;
use crate::{from_db, Conn, StoreError};
use ax_core::metrics::metrics;
use ax_core::run::{
    blind, on_due_runs, sharded, tasks_to_settle, DueRun, Event, OpenRun, Overlap, RequestId,
    RunStatus, TaskId, Write, OPEN,
};

/// Decides each due run in order, each against its task's open runs earlier than it (see
/// `ax_core::run::on_due_runs`); ends the runs replaced. One read for the batch; nothing at all
/// when every policy is `ALLOW`. The caller holds the tasks' row locks.
pub async fn settle(
    conn: &mut Conn,
    due: &[DueRun<'_>],
    at: DateTime<Utc>,
) -> Result<Vec<Overlap>, StoreError> {
    let tasks = tasks_to_settle(due);
    if tasks.is_empty() {
        return Ok(vec![Overlap::Proceed; due.len()]);
    }
    let open = open_runs(conn, &tasks).await?;
    let settled = on_due_runs(due, open);
    for decision in &settled.decisions {
        metrics().overlap_decision(decision);
    }
    if let Some(write) = blind(&Event::Replaced { at }) {
        let writes: Vec<(Target, &Write)> = settled
            .replaced
            .iter()
            .map(|id| (Target::from(id), &write))
            .collect();
        apply(conn, &writes, None).await?;
    }
    Ok(settled.decisions)
}

/// The open runs of these tasks.
async fn open_runs(
    conn: &mut Conn,
    tasks: &[TaskId],
) -> Result<HashMap<TaskId, Vec<OpenRun>>, StoreError> {
    type Row = (
        TaskId,
        RequestId,
        NaiveDateTime,
        RunStatus,
        Option<String>,
        Option<i32>,
    );
    let rows: Vec<Row> = with_conn!(conn, |c| i::ax_instance
        .filter(i::task_id.eq_any(tasks))
        .filter(i::status.eq_any(OPEN))
        .select((
            i::task_id,
            i::request_id,
            i::scheduled_at,
            i::status,
            i::callback_code,
            i::shard_total,
        ))
        .load(c)
        .await)?;
    let mut open: HashMap<TaskId, Vec<OpenRun>> = HashMap::new();
    for (task_id, request_id, scheduled_at, status, code, shards) in rows {
        let run = OpenRun::of(
            request_id,
            from_db(scheduled_at),
            status,
            code.as_deref(),
            sharded(shards),
        );
        open.entry(task_id).or_default().push(run);
    }
    Ok(open)
}
