//! Calendars on every store: written, read, listed and refused through the API; a task's
//! `calendars` leave out or move its fires (its next run, the previews); a calendar's change
//! moves the next runs of the tasks naming it; one a task names is not deleted (409 naming the
//! task); and across two processes, a calendar changed through one changes what the other
//! fires.

use std::time::Duration;

use chrono::{Datelike, Duration as Days, Utc};
use serde_json::{json, Value};

use crate::common::{
    config, on_each_backend, redis_url, start_ax, Api, AxProcess, Executor, Reply, TestStore,
};

const HANDLER: &str = "http://127.0.0.1:9/run";

/// Asserts a 400 naming `field`.
fn assert_refused((status, body): (u16, Value), field: &str, what: &str) {
    assert_eq!(status, 400, "{what}: {body}");
    assert_eq!(body["error"]["field"], field, "{what}: {body}");
}

async fn put(api: &Api, name: &str, body: Value) -> (u16, Value) {
    api.call("PUT", &format!("/api/calendars/{name}"), Some(body))
        .await
}

async fn calendars_are_kept_applied_and_refused(store: TestStore) {
    let ax = start_ax(&config(&store, false, "calendars")).await;
    let api = Api::new(&ax);
    let holidays = json!({"dates": ["2030-12-25", "2030-12-26"],
        "ranges": [{"from": "2030-12-30", "to": "2031-01-01"}], "weekdays": []});
    let (status, created) = put(&api, "holidays", holidays.clone()).await;
    assert_eq!(status, 201, "{created}");
    assert_eq!(created["dates"], holidays["dates"]);
    assert_eq!(created["ranges"], holidays["ranges"]);
    assert_eq!(created["taskCount"], 0);
    let (status, weekends) = put(&api, "weekends", json!({"weekdays": ["sat", "SUN"]})).await;
    assert_eq!(status, 201, "{weekends}");
    assert_eq!(
        weekends["weekdays"],
        json!(["SAT", "SUN"]),
        "named as written back"
    );

    // Bad calendars and names: 400 naming the part, nothing written.
    for (body, field) in [
        (json!({"dates": ["2030-02-30"]}), "dates[0]"),
        (json!({"dates": ["2030-01-01", 5]}), "dates[1]"),
        (
            json!({"ranges": [{"from": "2030-01-05", "to": "2030-01-01"}]}),
            "ranges[0]",
        ),
        (json!({"ranges": [{"from": "2030-01-05"}]}), "ranges[0]"),
        (json!({"weekdays": ["FUNDAY"]}), "weekdays[0]"),
        (json!({"holidays": []}), "holidays"),
        (json!(["2030-01-01"]), "body"),
    ] {
        assert_refused(
            put(&api, "bad", body.clone()).await,
            field,
            &body.to_string(),
        );
    }
    assert_refused(put(&api, "Bad%20Name", json!({})).await, "name", "name");
    assert_eq!(api.get("/api/calendars/bad").await.0, 404);
    let (_, list) = api.get("/api/calendars").await;
    let names: Vec<&str> = list["items"]
        .as_array()
        .expect("items")
        .iter()
        .filter_map(|c| c["name"].as_str())
        .collect();
    assert_eq!(names, ["holidays", "weekends"]);

    // A task naming a calendar that does not exist is refused, naming it.
    let mut task = json!({"name": "payroll", "cron": "0 0 9 24 12 *", "timeZone": "Europe/Berlin",
        "handlerUrl": HANDLER, "calendars": {"exclude": ["weekends", "nope"]}});
    let (status, refused) = api.post("/api/tasks", task.clone()).await;
    assert_eq!(status, 400, "{refused}");
    assert_eq!(
        refused["error"]["field"], "calendars.exclude[1]",
        "{refused}"
    );
    task["calendars"] = json!({"exclude": ["weekends"], "policy": "SOMETIMES"});
    assert_refused(
        api.post("/api/tasks", task.clone()).await,
        "calendars.policy",
        "policy",
    );

    // A calendar named, its days are what it holds.
    let (status, _) = put(&api, "tuesdays", json!({"weekdays": ["TUE"]})).await;
    assert_eq!(status, 201);
    task["calendars"] = json!({"exclude": ["weekends", "tuesdays"], "policy": "PREVIOUS_OPEN_DAY"});
    let created = api.create_task(task.clone()).await;
    let id = created["id"].as_i64().expect("id");
    assert_eq!(created["calendars"], task["calendars"]);
    let next = |task: &Value| task["nextRunAt"].as_str().unwrap_or_default().to_string();
    let first = chrono::DateTime::parse_from_rfc3339(&next(&created)).expect("a next run");
    assert!(
        ![1, 5, 6].contains(&first.weekday().num_days_from_sunday()),
        "not on a Tuesday or a weekend: {created}"
    );

    // The calendar's change moves the task's next run at once and raises its version.
    let now = Utc::now();
    let year = now.year() + i32::from(now.month() == 12 && now.day() >= 20);
    let tuesday_off = format!("{year}-12-24");
    let (status, changed) = put(&api, "tuesdays", json!({"dates": [tuesday_off]})).await;
    assert_eq!(status, 200, "{changed}");
    assert_eq!(changed["taskCount"], 1);
    assert_eq!(changed["tasks"][0]["id"], id);
    let (_, moved) = api.get(&format!("/api/tasks/{id}")).await;
    assert!(
        moved["version"].as_i64() > created["version"].as_i64(),
        "{moved}"
    );
    // The 24th off: the previous open day (not a weekend) at 09:00 in Berlin.
    let moved_to = next(&moved);
    let day = chrono::DateTime::parse_from_rfc3339(&moved_to).expect("a time");
    assert!(day.day() < 24 && day.month() == 12, "{moved}");
    assert!(day.weekday().number_from_monday() <= 5, "{moved}");
    assert_eq!(
        day.with_timezone(&Utc).format("%H:%M").to_string(),
        "08:00",
        "{moved}"
    );

    // The preview says the same: the moved fire and the fire left on its day off.
    let (status, preview) = api
        .get(&format!(
            "/api/cron/next?expr=0%200%209%2024%2012%20*&tz=Europe/Berlin&count=1\
             &calendar=weekends,tuesdays&policy=PREVIOUS_OPEN_DAY&from={}",
            now.format("%Y-%m-%dT%H:%M:%SZ")
        ))
        .await;
    assert_eq!(status, 200, "{preview}");
    assert_eq!(preview["times"][0]["utc"], moved_to.as_str(), "{preview}");
    assert_eq!(
        preview["times"][0]["movedFrom"],
        tuesday_off.as_str(),
        "{preview}"
    );
    assert_eq!(preview["times"][0]["calendar"], "tuesdays", "{preview}");
    assert_eq!(
        preview["excluded"],
        json!([]),
        "the day off's fire is after the moved one"
    );
    let (status, skipped) = api
        .get(
            "/api/cron/next?expr=0%200%2012%20*%20*%20*&count=3&calendar=weekends\
              &from=2030-01-03T00:00:00Z",
        )
        .await;
    assert_eq!(status, 200, "{skipped}");
    let times: Vec<&str> = skipped["times"]
        .as_array()
        .expect("times")
        .iter()
        .filter_map(|t| t["utc"].as_str())
        .collect();
    // Thursday, Friday, then Monday: the weekend's two fires are listed as excluded.
    assert_eq!(
        times,
        [
            "2030-01-03T12:00:00.000Z",
            "2030-01-04T12:00:00.000Z",
            "2030-01-07T12:00:00.000Z"
        ]
    );
    assert_eq!(
        skipped["excluded"].as_array().map(Vec::len),
        Some(2),
        "{skipped}"
    );
    assert_eq!(skipped["excluded"][0]["calendar"], "weekends");
    assert_refused(
        api.get("/api/cron/next?expr=0%20*%20*%20*%20*%20*&calendar=nope")
            .await,
        "calendar",
        "unknown calendar",
    );
    assert_refused(
        api.get("/api/cron/next?expr=0%20*%20*%20*%20*%20*&calendar=weekends&policy=NEVER")
            .await,
        "policy",
        "bad policy",
    );

    // A calendar a task names is not deleted: 409 naming the task; then it is.
    let (status, body) = api.call("DELETE", "/api/calendars/tuesdays", None).await;
    assert_eq!(status, 409, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("payroll"),
        "{body}"
    );
    let (status, _) = api
        .call(
            "PATCH",
            &format!("/api/tasks/{id}"),
            Some(json!({"calendars": {"exclude": ["weekends"]}})),
        )
        .await;
    assert_eq!(status, 200);
    assert_eq!(
        api.call("DELETE", "/api/calendars/tuesdays", None).await.0,
        204
    );
    assert_eq!(
        api.call("DELETE", "/api/calendars/tuesdays", None).await.0,
        404
    );
    let (_, audit) = api.get("/api/audit?limit=50").await;
    let actions: Vec<&str> = audit["items"]
        .as_array()
        .expect("items")
        .iter()
        .filter_map(|e| e["action"].as_str())
        .collect();
    assert!(
        actions.contains(&"calendar.put") && actions.contains(&"calendar.delete"),
        "{audit}"
    );
    ax.shutdown().await;
}

on_each_backend!(
    calendars_are_kept_applied_and_refused,
    sqlite: calendars_are_kept_applied_and_refused_on_sqlite,
    mariadb: calendars_are_kept_applied_and_refused_on_mariadb,
    postgres: calendars_are_kept_applied_and_refused_on_postgres
);

/// Two processes on one database: a task every second whose days are all off fires nothing;
/// the calendar emptied through the other process, it fires within seconds, wherever its
/// share is.
#[actix_rt::test(system = "crate::common::TestSystem")]
async fn a_calendar_changed_through_one_process_moves_the_fires_of_another() {
    let store = TestStore::mysql();
    let dir = tempfile::tempdir().expect("dir");
    let env = vec![
        ("AX_STORE_URL".to_string(), store.url()),
        ("AX_REDIS_URL".to_string(), redis_url()),
    ];
    let suffix = &uuid::Uuid::new_v4().simple().to_string()[..8];
    let one = AxProcess::start(dir.path(), &format!("cal-a-{suffix}"), env.clone()).await;
    let two = AxProcess::start(dir.path(), &format!("cal-b-{suffix}"), env).await;
    let (a, b) = (Api::at(one.base()), Api::at(two.base()));
    let executor = Executor::start(Reply::Success).await;
    // Today and tomorrow in UTC: a test running over midnight still finds its days off.
    let today = Utc::now().date_naive();
    let days = json!({"dates": [today.to_string(), (today + Days::days(1)).to_string()]});
    assert_eq!(put(&a, "frozen", days).await.0, 201);
    let mut tasks = Vec::new();
    for n in 0..4 {
        let task = a
            .create_task(json!({"name": format!("frozen-{n}"), "cron": "* * * * * *",
                "handlerUrl": format!("{}/run", executor.base()), "maxRetry": 0,
                "calendars": {"exclude": ["frozen"]}}))
            .await;
        tasks.push(task["id"].as_i64().expect("id"));
    }
    actix_rt::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(executor.received().len(), 0, "no fire on a day off");
    let (status, _) = put(&b, "frozen", json!({"dates": ["2000-01-01"]})).await;
    assert_eq!(status, 200);
    let received = executor.wait_for(8, Duration::from_secs(10)).await;
    let fired: std::collections::BTreeSet<i64> = received
        .iter()
        .filter_map(|r| r.body["taskId"].as_i64())
        .collect();
    assert_eq!(
        fired.len(),
        tasks.len(),
        "every task fires again: {fired:?}"
    );
    for task in &tasks {
        b.call("DELETE", &format!("/api/tasks/{task}"), None).await;
    }
    executor.stop().await;
    drop((one, two));
}
