//! The overlap policy, applied: a due run's task's open runs are read while the caller holds
//! the task's row lock (so of several ax processes one decides at a time), the decision is
//! asked of `crate::run`, and the runs it replaces are ended here.

use std::collections::HashMap;

use chrono::{DateTime, NaiveDateTime, Utc};
use diesel::prelude::*;
use diesel_async::RunQueryDsl;

use super::run_writes::apply;
use crate::metrics::metrics;
use crate::run::{blind, on_due, Event, OpenRun, Overlap, OverlapPolicy, RequestId, RunStatus};
use crate::run::{TaskId, Write, OPEN};
use crate::store::schema::ax_instance::dsl as i;
use crate::store::{from_db, Conn, StoreError};
use crate::with_conn;

/// A run whose first attempt is due, and its task's policy.
#[derive(Debug, Clone, Copy)]
pub struct DueRun<'a> {
    pub task_id: TaskId,
    pub policy: OverlapPolicy,
    pub request_id: &'a RequestId,
    pub scheduled_at: DateTime<Utc>,
}

/// Decides each due run in order, each against its task's open runs earlier than it (the
/// batch's runs before it that stay open included); ends the runs replaced. One read for the batch; nothing at all
/// when every policy is `ALLOW`. The caller holds the tasks' row locks.
pub async fn settle(
    conn: &mut Conn,
    due: &[DueRun<'_>],
    at: DateTime<Utc>,
) -> Result<Vec<Overlap>, StoreError> {
    let mut tasks: Vec<TaskId> = due
        .iter()
        .filter(|run| run.policy != OverlapPolicy::Allow)
        .map(|run| run.task_id)
        .collect();
    if tasks.is_empty() {
        return Ok(vec![Overlap::Proceed; due.len()]);
    }
    tasks.sort_unstable();
    tasks.dedup();
    let mut open = open_runs(conn, &tasks).await?;
    let mut replaced = Vec::new();
    let decisions: Vec<Overlap> = due
        .iter()
        .map(|run| {
            let open = open.entry(run.task_id).or_default();
            let earlier: Vec<OpenRun> = open
                .iter()
                .filter(|other| other.is_before(run.scheduled_at, run.request_id))
                .cloned()
                .collect();
            let decision = on_due(run.policy, &earlier);
            if let Overlap::Replace(ids) = &decision {
                replaced.extend(ids.iter().cloned());
                open.retain(|other| !ids.contains(&other.request_id));
            }
            open.retain(|other| other.request_id != *run.request_id);
            if decision.keeps_open() {
                open.push(OpenRun {
                    request_id: run.request_id.clone(),
                    scheduled_at: run.scheduled_at,
                    buffered: decision == Overlap::Buffer,
                });
            }
            metrics().overlap_decision(&decision);
            decision
        })
        .collect();
    if let Some(write) = blind(&Event::Replaced { at }) {
        let writes: Vec<(&RequestId, &Write)> = replaced.iter().map(|id| (id, &write)).collect();
        apply(conn, &writes).await?;
    }
    Ok(decisions)
}

/// The open runs of these tasks.
async fn open_runs(
    conn: &mut Conn,
    tasks: &[TaskId],
) -> Result<HashMap<TaskId, Vec<OpenRun>>, StoreError> {
    type Row = (TaskId, RequestId, NaiveDateTime, RunStatus, Option<String>);
    let rows: Vec<Row> = with_conn!(conn, |c| i::ax_instance
        .filter(i::task_id.eq_any(tasks))
        .filter(i::status.eq_any(OPEN))
        .select((
            i::task_id,
            i::request_id,
            i::scheduled_at,
            i::status,
            i::callback_code,
        ))
        .load(c)
        .await)?;
    let mut open: HashMap<TaskId, Vec<OpenRun>> = HashMap::new();
    for (task_id, request_id, scheduled_at, status, code) in rows {
        let run = OpenRun::of(request_id, from_db(scheduled_at), status, code.as_deref());
        open.entry(task_id).or_default().push(run);
    }
    Ok(open)
}
