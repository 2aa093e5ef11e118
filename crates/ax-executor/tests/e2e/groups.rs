//! Executor groups: registration with a token, heartbeats, removal at shutdown; shards of a
//! broadcast task over two members.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use ax_executor::{Failed, Run};
use chrono::{Timelike, Utc};
use serde_json::{json, Value};

use crate::harness::{eventually, executor, free_port, Ax, AxOptions, Served, EXECUTOR_TOKEN};

/// The member `url` of group `billing` as ax lists it, if there.
async fn member(ax: &Ax, url: &str) -> Option<Value> {
    let (status, group) = ax.get("/api/executors/billing").await;
    if status == 404 {
        return None;
    }
    assert_eq!(status, 200, "{group}");
    group["members"]
        .as_array()
        .into_iter()
        .flatten()
        // ax keeps URLs normalised: `http://127.0.0.1:9000/`.
        .find(|member| member["url"].as_str().map(|u| u.trim_end_matches('/')) == Some(url))
        .cloned()
}

fn live(member: &Option<Value>) -> bool {
    member
        .as_ref()
        .is_some_and(|m| m["state"] != "GONE" && m["registered"] == true)
}

#[actix_web::test]
async fn an_executor_registers_heartbeats_and_leaves_at_shutdown() {
    // A member not heard from for 3 s is dropped: only heartbeats keep it.
    let ax = Ax::start_with(AxOptions {
        tokens: true,
        heartbeat_and_ttl_secs: Some((1, 3)),
    })
    .await;
    let port = free_port();
    let url = format!("http://127.0.0.1:{port}");
    let served = Served::start_on(
        port,
        executor(&ax)
            .token(EXECUTOR_TOKEN)
            .group("billing", &url)
            .capacity(4)
            .handle("/reconcile", |run: Run<Value>| async move {
                Ok::<_, Failed>(format!("reconciled {}", run.params["region"]))
            }),
    )
    .await;
    let joined = eventually(
        Duration::from_secs(20),
        "the member to register",
        || async {
            let found = member(&ax, &url).await;
            live(&found).then_some(found)
        },
    )
    .await;
    assert_eq!(
        joined.as_ref().map(|m| m["capacity"].clone()),
        Some(json!(4))
    );

    // Three TTLs later it is still a member, and tasks naming the group reach it.
    tokio::time::sleep(Duration::from_secs(9)).await;
    let kept = member(&ax, &url).await;
    assert!(live(&kept), "heartbeats keep it: {kept:?}");
    let task = ax
        .task(
            json!({"executor": {"group": "billing", "path": "/reconcile"},
            "params": {"region": "eu"}}),
        )
        .await;
    let run = ax.ended(&ax.trigger(task).await).await;
    assert_eq!(run["status"], "SUCCESS", "{run}");
    assert_eq!(run["message"], "reconciled \"eu\"", "{run}");
    assert_eq!(
        run["member"].as_str().map(|m| m.trim_end_matches('/')),
        Some(url.as_str()),
        "{run}"
    );

    served.shutdown().await.expect("a clean shutdown");
    let left = member(&ax, &url).await;
    assert!(!live(&left), "removed at shutdown: {left:?}");
}

#[actix_web::test]
async fn a_broadcast_task_gives_each_member_its_shard() {
    let ax = Ax::start().await;
    let seen = Arc::new(Mutex::new(Vec::new()));
    let mut served = Vec::new();
    for _ in 0..2 {
        let port = free_port();
        let url = format!("http://127.0.0.1:{port}");
        let seen = seen.clone();
        let executor =
            executor(&ax)
                .group("billing", &url)
                .handle("/rows", move |run: Run<Value>| {
                    let seen = seen.clone();
                    async move {
                        let rows: Vec<u32> = (0..10)
                            .filter(|id| id % run.shard_total == run.shard_index)
                            .collect();
                        if let Ok(mut seen) = seen.lock() {
                            seen.push((run.shard_index, run.shard_total));
                        }
                        Ok::<_, Failed>(format!("rows {rows:?}"))
                    }
                });
        served.push((Served::start_on(port, executor).await, url));
    }
    for (_, url) in &served {
        eventually(
            Duration::from_secs(20),
            "both members to register",
            || async { live(&member(&ax, url).await).then_some(()) },
        )
        .await;
    }
    // A manual run of a broadcast task is one run: shards come from a scheduled fire.
    let at = Utc::now() + chrono::Duration::seconds(4);
    let cron = format!("{} {} {} * * *", at.second(), at.minute(), at.hour());
    let task = ax
        .task(json!({"cron": cron, "timeZone": "UTC",
            "executor": {"group": "billing", "path": "/rows", "routing": "BROADCAST"}}))
        .await;
    let runs = eventually(Duration::from_secs(30), "two finished shards", || async {
        let (_, list) = ax.get(&format!("/api/tasks/{task}/instances")).await;
        let items = list["items"].as_array().cloned().unwrap_or_default();
        let done = items.len() == 2 && items.iter().all(|run| run["status"] == "SUCCESS");
        done.then_some(items)
    })
    .await;
    let mut shards: Vec<(i64, i64, String)> = runs
        .iter()
        .map(|run| {
            let field = |name: &str| run[name].as_i64().unwrap_or(-1);
            let message = run["message"].as_str().unwrap_or("").to_string();
            (field("shardIndex"), field("shardTotal"), message)
        })
        .collect();
    shards.sort();
    assert_eq!(
        shards,
        [
            (0, 2, "rows [0, 2, 4, 6, 8]".to_string()),
            (1, 2, "rows [1, 3, 5, 7, 9]".to_string())
        ]
    );
    let mut handled = seen.lock().map(|seen| seen.clone()).unwrap_or_default();
    handled.sort();
    assert_eq!(handled, [(0, 2), (1, 2)]);
    for (served, _) in served {
        served.shutdown().await.expect("a clean shutdown");
    }
}
