//! Start-up and shutdown of one ax process: store, lock, actors, HTTP server.

pub mod http_errors;

use ax_core::ids::ProcessId;
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;
use actix_http::error::DispatchError;
use actix_http::HttpService;
use actix_service::{fn_service, map_config, IntoServiceFactory, ServiceFactoryExt};
use actix_web::dev::AppConfig;
use actix_web::dev::{Server, ServerHandle};
use actix_web::{web, App};
use socket2::{Domain, Protocol, Socket, Type};
use tokio::sync::watch;

use crate::actors::alerts::{AlertActor, AlertSettings};
use crate::actors::cluster::{
    ClockWatch, ClusterActor, ClusterHandle, Heartbeats, HEARTBEAT_INTERVAL,
};
use crate::actors::dispatch::{DispatchHandle, DispatchSettings};
use crate::actors::feed::FeedActor;
use crate::actors::fire::FireContext;
use crate::actors::groups::GroupSettings;
use crate::actors::health::Health;
use crate::actors::lock::{LockActor, LockHandle};
use crate::actors::redis_keys::RedisKeys;
use crate::actors::redis_link::{LockError, RedisLink};
use crate::actors::store::{LaneCommits, StoreActor, StoreHandle};
use crate::actors::supervisor::{StopSupervisor, SupervisorActor, SupervisorSettings};
use crate::actors::wheel::{WheelActor, WheelHandle, WheelSettings};
use crate::actors::Halt;
use crate::api;
use crate::api::require_token;
use crate::app::http_errors::JsonProtocolErrors;
use crate::cluster::identity::{Identity, IdentityError, StoreClaim};
use crate::config::Config;
use crate::service::{Service, ServiceActors};
use crate::web::ApiState;
use ax_core::cluster::fencing::SendGate;
use ax_core::metrics::metrics;
use ax_core::security::site::AllowedHosts;
use ax_core::security::{Allowlist, Groups, Principal, Security};
use ax_core::time::clock::{ClockCheck, Reading, ReferenceClock, SharedClock};
use ax_core::wheel::pace::PipelineLimits;
use ax_store::queries::{meta, processes, recovery};
use ax_store::{Db, StoreError, StoreUrl};
use uuid::Uuid;

/// How the start-up warning about a missing admin token begins (the bench expects it).
pub const NO_TOKEN_NOTICE: &str = "no admin token";

/// Why ax could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Lock(#[from] LockError),
    #[error(transparent)]
    Identity(#[from] IdentityError),
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: String,
        source: std::io::Error,
    },
}

impl StartError {
    /// Whether a setting is to blame, one no wait mends (exit 2, as for any refused setting),
    /// rather than a server, the machine or another process.
    pub fn is_setting(&self) -> bool {
        matches!(self, StartError::Lock(err) if err.is_setting())
    }
}

/// Pending connections the listener queues (actix-web's own default).
const LISTEN_BACKLOG: i32 = 1024;

/// How long an idle connection stays open: nginx's 75 s, past what executors' HTTP clients
/// mostly keep a pooled connection (awc 15 s). At actix's default 5 s, an executor whose runs
/// come less often (every 10 s, every minute) found its pooled connections closed by ax, and
/// opened new ones for its callbacks.
const KEEP_ALIVE: Duration = Duration::from_secs(75);

/// A running ax process.
pub struct Ax {
    addr: SocketAddr,
    server: ServerHandle,
    actors: Actors,
    identity: Identity,
    shutdown_timeout: Duration,
}

/// Starts ax: takes the port, claims the store (a SQLite file for itself), connects (and
/// migrates) it, takes this process's identity, links Redis (which need not answer yet), starts
/// the actors and the HTTP API. Must run inside an actix system.
///
/// Everything that can fail is done before the first actor starts: an actor that never ran
/// when the runtime is dropped (a start-up that failed after starting it) panics in actix.
pub async fn start(config: &Config, clock: SharedClock) -> Result<Ax, StartError> {
    let (listener, addr) = listen(config)?;
    let url = StoreUrl::parse(&config.store.url)?;
    // Before the store is touched: a second process on a SQLite file migrates nothing.
    let claim = StoreClaim::take(&url).await?;
    let db = Db::connect(&config.store.url, config.store.pool_size).await?;
    log::info!(
        "store: {} ({})",
        db.backend(),
        ax_store::redacted(&config.store.url)
    );
    let identity = Identity::claim(&db, claim, config.server.instance_id.as_deref()).await?;
    let instance_id = ProcessId::from(identity.id());
    let clock_check = Arc::new(ClockCheck::default());
    check_clock(&db, &clock, &clock_check, config.cluster.max_clock_skew_ms).await?;
    let local = clock;
    let clock: SharedClock = Arc::new(ReferenceClock {
        local: local.clone(),
        check: clock_check.clone(),
    });
    let epoch = recover_own_runs(&db, &instance_id, clock.now()).await?;
    let security = security(config, &db).await?;
    let backend = db.backend();
    let redis = match &config.redis.url {
        Some(url) => Some(RedisLink::connect(url, &config.redis).await?),
        None => None,
    };
    log::info!(
        "fire lock: {}",
        if config.redis.url.is_some() {
            "redis"
        } else {
            "in-process"
        }
    );
    let actors = Actors::start(
        config,
        db,
        redis,
        &security,
        (&instance_id, epoch, addr),
        (&clock, &local, &clock_check),
    );
    // The first runs must see the executor groups, not wait a second for their refresh.
    actors.dispatch.refresh_groups().await;
    let state = ApiState {
        service: Service::new(
            ServiceActors {
                store: actors.store.clone(),
                wheel: WheelHandle::new(actors.wheel.clone()),
                dispatch: actors.dispatch.clone(),
                cluster: actors.cluster.clone(),
                alerts: actors.alerts.clone(),
                feed: actors.feed.clone(),
            },
            clock.clone(),
            instance_id.clone(),
            config,
        ),
        health: actors.health(clock, clock_check, identity.held()),
        instance_id: instance_id.clone(),
        backend,
        security,
        auth_failures: Default::default(),
    };
    let server = match serve((listener, addr), state, config) {
        Ok(served) => served,
        Err(err) => {
            actors.halt().await;
            identity.release().await;
            return Err(err);
        }
    };
    actors.cluster.announce(addr.to_string());
    let handle = server.handle();
    actix_rt::spawn(server);
    log::info!("ax {instance_id} listening on http://{addr}");
    log::info!("console: http://{addr}/console");
    if !config.has_tokens() {
        log::warn!(
            "{NO_TOKEN_NOTICE} (server.admin_token / AX_ADMIN_TOKEN): the admin API is open to \
             anyone who can reach {addr}; set one before exposing ax beyond this machine"
        );
    }
    Ok(Ax {
        addr,
        server: handle,
        actors,
        identity,
        shutdown_timeout: Duration::from_millis(config.server.shutdown_timeout_ms),
    })
}

/// Takes the HTTP port, first of all: a port in use fails the start before anything else. The
/// listener, and the address it took (its port, when `server.port` is 0).
fn listen(config: &Config) -> Result<(std::net::TcpListener, SocketAddr), StartError> {
    let bind = format!("{}:{}", config.bind_address(), config.server.port);
    let bind_error = |source| StartError::Bind {
        addr: bind.clone(),
        source,
    };
    let addr = bind
        .to_socket_addrs()
        .map_err(bind_error)?
        .next()
        .ok_or_else(|| bind_error(std::io::ErrorKind::AddrNotAvailable.into()))?;
    // As actix-web binds: reusable address, non-blocking, its backlog.
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))
        .map_err(bind_error)?;
    socket.set_reuse_address(true).map_err(bind_error)?;
    socket.set_nonblocking(true).map_err(bind_error)?;
    socket.bind(&addr.into()).map_err(bind_error)?;
    socket.listen(LISTEN_BACKLOG).map_err(bind_error)?;
    let listener: std::net::TcpListener = socket.into();
    let bound = listener.local_addr().map_err(bind_error)?;
    Ok((listener, bound))
}

/// The HTTP API on `listener` (bound to `addr`), not yet running. Served as actix-web's
/// `HttpServer` serves it, with each connection wrapped so that the errors actix-http answers
/// by itself are in ax's JSON shape too (`crate::app::http_errors`).
fn serve(
    (listener, addr): (std::net::TcpListener, SocketAddr),
    state: ApiState,
    config: &Config,
) -> Result<Server, StartError> {
    let bind_error = |source| StartError::Bind {
        addr: format!("{}:{}", config.bind_address(), config.server.port),
        source,
    };
    let builder = actix_server::Server::build();
    let shutdown = builder.graceful_shutdown_signal();
    let server = builder
        // Signals are handled once, by the caller, which then runs `Ax::shutdown`.
        .disable_signals()
        .workers(2)
        .shutdown_timeout(config.server.shutdown_timeout_ms.div_ceil(1000))
        .listen("ax-http", listener, move || {
            let state = state.clone();
            let app = App::new()
                .app_data(web::Data::new(state))
                // Innermost: a body is looked at once it is known who sent it.
                .wrap(actix_web::middleware::from_fn(api::json_bodies))
                .wrap(actix_web::middleware::from_fn(require_token))
                // A request of another site or for another host goes no further.
                .wrap(actix_web::middleware::from_fn(api::same_site))
                // Outermost: every error leaves in its shape (a console page, or JSON).
                .wrap(actix_web::middleware::from_fn(
                    crate::app::http_errors::in_shape,
                ))
                // The API first: its executor endpoints are the busiest routes.
                .configure(api::routes)
                .configure(crate::console::routes)
                .into_factory()
                .map_err(|err| err.error_response());
            let shutdown = shutdown.clone();
            let http = HttpService::build()
                .keep_alive(KEEP_ALIVE)
                // Idle keep-alive connections close when the server stops.
                .graceful_shutdown_signal(move || {
                    let shutdown = shutdown.clone();
                    async move { shutdown.notified().await }
                })
                .local_addr(addr)
                // The app config only names a host for URL generation, which ax does not use.
                .h1(map_config(app, |_| AppConfig::default()));
            fn_service(|io: actix_rt::net::TcpStream| async move {
                let peer = io.peer_addr().ok();
                Ok::<_, DispatchError>((JsonProtocolErrors::new(io), peer))
            })
            .and_then(http)
        })
        .map_err(bind_error)?;
    Ok(server.run())
}

/// The actors of one ax process.
struct Actors {
    wheel: Addr<WheelActor>,
    /// The second of the wheel's last tick.
    ticks: watch::Receiver<i64>,
    supervisor: Addr<SupervisorActor>,
    dispatch: DispatchHandle,
    store: StoreHandle,
    store_actor: Addr<StoreActor>,
    lock_actor: Addr<LockActor>,
    /// The link to Redis, when there is one (what `/healthz` tells of it).
    redis: Option<RedisLink>,
    cluster: ClusterHandle,
    cluster_actor: Addr<ClusterActor>,
    alerts: Addr<AlertActor>,
    feed: Addr<FeedActor>,
}

impl Actors {
    fn start(
        config: &Config,
        db: Db,
        redis: Option<RedisLink>,
        security: &Security,
        (instance_id, epoch, served_on): (&ProcessId, i64, SocketAddr),
        (clock, local, clock_check): (&SharedClock, &SharedClock, &Arc<ClockCheck>),
    ) -> Actors {
        let gate = SendGate::default();
        // The store gets a thread of its own: encoding and decoding database traffic then
        // runs beside the wheel's tick instead of after it.
        let (retry, batch_size) = (config.retry_policy(), config.store.batch_size);
        let max_wait = Duration::from_millis(config.store.batch_interval_ms);
        let (fires, results) = (config.store.fire_commits, config.store.result_commits);
        let commits = LaneCommits::on(&db, fires, results);
        let store_actor = StoreActor::start_in_arbiter(&Arbiter::new().handle(), move |_| {
            StoreActor::new(db, retry, batch_size, max_wait, commits)
        });
        let store = StoreHandle::new(store_actor.clone());
        let dispatch = DispatchHandle::start(
            DispatchSettings {
                workers: config.dispatch.workers,
                max_in_flight: config.dispatch.max_in_flight,
                host_caps: config.dispatch.host_caps(),
                lanes: config.dispatch.lanes(),
                groups: GroupSettings {
                    failures_to_cool: config.executors.failures_to_cool,
                    cool_down_secs: config.executors.cool_down_secs,
                    member_ttl_secs: config.executors.member_ttl_secs,
                },
                claimant: instance_id.clone(),
                clock: clock.clone(),
                reply_to: crate::cluster::identity::reachable_at(
                    config.executors.callback_url.as_deref(),
                    served_on,
                    crate::cluster::identity::system_host_name(),
                ),
                gate: gate.clone(),
            },
            store.clone(),
            security,
        );
        let redis_keys = RedisKeys::new(&config.redis.key_prefix);
        let lock_actor = match &redis {
            Some(link) => LockActor::redis(link.clone(), redis_keys.clone(), instance_id.clone()),
            None => LockActor::local(instance_id.clone()),
        }
        .start();
        let lock = LockHandle::new(lock_actor.clone());
        let clock_watch = ClockWatch {
            clock: local.clone(),
            check: clock_check.clone(),
            max_skew_ms: config.cluster.max_clock_skew_ms,
            logged: None,
        };
        let heartbeats = redis.clone().map(|link| Heartbeats {
            link,
            keys: redis_keys,
        });
        let cluster_actor =
            ClusterActor::new(instance_id.clone(), heartbeats, store.clone(), clock_watch);
        let share = cluster_actor.share();
        let cluster_actor = cluster_actor.start();
        let cluster = ClusterHandle::new(cluster_actor.clone());
        let fire = FireContext {
            lock: lock.clone(),
            store: store.clone(),
            dispatch: dispatch.clone(),
            instance_id: instance_id.clone(),
            batch_size: config.store.batch_size,
            dependency_timeout_secs: config.scheduler.dependency_timeout_secs,
            clock_check: clock_check.clone(),
            gate,
        };
        let wheel_settings = WheelSettings {
            slots: config.scheduler.wheel_size,
            tick_interval: Duration::from_millis(config.scheduler.tick_interval_ms),
            window_secs: config.scheduler.preload_window_secs,
            commit_ahead: Duration::from_millis(config.scheduler.commit_ahead_ms),
            policy: config.missed_run_policy(),
            limits: PipelineLimits {
                // Enough batches to keep every fire commit of the store busy while the next
                // ones take their locks: few enough that none waits long under its lock.
                committing_batches: 8 * commits.fires,
                queued_runs: config.scheduler.max_queued_runs,
            },
        };
        let wheel = WheelActor::new(wheel_settings, clock.clone(), fire, (epoch, share.clone()));
        let ticks = wheel.ticks();
        let wheel = wheel.start();
        let supervisor = SupervisorActor::new(
            SupervisorSettings {
                window_secs: config.scheduler.preload_window_secs,
                preload_interval: Duration::from_secs(config.scheduler.preload_interval_secs),
                page_size: config.scheduler.max_grab_batch,
                retention: chrono::Duration::days(config.store.retention_days),
            },
            (clock.clone(), clock_check.clone()),
            store.clone(),
            (WheelHandle::new(wheel.clone()), share),
            instance_id.clone(),
        )
        .start();
        let alerts = AlertActor::new(
            alert_settings(config, instance_id, served_on),
            (store.clone(), redis.clone()),
            security.secret.clone(),
            security.allowlist.clone(),
        )
        .start();
        let feed = FeedActor::new(store.clone(), clock.clone()).start();
        Actors {
            alerts,
            feed,
            wheel,
            ticks,
            supervisor,
            dispatch,
            store,
            store_actor,
            lock_actor,
            redis,
            cluster,
            cluster_actor,
        }
    }

    /// What `/healthz` checks.
    fn health(
        &self,
        clock: SharedClock,
        clock_check: Arc<ClockCheck>,
        identity: Arc<AtomicBool>,
    ) -> Health {
        Health {
            wheel: self.wheel.clone(),
            ticks: self.ticks.clone(),
            supervisor: self.supervisor.clone(),
            dispatchers: self.dispatch.workers().into(),
            lock: self.lock_actor.clone(),
            redis: self.redis.clone(),
            store: self.store.clone(),
            identity,
            clock,
            clock_check,
        }
    }

    /// Stops every actor and waits until each has (a start-up that failed after starting them):
    /// an actor that never ran panics inside actix when the runtime drops it.
    async fn halt(&self) {
        let _ = self.supervisor.send(Halt).await;
        let _ = self.wheel.send(Halt).await;
        let dispatchers = self
            .dispatch
            .workers()
            .iter()
            .map(|worker| worker.send(Halt));
        futures_util::future::join_all(dispatchers).await;
        let _ = self.lock_actor.send(Halt).await;
        let _ = self.cluster_actor.send(Halt).await;
        let _ = self.alerts.send(Halt).await;
        let _ = self.feed.send(Halt).await;
        let _ = self.store_actor.send(Halt).await;
    }
}

/// How alerts are folded and sent, from `alerts.*`; their links lead to the console where
/// this process serves it (`served_on`) unless `alerts.console_url` says where people reach it.
fn alert_settings(
    config: &Config,
    instance_id: &ProcessId,
    served_on: SocketAddr,
) -> AlertSettings {
    let alerts = &config.alerts;
    let console_url = crate::cluster::identity::reachable_at(
        alerts.console_url.as_deref(),
        served_on,
        crate::cluster::identity::system_host_name(),
    );
    let run_links = crate::console::paths::run_url(&console_url, "");
    AlertSettings {
        channels: alerts.channels.clone(),
        rule: alerts.default_rule.clone(),
        run_links,
        retry_for: chrono::Duration::seconds(alerts.retry_for_secs),
        send_timeout: Duration::from_millis(alerts.send_timeout_ms),
        claimant: instance_id.clone(),
        outage_after: chrono::Duration::seconds(alerts.outage_secs),
        group_window: chrono::Duration::seconds(alerts.group_window_secs),
    }
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
        tokens: config
            .server
            .tokens
            .iter()
            .map(|named| {
                let principal = Principal {
                    name: named.name.clone(),
                    role: named.role,
                    // Only an executor's token has groups (checked with the configuration).
                    groups: Groups::listed(named.groups.as_deref().unwrap_or_default()),
                };
                (named.token.clone(), principal)
            })
            .collect(),
        secret: secret.into_bytes().into(),
        // Validated with the configuration.
        allowlist: Allowlist::parse(&config.security.handler_allowlist).unwrap_or_default(),
        hosts: allowed_hosts(config),
    })
}

/// The names requests may give as their `Host`: checked without tokens (a page rebound to
/// this address must not read an open API), and with tokens when `server.allowed_hosts` says.
fn allowed_hosts(config: &Config) -> Option<AllowedHosts> {
    let checked = !config.has_tokens() || !config.server.allowed_hosts.is_empty();
    checked.then(|| {
        let names: Vec<String> = crate::cluster::identity::system_host_name()
            .into_iter()
            .collect();
        AllowedHosts::new(config.bind_address(), &names, &config.server.allowed_hosts)
    })
}

/// Runs this process left READY when it last stopped (it crashed between commit and
/// dispatch, or before recording the outcome) are due again at once; the supervisor's attempt
/// scan then dispatches them.
/// Checks this process's clock against the database's before anything fires: a process that
/// starts skewed fires and claims nothing until the check every few seconds finds it right.
async fn check_clock(
    db: &Db,
    clock: &SharedClock,
    check: &ClockCheck,
    max_skew_ms: u64,
) -> Result<(), StoreError> {
    let mut conn = db.conn().await?;
    let before = clock.now();
    let reference = meta::reference_time(&mut conn).await?;
    let reading = Reading::of(before, reference, clock.now());
    metrics().set_clock_offset_ms(reading.offset_ms);
    if check.record(reading, max_skew_ms) == Some(true) {
        log::error!(
            "this process's clock is {} ms from the database's (at most {max_skew_ms} ms \
             allowed): it fires and claims nothing until it is set right (NTP)",
            reading.offset_ms
        );
    }
    Ok(())
}

/// Makes this process's claims from before a restart lapse, and takes its epoch (see
/// `ax_core::cluster::fencing`): it has sent nothing yet.
async fn recover_own_runs(
    db: &Db,
    instance_id: &ProcessId,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<i64, StoreError> {
    let mut conn = db.conn().await?;
    let count = recovery::recover_own(&mut conn, instance_id, now).await?;
    if count > 0 {
        log::warn!(
            "recovery: {count} runs committed but not finished by {instance_id} are due again"
        );
    }
    processes::begin_epoch(&mut conn, instance_id, now.timestamp() - 1, now).await
}

impl Ax {
    /// The address the HTTP API listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The wheel, for tests of what notices a stopped actor (`/healthz`).
    pub fn wheel(&self) -> &Addr<WheelActor> {
        &self.actors.wheel
    }

    /// The one shutdown path: stop taking requests, stop the wheel, let in-flight dispatches
    /// finish (bounded), commit the store's queue, leave the cluster and free the instance id.
    /// The actors stay until the runtime goes (they have run, so actix drops them quietly):
    /// stopping the store would close its SQLite connections under a process starting anew on
    /// the same file, which then finds the database locked.
    pub async fn shutdown(self) {
        log::info!("shutting down");
        // Event streams never end by themselves: open, they would hold the graceful stop up
        // to its timeout.
        let _ = self.actors.feed.send(Halt).await;
        self.server.stop(true).await;
        let actors = &self.actors;
        // The others take this process's share at their next heartbeat and load it; its wheel
        // fires it meanwhile, so no run waits for a process gone.
        if actors.cluster.hand_over().await > 0 {
            let handoff =
                (HEARTBEAT_INTERVAL * 2 + Duration::from_secs(1)).min(self.shutdown_timeout);
            log::info!("shutdown: handing this process's share to the others ({handoff:?})");
            actix_rt::time::sleep(handoff).await;
        }
        let wheel = WheelHandle::new(actors.wheel.clone());
        let stopped = wheel.stop();
        if tokio::time::timeout(self.shutdown_timeout, stopped)
            .await
            .is_err()
        {
            log::warn!(
                "shutdown: fire batches still committing after {:?}",
                self.shutdown_timeout
            );
        }
        actors.supervisor.do_send(StopSupervisor);
        actors.dispatch.drain(self.shutdown_timeout).await;
        actors.store.flush().await;
        actors.cluster.leave().await;
        self.identity.release().await;
        log::info!("shutdown complete");
    }
}
