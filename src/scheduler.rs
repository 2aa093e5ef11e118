//! The scheduler as the API sees it: task changes go to the store and then, at once, to the
//! wheel; reads and results go to the store.

use std::sync::Arc;

use actix::Addr;
use chrono::{DateTime, Utc};

use crate::actors::lock::{LockError, LockHandle, Member};
use crate::actors::store::{boxed, StoreHandle};
use crate::actors::wheel::{Schedule, Unschedule, WheelActor, WheelSize};
use crate::clock::SharedClock;
use crate::cron::CronSchedule;
use crate::schedule::TaskSpec;
use crate::store::models::{Instance, Task, TaskFields, TaskStatus};
use crate::store::queries::instances::{self, ResultOutcome, ResultRecord};
use crate::store::queries::tasks::{self, TaskFilter};
use crate::store::queries::Page;
use crate::store::{from_db, to_db, StoreError};

/// A task as the user defines it, validated.
#[derive(Debug, Clone)]
pub struct TaskInput {
    pub name: String,
    pub scene: String,
    pub cron: CronSchedule,
    pub handler_url: String,
    /// A JSON object, as text.
    pub params: String,
    pub max_retry: i32,
    pub timeout_ms: i64,
    pub enabled: bool,
    /// Overrides of the global retry back-off and misfire threshold.
    pub retry_backoff_secs: Option<i32>,
    pub retry_factor: Option<i32>,
    pub misfire_threshold_secs: Option<i32>,
}

/// The facade over the actors that the HTTP API uses.
#[derive(Clone)]
pub struct Scheduler {
    store: StoreHandle,
    wheel: Addr<WheelActor>,
    lock: LockHandle,
    clock: SharedClock,
}

impl Scheduler {
    pub fn new(
        store: StoreHandle,
        wheel: Addr<WheelActor>,
        lock: LockHandle,
        clock: SharedClock,
    ) -> Self {
        Scheduler {
            store,
            wheel,
            lock,
            clock,
        }
    }

    /// The live ax processes sharing this store.
    pub async fn cluster(&self) -> Result<Vec<Member>, LockError> {
        self.lock.members().await
    }

    /// The stored fields of a task, its next run computed from now.
    fn fields(&self, input: TaskInput) -> TaskFields {
        let now = self.clock.now();
        let next_run_at = input
            .enabled
            .then(|| input.cron.next_after(now))
            .flatten()
            .map(to_db);
        let status = if input.enabled {
            TaskStatus::Enabled
        } else {
            TaskStatus::Disabled
        };
        TaskFields {
            name: input.name,
            scene: input.scene,
            cron: input.cron.expression().to_string(),
            handler_url: input.handler_url,
            params: input.params,
            max_retry: input.max_retry,
            timeout_ms: input.timeout_ms,
            status: status.as_str().into(),
            next_run_at,
            updated_at: to_db(now),
            retry_backoff_secs: input.retry_backoff_secs,
            retry_factor: input.retry_factor,
            misfire_threshold_secs: input.misfire_threshold_secs,
        }
    }

    /// Puts a task's next run in the wheel, or takes it out.
    fn reschedule(&self, task: &Task) {
        match (TaskSpec::from_task(task), task.next_run_at) {
            (Ok(spec), Some(next)) if task.status == TaskStatus::Enabled.as_str() => {
                self.wheel
                    .do_send(Schedule(vec![(Arc::new(spec), from_db(next))]));
            }
            _ => self.wheel.do_send(Unschedule(task.id)),
        }
    }

    pub async fn create_task(&self, input: TaskInput) -> Result<Task, StoreError> {
        let fields = self.fields(input);
        let task = self
            .store
            .query(move |conn| boxed(tasks::insert(conn, fields)))
            .await?;
        log::info!(
            "task {} created: `{}` {}",
            task.id,
            task.cron,
            task.handler_url
        );
        self.reschedule(&task);
        Ok(task)
    }

    pub async fn update_task(&self, id: i64, input: TaskInput) -> Result<Option<Task>, StoreError> {
        let fields = self.fields(input);
        let task = self
            .store
            .query(move |conn| boxed(tasks::update(conn, id, fields)))
            .await?;
        if let Some(task) = &task {
            log::info!(
                "task {} updated: `{}` {}",
                task.id,
                task.cron,
                task.handler_url
            );
            self.reschedule(task);
        }
        Ok(task)
    }

    pub async fn delete_task(&self, id: i64) -> Result<bool, StoreError> {
        let now = to_db(self.clock.now());
        let deleted = self
            .store
            .query(move |conn| boxed(tasks::delete(conn, id, now)))
            .await?;
        if deleted {
            log::info!("task {id} deleted");
            self.wheel.do_send(Unschedule(id));
        }
        Ok(deleted)
    }

    pub async fn task(&self, id: i64) -> Result<Option<Task>, StoreError> {
        self.store
            .query(move |conn| boxed(tasks::find(conn, id)))
            .await
    }

    pub async fn tasks(
        &self,
        filter: TaskFilter,
        page: Page,
    ) -> Result<(Vec<Task>, i64), StoreError> {
        self.store
            .query(move |conn| boxed(async move { tasks::list(conn, &filter, page).await }))
            .await
    }

    pub async fn task_instances(
        &self,
        task_id: i64,
        page: Page,
    ) -> Result<(Vec<Instance>, i64), StoreError> {
        self.store
            .query(move |conn| boxed(instances::list_for_task(conn, task_id, page)))
            .await
    }

    pub async fn instance(&self, request_id: String) -> Result<Option<Instance>, StoreError> {
        self.store
            .query(move |conn| {
                boxed(async move { instances::find_by_request_id(conn, &request_id).await })
            })
            .await
    }

    /// Applies an executor's result; answers after it is committed.
    pub async fn report_result(&self, result: ResultRecord) -> Result<ResultOutcome, StoreError> {
        self.store.record_result(result).await
    }

    /// How many runs the wheel holds.
    pub async fn wheel_size(&self) -> Option<usize> {
        self.wheel.send(WheelSize).await.ok()
    }

    pub fn now(&self) -> DateTime<Utc> {
        self.clock.now()
    }
}
