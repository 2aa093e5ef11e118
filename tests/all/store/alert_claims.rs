//! `alerts::claim_due` (`crates/ax-store/src/queries/alerts/outbox.rs`): senders claim the due
//! alerts of their lane and channel, none twice while a claim holds; on PostgreSQL a row
//! another sender is claiming is skipped (`FOR UPDATE SKIP LOCKED`), not waited for.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use ax_core::alerting::{AlertEvent, AlertLane, AlertStatus};
use ax_core::run::TaskId;
use ax_store::queries::alerts::{self, AlertRow};
use ax_store::rows::schema::ax_alert::dsl as a;
use ax_store::{to_db, Conn, Db};
use chrono::{DateTime, Utc};
use diesel_async::{RunQueryDsl, SimpleAsyncConnection};

use super::support::on_every_backend;
on_every_backend!(senders_claim_each_due_alert_once_while_their_claim_holds);

fn row(id: &str, channel: &str, task_id: Option<i64>, due: DateTime<Utc>) -> AlertRow {
    AlertRow {
        id: id.to_string(),
        channel: channel.to_string(),
        event: AlertEvent::Missed,
        subject: format!("alert {id}"),
        task_id: task_id.map(TaskId),
        scene: None,
        request_id: None,
        code: None,
        message: None,
        count: 1,
        folded: 0,
        folded_since: None,
        at: to_db(due),
        status: AlertStatus::Pending,
        tries: 0,
        next_try_at: Some(to_db(due)),
        claimant: None,
        claimed_until: None,
        sent_at: None,
        last_error: None,
        created_at: to_db(due),
    }
}

async fn insert(db: &Db, rows: &[AlertRow]) {
    let mut conn = db.conn().await.expect("conn");
    for row in rows {
        ax_store::with_conn!(&mut conn, |c| diesel::insert_into(a::ax_alert)
            .values(row)
            .execute(c)
            .await)
        .expect("insert an alert");
    }
}

async fn claim(
    db: &Db,
    (claimant, lane, channel): (&str, AlertLane, &str),
    now: DateTime<Utc>,
    limit: i64,
) -> Vec<String> {
    let mut conn = db.conn().await.expect("conn");
    let until = now + chrono::Duration::seconds(30);
    let rows = alerts::claim_due(&mut conn, (claimant, lane, channel), now, until, limit)
        .await
        .expect("claim");
    for row in &rows {
        assert_eq!(row.claimant.as_deref(), Some(claimant), "{row:?}");
        assert_eq!(row.claimed_until, Some(to_db(until)), "{row:?}");
        assert_eq!(row.channel, channel, "{row:?}");
        assert_eq!(row.task_id.is_some(), lane == AlertLane::Runs, "{row:?}");
    }
    let mut ids: Vec<String> = rows.into_iter().map(|row| row.id).collect();
    ids.sort();
    ids
}

async fn senders_claim_each_due_alert_once_while_their_claim_holds(db: &Db) {
    let now = Utc::now();
    let past = |s: i64| now - chrono::Duration::seconds(s);
    let mut rows: Vec<AlertRow> = (0..6)
        .map(|n| row(&format!("run-{n}"), "hook", Some(n), past(60 - n)))
        .collect();
    rows.push(row("other-0", "hook", None, past(10)));
    rows.push(row("other-1", "hook", None, past(5)));
    rows.push(row("mail-0", "mail", Some(1), past(10)));
    rows.push(row(
        "later",
        "hook",
        Some(9),
        now + chrono::Duration::seconds(600),
    ));
    insert(db, &rows).await;

    // The oldest first, up to the limit; the next sender takes the rest of the lane.
    let first = claim(db, ("a", AlertLane::Runs, "hook"), now, 4).await;
    assert_eq!(first, ["run-0", "run-1", "run-2", "run-3"]);
    let second = claim(db, ("b", AlertLane::Runs, "hook"), now, 10).await;
    assert_eq!(
        second,
        ["run-4", "run-5"],
        "the rest, not a claimed one nor a later one"
    );
    assert!(claim(db, ("c", AlertLane::Runs, "hook"), now, 10)
        .await
        .is_empty());
    let others = claim(db, ("c", AlertLane::Others, "hook"), now, 10).await;
    assert_eq!(others, ["other-0", "other-1"]);
    assert_eq!(
        claim(db, ("c", AlertLane::Runs, "mail"), now, 10).await,
        ["mail-0"]
    );

    // Once the claims lapse, the rows are due again, for whoever claims them.
    let lapsed = now + chrono::Duration::seconds(31);
    let again = claim(db, ("d", AlertLane::Runs, "hook"), lapsed, 10).await;
    assert_eq!(again.len(), 6, "{again:?}");

    if db.backend() == "postgres" {
        a_row_being_claimed_is_skipped(db, lapsed + chrono::Duration::seconds(31)).await;
    }
}

/// A row another transaction holds (a sender claiming it) is passed over at once.
async fn a_row_being_claimed_is_skipped(db: &Db, now: DateTime<Utc>) {
    let Conn::Postgres(mut holder) = db.conn().await.expect("conn") else {
        panic!("a PostgreSQL store");
    };
    holder
        .batch_execute("BEGIN; SELECT id FROM ax_alert WHERE id = 'run-0' FOR UPDATE")
        .await
        .expect("lock run-0");
    let started = Instant::now();
    let claimed = claim(db, ("e", AlertLane::Runs, "hook"), now, 10).await;
    let took = started.elapsed();
    assert_eq!(claimed.len(), 5, "all but the locked row: {claimed:?}");
    assert!(!claimed.contains(&"run-0".to_string()));
    assert!(
        took < Duration::from_secs(5),
        "waited {took:?} for the lock"
    );
    holder.batch_execute("ROLLBACK").await.expect("rollback");
    let seen: HashSet<String> = claim(db, ("f", AlertLane::Runs, "hook"), now, 10)
        .await
        .into_iter()
        .collect();
    assert_eq!(
        seen,
        HashSet::from(["run-0".to_string()]),
        "released: claimed"
    );
}
