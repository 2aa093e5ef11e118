//! Alerts through `kill -9`: two ax processes on MariaDB and Redis send the alerts of failing
//! every-second tasks to a slow receiver while one of them is killed and restarted at random
//! moments. Afterwards every failed run was told exactly once by id (a resend after a kill
//! carries the same id and body), nothing is left pending; and when the killed process stays
//! down, the other one tells that it left.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use ax_core::run::RunStatus;
use ax_store::Db;
use chrono::Utc;
use serde_json::json;

use crate::common::{
    on_each_backend, redis_url, rows_of, unique_name, Api, AxProcess, Executor, Reply, TestStore,
    XorShift,
};

const TASKS: usize = 4;
const KILLS: usize = 3;

/// The config file both processes read: one webhook channel; every failure alerts (no
/// silence), so each failed run is one alert.
fn config_file(dir: &std::path::Path, hook: &str) {
    let yaml = format!(
        "alerts:\n  channels:\n    - {{name: ops-hook, kind: webhook, url: \"{hook}\"}}\n  \
         default:\n    events: [FAILED, PROCESS_LEFT]\n    channels: [ops-hook]\n    \
         silenceSecs: 0\n"
    );
    std::fs::create_dir_all(dir.join("config")).expect("config dir");
    std::fs::write(dir.join("config/ax.yaml"), yaml).expect("config file");
}

on_each_backend!(alerts_survive_kill_9_and_a_process_gone_is_told_on, mariadb: alerts_survive_kill_9_and_a_process_gone_is_told, postgres: alerts_survive_kill_9_and_a_process_gone_is_told_on_postgres);

async fn alerts_survive_kill_9_and_a_process_gone_is_told_on(store: TestStore) {
    let seed = Utc::now().timestamp_nanos_opt().unwrap_or(1) as u64 | 1;
    println!("kill schedule seed: {seed}");
    let mut rng = XorShift(seed);
    // Slow enough that sends are in flight when a process is killed.
    let hook = Executor::start(Reply::Slow(Duration::from_millis(300))).await;
    let dir = tempfile::tempdir().expect("dir");
    config_file(dir.path(), &format!("{}hook", hook.base()));
    let env = vec![
        ("AX_STORE_URL".to_string(), store.url()),
        ("AX_REDIS_URL".to_string(), redis_url()),
        // A send's claim lasts twice this: a killed process's claims lapse within seconds.
        ("AX_ALERT_SEND_TIMEOUT_MS".to_string(), "2000".into()),
    ];
    // Names of their own: a process of an earlier run, killed, may still be in the cluster.
    let (a, b) = (unique_name("alerts-a"), unique_name("alerts-b"));
    let mut killed = AxProcess::start(dir.path(), &a, env.clone()).await;
    let survivor = AxProcess::start(dir.path(), &b, env).await;
    let gone = format!("process {a}");
    let api = Api::at(survivor.base());
    let failing = Executor::start(Reply::FailNoRetry).await;
    let mut ids = Vec::new();
    for i in 0..TASKS {
        let task = api
            .create_task(
                json!({"name": format!("crash-alert-{i}"), "cron": "* * * * * *",
                "handlerUrl": failing.url, "maxRetry": 0, "timeoutMs": 2000}),
            )
            .await;
        ids.push(task["id"].as_i64().expect("id"));
    }
    for _ in 0..KILLS {
        actix_rt::time::sleep(rng.between_ms(1500, 3500)).await;
        killed.kill();
        actix_rt::time::sleep(rng.between_ms(200, 1500)).await;
        killed.restart().await;
    }
    actix_rt::time::sleep(Duration::from_secs(2)).await;
    // No more failures from here (a pause would mute the runs still in flight).
    let healthy = Executor::start(Reply::Success).await;
    for id in &ids {
        let fixed = json!({"handlerUrl": healthy.url});
        let (status, _) = api
            .call("PATCH", &format!("/api/tasks/{id}"), Some(fixed))
            .await;
        assert_eq!(status, 200);
    }
    // Killed for good: its heartbeat expires, and the survivor tells.
    killed.kill();
    let deadline = Instant::now() + Duration::from_secs(60);
    let left = loop {
        let left = hook
            .received()
            .into_iter()
            .find(|r| r.body["event"] == "PROCESS_LEFT" && r.body["subject"] == gone.as_str());
        if left.is_some() || Instant::now() > deadline {
            break left;
        }
        actix_rt::time::sleep(Duration::from_millis(200)).await;
    };
    assert!(left.is_some(), "a PROCESS_LEFT alert about {a}");
    let pending = loop {
        let (_, page) = api.get("/api/alerts?status=pending").await;
        let empty = page["items"].as_array().is_some_and(Vec::is_empty);
        if empty || Instant::now() > deadline {
            break page;
        }
        actix_rt::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(pending["items"], json!([]), "nothing left pending");
    actix_rt::time::sleep(Duration::from_secs(1)).await;

    // Every failed run told, by one id; an id told twice (a resend after a kill) says the same.
    let mut bodies: HashMap<String, Vec<serde_json::Value>> = HashMap::new();
    for received in hook.received() {
        let id = received.body["id"].as_str().unwrap_or_default().to_string();
        bodies.entry(id).or_default().push(received.body);
    }
    let resent = bodies.values().filter(|told| told.len() > 1).count();
    for told in bodies.values_mut() {
        // The link is to the console of the process that sent it (also at the end of `text`).
        for body in told.iter_mut() {
            if let (Some(link), Some(text)) = (body["link"].as_str(), body["text"].as_str()) {
                body["text"] = json!(text.replace(link, "{link}"));
            }
            body["link"] = serde_json::Value::Null;
        }
        assert!(told.iter().all(|body| body == &told[0]), "{told:?}");
    }
    let db = Db::connect(&store.url(), 2).await.expect("store");
    let mut failed_runs = 0;
    for id in &ids {
        let failed: Vec<String> = rows_of(&db, *id)
            .await
            .into_iter()
            .filter(|row| row.status == RunStatus::Failed)
            .map(|row| row.request_id.to_string())
            .collect();
        failed_runs += failed.len();
        for request_id in failed {
            let alerts: Vec<&String> = bodies
                .iter()
                .filter(|(_, told)| told[0]["requestId"] == request_id.as_str())
                .map(|(id, _)| id)
                .collect();
            assert_eq!(alerts.len(), 1, "run {request_id} told by one alert id");
        }
    }
    println!(
        "{failed_runs} failed runs, {} alert ids, {resent} resent after a kill",
        bodies.len()
    );
    assert!(
        failed_runs >= TASKS * 4,
        "enough runs failed: {failed_runs}"
    );
    assert!(
        resent <= KILLS * 50,
        "resends only of alerts in flight at a kill: {resent}"
    );
}
