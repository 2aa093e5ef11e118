//! `crates/ax-store/src/queries/overview.rs`, the dashboard's reads: runs by status over the hour and
//! the day in one statement, the pauses with since when and by whom, the members recovered.

use ax_core::run::{RunStatus, TaskId};
use ax_store::queries::executors::{self, HealthRow};
use ax_store::queries::overview::{self, RunCount};
use ax_store::queries::tasks;
use ax_store::rows::models::TaskStatus;
use ax_store::Db;
use chrono::NaiveDateTime;

use crate::store::support::{
    base, conn, fields, insert_run, insert_task, millis, new_instance, on_every_backend,
    request_id, secs,
};

on_every_backend!(
    runs_by_status_over_a_range_and_its_recent_end,
    pauses_note_since_when_and_by_whom,
    members_recovered_within_the_hour,
);

async fn runs_by_status_over_a_range_and_its_recent_end(db: &Db) {
    use RunStatus::*;
    let until = base();
    let hour = secs(3600);
    let task = insert_task(db, fields("counted", "s1", TaskStatus::Enabled, None)).await;
    for (offset, status) in [
        (-secs(86_400) - millis(1), Success), // before the day
        (-secs(86_400), Success),             // its first instant
        (-hour - millis(1), Success),         // older than the hour
        (-hour, Success),                     // the hour's first instant
        (-secs(60), Failed),
        (secs(0), Running), // the last instant
        (millis(1), Ready), // after it
    ] {
        insert_run(
            db,
            &new_instance(task.id, &request_id(), until + offset, status),
        )
        .await;
    }
    let counts = overview::run_counts(
        &mut conn(db).await,
        until - secs(86_400),
        until - hour,
        until,
    )
    .await
    .expect("run counts");
    let count = |status| counts.get(&status).copied().unwrap_or_default();
    assert_eq!(count(Success), RunCount { all: 3, recent: 1 });
    assert_eq!(count(Failed), RunCount { all: 1, recent: 1 });
    assert_eq!(count(Running), RunCount { all: 1, recent: 1 });
    assert_eq!(count(Ready), RunCount::default(), "after the range");
    // The older part alone, as the dashboard caches it: recent at its end, the rest older.
    let older = overview::run_counts(
        &mut conn(db).await,
        until - secs(86_400),
        until - hour,
        until - hour,
    )
    .await
    .expect("older counts");
    assert_eq!(older.get(&Success), Some(&RunCount { all: 3, recent: 1 }));
}

async fn pauses_note_since_when_and_by_whom(db: &Db) {
    let at = |n: i64| base() + secs(n);
    let a = insert_task(db, fields("a", "s1", TaskStatus::Paused, None)).await;
    let b = insert_task(db, fields("b", "s1", TaskStatus::Enabled, Some(at(100)))).await;
    let c = insert_task(db, fields("c", "s2", TaskStatus::Paused, None)).await;
    let note = |ids: Vec<TaskId>, when: NaiveDateTime, by: &'static str| async move {
        tasks::note_pauses(&mut conn(db).await, &ids, when, by)
            .await
            .expect("note pauses");
    };
    let paused = |limit: i64| async move {
        overview::paused_tasks(&mut conn(db).await, limit)
            .await
            .expect("paused tasks")
    };
    let seen =
        |rows: &[overview::PausedTask]| -> Vec<(TaskId, Option<NaiveDateTime>, Option<String>)> {
            rows.iter()
                .map(|row| (row.id, row.paused_at, row.paused_by.clone()))
                .collect()
        };

    // Created paused: noted; an enabled task is not.
    note(vec![a.id, b.id, c.id], at(1), "ops").await;
    let (count, rows) = paused(10).await;
    assert_eq!(count, 2);
    assert_eq!(
        seen(&rows),
        vec![
            (c.id, Some(at(1)), Some("ops".into())),
            (a.id, Some(at(1)), Some("ops".into())),
        ],
        "the latest paused first, then by id"
    );
    // Noted again while still paused (an update that kept it paused): since its first pause.
    note(vec![a.id], at(2), "someone-else").await;
    // Paused later by another token: first.
    assert!(tasks::pause(&mut conn(db).await, b.id, at(3))
        .await
        .expect("pause"));
    note(vec![b.id], at(3), "alice").await;
    let (count, rows) = paused(2).await;
    assert_eq!(count, 3, "counted beyond the limit");
    assert_eq!(
        seen(&rows),
        vec![
            (b.id, Some(at(3)), Some("alice".into())),
            (c.id, Some(at(1)), Some("ops".into())),
        ]
    );
    // Resumed: forgotten; paused again later, since then.
    let resumed = tasks::resume(&mut conn(db).await, b.id, ax_store::from_db(at(4)))
        .await
        .expect("resume");
    assert!(resumed.is_some());
    note(vec![b.id], at(4), "alice").await;
    let (count, rows) = paused(10).await;
    assert_eq!(count, 2);
    assert!(rows.iter().all(|row| row.id != b.id));

    // A scene's pause: since when and by whom, until it is resumed.
    tasks::pause_scene(&mut conn(db).await, &"s2".into(), at(5), "bob")
        .await
        .expect("pause scene");
    let scenes = overview::paused_scenes(&mut conn(db).await)
        .await
        .expect("paused scenes");
    assert_eq!(
        scenes,
        vec![overview::PausedScene {
            scene: "s2".into(),
            paused_at: Some(at(5)),
            paused_by: Some("bob".into()),
        }]
    );
    tasks::resume_scene(&mut conn(db).await, &"s2".into(), ax_store::from_db(at(6)))
        .await
        .expect("resume scene");
    let scenes = overview::paused_scenes(&mut conn(db).await)
        .await
        .expect("paused scenes");
    assert!(scenes.is_empty(), "{scenes:?}");
}

async fn members_recovered_within_the_hour(db: &Db) {
    let now = base();
    let row =
        |url: &str, unhealthy_until: Option<NaiveDateTime>, changed_at: NaiveDateTime| HealthRow {
            url: url.into(),
            unhealthy_until,
            last_failure_at: Some(changed_at - secs(30)),
            last_error: Some("connection refused".into()),
            changed_at,
        };
    for health in [
        row("http://recovered:1", None, now - secs(600)),
        row("http://unhealthy:1", Some(now + secs(20)), now - secs(10)),
        row("http://long-ago:1", None, now - secs(7200)),
    ] {
        executors::share_health(&mut conn(db).await, health, true)
            .await
            .expect("share health");
    }
    let recovered = overview::members_recovered_since(&mut conn(db).await, now - secs(3600))
        .await
        .expect("recovered members");
    let urls: Vec<&str> = recovered.iter().map(|row| row.url.as_str()).collect();
    assert_eq!(urls, vec!["http://recovered:1"]);
    assert_eq!(
        recovered[0].last_error.as_deref(),
        Some("connection refused")
    );
}
