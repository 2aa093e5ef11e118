//! The service the API calls: task changes go to the store and then, at once, to the wheel;
//! manual runs are recorded and handed to the wheel like any due attempt; reads and results go
//! to the store.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use chrono::{DateTime, Duration, Utc};

use crate::actors::cluster::{ClusterHandle, Member};
use crate::actors::dispatch::DispatchHandle;
use crate::actors::lock::LockError;
use crate::actors::store::{boxed, StoreHandle};
use crate::actors::wheel::WheelHandle;
use crate::audit::{self, task_target, AuditAction, Entry};
use crate::clock::SharedClock;
use crate::cron::CronSchedule;
use crate::labels::Labels;
use crate::metrics::{add, metrics, WheelStats};
use crate::percentile::percentile;
use crate::plan;
use crate::run::{
    jittered, Decided, Event, NewRun, OverlapPolicy, Report, RequestId, RunStatus, TaskId,
    TriggerType, OVERLAP_CODE, REPLACED_CODE,
};
use crate::security::{self, Principal};
use crate::store::models::{Instance, NewInstance, RunOrigin, Task, TaskFields, TaskStatus};
use crate::store::queries::attempts::{self, AttemptRow};
use crate::store::queries::audit::{self as audit_log, AuditRow};
use crate::store::queries::due;
use crate::store::queries::instances::{self, Cursor, InstanceFilter};
use crate::store::queries::overview;
use crate::store::queries::sessions;
use crate::store::queries::tasks::{
    self, BulkItem, BulkProblem, Conditional, TaskFilter, UpstreamProblem, Versions,
};
use crate::store::queries::Page;
use crate::store::{from_db, to_db, Conn, StoreError};
use crate::task_fields;
use crate::text::Escaped;

/// A task as the user defines it, validated. Serialized, it is the definition by field name
/// (`crate::task_fields`), as a body gives it (`ax apply` compares two).
#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskInput {
    pub name: String,
    pub scene: String,
    /// The expression and the zone it is matched in: `cron` and `timeZone`.
    #[serde(flatten, serialize_with = "schedule_fields")]
    pub cron: CronSchedule,
    pub handler_url: String,
    /// A JSON object, as text.
    pub params: String,
    pub max_retry: i32,
    pub timeout_ms: i64,
    pub enabled: bool,
    /// Overrides of the global retry back-off, misfire threshold and dependency timeout.
    pub retry_backoff_secs: Option<i32>,
    pub retry_factor: Option<i32>,
    pub misfire_threshold_secs: Option<i32>,
    pub dependency_timeout_secs: Option<i32>,
    /// Tasks whose runs must succeed first (one level).
    pub depends_on: Vec<TaskId>,
    /// What a run due while an earlier one is open does.
    pub overlap: OverlapPolicy,
    /// Each run's dispatch is spread over this many seconds after its time.
    pub jitter_secs: i32,
    pub labels: Labels,
}

/// A schedule as the fields `cron` and `timeZone`.
fn schedule_fields<S: serde::Serializer>(
    cron: &CronSchedule,
    serializer: S,
) -> std::result::Result<S::Ok, S::Error> {
    use serde::ser::SerializeMap;
    let mut fields = serializer.serialize_map(Some(2))?;
    fields.serialize_entry(task_fields::CRON.name, cron.expression())?;
    fields.serialize_entry(task_fields::TIME_ZONE.name, cron.zone().name())?;
    fields.end()
}

impl TaskInput {
    /// The stored fields of the task, its next run computed from `now`.
    pub fn fields(&self, now: DateTime<Utc>) -> TaskFields {
        let next_run_at = self
            .enabled
            .then(|| self.cron.next_after(now))
            .flatten()
            .map(to_db);
        let status = if self.enabled {
            TaskStatus::Enabled
        } else {
            TaskStatus::Paused
        };
        TaskFields {
            name: self.name.clone(),
            scene: self.scene.clone(),
            cron: self.cron.expression().to_string(),
            handler_url: self.handler_url.clone(),
            params: self.params.clone(),
            max_retry: self.max_retry,
            timeout_ms: self.timeout_ms,
            status,
            next_run_at,
            updated_at: to_db(now),
            retry_backoff_secs: self.retry_backoff_secs,
            retry_factor: self.retry_factor,
            misfire_threshold_secs: self.misfire_threshold_secs,
            dependency_timeout_secs: self.dependency_timeout_secs,
            time_zone: self.cron.zone().name().to_string(),
            overlap: self.overlap,
            jitter_secs: self.jitter_secs,
            labels: self.labels.clone(),
        }
    }
}

/// Errors of scheduler operations.
#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("task {0} not found")]
    TaskNotFound(TaskId),
    /// The task is at another version than the change was made for: the task as it is now.
    #[error(
        "task {} has changed: it is at version {} now; read it again and make the change \
         on that",
        .0.task.id,
        .0.task.version
    )]
    Stale(Box<TaskDetails>),
    #[error("dependsOn names tasks that do not exist: {0:?}")]
    UnknownUpstreams(Vec<TaskId>),
    #[error("dependsOn would close a cycle: {0}")]
    Cycle(String),
    #[error("scene `{scene}` has a task named `{name}` already")]
    NameTaken { scene: String, name: String },
    #[error("another client registered one of these names meanwhile; nothing was written")]
    Raced,
    #[error("this scene and name are task {0}'s (set \"upsert\": true to update it)")]
    Exists(TaskId),
    /// A backfill's range cannot be taken; the message says why (field `to`).
    #[error("{0}")]
    Backfill(String),
    #[error("no run with requestId {0}")]
    RunNotFound(RequestId),
    #[error("run {id} is {status} already: a final run does not change")]
    RunFinal { id: RequestId, status: RunStatus },
    /// A bulk registration refused for the item at `index`.
    #[error("items[{index}]: {error}")]
    Item {
        index: usize,
        error: Box<ServiceError>,
    },
}

impl ServiceError {
    /// The store's refusal of a task's `(scene, name)` as such; other errors as they are.
    fn naming(err: StoreError, fields: &TaskFields) -> Self {
        if err.is_name_taken() {
            ServiceError::NameTaken {
                scene: fields.scene.clone(),
                name: fields.name.clone(),
            }
        } else {
            ServiceError::Store(err)
        }
    }
}

impl From<UpstreamProblem> for ServiceError {
    fn from(problem: UpstreamProblem) -> Self {
        match problem {
            UpstreamProblem::Unknown(ids) => ServiceError::UnknownUpstreams(ids),
            UpstreamProblem::Cycle(cycle) => {
                let path: Vec<String> = cycle.iter().map(TaskId::to_string).collect();
                ServiceError::Cycle(path.join(" waits on "))
            }
        }
    }
}

/// How many tasks a bulk registration created, changed and found as they were (the JSON reply
/// of `POST /api/tasks/bulk`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Registered {
    pub created: usize,
    pub updated: usize,
    pub unchanged: usize,
}

/// A task with its upstreams, and whether its scene is paused (a task fires when neither it
/// nor its scene is).
#[derive(Debug, Clone)]
pub struct TaskDetails {
    pub task: Task,
    pub depends_on: Vec<TaskId>,
    pub scene_paused: bool,
}

/// A scene, its task counts by status, and since when it is paused, if it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SceneCounts {
    pub scene: String,
    pub by_status: HashMap<String, i64>,
    pub paused_at: Option<DateTime<Utc>>,
}

/// Counts and trigger lags of a task's runs over a window.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskStats {
    pub from: DateTime<Utc>,
    pub to: DateTime<Utc>,
    pub by_status: HashMap<String, i64>,
    /// What the overlap policy did: runs skipped, runs replaced, runs waiting now.
    pub overlap: OverlapCounts,
    /// Trigger lag (first dispatched minus due: the scheduled time plus the jitter offset)
    /// percentiles in milliseconds: p50, p90, p99, max; `None` when no run of the window was
    /// dispatched. Backfilled runs are not counted: they are late by design.
    pub lag_ms: Option<[i64; 4]>,
}

/// A task's runs the overlap policy acted on, over a stats window.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct OverlapCounts {
    pub skipped: i64,
    pub replaced: i64,
    pub waiting: i64,
}

/// The facade over the actors that the HTTP API uses.
#[derive(Clone)]
pub struct Service {
    store: StoreHandle,
    wheel: WheelHandle,
    dispatch: DispatchHandle,
    cluster: ClusterHandle,
    clock: SharedClock,
    instance_id: String,
    /// Most backfilled runs of a task due per second.
    backfill_per_sec: i64,
    /// The last day's run counts and when they were counted (see [`Service::day_counts`]).
    day_counts: Arc<Mutex<Option<Counted>>>,
}

/// Run counts by status, and when they were counted.
pub type Counted = (DateTime<Utc>, HashMap<RunStatus, i64>);

/// How long the last day's run counts are shown before they are counted again.
pub const DAY_COUNTS_SECS: i64 = 15;

type Result<T> = std::result::Result<T, ServiceError>;

impl Service {
    pub fn new(
        store: StoreHandle,
        wheel: WheelHandle,
        dispatch: DispatchHandle,
        cluster: ClusterHandle,
        clock: SharedClock,
        instance_id: String,
        backfill_per_sec: i64,
    ) -> Self {
        Service {
            store,
            wheel,
            dispatch,
            cluster,
            clock,
            instance_id,
            backfill_per_sec,
            day_counts: Arc::default(),
        }
    }

    /// Records a change in the audit log. The change is made already: a store that refuses the
    /// entry is logged, and the change stands.
    async fn audit(&self, actor: &Principal, action: AuditAction, target: String, summary: String) {
        let entry = Entry {
            actor: actor.name.clone(),
            action,
            target,
            summary,
        };
        let at = self.clock.now();
        let recorded = self
            .store
            .query(move |conn| boxed(async move { audit_log::record(conn, at, &entry).await }))
            .await;
        if let Err(err) = recorded {
            log::error!("{action} not recorded in the audit log: {err}");
        }
    }

    /// The audit log, newest first: up to `limit` entries older than entry `before`.
    pub async fn audit_log(&self, before: Option<i64>, limit: i64) -> Result<Vec<AuditRow>> {
        Ok(self
            .store
            .query(move |conn| boxed(audit_log::list(conn, before, limit)))
            .await?)
    }

    /// Opens a console session for the token named `token_name`, bound to the token's
    /// `token_digest`, until `lifetime` from now; returns the secret its cookie carries.
    pub async fn open_session(
        &self,
        token_name: &str,
        token_digest: &str,
        lifetime: Duration,
    ) -> Result<String> {
        let secret = security::new_secret();
        let key = security::session_key(&secret);
        let (name, digest) = (token_name.to_string(), token_digest.to_string());
        let now = self.clock.now();
        self.store
            .query(move |conn| {
                boxed(async move {
                    let token = (name.as_str(), digest.as_str());
                    sessions::open(conn, &key, token, now, now + lifetime).await
                })
            })
            .await?;
        Ok(secret)
    }

    /// The token name and token digest of the open session whose cookie carries `secret`.
    pub async fn session(&self, secret: &str) -> Result<Option<(String, String)>> {
        let key = security::session_key(secret);
        let now = self.clock.now();
        Ok(self
            .store
            .query(move |conn| boxed(async move { sessions::token_of(conn, &key, now).await }))
            .await?)
    }

    /// Ends the session whose cookie carries `secret`.
    pub async fn close_session(&self, secret: &str) -> Result<()> {
        let key = security::session_key(secret);
        Ok(self
            .store
            .query(move |conn| boxed(async move { sessions::close(conn, &key).await }))
            .await?)
    }

    /// The live ax processes sharing this store.
    pub async fn cluster(&self) -> std::result::Result<Vec<Member>, LockError> {
        self.cluster.members().await
    }

    /// The stored fields of a task, its next run computed from now.
    fn fields(&self, input: &TaskInput) -> TaskFields {
        input.fields(self.clock.now())
    }

    /// Puts the tasks' next runs in the wheel, or takes them out.
    async fn reschedule(&self, changed: Vec<Task>) -> Result<()> {
        let ids: Vec<TaskId> = changed.iter().map(|task| task.id).collect();
        let entries = self
            .store
            .query(move |conn| boxed(tasks::wheel_entries(conn, changed)))
            .await?;
        self.wheel.replace(&ids, entries);
        Ok(())
    }

    /// Creates a task. Its upstreams are checked in the transaction that writes it.
    pub async fn create_task(&self, input: TaskInput, actor: &Principal) -> Result<TaskDetails> {
        let (fields, depends_on) = (self.fields(&input), input.depends_on);
        let (stored, upstreams) = (fields.clone(), depends_on.clone());
        let task = self
            .store
            .query(move |conn| boxed(tasks::insert(conn, stored, upstreams)))
            .await
            .map_err(|err| ServiceError::naming(err, &fields))?
            .map_err(ServiceError::from)?;
        let summary = audit::task_created(&task);
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
        let before = self.task(id).await?;
        let (fields, depends_on) = (self.fields(&input), input.depends_on);
        let (stored, upstreams) = (fields.clone(), depends_on.clone());
        let updated = self
            .store
            .query(move |conn| boxed(tasks::update(conn, id, versions, stored, upstreams)))
            .await
            .map_err(|err| ServiceError::naming(err, &fields))?;
        let task = self.found(id, updated).await?.map_err(ServiceError::from)?;
        let mut summary = audit::task_changes(&before.task, &task);
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
        let items: Vec<BulkItem> = inputs
            .into_iter()
            .map(|input| BulkItem {
                fields: self.fields(&input),
                depends_on: input.depends_on,
            })
            .collect();
        let outcome = self
            .store
            .query(move |conn| boxed(tasks::register(conn, items, upsert)))
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
        self.reschedule(changed).await?;
        Ok(registered)
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
            .query(move |conn| boxed(tasks::delete(conn, id, versions, now)))
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

    /// Pauses a task: it fires no more, on any ax process, until resumed.
    pub async fn pause_task(&self, id: TaskId, actor: &Principal) -> Result<TaskDetails> {
        let before = self.task(id).await?.task;
        let now = to_db(self.clock.now());
        self.store
            .query(move |conn| boxed(tasks::pause(conn, id, now)))
            .await?;
        self.wheel.unschedule(id);
        log::info!("task {id} paused");
        let after = self.task(id).await?;
        let summary = audit::task_changes(&before, &after.task);
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
            .query(move |conn| boxed(tasks::resume(conn, id, now)))
            .await?;
        if let Some(task) = resumed {
            log::info!("task {id} resumed");
            self.reschedule(vec![task]).await?;
        }
        let after = self.task(id).await?;
        let summary = audit::task_changes(&before, &after.task);
        self.audit(
            actor,
            AuditAction::TaskResume,
            task_target(&before),
            summary,
        )
        .await;
        Ok(after)
    }

    /// Pauses a scene: none of its tasks fires, on any ax process, until it is resumed; their
    /// own state stays. Returns how many of its tasks stop firing (0 if it was paused already).
    pub async fn pause_scene(&self, scene: String, actor: &Principal) -> Result<usize> {
        let now = to_db(self.clock.now());
        let name = scene.clone();
        let count = self
            .store
            .query(move |conn| boxed(async move { tasks::pause_scene(conn, &name, now).await }))
            .await?;
        // Wheel entries of these tasks (here and on other processes) fail their
        // compare-and-set on `next_run_at` and leave the wheel when they come due.
        log::info!("scene `{scene}` paused: {count} tasks stop firing");
        let summary = format!("scene paused: {count} tasks stop firing");
        self.audit(
            actor,
            AuditAction::ScenePause,
            format!("scene {scene}"),
            summary,
        )
        .await;
        Ok(count)
    }

    /// Resumes a paused scene: its enabled tasks fire again, each from now; those paused one by
    /// one stay paused. Returns how many fire again.
    pub async fn resume_scene(&self, scene: String, actor: &Principal) -> Result<usize> {
        let now = self.clock.now();
        let name = scene.clone();
        let resumed = self
            .store
            .query(move |conn| boxed(async move { tasks::resume_scene(conn, &name, now).await }))
            .await?;
        let count = resumed.len();
        self.reschedule(resumed).await?;
        log::info!("scene `{scene}` resumed: {count} tasks fire again");
        let summary = format!("scene resumed: {count} tasks fire again");
        self.audit(
            actor,
            AuditAction::SceneResume,
            format!("scene {scene}"),
            summary,
        )
        .await;
        Ok(count)
    }

    /// Every scene with its task counts by status and its pause, by name: those with tasks,
    /// and paused ones without.
    pub async fn scenes(&self) -> Result<Vec<SceneCounts>> {
        let (rows, mut paused) = self
            .store
            .query(move |conn| {
                boxed(async move {
                    let counts = tasks::scene_counts(conn).await?;
                    Ok((counts, tasks::paused_scenes(conn, None).await?))
                })
            })
            .await?;
        let mut scenes: Vec<SceneCounts> = Vec::new();
        for (scene, status, count) in rows {
            match scenes.last_mut().filter(|last| last.scene == scene) {
                Some(last) => {
                    last.by_status.insert(status.to_string(), count);
                }
                None => scenes.push(SceneCounts {
                    paused_at: paused.remove(&scene).map(from_db),
                    scene,
                    by_status: HashMap::from([(status.to_string(), count)]),
                }),
            }
        }
        scenes.extend(paused.into_iter().map(|(scene, at)| SceneCounts {
            scene,
            by_status: HashMap::new(),
            paused_at: Some(from_db(at)),
        }));
        scenes.sort_by(|a, b| a.scene.cmp(&b.scene));
        Ok(scenes)
    }

    /// Fires one run of the task now, outside its schedule (its schedule is untouched): a new
    /// request id, due at once, claimed and dispatched by the wheel like any due attempt, with
    /// the same retries and records. `params` override the task's.
    pub async fn trigger(
        &self,
        id: TaskId,
        params: Option<String>,
        actor: &Principal,
    ) -> Result<Instance> {
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
        let run = NewInstance::new(origin, &NewRun::due(now));
        let lookup = request_id.clone();
        let (stored, due) = self
            .store
            .query(move |conn| {
                boxed(async move {
                    instances::insert_instance(conn, &run).await?;
                    let stored = instances::find_by_request_id(conn, &lookup).await?;
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

    pub async fn task_instances(
        &self,
        task_id: TaskId,
        page: Page,
    ) -> Result<(Vec<Instance>, i64)> {
        // An unknown task is a 404, as on every per-task endpoint, not an empty page.
        self.task(task_id).await?;
        Ok(self
            .store
            .query(move |conn| boxed(instances::list_for_task(conn, task_id, page)))
            .await?)
    }

    pub async fn instance(&self, request_id: RequestId) -> Result<Option<Instance>> {
        Ok(self
            .store
            .query(move |conn| {
                boxed(async move { instances::find_by_request_id(conn, &request_id).await })
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
    ) -> Result<instances::Backfilled> {
        let task = self.task(id).await?.task;
        let now = self.clock.now();
        if to > now {
            return Err(ServiceError::Backfill(format!(
                "to must not be later than now ({}): a backfill covers past fire times",
                crate::clock::rfc3339(now)
            )));
        }
        let cron = task
            .schedule()
            .map_err(|err| ServiceError::Backfill(format!("the task's cron is invalid: {err}")))?;
        let times =
            plan::fire_times(&cron, from, to, plan::MAX_BACKFILL_RUNS).ok_or_else(|| {
                ServiceError::Backfill(format!(
                    "the range holds more than {} fire times; backfill it in parts",
                    plan::MAX_BACKFILL_RUNS
                ))
            })?;
        let runs: Vec<NewInstance> = times
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
                NewInstance::new(origin, &NewRun::due(now))
            })
            .collect();
        let per_sec = self.backfill_per_sec;
        let done = self
            .store
            .query(move |conn| {
                boxed(conn.transaction(move |conn| {
                    boxed(async move {
                        let after = instances::last_backfill_due(conn, id).await?;
                        // Paced after the task's backfill still going out, if any.
                        let start = after.map_or(now, |at| from_db(at) + Duration::seconds(1));
                        let start = start.max(now);
                        instances::backfill(conn, runs, |n| {
                            NewRun::due(plan::paced(start, n, per_sec))
                        })
                        .await
                    })
                }))
            })
            .await?;
        let summary = format!(
            "[{}, {}): {} runs recorded, {} existed",
            crate::clock::rfc3339(from),
            crate::clock::rfc3339(to),
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
    pub async fn cancel(&self, request_id: RequestId, actor: &Principal) -> Result<Instance> {
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
        filter: InstanceFilter,
        cursor: Option<Cursor>,
        limit: i64,
    ) -> Result<(Vec<Instance>, Option<Cursor>)> {
        let runs = self
            .store
            .query(move |conn| {
                boxed(async move { instances::history(conn, &filter, cursor, limit).await })
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

    /// Counts by status and trigger-lag percentiles of a task's runs scheduled in the last
    /// `window`.
    pub async fn task_stats(&self, task_id: TaskId, window: Duration) -> Result<TaskStats> {
        let jitter_secs = self.task(task_id).await?.task.jitter_secs;
        let to = self.clock.now();
        let from = to - window;
        let (since, until) = (to_db(from), to_db(to));
        let rows = self
            .store
            .query(move |conn| boxed(instances::for_stats(conn, task_id, since, until)))
            .await?;
        let mut by_status: HashMap<String, i64> = HashMap::new();
        let mut overlap = OverlapCounts::default();
        let mut lags: Vec<i64> = Vec::with_capacity(rows.len());
        for (status, trigger, code, scheduled, dispatched) in rows {
            *by_status.entry(status.to_string()).or_default() += 1;
            match (status, code.as_deref()) {
                (RunStatus::Skipped, _) => overlap.skipped += 1,
                (RunStatus::Cancelled, Some(REPLACED_CODE)) => overlap.replaced += 1,
                (RunStatus::Pending, Some(OVERLAP_CODE)) => overlap.waiting += 1,
                _ => {}
            }
            let due = match trigger {
                TriggerType::Schedule => Some(jittered(task_id, from_db(scheduled), jitter_secs)),
                TriggerType::Manual => Some(from_db(scheduled)),
                TriggerType::Backfill => None,
            };
            if let (Some(due), Some(dispatched)) = (due, dispatched) {
                lags.push((from_db(dispatched) - due).num_milliseconds());
            }
        }
        lags.sort_unstable();
        let at = |p: f64| percentile(&lags, p);
        let lag_ms = match (at(50.0), at(90.0), at(99.0), lags.last()) {
            (Some(p50), Some(p90), Some(p99), Some(&max)) => Some([p50, p90, p99, max]),
            _ => None,
        };
        Ok(TaskStats {
            from,
            to,
            by_status,
            overlap,
            lag_ms,
        })
    }

    /// Applies an executor's result; answers after it is committed.
    pub async fn report(&self, request_id: RequestId, report: Report) -> Result<Decided> {
        Ok(self.store.decide(request_id, Event::Report(report)).await?)
    }

    /// How many entries the wheel holds.
    pub async fn wheel_stats(&self) -> Option<WheelStats> {
        self.wheel.stats().await
    }

    pub fn now(&self) -> DateTime<Utc> {
        self.clock.now()
    }
}

/// These tasks with their upstreams and whether their scenes are paused.
async fn with_details(
    conn: &mut Conn,
    tasks: Vec<Task>,
) -> std::result::Result<Vec<TaskDetails>, StoreError> {
    let ids: Vec<TaskId> = tasks.iter().map(|task| task.id).collect();
    let mut upstreams = tasks::dependencies_of(conn, &ids).await?;
    let scenes: Vec<&str> = tasks.iter().map(|task| task.scene.as_str()).collect();
    let paused = tasks::paused_scenes(conn, Some(&scenes)).await?;
    Ok(tasks
        .into_iter()
        .map(|task| TaskDetails {
            depends_on: upstreams.remove(&task.id).unwrap_or_default(),
            scene_paused: paused.contains_key(&task.scene),
            task,
        })
        .collect())
}

/// Reads of the web console (`crate::console`): the pages call these and the methods above,
/// never the database directly.
impl Service {
    /// How many runs scheduled from `since` until now are in each status.
    pub async fn run_counts_since(&self, since: DateTime<Utc>) -> Result<HashMap<RunStatus, i64>> {
        let (since, until) = (to_db(since), to_db(self.clock.now()));
        Ok(self
            .store
            .query(move |conn| boxed(overview::run_counts(conn, since, until)))
            .await?)
    }

    /// The runs of the last day by status, with when they were counted: at most
    /// [`DAY_COUNTS_SECS`] ago. The day's count reads an index entry per run of the day (a
    /// third of a million at 1,000 fires a second … of a busy hour), too many for every view
    /// of a dashboard.
    pub async fn day_counts(&self) -> Result<Counted> {
        let now = self.clock.now();
        let fresh = |at: DateTime<Utc>| at <= now && now - at < Duration::seconds(DAY_COUNTS_SECS);
        let cached = self.day_counts.lock().ok().and_then(|cache| cache.clone());
        if let Some((at, counts)) = cached.filter(|(at, _)| fresh(*at)) {
            return Ok((at, counts));
        }
        let counts = self.run_counts_since(now - Duration::days(1)).await?;
        if let Ok(mut cache) = self.day_counts.lock() {
            *cache = Some((now, counts.clone()));
        }
        Ok((now, counts))
    }

    /// The names of these tasks; a deleted task has none.
    pub async fn task_names(&self, ids: Vec<TaskId>) -> Result<HashMap<TaskId, String>> {
        Ok(self
            .store
            .query(move |conn| boxed(overview::task_names(conn, ids)))
            .await?)
    }

    /// The tasks of these (scene, name) pairs that exist.
    pub async fn tasks_named(&self, pairs: Vec<(String, String)>) -> Result<Vec<Task>> {
        Ok(self
            .store
            .query(move |conn| boxed(async move { tasks::find_named(conn, &pairs).await }))
            .await?)
    }

    /// The tasks with these ids that exist.
    pub async fn tasks_by_id(&self, ids: Vec<TaskId>) -> Result<Vec<Task>> {
        Ok(self
            .store
            .query(move |conn| boxed(tasks::find_many(conn, ids)))
            .await?)
    }

    /// Up to `limit` names of a scene's tasks, in order.
    pub async fn names_in_scene(&self, scene: String, limit: i64) -> Result<Vec<String>> {
        Ok(self
            .store
            .query(move |conn| {
                boxed(async move { tasks::names_in_scene(conn, &scene, limit).await })
            })
            .await?)
    }

    /// How many runs of a task are open.
    pub async fn open_runs(&self, task_id: TaskId) -> Result<i64> {
        Ok(self
            .store
            .query(move |conn| boxed(instances::count_open(conn, task_id)))
            .await?)
    }

    /// The attempts of a run that ended without ending it (failed, then retried), in order.
    pub async fn attempts(&self, request_id: RequestId) -> Result<Vec<AttemptRow>> {
        Ok(self
            .store
            .query(move |conn| boxed(async move { attempts::of_run(conn, &request_id).await }))
            .await?)
    }

    /// Each task's latest run that is due (the one scheduled last).
    pub async fn last_runs(&self, ids: Vec<TaskId>) -> Result<HashMap<TaskId, Instance>> {
        let now = to_db(self.clock.now());
        Ok(self
            .store
            .query(move |conn| boxed(overview::last_runs(conn, ids, now)))
            .await?)
    }

    /// When runs scheduled from `since` until now were due and first dispatched, newest first,
    /// at most `limit`; backfilled runs are left out (they are late by design).
    pub async fn dispatch_times_since(
        &self,
        since: DateTime<Utc>,
        limit: i64,
    ) -> Result<Vec<(DateTime<Utc>, Option<DateTime<Utc>>)>> {
        let (since, until) = (to_db(since), to_db(self.clock.now()));
        Ok(self
            .store
            .query(move |conn| boxed(overview::dispatch_times(conn, since, until, limit)))
            .await?)
    }
}
