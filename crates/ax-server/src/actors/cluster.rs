//! ClusterActor: keeps this process's heartbeat in Redis and lists the live processes, so the
//! supervisor can tell a dead process's claims from a live one's (without Redis the cluster is
//! this process alone); decides this process's share of the tasks from that list (see
//! `ax_core::cluster::shares`); and checks this process's clock against the cluster's reference
//! clock, the database's: past the allowed skew the process fires and claims nothing, and its
//! heartbeat says so, so that the others take its share.

use ax_core::ids::ProcessId;
use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use actix::prelude::*;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use tokio::sync::watch;

use ax_core::cluster::shares::{Share, ShareKeeper};
use ax_core::metrics::{add, metrics};
use ax_core::time::clock::{rfc3339_serde, ClockCheck, Reading, SharedClock};
use ax_store::queries::meta;

use super::redis_keys::RedisKeys;
use super::redis_link::{unavailable, LockError, RedisLink, CALL_WAIT};
use super::store::{boxed, StoreHandle};
use ax_core::alerting::AlertEvent;
use ax_store::queries::alerts;

/// How often a process renews its heartbeat.
pub const HEARTBEAT_INTERVAL: Duration = Duration::from_secs(2);
/// A process whose heartbeat is older than this is gone.
pub const HEARTBEAT_TTL: Duration = Duration::from_secs(10);
/// How often this process's clock is checked against the reference clock.
pub const CLOCK_CHECK_INTERVAL: Duration = Duration::from_secs(5);
/// How far back the fires a heartbeat tells of are counted.
const FIRE_RATE_WINDOW: usize = 5;
/// How often a skewed clock is logged at ERROR while it stays skewed.
const SKEW_LOG_INTERVAL: Duration = Duration::from_secs(60);

/// A live ax process, as its heartbeat says.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Member {
    pub instance_id: ProcessId,
    pub addr: String,
    #[serde(serialize_with = "rfc3339_serde")]
    pub started_at: DateTime<Utc>,
    #[serde(serialize_with = "rfc3339_serde")]
    pub last_seen: DateTime<Utc>,
    /// Whether it fires: not while its clock is skewed. Only firing processes have a share.
    #[serde(default = "firing_unless_said")]
    pub firing: bool,
    /// The partitions it fires now (its own, and those it is handing over).
    #[serde(default = "all_unless_said")]
    pub share: Share,
    /// Runs it fired per second, over its last few heartbeats.
    #[serde(default)]
    pub fires_per_sec: f64,
}

/// A process's share as shown: how many partitions it fires, the enabled tasks in them, and the
/// runs it fires per second.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ShareFigures {
    pub partitions: usize,
    pub tasks: u64,
    pub fires_per_sec: f64,
}

impl ShareFigures {
    /// The figures of `member`, with the enabled tasks counted per partition.
    pub fn of(member: &Member, tasks_per_partition: &[u64]) -> ShareFigures {
        let share = if member.firing {
            member.share
        } else {
            Share::NONE
        };
        ShareFigures {
            partitions: share.len(),
            tasks: share
                .partitions()
                .filter_map(|p| tasks_per_partition.get(p))
                .sum(),
            fires_per_sec: (member.fires_per_sec * 10.0).round() / 10.0,
        }
    }
}

/// A heartbeat without `firing` is a process of a version before shares: it fires.
fn firing_unless_said() -> bool {
    true
}

/// A heartbeat without `share` is a process of a version before shares: it fires every task.
fn all_unless_said() -> Share {
    Share::ALL
}

/// The actor holding this process's membership.
pub struct ClusterActor {
    /// Where the heartbeats are; `None`: a cluster of one.
    redis: Option<Heartbeats>,
    /// Where a process found gone is recorded for alerts.
    store: StoreHandle,
    instance_id: ProcessId,
    /// This process, once its HTTP address is known (see `Announce`).
    me: Option<Member>,
    clock: ClockWatch,
    /// This process's share, decided from each list of the firing processes.
    keeper: ShareKeeper,
    /// Where the share goes: the wheel and the supervisor watch it.
    share: watch::Sender<Share>,
    /// The fires counter at the last heartbeats, oldest first.
    fire_counts: VecDeque<(Instant, u64)>,
    /// Shutting down: its heartbeat says it no longer fires, so the others take its share,
    /// while its wheel still fires it until they have.
    leaving: bool,
    /// Other firing processes in the last list.
    others_firing: usize,
}

/// The Redis that holds the cluster's heartbeats, and their keys.
#[derive(Clone)]
pub struct Heartbeats {
    pub link: RedisLink,
    pub keys: RedisKeys,
}

/// What the clock check needs: the clock checked, where its verdict goes, the allowed skew.
pub struct ClockWatch {
    pub clock: SharedClock,
    pub check: Arc<ClockCheck>,
    pub max_skew_ms: u64,
    /// When a skewed clock was last logged.
    pub logged: Option<Instant>,
}

impl ClusterActor {
    /// A member of the cluster whose heartbeats are in `redis` (`None`: a cluster of one).
    pub fn new(
        instance_id: ProcessId,
        redis: Option<Heartbeats>,
        store: StoreHandle,
        clock: ClockWatch,
    ) -> Self {
        ClusterActor {
            redis,
            store,
            keeper: ShareKeeper::new(instance_id.clone()),
            instance_id,
            me: None,
            clock,
            share: watch::Sender::new(Share::ALL),
            fire_counts: VecDeque::new(),
            leaving: false,
            others_firing: 0,
        }
    }

    /// This process's share of the tasks, as it changes: every task until the cluster's list
    /// says otherwise, and always every task without Redis.
    pub fn share(&self) -> watch::Receiver<Share> {
        self.share.subscribe()
    }

    /// Takes the firing processes of a fresh list (`None`: Redis did not answer, and the last
    /// list stands) and publishes the share it gives this process.
    fn take_list(&mut self, members: Option<&[Member]>) {
        let now_ms = self.clock.clock.now().timestamp_millis();
        let firing: Option<Vec<ProcessId>> = members.map(|members| {
            members
                .iter()
                .filter(|member| member.firing && member.instance_id != self.instance_id)
                .map(|member| member.instance_id.clone())
                .collect()
        });
        if let Some(others) = &firing {
            self.others_firing = others.len();
        }
        let share = match firing {
            // A skewed process fires nothing whatever it owns, and one leaving keeps its share
            // until it stops: both wait, the one for its clock, the other for the others.
            Some(_) if self.clock.check.is_skewed() || self.leaving => self.keeper.firing(now_ms),
            Some(others) => self.keeper.update(&others, now_ms),
            None => self.keeper.firing(now_ms),
        };
        self.share.send_if_modified(|held| {
            let changed = *held != share;
            if changed {
                log::info!(
                    "this process now fires {} of the {} partitions of the tasks",
                    share.len(),
                    ax_core::cluster::shares::PARTITIONS
                );
                *held = share;
            }
            changed
        });
    }

    /// Runs fired per second since the oldest of the last few heartbeats.
    fn fire_rate(&mut self) -> f64 {
        let now = (Instant::now(), metrics().fires.load(Ordering::Relaxed));
        self.fire_counts.push_back(now);
        while self.fire_counts.len() > FIRE_RATE_WINDOW {
            self.fire_counts.pop_front();
        }
        let (since, then) = self.fire_counts[0];
        let secs = now.0.duration_since(since).as_secs_f64();
        if secs > 0.0 {
            (now.1 - then) as f64 / secs
        } else {
            0.0
        }
    }

    /// Reads the reference clock and records how far this one is from it; a change of verdict
    /// is logged and alerted (`CLOCK_SKEW`, resolved when it is back), a skew that stays is
    /// logged at ERROR once a minute.
    fn check_clock(&mut self, ctx: &mut Context<Self>) {
        let (store, clock) = (self.store.clone(), self.clock.clock.clone());
        let read = async move {
            let before = clock.now();
            let reference = store.query(|conn| boxed(meta::reference_time(conn))).await;
            reference.map(|reference| Reading::of(before, reference, clock.now()))
        };
        ctx.spawn(read.into_actor(self).map(|reading, act, ctx| {
            let reading = match reading {
                Ok(reading) => reading,
                // The store's own outage is told elsewhere; the last verdict stands.
                Err(err) => return log::debug!("clock check: the reference was not read: {err}"),
            };
            let watch = &mut act.clock;
            metrics().set_clock_offset_ms(reading.offset_ms);
            let changed = watch.check.record(reading, watch.max_skew_ms);
            let due = watch
                .logged
                .is_none_or(|at| at.elapsed() >= SKEW_LOG_INTERVAL);
            if watch.check.is_skewed() && (due || changed.is_some()) {
                watch.logged = Some(Instant::now());
                log::error!("{}", skew_message(reading, watch.max_skew_ms));
            }
            if let Some(skewed) = changed {
                act.record_skew(skewed, reading, ctx);
            }
        }));
    }

    /// A `CLOCK_SKEW` alert event about this process, or its resolution.
    fn record_skew(&self, skewed: bool, reading: Reading, ctx: &mut Context<Self>) {
        if !skewed {
            log::info!(
                "this process's clock is back within {} ms of the database's ({} ms)",
                self.clock.max_skew_ms,
                reading.offset_ms
            );
        }
        let (event, message) = if skewed {
            let message = skew_message(reading, self.clock.max_skew_ms);
            (AlertEvent::ClockSkew, Some(message))
        } else {
            (AlertEvent::Resolved, None)
        };
        let (store, subject) = (self.store.clone(), format!("clock of {}", self.instance_id));
        let at = self.clock.clock.now();
        ctx.spawn(
            async move {
                let recorded = store
                    .query(move |conn| {
                        boxed(
                            async move { alerts::record(conn, &subject, event, message, at).await },
                        )
                    })
                    .await;
                if let Err(err) = recorded {
                    log::warn!("the alert about this process's clock was not recorded: {err}");
                }
            }
            .into_actor(self),
        );
    }

    /// Renews this process's heartbeat, then looks for processes whose heartbeat expired, so
    /// that one is told (`PROCESS_LEFT`) within a beat of its expiry whether or not anyone
    /// lists the cluster.
    fn beat(&mut self, ctx: &mut Context<Self>) {
        // The share a handoff ended since the last beat is the one to tell.
        self.take_list(None);
        let fires_per_sec = self.fire_rate();
        let firing = !self.clock.check.is_skewed() && !self.leaving;
        let share = *self.share.borrow();
        let (Some(redis), Some(me)) = (&self.redis, &mut self.me) else {
            return;
        };
        me.last_seen = Utc::now();
        (me.firing, me.share, me.fires_per_sec) = (firing, share, fires_per_sec);
        let (redis, me, store) = (redis.clone(), me.clone(), self.store.clone());
        let listed = async move {
            if let Err(err) = redis_heartbeat(&redis, me).await {
                log::warn!("heartbeat not sent: {err}");
            }
            live_members(&redis, &store).await
        };
        ctx.spawn(listed.into_actor(self).map(|listed, act, _| match listed {
            Ok(members) => act.take_list(Some(&members)),
            Err(err) => {
                log::debug!("the cluster's members were not read: {err}");
                act.take_list(None);
            }
        }));
    }
}

/// What a skewed clock is told with: by how much, and what the process does about it.
fn skew_message(reading: Reading, max_skew_ms: u64) -> String {
    format!(
        "this process's clock is {} ms {} the database's (±{} ms; at most {max_skew_ms} ms \
         allowed): it fires and claims nothing until it is set right (NTP)",
        reading.offset_ms.unsigned_abs(),
        if reading.offset_ms > 0 {
            "behind"
        } else {
            "ahead of"
        },
        reading.uncertainty_ms
    )
}

impl Actor for ClusterActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        ctx.run_interval(CLOCK_CHECK_INTERVAL, |act, ctx| act.check_clock(ctx));
    }
}

async fn redis_heartbeat(redis: &Heartbeats, me: Member) -> Result<(), LockError> {
    let value = serde_json::to_string(&me).map_err(unavailable)?;
    let mut pipe = redis::pipe();
    pipe.cmd("SET")
        .arg(redis.keys.heartbeat(&me.instance_id))
        .arg(value)
        .arg("PX")
        .arg(HEARTBEAT_TTL.as_millis() as u64)
        .ignore()
        .cmd("SADD")
        .arg(redis.keys.members())
        .arg(me.instance_id.as_str())
        .ignore();
    redis
        .link
        .call(CALL_WAIT, async |conn| {
            add(&metrics().redis_commands, 2);
            pipe.query_async::<()>(&mut *conn).await
        })
        .await
}

/// The processes whose heartbeats are live, and those this call found gone: their heartbeat
/// expired without a leave, and this call is the one that forgot them (of processes looking
/// at once, one removes each from the set).
async fn redis_members(redis: &Heartbeats) -> Result<(Vec<Member>, Vec<String>), LockError> {
    let keys = &redis.keys;
    redis
        .link
        .call(CALL_WAIT, async |conn| {
            add(&metrics().redis_commands, 1);
            let ids: Vec<String> = redis::cmd("SMEMBERS")
                .arg(keys.members())
                .query_async(&mut *conn)
                .await?;
            if ids.is_empty() {
                return Ok((Vec::new(), Vec::new()));
            }
            let beat_keys: Vec<String> = ids.iter().map(|id| keys.heartbeat(id)).collect();
            add(&metrics().redis_commands, 1);
            let beats: Vec<Option<String>> = redis::cmd("MGET")
                .arg(&beat_keys)
                .query_async(&mut *conn)
                .await?;
            let (mut members, mut gone) = (Vec::new(), Vec::new());
            for (id, beat) in ids.into_iter().zip(beats) {
                match beat.and_then(|b| serde_json::from_str::<Member>(&b).ok()) {
                    Some(member) => members.push(member),
                    None => {
                        add(&metrics().redis_commands, 1);
                        let removed: Result<i64, _> = redis::cmd("SREM")
                            .arg(keys.members())
                            .arg(&id)
                            .query_async(&mut *conn)
                            .await;
                        if removed == Ok(1) {
                            gone.push(id);
                        }
                    }
                }
            }
            members.sort_by(|a, b| a.instance_id.cmp(&b.instance_id));
            Ok((members, gone))
        })
        .await
}

/// The live members; each process found gone is recorded (`PROCESS_LEFT`) by the one process
/// whose `SREM` removed it.
async fn live_members(redis: &Heartbeats, store: &StoreHandle) -> Result<Vec<Member>, LockError> {
    let (members, gone) = redis_members(redis).await?;
    for id in gone {
        record_left(store, id).await;
    }
    Ok(members)
}

/// A `PROCESS_LEFT` alert event about process `id`.
async fn record_left(store: &StoreHandle, id: String) {
    log::warn!("ax process {id} left the cluster without a word: its heartbeat expired");
    let recorded = store
        .query(move |conn| {
            boxed(async move {
                let why = "its heartbeat expired; its claimed runs are recovered by the others";
                let subject = ax_core::alerting::process_subject(&id);
                alerts::record(
                    conn,
                    &subject,
                    AlertEvent::ProcessLeft,
                    Some(why.into()),
                    Utc::now(),
                )
                .await
            })
        })
        .await;
    if let Err(err) = recorded {
        log::warn!("the alert about process leaving was not recorded: {err}");
    }
}

async fn redis_leave(redis: Heartbeats, instance_id: ProcessId) {
    let mut pipe = redis::pipe();
    pipe.cmd("DEL")
        .arg(redis.keys.heartbeat(&instance_id))
        .ignore()
        .cmd("SREM")
        .arg(redis.keys.members())
        .arg(instance_id.as_str())
        .ignore();
    // Leaving is a courtesy: a heartbeat left behind expires by itself.
    let _ = redis
        .link
        .call(CALL_WAIT, async |conn| {
            add(&metrics().redis_commands, 2);
            pipe.query_async::<()>(&mut *conn).await
        })
        .await;
}

/// Starts this process's heartbeat, now that its HTTP address is known.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Announce(pub String);

impl Handler<Announce> for ClusterActor {
    type Result = ();

    fn handle(&mut self, msg: Announce, ctx: &mut Context<Self>) {
        let now = Utc::now();
        self.me = Some(Member {
            instance_id: self.instance_id.clone(),
            addr: msg.0,
            started_at: now,
            last_seen: now,
            firing: true,
            share: *self.share.borrow(),
            fires_per_sec: 0.0,
        });
        self.beat(ctx);
        ctx.run_interval(HEARTBEAT_INTERVAL, |act, ctx| act.beat(ctx));
    }
}

/// The live processes of the cluster (just this one without Redis).
#[derive(Message)]
#[rtype(result = "Result<Vec<Member>, LockError>")]
pub struct Members;

impl Handler<Members> for ClusterActor {
    type Result = ResponseFuture<Result<Vec<Member>, LockError>>;

    fn handle(&mut self, _: Members, _: &mut Context<Self>) -> Self::Result {
        match &self.redis {
            Some(redis) => {
                let (redis, store) = (redis.clone(), self.store.clone());
                Box::pin(async move { live_members(&redis, &store).await })
            }
            None => {
                let fires_per_sec = self.fire_rate();
                let firing = !self.clock.check.is_skewed();
                let me = self.me.clone().map(|mut me| {
                    me.last_seen = Utc::now();
                    (me.firing, me.fires_per_sec) = (firing, fires_per_sec);
                    me
                });
                Box::pin(async move { Ok(me.into_iter().collect()) })
            }
        }
    }
}

/// Says in this process's heartbeat that it no longer fires, so that the others take its
/// share (shutdown); answers how many other processes fire, that is, whether any will.
#[derive(Message)]
#[rtype(result = "usize")]
pub struct HandOver;

impl Handler<HandOver> for ClusterActor {
    type Result = usize;

    fn handle(&mut self, _: HandOver, ctx: &mut Context<Self>) -> usize {
        self.leaving = true;
        self.beat(ctx);
        self.others_firing
    }
}

/// Stops the heartbeat and removes this process from the cluster list (shutdown).
#[derive(Message)]
#[rtype(result = "()")]
pub struct Leave;

impl Handler<Leave> for ClusterActor {
    type Result = ResponseFuture<()>;

    fn handle(&mut self, _: Leave, ctx: &mut Context<Self>) -> Self::Result {
        self.me = None;
        ctx.stop();
        match &self.redis {
            Some(redis) => Box::pin(redis_leave(redis.clone(), self.instance_id.clone())),
            None => Box::pin(async {}),
        }
    }
}

/// A handle to the ClusterActor.
#[derive(Clone)]
pub struct ClusterHandle {
    addr: Addr<ClusterActor>,
}

impl ClusterHandle {
    pub fn new(addr: Addr<ClusterActor>) -> Self {
        ClusterHandle { addr }
    }

    /// Starts the heartbeat of this process, reachable at `addr`.
    pub fn announce(&self, addr: String) {
        self.addr.do_send(Announce(addr));
    }

    /// The live processes of the cluster.
    pub async fn members(&self) -> Result<Vec<Member>, LockError> {
        self.addr.send(Members).await.map_err(unavailable)?
    }

    /// Hands this process's share over to the others (see [`HandOver`]); answers how many
    /// other processes fire.
    pub async fn hand_over(&self) -> usize {
        self.addr.send(HandOver).await.unwrap_or(0)
    }

    /// Leaves the cluster (shutdown).
    pub async fn leave(&self) {
        let _ = self.addr.send(Leave).await;
    }
}
