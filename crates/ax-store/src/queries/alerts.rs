//! Alerts in the store: the queue of run ends (failures recorded by the database's triggers,
//! successes by their writer), folded into the outbox by the rules (one folder at a time over
//! every ax process, holding the fold lock row's lock), and the outbox's rows claimed, sent
//! and settled by the senders.

use std::collections::HashMap;

use chrono::{DateTime, Duration, NaiveDateTime, Utc};
use diesel::prelude::*;
use diesel_async::RunQueryDsl;

use crate::rows::schema::ax_alert::dsl as a;
use crate::rows::schema::ax_alert_event::dsl as e;
use crate::rows::schema::ax_alert_fold::dsl as f;
use crate::rows::schema::ax_alert_state::dsl as s;
use crate::rows::schema::ax_scene::dsl as sc;
use crate::rows::schema::ax_task::dsl as t;
use crate::with_conn;
use crate::{from_db, to_db, Conn, StoreError};
use ax_core::alerting::{
    closed_window, event_of, group_message, group_of, most_specific, AlertEvent, AlertLane,
    AlertRule, AlertStatus, FoldState, Group, Verdict,
};
use ax_core::run::{RunStatus, TaskId};

use super::success_watch;

/// Most run ends one fold takes.
pub const FOLD_BATCH: usize = 500;
/// Most events about members and processes one fold reads: the windows of every group they
/// fall in.
const GROUP_BATCH: i64 = 5000;
/// The `ax_alert_state` row a folder locks for its transaction.
const FOLD_LOCK_ROW: i32 = 2;
/// Most rows one multi-row insert writes.
const INSERT_CHUNK: usize = 100;

/// An outbox row: one alert on one channel.
#[derive(Debug, Clone, PartialEq, Eq, Queryable, Selectable, Insertable)]
#[diesel(table_name = crate::rows::schema::ax_alert)]
#[diesel(check_for_backend(diesel::mysql::Mysql, diesel::sqlite::Sqlite))]
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

/// Turns the triggers' recording on while channels are configured, off otherwise.
pub async fn set_enabled(conn: &mut Conn, enabled: bool) -> Result<(), StoreError> {
    with_conn!(conn, |c| diesel::update(
        s::ax_alert_state.filter(s::id.eq(1))
    )
    .set(s::enabled.eq(i32::from(enabled)))
    .execute(c)
    .await)?;
    Ok(())
}

/// A queued event: a run's end (its task, status and code, recorded by the triggers), or an
/// event about no run (`event` and `subject` set, task 0).
#[derive(Debug, Clone, Queryable, Selectable)]
#[diesel(table_name = crate::rows::schema::ax_alert_event)]
#[diesel(check_for_backend(diesel::mysql::Mysql, diesel::sqlite::Sqlite))]
struct Queued {
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

/// What the folder knows of an event's task.
struct TaskFacts {
    subject: String,
    scene: String,
    muted: bool,
    own_rule: Option<AlertRule>,
    scene_rule: Option<AlertRule>,
    alert_lag_ms: Option<i64>,
}

/// Who an alert is about: its fold key, its name in the alert, and its task.
struct Subject {
    key: String,
    name: String,
    task_id: Option<TaskId>,
    scene: Option<String>,
}

/// What one queued event asks of the folder.
struct Asked<'e> {
    subject: Subject,
    /// The group it folds in, for an event about a member or a process.
    group: Option<Group>,
    rule: &'e AlertRule,
    /// A success (or a return) that resolves what was alerted of the subject, bar `keep`.
    resolves: bool,
    keep: Option<AlertEvent>,
    events: Vec<AlertEvent>,
}

/// Whether alerts are on (channels configured).
async fn enabled(conn: &mut Conn) -> Result<bool, StoreError> {
    let enabled: Option<i32> = with_conn!(conn, |c| s::ax_alert_state
        .filter(s::id.eq(1))
        .select(s::enabled)
        .first(c)
        .await
        .optional())?;
    Ok(enabled == Some(1))
}

/// Queues the successes just written (`request_ids`, in the writer's transaction) that the
/// folder needs: one whose task was alerted (it resolves) or whose first dispatch came later
/// than its task's `alert_lag_ms`. Written here, in one statement, rather than by a trigger:
/// a look-up per successful run inside a trigger cost MariaDB more than the run's own write.
pub async fn queue_successes(conn: &mut Conn, request_ids: &[String]) -> Result<(), StoreError> {
    if request_ids.is_empty() {
        return Ok(());
    }
    let (lag, subject, now) = match conn {
        Conn::Mysql(_) => (
            "TIMESTAMPDIFF(MICROSECOND, i.trigger_at, i.dispatched_at) DIV 1000",
            "CONCAT('task:', i.task_id)",
            "UTC_TIMESTAMP(3)",
        ),
        Conn::Sqlite(..) => (
            "CAST((julianday(i.dispatched_at) - julianday(i.trigger_at)) * 86400000 AS INTEGER)",
            "'task:' || i.task_id",
            "strftime('%Y-%m-%d %H:%M:%f', 'now')",
        ),
    };
    let ids = vec!["?"; request_ids.len()].join(", ");
    let sql = format!(
        "INSERT INTO ax_alert_event (request_id, task_id, status, code, message, at, lag_ms) \
         SELECT i.request_id, i.task_id, i.status, i.callback_code, i.callback_message, \
                COALESCE(i.finished_at, {now}), {lag} \
         FROM ax_instance i JOIN ax_task t ON t.id = i.task_id \
         WHERE i.request_id IN ({ids}) \
           AND (EXISTS (SELECT 1 FROM ax_alert_fold f \
                        WHERE f.subject = {subject} AND f.alerted = 1) \
                OR (t.alert_lag_ms IS NOT NULL AND {lag} > t.alert_lag_ms))"
    );
    with_conn!(conn, |c| {
        let mut query = diesel::sql_query(sql.as_str()).into_boxed();
        for id in request_ids {
            query = query.bind::<diesel::sql_types::Text, _>(id.as_str());
        }
        query.execute(c).await
    })?;
    Ok(())
}

/// Queues an event about no run (`subject`: `member billing http://…`, `process ax-2`,
/// `redis`) while alerts are on, in the caller's transaction when it is in one. `Resolved`
/// resolves what was alerted of the subject.
pub async fn record(
    conn: &mut Conn,
    subject: &str,
    event: AlertEvent,
    message: Option<String>,
    at: DateTime<Utc>,
) -> Result<(), StoreError> {
    if !enabled(conn).await? {
        return Ok(());
    }
    with_conn!(conn, |c| diesel::insert_into(e::ax_alert_event)
        .values((
            e::request_id.eq(""),
            e::task_id.eq(TaskId(0)),
            e::status.eq(""),
            e::message.eq(&message),
            e::at.eq(to_db(at)),
            e::subject.eq(subject),
            e::event.eq(event.as_str()),
        ))
        .execute(c)
        .await)?;
    Ok(())
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
            let runs: Vec<Queued> = with_conn!(conn, |c| e::ax_alert_event
                .filter(e::event.is_null())
                .order(e::id.asc())
                .limit(FOLD_BATCH as i64)
                .select(Queued::as_select())
                .load(c)
                .await)?;
            let others: Vec<Queued> = with_conn!(conn, |c| e::ax_alert_event
                .filter(e::event.is_not_null())
                .order(e::id.asc())
                .limit(GROUP_BATCH)
                .select(Queued::as_select())
                .load(c)
                .await)?;
            let grouped = closed_groups(&others, now, group_window);
            if runs.is_empty() && grouped.is_empty() {
                return Ok(0);
            }
            let facts = task_facts(conn, &runs).await?;
            let asks: Vec<(&Queued, Asked)> = runs
                .iter()
                .chain(
                    grouped
                        .iter()
                        .flat_map(|(_, events)| events.iter().copied()),
                )
                .filter_map(|event| Some((event, asked(event, &facts, &default_rule)?)))
                .collect();
            let keys: Vec<&str> = asks.iter().map(|(_, a)| a.subject.key.as_str()).collect();
            let stored = load_states(conn, &keys).await?;
            let mut states = stored.clone();
            let mut rows = Vec::new();
            // When each task subject last alerted, in this fold.
            let mut alerted_at: HashMap<&str, NaiveDateTime> = HashMap::new();
            // What each group's window tells, by (group, event): its events and verdicts.
            let mut windows: Vec<(WindowKey, Vec<(&Queued, Verdict)>)> = Vec::new();
            for (event, asked) in &asks {
                let key = asked.subject.key.clone();
                let group = asked.group.as_ref();
                let mut tell = |kind: AlertEvent, verdict: Verdict| match group {
                    Some(group) => {
                        let at = (group.name.clone(), kind);
                        match windows.iter_mut().find(|(of, _)| *of == at) {
                            Some((_, told)) => told.push((*event, verdict)),
                            None => windows.push((at, vec![(*event, verdict)])),
                        }
                    }
                    None => rows.extend(outbox_rows(
                        event,
                        &asked.subject,
                        (kind, &verdict),
                        asked.rule,
                        now,
                    )),
                };
                if asked.resolves {
                    let resolved = resolve(&key, asked.keep, &mut states);
                    if resolved && asked.rule.wants(AlertEvent::Resolved) {
                        let verdict = Verdict::Alert {
                            count: 1,
                            folded: 0,
                            folded_since: None,
                        };
                        tell(AlertEvent::Resolved, verdict);
                    }
                }
                for kind in asked.events.iter().copied() {
                    if !asked.rule.wants(kind) {
                        continue;
                    }
                    let state = states.entry((key.clone(), kind)).or_default();
                    let verdict = state.on_event(asked.rule, from_db(event.at));
                    if matches!(verdict, Verdict::Alert { .. }) && group.is_none() {
                        alerted_at.insert(&asked.subject.key, event.at);
                    }
                    tell(kind, verdict);
                }
            }
            for ((group, kind), told) in &windows {
                rows.extend(window_rows(group, *kind, told, &default_rule, now));
            }
            save_states(conn, &stored, &states).await?;
            // MariaDB takes many rows a statement; SQLite (no round trip) one by one.
            match conn {
                Conn::Mysql(c) => {
                    for chunk in rows.chunks(INSERT_CHUNK) {
                        diesel::insert_or_ignore_into(a::ax_alert)
                            .values(chunk)
                            .execute(&mut **c)
                            .await?;
                    }
                }
                Conn::Sqlite(c, _) => {
                    for row in &rows {
                        diesel::insert_or_ignore_into(a::ax_alert)
                            .values(row)
                            .execute(&mut **c)
                            .await?;
                    }
                }
            }
            // The ones read, not a range: a run's end given a lower id may commit later.
            let taken: Vec<i64> = runs
                .iter()
                .chain(
                    grouped
                        .iter()
                        .flat_map(|(_, events)| events.iter().copied()),
                )
                .map(|event| event.id)
                .collect();
            for chunk in taken.chunks(FOLD_BATCH) {
                with_conn!(conn, |c| diesel::delete(
                    e::ax_alert_event.filter(e::id.eq_any(chunk))
                )
                .execute(c)
                .await)?;
            }
            let watched = watch_changes(&stored, &states, &alerted_at);
            if watched.changed {
                // Last, so the row stays locked only to the commit: it waits for the writers
                // that read the set before, then finds what they wrote.
                success_watch::bump(conn).await?;
                queue_first_successes(conn, &watched.alerted).await?;
            }
            Ok(taken.len())
        })
    })
    .await
}

/// A group's window for one kind of event: the group's name and the kind.
type WindowKey = (String, AlertEvent);

/// The queued events about members and processes whose group's window closed at `now`, by
/// group, each group's in queue order.
fn closed_groups(
    queued: &[Queued],
    now: DateTime<Utc>,
    window: Duration,
) -> Vec<(String, Vec<&Queued>)> {
    let mut groups: Vec<(String, Vec<&Queued>)> = Vec::new();
    for event in queued {
        let name = group_of(event.subject.as_deref().unwrap_or_default()).name;
        match groups.iter_mut().find(|(of, _)| *of == name) {
            Some((_, events)) => events.push(event),
            None => groups.push((name, vec![event])),
        }
    }
    groups
        .into_iter()
        .filter_map(|(name, events)| {
            let ats: Vec<DateTime<Utc>> = events.iter().map(|event| from_db(event.at)).collect();
            let taken: Vec<&Queued> = closed_window(&ats, now, window)
                .into_iter()
                .map(|n| events[n])
                .collect();
            (!taken.is_empty()).then_some((name, taken))
        })
        .collect()
}

/// The outbox rows of one group's window for one kind of event: the verdicts that alert, told
/// as the event itself when it is alone, else as one alert naming how many and the first of
/// them (its id from the window's first event); nothing when none alerts (their members'
/// silences count the rest for their next alert).
fn window_rows(
    group: &str,
    kind: AlertEvent,
    told: &[(&Queued, Verdict)],
    rule: &AlertRule,
    now: DateTime<Utc>,
) -> Vec<AlertRow> {
    let alerting: Vec<(&Queued, u32, Option<DateTime<Utc>>)> = told
        .iter()
        .filter_map(|(event, verdict)| match verdict {
            Verdict::Alert {
                folded,
                folded_since,
                ..
            } => Some((*event, *folded, *folded_since)),
            _ => None,
        })
        .collect();
    let Some(&(first, _, _)) = <[_]>::first(&alerting) else {
        return Vec::new();
    };
    let subject = |name: String| Subject {
        key: name.clone(),
        name,
        task_id: None,
        scene: None,
    };
    let folded = alerting.iter().map(|(_, n, _)| n).sum();
    let verdict = Verdict::Alert {
        count: u32::try_from(alerting.len()).unwrap_or(u32::MAX),
        folded,
        folded_since: alerting.iter().filter_map(|(_, _, since)| *since).min(),
    };
    if alerting.len() == 1 {
        let name = first.subject.clone().unwrap_or_default();
        return outbox_rows(first, &subject(name), (kind, &verdict), rule, now);
    }
    let members: Vec<String> = alerting
        .iter()
        .map(|(event, _, _)| group_of(event.subject.as_deref().unwrap_or_default()).member)
        .collect();
    let members: Vec<&str> = members.iter().map(String::as_str).collect();
    let window = Queued {
        message: Some(group_message(group, kind, &members)),
        at: alerting
            .iter()
            .map(|(event, _, _)| event.at)
            .max()
            .unwrap_or(first.at),
        ..first.clone()
    };
    outbox_rows(
        &window,
        &subject(group.to_string()),
        (kind, &verdict),
        rule,
        now,
    )
}

/// How a fold changed which tasks' successes are watched.
struct WatchChanges {
    /// A task was alerted or resolved.
    changed: bool,
    /// The tasks newly alerted, each since when.
    alerted: Vec<(TaskId, NaiveDateTime)>,
}

fn watch_changes(
    stored: &FoldStates,
    states: &FoldStates,
    alerted_at: &HashMap<&str, NaiveDateTime>,
) -> WatchChanges {
    let task_of = |subject: &str| subject.strip_prefix("task:")?.parse().ok().map(TaskId);
    let was_alerted = |subject: &str| {
        stored
            .iter()
            .any(|((of, _), state)| of == subject && state.alerted)
    };
    let mut changes = WatchChanges {
        changed: false,
        alerted: Vec::new(),
    };
    for ((subject, event), state) in states {
        let Some(task) = task_of(subject) else {
            continue;
        };
        let before = stored
            .get(&(subject.clone(), *event))
            .is_some_and(|s| s.alerted);
        changes.changed |= before != state.alerted;
        if state.alerted
            && !was_alerted(subject)
            && !changes.alerted.iter().any(|(t, _)| *t == task)
        {
            if let Some(at) = alerted_at.get(subject.as_str()) {
                changes.alerted.push((task, *at));
            }
        }
    }
    changes
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

/// What a queued event asks: about whom, under which rule, which events it makes and
/// whether it resolves; `None` when it asks nothing (a muted or deleted task's).
fn asked<'e>(
    event: &Queued,
    facts: &'e HashMap<TaskId, TaskFacts>,
    default_rule: &'e AlertRule,
) -> Option<Asked<'e>> {
    if let Some(kind) = event.event.as_deref().and_then(AlertEvent::parse) {
        let name = event.subject.clone().unwrap_or_default();
        let resolves = kind == AlertEvent::Resolved;
        return Some(Asked {
            group: Some(group_of(&name)),
            subject: Subject {
                key: name.clone(),
                name,
                task_id: None,
                scene: None,
            },
            rule: default_rule,
            resolves,
            keep: None,
            events: if resolves { Vec::new() } else { vec![kind] },
        });
    }
    let task = facts.get(&event.task_id).filter(|task| !task.muted)?;
    let status = RunStatus::parse(&event.status)?;
    let lagging = event
        .lag_ms
        .zip(task.alert_lag_ms)
        .is_some_and(|(lag, most)| lag > most);
    let mut events: Vec<AlertEvent> = event_of(status, event.code.as_deref())
        .filter(|kind| *kind != AlertEvent::Resolved)
        .into_iter()
        .collect();
    if lagging {
        events.push(AlertEvent::Lag);
    }
    Some(Asked {
        group: None,
        subject: Subject {
            key: format!("task:{}", event.task_id),
            name: task.subject.clone(),
            task_id: Some(event.task_id),
            scene: Some(task.scene.clone()),
        },
        rule: most_specific(
            task.own_rule.as_ref(),
            task.scene_rule.as_ref(),
            default_rule,
        ),
        resolves: status == RunStatus::Success,
        // A late success resolves its task's failures, not its lateness.
        keep: lagging.then_some(AlertEvent::Lag),
        events,
    })
}

/// The tasks of `events`: their `scene/name`, rule and lag bound, and whether they or their
/// scenes are paused.
async fn task_facts(
    conn: &mut Conn,
    events: &[Queued],
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

/// A success of `subject`: every alerted event of it but `keep` resolves (and starts
/// over). Whether any was alerted.
fn resolve(subject: &str, keep: Option<AlertEvent>, states: &mut FoldStates) -> bool {
    let mut resolved = false;
    for ((of, event), state) in states.iter_mut() {
        if of == subject && Some(*event) != keep && state.on_success() {
            resolved = true;
        }
    }
    resolved
}

/// Fold states by (subject, event).
type FoldStates = HashMap<(String, AlertEvent), FoldState>;

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
    // MariaDB takes many rows a statement; SQLite (no round trip) one by one.
    match conn {
        Conn::Mysql(c) => {
            for chunk in rows.chunks(INSERT_CHUNK) {
                diesel::replace_into(f::ax_alert_fold)
                    .values(chunk)
                    .execute(&mut **c)
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

/// The outbox rows of one verdict: one per channel for an alert, one without a channel for a
/// folded event, none below the threshold.
fn outbox_rows(
    event: &Queued,
    subject: &Subject,
    (kind, verdict): (AlertEvent, &Verdict),
    rule: &AlertRule,
    now: DateTime<Utc>,
) -> Vec<AlertRow> {
    let (status, channels, events, folded, since) = match verdict {
        Verdict::Below => return Vec::new(),
        Verdict::Folded => (AlertStatus::Folded, vec![String::new()], 1, 0, None),
        Verdict::Alert {
            count,
            folded,
            folded_since,
        } => (
            AlertStatus::Pending,
            rule.channels.clone(),
            *count,
            *folded,
            *folded_since,
        ),
    };
    // Stable over every channel and resend: the queued event and what it made.
    let id = uuid::Uuid::new_v5(
        &uuid::Uuid::NAMESPACE_OID,
        format!("ax-alert:{}:{}:{kind}", event.request_id, event.id).as_bytes(),
    )
    .to_string();
    let count = |n: u32| i32::try_from(n).unwrap_or(i32::MAX);
    let request_id = Some(event.request_id.clone()).filter(|id| !id.is_empty());
    channels
        .into_iter()
        .map(|channel| AlertRow {
            id: id.clone(),
            channel,
            event: kind,
            subject: subject.name.clone(),
            task_id: subject.task_id,
            scene: subject.scene.clone(),
            request_id: request_id.clone(),
            code: event.code.clone(),
            message: match (kind, event.lag_ms) {
                (AlertEvent::Lag, Some(lag)) => Some(format!("first dispatched {lag} ms late")),
                _ => event.message.clone(),
            },
            count: count(events),
            folded: count(folded),
            folded_since: since.map(to_db),
            at: event.at,
            status,
            tries: 0,
            next_try_at: Some(to_db(now)),
            claimant: None,
            claimed_until: None,
            sent_at: None,
            last_error: None,
            created_at: to_db(now),
        })
        .collect()
}

/// A scene's own rule (`None`: the default applies).
pub async fn scene_rule(conn: &mut Conn, scene: &str) -> Result<Option<String>, StoreError> {
    let rule: Option<Option<String>> = with_conn!(conn, |c| sc::ax_scene
        .filter(sc::scene.eq(scene))
        .select(sc::alerts)
        .first(c)
        .await
        .optional())?;
    Ok(rule.flatten())
}

/// Sets a scene's own rule, as JSON (`None`: the default applies again).
pub async fn set_scene_rule(
    conn: &mut Conn,
    scene: &str,
    rule: Option<String>,
) -> Result<(), StoreError> {
    let updated = with_conn!(conn, |c| diesel::update(
        sc::ax_scene.filter(sc::scene.eq(scene))
    )
    .set(sc::alerts.eq(&rule))
    .execute(c)
    .await)?;
    if updated == 0 {
        with_conn!(conn, |c| diesel::insert_into(sc::ax_scene)
            .values((sc::scene.eq(scene), sc::alerts.eq(&rule)))
            .execute(c)
            .await)?;
    }
    Ok(())
}

/// Claims up to `limit` alerts of `lane` due to be sent, for `claimant` until `until`;
/// returns them.
pub async fn claim_due(
    conn: &mut Conn,
    (claimant, lane): (&str, AlertLane),
    now: DateTime<Utc>,
    until: DateTime<Utc>,
    limit: i64,
) -> Result<Vec<AlertRow>, StoreError> {
    let now = to_db(now);
    let due: Vec<(String, String)> = with_conn!(conn, |c| {
        let query = a::ax_alert.into_boxed();
        let query = match lane {
            AlertLane::Runs => query.filter(a::task_id.is_not_null()),
            AlertLane::Others => query.filter(a::task_id.is_null()),
        };
        query
            .filter(a::status.eq(AlertStatus::Pending))
            .filter(a::next_try_at.le(now))
            .filter(a::claimed_until.is_null().or(a::claimed_until.lt(now)))
            .order(a::next_try_at.asc())
            .limit(limit)
            .select((a::id, a::channel))
            .load(c)
            .await
    })?;
    if due.is_empty() {
        return Ok(Vec::new());
    }
    let ids: Vec<&str> = due.iter().map(|(id, _)| id.as_str()).collect();
    let mut channels: Vec<&str> = due.iter().map(|(_, channel)| channel.as_str()).collect();
    channels.sort_unstable();
    channels.dedup();
    let until = to_db(until);
    // Of two processes that saw a row due, the one whose UPDATE finds it so takes it: the
    // rows this one holds with this claim's expiry are the ones it won.
    with_conn!(conn, |c| diesel::update(
        a::ax_alert
            .filter(a::id.eq_any(&ids))
            .filter(a::channel.eq_any(&channels))
            .filter(a::status.eq(AlertStatus::Pending))
            .filter(a::next_try_at.le(now))
            .filter(a::claimed_until.is_null().or(a::claimed_until.lt(now)))
    )
    .set((a::claimant.eq(claimant), a::claimed_until.eq(until)))
    .execute(c)
    .await)?;
    Ok(with_conn!(conn, |c| a::ax_alert
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
    pub scene: Option<String>,
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
