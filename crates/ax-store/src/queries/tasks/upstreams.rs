//! A task's upstreams: checking them (known tasks, no cycle), writing and reading the
//! dependency edges.

use std::collections::{HashMap, HashSet};

use diesel::prelude::*;
use diesel_async::RunQueryDsl;

use crate::queries::meta;
use crate::rows::models::Task;
use crate::rows::schema::ax_task::dsl as t;
use crate::rows::schema::ax_task_dependency::dsl as d;
use crate::{server_or_sqlite, with_conn};
use crate::{Conn, StoreError};
use ax_core::run::TaskId;
use ax_core::task::dependencies::dependency_cycle;

/// Why a task's upstreams cannot be what was asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UpstreamProblem {
    /// These tasks do not exist.
    Unknown(Vec<TaskId>),
    /// They would close this cycle: a path from the task back to itself.
    Cycle(Vec<TaskId>),
}

/// Checks a task's new upstreams in the caller's transaction, and keeps them so until it
/// commits: the upstream rows are locked (a concurrent delete waits), and so is the graph (a
/// concurrent change cannot close the other half of a cycle).
pub(super) async fn check_upstreams(
    conn: &mut Conn,
    task: Option<TaskId>,
    depends_on: &[TaskId],
) -> Result<Option<UpstreamProblem>, StoreError> {
    Ok(check_all_upstreams(conn, &[(task, depends_on)])
        .await?
        .map(|(_, problem)| problem))
}

/// Checks the new upstreams of several tasks (`None` for a new task) as `check_upstreams`
/// does, each on the graph the earlier ones leave: the first problem, with its index.
pub(super) async fn check_all_upstreams(
    conn: &mut Conn,
    tasks: &[(Option<TaskId>, &[TaskId])],
) -> Result<Option<(usize, UpstreamProblem)>, StoreError> {
    let mut wanted: Vec<TaskId> = tasks
        .iter()
        .flat_map(|(_, up)| up.iter().copied())
        .collect();
    if wanted.is_empty() {
        return Ok(None);
    }
    wanted.sort_unstable();
    wanted.dedup();
    meta::lock_dependency_graph(conn).await?;
    let query = t::ax_task.filter(t::id.eq_any(&wanted)).select(t::id);
    let found: Vec<TaskId> =
        server_or_sqlite!(conn, |c| query.for_update().load(c).await?, |c| query
            .load(c)
            .await?);
    // A new task has no downstreams yet: only changed ones can close a cycle.
    let mut edges = match tasks.iter().any(|(task, _)| task.is_some()) {
        true => all_dependencies(conn).await?,
        false => Vec::new(),
    };
    for (index, &(task, depends_on)) in tasks.iter().enumerate() {
        let unknown: Vec<TaskId> = depends_on
            .iter()
            .copied()
            .filter(|id| !found.contains(id))
            .collect();
        if !unknown.is_empty() {
            return Ok(Some((index, UpstreamProblem::Unknown(unknown))));
        }
        let Some(task) = task else { continue };
        if let Some(cycle) = dependency_cycle(&edges, task, depends_on) {
            return Ok(Some((index, UpstreamProblem::Cycle(cycle))));
        }
        edges.retain(|(from, _)| *from != task);
        edges.extend(depends_on.iter().map(|&up| (task, up)));
    }
    Ok(None)
}

/// Replaces a task's upstreams.
pub(super) async fn set_dependencies(
    conn: &mut Conn,
    id: TaskId,
    depends_on: &[TaskId],
) -> Result<(), StoreError> {
    with_conn!(conn, |c| {
        diesel::delete(d::ax_task_dependency.filter(d::task_id.eq(id)))
            .execute(c)
            .await?;
        // One row at a time: the async SQLite wrapper has no multi-row insert.
        for upstream in depends_on {
            diesel::insert_into(d::ax_task_dependency)
                .values((d::task_id.eq(id), d::depends_on.eq(*upstream)))
                .execute(c)
                .await?;
        }
    });
    Ok(())
}

/// The upstreams of these tasks, by task.
pub async fn dependencies_of(
    conn: &mut Conn,
    ids: &[TaskId],
) -> Result<HashMap<TaskId, Vec<TaskId>>, StoreError> {
    let edges: Vec<(TaskId, TaskId)> = with_conn!(conn, |c| d::ax_task_dependency
        .filter(d::task_id.eq_any(ids))
        .order((d::task_id, d::depends_on))
        .select((d::task_id, d::depends_on))
        .load(c)
        .await)?;
    let mut by_task: HashMap<TaskId, Vec<TaskId>> = HashMap::new();
    for (task, upstream) in edges {
        by_task.entry(task).or_default().push(upstream);
    }
    Ok(by_task)
}

/// Every dependency edge (task, upstream), for cycle checks.
pub async fn all_dependencies(conn: &mut Conn) -> Result<Vec<(TaskId, TaskId)>, StoreError> {
    Ok(with_conn!(conn, |c| d::ax_task_dependency
        .select((d::task_id, d::depends_on))
        .load(c)
        .await)?)
}

/// Each of these tasks with whether it has upstreams (what its wheel entry needs, see
/// `models::wheel_entries`).
pub async fn with_upstreams_known(
    conn: &mut Conn,
    tasks: Vec<Task>,
) -> Result<Vec<(Task, bool)>, StoreError> {
    let ids: Vec<TaskId> = tasks.iter().map(|task| task.id).collect();
    let flags: Vec<(TaskId, bool)> = with_conn!(conn, |c| t::ax_task
        .filter(t::id.eq_any(&ids))
        .select((t::id, has_upstreams()))
        .load(c)
        .await)?;
    let with_upstreams: HashSet<TaskId> = flags
        .into_iter()
        .filter_map(|(id, has)| has.then_some(id))
        .collect();
    Ok(tasks
        .into_iter()
        .map(|task| {
            let has = with_upstreams.contains(&task.id);
            (task, has)
        })
        .collect())
}

pub(super) type HasUpstreams = diesel::dsl::exists<
    diesel::dsl::Filter<d::ax_task_dependency, diesel::dsl::Eq<d::task_id, t::id>>,
>;

/// Whether the task of the row at hand depends on others: the one definition of the flag that
/// a task's wheel entry needs.
pub(super) fn has_upstreams() -> HasUpstreams {
    diesel::dsl::exists(d::ax_task_dependency.filter(d::task_id.eq(t::id)))
}
