//! LockActor: makes sure that of several ax processes only one fires a given run.
//!
//! With Redis: `SET ax:lock:{taskId} {instanceId} NX PX 3000` (under `redis.key_prefix`), pipelined for a whole tick, and
//! released after the run is committed. Without Redis: the same rules in process memory.
//! The lock saves the losers a database round trip; the compare-and-set on `next_run_at` and
//! the unique request id are what make a second row impossible.
//!
//! The cluster's heartbeats are `actors::cluster`'s; the connection to Redis, and what is
//! known of its reach, `actors::redis_link`'s.

use ax_core::ids::ProcessId;
use std::collections::HashMap;
use std::time::{Duration, Instant};

use super::redis_keys::RedisKeys;
use super::redis_link::{LockError, RedisLink};
use actix::prelude::*;
use ax_core::metrics::{add, metrics};
use ax_core::run::TaskId;

/// How long a fire lock lives if its holder never releases it.
pub const LOCK_TTL: Duration = Duration::from_millis(3000);

/// Longest a fire batch waits for Redis before it fires unlocked: well within the time a run
/// is committed ahead, so a Redis that stops answering never makes runs late, and batches of
/// one task never pile up behind it to commit out of order. Once a call has waited so in vain,
/// the link counts Redis out of reach and the next batches fire unlocked without waiting.
pub const LOCK_WAIT: Duration = Duration::from_millis(250);

/// Deletes each lock this process still holds (and only those).
const RELEASE_SCRIPT: &str = "for _, key in ipairs(KEYS) do \
     if redis.call('get', key) == ARGV[1] then redis.call('del', key) end end return 0";

/// Fire locks held in this process's memory: the lock of a single ax.
#[derive(Debug, Default)]
pub struct LocalLocks {
    held: HashMap<TaskId, Instant>,
}

impl LocalLocks {
    /// Takes the lock of each task not locked at `now`.
    pub fn acquire(&mut self, task_ids: &[TaskId], now: Instant) -> Vec<bool> {
        self.held.retain(|_, expires| *expires > now);
        task_ids
            .iter()
            .map(|id| match self.held.get(id) {
                Some(_) => false,
                None => {
                    self.held.insert(*id, now + LOCK_TTL);
                    true
                }
            })
            .collect()
    }

    pub fn release(&mut self, task_ids: &[TaskId]) {
        for id in task_ids {
            self.held.remove(id);
        }
    }
}

enum Backend {
    Redis(RedisLink, RedisKeys),
    Local(LocalLocks),
}

/// The actor holding the lock backend.
pub struct LockActor {
    backend: Backend,
    instance_id: ProcessId,
}

impl LockActor {
    /// An in-process lock.
    pub fn local(instance_id: ProcessId) -> Self {
        LockActor {
            backend: Backend::Local(LocalLocks::default()),
            instance_id,
        }
    }

    /// A lock in Redis, at `keys`.
    pub fn redis(link: RedisLink, keys: RedisKeys, instance_id: ProcessId) -> Self {
        LockActor {
            backend: Backend::Redis(link, keys),
            instance_id,
        }
    }
}

impl Actor for LockActor {
    type Context = Context<Self>;
}

async fn redis_acquire(
    (link, keys): (RedisLink, RedisKeys),
    instance_id: ProcessId,
    task_ids: Vec<TaskId>,
) -> Result<Vec<bool>, LockError> {
    link.call(LOCK_WAIT, async |conn| {
        let mut pipe = redis::pipe();
        for id in &task_ids {
            pipe.cmd("SET")
                .arg(keys.lock(*id))
                .arg(instance_id.as_str())
                .arg("NX")
                .arg("PX")
                .arg(LOCK_TTL.as_millis() as u64);
        }
        add(&metrics().redis_commands, task_ids.len() as u64);
        let replies: Vec<Option<String>> = pipe.query_async(&mut *conn).await?;
        let mut held: Vec<bool> = replies.iter().map(Option::is_some).collect();
        // A lock this process still holds from its previous fire of the task (released late)
        // is ours: refusing it would leave the run to nobody.
        let refused: Vec<usize> = (0..held.len()).filter(|&i| !held[i]).collect();
        if !refused.is_empty() {
            let keys: Vec<String> = refused.iter().map(|&i| keys.lock(task_ids[i])).collect();
            add(&metrics().redis_commands, 1);
            let holders: Vec<Option<String>> = redis::cmd("MGET")
                .arg(&keys)
                .query_async(&mut *conn)
                .await?;
            for (i, holder) in refused.into_iter().zip(holders) {
                held[i] = holder.as_deref() == Some(instance_id.as_str());
            }
        }
        Ok(held)
    })
    .await
}

async fn redis_release(
    (link, keys): (RedisLink, RedisKeys),
    instance_id: ProcessId,
    task_ids: Vec<TaskId>,
) -> Result<(), LockError> {
    // One script call for the whole batch, atomic per key.
    let mut eval = redis::cmd("EVAL");
    eval.arg(RELEASE_SCRIPT).arg(task_ids.len());
    for id in &task_ids {
        eval.arg(keys.lock(*id));
    }
    eval.arg(instance_id.as_str());
    link.call(LOCK_WAIT, async |conn| {
        add(&metrics().redis_commands, 1);
        eval.query_async::<()>(&mut *conn).await
    })
    .await
}

/// Takes the fire locks of these tasks; answers, per task, whether this process holds it.
#[derive(Message)]
#[rtype(result = "Vec<bool>")]
pub struct Acquire(pub Vec<TaskId>);

impl Handler<Acquire> for LockActor {
    type Result = ResponseFuture<Vec<bool>>;

    fn handle(&mut self, msg: Acquire, _: &mut Context<Self>) -> Self::Result {
        match &mut self.backend {
            Backend::Local(locks) => {
                let held = locks.acquire(&msg.0, Instant::now());
                Box::pin(async move { held })
            }
            Backend::Redis(link, keys) => {
                let (redis, instance_id) = ((link.clone(), keys.clone()), self.instance_id.clone());
                Box::pin(async move {
                    let count = msg.0.len();
                    redis_acquire(redis, instance_id, msg.0)
                        .await
                        .unwrap_or_else(|err| {
                            // Firing without the lock risks only a lost compare-and-set in the
                            // database; not firing would lose the runs.
                            log::warn!("fire lock unavailable, firing unlocked: {err}");
                            vec![true; count]
                        })
                })
            }
        }
    }
}

/// Releases the fire locks of these tasks (those this process holds).
#[derive(Message)]
#[rtype(result = "()")]
pub struct Release(pub Vec<TaskId>);

impl Handler<Release> for LockActor {
    type Result = ResponseFuture<()>;

    fn handle(&mut self, msg: Release, _: &mut Context<Self>) -> Self::Result {
        match &mut self.backend {
            Backend::Local(locks) => {
                locks.release(&msg.0);
                Box::pin(async {})
            }
            Backend::Redis(link, keys) => {
                let (redis, instance_id) = ((link.clone(), keys.clone()), self.instance_id.clone());
                // Bounded like a take: the wheel waits for it before the tasks fire again.
                Box::pin(async move {
                    if let Err(err) = redis_release(redis, instance_id, msg.0).await {
                        log::warn!("fire locks not released (they expire in 3 s): {err}")
                    }
                })
            }
        }
    }
}

/// A handle to the LockActor.
#[derive(Clone)]
pub struct LockHandle {
    addr: Addr<LockActor>,
}

impl LockHandle {
    pub fn new(addr: Addr<LockActor>) -> Self {
        LockHandle { addr }
    }

    /// Per task, whether this process now holds its fire lock.
    pub async fn acquire(&self, task_ids: Vec<TaskId>) -> Vec<bool> {
        let count = task_ids.len();
        self.addr
            .send(Acquire(task_ids))
            .await
            .unwrap_or_else(|_| vec![true; count])
    }

    pub async fn release(&self, task_ids: Vec<TaskId>) {
        let _ = self.addr.send(Release(task_ids)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_held_lock_is_refused_until_released_or_expired() {
        let mut locks = LocalLocks::default();
        let t0 = Instant::now();
        let (one, two, three) = (TaskId(1), TaskId(2), TaskId(3));
        assert_eq!(locks.acquire(&[one, two], t0), vec![true, true]);
        assert_eq!(locks.acquire(&[one, three], t0), vec![false, true]);
        locks.release(&[one]);
        assert_eq!(locks.acquire(&[one], t0), vec![true]);
        assert_eq!(locks.acquire(&[two], t0 + LOCK_TTL), vec![true]);
    }
}
