//! The dashboard tells the truth (`/console`), read over HTTP on SQLite and MariaDB: a failing
//! task is `RECOVERED` only once a run succeeded (`RUNNING` and `RETRYING` say so); the
//! attention list shows paused scenes and tasks with since when and by whom, and members
//! unhealthy or recovered within the hour; runs by status never count more in the last hour
//! than in the last day.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::common::attention::{failing_states, Answering};
use crate::common::{
    config, on_each_backend, refusing_base, start_ax, unique_name, Api, Executor, Reply, TestStore,
};

on_each_backend!(
    tells_the_truth,
    sqlite: dashboard_on_sqlite,
    mariadb: dashboard_on_mysql,
    postgres: dashboard_on_postgres
);

async fn page(ax: &ax_server::app::Ax, path: &str) -> String {
    let mut response = awc::Client::builder()
        .timeout(Duration::from_secs(10))
        .finish()
        .get(format!("http://{}{path}", ax.addr()))
        .send()
        .await
        .unwrap_or_else(|err| panic!("GET {path}: {err}"));
    assert_eq!(response.status().as_u16(), 200, "{path}");
    let body = response.body().limit(4 << 20).await.expect("a body");
    String::from_utf8_lossy(&body).into_owned()
}

/// The part of `html` from `start` to the first `end` after it.
fn between<'h>(html: &'h str, start: &str, end: &str) -> &'h str {
    let from = html
        .find(start)
        .unwrap_or_else(|| panic!("{start:?} in {html}"));
    let rest = &html[from..];
    &rest[..rest.find(end).unwrap_or(rest.len())]
}

/// The row of the failing tasks' table that links to task `id`.
fn failing_row(dashboard: &str, id: i64) -> String {
    let table = between(dashboard, r#"id="failing-tasks""#, "</table>");
    table
        .split("<tr>")
        .find(|row| row.contains(&format!("href=\"/console/tasks/{id}\"")))
        .unwrap_or_else(|| panic!("task {id} in {table}"))
        .to_string()
}

/// Runs by status: (last hour, last day) for each status shown.
fn counts(dashboard: &str) -> HashMap<String, (i64, i64)> {
    let table = between(dashboard, r#"id="runs-heading""#, "</table>");
    let number = |cell: &str| -> i64 {
        let text = &cell[cell.find('>').expect("a cell") + 1..];
        text[..text.find('<').expect("its end")]
            .parse()
            .expect("a count")
    };
    table
        .split("<tr>")
        .filter(|row| row.contains(r#"scope="row""#))
        .map(|row| {
            let status = between(row, "<span class=\"badge", "</span>");
            let status = status[status.find('>').expect("a badge") + 1..].to_string();
            let cells: Vec<&str> = row.split(r#"<td class="num""#).skip(1).collect();
            (status, (number(cells[0]), number(cells[1])))
        })
        .collect()
}

async fn tells_the_truth(store: TestStore) {
    let mut config = config(&store, false, "dashboard");
    config.executors.failures_to_cool = 1;
    config.executors.cool_down_secs = 1;
    let ax = start_ax(&config).await;
    let api = Api::new(&ax);
    let answering = Answering::start().await;
    let scene = unique_name("billing");
    let states = failing_states(&api, &scene, &answering).await;

    // Failing tasks: "Now" by each task's latest run.
    let dashboard = page(&ax, "/console").await;
    let row = |id| failing_row(&dashboard, id);
    assert!(row(states.failing).contains(r#"<span class="badge bad">FAILING</span>"#));
    assert!(row(states.running).contains(r#"<span class="badge busy">RUNNING</span>"#));
    let retrying = row(states.retrying);
    assert!(
        retrying.contains(r#"<span class="badge busy">RETRYING</span>"#),
        "{retrying}"
    );
    assert!(retrying.contains("<time datetime="), "when: {retrying}");
    assert!(row(states.recovered).contains(r#"<span class="badge good">RECOVERED</span>"#));
    assert!(!row(states.running).contains("RECOVERED"));
    let failing_at = dashboard
        .find(&format!("href=\"/console/tasks/{}\"", states.failing))
        .expect("listed");
    let recovered_at = dashboard
        .find(&format!("href=\"/console/tasks/{}\"", states.recovered))
        .expect("listed");
    assert!(failing_at < recovered_at, "failing first, recovered last");

    // Pauses: a task created paused, one paused, a scene paused, each since when and by whom.
    assert!(!dashboard.contains(r#"id="paused""#), "nothing paused yet");
    let quiet_scene = unique_name("quiet");
    let created = api
        .create_task(
            json!({"name": unique_name("held"), "scene": quiet_scene, "cron": "0 0 3 1 1 *",
            "handlerUrl": answering.succeeded.url, "enabled": false}),
        )
        .await;
    let (status, body) = api
        .post(&format!("/api/tasks/{}/pause", states.recovered), json!({}))
        .await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = api
        .post(&format!("/api/scenes/{quiet_scene}/pause"), json!({}))
        .await;
    assert_eq!(status, 200, "{body}");

    // A member set aside (its address refused), then healthy again once it answers.
    let group = unique_name("workers");
    let member = refusing_base();
    let (status, body) = api
        .call(
            "PUT",
            &format!("/api/executors/{group}"),
            Some(json!({"members": [member]})),
        )
        .await;
    assert_eq!(status, 201, "{body}");
    let grouped = api
        .create_task(
            json!({"name": unique_name("grouped"), "scene": scene, "cron": "0 0 3 1 1 *",
            "executor": {"group": group, "path": "/run"}, "maxRetry": 0}),
        )
        .await;
    let grouped = grouped["id"].as_i64().expect("id");
    let run = || {
        let (api, path) = (&api, format!("/api/tasks/{grouped}/trigger"));
        async move {
            let (status, run) = api.post(&path, json!({})).await;
            assert_eq!(status, 201, "{run}");
            run["requestId"].as_str().expect("requestId").to_string()
        }
    };
    let refused = run().await;
    api.wait_status(
        &format!("/api/instances/{refused}"),
        "FAILED",
        Duration::from_secs(10),
    )
    .await;
    let addr = member.trim_start_matches("http://").trim_end_matches('/');
    let back = Executor::start_at(Reply::Success, addr).await;
    actix_rt::time::sleep(Duration::from_millis(1200)).await;
    let answered = run().await;
    api.wait_status(
        &format!("/api/instances/{answered}"),
        "SUCCESS",
        Duration::from_secs(10),
    )
    .await;

    // The attention list: what is paused, and the member, as the store shares it (written
    // within a second).
    let deadline = Instant::now() + Duration::from_secs(10);
    let dashboard = loop {
        let dashboard = page(&ax, "/console").await;
        if dashboard.contains("healthy again since") || Instant::now() > deadline {
            break dashboard;
        }
        actix_rt::time::sleep(Duration::from_millis(200)).await;
    };
    let paused = between(&dashboard, "Paused: ", r#"id="next-heading""#);
    assert!(paused.starts_with("Paused: 1 scene, 2 tasks"), "{paused}");
    let scene_line = between(paused, "SCENE PAUSED", "</li>");
    assert!(scene_line.contains(&format!("href=\"/console/scenes/{quiet_scene}\"")));
    assert!(scene_line.contains("since <time") && scene_line.contains("by anonymous"));
    for id in [created["id"].as_i64().expect("id"), states.recovered] {
        let line = between(paused, &format!("href=\"/console/tasks/{id}\""), "</li>");
        assert!(
            line.contains("since <time") && line.contains("by anonymous"),
            "{line}"
        );
    }
    let members = between(&dashboard, r#"id="unhealthy-members""#, "</ul>");
    let recovered = between(members, &member, "</li>");
    assert!(recovered.contains("healthy again since"), "{members}");
    assert!(
        recovered.contains("connect"),
        "its last failure: {recovered}"
    );

    // Runs by status: the hour is part of the day, counted in the same read. The day's older
    // runs are kept 15 s; runs ending meanwhile count in both at once.
    let before = counts(&dashboard);
    for (status, (hour, day)) in &before {
        assert!(
            hour <= day,
            "{status}: {hour} in the hour, {day} in the day"
        );
    }
    let (status, body) = api
        .post(
            &format!("/api/tasks/{}/resume", states.recovered),
            json!({}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let mut more = Vec::new();
    for _ in 0..3 {
        let (status, run) = api
            .post(
                &format!("/api/tasks/{}/trigger", states.recovered),
                json!({}),
            )
            .await;
        assert_eq!(status, 201, "{run}");
        more.push(run["requestId"].as_str().expect("requestId").to_string());
    }
    for request_id in &more {
        api.wait_status(
            &format!("/api/instances/{request_id}"),
            "SUCCESS",
            Duration::from_secs(10),
        )
        .await;
    }
    let after = counts(&page(&ax, "/console").await);
    let success = |counts: &HashMap<String, (i64, i64)>| counts["SUCCESS"];
    assert_eq!(success(&after).0, success(&before).0 + 3, "{after:?}");
    assert_eq!(
        success(&after),
        (success(&after).0, success(&after).0),
        "every run is of the hour"
    );
    for (status, (hour, day)) in &after {
        assert!(
            hour <= day,
            "{status}: {hour} in the hour, {day} in the day"
        );
    }

    ax.shutdown().await;
    answering.stop().await;
    back.stop().await;
}
