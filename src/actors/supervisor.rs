//! SupervisorActor: fills the wheel at start-up with every enabled task due within the preload
//! window (overdue ones included: the missed-run policy decides for them), keeps the window
//! topped up, and fails runs whose result did not come in time.

use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;
use chrono::{DateTime, Utc};

use super::store::{boxed, StoreHandle};
use super::wheel::{Schedule, WheelActor};
use crate::clock::SharedClock;
use crate::schedule::TaskSpec;
use crate::store::queries::{instances, tasks};
use crate::store::{from_db, to_db, StoreError};

/// How often overdue RUNNING runs are looked for.
const EXPIRY_INTERVAL: Duration = Duration::from_secs(1);

/// Settings of the supervisor.
#[derive(Debug, Clone)]
pub struct SupervisorSettings {
    pub window_secs: i64,
    pub preload_interval: Duration,
    pub page_size: i64,
}

/// The actor keeping the wheel filled and runs from waiting forever.
pub struct SupervisorActor {
    settings: SupervisorSettings,
    clock: SharedClock,
    store: StoreHandle,
    wheel: Addr<WheelActor>,
    preloading: bool,
    expiring: bool,
}

impl SupervisorActor {
    pub fn new(
        settings: SupervisorSettings,
        clock: SharedClock,
        store: StoreHandle,
        wheel: Addr<WheelActor>,
    ) -> Self {
        SupervisorActor {
            settings,
            clock,
            store,
            wheel,
            preloading: false,
            expiring: false,
        }
    }

    fn preload(&mut self, ctx: &mut Context<Self>) {
        if self.preloading {
            return;
        }
        self.preloading = true;
        let until = self.clock.now() + chrono::Duration::seconds(self.settings.window_secs);
        let work = preload(
            self.store.clone(),
            self.wheel.clone(),
            until,
            self.settings.page_size,
        );
        ctx.spawn(work.into_actor(self).map(|result, act, _| {
            act.preloading = false;
            match result {
                Ok(count) => log::debug!("preload: {count} tasks due in the window"),
                Err(err) => log::error!("preload failed, retrying at the next top-up: {err}"),
            }
        }));
    }

    fn expire(&mut self, ctx: &mut Context<Self>) {
        if self.expiring {
            return;
        }
        self.expiring = true;
        let now = to_db(self.clock.now());
        let store = self.store.clone();
        let work = async move {
            store
                .query(move |conn| boxed(instances::fail_expired(conn, now)))
                .await
        };
        ctx.spawn(work.into_actor(self).map(|result, act, _| {
            act.expiring = false;
            match result {
                Ok(0) => {}
                Ok(count) => log::warn!("{count} runs FAILED: no result before their timeout"),
                Err(err) => log::error!("expiry check failed: {err}"),
            }
        }));
    }
}

/// Streams the enabled tasks due by `until` into the wheel, a page at a time.
async fn preload(
    store: StoreHandle,
    wheel: Addr<WheelActor>,
    until: DateTime<Utc>,
    page_size: i64,
) -> Result<usize, StoreError> {
    let until = to_db(until);
    let mut after_id = 0;
    let mut count = 0;
    loop {
        let page = store
            .query(move |conn| boxed(tasks::due_until(conn, until, after_id, page_size)))
            .await?;
        let Some(last) = page.last() else {
            return Ok(count);
        };
        after_id = last.id;
        count += page.len();
        let full = page.len() as i64 == page_size;
        let mut schedule = Vec::with_capacity(page.len());
        for task in page {
            match (TaskSpec::from_task(&task), task.next_run_at) {
                (Ok(spec), Some(next)) => schedule.push((Arc::new(spec), from_db(next))),
                (Err(err), _) => log::error!("task {}: stored cron is invalid: {err}", task.id),
                (Ok(_), None) => {}
            }
        }
        wheel
            .send(Schedule(schedule))
            .await
            .map_err(|err| StoreError::Pool(format!("wheel unavailable: {err}")))?;
        if !full {
            return Ok(count);
        }
    }
}

impl Actor for SupervisorActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        self.preload(ctx);
        ctx.run_interval(self.settings.preload_interval, |act, ctx| act.preload(ctx));
        ctx.run_interval(EXPIRY_INTERVAL, |act, ctx| act.expire(ctx));
    }
}

/// Stops the supervisor's periodic work (shutdown).
#[derive(Message)]
#[rtype(result = "()")]
pub struct StopSupervisor;

impl Handler<StopSupervisor> for SupervisorActor {
    type Result = ();

    fn handle(&mut self, _: StopSupervisor, ctx: &mut Context<Self>) {
        ctx.stop();
    }
}
