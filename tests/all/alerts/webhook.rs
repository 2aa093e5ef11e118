//! A webhook and a Slack-format channel, each a real HTTP server in the test: a failing task
//! is told once (its repeats folded into the silence), signed, with a stable id; its next
//! success resolves it.

use std::time::Duration;

use ax_core::alerting::ChannelKind;
use ax_server::config::Config;
use serde_json::{json, Value};

use crate::common::{
    on_each_backend, start_ax, unique_name, Api, Executor, Received, Reply, TestStore, SECRET,
};

pub use crate::common::{alert_channel as channel, with_channels};

/// What a receiver got, once `n` requests came (or the time is up).
async fn bodies(receiver: &Executor, n: usize, within: Duration) -> Vec<Received> {
    receiver.wait_for(n, within).await
}

/// A webhook receiver and a Slack one, and ax's configuration with both as the channels of
/// the default rule (`ops-hook`, `team-slack`).
async fn hook_and_slack(store: &TestStore) -> (Executor, Executor, Config) {
    let hook = Executor::start(Reply::Success).await;
    let slack = Executor::start(Reply::Success).await;
    let channels = vec![
        channel(
            "ops-hook",
            ChannelKind::Webhook,
            format!("{}hook", hook.base()),
        ),
        channel(
            "team-slack",
            ChannelKind::Slack,
            format!("{}slack", slack.base()),
        ),
    ];
    let config = with_channels(store, channels);
    (hook, slack, config)
}

async fn a_failing_task_alerts_once_and_resolves(store: TestStore) {
    let (hook, slack, config) = hook_and_slack(&store).await;
    let ax = start_ax(&config).await;
    let api = Api::new(&ax);
    let executor = Executor::start(Reply::FailNoRetry).await;
    let name = unique_name("nightly");
    let task = api
        .create_task(
            json!({"name": name, "scene": "alerts", "cron": "* * * * * *",
            "handlerUrl": executor.url, "maxRetry": 0}),
        )
        .await;
    let id = task["id"].as_i64().expect("id");
    api.wait_final(id, 3, Duration::from_secs(10)).await;
    let told = bodies(&hook, 1, Duration::from_secs(10)).await;
    // Three failures and more: the first is told, the rest fold into the silence.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let told_now = hook.received();
    assert_eq!(
        told_now.len(),
        1,
        "one alert, the repeats folded: {told_now:?}"
    );
    let alert = &told[0];
    assert!(alert.signed_with(SECRET), "signed like dispatches");
    assert_eq!(alert.body["event"], "FAILED");
    assert_eq!(alert.body["subject"], format!("alerts/{name}"));
    assert_eq!(alert.body["taskId"], id);
    assert!(alert.body["link"]
        .as_str()
        .is_some_and(|l| l.contains("/runs/")));
    let alert_id = alert.body["id"].as_str().expect("an id").to_string();
    let on_slack = bodies(&slack, 1, Duration::from_secs(5)).await;
    let slack_body = &on_slack[0].body;
    assert_eq!(
        slack_body["attachments"][0]["color"], "danger",
        "{slack_body}"
    );
    assert!(
        slack_body["attachments"][0]["footer"]
            .as_str()
            .is_some_and(|f| f.contains(&alert_id)),
        "the same alert id on every channel"
    );

    // The task's next success resolves the alert, told once.
    let fixed = Executor::start(Reply::Success).await;
    let (status, _) = api
        .call(
            "PATCH",
            &format!("/api/tasks/{id}"),
            Some(json!({"handlerUrl": fixed.url})),
        )
        .await;
    assert_eq!(status, 200);
    let resolved = bodies(&hook, 2, Duration::from_secs(10)).await;
    let events: Vec<&Value> = resolved.iter().map(|r| &r.body["event"]).collect();
    assert_eq!(events, [&json!("FAILED"), &json!("RESOLVED")]);
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(hook.received().len(), 2, "resolved once");

    // The outbox as the API lists it: both alerts sent on both channels, the repeats folded.
    let (status, page) = api.get(&format!("/api/alerts?task={id}&status=sent")).await;
    assert_eq!(status, 200);
    let sent: Vec<(&str, &str)> = page["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|a| {
            (
                a["event"].as_str().unwrap_or(""),
                a["channel"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(sent.len(), 4, "{page}");
    assert!(sent.contains(&("FAILED", "team-slack")) && sent.contains(&("RESOLVED", "ops-hook")));
    let (_, folded) = api
        .get(&format!("/api/alerts?task={id}&status=folded"))
        .await;
    assert!(
        !folded["items"].as_array().expect("items").is_empty(),
        "{folded}"
    );
    let (status, first) = api.get(&format!("/api/alerts?task={id}&limit=1")).await;
    assert_eq!(status, 200);
    let cursor = first["nextCursor"].as_str().expect("a cursor");
    let (_, next) = api
        .get(&format!("/api/alerts?task={id}&limit=1&cursor={cursor}"))
        .await;
    assert_ne!(next["items"][0], first["items"][0], "the next page");
    let (status, bad) = api.get("/api/alerts?status=lost").await;
    assert_eq!(
        (status, bad["error"]["field"].as_str()),
        (400, Some("status"))
    );

    // A test alert goes out at once; an unknown channel is named.
    let (status, tested) = api
        .post("/api/alerts/test", json!({"channel": "ops-hook"}))
        .await;
    assert_eq!(status, 200, "{tested}");
    let received = bodies(&hook, 3, Duration::from_secs(5)).await;
    assert_eq!(received[2].body["event"], "TEST");
    assert_eq!(received[2].body["id"], tested["id"]);
    let (status, bad) = api
        .post("/api/alerts/test", json!({"channel": "nope"}))
        .await;
    assert_eq!(
        (status, bad["error"]["field"].as_str()),
        (400, Some("channel")),
        "{bad}"
    );

    // The same from the CLI.
    let url = format!("http://{}", ax.addr());
    // Off the test's thread: the alert actor that sends the test runs on it.
    let cli = |args: &[&str]| {
        let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_ax"));
        command.args(args).args(["--url", &url]);
        tokio::task::spawn_blocking(move || command.output().expect("ax runs"))
    };
    let task = id.to_string();
    let listed = cli(&["alerts", "list", "--task", &task, "--status", "sent"])
        .await
        .expect("cli");
    let text = String::from_utf8_lossy(&listed.stdout);
    assert!(listed.status.success(), "{listed:?}");
    assert!(
        text.starts_with("CREATED") && text.contains("RESOLVED") && text.contains("team-slack"),
        "{text}"
    );
    let by_scene = cli(&["alerts", "list", "--scene", "alerts", "--status", "sent"])
        .await
        .expect("cli");
    let text = String::from_utf8_lossy(&by_scene.stdout);
    assert!(
        by_scene.status.success() && text.contains("RESOLVED"),
        "{text}"
    );
    let elsewhere = cli(&["alerts", "list", "--scene", "elsewhere"])
        .await
        .expect("cli");
    let text = String::from_utf8_lossy(&elsewhere.stdout);
    assert!(!text.contains("RESOLVED"), "{text}");
    let tested = cli(&["alerts", "test", "ops-hook"]).await.expect("cli");
    assert!(tested.status.success(), "{tested:?}");
    // An unknown channel is bad input (the API's 400): exit 2.
    let refused = cli(&["alerts", "test", "nope"]).await.expect("cli");
    assert_eq!(refused.status.code(), Some(2));
    ax.shutdown().await;
}

on_each_backend!(
    a_failing_task_alerts_once_and_resolves,
    sqlite: a_failing_task_alerts_once_and_resolves_on_sqlite,
    mariadb: a_failing_task_alerts_once_and_resolves_on_mysql,
    postgres: a_failing_task_alerts_once_and_resolves_on_postgres
);

on_each_backend!(two_processes_send_each_alert_once_on, mariadb: two_processes_send_each_alert_once, postgres: two_processes_send_each_alert_once_on_postgres);

/// Two ax processes on one MariaDB and Redis: each alert is sent by one of them, once.
async fn two_processes_send_each_alert_once_on(store: TestStore) {
    let hook = Executor::start(Reply::Success).await;
    let channels = || {
        vec![channel(
            "ops-hook",
            ChannelKind::Webhook,
            format!("{}hook", hook.base()),
        )]
    };
    let redis = crate::common::redis_url();
    let mut first = with_channels(&store, channels());
    first.redis.url = Some(redis.clone());
    let mut second = with_channels(&store, channels());
    second.redis.url = Some(redis);
    let (a, b) = (start_ax(&first).await, start_ax(&second).await);
    let api = Api::new(&a);
    let executor = Executor::start(Reply::FailNoRetry).await;
    let mut ids = Vec::new();
    for _ in 0..3 {
        let task = api
            .create_task(json!({"name": unique_name("twice"), "cron": "* * * * * *",
                "handlerUrl": executor.url, "maxRetry": 0}))
            .await;
        ids.push(task["id"].as_i64().expect("id"));
    }
    hook.wait_for(3, Duration::from_secs(15)).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let mut told: Vec<i64> = hook
        .received()
        .iter()
        .map(|r| r.body["taskId"].as_i64().unwrap_or(0))
        .collect();
    told.sort_unstable();
    assert_eq!(told, ids, "one alert per task, sent by one process");
    a.shutdown().await;
    b.shutdown().await;
}

/// A channel that never answers holds only its own sends: runs go on at their times.
#[actix_rt::test(system = "crate::common::TestSystem")]
async fn a_hanging_channel_does_not_delay_runs() {
    let store = TestStore::sqlite();
    let hook = Executor::start(Reply::Slow(Duration::from_secs(30))).await;
    let config = with_channels(
        &store,
        vec![channel(
            "stuck",
            ChannelKind::Webhook,
            format!("{}hook", hook.base()),
        )],
    );
    let ax = start_ax(&config).await;
    let api = Api::new(&ax);
    let failing = Executor::start(Reply::FailNoRetry).await;
    let healthy = Executor::start(Reply::Success).await;
    for (name, url) in [("failing", &failing.url), ("healthy", &healthy.url)] {
        api.create_task(json!({"name": unique_name(name), "cron": "* * * * * *",
            "handlerUrl": url, "maxRetry": 0}))
            .await;
    }
    hook.wait_for(1, Duration::from_secs(10)).await;
    let before = healthy.received().len();
    tokio::time::sleep(Duration::from_secs(4)).await;
    let runs = healthy.received();
    assert!(
        runs.len() - before >= 3,
        "runs go on while the channel hangs: {}",
        runs.len() - before
    );
    ax.shutdown().await;
}

/// A scene's rule applies to its tasks instead of the default, and survives the scene's pause.
#[actix_rt::test(system = "crate::common::TestSystem")]
async fn a_scenes_rule_picks_its_channels() {
    let store = TestStore::sqlite();
    let (hook, slack, config) = hook_and_slack(&store).await;
    let ax = start_ax(&config).await;
    let api = Api::new(&ax);
    let path = "/api/scenes/quiet/alerts";
    let (status, bad) = api
        .call("PUT", path, Some(json!({"channels": ["nope"]})))
        .await;
    assert_eq!(
        (status, bad["error"]["field"].as_str()),
        (400, Some("channels")),
        "{bad}"
    );
    let (status, bad) = api.call("PUT", path, Some(json!({"treshold": 2}))).await;
    assert_eq!(
        (status, bad["error"]["field"].as_str()),
        (400, Some("alerts")),
        "{bad}"
    );
    let rule = json!({"channels": ["team-slack"], "events": ["FAILED"]});
    let (status, set) = api.call("PUT", path, Some(rule)).await;
    assert_eq!(status, 200, "{set}");
    assert_eq!(set["applies"]["channels"], json!(["team-slack"]));
    // A pause and a resume of the scene keep its rule.
    api.post("/api/scenes/quiet/pause", json!({})).await;
    api.post("/api/scenes/quiet/resume", json!({})).await;
    let (_, read) = api.get(path).await;
    assert_eq!(read["alerts"]["channels"], json!(["team-slack"]), "{read}");

    let executor = Executor::start(Reply::FailNoRetry).await;
    api.create_task(json!({"name": unique_name("quiet"), "scene": "quiet",
        "cron": "* * * * * *", "handlerUrl": executor.url, "maxRetry": 0}))
        .await;
    slack.wait_for(1, Duration::from_secs(10)).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(slack.received().len(), 1);
    assert!(
        hook.received().is_empty(),
        "the scene's rule, not the default"
    );
    let (_, cleared) = api.call("PUT", path, Some(Value::Null)).await;
    assert_eq!(cleared["alerts"], Value::Null);
    assert_eq!(
        cleared["applies"]["channels"],
        json!(["ops-hook", "team-slack"])
    );
    ax.shutdown().await;
}
