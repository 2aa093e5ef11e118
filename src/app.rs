//! Start-up and shutdown of one ax process: store, lock, actors, HTTP server.

use std::net::SocketAddr;
use std::time::Duration;

use actix::prelude::*;
use actix_web::{dev::ServerHandle, web, App, HttpServer};

use crate::actors::dispatch::DispatchHandle;
use crate::actors::lock::{LockActor, LockError, LockHandle};
use crate::actors::store::{StoreActor, StoreHandle};
use crate::actors::supervisor::{StopSupervisor, SupervisorActor, SupervisorSettings};
use crate::actors::wheel::{FireContext, StopTicking, WheelActor, WheelSettings};
use crate::api::{self, ApiState};
use crate::clock::SharedClock;
use crate::config::Config;
use crate::scheduler::Scheduler;
use crate::security::{Allowlist, Security};
use crate::store::queries::{instances, meta};
use crate::store::{to_db, Db, StoreError};
use uuid::Uuid;

/// Why ax could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Lock(#[from] LockError),
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: String,
        source: std::io::Error,
    },
}

/// A running ax process.
pub struct Ax {
    addr: SocketAddr,
    server: ServerHandle,
    wheel: Addr<WheelActor>,
    supervisor: Addr<SupervisorActor>,
    dispatch: DispatchHandle,
    store: StoreHandle,
    lock: LockHandle,
    shutdown_timeout: Duration,
}

/// Starts ax: connects (and migrates) the store, connects the lock, starts the actors and the
/// HTTP API. Must run inside an actix system.
pub async fn start(config: &Config, clock: SharedClock) -> Result<Ax, StartError> {
    let db = Db::connect(&config.store.url, config.store.pool_size).await?;
    log::info!("store: {} ({})", db.backend(), config.store.url);
    recover_own_runs(&db, &config.server.instance_id, clock.now()).await?;
    let security = security(config, &db).await?;
    let backend = db.backend();
    let lock = match &config.redis.url {
        Some(url) => LockActor::redis(url, config.server.instance_id.clone()).await?,
        None => LockActor::local(config.server.instance_id.clone()),
    };
    log::info!(
        "fire lock: {}",
        if config.redis.url.is_some() {
            "redis"
        } else {
            "in-process"
        }
    );
    // The store gets a thread of its own: encoding and decoding database traffic then runs
    // beside the wheel's tick instead of after it.
    let (retry, batch_size) = (config.retry_policy(), config.store.batch_size);
    let batch_interval = Duration::from_millis(config.store.batch_interval_ms);
    let store = StoreHandle::new(StoreActor::start_in_arbiter(
        &Arbiter::new().handle(),
        move |_| StoreActor::new(db, retry, batch_size, batch_interval),
    ));
    let dispatch = DispatchHandle::start(
        config.dispatch.workers,
        config.dispatch.max_in_flight,
        store.clone(),
        security.secret.clone(),
    );
    let lock = LockHandle::new(lock.start());
    let fire = FireContext {
        lock: lock.clone(),
        store: store.clone(),
        dispatch: dispatch.clone(),
        instance_id: config.server.instance_id.clone(),
        batch_size: config.store.batch_size,
        dependency_timeout_secs: config.scheduler.dependency_timeout_secs,
    };
    let wheel_settings = WheelSettings {
        slots: config.scheduler.wheel_size,
        tick_interval: Duration::from_millis(config.scheduler.tick_interval_ms),
        window_secs: config.scheduler.preload_window_secs,
        commit_ahead: Duration::from_millis(config.scheduler.commit_ahead_ms),
        policy: config.missed_run_policy(),
    };
    let wheel = WheelActor::new(wheel_settings, clock.clone(), fire).start();
    let supervisor = SupervisorActor::new(
        SupervisorSettings {
            window_secs: config.scheduler.preload_window_secs,
            preload_interval: Duration::from_secs(config.scheduler.preload_interval_secs),
            page_size: config.scheduler.max_grab_batch,
            grace_secs: config.missed_run_policy().grace_secs,
            retention: chrono::Duration::days(config.store.retention_days),
        },
        clock.clone(),
        store.clone(),
        wheel.clone(),
        config.redis.url.is_some().then(|| lock.clone()),
    )
    .start();

    let state = ApiState {
        scheduler: Scheduler::new(
            store.clone(),
            wheel.clone(),
            lock.clone(),
            dispatch.clone(),
            clock,
            config.server.instance_id.clone(),
        ),
        instance_id: config.server.instance_id.clone(),
        backend,
        security,
    };
    let bind = format!("{}:{}", config.bind_address(), config.server.port);
    if config.server.admin_token.is_none() {
        log::warn!(
            "no admin token (server.admin_token / AX_ADMIN_TOKEN): the admin API is open to \
             anyone who can reach {bind}; set one before exposing ax beyond this machine"
        );
    }
    let server = HttpServer::new(move || {
        App::new()
            .app_data(web::Data::new(state.clone()))
            .wrap(actix_web::middleware::from_fn(api::admin_only))
            .configure(api::routes)
    })
    // Signals are handled once, by the caller, which then runs `Ax::shutdown`.
    .disable_signals()
    .workers(2)
    .shutdown_timeout(config.server.shutdown_timeout_ms.div_ceil(1000))
    .bind(&bind)
    .map_err(|source| StartError::Bind {
        addr: bind.clone(),
        source,
    })?;
    let addr = server.addrs()[0];
    lock.announce(addr.to_string());
    let server = server.run();
    let handle = server.handle();
    actix_rt::spawn(server);
    log::info!(
        "ax {} listening on http://{addr}",
        config.server.instance_id
    );
    Ok(Ax {
        addr,
        server: handle,
        wheel,
        supervisor,
        dispatch,
        store,
        lock,
        shutdown_timeout: Duration::from_millis(config.server.shutdown_timeout_ms),
    })
}

/// The security settings: the configured signing secret, or the one this database keeps.
async fn security(config: &Config, db: &Db) -> Result<Security, StartError> {
    let secret = match &config.security.signing_secret {
        Some(secret) => secret.clone(),
        None => {
            let generated = format!("{}{}", Uuid::new_v4().simple(), Uuid::new_v4().simple());
            let mut conn = db.conn().await?;
            meta::signing_secret(&mut conn, generated).await?
        }
    };
    Ok(Security {
        admin_token: config.server.admin_token.clone(),
        secret: secret.into_bytes().into(),
        // Validated with the configuration.
        allowlist: Allowlist::parse(&config.security.handler_allowlist).unwrap_or_default(),
    })
}

/// Runs this process left READY when it last stopped (it crashed between commit and
/// dispatch, or before recording the outcome) are due again at once; the supervisor's attempt
/// scan then dispatches them.
async fn recover_own_runs(
    db: &Db,
    instance_id: &str,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<(), StoreError> {
    let mut conn = db.conn().await?;
    let count = instances::reclaim_own(&mut conn, instance_id, to_db(now)).await?;
    if count > 0 {
        log::warn!(
            "recovery: {count} runs committed but not finished by {instance_id} are due again"
        );
    }
    Ok(())
}

impl Ax {
    /// The address the HTTP API listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The one shutdown path: stop taking requests, stop the wheel, let in-flight dispatches
    /// finish (bounded), commit the store's queue, and leave the cluster.
    pub async fn shutdown(self) {
        log::info!("shutting down");
        self.server.stop(true).await;
        let stopped = self.wheel.send(StopTicking);
        if tokio::time::timeout(self.shutdown_timeout, stopped)
            .await
            .is_err()
        {
            log::warn!(
                "shutdown: fire batches still committing after {:?}",
                self.shutdown_timeout
            );
        }
        self.supervisor.do_send(StopSupervisor);
        self.dispatch.drain(self.shutdown_timeout).await;
        self.store.flush().await;
        self.lock.leave().await;
        log::info!("shutdown complete");
    }
}
