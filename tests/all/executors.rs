//! Executor groups over real HTTP: defined and self-registered members, routing with failover
//! inside an attempt (same requestId and attempt), health with cool-down, the member recorded
//! on each run, back-pressure per member, a group without members, deletion refused while
//! tasks use a group, BROADCAST with shards over a member killed mid-run, and a registered
//! member's process killed by SIGKILL. SQLite, and MariaDB + Redis.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use chrono::Utc;
use serde_json::{json, Value};

use crate::common::{
    config, on_each_backend, redis_url, refusing_base, start_ax, unique_name, Api, AxProcess,
    Executor, Reply, TestStore,
};

async fn member_of(api: &Api, group: &str, url: &str) -> Value {
    let (status, group) = api.get(&format!("/api/executors/{group}")).await;
    assert_eq!(status, 200, "{group}");
    group["members"]
        .as_array()
        .and_then(|members| members.iter().find(|m| m["url"] == url).cloned())
        .unwrap_or(Value::Null)
}

async fn metrics(ax: &ax_server::app::Ax) -> String {
    let body = awc::Client::default()
        .get(format!("http://{}/metrics", ax.addr()))
        .send()
        .await
        .expect("metrics")
        .body()
        .await
        .expect("body");
    String::from_utf8_lossy(&body).into_owned()
}

async fn console_page(ax: &ax_server::app::Ax, path: &str) -> String {
    page_at(&format!("http://{}", ax.addr()), path).await
}

async fn page_at(base: &str, path: &str) -> String {
    let mut response = awc::Client::default()
        .get(format!("{base}{path}"))
        .send()
        .await
        .expect("console page");
    assert_eq!(response.status().as_u16(), 200, "GET {path}");
    let body = response.body().limit(4 << 20).await.expect("body");
    String::from_utf8_lossy(&body).into_owned()
}

async fn fleet(store: TestStore) {
    let mut config = config(&store, store.is_shared(), &unique_name("fleet"));
    config.executors.member_ttl_secs = 3;
    let ax = start_ax(&config).await;
    let api = Api::new(&ax);
    let live = Executor::start(Reply::Success).await;
    let refused = refusing_base();
    let group = unique_name("billing");

    let (status, created) = api
        .call(
            "PUT",
            &format!("/api/executors/{group}"),
            Some(json!({"routing": "FAILOVER", "members": [refused, live.base()]})),
        )
        .await;
    assert_eq!(status, 201, "{created}");
    assert_eq!(
        (&created["routing"], &created["maxInFlight"]),
        (&json!("FAILOVER"), &json!(64))
    );
    let task = api
        .create_task(
            json!({"name": unique_name("reconcile"), "cron": "* * * * * *",
            "executor": {"group": group, "path": "/run"}, "maxRetry": 0}),
        )
        .await;
    assert_eq!(task["handlerUrl"], Value::Null, "{task}");
    assert_eq!(task["executor"]["group"], json!(group));
    let id = task["id"].as_i64().expect("id");

    // The refused member is tried first each time; the attempt goes on to the live one.
    let got = live.wait_for(4, Duration::from_secs(10)).await;
    assert!(got.len() >= 4, "the live member serves: {}", got.len());
    for delivery in &got {
        assert_eq!(delivery.body["attempt"], 1, "failover keeps the attempt");
    }
    let ids: Vec<&str> = got.iter().map(|d| d.request_id.as_str()).collect();
    let distinct: HashSet<&&str> = ids.iter().collect();
    assert_eq!(
        distinct.len(),
        ids.len(),
        "each run delivered once: {ids:?}"
    );
    let first = got[0].request_id.clone();
    let run = api
        .wait_status(
            &format!("/api/instances/{first}"),
            "SUCCESS",
            Duration::from_secs(5),
        )
        .await;
    assert_eq!(run["member"], json!(live.base()), "{run}");
    assert_eq!(run["attempt"], 1);

    // Three refusals in a row cool the refused member down; the live one stays healthy.
    let cooled = member_of(&api, &group, &refused).await;
    assert_eq!(cooled["state"], "UNHEALTHY", "{cooled}");
    assert!(cooled["failures"].as_u64() >= Some(3), "{cooled}");
    assert!(cooled["lastError"].as_str().is_some(), "{cooled}");
    let healthy = member_of(&api, &group, &live.base()).await;
    assert_eq!(healthy["state"], "HEALTHY", "{healthy}");
    assert!(healthy["successes"].as_u64() >= Some(4), "{healthy}");
    let line = format!("ax_executor_member_healthy{{group=\"{group}\",member=\"{refused}\"}} 0");
    let mut shown = false;
    for _ in 0..30 {
        shown = metrics(&ax).await.contains(&line);
        if shown {
            break;
        }
        actix_rt::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(shown, "{line} in /metrics");

    // A group a task uses cannot be deleted: the answer names the task.
    let (status, refusal) = api
        .call("DELETE", &format!("/api/executors/{group}"), None)
        .await;
    assert_eq!(status, 409, "{refusal}");
    assert!(
        refusal["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains(task["name"].as_str().unwrap_or("?")),
        "{refusal}"
    );
    let (status, _) = api.call("DELETE", &format!("/api/tasks/{id}"), None).await;
    assert_eq!(status, 204);

    // Both a handler URL and an executor: refused, naming the field.
    let (status, refusal) = api
        .post(
            "/api/tasks",
            json!({"name": unique_name("both"), "cron": "* * * * * *",
            "handlerUrl": live.url, "executor": {"group": group}}),
        )
        .await;
    assert_eq!(
        (status, &refusal["error"]["field"]),
        (400, &json!("executor")),
        "{refusal}"
    );

    // A member registers itself into a group that does not exist yet, heartbeats, expires.
    let joined_group = unique_name("workers");
    let members = format!("/api/executors/{joined_group}/members");
    let (status, joined) = api
        .post(&members, json!({"url": live.base(), "capacity": 2}))
        .await;
    assert_eq!(status, 201, "{joined}");
    let (status, _) = api.post(&members, json!({"url": live.base()})).await;
    assert_eq!(status, 200, "a heartbeat");
    let (status, created) = api.get(&format!("/api/executors/{joined_group}")).await;
    assert_eq!(status, 200, "{created}");
    assert_eq!(
        created["routing"], "ROUND_ROBIN",
        "created with the defaults"
    );
    assert_eq!(created["members"][0]["registered"], true, "{created}");
    actix_rt::time::sleep(Duration::from_secs(4)).await;
    let mut expired = Value::Null;
    for _ in 0..80 {
        expired = member_of(&api, &joined_group, &live.base()).await;
        if expired["state"] == "GONE" {
            break;
        }
        actix_rt::time::sleep(Duration::from_millis(100)).await;
    }
    // Not heard from: dropped, and listed as GONE with when and why.
    assert_eq!(expired["state"], "GONE", "{expired}");
    assert!(expired["goneAt"].is_string(), "{expired}");
    let why = expired["goneReason"].as_str().unwrap_or_default();
    assert!(why.starts_with("expired"), "{expired}");
    let page = console_page(&ax, "/console/executors").await;
    assert!(page.contains(why), "the executors page says why");
    let dashboard = console_page(&ax, "/console").await;
    assert!(
        dashboard.contains(r#"<span class="badge idle">GONE</span>"#) && dashboard.contains(why),
        "the dashboard's attention list shows it"
    );
    // One that leaves is GONE too; back again, it is a member and no longer GONE.
    let (status, _) = api.post(&members, json!({"url": live.base()})).await;
    assert_eq!(status, 201, "joined again");
    assert_eq!(
        member_of(&api, &joined_group, &live.base()).await["state"],
        "HEALTHY"
    );
    let leave = format!("{members}?url={}", live.base());
    let (status, _) = api.call("DELETE", &leave, None).await;
    assert_eq!(status, 204);
    let left = member_of(&api, &joined_group, &live.base()).await;
    assert_eq!(
        (&left["state"], &left["goneReason"]),
        (&json!("GONE"), &json!("left: unregistered itself")),
        "{left}"
    );

    // A group with no member: the attempt fails NO_EXECUTOR and follows the retries.
    let empty = unique_name("empty");
    let (status, _) = api
        .call("PUT", &format!("/api/executors/{empty}"), Some(json!({})))
        .await;
    assert_eq!(status, 201);
    let lonely = api
        .create_task(json!({"name": unique_name("lonely"), "cron": "* * * * * *",
            "executor": {"group": empty}, "maxRetry": 0}))
        .await;
    let lonely = lonely["id"].as_i64().expect("id");
    let runs = api.wait_final(lonely, 1, Duration::from_secs(8)).await;
    let failed = runs
        .iter()
        .find(|r| r["status"] == "FAILED")
        .unwrap_or_else(|| panic!("a failed run: {runs:?}"));
    assert_eq!(failed["code"], "NO_EXECUTOR", "{failed}");
    ax.shutdown().await;
}

on_each_backend!(
    fleet,
    sqlite: a_group_routes_fails_over_and_keeps_members_on_sqlite,
    mariadb: a_group_routes_fails_over_and_keeps_members_on_mariadb,
    postgres: a_group_routes_fails_over_and_keeps_members_on_postgres
);

on_each_backend!(a_burst_is_held_to_each_members_cap_on, mariadb: a_burst_is_held_to_each_members_cap, postgres: a_burst_is_held_to_each_members_cap_on_postgres);

/// 200 runs due in one second on a group of 2 executors, each with a listen backlog of 5 and
/// `maxInFlight` 4: none waits on a dropped SYN (never more than 4 connections at once on
/// either), none fails, both serve.
async fn a_burst_is_held_to_each_members_cap_on(store: TestStore) {
    let mut config = config(&store, true, "burst");
    config.scheduler.backfill_per_sec = 1000;
    let ax = start_ax(&config).await;
    let api = Api::new(&ax);
    let (a, b) = (
        Executor::start_with_backlog(Reply::Slow(Duration::from_millis(20)), 5).await,
        Executor::start_with_backlog(Reply::Slow(Duration::from_millis(20)), 5).await,
    );
    let group = unique_name("burst");
    let (status, _) = api
        .call(
            "PUT",
            &format!("/api/executors/{group}"),
            Some(json!({"maxInFlight": 4, "members": [a.base(), b.base()]})),
        )
        .await;
    assert_eq!(status, 201);
    let task = api
        .create_task(json!({"name": unique_name("burst"), "cron": "* * * * * *",
            "executor": {"group": group, "path": "run"}, "enabled": false, "maxRetry": 0}))
        .await;
    let id = task["id"].as_i64().expect("id");
    let to = Utc::now() - chrono::Duration::seconds(1);
    let range = json!({"from": (to - chrono::Duration::seconds(200)).to_rfc3339(),
                       "to": to.to_rfc3339()});
    let (status, done) = api.post(&format!("/api/tasks/{id}/backfill"), range).await;
    assert_eq!(status, 202, "{done}");
    let total = done["runs"].as_u64().expect("runs") as usize;
    assert!(total >= 200, "{done}");
    let runs = api.wait_final(id, total, Duration::from_secs(30)).await;
    let succeeded = runs.iter().filter(|r| r["status"] == "SUCCESS").count();
    assert_eq!(succeeded, total, "none fails");
    assert!(
        a.most_at_once() <= 4 && b.most_at_once() <= 4,
        "{} {}",
        a.most_at_once(),
        b.most_at_once()
    );
    let served = |base: String| runs.iter().filter(|r| r["member"] == json!(base)).count();
    let (by_a, by_b) = (served(a.base()), served(b.base()));
    assert!(by_a > 0 && by_b > 0, "both serve: {by_a} and {by_b}");
    assert_eq!(by_a + by_b, total);
    ax.shutdown().await;
}

/// A member that refuses connections cools down, then takes one probe once it listens again and
/// is healthy from there on (FAILOVER goes back to it, the first in order).
#[actix_rt::test(system = "crate::common::TestSystem")]
async fn a_member_that_comes_back_is_probed_and_used_again() {
    let store = TestStore::sqlite();
    let mut config = config(&store, false, "flap");
    config.executors.cool_down_secs = 1;
    let ax = start_ax(&config).await;
    let api = Api::new(&ax);
    let backup = Executor::start(Reply::Success).await;
    let flappy = refusing_base();
    let group = unique_name("flap");
    let members = json!({"routing": "FAILOVER", "members": [flappy, backup.base()]});
    let (status, _) = api
        .call("PUT", &format!("/api/executors/{group}"), Some(members))
        .await;
    assert_eq!(status, 201);
    for _ in 0..3 {
        api.create_task(json!({"name": unique_name("flap"), "cron": "* * * * * *",
            "executor": {"group": group, "path": "/run"}, "maxRetry": 0}))
            .await;
    }
    backup.wait_for(6, Duration::from_secs(5)).await;
    let cooled = member_of(&api, &group, &flappy).await;
    // Cooling down, or (its 1 s over) probed: not healthy either way.
    assert_ne!(cooled["state"], "HEALTHY", "{cooled}");
    assert!(cooled["failures"].as_u64() >= Some(3), "{cooled}");

    let addr = flappy
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .to_string();
    let back = Executor::start_at(Reply::Success, &addr).await;
    let served = back.wait_for(6, Duration::from_secs(6)).await;
    assert!(
        served.len() >= 6,
        "the member is used again: {}",
        served.len()
    );
    let member = member_of(&api, &group, &flappy).await;
    assert_eq!(member["state"], "HEALTHY", "{member}");
    let before = backup.received().len();
    actix_rt::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        backup.received().len(),
        before,
        "FAILOVER stays on the first healthy"
    );
    ax.shutdown().await;
}

/// A job that fails is the job's outcome, not its member's health: the group's only member
/// answering `200 {"status":"FAILED"}` again and again stays HEALTHY, and another task on the
/// group is still dispatched to it (its runs fail with the job's code, never NO_EXECUTOR).
#[actix_rt::test(system = "crate::common::TestSystem")]
async fn a_failing_job_does_not_take_its_member_out() {
    let store = TestStore::sqlite();
    let ax = start_ax(&config(&store, false, &unique_name("failing"))).await;
    let api = Api::new(&ax);
    let only = Executor::start(Reply::Failed).await;
    let group = unique_name("failing");
    let (status, _) = api
        .call(
            "PUT",
            &format!("/api/executors/{group}"),
            Some(json!({"members": [only.base()]})),
        )
        .await;
    assert_eq!(status, 201);
    let failing = api
        .create_task(
            json!({"name": unique_name("failing"), "cron": "* * * * * *",
            "executor": {"group": group, "path": "/run"}, "maxRetry": 0}),
        )
        .await;
    let failing = failing["id"].as_i64().expect("id");
    let runs = api.wait_final(failing, 4, Duration::from_secs(10)).await;
    let failed = runs.iter().filter(|r| r["status"] == "FAILED").count();
    assert!(failed >= 4, "the job failed again and again: {runs:?}");
    assert!(runs.iter().all(|r| r["code"] != "NO_EXECUTOR"), "{runs:?}");
    let member = member_of(&api, &group, &only.base()).await;
    assert_eq!(member["state"], "HEALTHY", "{member}");
    assert_eq!(
        member["failures"], 0,
        "a reply is not a member failure: {member}"
    );

    let other = api
        .create_task(json!({"name": unique_name("other"), "cron": "* * * * * *",
            "executor": {"group": group, "path": "/run"}, "maxRetry": 0}))
        .await;
    let other = other["id"].as_i64().expect("id");
    let runs = api.wait_final(other, 2, Duration::from_secs(8)).await;
    assert!(runs.len() >= 2, "{runs:?}");
    for run in runs.iter().filter(|r| r["status"] == "FAILED") {
        assert_eq!(run["code"], "E1", "dispatched, and the job said so: {run}");
        assert_eq!(run["member"], json!(only.base()), "{run}");
    }
    let member = member_of(&api, &group, &only.base()).await;
    assert_eq!(member["state"], "HEALTHY", "{member}");
    ax.shutdown().await;
}

on_each_backend!(a_member_set_aside_by_one_process_is_set_aside_on_every_process_on, mariadb: a_member_set_aside_by_one_process_is_set_aside_on_every_process, postgres: a_member_set_aside_by_one_process_is_set_aside_on_every_process_on_postgres);

/// Member health is the cluster's: a member set aside by transport failures through one
/// `ax serve` process is UNHEALTHY, until the same time and with the same failure, on a second
/// process that never dispatched to it (its API, list and console page alike), and the second
/// does not send to it either.
async fn a_member_set_aside_by_one_process_is_set_aside_on_every_process_on(store: TestStore) {
    let dir = tempfile::tempdir().expect("dir");
    let run_id = unique_name("shared");
    let env = vec![
        ("AX_STORE_URL".to_string(), store.url()),
        ("AX_REDIS_URL".to_string(), redis_url()),
        ("AX_EXECUTOR_COOL_DOWN_SECS".to_string(), "120".to_string()),
    ];
    let one = AxProcess::start(dir.path(), &format!("{run_id}-a"), env.clone()).await;
    let api_one = Api::at(one.base());
    let live = Executor::start(Reply::Success).await;
    let refused = refusing_base();
    let group = unique_name("shared");
    let (status, _) = api_one
        .call(
            "PUT",
            &format!("/api/executors/{group}"),
            Some(json!({"routing": "FAILOVER", "members": [refused, live.base()]})),
        )
        .await;
    assert_eq!(status, 201);
    let task = api_one
        .create_task(json!({"name": unique_name("shared"), "cron": "* * * * * *",
            "executor": {"group": group, "path": "/run"}, "maxRetry": 0}))
        .await;
    let mut seen = Value::Null;
    for _ in 0..100 {
        seen = member_of(&api_one, &group, &refused).await;
        if seen["state"] == "UNHEALTHY" {
            break;
        }
        actix_rt::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(seen["state"], "UNHEALTHY", "{seen}");
    let (status, _) = api_one
        .call("DELETE", &format!("/api/tasks/{}", task["id"]), None)
        .await;
    assert_eq!(status, 204);
    // Its change written at the next second's refresh.
    actix_rt::time::sleep(Duration::from_millis(1500)).await;
    let seen = member_of(&api_one, &group, &refused).await;

    let two = AxProcess::start(dir.path(), &format!("{run_id}-b"), env).await;
    let api_two = Api::at(two.base());
    let mut there = Value::Null;
    for _ in 0..50 {
        there = member_of(&api_two, &group, &refused).await;
        if there["state"] == "UNHEALTHY" {
            break;
        }
        actix_rt::time::sleep(Duration::from_millis(100)).await;
    }
    for field in ["state", "unhealthyUntil", "lastFailureAt", "lastError"] {
        assert_eq!(there[field], seen[field], "{field}: {there} against {seen}");
    }
    assert!(seen["unhealthyUntil"].is_string(), "{seen}");
    assert_eq!(
        there["failures"], 0,
        "the second process never sent to it: {there}"
    );
    let (_, listed) = api_two.get("/api/executors").await;
    let listed = listed["items"]
        .as_array()
        .and_then(|groups| groups.iter().find(|g| g["name"] == json!(group)))
        .and_then(|g| g["members"].as_array())
        .and_then(|members| members.iter().find(|m| m["url"] == json!(refused)))
        .cloned()
        .unwrap_or(Value::Null);
    assert_eq!(listed["state"], "UNHEALTHY", "{listed}");
    let page = page_at(&two.base(), "/console/executors").await;
    assert!(
        page.contains(r#"<span class="badge bad">UNHEALTHY</span>"#),
        "{page}"
    );

    // The second process dispatches by it: its runs go to the live member, never trying the
    // member set aside.
    let task = api_two
        .create_task(json!({"name": unique_name("after"), "cron": "* * * * * *",
            "executor": {"group": group, "path": "/run"}, "maxRetry": 0}))
        .await;
    let runs = api_two
        .wait_final(task["id"].as_i64().expect("id"), 3, Duration::from_secs(10))
        .await;
    assert!(runs.iter().all(|r| r["status"] != "FAILED"), "{runs:?}");
    let there = member_of(&api_two, &group, &refused).await;
    assert_eq!(there["failures"], 0, "{there}");
    assert_eq!(there["state"], "UNHEALTHY", "{there}");
    drop((one, two));
}

on_each_backend!(consistent_hash_holds_across_a_cluster_and_a_joining_member_on, mariadb: consistent_hash_holds_across_a_cluster_and_a_joining_member, postgres: consistent_hash_holds_across_a_cluster_and_a_joining_member_on_postgres);

/// CONSISTENT_HASH keeps each task on one member, on two ax processes sharing MariaDB and
/// Redis, and a member that registers through one process is routed to by both; when it
/// joins, only tasks that move to it change member.
async fn consistent_hash_holds_across_a_cluster_and_a_joining_member_on(store: TestStore) {
    let (one, two) = (
        start_ax(&config(&store, true, &unique_name("hash-a"))).await,
        start_ax(&config(&store, true, &unique_name("hash-b"))).await,
    );
    let (api_one, api_two) = (Api::new(&one), Api::new(&two));
    let executors = [
        Executor::start(Reply::Success).await,
        Executor::start(Reply::Success).await,
        Executor::start(Reply::Success).await,
    ];
    let group = unique_name("hash");
    let (status, _) = api_one
        .call(
            "PUT",
            &format!("/api/executors/{group}"),
            Some(json!({"routing": "CONSISTENT_HASH",
                "members": [executors[0].base(), executors[1].base()]})),
        )
        .await;
    assert_eq!(status, 201);
    let mut ids = Vec::new();
    for _ in 0..12 {
        let task = api_one
            .create_task(json!({"name": unique_name("hashed"), "cron": "* * * * * *",
                "executor": {"group": group, "path": "/run"}, "maxRetry": 0}))
            .await;
        ids.push(task["id"].as_i64().expect("id"));
    }
    actix_rt::time::sleep(Duration::from_secs(4)).await;
    let placed = placement(&executors).await;
    for id in &ids {
        let on = placed.get(id).map(|members| members.len());
        assert_eq!(on, Some(1), "task {id} stays on one member: {placed:?}");
    }

    // The third member registers through the second process.
    let members = format!("/api/executors/{group}/members");
    let (status, _) = api_two
        .post(&members, json!({"url": executors[2].base()}))
        .await;
    assert_eq!(status, 201);
    let (_, seen) = api_one.get(&format!("/api/executors/{group}")).await;
    assert_eq!(seen["members"].as_array().map(Vec::len), Some(3), "{seen}");
    actix_rt::time::sleep(Duration::from_secs(2)).await;
    let cut = Utc::now();
    actix_rt::time::sleep(Duration::from_secs(3)).await;
    let after = placement_since(&executors, cut).await;
    let newcomer = 2;
    let mut moved = 0;
    for id in &ids {
        let was = placed[id].iter().next().copied();
        let now: Vec<usize> = after
            .get(id)
            .map(|m| m.iter().copied().collect())
            .unwrap_or_default();
        assert_eq!(
            now.len(),
            1,
            "task {id} on one member after the join: {now:?}"
        );
        if Some(now[0]) != was {
            assert_eq!(
                now[0], newcomer,
                "task {id} moved, but not to the new member"
            );
            moved += 1;
        }
    }
    assert!(
        moved < ids.len(),
        "most tasks stay where they were ({moved} moved)"
    );
    one.shutdown().await;
    two.shutdown().await;
}

/// Which members (by index) each task's runs reached.
async fn placement(executors: &[Executor]) -> HashMap<i64, HashSet<usize>> {
    placement_since(executors, chrono::DateTime::UNIX_EPOCH).await
}

async fn placement_since(
    executors: &[Executor],
    since: chrono::DateTime<Utc>,
) -> HashMap<i64, HashSet<usize>> {
    let mut placed: HashMap<i64, HashSet<usize>> = HashMap::new();
    for (n, executor) in executors.iter().enumerate() {
        for delivery in executor.received().iter().filter(|d| d.wall >= since) {
            if let Some(task) = delivery.body["taskId"].as_i64() {
                placed.entry(task).or_default().insert(n);
            }
        }
    }
    placed
}

on_each_backend!(a_broadcast_shards_a_fire_over_the_members_and_moves_a_killed_ones_shard_on, mariadb: a_broadcast_shards_a_fire_over_the_members_and_moves_a_killed_ones_shard, postgres: a_broadcast_shards_a_fire_over_the_members_and_moves_a_killed_ones_shard_on_postgres);

/// BROADCAST on two ax processes sharing MariaDB + Redis: a fire is one run per member
/// (shardIndex/shardTotal in each signed body, a request id per shard), fired once across the
/// cluster; a member killed while its shard runs has the shard moved to another member (same
/// request id and shard); a downstream task waits for every shard of the fire, and the run's
/// detail lists the fire's shards.
async fn a_broadcast_shards_a_fire_over_the_members_and_moves_a_killed_ones_shard_on(
    store: TestStore,
) {
    let ax = start_ax(&config(&store, true, &unique_name("broadcast-a"))).await;
    let other = start_ax(&config(&store, true, &unique_name("broadcast-b"))).await;
    let api = Api::new(&ax);
    let first = Executor::start(Reply::Success).await;
    let second = Executor::start(Reply::Success).await;
    let doomed = Executor::start(Reply::Slow(Duration::from_secs(60))).await;
    let group = unique_name("shards");
    let members = json!({"routing": "BROADCAST",
        "members": [first.base(), second.base(), doomed.base()]});
    let (status, created) = api
        .call("PUT", &format!("/api/executors/{group}"), Some(members))
        .await;
    assert_eq!(status, 201, "{created}");

    // Both tasks fire once, at the same second, three seconds ahead.
    let second_of_fire = (Utc::now() + chrono::Duration::seconds(3)).timestamp() % 60;
    let cron = format!("{second_of_fire} * * * * *");
    let upstream = api
        .create_task(json!({"name": unique_name("split"), "cron": cron,
            "executor": {"group": group, "path": "/run"}, "overlap": "SKIP",
            "maxRetry": 2, "retryBackoffSecs": 1, "timeoutMs": 120000}))
        .await;
    let up_id = upstream["id"].as_i64().expect("id");
    let downstream = api
        .create_task(json!({"name": unique_name("merge"), "cron": cron,
            "handlerUrl": first.url, "dependsOn": [up_id]}))
        .await;
    let down_id = downstream["id"].as_i64().expect("id");

    let doomed_got = doomed.wait_for(1, Duration::from_secs(10)).await;
    assert_eq!(doomed_got.len(), 1, "the third member gets its shard");
    let shard_of = |got: &[crate::common::Received]| -> (String, i64, i64) {
        let body = &got[0].body;
        let index = body["shardIndex"].as_i64().expect("shardIndex");
        let total = body["shardTotal"].as_i64().expect("shardTotal");
        (got[0].request_id.clone(), index, total)
    };
    let mut deliveries = vec![
        shard_of(&first.wait_for(1, Duration::from_secs(5)).await),
        shard_of(&second.wait_for(1, Duration::from_secs(5)).await),
        shard_of(&doomed_got),
    ];
    // Each member got the shard of its place in the group.
    assert_eq!(
        deliveries.iter().map(|d| (d.1, d.2)).collect::<Vec<_>>(),
        vec![(0, 3), (1, 3), (2, 3)]
    );
    let ids: HashSet<&String> = deliveries.iter().map(|d| &d.0).collect();
    assert_eq!(ids.len(), 3, "a request id per shard");
    let moved_id = deliveries.remove(2).0;

    // While a shard runs, the downstream run waits for the fire.
    actix_rt::time::sleep(Duration::from_millis(500)).await;
    let down_runs = api.instances(down_id).await;
    assert_eq!(down_runs.len(), 1, "{down_runs:?}");
    assert_eq!(down_runs[0]["status"], "PENDING", "{down_runs:?}");

    // Killed mid-run: its shard goes to another member, as the same run and shard.
    doomed.stop().await;
    let run = api
        .wait_status(
            &format!("/api/instances/{moved_id}"),
            "SUCCESS",
            Duration::from_secs(15),
        )
        .await;
    assert_eq!(
        (&run["shardIndex"], &run["shardTotal"]),
        (&json!(2), &json!(3))
    );
    assert!(
        run["member"] == json!(first.base()) || run["member"] == json!(second.base()),
        "{run}"
    );
    let redelivered: Vec<crate::common::Received> = first
        .received()
        .into_iter()
        .chain(second.received())
        .filter(|got| got.request_id == moved_id)
        .collect();
    assert_eq!(redelivered.len(), 1, "moved once");
    assert_eq!(redelivered[0].body["shardIndex"], 2);
    let shards = run["shards"].as_array().expect("shards").clone();
    assert_eq!(shards.len(), 3, "{run}");
    for (k, shard) in shards.iter().enumerate() {
        assert_eq!(shard["shardIndex"], k as i64, "{run}");
    }

    // Every shard done: the downstream run goes.
    let down = api
        .wait_status(
            &format!(
                "/api/instances/{}",
                down_runs[0]["requestId"].as_str().unwrap_or("?")
            ),
            "SUCCESS",
            Duration::from_secs(10),
        )
        .await;
    assert_eq!(down["taskId"], down_id);
    for shard in &shards {
        let id = shard["requestId"].as_str().unwrap_or("?");
        let (_, row) = api.get(&format!("/api/instances/{id}")).await;
        assert_eq!(row["status"], "SUCCESS", "{row}");
    }
    assert_eq!(api.instances(up_id).await.len(), 3, "one fire, three runs");
    // The console: each shard marked in the runs list, the fire's shards on a shard's page.
    let list = console_page(&ax, &format!("/console/runs?task={up_id}")).await;
    for k in 1..=3 {
        assert!(list.contains(&format!("shard {k}/3")), "{list}");
    }
    let detail = console_page(&ax, &format!("/console/runs/{moved_id}")).await;
    assert!(detail.contains("Shards of this fire"), "{detail}");
    assert!(detail.contains("3 of 3"), "{detail}");
    assert!(detail.contains("(this run)"), "{detail}");
    for shard in &shards {
        let id = shard["requestId"].as_str().unwrap_or("?");
        assert!(detail.contains(id), "shard {id} listed");
    }

    // A manual run is the whole job on one member: shard 0 of 1.
    let (status, manual) = api
        .post(&format!("/api/tasks/{up_id}/trigger"), json!({}))
        .await;
    assert_eq!(status, 201, "{manual}");
    let manual_id = manual["requestId"].as_str().unwrap_or("?").to_string();
    let manual_run = api
        .wait_status(
            &format!("/api/instances/{manual_id}"),
            "SUCCESS",
            Duration::from_secs(10),
        )
        .await;
    let sent: Vec<(&str, crate::common::Received)> = [("first", &first), ("second", &second)]
        .into_iter()
        .flat_map(|(name, member)| member.received().into_iter().map(move |got| (name, got)))
        .filter(|(_, got)| got.request_id == manual_id)
        .collect();
    // On failure, which member got each delivery, its attempt and arrival, and ax's record of
    // the run say which path sent it again.
    let arrivals: Vec<(&str, Value, chrono::DateTime<Utc>)> = sent
        .iter()
        .map(|(name, got)| (*name, got.body["attempt"].clone(), got.wall))
        .collect();
    assert_eq!(
        sent.len(),
        1,
        "deliveries {arrivals:?}; the run {manual_run}"
    );
    assert_eq!(
        (&sent[0].1.body["shardIndex"], &sent[0].1.body["shardTotal"]),
        (&json!(0), &json!(1))
    );
    ax.shutdown().await;
    other.shutdown().await;
}

/// An executor in its own process registers and heartbeats, serves its share, then dies by
/// SIGKILL: attempts sent its way fail over to the member left as the same attempt (no run
/// fails), and once it is not heard from for `member_ttl_secs` it is dropped from the group.
#[actix_rt::test(system = "crate::common::TestSystem")]
async fn a_registered_member_killed_by_sigkill_fails_over_and_expires() {
    use std::io::BufRead;
    let store = TestStore::sqlite();
    let mut config = config(&store, false, &unique_name("sigkill"));
    config.executors.member_ttl_secs = 3;
    let ax = start_ax(&config).await;
    let api = Api::new(&ax);
    let backup = Executor::start(Reply::Success).await;
    let group = unique_name("killed");
    let (status, _) = api
        .call(
            "PUT",
            &format!("/api/executors/{group}"),
            Some(json!({"routing": "ROUND_ROBIN", "members": [backup.base()]})),
        )
        .await;
    assert_eq!(status, 201);
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/member.py");
    let mut child = std::process::Command::new("python3")
        .args([script, &format!("http://{}", ax.addr()), &group])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("start the member process (python3)");
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("its URL");
    let member = line.trim().to_string();
    let task = api
        // A retry only for a run in flight at the very moment of the kill.
        .create_task(json!({"name": unique_name("spread"), "cron": "* * * * * *",
            "executor": {"group": group, "path": "/run"}, "maxRetry": 1,
            "retryBackoffSecs": 1}))
        .await;
    let id = task["id"].as_i64().expect("id");

    // It registered, heartbeats past the TTL and serves runs.
    let served_by = |runs: &[Value], who: &str| runs.iter().filter(|r| r["member"] == who).count();
    let mut runs = Vec::new();
    for _ in 0..100 {
        runs = api.instances(id).await;
        if served_by(&runs, &member) >= 2 {
            break;
        }
        actix_rt::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(served_by(&runs, &member) >= 2, "{runs:?}");
    let registered = member_of(&api, &group, &member).await;
    assert_eq!(registered["registered"], true, "{registered}");

    child.kill().expect("SIGKILL");
    child.wait().expect("reaped");
    let killed_at = Utc::now();
    // Not heard from for the TTL: dropped (listed as GONE, never dispatched to).
    let mut gone = false;
    for _ in 0..80 {
        gone = member_of(&api, &group, &member).await["state"] == "GONE";
        if gone {
            break;
        }
        actix_rt::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(gone, "the dead member expires");
    actix_rt::time::sleep(Duration::from_secs(1)).await;
    let runs = api.instances(id).await;
    let after: Vec<&Value> = runs
        .iter()
        .filter(|r| {
            r["scheduledAt"].as_str().is_some_and(|at| {
                chrono::DateTime::parse_from_rfc3339(at).is_ok_and(|at| at > killed_at)
            })
        })
        .filter(|r| r["status"] != "READY" && r["status"] != "RUNNING")
        .collect();
    assert!(after.len() >= 3, "runs went on: {runs:?}");
    for run in &after {
        assert_eq!(run["status"], "SUCCESS", "{run}");
        assert_eq!(run["member"], json!(backup.base()), "{run}");
        assert_eq!(run["attempt"], 1, "failed over inside the attempt: {run}");
    }
    assert!(
        runs.iter().all(|r| r["status"] != "FAILED"),
        "no run failed: {runs:?}"
    );
    ax.shutdown().await;
}
