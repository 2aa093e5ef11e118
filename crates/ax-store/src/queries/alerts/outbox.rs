//! The outbox: its rows claimed, sent and settled by the senders, and listed.

use ax_core::ids::SceneName;
use chrono::{DateTime, NaiveDateTime, Utc};
use diesel::prelude::*;
use diesel::sql_types::{BigInt, Text, Timestamp};
use diesel_async::RunQueryDsl;

use crate::rows::schema::ax_alert::dsl as a;
use crate::with_conn;
use crate::{to_db, Conn, StoreError};
use ax_core::alerting::{AlertEvent, AlertLane, AlertStatus, NewAlert};
use ax_core::run::TaskId;

/// An outbox row: one alert on one channel.
#[derive(Debug, Clone, PartialEq, Eq, Queryable, QueryableByName, Selectable, Insertable)]
#[diesel(table_name = crate::rows::schema::ax_alert)]
#[diesel(check_for_backend(diesel::mysql::Mysql, diesel::pg::Pg, diesel::sqlite::Sqlite))]
pub struct AlertRow {
    pub id: String,
    /// Empty for a folded event: it goes out with the next alert.
    pub channel: String,
    pub event: AlertEvent,
    pub subject: String,
    pub task_id: Option<TaskId>,
    pub scene: Option<String>,
    pub request_id: Option<String>,
    pub code: Option<String>,
    pub message: Option<String>,
    pub count: i32,
    pub folded: i32,
    pub folded_since: Option<NaiveDateTime>,
    pub at: NaiveDateTime,
    pub status: AlertStatus,
    pub tries: i32,
    pub next_try_at: Option<NaiveDateTime>,
    pub claimant: Option<String>,
    pub claimed_until: Option<NaiveDateTime>,
    pub sent_at: Option<NaiveDateTime>,
    pub last_error: Option<String>,
    pub created_at: NaiveDateTime,
}

impl AlertRow {
    /// The row of a new alert the folder decided on: not tried yet, due at `now`.
    pub(super) fn new(alert: NewAlert, now: DateTime<Utc>) -> Self {
        let count = |n: u32| i32::try_from(n).unwrap_or(i32::MAX);
        AlertRow {
            id: alert.id,
            channel: alert.channel,
            event: alert.event,
            subject: alert.subject,
            task_id: alert.task_id,
            scene: alert.scene,
            request_id: alert.request_id,
            code: alert.code,
            message: alert.message,
            count: count(alert.count),
            folded: count(alert.folded),
            folded_since: alert.folded_since.map(to_db),
            // As the event was read: its time is the queue's, not one made here.
            at: alert.at.naive_utc(),
            status: alert.status,
            tries: 0,
            next_try_at: Some(to_db(now)),
            claimant: None,
            claimed_until: None,
            sent_at: None,
            last_error: None,
            created_at: to_db(now),
        }
    }
}

/// Claims up to `limit` alerts of `lane` due to be sent on `channel`, for `claimant` until
/// `until`; returns them.
pub async fn claim_due(
    conn: &mut Conn,
    (claimant, lane, channel): (&str, AlertLane, &str),
    now: DateTime<Utc>,
    until: DateTime<Utc>,
    limit: i64,
) -> Result<Vec<AlertRow>, StoreError> {
    let now = to_db(now);
    // PostgreSQL claims in one statement: the due rows another sender is claiming are skipped,
    // not waited for, and the claimed rows come back with the update.
    if let Conn::Postgres(c) = conn {
        let of_lane = match lane {
            AlertLane::Runs => "IS NOT NULL",
            AlertLane::Others => "IS NULL",
        };
        // The due rows are chosen once (MATERIALIZED): a subquery in the UPDATE's WHERE may be
        // run again for each row, each time locking the next rows of the limit.
        let sql = format!(
            "WITH due AS MATERIALIZED (SELECT id FROM ax_alert WHERE channel = $3 \
             AND task_id {of_lane} AND status = $4 AND next_try_at <= $5 \
             AND (claimed_until IS NULL OR claimed_until < $5) \
             ORDER BY next_try_at LIMIT $6 FOR UPDATE SKIP LOCKED) \
             UPDATE ax_alert SET claimant = $1, claimed_until = $2 FROM due \
             WHERE ax_alert.channel = $3 AND ax_alert.id = due.id RETURNING ax_alert.*"
        );
        return Ok(diesel::sql_query(sql)
            .bind::<Text, _>(claimant)
            .bind::<Timestamp, _>(to_db(until))
            .bind::<Text, _>(channel)
            .bind::<Text, _>(AlertStatus::Pending)
            .bind::<Timestamp, _>(now)
            .bind::<BigInt, _>(limit)
            .load(&mut ***c)
            .await?);
    }
    let due: Vec<String> = with_conn!(conn, |c| {
        let query = a::ax_alert.into_boxed();
        let query = match lane {
            AlertLane::Runs => query.filter(a::task_id.is_not_null()),
            AlertLane::Others => query.filter(a::task_id.is_null()),
        };
        query
            .filter(a::channel.eq(channel))
            .filter(a::status.eq(AlertStatus::Pending))
            .filter(a::next_try_at.le(now))
            .filter(a::claimed_until.is_null().or(a::claimed_until.lt(now)))
            .order(a::next_try_at.asc())
            .limit(limit)
            .select(a::id)
            .load(c)
            .await
    })?;
    if due.is_empty() {
        return Ok(Vec::new());
    }
    let ids: Vec<&str> = due.iter().map(String::as_str).collect();
    let until = to_db(until);
    // Of two processes that saw a row due, the one whose UPDATE finds it so takes it: the
    // rows this one holds with this claim's expiry are the ones it won.
    with_conn!(conn, |c| diesel::update(
        a::ax_alert
            .filter(a::channel.eq(channel))
            .filter(a::id.eq_any(&ids))
            .filter(a::status.eq(AlertStatus::Pending))
            .filter(a::next_try_at.le(now))
            .filter(a::claimed_until.is_null().or(a::claimed_until.lt(now)))
    )
    .set((a::claimant.eq(claimant), a::claimed_until.eq(until)))
    .execute(c)
    .await)?;
    Ok(with_conn!(conn, |c| a::ax_alert
        .filter(a::channel.eq(channel))
        .filter(a::id.eq_any(&ids))
        .filter(a::claimant.eq(claimant))
        .filter(a::claimed_until.eq(until))
        .select(AlertRow::as_select())
        .load(c)
        .await)?)
}

/// Settles the alerts sent on `channel` (by id), if `claimant` still holds them: one
/// statement.
pub async fn settle_sent(
    conn: &mut Conn,
    channel: &str,
    ids: &[&str],
    claimant: &str,
    now: DateTime<Utc>,
) -> Result<(), StoreError> {
    with_conn!(conn, |c| diesel::update(
        a::ax_alert
            .filter(a::channel.eq(channel))
            .filter(a::id.eq_any(ids))
            .filter(a::claimant.eq(claimant))
    )
    .set((
        a::status.eq(AlertStatus::Sent),
        a::tries.eq(a::tries + 1),
        a::next_try_at.eq(None::<NaiveDateTime>),
        a::last_error.eq(None::<String>),
        a::sent_at.eq(Some(to_db(now))),
        a::claimed_until.eq(None::<NaiveDateTime>),
    ))
    .execute(c)
    .await)?;
    Ok(())
}

/// Settles a claimed alert that failed, if `claimant` still holds it: tried again at
/// `retry_at`, or given up (`None`).
pub async fn settle_failed(
    conn: &mut Conn,
    (id, channel): (&str, &str),
    claimant: &str,
    (error, retry_at): (&str, Option<DateTime<Utc>>),
) -> Result<(), StoreError> {
    let status = match retry_at {
        Some(_) => AlertStatus::Pending,
        None => AlertStatus::Failed,
    };
    with_conn!(conn, |c| diesel::update(
        a::ax_alert
            .filter(a::id.eq(id))
            .filter(a::channel.eq(channel))
            .filter(a::claimant.eq(claimant))
    )
    .set((
        a::status.eq(status),
        a::tries.eq(a::tries + 1),
        a::next_try_at.eq(retry_at.map(to_db)),
        a::last_error.eq(Some(error)),
        a::claimed_until.eq(None::<NaiveDateTime>),
    ))
    .execute(c)
    .await)?;
    Ok(())
}

/// Which alerts a list shows.
#[derive(Debug, Clone, Default)]
pub struct AlertFilter {
    pub task: Option<TaskId>,
    /// Only alerts about this scene's tasks.
    pub scene: Option<SceneName>,
    pub status: Option<AlertStatus>,
    /// Older than this (the last row of the page before): `(created_at, id, channel)`.
    pub before: Option<(NaiveDateTime, String, String)>,
}

/// Alerts, newest first.
pub async fn list(
    conn: &mut Conn,
    filter: &AlertFilter,
    limit: i64,
) -> Result<Vec<AlertRow>, StoreError> {
    with_conn!(conn, |c| {
        let mut query = a::ax_alert.select(AlertRow::as_select()).into_boxed();
        if let Some(task) = filter.task {
            query = query.filter(a::task_id.eq(task));
        }
        if let Some(scene) = &filter.scene {
            query = query.filter(a::scene.eq(scene.clone()));
        }
        if let Some(status) = filter.status {
            query = query.filter(a::status.eq(status));
        }
        if let Some((at, id, channel)) = &filter.before {
            query = query.filter(
                a::created_at.lt(*at).or(a::created_at.eq(*at).and(
                    a::id
                        .lt(id.clone())
                        .or(a::id.eq(id.clone()).and(a::channel.lt(channel.clone()))),
                )),
            );
        }
        query
            .order((a::created_at.desc(), a::id.desc(), a::channel.desc()))
            .limit(limit)
            .load(c)
            .await
    })
    .map_err(Into::into)
}
