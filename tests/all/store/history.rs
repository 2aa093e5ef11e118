//! `crates/ax-store/src/queries/runs.rs`, reading and pruning runs: history, stats, retention.

use ax_core::run::{RunStatus, TaskId};
use ax_store::queries::runs;
use ax_store::rows::models::TaskStatus;
use ax_store::Db;
use chrono::NaiveDateTime;

use crate::store::support::{
    base, conn, fields, insert_run, insert_task, millis, new_instance, on_every_backend,
    request_id, runs_of, secs, set_dispatched_at,
};

on_every_backend!(
    history_filters_and_pages,
    stats_rows_in_range,
    retention_deletes_in_batches,
);

async fn history_filters_and_pages(db: &Db) {
    use ax_store::queries::runs::{Cursor, RunFilter};
    use RunStatus::*;
    let t = base();
    let x = insert_task(db, fields("x", "s1", TaskStatus::Enabled, None)).await;
    let y = insert_task(db, fields("y", "s2", TaskStatus::Enabled, None)).await;
    // Inserted in this order, so ids grow down the list.
    let plan = [
        ("r1", x.id, t, Success),
        ("r2", x.id, t + secs(10), Failed),
        ("r3", x.id, t + secs(10), Success),
        ("r4", x.id, t + secs(20), Ready),
        ("r5", x.id, t + secs(30), Success),
        ("y1", y.id, t + secs(10), Success),
        ("y2", y.id, t + secs(40), Failed),
    ];
    let mut rid_of = std::collections::HashMap::new();
    for (name, task, at, status) in plan {
        let rid = request_id();
        insert_run(db, &new_instance(task, &rid, at, status)).await;
        rid_of.insert(rid, name);
    }

    let history = |filter: RunFilter, cursor: Option<Cursor>, limit: i64| {
        let rid_of = rid_of.clone();
        async move {
            let rows = runs::history(&mut conn(db).await, &filter, cursor, limit)
                .await
                .expect("history");
            let names: Vec<&str> = rows.iter().map(|r| rid_of[&r.request_id]).collect();
            (names, rows)
        }
    };
    let names = |filter: RunFilter| {
        let history = &history;
        async move { history(filter, None, 100).await.0 }
    };
    let all = RunFilter::default;

    // Newest scheduled first; the same time by id, newest first.
    assert_eq!(
        names(all()).await,
        vec!["y2", "r5", "r4", "y1", "r3", "r2", "r1"]
    );
    let by_task = RunFilter {
        task_id: Some(x.id),
        ..all()
    };
    assert_eq!(
        names(by_task.clone()).await,
        vec!["r5", "r4", "r3", "r2", "r1"]
    );
    let by_scene = |scene: &str| RunFilter {
        scene: Some(scene.into()),
        ..all()
    };
    assert_eq!(names(by_scene("s2")).await, vec!["y2", "y1"]);
    assert_eq!(
        names(by_scene("s1")).await,
        vec!["r5", "r4", "r3", "r2", "r1"]
    );
    assert!(names(by_scene("nope")).await.is_empty());
    let by_status = |status: RunStatus| RunFilter {
        statuses: vec![status],
        ..all()
    };
    assert_eq!(
        names(by_status(Success)).await,
        vec!["r5", "y1", "r3", "r1"]
    );
    assert_eq!(names(by_status(Failed)).await, vec!["y2", "r2"]);
    assert!(names(by_status(Running)).await.is_empty());
    let either = RunFilter {
        statuses: vec![Failed, Running],
        ..all()
    };
    assert_eq!(
        names(either).await,
        vec!["y2", "r2"],
        "any of several statuses"
    );
    let of_tasks = RunFilter {
        task_ids: Some(vec![x.id]),
        statuses: vec![Success, Failed],
        ..all()
    };
    assert_eq!(names(of_tasks).await, vec!["r5", "r3", "r2", "r1"]);
    let of_no_task = RunFilter {
        task_ids: Some(Vec::new()),
        ..all()
    };
    assert!(names(of_no_task).await.is_empty(), "a name naming no task");
    let from = RunFilter {
        from: Some(t + secs(10)),
        ..all()
    };
    assert_eq!(
        names(from).await,
        vec!["y2", "r5", "r4", "y1", "r3", "r2"],
        "from is inclusive"
    );
    let to = RunFilter {
        to: Some(t + secs(30)),
        ..all()
    };
    assert_eq!(
        names(to).await,
        vec!["r4", "y1", "r3", "r2", "r1"],
        "to is exclusive"
    );
    let combined = RunFilter {
        task_id: Some(x.id),
        task_ids: None,
        scene: Some("s1".into()),
        statuses: vec![Success],
        from: Some(t + secs(10)),
        to: Some(t + secs(30)),
    };
    assert_eq!(names(combined).await, vec!["r3"]);
    let mismatch = RunFilter {
        task_id: Some(x.id),
        scene: Some("s2".into()),
        ..all()
    };
    assert!(names(mismatch).await.is_empty());
    let (limited, _) = history(all(), None, 3).await;
    assert_eq!(limited, vec!["y2", "r5", "r4"]);

    // Cursor pages of 2: every row exactly once, across the tie at t+10.
    let pages_of = |filter: RunFilter| {
        let history = &history;
        async move {
            let mut pages: Vec<Vec<&str>> = Vec::new();
            let mut cursor = None;
            loop {
                let (names, rows) = history(filter.clone(), cursor, 2).await;
                if rows.is_empty() {
                    break;
                }
                let last = rows.last().expect("non-empty");
                cursor = Some(Cursor {
                    scheduled_at: last.scheduled_at,
                    id: last.id,
                });
                pages.push(names);
                assert!(pages.len() <= 10, "paging does not terminate: {pages:?}");
            }
            pages
        }
    };
    assert_eq!(
        pages_of(all()).await,
        vec![
            vec!["y2", "r5"],
            vec!["r4", "y1"],
            vec!["r3", "r2"],
            vec!["r1"]
        ]
    );
    assert_eq!(
        pages_of(by_task).await,
        vec![vec!["r5", "r4"], vec!["r3", "r2"], vec!["r1"]]
    );
}

async fn stats_rows_in_range(db: &Db) {
    use RunStatus::*;
    let t = base();
    let x = insert_task(db, fields("x", "s", TaskStatus::Enabled, None)).await;
    let y = insert_task(db, fields("y", "s", TaskStatus::Enabled, None)).await;
    let mut expected = Vec::new();
    for (task, at, status, counted) in [
        (x.id, t - millis(1), Success, false),
        (x.id, t, Success, true),
        (x.id, t + secs(5), Failed, true),
        (x.id, t + secs(5), Missed, true),
        (x.id, t + secs(10) - millis(1), Running, true),
        (x.id, t + secs(10), Success, false),
        (y.id, t + secs(5), Success, false),
    ] {
        let id = request_id();
        insert_run(db, &new_instance(task, &id, at, status)).await;
        // The first attempt's reply records when it was sent (a MISSED run never was).
        let dispatched = (status != Missed).then(|| at + millis(250));
        if let Some(sent) = dispatched {
            set_dispatched_at(db, &id, sent).await;
        }
        if counted {
            expected.push((status, at, dispatched));
        }
    }
    let mut rows = runs::for_stats(&mut conn(db).await, x.id, t, t + secs(10))
        .await
        .expect("for_stats");
    rows.sort();
    expected.sort();
    let rows: Vec<_> = rows
        .into_iter()
        .map(|(status, _, _, scheduled, dispatched)| (status, scheduled, dispatched))
        .collect();
    assert_eq!(rows, expected);
    let none = runs::for_stats(&mut conn(db).await, x.id, t + secs(20), t + secs(30))
        .await
        .expect("for_stats");
    assert!(none.is_empty());
    let missing = runs::for_stats(&mut conn(db).await, TaskId(y.id.0 + 1000), t, t + secs(10))
        .await
        .expect("for_stats");
    assert!(missing.is_empty());
}

async fn retention_deletes_in_batches(db: &Db) {
    use RunStatus::*;
    let t = base();
    let task = insert_task(db, fields("old", "s", TaskStatus::Enabled, None)).await;
    let before = t + secs(3);
    // Inserted out of order: the oldest finished go first, not the lowest ids.
    let mut rids = std::collections::HashMap::new();
    for (name, status, finished) in [
        ("f3", Success, Some(t + secs(2))),
        ("f1", Failed, Some(t)),
        ("f5", Success, Some(t + secs(10))),
        ("open-ready", Ready, None),
        ("f2", Missed, Some(t + secs(1))),
        ("f4", Success, Some(before)),
        ("open-running", Running, None),
        ("open-pending", Pending, None),
    ] {
        let rid = request_id();
        // Scheduled long ago, so only finished_at decides.
        let mut row = new_instance(task.id, &rid, t - secs(86_400), status);
        row.finished_at = finished;
        insert_run(db, &row).await;
        rids.insert(name, rid);
    }
    let remaining = || {
        let rids = rids.clone();
        async move {
            let (rows, _) = runs_of(db, task.id).await;
            let mut names: Vec<&str> = rids
                .iter()
                .filter(|(_, rid)| rows.iter().any(|r| &r.request_id == *rid))
                .map(|(name, _)| *name)
                .collect();
            names.sort();
            names
        }
    };
    let delete = |before: NaiveDateTime, limit: i64| async move {
        runs::delete_finished_before(&mut conn(db).await, before, limit)
            .await
            .expect("delete_finished_before")
    };

    assert_eq!(delete(before, 2).await, 2);
    assert_eq!(
        remaining().await,
        vec![
            "f3",
            "f4",
            "f5",
            "open-pending",
            "open-ready",
            "open-running"
        ],
        "the two oldest go first"
    );
    assert_eq!(delete(before, 2).await, 1);
    assert_eq!(
        remaining().await,
        vec!["f4", "f5", "open-pending", "open-ready", "open-running"],
        "finished exactly at `before` stays"
    );
    assert_eq!(delete(before, 2).await, 0, "done");
    // Far in the future: every finished row, but never an open one.
    let future = t + secs(86_400 * 365);
    assert_eq!(delete(future, 100).await, 2);
    assert_eq!(
        remaining().await,
        vec!["open-pending", "open-ready", "open-running"]
    );
    assert_eq!(delete(future, 100).await, 0);
}
