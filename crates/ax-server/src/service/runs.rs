//! Runs: manual runs and backfills recorded and handed to the wheel, cancels, executors'
//! results, and run reads.

use chrono::{DateTime, Duration, Utc};

use super::error::{Result, ServiceError};
use super::Service;
use crate::actors::store::boxed;
use crate::service::audit_diff::task_target;
use ax_core::metrics::{add, metrics};
use ax_core::plan;
use ax_core::run::Decided;
use ax_core::run::{Event, NewRun, Report, RequestId, TaskId, TriggerType};
use ax_core::security::Principal;
use ax_store::queries::due;
use ax_store::queries::runs::{self, Cursor, RunFilter};
use ax_store::queries::Page;
use ax_store::rows::models::AuditAction;
use ax_store::rows::models::{NewRunRow, Run, RunOrigin};
use ax_store::{from_db, StoreError};

impl Service {
    /// Fires one run of the task now, outside its schedule (its schedule is untouched): a new
    /// request id, due at once, claimed and dispatched by the wheel like any due attempt, with
    /// the same retries and records. `params` override the task's.
    pub async fn trigger(
        &self,
        id: TaskId,
        params: Option<String>,
        actor: &Principal,
    ) -> Result<Run> {
        let task = self.task(id).await?.task;
        let summary = match &params {
            Some(params) => format!("params {params}"),
            None => "the task's params".to_string(),
        };
        let now = self.clock.now();
        let request_id = RequestId::manual();
        let origin = RunOrigin {
            task_id: id,
            request_id: request_id.clone(),
            trigger_type: TriggerType::Manual,
            scheduled_at: now,
            trigger_at: now,
            created_at: now,
            fired_by: self.instance_id.clone(),
            params,
        };
        let run = NewRunRow::new(origin, &NewRun::due(now));
        let lookup = request_id.clone();
        let (stored, due) = self
            .store
            .query(move |conn| {
                boxed(async move {
                    runs::insert_run(conn, &run).await?;
                    let stored = runs::find_by_request_id(conn, &lookup).await?;
                    let due = due::attempts_of(conn, std::slice::from_ref(&lookup)).await?;
                    Ok((stored, due))
                })
            })
            .await?;
        let stored = stored.ok_or(ServiceError::Store(StoreError::Query(diesel::NotFound)))?;
        log::info!("task {id} request {request_id}: manual run");
        add(&metrics().fires, 1);
        self.wheel.schedule_attempts(due);
        let summary = format!("run {request_id} with {summary}");
        self.audit(actor, AuditAction::TaskTrigger, task_target(&task), summary)
            .await;
        Ok(stored)
    }

    pub async fn task_runs(&self, task_id: TaskId, page: Page) -> Result<(Vec<Run>, i64)> {
        // An unknown task is a 404, as on every per-task endpoint, not an empty page.
        self.task(task_id).await?;
        Ok(self
            .store
            .query(move |conn| boxed(runs::list_for_task(conn, task_id, page)))
            .await?)
    }

    pub async fn instance(&self, request_id: RequestId) -> Result<Option<Run>> {
        Ok(self
            .store
            .query(move |conn| {
                boxed(async move { runs::find_by_request_id(conn, &request_id).await })
            })
            .await?)
    }

    /// Gives every fire time of the task's schedule in `[from, to)` a run, with the request id
    /// its scheduled run has or would have had: runs that exist are left alone, the others are
    /// recorded BACKFILL, due `backfill_per_sec` a second from now (after the task's earlier
    /// backfills) and dispatched under the task's overlap policy.
    pub async fn backfill(
        &self,
        id: TaskId,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
        actor: &Principal,
    ) -> Result<runs::Backfilled> {
        let task = self.task(id).await?.task;
        let now = self.clock.now();
        if to > now {
            return Err(ServiceError::Backfill(format!(
                "to must not be later than now ({}): a backfill covers past fire times",
                ax_core::time::clock::rfc3339(now)
            )));
        }
        let cron = self
            .schedule_of(&task)
            .await?
            .map_err(|err| ServiceError::Backfill(format!("the task's cron is invalid: {err}")))?;
        let times =
            plan::fire_times(&cron, from, to, plan::MAX_BACKFILL_RUNS).ok_or_else(|| {
                ServiceError::Backfill(format!(
                    "the range holds more than {} fire times; backfill it in parts",
                    plan::MAX_BACKFILL_RUNS
                ))
            })?;
        let runs: Vec<NewRunRow> = times
            .into_iter()
            .map(|at| {
                let origin = RunOrigin {
                    task_id: id,
                    request_id: RequestId::scheduled(id, at),
                    trigger_type: TriggerType::Backfill,
                    scheduled_at: at,
                    trigger_at: now,
                    created_at: now,
                    fired_by: self.instance_id.clone(),
                    params: None,
                };
                NewRunRow::new(origin, &NewRun::due(now))
            })
            .collect();
        let per_sec = self.backfill_per_sec;
        let done = self
            .store
            .write(runs, move |conn, runs| {
                boxed(conn.transaction(move |conn| {
                    boxed(async move {
                        let after = runs::last_backfill_due(conn, id).await?;
                        // Paced after the task's backfill still going out, if any.
                        let start = after.map_or(now, |at| from_db(at) + Duration::seconds(1));
                        let start = start.max(now);
                        runs::backfill(conn, runs, |n| NewRun::due(plan::paced(start, n, per_sec)))
                            .await
                    })
                }))
            })
            .await?;
        let summary = format!(
            "[{}, {}): {} runs recorded, {} existed",
            ax_core::time::clock::rfc3339(from),
            ax_core::time::clock::rfc3339(to),
            done.runs,
            done.existing
        );
        log::info!("task {id}: backfill of {summary}");
        self.audit(
            actor,
            AuditAction::TaskBackfill,
            task_target(&task),
            summary,
        )
        .await;
        Ok(done)
    }

    /// Cancels an open run: no further attempt, its waiting retry dropped, later results change
    /// nothing. Answers the run as it is now.
    pub async fn cancel(&self, request_id: RequestId, actor: &Principal) -> Result<Run> {
        let event = Event::Cancelled {
            at: self.clock.now(),
        };
        match self.store.decide(request_id.clone(), event).await? {
            Decided::Applied(run) => {
                log::info!("request {request_id}: run cancelled");
                add(&metrics().cancelled, 1);
                let (target, summary) = (
                    format!("run {request_id} (task {})", run.task_id),
                    "cancelled".to_string(),
                );
                self.audit(actor, AuditAction::RunCancel, target, summary)
                    .await;
            }
            Decided::Refused(_, run) => {
                return Err(ServiceError::RunFinal {
                    id: request_id,
                    status: run.status,
                })
            }
            Decided::Unknown => return Err(ServiceError::RunNotFound(request_id)),
        }
        self.instance(request_id.clone())
            .await?
            .ok_or(ServiceError::RunNotFound(request_id))
    }

    /// The run history: newest scheduled first, one page after `cursor`, and the cursor of the
    /// next page if there may be one.
    pub async fn history(
        &self,
        filter: RunFilter,
        cursor: Option<Cursor>,
        limit: i64,
    ) -> Result<(Vec<Run>, Option<Cursor>)> {
        let runs = self
            .store
            .query(move |conn| {
                boxed(async move { runs::history(conn, &filter, cursor, limit).await })
            })
            .await?;
        let next = (runs.len() as i64 == limit)
            .then(|| runs.last())
            .flatten()
            .map(|last| Cursor {
                scheduled_at: last.scheduled_at,
                id: last.id,
            });
        Ok((runs, next))
    }

    /// Applies an executor's result; answers after it is committed.
    pub async fn report(&self, request_id: RequestId, report: Report) -> Result<Decided> {
        Ok(self.store.decide(request_id, Event::Report(report)).await?)
    }
}
