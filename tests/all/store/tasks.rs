//! `crates/ax-store/src/queries/tasks.rs`: task CRUD, the due scan (`due_until`), pause and resume of
//! tasks and scenes, scene counts, and dependencies.

use ax_core::cluster::shares::{Share, PARTITIONS};
use ax_core::ids::{ProcessId, SceneName};
use ax_core::run::TaskId;
use ax_store::queries::task_pages::{self, Cursor, Keyset, Position, SortColumn, TaskSort};
use ax_store::queries::tasks::{
    self, BulkItem, Conditional, TaskFilter, UpstreamProblem, Versions,
};
use ax_store::queries::Page;
use ax_store::rows::models::{Task, TaskStatus};
use ax_store::{from_db, Db};
use chrono::{NaiveDate, NaiveDateTime};

use crate::store::support::{
    base, conn, fields, find_task, ids, insert_task, millis, now_db, on_every_backend, page, secs,
};

on_every_backend!(
    task_crud,
    due_until_pages_by_id,
    a_share_reads_its_partitions_only,
    pause_tasks_and_scenes,
    resume_tasks_and_scenes,
    scene_counts_by_status,
    task_dependencies,
    dependency_checks_do_not_race_with_writes,
    versions_guard_concurrent_changes,
    registrations_of_a_scene_go_on_together_and_hold_its_pause,
    registrations_at_once_each_get_their_own_tasks,
    a_stored_step_larger_than_its_range_fires_as_before,
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
    // Keyset pages of one task, each sort both ways: every task once, a task with no next run
    // (b, paused) first going up, last going down; and back again by `before` cursors.
    for column in [
        SortColumn::Id,
        SortColumn::Name,
        SortColumn::Status,
        SortColumn::NextRun,
    ] {
        for descending in [false, true] {
            let sort = TaskSort { column, descending };
            let walked = walk_pages(db, sort).await;
            let mut all = walked.clone();
            all.sort();
            assert_eq!(all, vec![a.id, b.id, c.id], "{sort:?}");
            if column == SortColumn::NextRun {
                let b_at = if descending { 2 } else { 0 };
                assert_eq!(walked[b_at], b.id, "{sort:?}");
            }
        }
    }
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
    let updated = tasks::update(
        &mut conn(db).await,
        a.id,
        Versions::Any,
        changed.clone(),
        Vec::new(),
    )
    .await
    .expect("update");
    let updated = done(updated).expect("upstreams accepted");
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
    let same = tasks::update(
        &mut conn(db).await,
        a.id,
        Versions::Any,
        changed.clone(),
        Vec::new(),
    )
    .await
    .expect("update");
    let same = done(same).expect("upstreams accepted");
    assert_eq!(
        same.version, 3,
        "an identical update still returns the task"
    );

    let missing = tasks::update(
        &mut conn(db).await,
        absent,
        Versions::Any,
        changed.clone(),
        Vec::new(),
    )
    .await
    .expect("update of a missing task is not an error");
    assert!(matches!(missing, Conditional::NotFound));

    // A change for a version the task is not at changes nothing and returns it as it is.
    assert_eq!(
        (a.version, updated.version),
        (1, 2),
        "each update raises it"
    );
    let old = Versions::OneOf(vec![1, 2]);
    let stale = tasks::update(
        &mut conn(db).await,
        a.id,
        old.clone(),
        changed.clone(),
        vec![],
    )
    .await
    .expect("update");
    match stale {
        Conditional::Stale(now) => assert_eq!((now.version, now.timeout_ms), (3, 1_500)),
        other => panic!("not stale: {other:?}"),
    }
    let at_3 = Versions::OneOf(vec![2, 3]);
    let mut renamed = changed.clone();
    renamed.name = "a3".into();
    let fresh = tasks::update(&mut conn(db).await, a.id, at_3, renamed, vec![])
        .await
        .expect("update");
    assert_eq!(
        done(fresh).map(|t| (t.name, t.version)),
        Ok(("a3".into(), 4))
    );

    // delete: under its versions, then gone
    let delete = |versions: Versions| async move {
        tasks::delete(&mut conn(db).await, a.id, versions, from_db(now_db()))
            .await
            .expect("delete")
    };
    assert!(matches!(delete(old).await, Conditional::Stale(t) if t.version == 4));
    assert!(
        find_task(db, a.id).await.is_some(),
        "a stale delete deletes nothing"
    );
    assert!(matches!(
        delete(Versions::OneOf(vec![4])).await,
        Conditional::Done(())
    ));
    assert!(matches!(delete(Versions::Any).await, Conditional::NotFound));
    assert!(find_task(db, a.id).await.is_none());
    let (rows, total) = list(TaskFilter::default(), page(10, 0)).await;
    assert_eq!((ids(&rows), total), (vec![b.id, c.id], 2));
}

/// A process reads the due tasks of its share only, and the enabled tasks are counted per
/// partition (a task's id modulo the partitions).
async fn a_share_reads_its_partitions_only(db: &Db) {
    use tasks::DueCursor;
    let until = now_db() + secs(60);
    let mut inserted = Vec::new();
    for i in 0..12 {
        let status = if i == 0 {
            TaskStatus::Paused
        } else {
            TaskStatus::Enabled
        };
        inserted.push(
            insert_task(
                db,
                fields(&format!("t{i}"), "s", status, Some(until - secs(5))),
            )
            .await,
        );
    }
    let processes: Vec<ProcessId> = ["a", "b", "c"].map(ProcessId::from).to_vec();
    let mut read = Vec::new();
    for me in &processes {
        let share = Share::of(me, &processes);
        let due = tasks::due_until(&mut conn(db).await, (DueCursor::start(), until), share, 100)
            .await
            .expect("due_until");
        for (task, _) in &due {
            assert!(
                share.owns(task.id),
                "{me}: task {} is not of its share",
                task.id
            );
        }
        let stored = ax_store::queries::task_changes::due_by(&mut conn(db).await, until, share)
            .await
            .expect("due_by");
        assert_eq!(stored.len(), due.len(), "{me}");
        read.extend(due.into_iter().map(|(task, _)| task.id));
    }
    read.sort();
    let enabled: Vec<TaskId> = inserted[1..].iter().map(|task| task.id).collect();
    assert_eq!(
        read, enabled,
        "the shares together read every due task once"
    );
    let counts = ax_store::queries::shares::enabled_per_partition(&mut conn(db).await)
        .await
        .expect("counts");
    assert_eq!(counts.len(), PARTITIONS);
    assert_eq!(counts.iter().sum::<u64>(), 11);
    for task in &enabled {
        assert!(counts[ax_core::cluster::shares::partition_of(*task)] >= 1);
    }
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
        tasks::due_until(&mut conn(db).await, (cursor, until), Share::ALL, limit)
            .await
            .expect("due_until")
            .into_iter()
            .map(|(task, _)| task)
            .collect::<Vec<Task>>()
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
        (DueCursor::start(), until - secs(3600)),
        Share::ALL,
        100,
    )
    .await
    .expect("due_until");
    let early: Vec<Task> = early.into_iter().map(|(task, _)| task).collect();
    assert_eq!(ids(&early), vec![expected[0]]);

    // Each task comes with whether it has upstreams.
    let upstream = &due_tasks[0];
    let downstream = fields("downstream", "s", Enabled, Some(until - secs(2)));
    let downstream = tasks::insert(&mut conn(db).await, downstream, vec![upstream.id])
        .await
        .expect("insert")
        .expect("upstream known");
    let due = tasks::due_until(
        &mut conn(db).await,
        (DueCursor::start(), until),
        Share::ALL,
        100,
    )
    .await
    .expect("due_until");
    let due_tasks: Vec<_> = due.iter().map(|(task, _)| task.clone()).collect();
    // Tasks read otherwise get the same flag.
    let known = tasks::with_upstreams_known(&mut conn(db).await, due_tasks)
        .await
        .expect("with_upstreams_known");
    assert_eq!(known.len(), due.len());
    for ((task, has), (_, known)) in due.iter().zip(&known) {
        assert_eq!(*has, task.id == downstream.id, "task {}", task.id);
        assert_eq!(known, has, "task {}", task.id);
    }
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
    assert_eq!((row.updated_at, row.version), (now, a.version + 1));
    assert!(!pause(a.id, now + secs(1)).await, "already paused");
    let row = find_task(db, a.id).await.expect("a");
    assert_eq!(
        (row.updated_at, row.version),
        (now, a.version + 1),
        "a second pause changes nothing"
    );
    assert!(!pause(c.id, now).await, "a task created paused");
    assert_eq!(
        find_task(db, c.id).await.expect("c").updated_at,
        c.updated_at
    );
    assert!(!pause(TaskId(d.id.0 + 1000), now).await, "a missing task");

    // The scene: its own state. Its enabled tasks (b and e) stop firing, and keep their own
    // state, version and time of change; the others are not touched.
    let pause_scene = |scene: &'static str, at: NaiveDateTime| async move {
        tasks::pause_scene(&mut conn(db).await, &scene.into(), at, "ops")
            .await
            .expect("pause_scene")
    };
    let paused_scenes = || async move {
        tasks::paused_scenes(&mut conn(db).await, None)
            .await
            .expect("paused_scenes")
    };
    let later = now + secs(5);
    assert!(paused_scenes().await.is_empty());
    assert_eq!(pause_scene("s1", later).await, 2);
    for task in [&b, &e] {
        let row = find_task(db, task.id).await.expect("task");
        assert_eq!(
            (row.status, row.next_run_at, row.updated_at, row.version),
            (Enabled, None, task.updated_at, task.version),
            "task {}",
            task.id
        );
    }
    let row = find_task(db, a.id).await.expect("a");
    assert_eq!((row.status, row.updated_at), (Paused, now));
    let other = find_task(db, d.id).await.expect("d");
    assert_eq!(
        (other.status, other.next_run_at, other.updated_at),
        (Enabled, Some(t), d.updated_at),
        "another scene is untouched"
    );
    assert_eq!(
        paused_scenes().await.into_iter().collect::<Vec<_>>(),
        [("s1".to_string(), later)]
    );
    assert_eq!(
        pause_scene("s1", later + secs(1)).await,
        0,
        "paused already"
    );
    assert_eq!(
        paused_scenes().await.get("s1"),
        Some(&later),
        "since the first"
    );
    assert_eq!(
        pause_scene("empty", later).await,
        0,
        "a scene without tasks"
    );
    assert_eq!(pause_scene("s2", later).await, 1);
    let mut scenes: Vec<String> = paused_scenes().await.into_keys().collect();
    scenes.sort();
    assert_eq!(scenes, ["empty", "s1", "s2"]);

    // What is written into a paused scene keeps no next run; what moves out of one does.
    let new = insert_task(db, fields("new", "s1", Enabled, Some(t))).await;
    assert_eq!((new.status, new.next_run_at), (Enabled, None));
    let back = tasks::update(
        &mut conn(db).await,
        b.id,
        Versions::Any,
        fields("b", "s1", Enabled, Some(t)),
        vec![],
    )
    .await
    .expect("update");
    assert_eq!(done(back).expect("stored").next_run_at, None);
    let moved = tasks::update(
        &mut conn(db).await,
        b.id,
        Versions::Any,
        fields("b", "s3", Enabled, Some(t)),
        vec![],
    )
    .await
    .expect("update");
    assert_eq!(done(moved).expect("stored").next_run_at, Some(t));
}

async fn resume_tasks_and_scenes(db: &Db) {
    use TaskStatus::*;
    let t = base();
    let p1 = insert_task(db, fields("p1", "s1", Paused, None)).await;
    let p2 = insert_task(db, fields("p2", "s1", Paused, None)).await;
    let enabled = insert_task(db, fields("on", "s1", Enabled, Some(t + secs(999)))).await;
    let q = insert_task(db, fields("q", "s2", Paused, None)).await;
    let mut every_5s = fields("r", "s2", Enabled, Some(t));
    every_5s.cron = "*/5 * * * * *".into();
    let r = insert_task(db, every_5s).await;

    let resume = |id: TaskId, now: NaiveDateTime| async move {
        tasks::resume(&mut conn(db).await, id, from_db(now))
            .await
            .expect("resume")
    };

    // 05:06:07.123 → the next whole minute, 05:07:00.
    let now = at_hms(5, 6, 7, 123);
    let next = at_hms(5, 7, 0, 0);
    let resumed = resume(p1.id, now).await.expect("p1 resumed");
    assert_eq!(resumed.id, p1.id);
    assert_eq!((resumed.status, resumed.next_run_at), (Enabled, Some(next)));
    assert_eq!((resumed.updated_at, resumed.version), (now, p1.version + 1));
    let row = find_task(db, p1.id).await.expect("p1");
    assert_eq!(
        (row.status, row.next_run_at, row.updated_at, row.version),
        (Enabled, Some(next), now, p1.version + 1),
        "as stored"
    );

    // Resuming an enabled task (or a missing one) changes nothing.
    let again = now + secs(30);
    assert!(resume(p1.id, again).await.is_none());
    let row = find_task(db, p1.id).await.expect("p1");
    assert_eq!((row.next_run_at, row.updated_at), (Some(next), now));
    assert!(resume(enabled.id, again).await.is_none());
    let row = find_task(db, enabled.id).await.expect("enabled");
    assert_eq!(
        (row.status, row.next_run_at, row.updated_at),
        (Enabled, Some(t + secs(999)), enabled.updated_at)
    );
    assert!(resume(TaskId(r.id.0 + 1000), again).await.is_none());

    // A scene not paused resumes nothing.
    let resume_scene = |scene: &'static str, now: NaiveDateTime| async move {
        tasks::resume_scene(&mut conn(db).await, &scene.into(), from_db(now))
            .await
            .expect("resume_scene")
    };
    assert!(resume_scene("s2", again).await.is_empty());
    assert!(resume_scene("nope", again).await.is_empty());

    // A paused scene: a task resumed in it is enabled but has no next run until the scene is
    // resumed; then its enabled tasks fire again, each from then, and the task paused one by
    // one (q) stays paused.
    tasks::pause_scene(&mut conn(db).await, &"s2".into(), again, "ops")
        .await
        .expect("pause_scene");
    let p3 = insert_task(db, fields("p3", "s2", Paused, None)).await;
    let held = resume(p3.id, again).await.expect("p3 resumed");
    assert_eq!((held.status, held.next_run_at), (Enabled, None));
    let on_the_minute = at_hms(5, 10, 0, 0);
    let mut resumed = resume_scene("s2", on_the_minute).await;
    resumed.sort_by_key(|t| t.id);
    let got: Vec<(TaskId, Option<NaiveDateTime>)> =
        resumed.iter().map(|t| (t.id, t.next_run_at)).collect();
    // Strictly after `now`: on a fire time exactly, the next one.
    assert_eq!(
        got,
        vec![
            (r.id, Some(at_hms(5, 10, 5, 0))),
            (p3.id, Some(at_hms(5, 11, 0, 0))),
        ]
    );
    for (id, next) in got {
        let row = find_task(db, id).await.expect("task");
        assert_eq!((row.status, row.next_run_at), (Enabled, next));
    }
    let row = find_task(db, q.id).await.expect("q");
    assert_eq!(
        (row.status, row.next_run_at),
        (Paused, None),
        "paused by itself"
    );
    let row = find_task(db, r.id).await.expect("r");
    assert_eq!(row.version, r.version, "a scene's pause is not its tasks'");
    assert!(
        resume_scene("s2", on_the_minute).await.is_empty(),
        "resumed already"
    );
    let row = find_task(db, p2.id).await.expect("p2");
    assert_eq!(
        (row.status, row.next_run_at),
        (Paused, None),
        "another scene"
    );
}

/// A task an earlier ax stored with a step larger than its field's range (`*/99` seconds,
/// refused as input now) keeps firing as it did, at the item's first value: resumed, it gets
/// its next run, and is not left enabled with none.
async fn a_stored_step_larger_than_its_range_fires_as_before(db: &Db) {
    let mut legacy = fields("legacy", "old", TaskStatus::Paused, None);
    legacy.cron = "*/99 * * * * *".into();
    let legacy = insert_task(db, legacy).await;
    let taken = ax_cron::CronSchedule::parse(&legacy.cron);
    assert!(taken.is_err(), "refused as input now: {taken:?}");
    assert!(legacy.cron().is_ok(), "read as stored");
    // 05:06:07.123 → second 0 of the next minute, as `*/99` fired before.
    let now = at_hms(5, 6, 7, 123);
    let resumed = tasks::resume(&mut conn(db).await, legacy.id, from_db(now))
        .await
        .expect("resume")
        .expect("resumed");
    assert_eq!(
        (resumed.status, resumed.next_run_at),
        (TaskStatus::Enabled, Some(at_hms(5, 7, 0, 0)))
    );
    let row = find_task(db, legacy.id).await.expect("stored");
    assert_eq!(row.next_run_at, Some(at_hms(5, 7, 0, 0)), "as stored");
}

/// Two changes made from one version: one is stored, the other finds the task changed, round
/// after round (the version is compared in the UPDATE itself).
async fn versions_guard_concurrent_changes(db: &Db) {
    const ROUNDS: usize = 50;
    let task = insert_task(db, fields("v", "s", TaskStatus::Enabled, None)).await;
    for round in 0..ROUNDS {
        let version = find_task(db, task.id).await.expect("v").version;
        let at = Versions::OneOf(vec![version]);
        let change = |timeout_ms: i64| {
            let mut changed = fields("v", "s", TaskStatus::Enabled, None);
            changed.timeout_ms = timeout_ms;
            changed
        };
        let (one, two) = {
            let (mut a, mut b) = (conn(db).await, conn(db).await);
            futures_util::join!(
                tasks::update(&mut a, task.id, at.clone(), change(1_000), vec![]),
                tasks::update(&mut b, task.id, at.clone(), change(2_000), vec![]),
            )
        };
        let outcomes = [one.expect("update"), two.expect("update")];
        let stored: Vec<i64> = outcomes
            .iter()
            .filter_map(|o| match o {
                Conditional::Done(Ok(task)) => Some(task.timeout_ms),
                _ => None,
            })
            .collect();
        assert_eq!(stored.len(), 1, "round {round}: {outcomes:?}");
        let stale = outcomes.iter().find_map(|o| match o {
            Conditional::Stale(now) => Some(now.clone()),
            _ => None,
        });
        let stale = stale.unwrap_or_else(|| panic!("round {round}: none stale: {outcomes:?}"));
        assert_eq!(
            (stale.version, stale.timeout_ms),
            (version + 1, stored[0]),
            "round {round}: the stale one sees the stored change"
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
    let updated = tasks::update(
        &mut conn(db).await,
        d.id,
        Versions::Any,
        fields("d", "s", Enabled, None),
        vec![c.id],
    )
    .await
    .expect("update");
    done(updated).expect("upstreams accepted");
    assert_eq!(deps_of(vec![d.id]).await.get(&d.id), Some(&vec![c.id]));
    assert_eq!(all().await, vec![(d.id, c.id), (e.id, a.id)]);
    // An update of a missing task stores none.
    let missing = tasks::update(
        &mut conn(db).await,
        TaskId(e.id.0 + 1000),
        Versions::Any,
        fields("x", "s", Enabled, None),
        vec![a.id],
    )
    .await
    .expect("update");
    assert!(matches!(missing, Conditional::NotFound));
    assert_eq!(all().await, vec![(d.id, c.id), (e.id, a.id)]);
    // No upstreams clears them.
    let cleared = tasks::update(
        &mut conn(db).await,
        d.id,
        Versions::Any,
        fields("d", "s", Enabled, None),
        Vec::new(),
    )
    .await
    .expect("update");
    done(cleared).expect("upstreams accepted");
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
        Versions::Any,
        fields("a", "s", Enabled, None),
        vec![e.id],
    )
    .await
    .expect("update");
    let cycle = done(cycle);
    assert_eq!(
        cycle.map(|task| task.id),
        Err(UpstreamProblem::Cycle(vec![a.id, e.id, a.id]))
    );

    // Deleting a task removes its dependency rows.
    let deleted = tasks::delete(&mut conn(db).await, e.id, Versions::Any, from_db(now_db()))
        .await
        .expect("delete");
    assert!(matches!(deleted, Conditional::Done(())));
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
                tasks::update(
                    &mut one,
                    a.id,
                    Versions::Any,
                    task_fields(&name("a")),
                    vec![b.id]
                ),
                tasks::update(
                    &mut two,
                    b.id,
                    Versions::Any,
                    task_fields(&name("b")),
                    vec![a.id]
                ),
            )
        };
        let stored = [ab, ba]
            .into_iter()
            .map(|outcome| done(outcome.expect("update")))
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
                tasks::delete(&mut one, upstream.id, Versions::Any, from_db(now_db())),
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

/// Registrations of one scene share its pause's lock: two that replace the same tasks, listed
/// in opposite orders, both finish (their row locks are taken in one order, so they never
/// deadlock); and a scene paused while tasks are registered in it keeps none of them due.
async fn registrations_of_a_scene_go_on_together_and_hold_its_pause(db: &Db) {
    const ROUNDS: usize = 20;
    let items = |scene: &str, names: &[String], cron: &str| -> Vec<BulkItem> {
        names
            .iter()
            .map(|name| {
                let mut fields = fields(name, scene, TaskStatus::Enabled, Some(base()));
                fields.cron = cron.into();
                BulkItem {
                    fields,
                    depends_on: Vec::new(),
                }
            })
            .collect()
    };
    for round in 0..ROUNDS {
        let names: Vec<String> = (0..50).map(|n| format!("t{round}-{n}")).collect();
        let reversed: Vec<String> = names.iter().rev().cloned().collect();
        let created = tasks::register(
            &mut conn(db).await,
            items("shared", &names, "0 * * * * *"),
            false,
        )
        .await
        .expect("register")
        .expect("nothing refused");
        assert_eq!(created.created.len(), names.len());
        let (one, two) = {
            let (mut a, mut b) = (conn(db).await, conn(db).await);
            futures_util::join!(
                tasks::register(&mut a, items("shared", &names, "1 * * * * *"), true),
                tasks::register(&mut b, items("shared", &reversed, "2 * * * * *"), true),
            )
        };
        for outcome in [one, two] {
            let outcome = outcome.expect("no deadlock").expect("nothing refused");
            assert_eq!(outcome.updated.len(), names.len());
        }

        let scene = format!("paused-{round}");
        let scene_name = SceneName::from(scene.as_str());
        let (registered, paused) = {
            let (mut a, mut b) = (conn(db).await, conn(db).await);
            futures_util::join!(
                tasks::register(&mut a, items(&scene, &names, "* * * * * *"), false),
                tasks::pause_scene(&mut b, &scene_name, now_db(), "ops"),
            )
        };
        registered.expect("register").expect("nothing refused");
        paused.expect("pause");
        let filter = TaskFilter {
            scene: Some(scene.as_str().into()),
            ..TaskFilter::default()
        };
        let (stored, _) = tasks::list(&mut conn(db).await, &filter, page(100, 0))
            .await
            .expect("list");
        assert_eq!(stored.len(), names.len());
        for task in stored {
            assert_eq!(
                task.next_run_at, None,
                "round {round}: {} is due in a paused scene",
                task.name
            );
        }
    }
}

/// New tasks registered on two connections at once, in calls of several insert statements
/// each: each call gets back exactly its own tasks as stored, though the other's rows may take
/// ids between its statements.
async fn registrations_at_once_each_get_their_own_tasks(db: &Db) {
    let items = |names: &[String]| -> Vec<BulkItem> {
        names
            .iter()
            .map(|name| BulkItem {
                fields: fields(name, "at-once", TaskStatus::Enabled, Some(base())),
                depends_on: Vec::new(),
            })
            .collect()
    };
    for round in 0..10 {
        // 300 rows: four statements (256, 32, 8 and 4 rows) on MySQL.
        let names = |side: &str| -> Vec<String> {
            (0..300)
                .map(|n| format!("r{round}-{side}-{n:03}"))
                .collect()
        };
        let (a, b) = (names("a"), names("b"));
        let outcomes = {
            let (mut one, mut two) = (conn(db).await, conn(db).await);
            futures_util::join!(
                tasks::register(&mut one, items(&a), false),
                tasks::register(&mut two, items(&b), false),
            )
        };
        for (outcome, names) in [(outcomes.0, &a), (outcomes.1, &b)] {
            let created = outcome.expect("register").expect("nothing refused").created;
            let got: Vec<&str> = created.iter().map(|task| task.name.as_str()).collect();
            assert_eq!(got, *names, "round {round}: its own tasks, in order");
            for task in &created {
                let stored = find_task(db, task.id).await.expect("stored");
                assert_eq!(stored.name, task.name, "round {round}: the id is its own");
            }
        }
    }
}

/// What a change under versions did; fails the test if it found the task gone or changed.
fn done<T: std::fmt::Debug>(outcome: Conditional<T>) -> T {
    match outcome {
        Conditional::Done(done) => done,
        other => panic!("not done: {other:?}"),
    }
}

/// The ids of every task in `sort`'s order, a page of one at a time, checked against the walk
/// back from the last page by `before` cursors.
async fn walk_pages(db: &Db, sort: TaskSort) -> Vec<TaskId> {
    let read = |from: Position| async move {
        let keyset = Keyset {
            sort,
            from,
            limit: 1,
        };
        task_pages::page(&mut conn(db).await, &TaskFilter::default(), &keyset)
            .await
            .expect("a page")
    };
    let cursor = |task: &Task| Cursor {
        key: task_pages::key_of(task, sort.column),
        id: task.id,
    };
    let mut page = read(Position::Start).await;
    assert!(!page.more_before);
    let mut walked: Vec<TaskId> = ids(&page.tasks);
    while page.more_after {
        let last = page.tasks.last().map(cursor).expect("a row");
        page = read(Position::After(last)).await;
        assert_eq!(page.total, 3);
        walked.extend(ids(&page.tasks));
    }
    let mut back = vec![walked[walked.len() - 1]];
    while page.more_before {
        let first = page.tasks.first().map(cursor).expect("a row");
        page = read(Position::Before(first)).await;
        back.extend(ids(&page.tasks));
    }
    back.reverse();
    assert_eq!(back, walked, "{sort:?}: back as forth");
    walked
}
