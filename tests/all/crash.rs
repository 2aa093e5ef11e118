//! Crash recovery: ax under a steady load of every-second tasks is killed with `kill -9` at
//! random moments and restarted. Afterwards every run outside the outages has exactly one row
//! and was delivered; each outage shows, per task, exactly one catch-up run (or one MISSED row
//! where the outage exceeded the task's misfire threshold); no (task, second) has two rows; runs
//! committed but not dispatched at a kill were dispatched after the restart; and every delivery
//! of a run carried the same request id.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use ax_core::run::RunStatus;
use ax_store::{from_db, Db};
use chrono::{DateTime, Utc};
use serde_json::json;

use crate::common::{
    on_each_backend, one_row_per_second, redis_url, Api, AxProcess, Executor, Reply, TestStore,
    XorShift,
};

const TASKS: usize = 8;
const KILLS: usize = 3;
/// Longer than the missed-run grace (2 s) plus the time a run is committed ahead, so each
/// outage is a stall the policy collapses.
const OUTAGE: Duration = Duration::from_millis(4500);

/// One outage: from the kill to the moment the restarted ax was healthy.
struct Outage {
    killed: DateTime<Utc>,
    back: DateTime<Utc>,
}

async fn crash_and_recover(store: TestStore) {
    // On MariaDB with Redis, as a cluster runs; on SQLite alone.
    let redis = store.is_shared();
    let seed = Utc::now().timestamp_nanos_opt().unwrap_or(1) as u64 | 1;
    println!("kill schedule seed: {seed}");
    let mut rng = XorShift(seed);
    let dir = tempfile::tempdir().expect("dir");
    let mut env = vec![
        ("AX_STORE_URL".to_string(), store.url()),
        ("AX_STORE_BATCH_INTERVAL_MS".to_string(), "100".to_string()),
    ];
    if redis {
        env.push(("AX_REDIS_URL".to_string(), redis_url()));
    }
    let executor = Executor::start(Reply::Success).await;
    let mut ax = AxProcess::start(dir.path(), "crash-node", env).await;
    let api = Api::at(ax.base());
    // Half the tasks catch up after an outage; the other half's threshold (1 s) is shorter
    // than any outage, so they record it as MISSED.
    let mut threshold = HashMap::new();
    for i in 0..TASKS {
        let misfire = if i % 2 == 0 { 300 } else { 1 };
        let task = api
            .create_task(json!({
                "name": format!("crash-{i}"), "cron": "* * * * * *", "handlerUrl": executor.url,
                "maxRetry": 0, "timeoutMs": 2000, "misfireThresholdSecs": misfire,
            }))
            .await;
        threshold.insert(task["id"].as_i64().expect("id"), misfire);
    }

    let mut outages = Vec::new();
    for _ in 0..KILLS {
        actix_rt::time::sleep(rng.between_ms(2000, 4000)).await;
        ax.kill();
        let killed = Utc::now();
        actix_rt::time::sleep(OUTAGE).await;
        ax.restart().await;
        outages.push(Outage {
            killed,
            back: Utc::now(),
        });
    }
    actix_rt::time::sleep(Duration::from_secs(4)).await;
    assert_eq!(ax.terminate().await, Some(0), "a clean shutdown exits 0");
    let ended = Utc::now();

    let db = Db::connect(&store.url(), 2).await.expect("store");
    let deliveries = executor.received();
    let mut delivered: HashMap<String, usize> = HashMap::new();
    let mut ids_of_run: HashMap<(i64, String), HashSet<String>> = HashMap::new();
    for d in &deliveries {
        *delivered.entry(d.request_id.clone()).or_default() += 1;
        let run = (
            d.body["taskId"].as_i64().unwrap_or(0),
            d.body["scheduledAt"].to_string(),
        );
        ids_of_run
            .entry(run)
            .or_default()
            .insert(d.request_id.clone());
    }
    assert!(
        ids_of_run.values().all(|ids| ids.len() == 1),
        "one request id per run"
    );

    let (mut rows_total, mut catch_ups, mut missed) = (0, 0, 0);
    for (&task_id, &misfire) in &threshold {
        let rows = crate::common::rows_of(&db, task_id).await;
        rows_total += rows.len();
        let by_second = one_row_per_second(task_id, &rows);
        for row in &rows {
            if row.status == RunStatus::Missed {
                continue;
            }
            assert_eq!(row.status, RunStatus::Success, "task {task_id}: {row:?}");
            assert!(
                delivered.contains_key(row.request_id.as_str()),
                "task {task_id}: undelivered {row:?}"
            );
        }
        // Between two rows a second apart nothing is missing; a longer gap must be an outage,
        // bridged by exactly one late row (the catch-up, or MISSED).
        let seconds: Vec<i64> = by_second.keys().copied().collect();
        for pair in seconds.windows(2) {
            let (a, b) = (pair[0], pair[1]);
            if b - a == 1 {
                continue;
            }
            let row = by_second[&a];
            let late = (row.trigger_at - row.scheduled_at).num_seconds() > 2;
            let outage = outages
                .iter()
                .find(|o| o.killed.timestamp() - 1 <= a && b <= o.back.timestamp() + 3);
            assert!(
                late && outage.is_some(),
                "task {task_id}: seconds {a}..{b} lost outside an outage (row {row:?})"
            );
            let want = if misfire == 1 {
                RunStatus::Missed
            } else {
                RunStatus::Success
            };
            assert_eq!(row.status, want, "task {task_id}: catch-up row {row:?}");
            if want == RunStatus::Missed {
                missed += 1
            } else {
                catch_ups += 1
            }
        }
        // Each outage left exactly one such bridge per task.
        for outage in &outages {
            let bridges = rows
                .iter()
                .filter(|r| (r.trigger_at - r.scheduled_at).num_seconds() > 2)
                .filter(|r| {
                    let at = from_db(r.scheduled_at);
                    outage.killed - chrono::Duration::seconds(1) <= at && at <= outage.back
                })
                .count();
            assert_eq!(bridges, 1, "task {task_id}: one catch-up per outage");
        }
        let last = *seconds.last().expect("rows");
        assert!(
            last >= ended.timestamp() - 3,
            "task {task_id} fired until the end"
        );
    }
    let duplicate_deliveries: usize = delivered.values().map(|n| n - 1).sum();
    println!(
        "crash test ({}): {KILLS} kills, {rows_total} rows, {} deliveries, {duplicate_deliveries} \
         duplicate deliveries, {catch_ups} catch-up runs, {missed} MISSED, 0 duplicate rows",
        if redis { "mariadb+redis" } else { "sqlite" },
        deliveries.len()
    );
    executor.stop().await;
}

on_each_backend!(
    crash_and_recover,
    sqlite: kill_9_on_sqlite,
    mariadb: kill_9_on_mariadb_with_redis,
    postgres: kill_9_on_postgres
);
