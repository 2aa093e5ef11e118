//! Calendars: their rows, the tasks naming them, and a change of one carried to those tasks
//! (their next runs recomputed and their versions raised, so the change feed takes the change
//! to every process in the statement that makes it).

use chrono::{DateTime, NaiveDateTime, Utc};
use diesel::prelude::*;
use diesel_async::RunQueryDsl;

use crate::rows::models::{Task, TaskStatus};
use crate::rows::schema::ax_calendar::dsl as k;
use crate::rows::schema::ax_task::dsl as t;
use crate::{to_db, with_conn};
use crate::{Conn, StoreError};
use ax_core::calendar::{Calendar, CalendarBook};
use ax_core::ids::{CalendarName, SceneName};
use ax_core::run::TaskId;

/// A calendar as stored.
#[derive(Debug, Clone, PartialEq, Eq, Queryable, Selectable)]
#[diesel(table_name = crate::rows::schema::ax_calendar)]
#[diesel(check_for_backend(diesel::mysql::Mysql, diesel::sqlite::Sqlite))]
pub struct CalendarRow {
    pub name: CalendarName,
    #[diesel(column_name = days)]
    pub calendar: Calendar,
    pub updated_at: NaiveDateTime,
}

/// A task naming a calendar.
#[derive(Debug, Clone, PartialEq, Eq, Queryable, serde::Serialize)]
pub struct TaskUsing {
    pub id: TaskId,
    pub scene: SceneName,
    pub name: String,
}

/// What deleting a calendar did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Deleted {
    Done,
    NotFound,
    /// Tasks name it: nothing was deleted.
    InUse(Vec<TaskUsing>),
}

/// Every calendar, by name.
pub async fn all(conn: &mut Conn) -> Result<Vec<CalendarRow>, StoreError> {
    Ok(with_conn!(conn, |c| k::ax_calendar
        .select(CalendarRow::as_select())
        .order(k::name)
        .load(c)
        .await)?)
}

/// The calendars of these names that exist.
pub async fn named(
    conn: &mut Conn,
    names: &[CalendarName],
) -> Result<Vec<CalendarRow>, StoreError> {
    if names.is_empty() {
        return Ok(Vec::new());
    }
    Ok(with_conn!(conn, |c| k::ax_calendar
        .filter(k::name.eq_any(names))
        .select(CalendarRow::as_select())
        .load(c)
        .await)?)
}

/// The calendars these tasks name (no query when none names one).
pub async fn book_for<'a>(
    conn: &mut Conn,
    tasks: impl IntoIterator<Item = &'a Task>,
) -> Result<CalendarBook, StoreError> {
    let mut names: Vec<CalendarName> = tasks
        .into_iter()
        .filter_map(|task| task.calendars.as_ref())
        .flat_map(|calendars| calendars.exclude.iter().cloned())
        .collect();
    names.sort();
    names.dedup();
    Ok(named(conn, &names)
        .await?
        .into_iter()
        .map(|row| (row.name, row.calendar))
        .collect())
}

/// The tasks naming calendar `name`, by id; at most `limit`.
pub async fn tasks_using(
    conn: &mut Conn,
    name: &CalendarName,
    limit: i64,
) -> Result<Vec<TaskUsing>, StoreError> {
    let pattern = naming(name);
    Ok(with_conn!(conn, |c| t::ax_task
        .filter(t::calendars.like(&pattern).escape('\\'))
        .order(t::id)
        .limit(limit)
        .select((t::id, t::scene, t::name))
        .load(c)
        .await)?)
}

/// How many tasks name each calendar.
pub async fn use_counts(conn: &mut Conn) -> Result<Vec<(CalendarName, i64)>, StoreError> {
    let used: Vec<Option<String>> = with_conn!(conn, |c| t::ax_task
        .filter(t::calendars.is_not_null())
        .select(t::calendars)
        .load(c)
        .await)?;
    let mut counts: std::collections::BTreeMap<CalendarName, i64> = Default::default();
    for text in used.into_iter().flatten() {
        let Ok(calendars) = serde_json::from_str::<ax_core::calendar::TaskCalendars>(&text) else {
            continue;
        };
        for name in calendars.exclude {
            *counts.entry(name).or_default() += 1;
        }
    }
    Ok(counts.into_iter().collect())
}

/// `LIKE` pattern of a task's `calendars` text naming `name`: the name in quotes, as JSON
/// writes it (names hold no quote or backslash; `_` is escaped).
fn naming(name: &CalendarName) -> String {
    format!("%\"{}\"%", name.replace('_', "\\_"))
}

/// Creates calendar `name` unless one of that name exists, which is left as it is (a duplicate
/// key is an answer here, not an error). Answers whether it was created.
pub async fn create(
    conn: &mut Conn,
    name: &CalendarName,
    calendar: &Calendar,
    now: DateTime<Utc>,
) -> Result<bool, StoreError> {
    let inserted: Result<usize, StoreError> =
        with_conn!(conn, |c| diesel::insert_into(k::ax_calendar)
            .values((
                k::name.eq(name),
                k::days.eq(calendar),
                k::updated_at.eq(to_db(now))
            ))
            .execute(c)
            .await)
        .map_err(StoreError::from);
    match inserted {
        Ok(_) => Ok(true),
        Err(err) if err.is_unique_violation() => Ok(false),
        Err(err) => Err(err),
    }
}

/// Creates or replaces calendar `name`, and moves the next runs of the tasks naming it onto
/// its new days (as of `now`), raising their versions; one transaction. Answers whether it was
/// created, and the tasks changed.
pub async fn put(
    conn: &mut Conn,
    name: &CalendarName,
    calendar: &Calendar,
    now: DateTime<Utc>,
) -> Result<(bool, Vec<Task>), StoreError> {
    let (name, days) = (name.clone(), calendar.clone());
    conn.transaction(move |conn| {
        Box::pin(async move {
            let at = to_db(now);
            let updated = with_conn!(conn, |c| diesel::update(
                k::ax_calendar.filter(k::name.eq(&name))
            )
            .set((k::days.eq(&days), k::updated_at.eq(at)))
            .execute(c)
            .await)?;
            if updated == 0 {
                with_conn!(conn, |c| diesel::insert_into(k::ax_calendar)
                    .values((k::name.eq(&name), k::days.eq(&days), k::updated_at.eq(at)))
                    .execute(c)
                    .await)?;
                return Ok((true, Vec::new()));
            }
            let changed = reschedule_users(conn, &name, now).await?;
            Ok((false, changed))
        })
    })
    .await
}

/// The tasks naming calendar `name`, their next runs recomputed from `now` with the calendars
/// as stored now (a task without a next run, paused or in a paused scene, keeps none) and
/// their versions raised.
async fn reschedule_users(
    conn: &mut Conn,
    name: &CalendarName,
    now: DateTime<Utc>,
) -> Result<Vec<Task>, StoreError> {
    let pattern = naming(name);
    let users: Vec<Task> = with_conn!(conn, |c| t::ax_task
        .filter(t::calendars.like(&pattern).escape('\\'))
        .select(Task::as_select())
        .load(c)
        .await)?;
    let book = book_for(conn, &users).await?;
    let mut changed = Vec::with_capacity(users.len());
    for mut task in users {
        let next = match (task.status, task.next_run_at) {
            (TaskStatus::Enabled, Some(_)) => task
                .schedule(&book)
                .ok()
                .and_then(|schedule| schedule.next_after(now))
                .map(to_db),
            _ => task.next_run_at,
        };
        with_conn!(conn, |c| diesel::update(
            t::ax_task.filter(t::id.eq(task.id))
        )
        .set((
            t::next_run_at.eq(next),
            t::version.eq(t::version + 1),
            t::updated_at.eq(to_db(now)),
        ))
        .execute(c)
        .await)?;
        task.next_run_at = next;
        task.version += 1;
        task.updated_at = to_db(now);
        changed.push(task);
    }
    Ok(changed)
}

/// Deletes calendar `name` unless a task names it; one transaction.
pub async fn delete(conn: &mut Conn, name: &CalendarName) -> Result<Deleted, StoreError> {
    let name = name.clone();
    conn.transaction(move |conn| {
        Box::pin(async move {
            let users = tasks_using(conn, &name, 100).await?;
            if !users.is_empty() {
                return Ok(Deleted::InUse(users));
            }
            let deleted = with_conn!(conn, |c| diesel::delete(
                k::ax_calendar.filter(k::name.eq(&name))
            )
            .execute(c)
            .await)?;
            Ok(if deleted > 0 {
                Deleted::Done
            } else {
                Deleted::NotFound
            })
        })
    })
    .await
}
