//! Task changes: they go to the store and then, at once, to the wheel; task reads.

use super::error::{Result, ServiceError};
use super::task_details::{with_details, TaskDetails};
use super::task_input::TaskInput;
use super::Service;
use crate::actors::store::boxed;
use crate::service::audit_diff::{self, task_target};
use ax_core::calendar::CalendarBook;
use ax_core::run::TaskId;
use ax_core::security::Principal;
use ax_core::text::Escaped;
use ax_store::queries::calendars;
use ax_store::queries::task_pages::{self, Keyset, TaskPage};
use ax_store::queries::tasks::{self, BulkItem, BulkProblem, Conditional, TaskFilter, Versions};
use ax_store::queries::Page;
use ax_store::rows::models::{self, AuditAction};
use ax_store::rows::models::{Task, TaskFields};
use ax_store::{to_db, StoreError};

/// How many tasks a bulk registration created, changed and found as they were (the JSON reply
/// of `POST /api/tasks/bulk`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Registered {
    pub created: usize,
    pub updated: usize,
    pub unchanged: usize,
}

impl Service {
    /// The stored fields of a task, its next run computed from now with its calendars, each
    /// of which must exist.
    async fn fields(&self, input: &TaskInput) -> Result<TaskFields> {
        let book = self.book_for(input.calendars.as_ref()).await?;
        check_calendars(input, &book)?;
        Ok(input.fields(self.clock.now(), &book))
    }

    /// A task's own alert rule names configured channels only.
    fn check_task_alerts(&self, input: &TaskInput) -> Result<()> {
        match &input.alerts {
            Some(rule) => self.check_alert_rule(rule, "alerts."),
            None => Ok(()),
        }
    }

    /// Puts the tasks' next runs in the wheel, or takes them out.
    pub(super) async fn reschedule(&self, changed: Vec<Task>) -> Result<()> {
        let ids: Vec<TaskId> = changed.iter().map(|task| task.id).collect();
        let (tasks, book) = self
            .store
            .query(move |conn| {
                boxed(async move {
                    let book = calendars::book_for(conn, &changed).await?;
                    Ok((tasks::with_upstreams_known(conn, changed).await?, book))
                })
            })
            .await?;
        let entries = models::wheel_entries(&tasks, &book);
        self.wheel.replace(&ids, entries);
        Ok(())
    }

    /// Creates a task. Its upstreams are checked in the transaction that writes it.
    pub async fn create_task(&self, input: TaskInput, actor: &Principal) -> Result<TaskDetails> {
        self.check_task_alerts(&input)?;
        let (fields, depends_on) = (self.fields(&input).await?, input.depends_on);
        let (stored, upstreams) = (fields.clone(), depends_on.clone());
        let task = self
            .store
            .write((stored, upstreams), |conn, (stored, upstreams)| {
                boxed(tasks::insert(conn, stored, upstreams))
            })
            .await
            .map_err(|err| ServiceError::naming(err, &fields))?
            .map_err(ServiceError::from)?;
        self.note_pauses(vec![task.id], actor).await;
        let summary = audit_diff::task_created(&task);
        self.audit(actor, AuditAction::TaskCreate, task_target(&task), summary)
            .await;
        self.saved("created", task).await
    }

    /// Replaces a task's definition if it is at one of `versions` (else `Stale`). Its upstreams
    /// are checked in the transaction that writes it.
    pub async fn update_task(
        &self,
        id: TaskId,
        versions: Versions,
        input: TaskInput,
        actor: &Principal,
    ) -> Result<TaskDetails> {
        self.check_task_alerts(&input)?;
        let before = self.task(id).await?;
        let (fields, depends_on) = (self.fields(&input).await?, input.depends_on);
        let (stored, upstreams) = (fields.clone(), depends_on.clone());
        let updated = self
            .store
            .write((versions, stored, upstreams), move |conn, input| {
                let (versions, stored, upstreams) = input;
                boxed(tasks::update(conn, id, versions, stored, upstreams))
            })
            .await
            .map_err(|err| ServiceError::naming(err, &fields))?;
        let task = self.found(id, updated).await?.map_err(ServiceError::from)?;
        self.note_pauses(vec![id], actor).await;
        let mut summary = audit_diff::task_changes(&before.task, &task);
        if before.depends_on != depends_on {
            summary = format!(
                "{summary}; dependsOn: {:?} → {depends_on:?}",
                before.depends_on
            );
        }
        self.audit(actor, AuditAction::TaskUpdate, task_target(&task), summary)
            .await;
        self.saved("updated", task).await
    }

    /// What a change of task `id` under versions did, or why it did nothing.
    async fn found<T>(&self, id: TaskId, outcome: Conditional<T>) -> Result<T> {
        match outcome {
            Conditional::Done(done) => Ok(done),
            Conditional::NotFound => Err(ServiceError::TaskNotFound(id)),
            Conditional::Stale(task) => {
                let current = self.detailed(vec![*task]).await?.pop();
                Err(current.map_or(ServiceError::TaskNotFound(id), |current| {
                    ServiceError::Stale(Box::new(current))
                }))
            }
        }
    }

    /// Registers tasks all or none, matched by `(scene, name)` (see `tasks::register`); their
    /// next runs go in the wheel at once.
    pub async fn register_tasks(
        &self,
        inputs: Vec<TaskInput>,
        upsert: bool,
        actor: &Principal,
    ) -> Result<Registered> {
        let book = self
            .book_for(inputs.iter().filter_map(|input| input.calendars.as_ref()))
            .await?;
        for (index, input) in inputs.iter().enumerate() {
            self.check_task_alerts(input)
                .and_then(|()| check_calendars(input, &book))
                .map_err(|err| ServiceError::Item {
                    index,
                    error: Box::new(err),
                })?;
        }
        let now = self.clock.now();
        let items: Vec<BulkItem> = inputs
            .into_iter()
            .map(|input| BulkItem {
                fields: input.fields(now, &book),
                depends_on: input.depends_on,
            })
            .collect();
        let outcome = self
            .store
            .write(items, move |conn, items| {
                boxed(tasks::register(conn, items, upsert))
            })
            .await
            .map_err(|err| match err.is_name_taken() {
                true => ServiceError::Raced,
                false => ServiceError::Store(err),
            })?
            .map_err(|refusal| ServiceError::Item {
                index: refusal.index,
                error: Box::new(match refusal.problem {
                    BulkProblem::Exists(id) => ServiceError::Exists(id),
                    BulkProblem::Upstreams(problem) => problem.into(),
                }),
            })?;
        let registered = Registered {
            created: outcome.created.len(),
            updated: outcome.updated.len(),
            unchanged: outcome.unchanged,
        };
        log::info!(
            "tasks registered: {} created, {} updated, {} unchanged",
            registered.created,
            registered.updated,
            registered.unchanged
        );
        let summary = format!(
            "{} created, {} updated, {} unchanged",
            registered.created, registered.updated, registered.unchanged
        );
        self.audit(actor, AuditAction::TasksBulk, "tasks".into(), summary)
            .await;
        let mut changed = outcome.created;
        changed.extend(outcome.updated);
        self.note_pauses(changed.iter().map(|task| task.id).collect(), actor)
            .await;
        self.reschedule(changed).await?;
        Ok(registered)
    }

    /// Notes since when and by whom these tasks are paused, as their status now says (see
    /// [`tasks::note_pauses`]). Like the audit log, a note the store refuses is logged and
    /// the change it follows stands.
    async fn note_pauses(&self, ids: Vec<TaskId>, actor: &Principal) {
        let (at, by) = (to_db(self.clock.now()), actor.name.clone());
        let noted = self
            .store
            .write((ids, by), move |conn, (ids, by)| {
                boxed(async move { tasks::note_pauses(conn, &ids, at, &by).await })
            })
            .await;
        if let Err(err) = noted {
            log::error!("when and by whom tasks were paused, not noted: {err}");
        }
    }

    /// A task just stored: logged, and its next run in the wheel at once.
    async fn saved(&self, how: &str, task: Task) -> Result<TaskDetails> {
        log::info!(
            "task {} {how}: `{}` {}",
            task.id,
            Escaped(&task.cron),
            task.handler_url
        );
        self.reschedule(vec![task.clone()]).await?;
        self.detailed(vec![task])
            .await?
            .pop()
            .ok_or(ServiceError::Store(StoreError::Query(diesel::NotFound)))
    }

    /// These tasks with their upstreams and their scenes' pause.
    async fn detailed(&self, tasks: Vec<Task>) -> Result<Vec<TaskDetails>> {
        Ok(self
            .store
            .query(move |conn| boxed(with_details(conn, tasks)))
            .await?)
    }

    /// Deletes a task if it is at one of `versions` (else `Stale`).
    pub async fn delete_task(
        &self,
        id: TaskId,
        versions: Versions,
        actor: &Principal,
    ) -> Result<()> {
        let before = self.task(id).await?.task;
        let now = self.clock.now();
        let deleted = self
            .store
            .write(versions, move |conn, versions| {
                boxed(tasks::delete(conn, id, versions, now))
            })
            .await?;
        self.found(id, deleted).await?;
        self.wheel.unschedule(id);
        let ended = self.dispatch.forget_task(id);
        log::info!("task {id} deleted; {ended} of its dispatches waiting or in flight ended");
        let summary = "deleted; its open runs ended FAILED (TASK_DELETED)".to_string();
        self.audit(
            actor,
            AuditAction::TaskDelete,
            task_target(&before),
            summary,
        )
        .await;
        Ok(())
    }

    pub async fn task(&self, id: TaskId) -> Result<TaskDetails> {
        let details = self
            .store
            .query(move |conn| {
                boxed(async move {
                    let task = tasks::find(conn, id).await?;
                    with_details(conn, task.into_iter().collect()).await
                })
            })
            .await?;
        details
            .into_iter()
            .next()
            .ok_or(ServiceError::TaskNotFound(id))
    }

    pub async fn tasks(&self, filter: TaskFilter, page: Page) -> Result<(Vec<TaskDetails>, i64)> {
        Ok(self
            .store
            .query(move |conn| {
                boxed(async move {
                    let (rows, total) = tasks::list(conn, &filter, page).await?;
                    Ok((with_details(conn, rows).await?, total))
                })
            })
            .await?)
    }

    /// A keyset page of the tasks matching `filter` (the console's listing).
    pub async fn task_page(
        &self,
        filter: TaskFilter,
        keyset: Keyset,
    ) -> Result<TaskPage<TaskDetails>> {
        Ok(self
            .store
            .query(move |conn| {
                boxed(async move {
                    let mut page = task_pages::page(conn, &filter, &keyset).await?;
                    let rows = std::mem::take(&mut page.tasks);
                    Ok(page.with_rows(with_details(conn, rows).await?))
                })
            })
            .await?)
    }

    /// The ids of the tasks matching `filter`, oldest first, at most `limit` (a bulk action on
    /// every matching task).
    pub async fn matching_tasks(&self, filter: TaskFilter, limit: i64) -> Result<Vec<TaskId>> {
        Ok(self
            .store
            .query(move |conn| {
                boxed(async move { task_pages::matching_ids(conn, &filter, limit).await })
            })
            .await?)
    }

    /// Pauses a task: it fires no more, on any ax process, until resumed.
    pub async fn pause_task(&self, id: TaskId, actor: &Principal) -> Result<TaskDetails> {
        let before = self.task(id).await?.task;
        let now = to_db(self.clock.now());
        self.store
            .write((), move |conn, ()| boxed(tasks::pause(conn, id, now)))
            .await?;
        self.wheel.unschedule(id);
        self.note_pauses(vec![id], actor).await;
        log::info!("task {id} paused");
        let after = self.task(id).await?;
        let summary = audit_diff::task_changes(&before, &after.task);
        self.audit(actor, AuditAction::TaskPause, task_target(&before), summary)
            .await;
        Ok(after)
    }

    /// Resumes a task; its next run is computed from now, so runs that fell in the pause do not
    /// fire.
    pub async fn resume_task(&self, id: TaskId, actor: &Principal) -> Result<TaskDetails> {
        let before = self.task(id).await?.task;
        let now = self.clock.now();
        let resumed = self
            .store
            .write((), move |conn, ()| boxed(tasks::resume(conn, id, now)))
            .await?;
        if let Some(task) = resumed {
            log::info!("task {id} resumed");
            self.reschedule(vec![task]).await?;
        }
        self.note_pauses(vec![id], actor).await;
        let after = self.task(id).await?;
        let summary = audit_diff::task_changes(&before, &after.task);
        self.audit(
            actor,
            AuditAction::TaskResume,
            task_target(&before),
            summary,
        )
        .await;
        Ok(after)
    }
}

/// A task's calendars are all in `book` (else a refusal naming the first missing one).
fn check_calendars(input: &TaskInput, book: &CalendarBook) -> Result<()> {
    let Some(calendars) = &input.calendars else {
        return Ok(());
    };
    match book.first_missing(calendars) {
        None => Ok(()),
        Some((at, name)) => Err(ServiceError::UnknownCalendar {
            field: format!("calendars.exclude[{at}]"),
            name: name.clone(),
        }),
    }
}
