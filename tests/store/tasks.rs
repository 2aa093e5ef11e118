//! `src/store/queries/tasks.rs`: task CRUD, the due scan (`due_until`), pause and resume of
//! tasks and scenes, scene counts, and dependencies.

use ax::run::TaskId;
use ax::store::models::TaskStatus;
use ax::store::queries::tasks::{self, TaskFilter, UpstreamProblem};
use ax::store::queries::Page;
use ax::store::{from_db, Db};
use chrono::{NaiveDate, NaiveDateTime};

use crate::support::{
    base, conn, fields, find_task, ids, insert_task, millis, now_db, on_both_backends, page, secs,
};

on_both_backends!(
    task_crud,
    due_until_pages_by_id,
    pause_tasks_and_scenes,
    resume_tasks_and_scenes,
    scene_counts_by_status,
    task_dependencies,
    dependency_checks_do_not_race_with_writes,
);

async fn task_crud(db: &Db) {
    let a_fields = fields("a", "s1", TaskStatus::Enabled, Some(base()));
    let a = insert_task(db, a_fields.clone()).await;
    assert!(a.id > TaskId(0));
    assert_eq!(a.name, "a");
    assert_eq!(a.scene, "s1");
    assert_eq!(a.cron, a_fields.cron);
    assert_eq!(a.handler_url, a_fields.handler_url);
    assert_eq!(a.params, a_fields.params);
    assert_eq!(a.max_retry, 3);
    assert_eq!(a.timeout_ms, 30_000);
    assert_eq!(a.status, TaskStatus::Enabled);
    assert_eq!(a.next_run_at, Some(base()));
    assert_eq!(a.updated_at, a_fields.updated_at);
    assert_eq!(a.created_at, a.updated_at, "created_at is set on insert");
    assert_eq!(
        (
            a.retry_backoff_secs,
            a.retry_factor,
            a.misfire_threshold_secs
        ),
        (None, None, None)
    );

    let b = insert_task(db, fields("b", "s1", TaskStatus::Paused, None)).await;
    let c = insert_task(db, fields("c", "s2", TaskStatus::Enabled, None)).await;
    assert!(
        a.id < b.id && b.id < c.id,
        "ids grow: {} {} {}",
        a.id,
        b.id,
        c.id
    );
    assert_eq!(b.status, TaskStatus::Paused);
    assert_eq!(b.next_run_at, None);

    // find / find_many
    let found = find_task(db, b.id).await.expect("b exists");
    assert_eq!((found.id, found.name.as_str()), (b.id, "b"));
    let absent = TaskId(c.id.0 + 1000);
    assert!(find_task(db, absent).await.is_none());
    let mut many = tasks::find_many(&mut conn(db).await, vec![a.id, c.id, absent])
        .await
        .expect("find_many");
    many.sort_by_key(|t| t.id);
    assert_eq!(ids(&many), vec![a.id, c.id]);

    // list: filters, totals, pages
    let list = |filter: TaskFilter, page: Page| async move {
        tasks::list(&mut conn(db).await, &filter, page)
            .await
            .expect("list")
    };
    let (rows, total) = list(TaskFilter::default(), page(10, 0)).await;
    assert_eq!((ids(&rows), total), (vec![a.id, b.id, c.id], 3));
    // A keyset page: the tasks after an id, the total of them all.
    let after_a = TaskFilter {
        after: Some(a.id),
        ..TaskFilter::default()
    };
    let (rows, total) = list(after_a, page(1, 0)).await;
    assert_eq!((ids(&rows), total), (vec![b.id], 3));
    let scene = |s: &str| TaskFilter {
        scene: Some(s.into()),
        ..TaskFilter::default()
    };
    let (rows, total) = list(scene("s1"), page(10, 0)).await;
    assert_eq!((ids(&rows), total), (vec![a.id, b.id], 2));
    let (rows, total) = list(scene("nope"), page(10, 0)).await;
    assert_eq!((ids(&rows), total), (vec![], 0));
    let enabled = TaskFilter {
        scene: None,
        status: Some(TaskStatus::Enabled),
        ..TaskFilter::default()
    };
    let (rows, total) = list(enabled, page(10, 0)).await;
    assert_eq!((ids(&rows), total), (vec![a.id, c.id], 2));
    let disabled_s1 = TaskFilter {
        scene: Some("s1".into()),
        status: Some(TaskStatus::Paused),
        ..TaskFilter::default()
    };
    let (rows, total) = list(disabled_s1, page(10, 0)).await;
    assert_eq!((ids(&rows), total), (vec![b.id], 1));
    let (rows, total) = list(TaskFilter::default(), page(1, 1)).await;
    assert_eq!((ids(&rows), total), (vec![b.id], 3), "limit 1 offset 1");
    let (rows, total) = list(TaskFilter::default(), page(2, 2)).await;
    assert_eq!((ids(&rows), total), (vec![c.id], 3), "the last, short page");
    let (rows, total) = list(TaskFilter::default(), page(10, 3)).await;
    assert_eq!((ids(&rows), total), (vec![], 3), "past the end");

    // update replaces every field
    let mut changed = fields("a2", "s9", TaskStatus::Paused, None);
    changed.cron = "*/5 * * * * *".into();
    changed.handler_url = "http://example.test/other".into();
    changed.params = "{}".into();
    changed.max_retry = 0;
    changed.timeout_ms = 1_500;
    changed.updated_at = a.updated_at + secs(60);
    changed.retry_backoff_secs = Some(7);
    changed.retry_factor = Some(2);
    changed.misfire_threshold_secs = Some(90);
    let updated = tasks::update(&mut conn(db).await, a.id, changed.clone(), Vec::new())
        .await
        .expect("update")
        .expect("a exists")
        .expect("upstreams accepted");
    assert_eq!(updated.id, a.id);
    assert_eq!(updated.name, "a2");
    assert_eq!(updated.scene, "s9");
    assert_eq!(updated.cron, "*/5 * * * * *");
    assert_eq!(updated.handler_url, "http://example.test/other");
    assert_eq!(updated.params, "{}");
    assert_eq!(updated.max_retry, 0);
    assert_eq!(updated.timeout_ms, 1_500);
    assert_eq!(updated.status, TaskStatus::Paused);
    assert_eq!(updated.next_run_at, None, "None clears next_run_at");
    assert_eq!(updated.updated_at, changed.updated_at);
    assert_eq!(updated.created_at, a.created_at, "created_at is kept");
    assert_eq!(
        (
            updated.retry_backoff_secs,
            updated.retry_factor,
            updated.misfire_threshold_secs
        ),
        (Some(7), Some(2), Some(90))
    );
    let reread = find_task(db, a.id).await.expect("a exists");
    assert_eq!((reread.name, reread.next_run_at), ("a2".to_string(), None));

    // An update that changes nothing still finds the task (MySQL must count matched rows).
    let same = tasks::update(&mut conn(db).await, a.id, changed.clone(), Vec::new())
        .await
        .expect("update");
    assert!(same.is_some(), "an identical update still returns the task");

    let missing = tasks::update(&mut conn(db).await, absent, changed, Vec::new())
        .await
        .expect("update of a missing task is not an error");
    assert!(missing.is_none());

    // delete
    assert!(tasks::delete(&mut conn(db).await, a.id, from_db(now_db()))
        .await
        .expect("delete"));
    assert!(!tasks::delete(&mut conn(db).await, a.id, from_db(now_db()))
        .await
        .expect("second delete"));
    assert!(find_task(db, a.id).await.is_none());
    let (rows, total) = list(TaskFilter::default(), page(10, 0)).await;
    assert_eq!((ids(&rows), total), (vec![b.id, c.id], 2));
}

async fn due_until_pages_by_id(db: &Db) {
    use tasks::DueCursor;
    let until = NaiveDate::from_ymd_opt(2027, 3, 4)
        .and_then(|d| d.and_hms_opt(6, 0, 0))
        .expect("valid time");
    use TaskStatus::*;
    // Inserted out of time order: the result is ordered by (next run, id).
    let plan: Vec<(&str, TaskStatus, Option<NaiveDateTime>, bool)> = vec![
        ("due-late", Enabled, Some(until - millis(1)), true),
        ("not-due-1ms", Enabled, Some(until + millis(1)), false),
        ("due-early", Enabled, Some(until - secs(86_400)), true),
        ("paused-due", Paused, Some(until - secs(5)), false),
        ("due-exactly", Enabled, Some(until), true),
        ("never", Enabled, None, false),
        ("not-due", Enabled, Some(until + secs(3600)), false),
        ("due-mid", Enabled, Some(until - secs(30)), true),
        ("due-mid-too", Enabled, Some(until - secs(30)), true),
        ("due-last", Enabled, Some(until - secs(1)), true),
    ];
    let mut due_tasks = Vec::new();
    for (name, status, next, due) in plan {
        let task = insert_task(db, fields(name, "s", status, next)).await;
        if due {
            due_tasks.push(task);
        }
    }
    due_tasks.sort_by_key(|t| (t.next_run_at, t.id));
    let expected = ids(&due_tasks);
    assert_eq!(expected.len(), 6);

    let due = |cursor: DueCursor, limit: i64| async move {
        tasks::due_until(&mut conn(db).await, cursor, until, limit)
            .await
            .expect("due_until")
    };
    let all = due(DueCursor::start(), 100).await;
    assert_eq!(ids(&all), expected);
    assert!(all.iter().all(|t| t.status == TaskStatus::Enabled));

    // Keyset pages of 4: 4, 2, then nothing — also across the two tasks due at one time.
    let mut cursor = DueCursor::start();
    let mut pages = Vec::new();
    loop {
        let page = due(cursor, 4).await;
        let Some(last) = page.last() else {
            break;
        };
        cursor = DueCursor::past(last);
        pages.push(ids(&page));
        assert!(pages.len() <= 5, "paging does not terminate: {pages:?}");
    }
    assert_eq!(pages.iter().map(Vec::len).collect::<Vec<_>>(), vec![4, 2]);
    assert_eq!(pages.concat(), expected);

    // From a time on: only what is due strictly after it (the incremental top-up).
    let after_mid = due(DueCursor::after(until - secs(30)), 100).await;
    assert_eq!(ids(&after_mid), expected[3..].to_vec());
    assert!(due(DueCursor::after(until), 100).await.is_empty());
    // An earlier horizon sees only the earliest task.
    let early = tasks::due_until(
        &mut conn(db).await,
        DueCursor::start(),
        until - secs(3600),
        100,
    )
    .await
    .expect("due_until");
    assert_eq!(ids(&early), vec![expected[0]]);
}

/// A fixed time on the minute grid.
fn at_hms(h: u32, m: u32, s: u32, ms: u32) -> NaiveDateTime {
    NaiveDate::from_ymd_opt(2027, 3, 4)
        .and_then(|d| d.and_hms_milli_opt(h, m, s, ms))
        .expect("valid time")
}

async fn pause_tasks_and_scenes(db: &Db) {
    use TaskStatus::*;
    let t = base();
    let now = t + secs(60);
    let a = insert_task(db, fields("a", "s1", Enabled, Some(t))).await;
    let b = insert_task(db, fields("b", "s1", Enabled, Some(t + secs(1)))).await;
    let e = insert_task(db, fields("e", "s1", Enabled, None)).await;
    let c = insert_task(db, fields("c", "s1", Paused, None)).await;
    let d = insert_task(db, fields("d", "s2", Enabled, Some(t))).await;

    let pause = |id: TaskId, at: NaiveDateTime| async move {
        tasks::pause(&mut conn(db).await, id, at)
            .await
            .expect("pause")
    };
    assert!(pause(a.id, now).await, "an enabled task pauses");
    let row = find_task(db, a.id).await.expect("a");
    assert_eq!(row.status, Paused);
    assert_eq!(row.next_run_at, None, "a paused task has no next run");
    assert_eq!(row.updated_at, now);
    assert!(!pause(a.id, now + secs(1)).await, "already paused");
    assert_eq!(
        find_task(db, a.id).await.expect("a").updated_at,
        now,
        "a second pause changes nothing"
    );
    assert!(!pause(c.id, now).await, "a task created paused");
    assert_eq!(
        find_task(db, c.id).await.expect("c").updated_at,
        c.updated_at
    );
    assert!(!pause(TaskId(d.id.0 + 1000), now).await, "a missing task");

    // The scene: only its enabled tasks (b and e), in one call.
    let pause_scene = |scene: &'static str, at: NaiveDateTime| async move {
        tasks::pause_scene(&mut conn(db).await, scene, at)
            .await
            .expect("pause_scene")
    };
    let later = now + secs(5);
    assert_eq!(pause_scene("s1", later).await, 2);
    for id in [b.id, e.id] {
        let row = find_task(db, id).await.expect("task");
        assert_eq!(
            (row.status, row.next_run_at, row.updated_at),
            (Paused, None, later),
            "task {id}"
        );
    }
    assert_eq!(
        find_task(db, a.id).await.expect("a").updated_at,
        now,
        "an already paused task is not touched again"
    );
    assert_eq!(
        find_task(db, c.id).await.expect("c").updated_at,
        c.updated_at
    );
    let other = find_task(db, d.id).await.expect("d");
    assert_eq!(
        (other.status, other.next_run_at, other.updated_at),
        (Enabled, Some(t), d.updated_at),
        "another scene is untouched"
    );
    assert_eq!(pause_scene("s1", later).await, 0, "nothing left to pause");
    assert_eq!(pause_scene("nope", later).await, 0);
    assert_eq!(pause_scene("s2", later).await, 1);
}

async fn resume_tasks_and_scenes(db: &Db) {
    use TaskStatus::*;
    let t = base();
    let p1 = insert_task(db, fields("p1", "s1", Paused, None)).await;
    let p2 = insert_task(db, fields("p2", "s1", Paused, None)).await;
    let enabled = insert_task(db, fields("on", "s1", Enabled, Some(t + secs(999)))).await;
    let q = insert_task(db, fields("q", "s2", Paused, None)).await;
    let mut every_5s = fields("r", "s2", Paused, None);
    every_5s.cron = "*/5 * * * * *".into();
    let r = insert_task(db, every_5s).await;

    let resume = |which: tasks::Resume, now: NaiveDateTime| async move {
        tasks::resume(&mut conn(db).await, which, from_db(now))
            .await
            .expect("resume")
    };

    // 05:06:07.123 → the next whole minute, 05:07:00.
    let now = at_hms(5, 6, 7, 123);
    let next = at_hms(5, 7, 0, 0);
    let resumed = resume(tasks::Resume::Task(p1.id), now).await;
    assert_eq!(ids(&resumed), vec![p1.id]);
    assert_eq!(resumed[0].status, Enabled);
    assert_eq!(resumed[0].next_run_at, Some(next));
    assert_eq!(resumed[0].updated_at, now);
    let row = find_task(db, p1.id).await.expect("p1");
    assert_eq!(
        (row.status, row.next_run_at, row.updated_at),
        (Enabled, Some(next), now),
        "as stored"
    );

    // Resuming an enabled task (or a missing one) changes nothing.
    let again = now + secs(30);
    assert!(resume(tasks::Resume::Task(p1.id), again).await.is_empty());
    let row = find_task(db, p1.id).await.expect("p1");
    assert_eq!((row.next_run_at, row.updated_at), (Some(next), now));
    assert!(resume(tasks::Resume::Task(enabled.id), again)
        .await
        .is_empty());
    let row = find_task(db, enabled.id).await.expect("enabled");
    assert_eq!(
        (row.status, row.next_run_at, row.updated_at),
        (Enabled, Some(t + secs(999)), enabled.updated_at)
    );
    assert!(resume(tasks::Resume::Task(TaskId(r.id.0 + 1000)), again)
        .await
        .is_empty());

    // A scene: only its paused tasks; other scenes stay paused.
    let resumed = resume(tasks::Resume::Scene("s1".into()), again).await;
    assert_eq!(ids(&resumed), vec![p2.id]);
    assert_eq!(resumed[0].next_run_at, Some(at_hms(5, 7, 0, 0)));
    let row = find_task(db, p2.id).await.expect("p2");
    assert_eq!((row.status, row.next_run_at), (Enabled, Some(next)));
    assert_eq!(
        find_task(db, p1.id).await.expect("p1").updated_at,
        now,
        "already enabled"
    );
    for id in [q.id, r.id] {
        let row = find_task(db, id).await.expect("s2 task");
        assert_eq!((row.status, row.next_run_at), (Paused, None));
    }
    assert!(resume(tasks::Resume::Scene("s1".into()), again)
        .await
        .is_empty());
    assert!(resume(tasks::Resume::Scene("nope".into()), again)
        .await
        .is_empty());

    // Strictly after `now`: on a fire time exactly, the next one.
    let on_the_minute = at_hms(5, 10, 0, 0);
    let mut resumed = resume(tasks::Resume::Scene("s2".into()), on_the_minute).await;
    resumed.sort_by_key(|t| t.id);
    let got: Vec<(TaskId, Option<NaiveDateTime>)> =
        resumed.iter().map(|t| (t.id, t.next_run_at)).collect();
    assert_eq!(
        got,
        vec![
            (q.id, Some(at_hms(5, 11, 0, 0))),
            (r.id, Some(at_hms(5, 10, 5, 0))),
        ]
    );
    for (id, next) in got {
        let row = find_task(db, id).await.expect("task");
        assert_eq!(
            (row.status, row.next_run_at, row.updated_at),
            (Enabled, next, on_the_minute)
        );
    }
}

async fn scene_counts_by_status(db: &Db) {
    use TaskStatus::*;
    let counts = || async move {
        tasks::scene_counts(&mut conn(db).await)
            .await
            .expect("scene_counts")
    };
    assert!(counts().await.is_empty());
    for (name, scene, status) in [
        ("a", "s2", Enabled),
        ("b", "s1", Paused),
        ("c", "s1", Enabled),
        ("d", "s10", Paused),
        ("e", "s1", Enabled),
        ("f", "s2", Enabled),
        ("g", "s1", Enabled),
    ] {
        insert_task(db, fields(name, scene, status, None)).await;
    }
    let expected: Vec<(String, TaskStatus, i64)> = [
        ("s1", Enabled, 3),
        ("s1", Paused, 1),
        ("s10", Paused, 1),
        ("s2", Enabled, 2),
    ]
    .into_iter()
    .map(|(scene, status, n)| (scene.to_string(), status, n))
    .collect();
    assert_eq!(counts().await, expected);
}

async fn task_dependencies(db: &Db) {
    use TaskStatus::*;
    let a = insert_task(db, fields("a", "s", Enabled, None)).await;
    let b = insert_task(db, fields("b", "s", Enabled, None)).await;
    let c = insert_task(db, fields("c", "s", Enabled, None)).await;
    let deps_of = |ids: Vec<TaskId>| async move {
        tasks::dependencies_of(&mut conn(db).await, &ids)
            .await
            .expect("dependencies_of")
    };
    let all = || async move {
        let mut edges = tasks::all_dependencies(&mut conn(db).await)
            .await
            .expect("all_dependencies");
        edges.sort();
        edges
    };
    assert!(all().await.is_empty());

    // Stored with the task, listed by upstream id.
    let d = tasks::insert(
        &mut conn(db).await,
        fields("d", "s", Enabled, None),
        vec![b.id, a.id],
    )
    .await
    .expect("insert with upstreams")
    .expect("upstreams accepted");
    let deps = deps_of(vec![d.id]).await;
    assert_eq!(deps.len(), 1);
    assert_eq!(deps.get(&d.id), Some(&vec![a.id, b.id]));
    assert!(deps_of(vec![a.id]).await.is_empty(), "a has no upstreams");
    assert!(deps_of(vec![]).await.is_empty());

    let e = tasks::insert(
        &mut conn(db).await,
        fields("e", "s", Enabled, None),
        vec![a.id],
    )
    .await
    .expect("insert with upstreams")
    .expect("upstreams accepted");
    assert_eq!(all().await, vec![(d.id, a.id), (d.id, b.id), (e.id, a.id)]);
    let deps = deps_of(vec![d.id, e.id, c.id]).await;
    assert_eq!(deps.len(), 2);
    assert_eq!(deps.get(&d.id), Some(&vec![a.id, b.id]));
    assert_eq!(deps.get(&e.id), Some(&vec![a.id]));

    // An update replaces the upstreams.
    tasks::update(
        &mut conn(db).await,
        d.id,
        fields("d", "s", Enabled, None),
        vec![c.id],
    )
    .await
    .expect("update")
    .expect("d exists")
    .expect("upstreams accepted");
    assert_eq!(deps_of(vec![d.id]).await.get(&d.id), Some(&vec![c.id]));
    assert_eq!(all().await, vec![(d.id, c.id), (e.id, a.id)]);
    // An update of a missing task stores none.
    let missing = tasks::update(
        &mut conn(db).await,
        TaskId(e.id.0 + 1000),
        fields("x", "s", Enabled, None),
        vec![a.id],
    )
    .await
    .expect("update");
    assert!(missing.is_none());
    assert_eq!(all().await, vec![(d.id, c.id), (e.id, a.id)]);
    // No upstreams clears them.
    tasks::update(
        &mut conn(db).await,
        d.id,
        fields("d", "s", Enabled, None),
        Vec::new(),
    )
    .await
    .expect("update")
    .expect("d exists")
    .expect("upstreams accepted");
    assert!(deps_of(vec![d.id]).await.is_empty());
    assert_eq!(all().await, vec![(e.id, a.id)]);

    // Upstreams that do not exist are refused, and nothing is written.
    let refused = tasks::insert(
        &mut conn(db).await,
        fields("f", "s", Enabled, None),
        vec![a.id, TaskId(e.id.0 + 1000)],
    )
    .await
    .expect("insert");
    assert_eq!(
        refused.map(|task| task.id),
        Err(UpstreamProblem::Unknown(vec![TaskId(e.id.0 + 1000)]))
    );
    // An upstream that would close a cycle is refused.
    let cycle = tasks::update(
        &mut conn(db).await,
        a.id,
        fields("a", "s", Enabled, None),
        vec![e.id],
    )
    .await
    .expect("update")
    .expect("a exists");
    assert_eq!(
        cycle.map(|task| task.id),
        Err(UpstreamProblem::Cycle(vec![a.id, e.id, a.id]))
    );

    // Deleting a task removes its dependency rows.
    assert!(tasks::delete(&mut conn(db).await, e.id, from_db(now_db()))
        .await
        .expect("delete"));
    assert!(deps_of(vec![e.id]).await.is_empty());
    assert!(all().await.is_empty());
}

/// The upstream checks hold against concurrent writes, round after round: of two updates that
/// would each close half of a cycle exactly one is stored, and an upstream deleted while a
/// task is being given it leaves no dependency on a task that is gone.
async fn dependency_checks_do_not_race_with_writes(db: &Db) {
    const ROUNDS: usize = 200;
    let task_fields = |name: &str| fields(name, "race", TaskStatus::Enabled, None);
    for round in 0..ROUNDS {
        let name = |what: &str| format!("{what}-{round}");
        let a = insert_task(db, task_fields(&name("a"))).await;
        let b = insert_task(db, task_fields(&name("b"))).await;
        let (ab, ba) = {
            let (mut one, mut two) = (conn(db).await, conn(db).await);
            futures_util::join!(
                tasks::update(&mut one, a.id, task_fields(&name("a")), vec![b.id]),
                tasks::update(&mut two, b.id, task_fields(&name("b")), vec![a.id]),
            )
        };
        let stored = [ab, ba]
            .into_iter()
            .map(|outcome| outcome.expect("update").expect("exists"))
            .filter(Result::is_ok)
            .count();
        assert_eq!(
            stored, 1,
            "round {round}: exactly one half of the cycle is stored"
        );

        let upstream = insert_task(db, task_fields(&name("up"))).await;
        let (_, created) = {
            let (mut one, mut two) = (conn(db).await, conn(db).await);
            futures_util::join!(
                tasks::delete(&mut one, upstream.id, from_db(now_db())),
                tasks::insert(&mut two, task_fields(&name("down")), vec![upstream.id]),
            )
        };
        match created.expect("insert") {
            Ok(_) | Err(UpstreamProblem::Unknown(_)) => {}
            Err(other) => panic!("round {round}: {other:?}"),
        }
        let edges = tasks::all_dependencies(&mut conn(db).await)
            .await
            .expect("edges");
        for (task, up) in edges {
            assert!(
                find_task(db, up).await.is_some(),
                "round {round}: task {task} depends on {up}, which is gone"
            );
        }
    }
}
