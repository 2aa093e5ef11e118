//! Three ax processes on one MariaDB (or PostgreSQL) and one Redis: each run is recorded once
//! and delivered, results reach any instance, and when one instance is killed the others take
//! over its share within the documented failover gap and report it gone from `/api/cluster`.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::time::{Duration, Instant};

use ax_store::Db;
use chrono::Utc;
use serde_json::json;

use crate::common::{on_each_backend, redis_url, Api, AxProcess, Executor, Reply, TestStore};

const TASKS: usize = 6;
/// The documented failover gap: the dead instance's fire locks expire (3 s), then the next
/// fire of each of its tasks catches up.
const FAILOVER_GAP_SECS: i64 = 5;

/// The settings of the processes of the test's cluster: its own database, and a Redis database
/// of its own that they share.
fn cluster_env(store: &TestStore) -> Vec<(String, String)> {
    vec![
        ("AX_STORE_URL".to_string(), store.url()),
        ("AX_REDIS_URL".to_string(), redis_url()),
        ("AX_STORE_BATCH_INTERVAL_MS".to_string(), "100".to_string()),
    ]
}

/// Creates `n` every-second tasks named `{prefix}-{i}`, through the processes in turn.
async fn every_second_tasks(
    apis: &[Api],
    n: usize,
    prefix: &str,
    url: &str,
    timeout_ms: i64,
) -> Vec<i64> {
    let mut tasks = Vec::new();
    for i in 0..n {
        let task = apis[i % apis.len()]
            .create_task(json!({
                "name": format!("{prefix}-{i}"), "cron": "* * * * * *",
                "handlerUrl": url, "maxRetry": 0, "timeoutMs": timeout_ms,
            }))
            .await;
        tasks.push(task["id"].as_i64().expect("id"));
    }
    tasks
}

async fn live_members(api: &Api) -> Vec<String> {
    let (status, body) = api.get("/api/cluster").await;
    assert_eq!(status, 200, "{body}");
    body["instances"]
        .as_array()
        .map(|members| {
            members
                .iter()
                .filter_map(|m| m["instanceId"].as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

on_each_backend!(three_instances_one_killed_on, mariadb: three_instances_one_killed, postgres: three_instances_one_killed_on_postgres);

async fn three_instances_one_killed_on(store: TestStore) {
    let _serial = crate::serial().await;
    let dir = tempfile::tempdir().expect("dir");
    let run_id = uuid::Uuid::new_v4().simple().to_string();
    let names: Vec<String> = (1..=3)
        .map(|n| format!("node{n}-{}", &run_id[..8]))
        .collect();
    let env = cluster_env(&store);
    // The executor answers 202; each result is then reported to a different instance.
    let executor = Executor::start(Reply::Accepted).await;
    let mut nodes = Vec::new();
    for name in &names {
        nodes.push(AxProcess::start(dir.path(), name, env.clone()).await);
    }
    let apis: Vec<Api> = nodes.iter().map(|n| Api::at(n.base())).collect();
    let tasks = every_second_tasks(&apis, TASKS, "cluster", &executor.url, 1000).await;
    let mut members = live_members(&apis[0]).await;
    for _ in 0..40 {
        if names.iter().all(|n| members.contains(n)) {
            break;
        }
        actix_rt::time::sleep(Duration::from_millis(100)).await;
        members = live_members(&apis[0]).await;
    }
    assert!(
        names.iter().all(|n| members.contains(n)),
        "all three live: {members:?}"
    );

    let mut answered = HashSet::new();
    answer_for(&executor, &apis, &mut answered, Duration::from_secs(5)).await;
    nodes[1].kill();
    let killed = Utc::now();
    answer_for(&executor, &apis, &mut answered, Duration::from_secs(8)).await;

    // The survivors drop the dead instance once its heartbeat expires (10 s).
    let deadline = Instant::now() + Duration::from_secs(15);
    let mut gone_after = None;
    while Instant::now() < deadline {
        answer_for(&executor, &apis, &mut answered, Duration::from_millis(500)).await;
        let seen = live_members(&apis[0]).await;
        if !seen.contains(&names[1]) {
            assert!(
                seen.contains(&names[0]) && seen.contains(&names[2]),
                "{seen:?}"
            );
            assert!(!live_members(&apis[2]).await.contains(&names[1]));
            gone_after = Some(Utc::now() - killed);
            break;
        }
    }
    let gone_after = gone_after.expect("the killed instance leaves /api/cluster");
    let ended = Utc::now();
    let survivors: Vec<AxProcess> = nodes
        .into_iter()
        .enumerate()
        .filter(|(i, _)| *i != 1)
        .map(|(_, n)| n)
        .collect();
    for node in survivors {
        assert_eq!(node.terminate().await, Some(0));
    }

    let db = Db::connect(&store.url(), 2).await.expect("store");
    let deliveries = executor.received();
    let delivered: HashSet<&str> = deliveries.iter().map(|d| d.request_id.as_str()).collect();
    let (mut rows_total, mut lost_in_gap, mut worst_gap) = (0usize, 0i64, 0i64);
    for task_id in &tasks {
        let rows = crate::common::rows_of(&db, *task_id).await;
        rows_total += rows.len();
        let mut seconds = BTreeSet::new();
        for row in &rows {
            let second = row.scheduled_at.and_utc().timestamp();
            assert!(
                seconds.insert(second),
                "task {task_id}: two rows for {second}"
            );
            if row.scheduled_at.and_utc() < ended - chrono::Duration::seconds(15) {
                assert!(
                    delivered.contains(row.request_id.as_str()),
                    "undelivered {row:?}"
                );
            }
        }
        let seconds: Vec<i64> = seconds.into_iter().collect();
        for pair in seconds.windows(2) {
            let gap = pair[1] - pair[0];
            if gap > 1 {
                let near_kill = (pair[0] - killed.timestamp()).abs() <= 2;
                assert!(
                    near_kill,
                    "task {task_id}: {}..{} lost away from the kill",
                    pair[0], pair[1]
                );
                assert!(
                    gap <= FAILOVER_GAP_SECS,
                    "task {task_id}: failover gap {gap} s"
                );
                lost_in_gap += gap - 1;
                worst_gap = worst_gap.max(gap);
            }
        }
        assert!(*seconds.last().expect("rows") >= ended.timestamp() - 20);
    }
    let mut per_run: HashMap<&str, usize> = HashMap::new();
    for d in &deliveries {
        *per_run.entry(d.request_id.as_str()).or_default() += 1;
    }
    let duplicates: usize = per_run.values().map(|n| n - 1).sum();
    // A run may be delivered again only if it was in flight on the killed instance.
    let in_failover = |d: &&crate::common::Received| {
        let scheduled = d.body["scheduledAt"]
            .as_str()
            .and_then(|at| chrono::DateTime::parse_from_rfc3339(at).ok())
            .map_or(0, |at| at.timestamp());
        (scheduled - killed.timestamp()).abs() <= 2
    };
    let repeated_outside: Vec<&str> = deliveries
        .iter()
        .filter(|d| per_run[d.request_id.as_str()] > 1 && !in_failover(d))
        .map(|d| d.request_id.as_str())
        .collect();
    assert!(
        repeated_outside.is_empty(),
        "delivered twice outside the failover: {repeated_outside:?}"
    );
    println!(
        "cluster test: 3 instances, {TASKS} every-second tasks, {rows_total} rows, 0 duplicate \
         rows, {} deliveries ({duplicates} duplicate), {lost_in_gap} runs collapsed in failover, \
         worst gap {worst_gap} s, dead instance left /api/cluster after {} s",
        deliveries.len(),
        gone_after.num_seconds()
    );
    executor.stop().await;
}

/// For `time`, answers every new delivery by callback (see `answer_new`).
async fn answer_for(
    executor: &Executor,
    apis: &[Api],
    answered: &mut HashSet<String>,
    time: Duration,
) {
    let until = Instant::now() + time;
    while Instant::now() < until {
        answer_new(executor, apis, answered).await;
        actix_rt::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Reports SUCCESS for every delivery not yet answered, spreading the callbacks over the
/// instances (a result may reach any of them); a killed instance is skipped.
async fn answer_new(executor: &Executor, apis: &[Api], answered: &mut HashSet<String>) {
    for (i, delivery) in executor.received().iter().enumerate() {
        if !answered.insert(delivery.request_id.clone()) {
            continue;
        }
        // Any live instance will do: try them in turn from a rotating start.
        for k in 0..apis.len() {
            let api = &apis[(i + k) % apis.len()];
            let body = delivery.callback("SUCCESS", json!({}));
            if let Some((200, _)) = api.try_call("POST", "/api/callback", Some(body)).await {
                break;
            }
        }
    }
}

/// A task's definition as the test set it: what its runs must carry once it is in force.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Definition {
    /// `None` while the task is deleted.
    task: Option<i64>,
    /// Fires every `every` seconds.
    every: i64,
    version: i64,
    /// Which executor its runs go to (0 or 1).
    executor: usize,
    enabled: bool,
}

/// A change made through one process: its definition from `answered` on.
struct Change {
    sent: chrono::DateTime<Utc>,
    answered: chrono::DateTime<Utc>,
    definition: Definition,
}

fn scheduled_second(received: &crate::common::Received) -> i64 {
    received.body["scheduledAt"]
        .as_str()
        .and_then(|at| chrono::DateTime::parse_from_rfc3339(at).ok())
        .map_or(i64::MIN, |at| at.timestamp())
}

/// The number a process's `/metrics` gives `name`.
async fn metric(base: &str, name: &str) -> Option<f64> {
    let mut response = awc::Client::default()
        .get(format!("{base}/metrics"))
        .send()
        .await
        .ok()?;
    let text = String::from_utf8(response.body().await.ok()?.to_vec()).ok()?;
    text.lines()
        .find_map(|line| line.strip_prefix(&format!("{name} ")))
        .and_then(|value| value.trim().parse().ok())
}

on_each_backend!(a_change_through_either_process_reaches_both_on, mariadb: a_change_through_either_process_reaches_both, postgres: a_change_through_either_process_reaches_both_on_postgres);

/// Every change, pause and scene pause, delete and re-create made through either of two
/// processes reaches both at once: each delivery after a change carries its definition (task,
/// params, handler, cron), and every second the definition fires is delivered once.
async fn a_change_through_either_process_reaches_both_on(store: TestStore) {
    let _serial = crate::serial().await;
    const NOISE: usize = 20;
    let dir = tempfile::tempdir().expect("dir");
    let run_id = uuid::Uuid::new_v4().simple().to_string();
    let env = cluster_env(&store);
    let noise = Executor::start(Reply::Success).await;
    let executors = [
        Executor::start(Reply::Success).await,
        Executor::start(Reply::Success).await,
    ];
    let nodes = [
        AxProcess::start(dir.path(), &format!("a-{}", &run_id[..8]), env.clone()).await,
        AxProcess::start(dir.path(), &format!("b-{}", &run_id[..8]), env.clone()).await,
    ];
    let apis = [Api::at(nodes[0].base()), Api::at(nodes[1].base())];
    // The load: every-second tasks, created through one process or the other.
    for i in 0..NOISE {
        apis[i % 2]
            .create_task(json!({
                "name": format!("noise-{i}"), "scene": "noise", "cron": "* * * * * *",
                "handlerUrl": noise.url, "maxRetry": 0, "timeoutMs": 2000,
            }))
            .await;
    }
    // Each process holds its share of the tasks in its wheel, those created through the other
    // too: together every task, once the shares have settled (a heartbeat and the handoff).
    let deadline = Instant::now() + Duration::from_secs(12);
    let mut held = Vec::new();
    while Instant::now() < deadline {
        held = Vec::new();
        for node in &nodes {
            held.push(
                metric(&node.base(), "ax_wheel_entries")
                    .await
                    .unwrap_or(0.0),
            );
        }
        if held.iter().sum::<f64>() == NOISE as f64 && held.iter().all(|n| *n > 0.0) {
            break;
        }
        actix_rt::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        held.iter().sum::<f64>() == NOISE as f64 && held.iter().all(|n| *n > 0.0),
        "wheels: {held:?}"
    );

    let scene = format!("watched-{}", &run_id[..8]);
    let body = |def: &Definition| {
        json!({
            "name": "watched", "scene": scene,
            "cron": if def.every == 1 { "* * * * * *" } else { "*/2 * * * * *" },
            "handlerUrl": executors[def.executor].url, "params": {"v": def.version},
            "maxRetry": 0, "timeoutMs": 2000,
        })
    };
    let mut def = Definition {
        task: None,
        every: 1,
        version: 0,
        executor: 0,
        enabled: true,
    };
    let sent = Utc::now();
    let task = apis[0].create_task(body(&def)).await;
    def.task = task["id"].as_i64();
    let mut changes = vec![Change {
        sent,
        answered: Utc::now(),
        definition: def,
    }];
    for step in 1..=20usize {
        actix_rt::time::sleep(Duration::from_millis(2_000)).await;
        let api = &apis[step % 2];
        let id = def.task.expect("a task");
        let mut next = def;
        next.version = step as i64;
        let sent = Utc::now();
        let (status, reply) = match step {
            5 | 14 => {
                next.enabled = false;
                api.post(&format!("/api/tasks/{id}/pause"), json!({})).await
            }
            6 | 15 => {
                next.enabled = true;
                api.post(&format!("/api/tasks/{id}/resume"), json!({}))
                    .await
            }
            8 | 17 => {
                next.enabled = false;
                api.post(&format!("/api/scenes/{scene}/pause"), json!({}))
                    .await
            }
            9 | 18 => {
                next.enabled = true;
                api.post(&format!("/api/scenes/{scene}/resume"), json!({}))
                    .await
            }
            11 => {
                next.task = None;
                api.call("DELETE", &format!("/api/tasks/{id}"), None).await
            }
            _ => {
                match step {
                    1 | 10 | 19 => next.every = 2,
                    2 | 20 => next.every = 1,
                    3 | 7 | 16 => next.executor = 1 - def.executor,
                    _ => {}
                }
                let patch = body(&next);
                api.call("PATCH", &format!("/api/tasks/{id}"), Some(patch))
                    .await
            }
        };
        assert!(status < 300, "step {step}: {status} {reply}");
        // Pauses and resumes keep the params: the version is the params' only for a change.
        if matches!(step, 5 | 6 | 8 | 9 | 14 | 15 | 17 | 18) {
            next.version = def.version;
        }
        changes.push(Change {
            sent,
            answered: Utc::now(),
            definition: next,
        });
        def = next;
        if step == 11 {
            // Created again at once, through the other process.
            let sent = Utc::now();
            def = Definition {
                task: None,
                version: 100,
                ..def
            };
            let task = apis[0].create_task(body(&def)).await;
            def.task = task["id"].as_i64();
            changes.push(Change {
                sent,
                answered: Utc::now(),
                definition: def,
            });
        }
    }
    actix_rt::time::sleep(Duration::from_millis(3_000)).await;
    let end = changes.last().expect("changes").answered + chrono::Duration::seconds(2);

    let deliveries: Vec<(usize, crate::common::Received)> = executors
        .iter()
        .enumerate()
        .flat_map(|(k, executor)| executor.received().into_iter().map(move |d| (k, d)))
        .collect();
    let mut per_run: HashMap<&str, usize> = HashMap::new();
    for (_, d) in &deliveries {
        *per_run.entry(d.request_id.as_str()).or_default() += 1;
    }
    let twice: Vec<&&str> = per_run
        .iter()
        .filter(|(_, n)| **n > 1)
        .map(|(r, _)| r)
        .collect();
    assert!(twice.is_empty(), "delivered twice: {twice:?}");

    let mut problems = Vec::new();
    for (i, change) in changes.iter().enumerate() {
        // In force from a second after it was answered (a run is committed a little ahead of
        // its second) until the second before the next change was sent.
        let from = (change.answered + chrono::Duration::seconds(1)).timestamp()
            + i64::from(change.answered.timestamp_subsec_nanos() > 0);
        let until = changes
            .get(i + 1)
            .map_or(end.timestamp(), |next| next.sent.timestamp() - 1);
        let def = change.definition;
        let in_force: Vec<&(usize, crate::common::Received)> = deliveries
            .iter()
            .filter(|(_, d)| (from..=until).contains(&scheduled_second(d)))
            .collect();
        for (executor, d) in &in_force {
            let carries = def.enabled
                && def.task.is_some()
                && d.body["taskId"].as_i64() == def.task
                && d.body["params"]["v"].as_i64() == Some(def.version)
                && *executor == def.executor
                && scheduled_second(d) % def.every == 0;
            if !carries {
                problems.push(format!(
                    "change {i} ({def:?}): delivery to executor {executor} of {}",
                    d.body
                ));
            }
        }
        if !def.enabled || def.task.is_none() {
            continue;
        }
        for second in (from..=until).filter(|s| s % def.every == 0) {
            let delivered = in_force
                .iter()
                .filter(|(_, d)| scheduled_second(d) == second)
                .count();
            if delivered != 1 {
                problems.push(format!(
                    "change {i} ({def:?}): second {second} delivered {delivered} times"
                ));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    println!(
        "changes test: 2 processes, {NOISE} every-second tasks beside, {} changes, {} deliveries \
         of the watched task, each with its definition",
        changes.len(),
        deliveries.len()
    );
    for node in nodes {
        assert_eq!(node.terminate().await, Some(0));
    }
}

/// libfaketime, from Debian's `faketime` package (scripts/test.sh installs it).
const FAKETIME: &str = "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1";

on_each_backend!(skewed_clocks_fire_nothing_and_say_so_on, mariadb: skewed_clocks_fire_nothing_and_say_so, postgres: skewed_clocks_fire_nothing_and_say_so_on_postgres);

/// A process 30 s ahead and one 30 s behind beside a correct one: the skewed ones say so and
/// fire and claim nothing; the correct one carries every run, none early, lost or twice, the
/// manual runs triggered through the skewed ones included.
async fn skewed_clocks_fire_nothing_and_say_so_on(store: TestStore) {
    let _serial = crate::serial().await;
    assert!(
        std::path::Path::new(FAKETIME).exists(),
        "libfaketime is missing: apt-get install faketime"
    );
    const TASKS: usize = 6;
    let dir = tempfile::tempdir().expect("dir");
    let run_id = uuid::Uuid::new_v4().simple().to_string();
    let env = cluster_env(&store);
    let skewed = |offset: &str| {
        let mut env = env.clone();
        env.push(("LD_PRELOAD".to_string(), FAKETIME.to_string()));
        env.push(("FAKETIME".to_string(), offset.to_string()));
        env
    };
    let executor = Executor::start(Reply::Success).await;
    let right = AxProcess::start(dir.path(), &format!("right-{}", &run_id[..8]), env.clone()).await;
    let ahead = AxProcess::start_answering(
        dir.path(),
        &format!("ahead-{}", &run_id[..8]),
        skewed("+30s"),
    )
    .await;
    let behind = AxProcess::start_answering(
        dir.path(),
        &format!("behind-{}", &run_id[..8]),
        skewed("-30s"),
    )
    .await;
    let apis = [
        Api::at(right.base()),
        Api::at(ahead.base()),
        Api::at(behind.base()),
    ];

    // Each says how far it is from the database's clock; the skewed ones are unhealthy.
    for (api, healthy, offset) in [
        (&apis[0], true, 0),
        (&apis[1], false, -30_000),
        (&apis[2], false, 30_000),
    ] {
        let (status, health) = api.get("/healthz").await;
        assert_eq!(status == 200, healthy, "{health}");
        let skew = health["clockSkewMs"].as_i64().expect("clockSkewMs");
        assert!((skew - offset).abs() < 1_000, "{health}");
        if !healthy {
            assert!(
                health["reason"]
                    .as_str()
                    .is_some_and(|r| r.contains("clock")),
                "{health}"
            );
        }
    }
    let ahead_skew = metric(&ahead.base(), "ax_clock_skew_seconds")
        .await
        .expect("ax_clock_skew_seconds");
    assert!((ahead_skew + 30.0).abs() < 1.0, "{ahead_skew}");

    let started = Utc::now();
    let tasks = every_second_tasks(&apis, TASKS, "clock", &executor.url, 2000).await;
    let mut manual = Vec::new();
    for k in 0..6 {
        let api = &apis[1 + k % 2];
        let (status, run) = api
            .post(&format!("/api/tasks/{}/trigger", tasks[k]), json!({}))
            .await;
        assert_eq!(status, 201, "{run}");
        manual.push(run["requestId"].as_str().expect("requestId").to_string());
    }
    actix_rt::time::sleep(Duration::from_secs(10)).await;
    let ended = Utc::now();

    let deliveries = executor.received();
    let mut per_run: HashMap<&str, usize> = HashMap::new();
    for d in &deliveries {
        *per_run.entry(d.request_id.as_str()).or_default() += 1;
        let scheduled = scheduled_second(d);
        assert!(
            d.wall.timestamp_millis() >= scheduled * 1000,
            "delivered at {} before its second {scheduled}: {}",
            d.wall,
            d.body
        );
    }
    let twice: Vec<_> = per_run.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "delivered twice: {twice:?}");
    for run in &manual {
        assert_eq!(per_run.get(run.as_str()), Some(&1), "manual run {run}");
    }
    // Every second of every task delivered, from when the correct process has it (a task
    // created through a skewed process reaches it through the change feed, within a second
    // or two).
    for task in &tasks {
        let seconds: HashSet<i64> = deliveries
            .iter()
            .filter(|d| d.body["taskId"].as_i64() == Some(*task))
            .map(scheduled_second)
            .collect();
        let lost: Vec<i64> = (started.timestamp() + 4..ended.timestamp() - 1)
            .filter(|s| !seconds.contains(s))
            .collect();
        assert!(
            lost.is_empty(),
            "task {task}: seconds not delivered: {lost:?}"
        );
    }
    // The correct process fired and claimed every one of them.
    let db = Db::connect(&store.url(), 2).await.expect("store");
    for task in &tasks {
        for row in crate::common::rows_of(&db, *task).await {
            let manual = row.trigger_type == ax_core::run::TriggerType::Manual;
            assert!(manual || row.fired_by.starts_with("right-"), "{row:?}");
        }
    }
    let log = std::fs::read_to_string(ahead.log_path()).expect("log");
    assert!(log.contains("ERROR") && log.contains("clock"), "{log}");
    println!(
        "clock test: 1 correct and 2 skewed processes (±30 s), {TASKS} every-second tasks and 6 \
         manual runs: {} deliveries, none early, lost or twice",
        deliveries.len()
    );
    for node in [right, ahead, behind] {
        assert_eq!(node.terminate().await, Some(0));
    }
}

/// How many times each request id was delivered.
fn deliveries_per_run(received: &[crate::common::Received]) -> HashMap<String, usize> {
    let mut per_run = HashMap::new();
    for delivery in received {
        *per_run.entry(delivery.request_id.clone()).or_default() += 1;
    }
    per_run
}

/// Sleeps until `fraction` (0-1) into the next whole second.
async fn sleep_into_second(fraction: f64) {
    let now = Utc::now();
    let into = f64::from(now.timestamp_subsec_millis()) / 1000.0;
    let wait = if into < fraction {
        fraction - into
    } else {
        1.0 - into + fraction
    };
    actix_rt::time::sleep(Duration::from_secs_f64(wait)).await;
}

on_each_backend!(a_paused_process_never_sends_twice_on, mariadb: a_paused_process_never_sends_twice, postgres: a_paused_process_never_sends_twice_on_postgres);

/// A process paused for 20 s (SIGSTOP) while it holds runs in flight to a slow executor and
/// runs fired ahead of their second: the other process takes only what was never sent (the
/// runs fired ahead), and the paused one, woken, sends none of those; the runs in flight keep
/// their claims, their replies reach the woken process, and nothing is delivered twice.
async fn a_paused_process_never_sends_twice_on(store: TestStore) {
    let _serial = crate::serial().await;
    const SLOW: usize = 10;
    let dir = tempfile::tempdir().expect("dir");
    let run_id = uuid::Uuid::new_v4().simple().to_string();
    let env = cluster_env(&store);
    let slow = Executor::start(Reply::Slow(Duration::from_secs(3))).await;
    let fast = Executor::start(Reply::Success).await;
    let paused = AxProcess::start(dir.path(), &format!("a-{}", &run_id[..8]), env.clone()).await;
    let api = Api::at(paused.base());
    // Claims longer than the pause: only fencing keeps the paused process from sending the
    // runs it fired ahead, which the other one took.
    let load = every_second_tasks(std::slice::from_ref(&api), 5, "paused", &fast.url, 30_000).await;
    // Ten runs at one second a few seconds ahead, to the slow executor: claims for 40 s.
    let at = Utc::now() + chrono::Duration::seconds(4);
    let cron = format!(
        "{} {} {} * * *",
        at.format("%-S"),
        at.format("%-M"),
        at.format("%-H")
    );
    let mut slow_tasks = Vec::new();
    for i in 0..SLOW {
        let task = api
            .create_task(json!({
                "name": format!("slow-{i}"), "cron": cron, "handlerUrl": slow.url,
                "maxRetry": 0, "timeoutMs": 30_000,
            }))
            .await;
        slow_tasks.push(task["id"].as_i64().expect("id"));
    }
    let deadline = Instant::now() + Duration::from_secs(15);
    while slow.received().len() < SLOW && Instant::now() < deadline {
        actix_rt::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(slow.received().len(), SLOW, "the slow runs went out");
    let other = AxProcess::start(dir.path(), &format!("b-{}", &run_id[..8]), env.clone()).await;
    // Paused while the slow runs are in flight and the next second's runs are fired ahead.
    sleep_into_second(0.7).await;
    paused.signal("STOP");
    let stopped = Utc::now();
    actix_rt::time::sleep(Duration::from_secs(20)).await;
    paused.signal("CONT");
    actix_rt::time::sleep(Duration::from_secs(8)).await;
    let ended = Utc::now();
    assert_eq!(paused.terminate().await, Some(0));
    assert_eq!(other.terminate().await, Some(0));

    let slow_deliveries = slow.received();
    let twice: Vec<_> = deliveries_per_run(&slow_deliveries)
        .into_iter()
        .filter(|(_, n)| *n > 1)
        .collect();
    assert!(
        twice.is_empty(),
        "in-flight runs delivered again: {twice:?}"
    );
    assert_eq!(slow_deliveries.len(), SLOW);
    let db = Db::connect(&store.url(), 2).await.expect("store");
    for task in &slow_tasks {
        let rows = crate::common::rows_of(&db, *task).await;
        assert_eq!(rows.len(), 1, "task {task}: {rows:?}");
        assert_eq!(
            rows[0].status,
            ax_core::run::RunStatus::Success,
            "the reply reached the woken process: {rows:?}"
        );
    }
    let fast_deliveries = fast.received();
    let twice: Vec<_> = deliveries_per_run(&fast_deliveries)
        .into_iter()
        .filter(|(_, n)| *n > 1)
        .collect();
    assert!(twice.is_empty(), "delivered twice: {twice:?}");
    // Every run recorded was delivered, the paused process's fired-ahead ones by the other.
    let delivered: HashSet<&str> = fast_deliveries
        .iter()
        .map(|d| d.request_id.as_str())
        .collect();
    let (mut rows_total, mut late) = (0, 0);
    for task in &load {
        for row in crate::common::rows_of(&db, *task).await {
            let scheduled = row.scheduled_at.and_utc();
            if scheduled > ended - chrono::Duration::seconds(5) {
                continue;
            }
            rows_total += 1;
            assert!(
                delivered.contains(row.request_id.as_str()),
                "undelivered {row:?}"
            );
            if scheduled > stopped && scheduled < stopped + chrono::Duration::seconds(2) {
                late += 1;
            }
        }
    }
    println!(
        "pause test: {SLOW} runs in flight through a 20 s SIGSTOP, each delivered once; \
         {rows_total} every-second runs delivered once ({late} fired just after the pause)"
    );
    slow.stop().await;
    fast.stop().await;
}

on_each_backend!(a_killed_process_runs_fired_ahead_go_out_within_5_s_on, mariadb: a_killed_process_runs_fired_ahead_go_out_within_5_s, postgres: a_killed_process_runs_fired_ahead_go_out_within_5_s_on_postgres);

/// A process killed (`kill -9`) holding runs fired ahead of their second: another process
/// delivers each within 5 s of its second.
async fn a_killed_process_runs_fired_ahead_go_out_within_5_s_on(store: TestStore) {
    let _serial = crate::serial().await;
    let dir = tempfile::tempdir().expect("dir");
    let run_id = uuid::Uuid::new_v4().simple().to_string();
    let env = cluster_env(&store);
    let executor = Executor::start(Reply::Success).await;
    let ids = [format!("a-{}", &run_id[..8]), format!("b-{}", &run_id[..8])];
    let mut nodes = [
        AxProcess::start(dir.path(), &ids[0], env.clone()).await,
        AxProcess::start(dir.path(), &ids[1], env.clone()).await,
    ];
    let apis = [Api::at(nodes[0].base()), Api::at(nodes[1].base())];
    let tasks = every_second_tasks(&apis, 10, "killed", &executor.url, 1000).await;
    actix_rt::time::sleep(Duration::from_secs(3)).await;
    let db = Db::connect(&store.url(), 2).await.expect("store");
    // Killed once the next second's runs are fired ahead (half a second before it): the
    // process holding more of them.
    let mut ahead: Vec<(String, String)> = Vec::new();
    for _ in 0..5 {
        sleep_into_second(0.75).await;
        let now = Utc::now();
        ahead.clear();
        for task in &tasks {
            for row in crate::common::rows_of(&db, *task).await {
                if row.scheduled_at.and_utc() > now {
                    ahead.push((
                        row.fired_by.to_string(),
                        row.request_id.as_str().to_string(),
                    ));
                }
            }
        }
        if !ahead.is_empty() {
            break;
        }
    }
    let held_by = |id: &str| ahead.iter().filter(|(by, _)| by == id).count();
    let killed = usize::from(held_by(&ids[1]) > held_by(&ids[0]));
    nodes[killed].kill();
    let ahead: Vec<String> = ahead
        .into_iter()
        .filter(|(by, _)| *by == ids[killed])
        .map(|(_, request)| request)
        .collect();
    assert!(!ahead.is_empty(), "a process held runs fired ahead");
    let [first, second] = nodes;
    let other = if killed == 0 { second } else { first };
    actix_rt::time::sleep(Duration::from_secs(9)).await;
    assert_eq!(other.terminate().await, Some(0));
    let deliveries = executor.received();
    let per_run = deliveries_per_run(&deliveries);
    let mut worst = 0;
    for request in &ahead {
        let delivery = deliveries
            .iter()
            .find(|d| d.request_id == *request)
            .unwrap_or_else(|| panic!("{request} fired ahead by the killed process, never sent"));
        let late = delivery.wall.timestamp_millis() - scheduled_second(delivery) * 1000;
        worst = worst.max(late);
        assert!(
            (0..=5_000).contains(&late),
            "{request} delivered {late} ms after its second"
        );
        assert_eq!(per_run[request], 1, "{request} delivered once");
    }
    println!(
        "kill test: {} runs fired ahead by the killed process, delivered by the other at most \
         {worst} ms after their second",
        ahead.len()
    );
    executor.stop().await;
}
