//! Shares: the processes of a cluster split the tasks between them, each holding and firing
//! its own; a process that joins takes its share and one that stops hands its share over,
//! without a run lost, recorded twice, delivered twice or late.

use std::collections::{BTreeSet, HashMap};
use std::time::Duration;

use ax_core::cluster::shares::{owner, partition_of, PARTITIONS};
use ax_core::ids::{ProcessId, TaskId};
use ax_store::Db;
use chrono::Utc;
use serde_json::{json, Value};

use crate::common::{
    on_each_backend, redis_url, rows_of, Api, AxProcess, Executor, Reply, TestStore,
};

const TASKS: usize = 48;
/// How long after a process joins or stops the others have read the list and moved the shares
/// (a heartbeat, the handoff, a margin).
const SETTLE: Duration = Duration::from_secs(10);

async fn cluster(api: &Api) -> Value {
    let (status, body) = api.get("/api/cluster").await;
    assert_eq!(status, 200, "{body}");
    body
}

/// Waits until `api` lists exactly `names` as firing processes.
async fn wait_for_list(api: &Api, names: &[&str]) -> Value {
    let want: BTreeSet<&str> = names.iter().copied().collect();
    for _ in 0..100 {
        let body = cluster(api).await;
        let listed: BTreeSet<&str> = body["instances"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|m| m["firing"] == true)
            .filter_map(|m| m["instanceId"].as_str())
            .collect();
        if listed == want {
            return body;
        }
        actix_rt::time::sleep(Duration::from_millis(200)).await;
    }
    panic!("never listed {names:?}: {}", cluster(api).await);
}

/// The owner of each task's partition among `names`.
fn owners(tasks: &[i64], names: &[&str]) -> HashMap<i64, String> {
    let ids: Vec<ProcessId> = names.iter().map(|n| ProcessId::from(*n)).collect();
    tasks
        .iter()
        .map(|&task| {
            let owner = owner(partition_of(TaskId(task)), &ids).expect("an owner");
            (task, owner.to_string())
        })
        .collect()
}

/// The names of `count` processes of one test run (`{kind}{n}-{run}`) and their environment:
/// the store, Redis, and a key prefix of the run's own, since another test binary may lease
/// the same Redis database.
fn one_run(kind: &str, count: usize, store: &TestStore) -> (Vec<String>, Vec<(String, String)>) {
    let run = uuid::Uuid::new_v4().simple().to_string();
    let run = &run[..8];
    let names = (1..=count).map(|n| format!("{kind}{n}-{run}")).collect();
    let env = vec![
        ("AX_STORE_URL".to_string(), store.url()),
        ("AX_REDIS_URL".to_string(), redis_url()),
        ("AX_REDIS_KEY_PREFIX".to_string(), format!("{run}:")),
    ];
    (names, env)
}

on_each_backend!(processes_fire_their_shares_and_hand_them_over_without_a_run_lost_on, mariadb: processes_fire_their_shares_and_hand_them_over_without_a_run_lost, postgres: processes_fire_their_shares_and_hand_them_over_without_a_run_lost_on_postgres);

async fn processes_fire_their_shares_and_hand_them_over_without_a_run_lost_on(store: TestStore) {
    let _serial = crate::serial().await;
    let dir = tempfile::tempdir().expect("dir");
    let (names, mut env) = one_run("share", 3, &store);
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    env.push(("AX_STORE_BATCH_INTERVAL_MS".to_string(), "100".to_string()));
    let executor = Executor::start(Reply::Success).await;
    let mut first = AxProcess::start(dir.path(), names[0], env.clone()).await;
    let second = AxProcess::start(dir.path(), names[1], env.clone()).await;
    let apis = [Api::at(first.base()), Api::at(second.base())];
    let mut tasks = Vec::new();
    for i in 0..TASKS {
        let task = apis[i % 2]
            .create_task(json!({"name": format!("share-{i}"), "cron": "* * * * * *",
                "handlerUrl": executor.url, "maxRetry": 0}))
            .await;
        tasks.push(task["id"].as_i64().expect("id"));
    }
    wait_for_list(&apis[1], &names[..2]).await;
    actix_rt::time::sleep(SETTLE).await;

    // Two processes: the partitions and the tasks split between them, each wheel holding its
    // own share only.
    let body = cluster(&apis[0]).await;
    let instances = body["instances"].as_array().expect("instances");
    let partitions: u64 = instances
        .iter()
        .map(|m| m["share"]["partitions"].as_u64().unwrap_or(0))
        .sum();
    let shared: u64 = instances
        .iter()
        .map(|m| m["share"]["tasks"].as_u64().unwrap_or(0))
        .sum();
    assert_eq!(partitions, PARTITIONS as u64, "{body}");
    assert_eq!(shared, TASKS as u64, "{body}");
    for (instance, api) in instances.iter().zip(&apis) {
        let tasks = instance["share"]["tasks"].as_u64().expect("tasks");
        assert!(tasks > 0 && tasks < TASKS as u64, "{instance}");
        assert!(
            instance["share"]["firesPerSec"].as_f64().expect("rate") > 0.0,
            "{instance}"
        );
        let (_, health) = api.get("/healthz").await;
        let held = health["wheelSize"].as_u64().expect("wheelSize");
        assert!(
            held < TASKS as u64,
            "each wheel holds its share only: {health}"
        );
    }
    let two_settled = Utc::now();

    // A third joins.
    let third = AxProcess::start(dir.path(), names[2], env.clone()).await;
    let joined = Utc::now();
    wait_for_list(&apis[0], &names).await;
    actix_rt::time::sleep(SETTLE).await;
    let three_settled = Utc::now();
    actix_rt::time::sleep(Duration::from_secs(4)).await;

    // The first stops, handing its share over.
    let left = Utc::now();
    assert_eq!(first.stop().await, Some(0));
    wait_for_list(&apis[1], &names[1..]).await;
    actix_rt::time::sleep(SETTLE).await;
    let two_again = Utc::now();
    actix_rt::time::sleep(Duration::from_secs(4)).await;
    let ended = Utc::now() - chrono::Duration::seconds(2);

    let db = Db::connect(&store.url(), 2).await.expect("store");
    let deliveries = executor.received();
    let mut delivered: HashMap<&str, usize> = HashMap::new();
    for delivery in &deliveries {
        *delivered.entry(delivery.request_id.as_str()).or_default() += 1;
        let (scheduled, late) = (delivery.scheduled_at(), delivery.lateness());
        assert!(
            late < chrono::Duration::seconds(2),
            "{} scheduled at {scheduled} delivered {late} late (joined {joined}, left {left})",
            delivery.request_id
        );
    }
    let twice: Vec<_> = delivered.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "delivered twice: {twice:?}");
    let (three, two) = (owners(&tasks, &names), owners(&tasks, &names[1..]));
    let (mut checked, mut by_owner) = (0, 0);
    for &task in &tasks {
        let rows = rows_of(&db, task).await;
        let seconds: BTreeSet<i64> = rows
            .iter()
            .map(|r| r.scheduled_at.and_utc().timestamp())
            .collect();
        assert_eq!(
            seconds.len(),
            rows.len(),
            "task {task}: two rows for one second"
        );
        let window = two_settled.timestamp()..=ended.timestamp();
        for second in window {
            assert!(
                seconds.contains(&second),
                "task {task}: the run of {second} is missing"
            );
        }
        for row in &rows {
            let at = row.scheduled_at.and_utc();
            if at >= two_settled && at <= ended {
                assert!(
                    delivered.contains_key(row.request_id.as_str()),
                    "task {task}: {} not delivered",
                    row.request_id
                );
                checked += 1;
            }
            // Once the shares have settled, each run is fired by its task's owner.
            let owner = if at >= three_settled && at < left {
                Some(&three[&task])
            } else if at >= two_again && at <= ended {
                Some(&two[&task])
            } else {
                None
            };
            if let Some(owner) = owner {
                assert_eq!(row.fired_by.as_str(), owner, "task {task} at {at}");
                by_owner += 1;
            }
        }
    }
    assert!(
        by_owner >= TASKS * 5,
        "{by_owner} runs checked against their owner"
    );
    println!(
        "shares test: {TASKS} every-second tasks, {checked} runs from two processes to three and \
         back to two, each recorded and delivered once, none 2 s late; {by_owner} fired by their \
         owner"
    );
    drop((second, third));
    executor.stop().await;
}

on_each_backend!(bulk_registrations_through_two_processes_at_once_reach_every_owner_on, mariadb: bulk_registrations_through_two_processes_at_once_reach_every_owner, postgres: bulk_registrations_through_two_processes_at_once_reach_every_owner_on_postgres);

/// Bulk registrations through two processes at once: their transactions take change ids in
/// turn, so the change feed meets a gap at every other id until the last commits. Each owner
/// still reads every change: within seconds the wheels hold every task, once (not at the
/// minute's reconcile).
async fn bulk_registrations_through_two_processes_at_once_reach_every_owner_on(store: TestStore) {
    const CALLS: usize = 8;
    const PER_CALL: usize = 1_000;
    let _serial = crate::serial().await;
    let dir = tempfile::tempdir().expect("dir");
    let (names, env) = one_run("bulk", 2, &store);
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let executor = Executor::start(Reply::Success).await;
    let nodes = [
        AxProcess::start(dir.path(), names[0], env.clone()).await,
        AxProcess::start(dir.path(), names[1], env.clone()).await,
    ];
    let apis = [Api::at(nodes[0].base()), Api::at(nodes[1].base())];
    wait_for_list(&apis[0], &names).await;
    actix_rt::time::sleep(SETTLE).await;

    // Due in five minutes: in the wheels' window, not firing while the test runs.
    let due = Utc::now() + chrono::Duration::minutes(5);
    let cron = due.format("%S %M %H * * *").to_string();
    let calls = (0..CALLS).map(|call| {
        let tasks: Vec<Value> = (0..PER_CALL)
            .map(|i| {
                json!({"name": format!("bulk-{call}-{i}"), "cron": cron,
                       "handlerUrl": executor.url, "maxRetry": 0})
            })
            .collect();
        let api = &apis[call % 2];
        async move { api.post("/api/tasks/bulk", json!({ "items": tasks })).await }
    });
    for (status, body) in futures_util::future::join_all(calls).await {
        assert_eq!(status, 200, "{body}");
    }
    let registered = std::time::Instant::now();
    let want = (CALLS * PER_CALL) as u64;
    let mut held = Vec::new();
    while registered.elapsed() < Duration::from_secs(8) {
        held.clear();
        for api in &apis {
            let (_, health) = api.get("/healthz").await;
            held.push(health["wheelSize"].as_u64().unwrap_or(0));
        }
        if held.iter().sum::<u64>() == want {
            break;
        }
        actix_rt::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(held.iter().sum::<u64>(), want, "wheels: {held:?}");
    assert!(held.iter().all(|n| *n > 0), "wheels: {held:?}");
    println!(
        "bulk test: {want} tasks in {CALLS} bulk calls through two processes at once, every one \
         in its owner's wheel {:?} after the last call",
        registered.elapsed()
    );
    executor.stop().await;
}
