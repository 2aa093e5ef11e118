//! `crates/ax-store/src/lib.rs`: connecting (migrations, the folders of a SQLite file, bad store URLs,
//! a URL of several servers)
//! and the conversion of times to and from the database (`to_db`, `from_db`).

use ax_core::ids::SceneName;
use std::time::{Duration, Instant};

use ax_core::run::{Event, RunStatus};
use ax_store::queries::runs::FireOutcome;
use ax_store::queries::tasks::{self, TaskFilter};
use ax_store::rows::models::TaskStatus;
use ax_store::{from_db, to_db, Db, Dialer, StoreError, StoreUrl};
use chrono::{DateTime, Timelike, Utc};

use crate::common::{
    config, free_port, mysql_server_after, on_each_backend, start_ax, Api, Executor, Reply,
    TestStore,
};
use crate::store::support::{
    applied, base, conn, connect, decide, fields, find_task, fire_record, ids, insert_run,
    insert_task, instance, new_instance, on_every_backend, page, record, request_id,
};

on_every_backend!(times_round_trip_exactly);

async fn migrations_are_idempotent(store: TestStore) {
    let first = connect(&store).await;
    let task = insert_task(
        &first,
        fields("kept", "s", TaskStatus::Enabled, Some(base())),
    )
    .await;
    drop(first);
    // A second start-up finds the schema in place and applies nothing; the data survives.
    let second = connect(&store).await;
    let found = find_task(&second, task.id)
        .await
        .expect("the task survives a second connect");
    assert_eq!(found.name, "kept");
    let applied = ax_store::run_migrations(ax_store::StoreUrl::parse(&store.url()).expect("url"))
        .await
        .expect("running migrations a third time is a no-op");
    assert!(applied.is_empty(), "{applied:?}");
    let (rows, total) = tasks::list(
        &mut conn(&second).await,
        &TaskFilter::default(),
        page(10, 0),
    )
    .await
    .expect("list");
    assert_eq!((ids(&rows), total), (vec![task.id], 1));
    if let TestStore::Sqlite(dir) = &store {
        assert!(dir.path().join("ax.db").is_file(), "the SQLite file exists");
    }
}

on_each_backend!(
    migrations_are_idempotent,
    sqlite: migrations_are_idempotent_sqlite,
    mariadb: migrations_are_idempotent_mysql,
    postgres: migrations_are_idempotent_postgres
);

/// The PostgreSQL store so far: created with its schema, pooled, a task kept and read back,
/// its clock the cluster's reference.
#[actix_rt::test(system = "crate::common::TestSystem")]
async fn a_postgres_store_is_created_and_keeps_a_task() {
    let database = crate::common::PostgresDatabase::new();
    let db = Db::connect(&database.url(), 4)
        .await
        .expect("connect to PostgreSQL");
    assert_eq!(db.backend(), "postgres");
    let task = insert_task(&db, fields("kept", "s", TaskStatus::Enabled, Some(base()))).await;
    let again = insert_task(&db, fields("next", "s", TaskStatus::Enabled, Some(base()))).await;
    assert_eq!(
        again.id.0,
        task.id.0 + 1,
        "ids from the task's own sequence"
    );
    drop(db);
    let db = Db::connect(&database.url(), 4).await.expect("reconnect");
    assert_eq!(
        find_task(&db, task.id).await.map(|t| t.name).as_deref(),
        Some("kept")
    );
    let applied = ax_store::run_migrations(StoreUrl::parse(&database.url()).expect("url"))
        .await
        .expect("migrations again");
    assert!(applied.is_empty(), "{applied:?}");
    let now = ax_store::queries::meta::reference_time(&mut conn(&db).await)
        .await
        .expect("the database's clock");
    assert!((now - Utc::now()).num_seconds().abs() < 5, "{now}");
}

#[actix_rt::test(system = "crate::common::TestSystem")]
async fn sqlite_connect_creates_missing_folders() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("a/b/ax.db");
    let db = Db::connect(&format!("sqlite://{}", path.display()), 2)
        .await
        .unwrap_or_else(|err| panic!("connect: {err}"));
    assert_eq!(db.backend(), "sqlite");
    assert!(path.is_file());
}

async fn connect_error(url: &str) -> StoreError {
    let started = Instant::now();
    let outcome = Db::connect(url, 2).await;
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "{url}: took {:?}",
        started.elapsed()
    );
    match outcome {
        Ok(db) => panic!("{url}: connected to {}", db.backend()),
        Err(err) => err,
    }
}

#[actix_rt::test(system = "crate::common::TestSystem")]
async fn connect_rejects_unsupported_urls() {
    for url in [
        "postgres://x",
        "bogus://x",
        "sqlite://",
        "mysql://127.0.0.1:3306",
        "mysql://127.0.0.1:3306/",
        "",
    ] {
        let err = connect_error(url).await;
        assert!(matches!(err, StoreError::BadUrl(_)), "{url}: {err:?}");
        let message = err.to_string();
        assert!(
            message.contains("unsupported store URL"),
            "{url}: {message}"
        );
        assert!(message.contains(&format!("`{url}`")), "{url}: {message}");
        assert!(
            message.contains("sqlite://"),
            "names the accepted forms: {message}"
        );
    }
}

#[actix_rt::test(system = "crate::common::TestSystem")]
async fn connect_reports_an_unreachable_mysql() {
    let err = connect_error("mysql://root@127.0.0.1:1/nope").await;
    assert!(matches!(err, StoreError::Connect(_)), "{err:?}");
    let message = err.to_string();
    assert!(
        message.starts_with("cannot connect to the store"),
        "{message}"
    );
    assert!(
        message.len() > "cannot connect to the store: ".len(),
        "{message}"
    );
}

#[actix_rt::test(system = "crate::common::TestSystem")]
async fn connect_reports_an_unwritable_sqlite_path() {
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("plain-file");
    std::fs::write(&file, b"not a folder").expect("write");
    // The store's folder would have to be created under a regular file.
    let err = connect_error(&format!("sqlite://{}/ax.db", file.display())).await;
    assert!(matches!(err, StoreError::Connect(_)), "{err:?}");
    assert!(err.to_string().contains("plain-file"), "{err}");
}

/// A store URL whose first server is down (a closed port) and whose second never answers (a
/// port that accepts, in the kernel, and never greets): ax connects to the third, serves and
/// fires; the wait on the silent one is bounded.
#[actix_rt::test(system = "crate::common::TestSystem")]
async fn a_store_url_whose_first_servers_do_not_answer_reaches_the_next() {
    let store = TestStore::mysql();
    let TestStore::Mysql(name) = &store else {
        unreachable!("a MariaDB store")
    };
    let silent = std::net::TcpListener::bind("127.0.0.1:0").expect("listener");
    let silent = silent.local_addr().expect("address");
    let closed = free_port();
    let url = mysql_server_after(&[format!("127.0.0.1:{closed}"), silent.to_string()], name);
    let mut config = config(&store, false, "multi-host");
    config.store.url = url;
    let started = Instant::now();
    let ax = start_ax(&config).await;
    let took = started.elapsed();
    // Each dial of the silent server waits 2 s: the migrations', the pool's, the identity's.
    assert!(took < Duration::from_secs(10), "started in {took:?}");
    let executor = Executor::start(Reply::Success).await;
    let api = Api::new(&ax);
    let task = api
        .create_task(serde_json::json!({
            "name": "multi-host", "cron": "* * * * * *", "handlerUrl": executor.url,
        }))
        .await;
    let received = executor.wait_for(2, Duration::from_secs(8)).await;
    assert!(received.len() >= 2, "{} deliveries", received.len());
    assert_eq!(received[0].body["taskId"], task["id"]);
    executor.stop().await;
}

/// Once a server other than the first has answered, new connections go to it first (those of
/// a clone of the dialer too): a server that failed is not dialled again while it answers.
#[actix_rt::test(system = "crate::common::TestSystem")]
async fn connections_go_to_the_server_that_answered_last() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    let store = TestStore::mysql();
    let TestStore::Mysql(name) = &store else {
        unreachable!("a MariaDB store")
    };
    // The database exists before the dialer needs it.
    drop(Db::connect(&store.url(), 1).await.expect("store"));
    // A server that hangs up at once, counting the dials.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("listener");
    let hanging_up = listener.local_addr().expect("address");
    let dials = Arc::new(AtomicUsize::new(0));
    let counted = dials.clone();
    actix_rt::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            counted.fetch_add(1, Ordering::SeqCst);
            drop(stream);
        }
    });
    let url = mysql_server_after(&[hanging_up.to_string()], name);
    let StoreUrl::Mysql(hosts) = StoreUrl::parse(&url).expect("url") else {
        panic!("{url}: a MySQL URL")
    };
    let live = hosts.urls()[1].clone();
    let dialer = Dialer::new(hosts);
    assert_eq!(dialer.current(), hosts_first(&url));
    dialer.connect().await.expect("the second server answers");
    assert_eq!(dials.load(Ordering::SeqCst), 1, "the first was tried");
    assert_eq!(dialer.current(), live);
    dialer.connect().await.expect("again");
    dialer.clone().connect().await.expect("through a clone");
    assert_eq!(dials.load(Ordering::SeqCst), 1, "and not again");
}

/// The connection URL of the first server `url` lists.
fn hosts_first(url: &str) -> String {
    match StoreUrl::parse(url) {
        Ok(StoreUrl::Mysql(hosts)) => hosts.urls()[0].clone(),
        other => panic!("{url}: {other:?}"),
    }
}

fn utc(rfc3339: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(rfc3339)
        .unwrap_or_else(|err| panic!("{rfc3339}: {err}"))
        .with_timezone(&Utc)
}

#[test]
fn to_db_truncates_to_milliseconds_in_utc() {
    let t = utc("2027-02-03T04:05:06.123456789Z");
    let stored = to_db(t);
    assert_eq!(stored.nanosecond(), 123_000_000);
    assert_eq!(from_db(stored), utc("2027-02-03T04:05:06.123Z"));
    // Truncated, never rounded up into the next second.
    assert_eq!(
        from_db(to_db(utc("2027-02-03T04:05:06.9999999Z"))),
        utc("2027-02-03T04:05:06.999Z")
    );
    // An offset is converted to UTC.
    assert_eq!(
        to_db(utc("2027-02-03T06:05:06.5+02:00")),
        utc("2027-02-03T04:05:06.5Z").naive_utc()
    );
    assert_eq!(from_db(to_db(t)).timezone(), Utc);
}

async fn times_round_trip_exactly(db: &Db) {
    let times = [
        "2027-02-03T04:05:06Z",
        "2027-02-03T04:05:06.001Z",
        "2027-02-03T04:05:06.010Z",
        "2027-02-03T04:05:06.100Z",
        "2027-02-03T04:05:06.123456789Z",
        "2027-02-03T04:05:06.999999Z",
        "2028-02-29T23:59:59.999Z",
        "2027-02-03T06:05:06.5+02:00",
        "1970-01-01T00:00:00.001Z",
        "9999-12-31T23:59:59.999Z",
    ];
    for text in times {
        let time = utc(text);
        let stored = to_db(time);
        let expected = from_db(stored);
        assert_eq!(
            expected.timestamp_subsec_nanos() % 1_000_000,
            0,
            "{text}: to_db keeps whole milliseconds"
        );

        let task = insert_task(db, fields(text, "times", TaskStatus::Enabled, Some(stored))).await;
        let read = find_task(db, task.id).await.expect("task");
        assert_eq!(
            read.next_run_at.map(from_db),
            Some(expected),
            "{text}: task"
        );
        assert_eq!(
            task.next_run_at,
            Some(stored),
            "{text}: as returned by insert"
        );

        let rid = request_id();
        let mut row = new_instance(task.id, &rid, stored, RunStatus::Ready);
        row.trigger_at = stored;
        row.created_at = stored;
        row.finished_at = Some(stored);
        row.next_attempt_at = Some(stored);
        row.deadline_at = Some(stored);
        row.dispatched_attempt = 1;
        row.claimed_until = Some(stored);
        assert_eq!(insert_run(db, &row).await, FireOutcome::Fired);
        let read = instance(db, &rid).await;
        assert_eq!(from_db(read.scheduled_at), expected, "{text}: scheduled_at");
        assert_eq!(from_db(read.trigger_at), expected, "{text}: trigger_at");
        assert_eq!(
            read.finished_at.map(from_db),
            Some(expected),
            "{text}: finished_at"
        );
        assert_eq!(
            read.next_attempt_at.map(from_db),
            Some(expected),
            "{text}: next_attempt_at"
        );
        assert_eq!(
            read.deadline_at.map(from_db),
            Some(expected),
            "{text}: deadline_at"
        );
        assert_eq!(
            read.claimed_until.map(from_db),
            Some(expected),
            "{text}: claimed_until"
        );

        // The compare-and-set on claimed_until (a lapsed claim taken over) matches the exact
        // value read back.
        let take_over = Event::Claim {
            attempt: 1,
            claimant: "node-other".into(),
            until: expected,
            at: expected,
        };
        let run = applied(decide(db, &rid, &take_over).await);
        assert_eq!(run.claimed_until, Some(expected), "{text}: claim");
        let read = instance(db, &rid).await;
        assert_eq!(read.fired_by, "node-other", "{text}: claimed");
        assert_eq!(read.claimed_until.map(from_db), Some(expected), "{text}");

        // The compare-and-set on next_run_at matches the exact value read back.
        let read_next = find_task(db, task.id)
            .await
            .and_then(|t| t.next_run_at)
            .expect("next_run_at");
        let outcomes = record(
            db,
            vec![fire_record(task.id, &request_id(), read_next, None)],
        )
        .await;
        assert_eq!(
            outcomes,
            vec![FireOutcome::Fired],
            "{text}: compare-and-set"
        );
    }
}

/// A database from before names were unique, with clashes: the migration renames the later
/// tasks of a clash (`name (2)`, …, skipping names in use), then refuses new clashes.
async fn the_unique_names_migration_renames_clashes(store: TestStore) {
    use diesel_async::SimpleAsyncConnection;
    let db = connect(&store).await;
    // Back to the schema before the migration (its own down.sql), as an older ax left it.
    let down = match store {
        TestStore::Mysql(_) => {
            include_str!("../../../migrations/mysql/2026-12-01-000001_task_names_unique/down.sql")
        }
        TestStore::Postgres(_) => include_str!(
            "../../../migrations/postgres/2026-12-01-000001_task_names_unique/down.sql"
        ),
        TestStore::Sqlite(_) => {
            include_str!("../../../migrations/sqlite/2026-12-01-000001_task_names_unique/down.sql")
        }
    };
    let undo =
        format!("{down}\nDELETE FROM __diesel_schema_migrations WHERE version = '20261201000001';");
    ax_store::with_conn!(&mut conn(&db).await, |c| c.batch_execute(&undo).await)
        .expect("undo the migration");
    let name = |n: &str, scene: &str| fields(n, scene, TaskStatus::Enabled, Some(base()));
    let mut ids = Vec::new();
    for (n, scene) in [
        ("report", "a"),
        ("report", "a"),
        ("report (2)", "a"),
        ("report", "b"),
        ("report", "a"),
    ] {
        ids.push(insert_task(&db, name(n, scene)).await.id);
    }
    drop(db);

    ax_store::run_migrations(ax_store::StoreUrl::parse(&store.url()).expect("url"))
        .await
        .expect("the migration runs on clashing names");
    let db = connect(&store).await;
    let mut names = Vec::new();
    for id in &ids {
        let task = find_task(&db, *id).await.expect("task kept");
        names.push((task.scene, task.name));
    }
    let want = [
        ("a", "report"),
        ("a", "report (3)"),
        ("a", "report (2)"),
        ("b", "report"),
        ("a", "report (4)"),
    ];
    let want: Vec<(SceneName, String)> = want
        .iter()
        .map(|(s, n)| ((*s).into(), n.to_string()))
        .collect();
    assert_eq!(names, want);
    let clash = tasks::insert(&mut conn(&db).await, name("report", "a"), Vec::new()).await;
    assert!(
        clash.as_ref().err().is_some_and(StoreError::is_name_taken),
        "{clash:?}"
    );
}

on_each_backend!(
    the_unique_names_migration_renames_clashes,
    sqlite: the_unique_names_migration_renames_clashes_sqlite,
    mariadb: the_unique_names_migration_renames_clashes_mysql,
    postgres: the_unique_names_migration_renames_clashes_postgres
);
