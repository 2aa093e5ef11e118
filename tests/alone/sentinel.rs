//! Redis behind Sentinel: ax finds the primary through the sentinels and follows it under load,
//! through a planned failover (`SENTINEL FAILOVER`: the old primary stays up a while, taking
//! writes, before it is demoted) and through a kill -9 of the primary. No run is lost or
//! delivered twice meanwhile: the database's compare-and-set fires on while Redis is out.

use std::collections::{BTreeSet, HashMap};
use std::time::{Duration, Instant};

use ax_store::Db;
use chrono::Utc;
use serde_json::json;

use crate::common::{
    free_port, on_each_backend, AxProcess, Executor, RedisProcess, Reply, TestStore,
};

const SERVICE: &str = "axprimary";
/// The data nodes' password (the sentinels have none): never to be found in ax's log.
const PASSWORD: &str = "sentinel-test-hunter2";
const TASKS: usize = 8;
/// The longest ax may take after a failover to lock on the new primary: after a kill, the
/// sentinels' 1 s to call the primary down, their election and promotion, and ax's back-off
/// (2 s at most); after a planned one, the promotion and its announcement.
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

/// Whether `sentinel` knows the other two sentinels and the replica on `port`, in sync with
/// its primary: what a failover to that replica needs.
async fn ready_for_failover(sentinel: &RedisProcess, port: u16) -> bool {
    let mut conn = sentinel.conn().await;
    let replicas: Vec<HashMap<String, String>> = redis::cmd("SENTINEL")
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
    let replica_ready = replicas.iter().any(|replica| {
        let flags = replica.get("flags").map_or("", String::as_str);
        replica.get("port") == Some(&port.to_string())
            && replica.get("master-link-status").map(String::as_str) == Some("ok")
            && !flags.contains("down")
            && !flags.contains("disconnected")
    });
    replica_ready && others.len() == 2
}

/// Waits until the sentinels could fail the primary over to the replica on `port`.
async fn wait_ready_for_failover(sentinels: &[RedisProcess], port: u16) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let mut ready = true;
        for sentinel in sentinels {
            ready &= ready_for_failover(sentinel, port).await;
        }
        if ready {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the sentinels never saw the replica on {port} in sync"
        );
        actix_rt::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Waits until `redis` is the primary and ax takes fire locks on it (`/healthz` says Redis
/// is up and a tick's worth of `SET`s reached it); returns the time since `since`.
async fn locks_move_to(redis: &RedisProcess, node: &AxProcess, since: Instant) -> Duration {
    let give_up = since + Duration::from_secs(30);
    while role(redis).await != "master" {
        assert!(Instant::now() < give_up, "{} never promoted", redis.port);
        actix_rt::time::sleep(Duration::from_millis(50)).await;
    }
    let promoted = sets(redis).await;
    loop {
        if redis_up(node).await && sets(redis).await >= promoted + TASKS as u64 {
            return since.elapsed();
        }
        assert!(
            Instant::now() < give_up,
            "ax never took its locks on {}; see {}",
            redis.port,
            node.log_path().display()
        );
        actix_rt::time::sleep(Duration::from_millis(100)).await;
    }
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

on_each_backend!(ax_follows_the_primary_through_a_planned_failover_and_a_kill_on, mariadb: ax_follows_the_primary_through_a_planned_failover_and_a_kill, postgres: ax_follows_the_primary_through_a_planned_failover_and_a_kill_on_postgres);

async fn ax_follows_the_primary_through_a_planned_failover_and_a_kill_on(store: TestStore) {
    let _serial = crate::serial().await;
    let started = Instant::now();
    let dir = tempfile::tempdir().expect("dir");
    let auth = ["--requirepass", PASSWORD, "--masterauth", PASSWORD];
    let first_port = free_port();
    let first = RedisProcess::start(first_port, &auth).await;
    let second_port = free_port();
    let replica_of = format!("127.0.0.1 {first_port}");
    let replica_args = [&auth[..], &["--replicaof", &replica_of]].concat();
    let mut second = Some(RedisProcess::start(second_port, &replica_args).await);
    let mut sentinels = Vec::new();
    for _ in 0..3 {
        sentinels.push(
            RedisProcess::sentinel(dir.path(), free_port(), SERVICE, first_port, PASSWORD).await,
        );
    }
    wait_ready_for_failover(&sentinels, second_port).await;

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
    actix_rt::time::sleep(Duration::from_secs(3)).await;
    assert!(redis_up(&node).await, "ax's Redis link is up");
    let heartbeats = keys(&first).await;
    assert!(
        heartbeats.iter().any(|k| k.contains(&instance)),
        "ax's heartbeat on the first primary: {heartbeats:?}"
    );
    assert!(
        sets(&first).await >= TASKS as u64,
        "fire locks on the first primary"
    );

    // A planned failover: the first primary is demoted to a replica of the second.
    let mut conn = sentinels[0].conn().await;
    let asked = Instant::now();
    let _: String = redis::cmd("SENTINEL")
        .arg("FAILOVER")
        .arg(SERVICE)
        .query_async(&mut conn)
        .await
        .expect("SENTINEL FAILOVER");
    let planned = locks_move_to(second.as_ref().expect("second"), &node, asked).await;
    assert!(
        planned <= RESUME_WITHIN,
        "fire locks on the second primary {planned:?} after the planned failover"
    );
    // A sentinel tries the same primary's failover again only after twice its timeout (6 s).
    actix_rt::time::sleep(Duration::from_secs(7)).await;
    wait_ready_for_failover(&sentinels, first_port).await;

    // kill -9 of the second primary, under load: the first is promoted back.
    drop(second.take());
    let killed = Instant::now();
    let resumed = locks_move_to(&first, &node, killed).await;
    assert!(
        resumed <= RESUME_WITHIN,
        "fire locks resumed {resumed:?} after the kill"
    );
    // Past every key's life (locks 3 s, heartbeats 10 s): those on the new primary are ax's
    // writes since the promotion.
    actix_rt::time::sleep(Duration::from_secs(11)).await;
    let after = keys(&first).await;
    assert!(
        after.iter().any(|k| k.contains(&instance)),
        "ax's heartbeat on the new primary: {after:?}"
    );
    let to = Utc::now().timestamp() - 3;
    actix_rt::time::sleep(Duration::from_secs(3)).await;
    let log_path = node.log_path();
    assert_eq!(node.terminate().await, Some(0));
    let log = std::fs::read_to_string(log_path).expect("ax's log");
    for port in [first_port, second_port] {
        assert!(
            log.contains(&format!("names 127.0.0.1:{port} the primary")),
            "ax's log names each primary:\n{log}"
        );
    }
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
        "sentinel failovers: {TASKS} every-second tasks over {} s, {rows_checked} runs each \
         recorded and delivered once, 0 lost, 0 twice; fire locks on the new primary {:.1} s \
         after a planned failover, {:.1} s after a kill -9; test took {:.0} s",
        to - from + 1,
        planned.as_secs_f64(),
        resumed.as_secs_f64(),
        started.elapsed().as_secs_f64()
    );
    executor.stop().await;
    drop(sentinels);
}
