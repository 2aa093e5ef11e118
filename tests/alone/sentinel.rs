//! Redis behind Sentinel: ax finds the primary through the sentinels, and when the primary is
//! killed under load and a replica promoted, it follows the new one. No run is lost or
//! delivered twice meanwhile: the database's compare-and-set fires on while Redis is out.

use std::collections::{BTreeSet, HashMap};
use std::time::{Duration, Instant};

use ax_store::Db;
use chrono::Utc;
use serde_json::json;

use crate::common::{free_port, AxProcess, Executor, RedisProcess, Reply, TestStore};

const SERVICE: &str = "axprimary";
/// The data nodes' password (the sentinels have none): never to be found in ax's log.
const PASSWORD: &str = "sentinel-test-hunter2";
const TASKS: usize = 8;
/// The longest ax may take after the kill to lock on the new primary again: the sentinels'
/// 1 s to call the primary down, their election and promotion, and ax's back-off (2 s at most).
const RESUME_WITHIN: Duration = Duration::from_secs(10);

/// `ROLE`'s first word: `master`, `slave` or `sentinel`.
async fn role(redis: &RedisProcess) -> String {
    let mut conn = redis.conn_with(PASSWORD).await;
    let role: Vec<redis::Value> = redis::cmd("ROLE")
        .query_async(&mut conn)
        .await
        .expect("ROLE");
    match role.first() {
        Some(redis::Value::BulkString(word)) => String::from_utf8_lossy(word).into_owned(),
        other => panic!("ROLE: {other:?}"),
    }
}

/// How many replicas and other sentinels `sentinel` knows of.
async fn known(sentinel: &RedisProcess) -> (usize, usize) {
    let mut conn = sentinel.conn().await;
    let replicas: Vec<redis::Value> = redis::cmd("SENTINEL")
        .arg("REPLICAS")
        .arg(SERVICE)
        .query_async(&mut conn)
        .await
        .expect("SENTINEL REPLICAS");
    let others: Vec<redis::Value> = redis::cmd("SENTINEL")
        .arg("SENTINELS")
        .arg(SERVICE)
        .query_async(&mut conn)
        .await
        .expect("SENTINEL SENTINELS");
    (replicas.len(), others.len())
}

/// Whether `/healthz` says ax's link to Redis is up.
async fn redis_up(node: &AxProcess) -> bool {
    let Ok(mut response) = awc::Client::default()
        .get(format!("{}/healthz", node.base()))
        .send()
        .await
    else {
        return false;
    };
    let body: serde_json::Value = response.json().await.unwrap_or_default();
    body["redis"] == "up"
}

/// How many `SET`s `redis` has run (ax's fire locks are `SET … NX PX`; nothing else sets).
async fn sets(redis: &RedisProcess) -> u64 {
    let mut conn = redis.conn_with(PASSWORD).await;
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(&mut conn)
        .await
        .expect("INFO");
    info.lines()
        .find_map(|line| line.strip_prefix("cmdstat_set:calls="))
        .and_then(|rest| rest.split(',').next()?.parse().ok())
        .unwrap_or(0)
}

/// The keys of `redis`.
async fn keys(redis: &RedisProcess) -> Vec<String> {
    let mut conn = redis.conn_with(PASSWORD).await;
    redis::cmd("KEYS")
        .arg("*")
        .query_async(&mut conn)
        .await
        .expect("KEYS")
}

#[actix_rt::test(system = "crate::common::TestSystem")]
async fn a_killed_primary_is_followed_to_the_promoted_replica() {
    let _serial = crate::serial().await;
    let started = Instant::now();
    let store = TestStore::mysql();
    let dir = tempfile::tempdir().expect("dir");
    let primary_port = free_port();
    let auth = ["--requirepass", PASSWORD, "--masterauth", PASSWORD];
    let mut primary = Some(RedisProcess::start(primary_port, &auth).await);
    let replica_port = free_port();
    let replica_of = format!("127.0.0.1 {primary_port}");
    let replica_args = [&auth[..], &["--replicaof", &replica_of]].concat();
    let replica = RedisProcess::start(replica_port, &replica_args).await;
    let mut sentinels = Vec::new();
    for _ in 0..3 {
        sentinels.push(
            RedisProcess::sentinel(dir.path(), free_port(), SERVICE, primary_port, PASSWORD).await,
        );
    }
    // A failover needs the sentinels to know the replica and each other (hellos every 2 s).
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let mut ready = true;
        for sentinel in &sentinels {
            ready &= known(sentinel).await == (1, 2);
        }
        if ready {
            break;
        }
        assert!(Instant::now() < deadline, "the sentinels never met");
        actix_rt::time::sleep(Duration::from_millis(200)).await;
    }

    let hosts: Vec<String> = sentinels
        .iter()
        .map(|s| format!("127.0.0.1:{}", s.port))
        .collect();
    let url = format!(
        "redis+sentinel://:{PASSWORD}@{}/{SERVICE}/0",
        hosts.join(",")
    );
    let instance = format!(
        "sentinel-{}",
        &uuid::Uuid::new_v4().simple().to_string()[..8]
    );
    let env = vec![
        ("AX_STORE_URL".to_string(), store.url()),
        ("AX_REDIS_URL".to_string(), url),
        ("AX_STORE_BATCH_INTERVAL_MS".to_string(), "100".to_string()),
        ("RUST_LOG".to_string(), "info".to_string()),
    ];
    let executor = Executor::start(Reply::Success).await;
    let node = AxProcess::start(dir.path(), &instance, env).await;
    let api = crate::common::Api::at(node.base());
    let mut tasks = Vec::new();
    for i in 0..TASKS {
        let task = api
            .create_task(json!({
                "name": format!("sentinel-{i}"), "cron": "* * * * * *",
                "handlerUrl": executor.url, "maxRetry": 0, "timeoutMs": 2000,
            }))
            .await;
        tasks.push(task["id"].as_i64().expect("id"));
    }
    actix_rt::time::sleep(Duration::from_secs(2)).await;
    let from = Utc::now().timestamp() + 1;
    actix_rt::time::sleep(Duration::from_secs(4)).await;
    assert!(
        redis_up(&node).await,
        "ax's Redis link is up before the kill"
    );
    let first = primary.as_ref().expect("primary");
    let before = keys(first).await;
    assert!(
        before.iter().any(|k| k.contains(&instance)),
        "ax's heartbeat on the first primary: {before:?}"
    );
    assert!(
        sets(first).await >= TASKS as u64,
        "fire locks on the first primary"
    );

    // kill -9 under load.
    drop(primary.take());
    let killed = Instant::now();
    let mut down_seen = false;
    let resumed = loop {
        let up = redis_up(&node).await;
        down_seen |= !up;
        if up && down_seen && role(&replica).await == "master" {
            break killed.elapsed();
        }
        assert!(
            killed.elapsed() < Duration::from_secs(30),
            "ax never came back to Redis after the failover; see {}",
            node.log_path().display()
        );
        actix_rt::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(
        resumed <= RESUME_WITHIN,
        "fire locks resumed {resumed:?} after the kill"
    );
    let promoted_sets = sets(&replica).await;
    // Past every key's life (locks 3 s, heartbeats 10 s): those on the new primary are ax's
    // writes since the promotion.
    actix_rt::time::sleep(Duration::from_secs(11)).await;
    let after = keys(&replica).await;
    assert!(
        after.iter().any(|k| k.contains(&instance)),
        "ax's heartbeat on the new primary: {after:?}"
    );
    let locks_after = sets(&replica).await - promoted_sets;
    assert!(
        locks_after >= 10 * TASKS as u64,
        "{locks_after} fire locks on the new primary in 11 s"
    );
    let to = Utc::now().timestamp() - 3;
    actix_rt::time::sleep(Duration::from_secs(3)).await;
    let log_path = node.log_path();
    assert_eq!(node.terminate().await, Some(0));
    let log = std::fs::read_to_string(log_path).expect("ax's log");
    assert!(
        log.contains(&format!("127.0.0.1:{replica_port}")),
        "ax's log names the new primary:\n{log}"
    );
    assert!(
        !log.contains(PASSWORD),
        "ax's log shows the password:\n{log}"
    );

    let db = Db::connect(&store.url(), 2).await.expect("store");
    let deliveries = executor.received();
    let mut per_request: HashMap<&str, usize> = HashMap::new();
    for delivery in &deliveries {
        *per_request.entry(delivery.request_id.as_str()).or_default() += 1;
    }
    let twice: Vec<&&str> = per_request
        .iter()
        .filter(|(_, n)| **n > 1)
        .map(|(r, _)| r)
        .collect();
    assert!(twice.is_empty(), "delivered twice: {twice:?}");
    let mut rows_checked = 0;
    for task in &tasks {
        let rows = crate::common::rows_of(&db, *task).await;
        let by_second = crate::common::one_row_per_second(*task, &rows);
        let missing: BTreeSet<i64> = (from..=to).filter(|s| !by_second.contains_key(s)).collect();
        assert!(missing.is_empty(), "task {task}: no run for {missing:?}");
        for second in from..=to {
            let row = by_second[&second];
            assert!(
                per_request.contains_key(row.request_id.as_str()),
                "task {task}: the run of {second} was not delivered: {row:?}"
            );
            rows_checked += 1;
        }
    }
    println!(
        "sentinel failover: {TASKS} every-second tasks over {} s, {rows_checked} runs each \
         recorded and delivered once, 0 lost, 0 twice; fire locks on the new primary {:.1} s \
         after the kill; test took {:.0} s",
        to - from + 1,
        resumed.as_secs_f64(),
        started.elapsed().as_secs_f64()
    );
    executor.stop().await;
    drop(sentinels);
}
