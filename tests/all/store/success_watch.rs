//! `crates/ax-store/src/queries/success_watch.rs` with the folder (`alerts::fold`): a writer of runs
//! queues only the successes of watched tasks, reads the set again when the folder moves it,
//! and a success its writer did not queue (the task was alerted meanwhile) is found by the
//! folder, so the alert still resolves.

use ax_core::alerting::{AlertEvent, AlertRule};
use ax_core::run::{blind, RequestId, TaskId};
use ax_store::queries::alerts::{self, AlertFilter};
use ax_store::queries::run_writes::{self, Target};
use ax_store::queries::success_watch::SuccessWatch;
use ax_store::rows::models::TaskStatus;
use ax_store::Db;
use chrono::NaiveDateTime;

use crate::store::support::{
    at, base, conn, decide, failed_for_good, fields, fired, insert_run, insert_task,
    on_every_backend, report, request_id, secs, succeeded, with_retry,
};

on_every_backend!(a_success_is_queued_only_while_its_task_is_watched);

fn rule() -> AlertRule {
    AlertRule {
        events: vec![AlertEvent::Failed, AlertEvent::Resolved],
        channels: vec!["hook".into()],
        threshold: 1,
        window_secs: 300,
        silence_secs: 1800,
    }
}

/// A new run of `task`, scheduled at `t`, ended by its writer as a success at `t + 1 s`.
async fn succeed(db: &Db, task: TaskId, t: NaiveDateTime, watch: &SuccessWatch) -> RequestId {
    let rid = request_id();
    insert_run(db, &fired(task, &rid, t)).await;
    let event = report(Some(1), succeeded(None, None), t + secs(1));
    let write = blind(&event).expect("a blind success");
    let target = Target {
        run: &rid,
        task: Some(task),
    };
    let changed = run_writes::apply(&mut conn(db).await, &[(target, &write)], Some(watch))
        .await
        .expect("write a success");
    assert_eq!(changed, 1);
    rid
}

async fn fail(db: &Db, task: TaskId, t: NaiveDateTime) {
    let rid = request_id();
    insert_run(db, &fired(task, &rid, t)).await;
    decide(
        db,
        &rid,
        &report(Some(1), failed_for_good(Some("E1")), t + secs(1)),
    )
    .await;
}

/// Folds what is queued; how many events it took.
async fn fold(db: &Db, t: NaiveDateTime) -> usize {
    alerts::fold(
        &mut conn(db).await,
        "folder",
        &rule(),
        (chrono::Duration::seconds(10), at(t)),
    )
    .await
    .expect("fold")
}

async fn alerts_of(db: &Db, task: TaskId) -> Vec<(AlertEvent, Option<String>)> {
    let filter = AlertFilter {
        task: Some(task),
        ..AlertFilter::default()
    };
    let mut rows = alerts::list(&mut conn(db).await, &filter, 100)
        .await
        .expect("list alerts");
    rows.sort_by_key(|row| row.created_at);
    rows.into_iter()
        .map(|row| (row.event, row.request_id))
        .collect()
}

async fn a_success_is_queued_only_while_its_task_is_watched(db: &Db) {
    alerts::set_enabled(&mut conn(db).await, true)
        .await
        .expect("alerts on");
    let make = |name| with_retry(fields(name, "watch", TaskStatus::Enabled, None), 0);
    let a = insert_task(db, make("a")).await.id;
    let b = insert_task(db, make("b")).await.id;
    let watch = SuccessWatch::default();
    let t = base();

    // `a` fails; its success comes before any fold, from a writer that watches nothing.
    fail(db, a, t).await;
    succeed(db, b, t, &watch).await;
    let unqueued = succeed(db, a, t + secs(5), &watch).await;
    assert_eq!(
        fold(db, t + secs(10)).await,
        1,
        "only the failure was queued"
    );
    let told = alerts_of(db, a).await;
    assert_eq!(told.len(), 1);
    assert_eq!(told[0].0, AlertEvent::Failed);

    // The fold that alerted `a` found the success written meanwhile: it resolves.
    assert_eq!(fold(db, t + secs(11)).await, 1);
    let told = alerts_of(db, a).await;
    assert_eq!(told.len(), 2, "{told:?}");
    assert_eq!(told[1], (AlertEvent::Resolved, Some(unqueued.to_string())));

    // Resolved, `a` is watched no more: the same writer reads the set again and queues nothing.
    succeed(db, a, t + secs(20), &watch).await;
    succeed(db, b, t + secs(20), &watch).await;
    assert_eq!(fold(db, t + secs(30)).await, 0);

    // Alerted again (after its silence), `a`'s next success is queued by its writer.
    fail(db, a, t + secs(2000)).await;
    assert_eq!(fold(db, t + secs(2010)).await, 1);
    let queued = succeed(db, a, t + secs(2020), &watch).await;
    succeed(db, b, t + secs(2020), &watch).await;
    assert_eq!(
        fold(db, t + secs(2030)).await,
        1,
        "only a's success was queued"
    );
    let told = alerts_of(db, a).await;
    assert_eq!(told.len(), 4, "{told:?}");
    assert_eq!(told[3], (AlertEvent::Resolved, Some(queued.to_string())));
}
