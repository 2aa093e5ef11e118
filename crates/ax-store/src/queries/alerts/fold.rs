//! The fold: one folder at a time takes the queued events, asks `ax_core::alerting` what they
//! do to the fold states, and writes its answer (the states, the outbox rows, the watched
//! tasks) in the same transaction.

use std::collections::HashMap;

use chrono::{DateTime, Duration, NaiveDateTime, Utc};
use diesel::prelude::*;
use diesel_async::RunQueryDsl;

use super::outbox::AlertRow;
use crate::queries::{advisory_locks, success_watch};
use crate::rows::schema::ax_alert::dsl as a;
use crate::rows::schema::ax_alert_event::dsl as e;
use crate::rows::schema::ax_alert_fold::dsl as f;
use crate::rows::schema::ax_alert_state::dsl as s;
use crate::rows::schema::ax_scene::dsl as sc;
use crate::rows::schema::ax_task::dsl as t;
use crate::{from_db, to_db, Conn, StoreError};
use crate::{server_or_sqlite, with_conn};
use ax_core::alerting::{
    asked, closed_groups, fold_asks, AlertEvent, AlertRule, Asked, FoldState, FoldStates,
    QueuedEvent, TaskFacts,
};
use ax_core::run::{RunStatus, TaskId};

/// Most run ends one fold takes.
pub const FOLD_BATCH: usize = 500;
/// Most events about members and processes one fold reads: the windows of every group they
/// fall in.
const GROUP_BATCH: i64 = 5000;
/// The `ax_alert_state` row a folder locks for its transaction.
const FOLD_LOCK_ROW: i32 = 2;
/// Most rows one multi-row insert writes.
const INSERT_CHUNK: usize = 100;

/// A queued event's row (see [`QueuedEvent`]): a run's end recorded by the triggers, or an
/// event about no run.
#[derive(Debug, Clone, Queryable, Selectable)]
#[diesel(table_name = crate::rows::schema::ax_alert_event)]
#[diesel(check_for_backend(diesel::mysql::Mysql, diesel::sqlite::Sqlite))]
struct QueuedRow {
    id: i64,
    request_id: String,
    task_id: TaskId,
    status: String,
    code: Option<String>,
    message: Option<String>,
    at: NaiveDateTime,
    subject: Option<String>,
    event: Option<String>,
    /// A run's first dispatch after it was due, in milliseconds.
    lag_ms: Option<i64>,
}

impl QueuedRow {
    /// The event as the folder's decisions take it.
    fn into_event(self) -> QueuedEvent {
        QueuedEvent {
            id: self.id,
            request_id: self.request_id,
            task_id: self.task_id,
            status: self.status,
            code: self.code,
            message: self.message,
            at: from_db(self.at),
            subject: self.subject,
            event: self.event,
            lag_ms: self.lag_ms,
        }
    }
}

/// Folds the queued events into the outbox in one transaction: run ends (up to
/// [`FOLD_BATCH`], in order), each under the most specific rule (its task's, its scene's, else
/// `default_rule`): an alert per channel, a folded row, or nothing below the threshold; a
/// success after an alert resolves it. A paused task's or scene's events are muted. Events
/// about members and processes wait in the queue until their group's window of `group_window`
/// closes, then the window's alerts (and resolutions) of each kind go out as one (see
/// [`ax_core::alerting::group_of`]). Returns how many events it took.
pub async fn fold(
    conn: &mut Conn,
    folder: &str,
    default_rule: &AlertRule,
    (group_window, now): (Duration, DateTime<Utc>),
) -> Result<usize, StoreError> {
    let (folder, default_rule) = (folder.to_string(), default_rule.clone());
    conn.transaction(move |conn| {
        Box::pin(async move {
            // On PostgreSQL a folder busy in another process is not waited for: this one's
            // next round comes within a second.
            if let Conn::Postgres(c) = conn {
                if !advisory_locks::try_for_transaction(c, "ax_alert_fold").await? {
                    return Ok(0);
                }
            }
            // The fold lock row makes folders take turns (and SQLite's write lock); not row 1,
            // which every run's end reads.
            with_conn!(conn, |c| diesel::update(
                s::ax_alert_state.filter(s::id.eq(FOLD_LOCK_ROW))
            )
            .set((s::folded_by.eq(&folder), s::folded_at.eq(to_db(now))))
            .execute(c)
            .await)?;
            // Run ends and the others are read apart: a thousand members' events waiting for
            // their window never fill the batch that run ends are read in.
            let runs = read_queue(conn, false, FOLD_BATCH as i64).await?;
            let others = read_queue(conn, true, GROUP_BATCH).await?;
            let grouped = closed_groups(&others, now, group_window);
            if runs.is_empty() && grouped.is_empty() {
                return Ok(0);
            }
            let facts = task_facts(conn, &runs).await?;
            let taken: Vec<&QueuedEvent> = runs
                .iter()
                .chain(
                    grouped
                        .iter()
                        .flat_map(|(_, events)| events.iter().copied()),
                )
                .collect();
            let asks: Vec<(&QueuedEvent, Asked)> = taken
                .iter()
                .filter_map(|&event| Some((event, asked(event, &facts, &default_rule)?)))
                .collect();
            let keys: Vec<&str> = asks.iter().map(|(_, a)| a.subject.key.as_str()).collect();
            let stored = load_states(conn, &keys).await?;
            let folded = fold_asks(&asks, &stored, &default_rule);
            save_states(conn, &stored, &folded.states).await?;
            let rows: Vec<AlertRow> = folded
                .alerts
                .into_iter()
                .map(|alert| AlertRow::new(alert, now))
                .collect();
            insert_alerts(conn, &rows).await?;
            // The ones read, not a range: a run's end given a lower id may commit later.
            let taken: Vec<i64> = taken.iter().map(|event| event.id).collect();
            for chunk in taken.chunks(FOLD_BATCH) {
                with_conn!(conn, |c| diesel::delete(
                    e::ax_alert_event.filter(e::id.eq_any(chunk))
                )
                .execute(c)
                .await)?;
            }
            if folded.watch.changed {
                // Last, so the row stays locked only to the commit: it waits for the writers
                // that read the set before, then finds what they wrote.
                success_watch::bump(conn).await?;
                let alerted: Vec<(TaskId, NaiveDateTime)> = folded
                    .watch
                    .alerted
                    .iter()
                    .map(|(task, at)| (*task, at.naive_utc()))
                    .collect();
                queue_first_successes(conn, &alerted).await?;
            }
            Ok(taken.len())
        })
    })
    .await
}

/// The queued events about no run (`about_no_run`) or the run ends, in queue order; at most
/// `limit`.
async fn read_queue(
    conn: &mut Conn,
    about_no_run: bool,
    limit: i64,
) -> Result<Vec<QueuedEvent>, StoreError> {
    let rows: Vec<QueuedRow> = with_conn!(conn, |c| {
        let query = e::ax_alert_event.into_boxed();
        let query = match about_no_run {
            true => query.filter(e::event.is_not_null()),
            false => query.filter(e::event.is_null()),
        };
        query
            .order(e::id.asc())
            .limit(limit)
            .select(QueuedRow::as_select())
            .load(c)
            .await
    })?;
    Ok(rows.into_iter().map(QueuedRow::into_event).collect())
}

/// Writes the new outbox rows; a row there already (the same alert folded before) stays.
async fn insert_alerts(conn: &mut Conn, rows: &[AlertRow]) -> Result<(), StoreError> {
    // A database server takes many rows a statement; SQLite (no round trip) one by one.
    server_or_sqlite!(
        conn,
        |c| {
            for chunk in rows.chunks(INSERT_CHUNK) {
                diesel::insert_into(a::ax_alert)
                    .values(chunk)
                    .on_conflict_do_nothing()
                    .execute(c)
                    .await?;
            }
        },
        |c| {
            for row in rows {
                diesel::insert_into(a::ax_alert)
                    .values(row)
                    .on_conflict_do_nothing()
                    .execute(c)
                    .await?;
            }
        }
    );
    Ok(())
}

/// A success found by the folder.
#[derive(QueryableByName)]
struct FoundSuccess {
    #[diesel(sql_type = diesel::sql_types::Text)]
    request_id: String,
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    task_id: i64,
    #[diesel(sql_type = diesel::sql_types::Nullable<diesel::sql_types::Text>)]
    callback_code: Option<String>,
    #[diesel(sql_type = diesel::sql_types::Nullable<diesel::sql_types::Text>)]
    callback_message: Option<String>,
    #[diesel(sql_type = diesel::sql_types::Timestamp)]
    finished_at: NaiveDateTime,
}

/// Queues, for each newly alerted task, its first success since the alert: one whose writer
/// may not yet have watched the task (see [`success_watch`]). It resolves the alert.
async fn queue_first_successes(
    conn: &mut Conn,
    alerted: &[(TaskId, NaiveDateTime)],
) -> Result<(), StoreError> {
    for chunk in alerted.chunks(INSERT_CHUNK) {
        let since = vec!["(task_id = ? AND finished_at > ?)"; chunk.len()].join(" OR ");
        let sql = format!(
            "SELECT request_id, task_id, callback_code, callback_message, finished_at \
             FROM ax_instance WHERE status = '{}' AND ({since}) ORDER BY finished_at",
            RunStatus::Success.as_str()
        );
        let sql = conn.binds(sql);
        let found: Vec<FoundSuccess> = with_conn!(conn, |c| {
            let mut query = diesel::sql_query(sql.as_str()).into_boxed();
            for (task, at) in chunk {
                query = query
                    .bind::<diesel::sql_types::BigInt, _>(task.0)
                    .bind::<diesel::sql_types::Timestamp, _>(*at);
            }
            query.load(c).await
        })?;
        let mut first: Vec<FoundSuccess> = Vec::new();
        for success in found {
            if !first.iter().any(|f| f.task_id == success.task_id) {
                first.push(success);
            }
        }
        // One its writer queued too (for lateness) is told once all the same: the second
        // finds nothing left to resolve, and carries no lag to count again.
        for success in &first {
            with_conn!(conn, |c| diesel::insert_into(e::ax_alert_event)
                .values((
                    e::request_id.eq(&success.request_id),
                    e::task_id.eq(TaskId(success.task_id)),
                    e::status.eq(RunStatus::Success.as_str()),
                    e::code.eq(&success.callback_code),
                    e::message.eq(&success.callback_message),
                    e::at.eq(success.finished_at),
                ))
                .execute(c)
                .await)?;
        }
    }
    Ok(())
}

/// The tasks of `events`: their `scene/name`, rule and lag bound, and whether they or their
/// scenes are paused.
async fn task_facts(
    conn: &mut Conn,
    events: &[QueuedEvent],
) -> Result<HashMap<TaskId, TaskFacts>, StoreError> {
    let ids: Vec<TaskId> = events.iter().map(|event| event.task_id).collect();
    type TaskRow = (
        TaskId,
        String,
        String,
        String,
        Option<AlertRule>,
        Option<i64>,
    );
    let tasks: Vec<TaskRow> = with_conn!(conn, |c| t::ax_task
        .filter(t::id.eq_any(&ids))
        .select((
            t::id,
            t::scene,
            t::name,
            t::status,
            t::alerts,
            t::alert_lag_ms
        ))
        .load(c)
        .await)?;
    let scenes: Vec<String> = tasks.iter().map(|task| task.1.clone()).collect();
    let scene_rows: Vec<(String, Option<NaiveDateTime>, Option<String>)> =
        with_conn!(conn, |c| sc::ax_scene
            .filter(sc::scene.eq_any(&scenes))
            .select((sc::scene, sc::paused_at, sc::alerts))
            .load(c)
            .await)?;
    let scene_of = |scene: &str| scene_rows.iter().find(|(name, _, _)| name == scene);
    Ok(tasks
        .into_iter()
        .map(|(id, scene, name, status, own_rule, alert_lag_ms)| {
            let scene_row = scene_of(&scene);
            let scene_paused = scene_row.is_some_and(|(_, paused, _)| paused.is_some());
            let scene_rule = scene_row
                .and_then(|(_, _, rule)| rule.as_deref())
                .and_then(|rule| serde_json::from_str::<AlertRule>(rule).ok());
            let facts = TaskFacts {
                subject: format!("{scene}/{name}"),
                scene,
                muted: status == "PAUSED" || scene_paused,
                own_rule,
                scene_rule,
                alert_lag_ms,
            };
            (id, facts)
        })
        .collect())
}

type FoldRow = (
    String,
    AlertEvent,
    Option<NaiveDateTime>,
    i32,
    Option<NaiveDateTime>,
    i32,
    Option<NaiveDateTime>,
    i32,
);

/// The stored fold states of these subjects, in one query.
async fn load_states(conn: &mut Conn, subjects: &[&str]) -> Result<FoldStates, StoreError> {
    let rows: Vec<FoldRow> = with_conn!(conn, |c| f::ax_alert_fold
        .filter(f::subject.eq_any(subjects))
        .select((
            f::subject,
            f::event,
            f::window_start,
            f::window_count,
            f::silent_until,
            f::folded,
            f::folded_since,
            f::alerted,
        ))
        .load(c)
        .await)?;
    let count = |n: i32| u32::try_from(n).unwrap_or(0);
    Ok(rows
        .into_iter()
        .map(
            |(subject, event, start, n, until, folded, since, alerted)| {
                let state = FoldState {
                    window_start: start.map(from_db),
                    window_count: count(n),
                    silent_until: until.map(from_db),
                    folded: count(folded),
                    folded_since: since.map(from_db),
                    alerted: alerted != 0,
                };
                ((subject, event), state)
            },
        )
        .collect())
}

/// A fold state as written.
#[derive(Insertable)]
#[diesel(table_name = crate::rows::schema::ax_alert_fold)]
struct FoldStateRow<'s> {
    subject: &'s str,
    event: AlertEvent,
    window_start: Option<NaiveDateTime>,
    window_count: i32,
    silent_until: Option<NaiveDateTime>,
    folded: i32,
    folded_since: Option<NaiveDateTime>,
    alerted: i32,
}

/// Writes the states that changed from `stored`, new or not, replacing their rows: a few
/// statements a fold, not one per state.
async fn save_states(
    conn: &mut Conn,
    stored: &FoldStates,
    states: &FoldStates,
) -> Result<(), StoreError> {
    let count = |n: u32| i32::try_from(n).unwrap_or(i32::MAX);
    let rows: Vec<FoldStateRow> = states
        .iter()
        .filter(|(key, state)| stored.get(*key) != Some(*state))
        .map(|((subject, event), state)| FoldStateRow {
            subject,
            event: *event,
            window_start: state.window_start.map(to_db),
            window_count: count(state.window_count),
            silent_until: state.silent_until.map(to_db),
            folded: count(state.folded),
            folded_since: state.folded_since.map(to_db),
            alerted: i32::from(state.alerted),
        })
        .collect();
    // A database server takes many rows a statement; SQLite (no round trip) one by one.
    // PostgreSQL has no `REPLACE`: its upsert names the key and the columns it sets.
    match conn {
        Conn::Mysql(c) => {
            for chunk in rows.chunks(INSERT_CHUNK) {
                diesel::replace_into(f::ax_alert_fold)
                    .values(chunk)
                    .execute(&mut **c)
                    .await?;
            }
        }
        Conn::Postgres(c) => {
            use diesel::upsert::excluded;
            for chunk in rows.chunks(INSERT_CHUNK) {
                diesel::insert_into(f::ax_alert_fold)
                    .values(chunk)
                    .on_conflict((f::subject, f::event))
                    .do_update()
                    .set((
                        f::window_start.eq(excluded(f::window_start)),
                        f::window_count.eq(excluded(f::window_count)),
                        f::silent_until.eq(excluded(f::silent_until)),
                        f::folded.eq(excluded(f::folded)),
                        f::folded_since.eq(excluded(f::folded_since)),
                        f::alerted.eq(excluded(f::alerted)),
                    ))
                    .execute(&mut ***c)
                    .await?;
            }
        }
        Conn::Sqlite(c, _) => {
            for row in &rows {
                diesel::replace_into(f::ax_alert_fold)
                    .values(row)
                    .execute(&mut **c)
                    .await?;
            }
        }
    }
    Ok(())
}
