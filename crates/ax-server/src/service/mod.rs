//! The service the API calls: task changes go to the store and then, at once, to the wheel;
//! manual runs are recorded and handed to the wheel like any due attempt; reads and results go
//! to the store.

use crate::actors::alerts::AlertActor;
use crate::actors::feed::FeedActor;
use actix::Addr;
use ax_core::ids::ProcessId;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use chrono::{DateTime, Utc};

use crate::actors::cluster::{ClusterHandle, Member, ShareFigures};
use crate::actors::dispatch::DispatchHandle;
use crate::actors::redis_link::LockError;
use crate::actors::store::{boxed, StoreHandle};
use crate::actors::wheel::WheelHandle;
use crate::config::{AlertsConfig, Config, ExecutorsConfig, RunLogsConfig};
use ax_core::metrics::WheelStats;
use ax_core::run::RunStatus;
use ax_core::task::schedule_load::Load;
use ax_core::time::clock::SharedClock;
use ax_store::queries::shares;

pub mod alerts;
pub mod audit_diff;
mod audit_log;
pub mod calendars;
pub mod console_reads;
pub mod error;
pub mod etag;
pub mod events;
pub mod executors;
pub mod run_history;
pub mod run_logs;
mod runs;
pub mod scenes;
mod schedule_load;
mod search;
mod sessions;
pub mod stats;
pub mod task_details;
pub mod task_input;
pub mod tasks;

/// The facade over the actors that the HTTP API uses.
#[derive(Clone)]
pub struct Service {
    store: StoreHandle,
    wheel: WheelHandle,
    dispatch: DispatchHandle,
    cluster: ClusterHandle,
    clock: SharedClock,
    instance_id: ProcessId,
    /// Most backfilled runs of a task due per second.
    backfill_per_sec: i64,
    executors: ExecutorsConfig,
    /// The counts of the last day's runs older than an hour, and when they were counted (see
    /// [`Service::run_counts`]).
    day_counts: Arc<Mutex<Option<Counted>>>,
    alerts: Addr<AlertActor>,
    /// The channels and the default rule (`alerts.*`).
    alerting: AlertsConfig,
    /// How much of executors' logs is kept, and until when (`run_logs.*`).
    run_logs: RunLogsConfig,
    /// Listeners to run changes (`GET /api/events`).
    feed: Addr<FeedActor>,
    /// The last schedule ahead computed (see [`Service::schedule_load`]).
    schedule_load: Arc<Mutex<Option<Load>>>,
}

/// The actors the service asks.
pub struct ServiceActors {
    pub store: StoreHandle,
    pub wheel: WheelHandle,
    pub dispatch: DispatchHandle,
    pub cluster: ClusterHandle,
    pub alerts: Addr<AlertActor>,
    pub feed: Addr<FeedActor>,
}

/// Run counts by status, and when they were counted.
pub type Counted = (DateTime<Utc>, HashMap<RunStatus, i64>);

impl Service {
    pub fn new(
        actors: ServiceActors,
        clock: SharedClock,
        instance_id: ProcessId,
        config: &Config,
    ) -> Self {
        let ServiceActors {
            store,
            wheel,
            dispatch,
            cluster,
            alerts,
            feed,
        } = actors;
        Service {
            store,
            wheel,
            dispatch,
            cluster,
            clock,
            instance_id,
            backfill_per_sec: config.scheduler.backfill_per_sec,
            executors: config.executors.clone(),
            day_counts: Arc::default(),
            schedule_load: Arc::default(),
            alerts,
            alerting: config.alerts.clone(),
            run_logs: config.run_logs.clone(),
            feed,
        }
    }

    /// The live ax processes sharing this store.
    pub async fn cluster(&self) -> std::result::Result<Vec<Member>, LockError> {
        self.cluster.members().await
    }

    /// Each process's share of the tasks, in the order of `members`.
    pub async fn shares(&self, members: &[Member]) -> error::Result<Vec<ShareFigures>> {
        let per_partition = self
            .store
            .query(|conn| boxed(shares::enabled_per_partition(conn)))
            .await?;
        Ok(members
            .iter()
            .map(|member| ShareFigures::of(member, &per_partition))
            .collect())
    }

    /// How many entries the wheel holds.
    pub async fn wheel_stats(&self) -> Option<WheelStats> {
        self.wheel.stats().await
    }

    pub fn now(&self) -> DateTime<Utc> {
        self.clock.now()
    }
}
