//! `GET /api/events` against a real ax and executor on both stores: a triggered run is told
//! from READY to its end with its request id, its log lines as they come; the stream keeps to
//! its task; bad parameters are 400s naming them; and any ax of a cluster serves the runs the
//! others fire.

use std::time::Duration;

use serde_json::{json, Value};

use crate::common::events::{Event, Events};
use crate::common::{
    config, on_each_backend, start_ax, unique_name, Api, Executor, Reply, TestStore,
};

const WAIT: Duration = Duration::from_secs(10);

/// A task that fires only when triggered (its cron is once a year).
async fn yearly_task(api: &Api, handler: &str) -> i64 {
    let task = api
        .create_task(json!({"name": unique_name("events"), "cron": "0 0 0 1 1 *",
            "handlerUrl": handler, "maxRetry": 0}))
        .await;
    task["id"].as_i64().expect("an id")
}

async fn trigger(api: &Api, task: i64) -> String {
    let (status, run) = api
        .post(&format!("/api/tasks/{task}/trigger"), json!({}))
        .await;
    assert_eq!(status, 201, "{run}");
    run["requestId"].as_str().expect("a request id").to_string()
}

fn is_run(event: &Event, request_id: &str, status: &str) -> bool {
    event.name == "run" && event.data["requestId"] == request_id && event.data["status"] == status
}

async fn open(base: &str, query: &str) -> Events {
    let (status, events) = Events::open(base, &format!("/api/events{query}")).await;
    assert_eq!(status, 200);
    let events = events.expect("a stream");
    assert_eq!(events.content_type, "text/event-stream");
    assert_eq!(events.cache_control, "no-cache");
    events
}

async fn a_triggered_run_is_told_to_its_end(store: TestStore) {
    let ax = start_ax(&config(&store, store.is_shared(), &unique_name("events"))).await;
    let api = Api::new(&ax);
    let base = format!("http://{}", ax.addr());
    let executor = Executor::start(Reply::Accepted).await;
    let task = yearly_task(&api, &executor.url).await;
    let other = yearly_task(&api, &executor.url).await;
    let mut mine = open(&base, &format!("?task={task}")).await;
    let mut others = open(&base, &format!("?task={other}")).await;
    let mut all = open(&base, "").await;
    // The first look is the baseline; a run after it is a change.
    actix_rt::time::sleep(Duration::from_millis(1500)).await;

    let request_id = trigger(&api, task).await;
    let told = mine
        .until(WAIT, |e| is_run(e, &request_id, "RUNNING"))
        .await;
    let last = told.last().expect("an event");
    assert_eq!(last.data["taskId"], task, "{last:?}");
    assert_eq!(last.data["scene"], "default", "{last:?}");
    let delivery = executor.wait_for(1, WAIT).await[0].clone();
    assert_eq!(delivery.request_id, request_id);

    let log = format!("/api/instances/{request_id}/log");
    let (status, reply) = api
        .post(&log, json!({"lines": ["one", "two"], "progress": 30}))
        .await;
    assert_eq!(status, 200, "{reply}");
    let told = mine
        .until(WAIT, |e| e.name == "log" && e.data["lines"] == 2)
        .await;
    let last = told.last().expect("an event");
    assert_eq!(last.data["requestId"], request_id.as_str());
    assert_eq!(last.data["attempt"], 1);
    assert_eq!(last.data["progress"], 30);

    let (status, reply) = api
        .post("/api/callback", delivery.callback("SUCCESS", json!({})))
        .await;
    assert_eq!(status, 200, "{reply}");
    mine.until(WAIT, |e| is_run(e, &request_id, "SUCCESS"))
        .await;
    // The unfiltered stream saw the same run end.
    all.until(WAIT, |e| is_run(e, &request_id, "SUCCESS")).await;
    // An ended run is told once, however many looks see it.
    assert!(
        mine.next(Duration::from_millis(2500)).await.is_none(),
        "nothing more happened to the task"
    );
    // The other task's stream was told nothing of this run.
    while let Some(event) = others.next(Duration::from_millis(200)).await {
        assert_ne!(event.data["requestId"], request_id.as_str(), "{event:?}");
    }

    for (query, field) in [
        ("?task=abc", "task"),
        ("?task=0", "task"),
        ("?scene=a%20b", "scene"),
        ("?status=SUCCESS", "status"),
    ] {
        let (status, reply) = api.get(&format!("/api/events{query}")).await;
        assert_eq!(status, 400, "{query}: {reply}");
        assert_eq!(reply["error"]["field"], field, "{query}: {reply}");
    }
}

on_each_backend!(
    a_triggered_run_is_told_to_its_end,
    sqlite: a_triggered_run_is_told_to_its_end_on_sqlite,
    mariadb: a_triggered_run_is_told_to_its_end_on_mariadb,
    postgres: a_triggered_run_is_told_to_its_end_on_postgres
);

on_each_backend!(any_instance_serves_the_stream_on, mariadb: any_instance_serves_the_stream, postgres: any_instance_serves_the_stream_on_postgres);

/// Two ax on one MariaDB and one Redis: the one that did not fire the run tells it.
async fn any_instance_serves_the_stream_on(store: TestStore) {
    let first = start_ax(&config(&store, true, &unique_name("events-a"))).await;
    let second = start_ax(&config(&store, true, &unique_name("events-b"))).await;
    let api = Api::new(&first);
    let executor = Executor::start(Reply::Success).await;
    let task = yearly_task(&api, &executor.url).await;
    let mut events = open(
        &format!("http://{}", second.addr()),
        &format!("?task={task}"),
    )
    .await;
    actix_rt::time::sleep(Duration::from_millis(1500)).await;
    let request_id = trigger(&api, task).await;
    let told: Vec<Value> = events
        .until(WAIT, |e| is_run(e, &request_id, "SUCCESS"))
        .await
        .into_iter()
        .map(|e| e.data)
        .collect();
    assert!(told.iter().all(|e| e["taskId"] == task), "{told:?}");
}
