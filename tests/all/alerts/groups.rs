//! `crates/ax-core/src/alerting/group.rs` and the outbox's lanes, end to end: hundreds of registered members
//! whose heartbeats stop make a few alerts per group naming how many and the first of them,
//! not one per member; and meanwhile every run that fails is told within 5 s of its end.

use std::time::{Duration, Instant};

use ax_core::alerting::ChannelKind;
use chrono::{DateTime, Utc};
use futures_util::future::join_all;
use serde_json::{json, Value};

use crate::alerts::webhook::{channel, with_channels};
use crate::common::{
    on_each_backend, start_ax, unique_name, Api, Executor, Received, Reply, TestStore,
};

/// Members per group: the 1,000, split over two groups.
const GROUPS: [usize; 2] = [700, 300];
/// How long a group's member events gather into one alert.
const WINDOW_SECS: i64 = 5;

/// Registers `n` members in `group` through the API, 50 at a time; their URLs, in order.
async fn register(api: &Api, group: &str, base: &str, n: usize) -> Vec<String> {
    let urls: Vec<String> = (0..n).map(|i| format!("{base}m{i}")).collect();
    let path = format!("/api/executors/{group}/members");
    // The first alone: it creates the group, which the others then join.
    let (status, body) = api.post(&path, json!({ "url": urls[0] })).await;
    assert_eq!(status, 201, "{body}");
    for chunk in urls[1..].chunks(50) {
        let posts = chunk
            .iter()
            .map(|url| api.post(&path, json!({ "url": url })));
        for (status, body) in join_all(posts).await {
            assert_eq!(status, 201, "{body}");
        }
    }
    urls
}

fn of_event<'r>(received: &'r [Received], event: &str) -> Vec<&'r Received> {
    received
        .iter()
        .filter(|r| r.body["event"] == event)
        .collect()
}

fn time(value: &Value) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(value.as_str()?)
        .ok()
        .map(|t| t.with_timezone(&Utc))
}

async fn members_gone_fold_and_runs_are_told_at_once(store: TestStore) {
    let hook = Executor::start(Reply::Success).await;
    // A channel slow to take each alert: what the outbox holds for it must not hold runs.
    let slow = Executor::start(Reply::Slow(Duration::from_secs(3))).await;
    let mut config = with_channels(
        &store,
        vec![
            channel(
                "ops-hook",
                ChannelKind::Webhook,
                format!("{}hook", hook.base()),
            ),
            channel(
                "slow-hook",
                ChannelKind::Webhook,
                format!("{}slow", slow.base()),
            ),
        ],
    );
    // Every failure alerts (no silence), so every failed run is a FAILED alert to time.
    config.alerts.default_rule.silence_secs = 0;
    config.alerts.group_window_secs = WINDOW_SECS;
    config.executors.member_ttl_secs = 4;
    let ax = start_ax(&config).await;
    let api = Api::new(&ax);

    let failing = Executor::start(Reply::FailNoRetry).await;
    let task = api
        .create_task(
            json!({"name": unique_name("failing"), "cron": "* * * * * *",
            "handlerUrl": failing.url, "maxRetry": 0}),
        )
        .await;
    let task_id = task["id"].as_i64().expect("id");

    let member_base = Executor::start(Reply::Success).await.base();
    let groups: Vec<String> = GROUPS.iter().map(|_| unique_name("billing")).collect();
    let (mut urls, mut spreads) = (Vec::new(), Vec::new());
    for (group, n) in groups.iter().zip(GROUPS) {
        let started = Instant::now();
        urls.push(register(&api, group, &member_base, n).await);
        spreads.push(started.elapsed());
    }
    // None of them beats again: dropped after the TTL, told once their group's window closes.
    let deadline = Instant::now() + Duration::from_secs(60);
    let total: usize = GROUPS.iter().sum();
    let counted = |received: &[Received]| -> usize {
        of_event(received, "MEMBER_UNHEALTHY")
            .iter()
            .map(|r| r.body["count"].as_u64().unwrap_or(0) as usize)
            .sum()
    };
    while counted(&hook.received()) < total && Instant::now() < deadline {
        actix_rt::time::sleep(Duration::from_millis(200)).await;
    }
    // Runs fail on after the last member alert: those ending until 5 s before now are timed.
    actix_rt::time::sleep(Duration::from_secs(6)).await;
    let received = hook.received();
    let timed_until = Utc::now() - chrono::Duration::seconds(5);

    let unhealthy = of_event(&received, "MEMBER_UNHEALTHY");
    assert_eq!(
        counted(&received),
        total,
        "every member told: {unhealthy:?}"
    );
    for ((group, urls), spread) in groups.iter().zip(&urls).zip(&spreads) {
        let told: Vec<&&Received> = unhealthy
            .iter()
            .filter(|r| r.body["subject"] == format!("members of {group}"))
            .collect();
        // Members go as they came, over the time their registration took: one alert per
        // window they span (and one for the window in flight), not one per member.
        let windows = 2 + spread.as_secs() / WINDOW_SECS as u64;
        assert!(
            told.len() as u64 <= windows,
            "{group}: {} alerts for {} members registered over {spread:?}",
            told.len(),
            urls.len()
        );
        let alert = &told
            .first()
            .unwrap_or_else(|| panic!("{group}: {unhealthy:?}"))
            .body;
        let count = alert["count"].as_u64().expect("count");
        let message = alert["message"].as_str().unwrap_or("");
        let named = message
            .strip_prefix(&format!("{count} members of {group} unhealthy: "))
            .and_then(|named| named.strip_suffix(", …"))
            .unwrap_or_else(|| panic!("names the count and the first members: {alert}"));
        let named: Vec<&str> = named.split(", ").collect();
        assert_eq!(named.len(), ax_core::alerting::FIRST_NAMED, "{alert}");
        assert!(
            named.iter().all(|url| urls.iter().any(|u| u == url)),
            "{alert}"
        );
        assert_eq!(alert["text"], format!("MEMBER_UNHEALTHY {message}"));
    }

    // Every run that failed meanwhile was told within 5 s of its end.
    let failed: Vec<&Received> = of_event(&received, "FAILED");
    let runs = api.instances(task_id).await;
    let ended: Vec<(&str, DateTime<Utc>)> = runs
        .iter()
        .filter(|run| run["status"] == "FAILED")
        .filter_map(|run| Some((run["requestId"].as_str()?, time(&run["finishedAt"])?)))
        .collect();
    let mut timed = 0;
    for (request_id, finished) in ended.iter().filter(|(_, at)| *at <= timed_until) {
        let told = failed
            .iter()
            .find(|r| r.body["requestId"] == *request_id)
            .unwrap_or_else(|| panic!("run {request_id} ended {finished} was not told"));
        let after = told.wall - *finished;
        assert!(
            after <= chrono::Duration::seconds(5),
            "run {request_id} told {} ms after its end",
            after.num_milliseconds()
        );
        timed += 1;
    }
    assert!(
        timed >= 10,
        "runs failed before and while members went: {timed}"
    );
    ax.shutdown().await;
}

on_each_backend!(
    members_gone_fold_and_runs_are_told_at_once,
    sqlite: members_gone_fold_and_runs_are_told_at_once_on_sqlite,
    mariadb: members_gone_fold_and_runs_are_told_at_once_on_mariadb,
    postgres: members_gone_fold_and_runs_are_told_at_once_on_postgres
);
