//! Exact recovery, measured the way an operator would: 20 every-second tasks, an executor that
//! answers SUCCESS at once, and ax killed with `kill -9` four times, 2-7 s apart, restarted after
//! 0.5-3 s with the same instance id. Afterwards:
//! - a run is delivered again only if it was in flight at a kill: at most one per task per
//!   kill, and never one whose reply reached ax more than a second before the kill;
//! - every delivered run is final (SUCCESS), across restarts;
//! - a run due before a kill and not delivered before it is delivered within 2 s of the
//!   restart, and nothing else is late.

use std::collections::HashMap;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::json;

use crate::common::{
    on_each_backend, redis_url, Api, AxProcess, Executor, Received, Reply, TestStore, XorShift,
};

const TASKS: usize = 20;
const KILLS: usize = 4;

/// One kill: when the process died and when its successor was healthy again.
struct Kill {
    at: DateTime<Utc>,
    back: DateTime<Utc>,
}

fn scheduled_at(d: &Received) -> DateTime<Utc> {
    d.body["scheduledAt"]
        .as_str()
        .and_then(|s| DateTime::parse_from_rfc3339(s).ok())
        .map(|t| t.with_timezone(&Utc))
        .expect("scheduledAt")
}

async fn kill_loop(store: TestStore) {
    // On MariaDB with Redis, as a cluster runs; on SQLite alone.
    let redis = store.is_shared();
    let seed = Utc::now().timestamp_nanos_opt().unwrap_or(1) as u64 | 1;
    println!("kill schedule seed: {seed}");
    let mut rng = XorShift(seed);
    let dir = tempfile::tempdir().expect("dir");
    let mut env = vec![("AX_STORE_URL".to_string(), store.url())];
    if redis {
        env.push(("AX_REDIS_URL".to_string(), redis_url()));
    }
    // A short keep-alive, as many executors' servers have: a connection ax reuses may be closed
    // by the executor at that moment.
    let executor = Executor::start_keeping_alive(Reply::Success, Duration::from_secs(1)).await;
    let mut ax = AxProcess::start(dir.path(), "kill-loop", env).await;
    let api = Api::at(ax.base());
    for i in 0..TASKS {
        api.create_task(json!({
            "name": format!("loop-{i}"), "cron": "* * * * * *", "handlerUrl": executor.url,
        }))
        .await;
    }
    let mut kills = Vec::new();
    for _ in 0..KILLS {
        actix_rt::time::sleep(rng.between_ms(2000, 7000)).await;
        ax.kill();
        let at = Utc::now();
        actix_rt::time::sleep(rng.between_ms(500, 3000)).await;
        ax.restart().await;
        kills.push(Kill {
            at,
            back: Utc::now(),
        });
    }
    actix_rt::time::sleep(Duration::from_secs(4)).await;
    let deliveries = executor.received();
    let ended = Utc::now();
    // A reply has 2 s to be recorded.
    actix_rt::time::sleep(Duration::from_secs(2)).await;

    // Each run's deliveries, in order.
    let mut by_run: HashMap<&str, Vec<&Received>> = HashMap::new();
    for d in &deliveries {
        by_run.entry(d.request_id.as_str()).or_default().push(d);
    }
    let kill_before = |t: DateTime<Utc>| kills.iter().rposition(|k| k.at <= t);
    let mut duplicates = 0;
    let mut per_task_kill: HashMap<(i64, usize), usize> = HashMap::new();
    let mut early_replies_redelivered = Vec::new();
    let mut late = Vec::new();
    for runs in by_run.values() {
        let first = runs[0];
        let scheduled = scheduled_at(first);
        for again in &runs[1..] {
            duplicates += 1;
            let Some(k) = kill_before(again.wall) else {
                early_replies_redelivered
                    .push(format!("{} redelivered without a kill", again.request_id));
                continue;
            };
            let task = again.body["taskId"].as_i64().unwrap_or(0);
            *per_task_kill.entry((task, k)).or_default() += 1;
            if first.wall < kills[k].at - chrono::Duration::seconds(1) {
                early_replies_redelivered.push(format!(
                    "{}: answered {} before kill {k}, delivered again",
                    first.request_id,
                    kills[k].at - first.wall
                ));
            }
        }
        // Due before a kill and first delivered after it: within 2 s of the restart; any
        // other run within a second of its time.
        let lateness = first.wall - scheduled;
        let deadline = match kills
            .iter()
            .find(|k| scheduled < k.back && first.wall >= k.at)
        {
            Some(k) => k.back + chrono::Duration::seconds(2),
            None => scheduled + chrono::Duration::seconds(1),
        };
        if first.wall > deadline {
            late.push(format!(
                "{} scheduled {scheduled} delivered {lateness} late",
                first.request_id
            ));
        }
    }
    let worst = per_task_kill.values().copied().max().unwrap_or(0);

    // Every delivered run is final, whatever the restarts did to it.
    let mut not_final = Vec::new();
    for request_id in by_run.keys() {
        let (status, run) = api.get(&format!("/api/instances/{request_id}")).await;
        if status != 200 || run["status"] != "SUCCESS" {
            let times: Vec<String> = by_run[request_id]
                .iter()
                .map(|d| d.wall.to_string())
                .collect();
            not_final.push(format!(
                "{request_id}: {status} {run} delivered at {times:?}"
            ));
        }
    }
    println!(
        "kill loop ({}): {KILLS} kills, {} deliveries of {} runs, {duplicates} duplicate \
         deliveries (at most {worst} per task per kill), {} redelivered after an early reply, \
         {} late, {} not final, ran until {ended}",
        if redis { "mariadb+redis" } else { "sqlite" },
        deliveries.len(),
        by_run.len(),
        early_replies_redelivered.len(),
        late.len(),
        not_final.len(),
    );
    assert!(worst <= 1, "more than one duplicate per task per kill");
    assert!(
        early_replies_redelivered.is_empty(),
        "{early_replies_redelivered:#?}"
    );
    assert!(
        not_final.is_empty(),
        "{not_final:#?} kills {:?} log {}",
        kills
            .iter()
            .map(|k| (k.at.to_string(), k.back.to_string()))
            .collect::<Vec<_>>(),
        std::fs::read_to_string(ax.log_path()).unwrap_or_default()
    );
    assert!(late.is_empty(), "{late:#?}");
    // No attempt failed inside ax (a connection of its HTTP client lost): every failure would
    // be charged to a healthy executor.
    let log = std::fs::read_to_string(ax.log_path()).unwrap_or_default();
    let failed: Vec<&str> = log.lines().filter(|l| l.contains("failed")).collect();
    assert!(failed.is_empty(), "{failed:#?}");
    assert_eq!(ax.terminate().await, Some(0), "a clean shutdown exits 0");
    executor.stop().await;
}

on_each_backend!(
    kill_loop,
    sqlite: kill_loop_on_sqlite,
    mariadb: kill_loop_on_mariadb_with_redis,
    postgres: kill_loop_on_postgres
);
