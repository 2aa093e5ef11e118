//! The fire lock through its actor: Redis between two nodes, and the in-process lock.

use std::time::{Duration, Instant};

use actix::Actor;
use ax_core::run::TaskId;
use ax_server::actors::lock::{LockActor, LockHandle, LOCK_TTL};
use ax_server::actors::redis_keys::RedisKeys;
use ax_server::actors::redis_link::{LockError, RedisLink};
use ax_server::config::RedisConfig;

use chrono::{DateTime, Utc};
use serde_json::json;

use crate::common::{
    config, free_port, redis_server, start_ax, Api, Executor, RedisProcess, Reply, TestStore,
};

/// Task ids no other test run uses: a random base with room for a few ids above it.
fn unique_ids<const N: usize>() -> [TaskId; N] {
    let random = uuid::Uuid::new_v4().as_u64_pair().0 >> 16;
    let base = (random as i64) * 16;
    std::array::from_fn(|i| TaskId(base + 1 + i as i64))
}

async fn redis_node(instance_id: &str) -> LockHandle {
    let link = RedisLink::connect(redis_server(), &RedisConfig::default())
        .await
        .unwrap_or_else(|err| panic!("Redis lock at {}: {err}", redis_server()));
    assert!(link.is_up(), "{} answers", redis_server());
    LockHandle::new(LockActor::redis(link, RedisKeys::default(), instance_id.into()).start())
}

async fn redis() -> redis::aio::MultiplexedConnection {
    redis::Client::open(redis_server())
        .expect("redis url")
        .get_multiplexed_async_connection()
        .await
        .expect("connect to redis")
}

async fn holder(conn: &mut redis::aio::MultiplexedConnection, task_id: TaskId) -> Option<String> {
    redis::cmd("GET")
        .arg(RedisKeys::default().lock(task_id))
        .query_async(conn)
        .await
        .expect("GET")
}

async fn pttl(conn: &mut redis::aio::MultiplexedConnection, task_id: TaskId) -> i64 {
    redis::cmd("PTTL")
        .arg(RedisKeys::default().lock(task_id))
        .query_async(conn)
        .await
        .expect("PTTL")
}

/// Deletes the test's keys even when an assertion fails.
struct Cleanup(Vec<TaskId>);

impl Drop for Cleanup {
    fn drop(&mut self) {
        let keys: Vec<String> = self
            .0
            .iter()
            .map(|id| RedisKeys::default().lock(*id))
            .collect();
        let _ = std::thread::spawn(move || {
            if let Ok(mut conn) =
                redis::Client::open(redis_server()).and_then(|c| c.get_connection())
            {
                let _: redis::RedisResult<i64> = redis::cmd("DEL").arg(&keys).query(&mut conn);
            }
        })
        .join();
    }
}

#[actix_rt::test(system = "crate::common::TestSystem")]
async fn redis_lock_is_exclusive_between_nodes() {
    let [t1, t2, t3] = unique_ids::<3>();
    let _cleanup = Cleanup(vec![t1, t2, t3]);
    let a = redis_node("node-a").await;
    let b = redis_node("node-b").await;
    let mut conn = redis().await;

    assert_eq!(a.acquire(vec![t1, t2]).await, vec![true, true]);
    assert_eq!(holder(&mut conn, t1).await.as_deref(), Some("node-a"));
    assert_eq!(holder(&mut conn, t2).await.as_deref(), Some("node-a"));

    assert_eq!(b.acquire(vec![t1, t3]).await, vec![false, true]);
    assert_eq!(
        holder(&mut conn, t1).await.as_deref(),
        Some("node-a"),
        "b took nothing of a's"
    );
    assert_eq!(holder(&mut conn, t3).await.as_deref(), Some("node-b"));

    // A lock a node still holds is its own.
    assert_eq!(a.acquire(vec![t1]).await, vec![true]);
    assert_eq!(a.acquire(vec![t3, t1]).await, vec![false, true]);

    a.release(vec![t1]).await;
    assert_eq!(holder(&mut conn, t1).await, None, "released");
    assert_eq!(b.acquire(vec![t1]).await, vec![true]);
    assert_eq!(holder(&mut conn, t1).await.as_deref(), Some("node-b"));
    assert_eq!(a.acquire(vec![t1]).await, vec![false]);

    // Release is compare-and-delete: a cannot release b's locks.
    a.release(vec![t3, t1]).await;
    assert_eq!(holder(&mut conn, t3).await.as_deref(), Some("node-b"));
    assert_eq!(holder(&mut conn, t1).await.as_deref(), Some("node-b"));
    // a's own lock on t2 is untouched by b's release either.
    b.release(vec![t2]).await;
    assert_eq!(holder(&mut conn, t2).await.as_deref(), Some("node-a"));

    // Every lock expires on its own: a TTL is set and is at most LOCK_TTL.
    assert_eq!(LOCK_TTL, Duration::from_millis(3000));
    for id in [t1, t2, t3] {
        let ttl = pttl(&mut conn, id).await;
        assert!(ttl > 0 && ttl <= 3000, "task {id}: PTTL {ttl}");
    }

    b.release(vec![t1, t3]).await;
    assert_eq!(holder(&mut conn, t1).await, None);
    assert_eq!(holder(&mut conn, t3).await, None);
    assert_eq!(a.acquire(vec![t3]).await, vec![true]);
}

#[actix_rt::test(system = "crate::common::TestSystem")]
async fn an_expired_redis_lock_goes_to_the_next_node() {
    let [t1] = unique_ids::<1>();
    let _cleanup = Cleanup(vec![t1]);
    let a = redis_node("node-a").await;
    let b = redis_node("node-b").await;
    let mut conn = redis().await;

    assert_eq!(a.acquire(vec![t1]).await, vec![true]);
    assert_eq!(b.acquire(vec![t1]).await, vec![false]);
    // Shorten a's lock instead of waiting out the 3 s TTL.
    let _: i64 = redis::cmd("PEXPIRE")
        .arg(RedisKeys::default().lock(t1))
        .arg(1)
        .query_async(&mut conn)
        .await
        .expect("PEXPIRE");
    let deadline = Instant::now() + Duration::from_secs(2);
    while holder(&mut conn, t1).await.is_some() {
        assert!(Instant::now() < deadline, "the lock never expired");
        actix_rt::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(b.acquire(vec![t1]).await, vec![true]);
    assert_eq!(holder(&mut conn, t1).await.as_deref(), Some("node-b"));
    // a's late release does not free b's lock.
    a.release(vec![t1]).await;
    assert_eq!(holder(&mut conn, t1).await.as_deref(), Some("node-b"));
}

#[actix_rt::test(system = "crate::common::TestSystem")]
async fn empty_requests_are_answered() {
    let a = redis_node("node-a").await;
    assert_eq!(a.acquire(vec![]).await, Vec::<bool>::new());
    a.release(vec![]).await;
    let local = LockHandle::new(LockActor::local("solo".into()).start());
    assert_eq!(local.acquire(vec![]).await, Vec::<bool>::new());
    local.release(vec![]).await;
}

/// A lock on a Redis that does not answer starts all the same: while Redis is out of reach
/// every take is answered at once (the batch fires unlocked, on the database's
/// compare-and-set), without a dial; once a Redis answers on that port the link comes back by
/// itself and the locks are taken there.
#[actix_rt::test(system = "crate::common::TestSystem")]
async fn a_lock_on_an_unanswering_redis_answers_at_once_and_locks_once_redis_is_back() {
    let port = free_port();
    let started = Instant::now();
    let url = format!("redis://127.0.0.1:{port}");
    let link = RedisLink::connect(&url, &RedisConfig::default())
        .await
        .expect("a link whether or not Redis answers");
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "connecting took {:?}",
        started.elapsed()
    );
    assert!(!link.is_up(), "nothing listens on port {port}");
    let lock = LockHandle::new(
        LockActor::redis(link.clone(), RedisKeys::default(), "node-a".into()).start(),
    );
    let [t1, t2] = unique_ids::<2>();
    let taking = Instant::now();
    for _ in 0..20 {
        assert_eq!(lock.acquire(vec![t1, t2]).await, vec![true, true]);
        lock.release(vec![t1, t2]).await;
    }
    let took = taking.elapsed();
    assert!(
        took < Duration::from_millis(250),
        "20 takes and releases with Redis down took {took:?}: they waited for it"
    );

    let redis = RedisProcess::start(port, &[]).await;
    let deadline = Instant::now() + Duration::from_secs(5);
    while !link.is_up() {
        assert!(Instant::now() < deadline, "the link never came back");
        actix_rt::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(lock.acquire(vec![t1]).await, vec![true]);
    let mut conn = redis.conn().await;
    assert_eq!(holder(&mut conn, t1).await.as_deref(), Some("node-a"));
    let other =
        LockHandle::new(LockActor::redis(link, RedisKeys::default(), "node-b".into()).start());
    assert_eq!(other.acquire(vec![t1, t2]).await, vec![false, true]);
}

#[actix_rt::test(system = "crate::common::TestSystem")]
async fn redis_lock_rejects_a_bad_url() {
    match RedisLink::connect("not-a-redis-url", &RedisConfig::default()).await {
        Ok(_) => panic!("a lock with a bad URL started"),
        Err(err) => {
            assert!(matches!(err, LockError::BadUrl(_)), "{err:?}");
            assert!(err.to_string().starts_with("redis.url must be"), "{err}");
        }
    }
}

#[actix_rt::test(system = "crate::common::TestSystem")]
async fn local_lock_through_the_handle() {
    let lock = LockHandle::new(LockActor::local("solo".into()).start());
    assert_eq!(
        lock.acquire(vec![TaskId(1), TaskId(2)]).await,
        vec![true, true]
    );
    assert_eq!(
        lock.acquire(vec![TaskId(1), TaskId(3)]).await,
        vec![false, true]
    );
    lock.release(vec![TaskId(1)]).await;
    assert_eq!(
        lock.acquire(vec![TaskId(1), TaskId(2)]).await,
        vec![true, false]
    );
    lock.release(vec![TaskId(1), TaskId(2), TaskId(3)]).await;
    assert_eq!(
        lock.acquire(vec![TaskId(3), TaskId(2), TaskId(1)]).await,
        vec![true, true, true]
    );

    // Each local actor has locks of its own.
    let other = LockHandle::new(LockActor::local("other".into()).start());
    assert_eq!(other.acquire(vec![TaskId(1)]).await, vec![true]);
}

#[actix_rt::test(system = "crate::common::TestSystem")]
async fn a_clone_of_a_handle_shares_the_lock() {
    let [t1] = unique_ids::<1>();
    let _cleanup = Cleanup(vec![t1]);
    let a = redis_node("node-a").await;
    let b = redis_node("node-b").await;
    let a2 = a.clone();
    assert_eq!(a.acquire(vec![t1]).await, vec![true]);
    assert_eq!(b.acquire(vec![t1]).await, vec![false]);
    a2.release(vec![t1]).await;
    assert_eq!(b.acquire(vec![t1]).await, vec![true]);
}

/// Two deployments, each with a database of its own, share one Redis database under different
/// `redis.key_prefix`es: their task ids are the same, and yet neither takes the other's fire
/// locks (every second of both fires on time) or counts the other's process as its own.
#[actix_rt::test(system = "crate::common::TestSystem")]
async fn two_deployments_share_one_redis_under_their_prefixes() {
    let redis = crate::common::redis_url();
    let executor = Executor::start(Reply::Success).await;
    let mut deployments = Vec::new();
    // Prefixes of this run's own: another test binary may lease the same Redis database.
    let run = uuid::Uuid::new_v4().simple().to_string();
    let prefixes = [format!("{}-one:", &run[..8]), format!("{}-two:", &run[..8])];
    for (prefix, id) in prefixes.iter().zip(["one-a", "two-a"]) {
        let store = TestStore::sqlite();
        let mut config = config(&store, true, id);
        config.redis.url = Some(redis.clone());
        config.redis.key_prefix = prefix.clone();
        let ax = start_ax(&config).await;
        deployments.push((store, ax, prefix, id));
    }
    let apis: Vec<Api> = deployments.iter().map(|(_, ax, ..)| Api::new(ax)).collect();
    for api in &apis {
        for i in 0..3 {
            let task = api
                .create_task(
                    json!({"name": format!("every-second-{i}"), "cron": "* * * * * *",
                    "handlerUrl": format!("{}/run", executor.base())}),
                )
                .await;
            assert_eq!(
                task["id"],
                i + 1,
                "both deployments number their tasks alike"
            );
        }
    }
    actix_rt::time::sleep(Duration::from_secs(5)).await;

    // Each deployment sees itself alone, and its heartbeat is under its prefix.
    let mut conn = redis::Client::open(redis.as_str())
        .expect("redis url")
        .get_multiplexed_async_connection()
        .await
        .expect("connect to redis");
    for (api, (_, _, prefix, id)) in apis.iter().zip(&deployments) {
        let (status, cluster) = api.get("/api/cluster").await;
        assert_eq!(status, 200, "{cluster}");
        let ids: Vec<&str> = cluster["instances"]
            .as_array()
            .expect("instances")
            .iter()
            .filter_map(|m| m["instanceId"].as_str())
            .collect();
        assert_eq!(ids, [*id], "{prefix}: {cluster}");
        let beat: Option<String> = redis::cmd("GET")
            .arg(format!("{prefix}instance:{id}"))
            .query_async(&mut conn)
            .await
            .expect("GET");
        assert!(beat.is_some(), "{prefix}: heartbeat under the prefix");
    }

    // Every second of each task fired in both deployments, within a second of its time.
    let received = executor.received();
    for (api, (_, _, prefix, _)) in apis.iter().zip(&deployments) {
        for task in 1..=3 {
            let mut runs: Vec<DateTime<Utc>> = api
                .instances(task)
                .await
                .iter()
                .filter_map(|run| run["scheduledAt"].as_str()?.parse().ok())
                .filter(|at: &DateTime<Utc>| *at < Utc::now() - chrono::Duration::seconds(1))
                .collect();
            runs.sort();
            assert!(runs.len() >= 3, "{prefix} task {task}: {runs:?}");
            for pair in runs.windows(2) {
                assert_eq!(
                    (pair[1] - pair[0]).num_seconds(),
                    1,
                    "{prefix} task {task}: a second skipped: {runs:?}"
                );
            }
        }
    }
    for delivery in &received {
        let late = delivery.lateness();
        assert!(
            late < chrono::Duration::milliseconds(1500),
            "{} delivered {late} late",
            delivery.request_id
        );
    }
    for (_, ax, ..) in deployments.drain(..) {
        ax.shutdown().await;
    }
    executor.stop().await;
}
