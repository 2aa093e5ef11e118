//! What `/healthz` checks: every actor still answers its mailbox, the wheel ticks, the store
//! answers a query, the instance id is still this process's, and its clock is within the
//! allowed skew of the database's; and what it tells besides: whether Redis answers (ax fires
//! on without it, so that is no problem of its health).

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;
use tokio::sync::watch;

use crate::actors::dispatch::DispatchActor;
use crate::actors::lock::LockActor;
use crate::actors::redis_link::RedisLink;
use crate::actors::store::{boxed, StoreHandle};
use crate::actors::supervisor::SupervisorActor;
use crate::actors::wheel::{GetWheelStats, WheelActor};
use crate::actors::Ping;
use ax_core::time::clock::{ClockCheck, SharedClock};
use ax_store::queries::meta;

/// How long an actor or the store may take to answer a health check.
pub const ANSWER_WITHIN: Duration = Duration::from_secs(1);
/// A wheel whose last tick is older than this has stalled (it ticks at least every second).
pub const MAX_TICK_AGE_SECS: i64 = 5;

/// The parts of a running ax that a health check asks.
#[derive(Clone)]
pub struct Health {
    pub wheel: Addr<WheelActor>,
    /// The second of the wheel's last tick.
    pub ticks: watch::Receiver<i64>,
    pub supervisor: Addr<SupervisorActor>,
    pub dispatchers: Arc<[Addr<DispatchActor>]>,
    pub lock: Addr<LockActor>,
    /// The link to Redis, when there is one.
    pub redis: Option<RedisLink>,
    pub store: StoreHandle,
    /// Whether the instance id is still this process's alone.
    pub identity: Arc<AtomicBool>,
    pub clock: SharedClock,
    /// This process's clock against the cluster's reference clock.
    pub clock_check: Arc<ClockCheck>,
}

/// The outcome of a health check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    /// How many entries the wheel holds, if it answered.
    pub wheel_size: Option<usize>,
    /// How far the database's clock was ahead of this process's at the last check, in ms.
    pub clock_skew_ms: i64,
    /// Whether Redis answers (`None`: no Redis, the in-process lock).
    pub redis_up: Option<bool>,
    /// What is wrong; empty when healthy.
    pub problems: Vec<String>,
}

impl Report {
    pub fn is_healthy(&self) -> bool {
        self.problems.is_empty()
    }
}

impl Health {
    /// Asks every part at once; takes at most [`ANSWER_WITHIN`].
    pub async fn check(&self) -> Report {
        let dispatchers = self.dispatchers.iter().enumerate().map(|(n, worker)| {
            let name = format!("dispatcher {}", n + 1);
            async move { answers(&name, worker.send(Ping)).await }
        });
        let (wheel, supervisor, dispatchers, lock, store) = futures_util::join!(
            answers("the wheel", self.wheel.send(GetWheelStats)),
            answers("the supervisor", self.supervisor.send(Ping)),
            futures_util::future::join_all(dispatchers),
            answers("the lock", self.lock.send(Ping)),
            self.store(),
        );
        let mut problems = Vec::new();
        let wheel_size = wheel
            .map(|stats| stats.entries)
            .map_err(|problem| problems.push(problem))
            .ok();
        problems.extend(self.tick_problem());
        let answers = [supervisor]
            .into_iter()
            .chain(dispatchers)
            .chain([lock, store]);
        problems.extend(answers.filter_map(Result::err));
        if !self.identity.load(Ordering::Relaxed) {
            problems.push("the instance id is in use by another ax process".into());
        }
        let clock_skew_ms = self.clock_check.offset_ms();
        if self.clock_check.is_skewed() {
            problems.push(format!(
                "this process's clock is {clock_skew_ms} ms from the database's: it fires and \
                 claims nothing"
            ));
        }
        Report {
            wheel_size,
            clock_skew_ms,
            redis_up: self.redis.as_ref().map(RedisLink::is_up),
            problems,
        }
    }

    /// Whether the wheel still ticks.
    fn tick_problem(&self) -> Option<String> {
        // The wheel holds the sending side: an error means the wheel is gone.
        let last = self.ticks.has_changed().ok().map(|_| *self.ticks.borrow());
        tick_problem(self.clock.now().timestamp(), last)
    }

    /// Whether the store actor answers and its database runs a query.
    async fn store(&self) -> Result<(), String> {
        let ping = self.store.query(|conn| boxed(meta::ping(conn)));
        match tokio::time::timeout(ANSWER_WITHIN, ping).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(err)) => Err(format!("the store is unavailable: {err}")),
            Err(_) => Err(format!(
                "the store did not answer within {} ms",
                ANSWER_WITHIN.as_millis()
            )),
        }
    }
}

/// What is wrong with a wheel whose last tick was at second `last` (`None`: it is gone), at
/// second `now`.
fn tick_problem(now: i64, last: Option<i64>) -> Option<String> {
    match last {
        None => Some("the wheel has stopped".into()),
        Some(last) if now - last > MAX_TICK_AGE_SECS => {
            Some(format!("the wheel's last tick was {} s ago", now - last))
        }
        Some(_) => None,
    }
}

/// An actor's answer, or why there was none.
async fn answers<T>(
    name: &str,
    reply: impl Future<Output = Result<T, MailboxError>>,
) -> Result<T, String> {
    match tokio::time::timeout(ANSWER_WITHIN, reply).await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(_)) => Err(format!("{name} has stopped")),
        Err(_) => Err(format!(
            "{name} did not answer within {} ms",
            ANSWER_WITHIN.as_millis()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wheel_is_stalled_past_five_seconds_without_a_tick() {
        assert_eq!(tick_problem(100, Some(100)), None);
        assert_eq!(tick_problem(105, Some(100)), None);
        assert_eq!(
            tick_problem(106, Some(100)).as_deref(),
            Some("the wheel's last tick was 6 s ago")
        );
        assert_eq!(
            tick_problem(100, None).as_deref(),
            Some("the wheel has stopped")
        );
    }
}
