//! Outages of the servers ax depends on, made with in-test TCP proxies in front of the shared
//! MariaDB, PostgreSQL and Redis (which keep running for everyone else): ax runs as a child
//! process whose store or lock goes through a proxy, every-second tasks fire into an in-test
//! executor, and the proxy is cut for 60 s. Afterwards the rows are read straight from the
//! database: no (task, second) has two rows, no run is lost, and every run was delivered.
//!
//! Also here: ax started while its Redis is down (a `redis-server` of the test's own comes up
//! later), and ax's MySQL connections go where the URL says, which is what lets a proxy stand in
//! for the server at all.

use ax_core::run::RunStatus;
use std::collections::HashMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use ax_store::rows::models::Run;
use ax_store::{Conn, Db};
use chrono::{DateTime, Utc};
use diesel_async::RunQueryDsl;
use serde_json::json;

use crate::common::{
    free_port, host_port, mysql_server, on_each_backend, one_row_per_second, redis_database,
    redis_server, redis_url, rows_of, Api, AxProcess, Executor, Proxy, Received, RedisProcess,
    Reply, TestStore,
};

const TASKS: usize = 4;
const OUTAGE: Duration = Duration::from_secs(60);
/// Firing before the cut, so the outage falls between steady runs.
const WARM_UP: Duration = Duration::from_secs(4);
/// The missed-run grace: a run at most this late fired by itself, on time.
const GRACE_SECS: i64 = 2;

#[derive(diesel::QueryableByName)]
struct Session {
    #[diesel(sql_type = diesel::sql_types::Text)]
    host: String,
}

#[actix_rt::test(system = "crate::common::TestSystem")]
async fn mysql_connects_to_the_host_and_port_of_its_url() {
    let proxy = Proxy::start(&host_port(mysql_server())).await;
    let store = TestStore::mysql();
    let db = Db::connect(&store.url_through(&proxy), 2)
        .await
        .unwrap_or_else(|err| panic!("connect through the proxy: {err}"));
    let mut conn = db.conn().await.expect("a pooled connection");
    let Conn::Mysql(mysql) = &mut conn else {
        panic!("a mysql:// URL gave a {} pool", db.backend());
    };
    // The server names a TCP client `address:port` and a socket client `localhost`.
    let session: Session = diesel::sql_query(
        "SELECT host FROM information_schema.processlist WHERE id = CONNECTION_ID()",
    )
    .get_result(&mut **mysql)
    .await
    .expect("query through the proxy");
    let port: u16 = session
        .host
        .rsplit_once(':')
        .and_then(|(_, port)| port.parse().ok())
        .unwrap_or_else(|| panic!("not a TCP session: host `{}`", session.host));
    assert!(
        proxy.upstream_ports().contains(&port),
        "the session ({}) did not come through the proxy (its connections: {:?})",
        session.host,
        proxy.upstream_ports()
    );
    // Migrations and the pool each connected through it.
    assert!(proxy.forwarded() >= 2, "forwarded {}", proxy.forwarded());
}

/// An ax child process with every-second tasks, its log kept under the target folder.
struct Scene {
    ax: AxProcess,
    api: Api,
    executor: Executor,
    tasks: Vec<i64>,
    log: PathBuf,
}

impl Scene {
    async fn start(name: &str, store_url: String, redis_url: String) -> Scene {
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("outage-{name}-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&dir).expect("log folder");
        let env = vec![
            ("AX_STORE_URL".to_string(), store_url),
            ("AX_REDIS_URL".to_string(), redis_url),
            ("AX_STORE_POOL_SIZE".to_string(), "4".to_string()),
            ("AX_STORE_BATCH_INTERVAL_MS".to_string(), "100".to_string()),
            // Debug for the wheel: lock conflicts and stale fires, to explain a lost run.
            (
                "RUST_LOG".to_string(),
                "warn,ax=info,ax_server::actors::wheel=debug".to_string(),
            ),
        ];
        let executor = Executor::start(Reply::Success).await;
        let ax = AxProcess::start(&dir, name, env).await;
        let log = ax.log_path();
        println!("{name}: ax log at {}", log.display());
        let api = Api::at(ax.base());
        let mut tasks = Vec::new();
        for i in 0..TASKS {
            let task = api
                .create_task(json!({
                    "name": format!("{name}-{i}"), "cron": "* * * * * *",
                    "handlerUrl": executor.url, "maxRetry": 0, "timeoutMs": 2000,
                }))
                .await;
            tasks.push(task["id"].as_i64().expect("task id"));
        }
        Scene {
            ax,
            api,
            executor,
            tasks,
            log,
        }
    }

    fn log_lines(&self, containing: &str) -> usize {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .filter(|line| line.contains(containing))
            .count()
    }

    /// Fails if ax is no longer running.
    fn assert_running(&mut self) {
        if let Some(status) = self.ax.exited() {
            panic!(
                "ax ended during the test ({status}); see {}",
                self.log.display()
            );
        }
    }

    /// Stops ax cleanly (it must exit 0) and the executor; returns every delivery.
    async fn stop(mut self) -> Vec<Received> {
        self.assert_running();
        let log = self.log.clone();
        assert_eq!(
            self.ax.terminate().await,
            Some(0),
            "a clean shutdown exits 0; see {}",
            log.display()
        );
        let received = self.executor.received();
        self.executor.stop().await;
        received
    }
}

fn lateness_secs(row: &Run) -> i64 {
    (row.trigger_at - row.scheduled_at).num_seconds()
}

/// Checks deliveries against rows: each delivered request id is one row of the same task and
/// second, each run was delivered under one request id, and every row was delivered. Returns
/// the deliveries per request id.
fn deliveries_match_rows(rows: &[&Run], received: &[Received]) -> HashMap<String, usize> {
    let by_request: HashMap<&str, &Run> =
        rows.iter().map(|r| (r.request_id.as_str(), *r)).collect();
    assert_eq!(by_request.len(), rows.len(), "request ids are unique");
    let mut delivered: HashMap<String, usize> = HashMap::new();
    for delivery in received {
        assert_eq!(
            delivery.header_request_id, delivery.request_id,
            "header and body name the same run"
        );
        let row = by_request
            .get(delivery.request_id.as_str())
            .unwrap_or_else(|| panic!("delivery without a row: {}", delivery.body));
        assert_eq!(delivery.body["taskId"].as_i64(), Some(row.task_id.0));
        let scheduled = delivery.body["scheduledAt"]
            .as_str()
            .and_then(|at| DateTime::parse_from_rfc3339(at).ok())
            .expect("scheduledAt");
        assert_eq!(
            scheduled.timestamp(),
            row.scheduled_at.and_utc().timestamp(),
            "delivery {} is of its row's second",
            delivery.request_id
        );
        *delivered.entry(delivery.request_id.clone()).or_default() += 1;
    }
    for row in rows {
        assert!(
            delivered.contains_key(row.request_id.as_str()),
            "run never delivered: {row:?}"
        );
    }
    delivered
}

/// How late, at most, runs scheduled between `from` and `to` reached the executor.
fn worst_delivery_lag(received: &[Received], from: DateTime<Utc>, to: DateTime<Utc>) -> f64 {
    received
        .iter()
        .filter_map(|d| {
            let scheduled = DateTime::parse_from_rfc3339(d.body["scheduledAt"].as_str()?).ok()?;
            let scheduled = scheduled.with_timezone(&Utc);
            (from <= scheduled && scheduled <= to)
                .then(|| (d.wall - scheduled).num_milliseconds() as f64 / 1000.0)
        })
        .fold(0.0, f64::max)
}

on_each_backend!(redis_down_for_60_s_loses_no_run_and_duplicates_none_on, mariadb: redis_down_for_60_s_loses_no_run_and_duplicates_none, postgres: redis_down_for_60_s_loses_no_run_and_duplicates_none_on_postgres);

/// Redis goes away for 60 s: the fire lock is unavailable, so ax fires unlocked on the
/// database's compare-and-set, and every second of every task still has exactly one run,
/// delivered once.
async fn redis_down_for_60_s_loses_no_run_and_duplicates_none_on(store: TestStore) {
    let started = Instant::now();
    let redis = Proxy::start(&host_port(redis_server())).await;
    let scene = Scene::start(
        "redis-outage",
        store.url(),
        format!("redis://{}/{}", redis.addr, redis_database()),
    )
    .await;
    actix_rt::time::sleep(WARM_UP).await;
    let cut = Utc::now();
    redis.cut();
    actix_rt::time::sleep(OUTAGE).await;
    redis.restore();
    let restored = Utc::now();
    let refused = redis.refused();
    actix_rt::time::sleep(Duration::from_secs(5)).await;
    let unlocked = scene.log_lines("firing unlocked");
    let (tasks, log) = (scene.tasks.clone(), scene.log.clone());
    let received = scene.stop().await;

    assert!(
        refused > 0,
        "ax did not try Redis during the outage (no connection refused)"
    );
    assert!(
        unlocked > 0,
        "ax never fired unlocked: was Redis really cut?"
    );
    let db = Db::connect(&store.url(), 2).await.expect("store");
    let mut all = Vec::new();
    for &task_id in &tasks {
        all.push(rows_of(&db, task_id).await);
    }
    let mut in_outage = 0;
    for (&task_id, rows) in tasks.iter().zip(&all) {
        let by_second = one_row_per_second(task_id, rows);
        let seconds: Vec<i64> = by_second.keys().copied().collect();
        let (first, last) = (seconds[0], seconds[seconds.len() - 1]);
        assert!(
            first <= cut.timestamp() - 2 && last >= restored.timestamp() + 2,
            "task {task_id}: fired from {first} to {last}, around an outage from {} to {}",
            cut.timestamp(),
            restored.timestamp()
        );
        let lost: Vec<i64> = (first..=last)
            .filter(|s| !by_second.contains_key(s))
            .collect();
        assert!(
            lost.is_empty(),
            "task {task_id}: no run for seconds {lost:?} (outage from {} to {}); see {}",
            cut.timestamp(),
            restored.timestamp(),
            log.display()
        );
        for row in rows {
            assert_eq!(row.status, RunStatus::Success, "task {task_id}: {row:?}");
            assert!(
                lateness_secs(row) <= GRACE_SECS,
                "task {task_id}: fired late, as a catch-up: {row:?}"
            );
        }
        in_outage += seconds
            .iter()
            .filter(|&&s| cut.timestamp() < s && s < restored.timestamp())
            .count();
    }
    let rows: Vec<&Run> = all.iter().flatten().collect();
    let delivered = deliveries_match_rows(&rows, &received);
    let twice: Vec<_> = delivered.iter().filter(|(_, &n)| n > 1).collect();
    assert!(twice.is_empty(), "runs delivered twice: {twice:?}");
    let lag = worst_delivery_lag(&received, cut, restored);
    println!(
        "redis outage: {} s cut, {refused} Redis connections refused, {unlocked} unlocked \
         fires logged; {} rows ({in_outage} scheduled during the outage), {} deliveries, 0 \
         duplicate rows, 0 lost, 0 duplicate deliveries; worst delivery lag during the outage \
         {lag:.2} s; {:.0} s in all",
        (restored - cut).num_seconds(),
        rows.len(),
        received.len(),
        started.elapsed().as_secs_f64()
    );
}

on_each_backend!(ax_started_while_redis_is_down_fires_and_takes_redis_up_when_it_answers_on, mariadb: ax_started_while_redis_is_down_fires_and_takes_redis_up_when_it_answers, postgres: ax_started_while_redis_is_down_fires_and_takes_redis_up_when_it_answers_on_postgres);

/// ax started while its Redis is down starts all the same: `/healthz` answers 200 and names
/// Redis down, and the tasks fire unlocked, every run delivered. When a Redis comes up on that
/// port, ax takes it up by itself: `/healthz` says so, its heartbeat is there, its fire locks
/// are taken and released there (and no more fire goes unlocked), and no second of any task
/// has two rows or none.
async fn ax_started_while_redis_is_down_fires_and_takes_redis_up_when_it_answers_on(
    store: TestStore,
) {
    let port = free_port();
    let mut scene = Scene::start(
        "redis-down-at-start",
        store.url(),
        format!("redis://127.0.0.1:{port}"),
    )
    .await;
    let (status, health) = scene.api.get("/healthz").await;
    assert_eq!(
        (status, &health["redis"]),
        (200, &json!("down")),
        "{health}"
    );
    let delivered_down = scene
        .executor
        .wait_for(3 * TASKS, Duration::from_secs(10))
        .await
        .len();
    assert!(
        delivered_down >= 3 * TASKS,
        "{delivered_down} runs delivered with Redis down; see {}",
        scene.log.display()
    );
    let (status, health) = scene.api.get("/healthz").await;
    assert_eq!(
        (status, &health["redis"]),
        (200, &json!("down")),
        "{health}"
    );
    assert!(scene.log_lines("firing unlocked") > 0, "fired unlocked");

    let redis = RedisProcess::start(port, &[]).await;
    let came = Instant::now();
    let up_after = loop {
        let (status, health) = scene.api.get("/healthz").await;
        if health["redis"] == "up" {
            assert_eq!(status, 200, "{health}");
            break came.elapsed();
        }
        assert!(
            came.elapsed() < Duration::from_secs(10),
            "/healthz still says {health} 10 s after Redis came up; see {}",
            scene.log.display()
        );
        actix_rt::time::sleep(Duration::from_millis(100)).await;
    };
    let mut conn = redis.conn().await;
    let heartbeat = format!("ax:instance:{}", scene.ax.instance_id);
    let beat_after = loop {
        let beat: Option<String> = redis::cmd("GET")
            .arg(&heartbeat)
            .query_async(&mut conn)
            .await
            .expect("GET");
        if beat.is_some() {
            break came.elapsed();
        }
        assert!(
            came.elapsed() < Duration::from_secs(10),
            "no {heartbeat} in the Redis that came up"
        );
        actix_rt::time::sleep(Duration::from_millis(100)).await;
    };
    // Past the fire batches that were under way when it came.
    actix_rt::time::sleep(Duration::from_secs(1)).await;
    let unlocked = scene.log_lines("firing unlocked");
    actix_rt::time::sleep(Duration::from_secs(3)).await;
    scene.assert_running();
    assert_eq!(
        scene.log_lines("firing unlocked"),
        unlocked,
        "fires went unlocked with Redis up; see {}",
        scene.log.display()
    );
    // Each take of a lock is released by a script: its calls are the fire locks' own.
    let stats: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(&mut conn)
        .await
        .expect("INFO");
    let releases = stats
        .lines()
        .find_map(|line| line.strip_prefix("cmdstat_eval:calls="))
        .and_then(|rest| rest.split(',').next())
        .and_then(|calls| calls.parse::<u64>().ok())
        .unwrap_or(0);
    assert!(releases > 0, "no fire lock released in Redis: {stats}");
    let tasks = scene.tasks.clone();
    let received = scene.stop().await;

    let db = Db::connect(&store.url(), 2).await.expect("store");
    let mut all = Vec::new();
    for &task_id in &tasks {
        let rows = rows_of(&db, task_id).await;
        let by_second = one_row_per_second(task_id, &rows);
        let seconds: Vec<i64> = by_second.keys().copied().collect();
        let lost: Vec<i64> = (seconds[0]..=seconds[seconds.len() - 1])
            .filter(|s| !by_second.contains_key(s))
            .collect();
        assert!(lost.is_empty(), "task {task_id}: no run for {lost:?}");
        for row in &rows {
            assert_eq!(row.status, RunStatus::Success, "task {task_id}: {row:?}");
        }
        all.extend(rows);
    }
    let rows: Vec<&Run> = all.iter().collect();
    let delivered = deliveries_match_rows(&rows, &received);
    let twice: Vec<_> = delivered.iter().filter(|(_, &n)| n > 1).collect();
    assert!(twice.is_empty(), "runs delivered twice: {twice:?}");
    println!(
        "redis down at start: {delivered_down} deliveries with Redis down; /healthz said up \
         {:.1} s and the heartbeat was in Redis {:.1} s after it came; {releases} lock releases \
         there; {} rows, {} deliveries, 0 duplicate rows, 0 lost",
        up_after.as_secs_f64(),
        beat_after.as_secs_f64(),
        rows.len(),
        received.len()
    );
}

on_each_backend!(
    the_database_unreachable_for_60_s_catches_up_once_per_task,
    mariadb: mariadb_unreachable_for_60_s_catches_up_once_per_task,
    postgres: postgres_unreachable_for_60_s_catches_up_once_per_task
);

/// The database becomes unreachable for 60 s: nothing can be committed, so nothing fires; when
/// it returns, each task's missed seconds collapse into one catch-up run (the missed-run
/// policy, within `misfireThresholdSecs`) and firing goes on every second. Runs committed
/// before the cut are all dispatched and finished, ax stays up, and no (task, second) has two
/// rows.
async fn the_database_unreachable_for_60_s_catches_up_once_per_task(store: TestStore) {
    let started = Instant::now();
    let server = Proxy::start(&host_port(store.server())).await;
    let mut scene = Scene::start(
        &format!("{}-outage", store.backend()),
        store.url_through(&server),
        redis_url(),
    )
    .await;
    // The test's own connection goes to the server directly, around the proxy.
    let db = Db::connect(&store.url(), 2).await.expect("store");
    actix_rt::time::sleep(WARM_UP).await;
    let cut = Utc::now();
    server.cut();
    // What the server holds once the cut connections are gone: the runs committed before it.
    actix_rt::time::sleep(Duration::from_millis(300)).await;
    let mut committed_before = Vec::new();
    for &task_id in &scene.tasks {
        committed_before.push(rows_of(&db, task_id).await);
    }
    actix_rt::time::sleep(OUTAGE - Duration::from_millis(300)).await;
    let healthy_during = scene.api.try_call("GET", "/healthz", None).await;
    server.restore();
    let restored = Utc::now();
    let refused = server.refused();

    // Back: firing resumes, and the runs caught by the cut finish.
    let deadline = Instant::now() + Duration::from_secs(25);
    loop {
        let now = Utc::now();
        let mut settled = now - restored >= chrono::Duration::seconds(5);
        for &task_id in &scene.tasks {
            let rows = rows_of(&db, task_id).await;
            let due = rows
                .iter()
                .filter(|r| r.scheduled_at.and_utc() < now - chrono::Duration::seconds(2));
            settled &= due.clone().all(|r| r.status == RunStatus::Success)
                && rows
                    .iter()
                    .any(|r| r.scheduled_at.and_utc() > restored + chrono::Duration::seconds(3));
        }
        if settled || Instant::now() > deadline {
            break;
        }
        actix_rt::time::sleep(Duration::from_millis(250)).await;
    }
    let recovered_in = Utc::now() - restored;
    scene.assert_running();
    let (health, _) = scene.api.get("/healthz").await;
    assert_eq!(health, 200, "ax answers /healthz after the outage");
    let catch_up_logs = scene.log_lines("firing it once for every missed period");
    let tasks = scene.tasks.clone();
    let received = scene.stop().await;

    assert!(
        refused > 0,
        "ax did not try the database during the outage (no connection refused)"
    );
    let mut all = Vec::new();
    for &task_id in &tasks {
        all.push(rows_of(&db, task_id).await);
    }
    let mut catch_ups = Vec::new();
    for ((&task_id, rows), before) in tasks.iter().zip(&all).zip(&committed_before) {
        let by_second = one_row_per_second(task_id, rows);
        // Nothing committed before the cut is lost, and it all ran to the end.
        for old in before {
            let now = rows
                .iter()
                .find(|r| r.request_id == old.request_id)
                .unwrap_or_else(|| {
                    panic!("task {task_id}: run committed before the cut lost: {old:?}")
                });
            assert_eq!(now.status, RunStatus::Success, "task {task_id}: {now:?}");
        }
        let last_before = before
            .iter()
            .map(|r| r.scheduled_at.and_utc().timestamp())
            .max()
            .expect("runs before the cut");
        for row in rows {
            assert_eq!(row.status, RunStatus::Success, "task {task_id}: {row:?}");
        }
        // Seconds follow each other but once: the outage, bridged by one catch-up row.
        let seconds: Vec<i64> = by_second.keys().copied().collect();
        let gaps: Vec<(i64, i64)> = seconds
            .windows(2)
            .map(|pair| (pair[0], pair[1]))
            .filter(|(a, b)| b - a > 1)
            .collect();
        let [(bridge, resumed)] = gaps.as_slice() else {
            panic!("task {task_id}: one gap in its seconds expected, found {gaps:?}");
        };
        let catch_up = by_second[bridge];
        assert_eq!(
            *bridge,
            last_before + 1,
            "task {task_id}: the catch-up is the first run the cut kept from committing"
        );
        assert!(
            lateness_secs(catch_up) > GRACE_SECS,
            "task {task_id}: the row before the gap is no catch-up: {catch_up:?}"
        );
        let caught_at = catch_up.trigger_at.and_utc();
        assert!(
            restored - chrono::Duration::seconds(1) <= caught_at
                && caught_at <= restored + chrono::Duration::seconds(15),
            "task {task_id}: caught up at {caught_at}, restored at {restored}"
        );
        assert!(
            *resumed <= caught_at.timestamp() + 1,
            "task {task_id}: seconds lost after the catch-up at {caught_at}: resumed at {resumed}"
        );
        // No other row is late: every other second fired by itself.
        let late: Vec<_> = rows
            .iter()
            .filter(|r| lateness_secs(r) > GRACE_SECS && r.request_id != catch_up.request_id)
            .collect();
        assert!(late.is_empty(), "task {task_id}: late runs {late:?}");
        assert!(
            seconds[0] <= cut.timestamp() - 2
                && seconds[seconds.len() - 1] >= restored.timestamp() + 3,
            "task {task_id}: fired from {} to {}, around an outage from {cut} to {restored}",
            seconds[0],
            seconds[seconds.len() - 1]
        );
        catch_ups.push((
            lateness_secs(catch_up),
            (caught_at - restored).num_milliseconds() as f64 / 1000.0,
        ));
    }
    let rows: Vec<&Run> = all.iter().flatten().collect();
    let delivered = deliveries_match_rows(&rows, &received);
    let again: usize = delivered.values().map(|n| n - 1).sum();
    let before: Vec<&Run> = committed_before.iter().flatten().collect();
    let open_at_cut = before
        .iter()
        .filter(|r| r.status != RunStatus::Success)
        .count();
    println!(
        "{} outage: {} s cut, {refused} connections refused; {} rows, {} deliveries \
         ({again} repeated: results the cut kept from committing), {} catch-up runs \
         ((lateness s, s after the restore): {catch_ups:?}), {catch_up_logs} catch-up plans \
         logged; {} runs committed before the cut ({open_at_cut} of them still open at the \
         cut) all finished; 0 duplicate rows; /healthz during the outage: {:?}; settled \
         {:.1} s after the restore; {:.0} s in all",
        store.backend(),
        (restored - cut).num_seconds(),
        rows.len(),
        received.len(),
        catch_ups.len(),
        before.len(),
        healthy_during.map(|(status, _)| status),
        recovered_in.num_milliseconds() as f64 / 1000.0,
        started.elapsed().as_secs_f64()
    );
}
