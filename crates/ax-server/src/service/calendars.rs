//! Calendars: their reads and changes, a change taken at once to the tasks naming the calendar
//! (their next runs, and this process's wheel; the change feed takes it to the others), and
//! the calendars tasks name.

use super::error::{Result, ServiceError};
use super::Service;
use crate::actors::store::boxed;
use ax_core::calendar::schedule::Schedule;
use ax_core::calendar::{Calendar, CalendarBook, TaskCalendars};
use ax_core::ids::CalendarName;
use ax_core::security::Principal;
use ax_cron::CronError;
use ax_store::queries::calendars::{self, CalendarRow, Deleted, TaskUsing};
use ax_store::rows::models::{AuditAction, Task};

/// Most tasks a calendar's page and its 409 name.
pub const TASKS_NAMED: i64 = 100;

/// A calendar with how many tasks name it.
#[derive(Debug, Clone)]
pub struct CalendarUse {
    pub row: CalendarRow,
    pub tasks: i64,
}

impl Service {
    /// Every calendar, with how many tasks name each.
    pub async fn calendars(&self) -> Result<Vec<CalendarUse>> {
        let (rows, counts) = self
            .store
            .query(|conn| {
                boxed(async move {
                    let rows = calendars::all(conn).await?;
                    Ok((rows, calendars::use_counts(conn).await?))
                })
            })
            .await?;
        Ok(rows
            .into_iter()
            .map(|row| {
                let tasks = counts
                    .iter()
                    .find(|(name, _)| *name == row.name)
                    .map_or(0, |(_, count)| *count);
                CalendarUse { row, tasks }
            })
            .collect())
    }

    /// Calendar `name` and the first tasks naming it.
    pub async fn calendar(&self, name: CalendarName) -> Result<(CalendarRow, Vec<TaskUsing>)> {
        let wanted = name.clone();
        let found = self
            .store
            .query(move |conn| {
                boxed(async move {
                    let Some(row) = calendars::named(conn, std::slice::from_ref(&wanted))
                        .await?
                        .pop()
                    else {
                        return Ok(None);
                    };
                    let users = calendars::tasks_using(conn, &wanted, TASKS_NAMED).await?;
                    Ok(Some((row, users)))
                })
            })
            .await?;
        found.ok_or(ServiceError::CalendarNotFound(name))
    }

    /// How many tasks name calendar `name`.
    pub async fn calendar_use_count(&self, name: &CalendarName) -> Result<i64> {
        let name = name.clone();
        let counts = self
            .store
            .query(|conn| boxed(async move { calendars::use_counts(conn).await }))
            .await?;
        Ok(counts
            .into_iter()
            .find(|(named, _)| *named == name)
            .map_or(0, |(_, count)| count))
    }

    /// Creates or replaces calendar `name`; the tasks naming it move their next runs onto its
    /// new days at once. Answers whether it was created.
    pub async fn put_calendar(
        &self,
        name: CalendarName,
        calendar: Calendar,
        actor: &Principal,
    ) -> Result<bool> {
        let now = self.clock.now();
        let summary = days_summary(&calendar);
        let (created, changed) = self
            .store
            .write((name.clone(), calendar), move |conn, (name, calendar)| {
                boxed(async move { calendars::put(conn, &name, &calendar, now).await })
            })
            .await?;
        let moved = changed.len();
        self.reschedule(changed).await?;
        let summary = match created {
            true => format!("created: {summary}"),
            false => format!("replaced: {summary}; {moved} tasks rescheduled"),
        };
        self.audit(
            actor,
            AuditAction::CalendarPut,
            format!("calendar {name}"),
            summary,
        )
        .await;
        Ok(created)
    }

    /// Creates calendar `name`; refused when one of that name exists, which is left as it is
    /// (no check before the write: two creating one name at once, the second is refused).
    pub async fn create_calendar(
        &self,
        name: CalendarName,
        calendar: Calendar,
        actor: &Principal,
    ) -> Result<()> {
        let now = self.clock.now();
        let summary = days_summary(&calendar);
        let created = self
            .store
            .write((name.clone(), calendar), move |conn, (name, calendar)| {
                boxed(async move { calendars::create(conn, &name, &calendar, now).await })
            })
            .await?;
        if !created {
            return Err(ServiceError::CalendarExists(name));
        }
        let target = format!("calendar {name}");
        let summary = format!("created: {summary}");
        self.audit(actor, AuditAction::CalendarPut, target, summary)
            .await;
        Ok(())
    }

    /// Deletes calendar `name`, refused while tasks name it.
    pub async fn delete_calendar(&self, name: CalendarName, actor: &Principal) -> Result<()> {
        let deleted = self
            .store
            .write(name.clone(), move |conn, name| {
                boxed(async move { calendars::delete(conn, &name).await })
            })
            .await?;
        match deleted {
            Deleted::NotFound => Err(ServiceError::CalendarNotFound(name)),
            Deleted::InUse(tasks) => Err(ServiceError::CalendarInUse {
                calendar: name,
                tasks: tasks
                    .iter()
                    .map(|task| format!("{}/{} ({})", task.scene, task.name, task.id))
                    .collect(),
            }),
            Deleted::Done => {
                let target = format!("calendar {name}");
                self.audit(actor, AuditAction::CalendarDelete, target, "deleted".into())
                    .await;
                Ok(())
            }
        }
    }

    /// The calendars these tasks' `calendars` name (no read when none names one).
    pub async fn book_for<'a>(
        &self,
        named: impl IntoIterator<Item = &'a TaskCalendars>,
    ) -> Result<CalendarBook> {
        let mut names: Vec<CalendarName> = named
            .into_iter()
            .flat_map(|calendars| calendars.exclude.iter().cloned())
            .collect();
        names.sort();
        names.dedup();
        if names.is_empty() {
            return Ok(CalendarBook::default());
        }
        Ok(self
            .store
            .query(move |conn| boxed(async move { calendars::named(conn, &names).await }))
            .await?
            .into_iter()
            .map(|row| (row.name, row.calendar))
            .collect())
    }

    /// A stored task's schedule, with its calendars as they are now (`Err` inside: its stored
    /// cron no longer parses).
    pub async fn schedule_of(
        &self,
        task: &Task,
    ) -> Result<std::result::Result<Schedule, CronError>> {
        let book = self.book_for(task.calendars.as_ref()).await?;
        Ok(task.schedule(&book))
    }

    /// Every calendar, as a book: what the previews of many tasks resolve their days off in.
    pub async fn calendar_book(&self) -> Result<CalendarBook> {
        Ok(self
            .store
            .query(|conn| boxed(async move { calendars::all(conn).await }))
            .await?
            .into_iter()
            .map(|row| (row.name, row.calendar))
            .collect())
    }
}

/// A calendar's days in a few words, for the audit log.
fn days_summary(calendar: &Calendar) -> String {
    let weekdays: Vec<&str> = calendar.weekdays.iter().map(|day| day.name()).collect();
    format!(
        "{} dates, {} ranges, weekdays [{}]",
        calendar.dates.len(),
        calendar.ranges.len(),
        weekdays.join(", ")
    )
}
