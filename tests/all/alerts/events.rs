//! The events beside a run's failure: a task's own rule, a run dispatched late (`LAG`), an
//! executor member gone and back, and Redis and the store out of reach (through proxies in
//! front of the shared servers) and back.

use std::time::{Duration, Instant};

use ax_core::alerting::ChannelKind;
use serde_json::{json, Value};

use crate::alerts::webhook::{channel, with_channels};
use crate::common::{
    host_port, on_each_backend, redis_database, redis_server, start_ax, unique_name, Api, Executor,
    Proxy, Received, Reply, TestStore,
};

/// The alerts a receiver got whose `event` is `event`, once there are `n` (or the time is up).
async fn told(receiver: &Executor, event: &str, n: usize, within: Duration) -> Vec<Received> {
    let deadline = Instant::now() + within;
    loop {
        let found: Vec<Received> = receiver
            .received()
            .into_iter()
            .filter(|r| r.body["event"] == event)
            .collect();
        if found.len() >= n || Instant::now() > deadline {
            return found;
        }
        actix_rt::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A task's own rule picks its channel over the default's; a rule naming an unknown channel
/// is refused, named `alerts.channels`; a run dispatched later than the task's `alertLagMs`
/// alerts `LAG`.
#[actix_rt::test(system = "crate::common::TestSystem")]
async fn a_tasks_own_rule_applies_and_a_late_dispatch_alerts_lag() {
    let store = TestStore::sqlite();
    let (hook, own) = (
        Executor::start(Reply::Success).await,
        Executor::start(Reply::Success).await,
    );
    let mut config = with_channels(
        &store,
        vec![
            channel(
                "ops-hook",
                ChannelKind::Webhook,
                format!("{}hook", hook.base()),
            ),
            channel("own", ChannelKind::Webhook, format!("{}own", own.base())),
        ],
    );
    config.alerts.default_rule.channels = vec!["ops-hook".into()];
    // One call at a time to the slow executor: the second run of a second waits for the first.
    config.dispatch.max_in_flight_per_host = 1;
    let ax = start_ax(&config).await;
    let api = Api::new(&ax);

    let failing = Executor::start(Reply::FailNoRetry).await;
    let body = |rule: Value| {
        json!({"name": unique_name("own-rule"), "cron": "* * * * * *",
            "handlerUrl": failing.url, "maxRetry": 0, "alerts": rule})
    };
    let (status, refused) = api
        .post("/api/tasks", body(json!({"channels": ["nope"]})))
        .await;
    assert_eq!(
        (status, refused["error"]["field"].as_str()),
        (400, Some("alerts.channels")),
        "{refused}"
    );
    let (status, refused) = api.post("/api/tasks", body(json!({"threshold": 0}))).await;
    assert_eq!(
        (status, refused["error"]["field"].as_str()),
        (400, Some("alerts.threshold")),
        "{refused}"
    );
    let task = api
        .create_task(body(json!({"channels": ["own"], "events": ["FAILED"]})))
        .await;
    assert_eq!(task["alerts"]["channels"], json!(["own"]), "{task}");
    let on_own = told(&own, "FAILED", 1, Duration::from_secs(10)).await;
    assert_eq!(on_own[0].body["taskId"], task["id"]);
    let id = task["id"].as_i64().expect("id");
    api.call("POST", &format!("/api/tasks/{id}/pause"), None)
        .await;
    assert!(
        hook.received()
            .iter()
            .all(|r| r.body["taskId"] != task["id"]),
        "the task's own rule, not the default"
    );

    // Two tasks due in the same second on an executor taking one call at a time for 1.5 s:
    // one of them is dispatched late.
    let slow = Executor::start(Reply::Slow(Duration::from_millis(1500))).await;
    let mut lagging = Vec::new();
    for _ in 0..2 {
        let task = api
            .create_task(
                json!({"name": unique_name("lagging"), "cron": "*/4 * * * * *",
                "handlerUrl": slow.url, "timeoutMs": 10000, "alertLagMs": 1000}),
            )
            .await;
        assert_eq!(task["alertLagMs"], 1000, "{task}");
        lagging.push(task["id"].clone());
    }
    let lag = told(&hook, "LAG", 1, Duration::from_secs(15)).await;
    let alert = &lag
        .first()
        .unwrap_or_else(|| panic!("a LAG alert: {:?}", hook.received()))
        .body;
    assert!(lagging.contains(&alert["taskId"]), "{alert}");
    let message = alert["message"].as_str().unwrap_or("");
    assert!(message.contains("ms late"), "{alert}");
    let (_, listed) = api.get("/api/alerts?status=sent").await;
    assert!(
        listed["items"]
            .as_array()
            .is_some_and(|items| items.iter().any(|a| a["event"] == "LAG")),
        "{listed}"
    );
    ax.shutdown().await;
}

/// A member that registered itself and goes quiet is dropped with a `MEMBER_UNHEALTHY`
/// alert; registering again resolves it.
#[actix_rt::test(system = "crate::common::TestSystem")]
async fn a_member_gone_alerts_and_its_return_resolves() {
    let store = TestStore::sqlite();
    let hook = Executor::start(Reply::Success).await;
    let mut config = with_channels(
        &store,
        vec![channel(
            "ops-hook",
            ChannelKind::Webhook,
            format!("{}hook", hook.base()),
        )],
    );
    config.executors.member_ttl_secs = 2;
    // Alone in its window: told as itself, not as a count.
    config.alerts.group_window_secs = 2;
    let ax = start_ax(&config).await;
    let api = Api::new(&ax);
    let member = Executor::start(Reply::Success).await;
    let group = unique_name("workers");
    let members = format!("/api/executors/{group}/members");
    let (status, _) = api.post(&members, json!({"url": member.base()})).await;
    assert_eq!(status, 201);
    let gone = told(&hook, "MEMBER_UNHEALTHY", 1, Duration::from_secs(20)).await;
    let alert = &gone.first().expect("a MEMBER_UNHEALTHY alert").body;
    let subject = alert["subject"].as_str().unwrap_or("");
    assert!(
        subject.contains(&group) && subject.contains(&member.base()),
        "{alert}"
    );
    assert_eq!(alert["taskId"], Value::Null);
    let (status, _) = api.post(&members, json!({"url": member.base()})).await;
    assert_eq!(status, 201, "it joins again");
    let back = told(&hook, "RESOLVED", 1, Duration::from_secs(10)).await;
    assert_eq!(
        back.first().map(|r| &r.body["subject"]),
        Some(&alert["subject"])
    );
    ax.shutdown().await;
}

on_each_backend!(redis_and_store_outages_alert_and_resolve_on, mariadb: redis_and_store_outages_alert_and_resolve, postgres: redis_and_store_outages_alert_and_resolve_on_postgres);

/// Redis, then the store, cut for longer than `alerts.outage_secs`: each alerts once and
/// its return resolves it.
async fn redis_and_store_outages_alert_and_resolve_on(store: TestStore) {
    let hook = Executor::start(Reply::Success).await;
    let redis = Proxy::start(&host_port(redis_server())).await;
    let server = Proxy::start(&host_port(store.server())).await;
    // The database exists before ax reaches it through the proxy.
    drop(ax_store::Db::connect(&store.url(), 1).await.expect("store"));
    let mut config = with_channels(
        &store,
        vec![channel(
            "ops-hook",
            ChannelKind::Webhook,
            format!("{}hook", hook.base()),
        )],
    );
    config.store.url = store.url_through(&server);
    // The test's own Redis database, reached through the proxy.
    let database = redis_database();
    config.redis.url = Some(format!("redis://{}/{database}", redis.addr));
    config.alerts.outage_secs = 5;
    config.alerts.group_window_secs = 2;
    let ax = start_ax(&config).await;

    redis.cut();
    let down = told(&hook, "REDIS_UNREACHABLE", 1, Duration::from_secs(20)).await;
    let alert = &down.first().expect("a REDIS_UNREACHABLE alert").body;
    assert_eq!(alert["subject"], "redis", "{alert}");
    redis.restore();
    let back = told(&hook, "RESOLVED", 1, Duration::from_secs(15)).await;
    assert_eq!(
        back.first().map(|r| &r.body["subject"]),
        Some(&json!("redis"))
    );
    actix_rt::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        told(&hook, "REDIS_UNREACHABLE", 1, Duration::ZERO)
            .await
            .len(),
        1,
        "told once"
    );

    server.cut();
    let down = told(&hook, "STORE_UNREACHABLE", 1, Duration::from_secs(30)).await;
    let alert = &down.first().expect("a STORE_UNREACHABLE alert").body;
    assert!(
        alert["subject"]
            .as_str()
            .is_some_and(|s| s.starts_with("store")),
        "{alert}"
    );
    server.restore();
    let back = told(&hook, "RESOLVED", 2, Duration::from_secs(30)).await;
    assert!(
        back.iter().any(|r| r.body["subject"] == alert["subject"]),
        "{back:?}"
    );
    ax.shutdown().await;
}
