//! Pausing and resuming tasks one by one and whole scenes, and who paused them since when.

use ax_core::ids::SceneName;
use chrono::{DateTime, NaiveDateTime, Utc};
use diesel::prelude::*;
use diesel_async::RunQueryDsl;

use super::crud::find;
use super::scene_lock::{lock_scenes, SceneLock};
use crate::queries::calendars;
use crate::rows::models::{Task, TaskStatus};
use crate::rows::schema::ax_scene::dsl as sc;
use crate::rows::schema::ax_task::dsl as t;
use crate::with_conn;
use crate::{to_db, Conn, StoreError};
use ax_core::calendar::CalendarBook;
use ax_core::run::TaskId;

/// Pauses a task (no next run) and raises its version; `false` if it is not enabled (or not
/// there).
pub async fn pause(conn: &mut Conn, id: TaskId, now: NaiveDateTime) -> Result<bool, StoreError> {
    let changed = with_conn!(conn, |c| diesel::update(
        t::ax_task
            .filter(t::id.eq(id))
            .filter(t::status.eq(TaskStatus::Enabled))
    )
    .set((
        t::status.eq(TaskStatus::Paused),
        t::next_run_at.eq(None::<NaiveDateTime>),
        t::updated_at.eq(now),
        t::version.eq(t::version + 1),
    ))
    .execute(c)
    .await)?;
    Ok(changed > 0)
}

/// Resumes a paused task and raises its version: enabled, its next run computed from `now`
/// (none while its scene is paused), so no run that fell in the pause fires. `None` if it is
/// not paused (or not there).
pub async fn resume(
    conn: &mut Conn,
    id: TaskId,
    now: DateTime<Utc>,
) -> Result<Option<Task>, StoreError> {
    conn.transaction(|conn| {
        Box::pin(async move {
            let Some(mut task) = find(conn, id)
                .await?
                .filter(|task| task.status == TaskStatus::Paused)
            else {
                return Ok(None);
            };
            let scene_paused = !lock_scenes(conn, &[task.scene.as_str()], SceneLock::Shared)
                .await?
                .is_empty();
            let book = calendars::book_for(conn, [&task]).await?;
            let next = (!scene_paused)
                .then(|| next_run(&task, &book, now))
                .flatten();
            // Guarded by what was read: a task paused again, or moved to another scene, since.
            let changed = with_conn!(conn, |c| diesel::update(
                t::ax_task
                    .filter(t::id.eq(id))
                    .filter(t::status.eq(TaskStatus::Paused))
                    .filter(t::scene.eq(&task.scene))
            )
            .set((
                t::status.eq(TaskStatus::Enabled),
                t::next_run_at.eq(next),
                t::updated_at.eq(to_db(now)),
                t::version.eq(t::version + 1),
            ))
            .execute(c)
            .await)?;
            if changed == 0 {
                return Ok(None);
            }
            task.status = TaskStatus::Enabled;
            task.next_run_at = next;
            task.updated_at = to_db(now);
            task.version += 1;
            Ok(Some(task))
        })
    })
    .await
}

/// The task's next fire strictly after `now`, as stored; `book` holds its calendars.
fn next_run(task: &Task, book: &CalendarBook, now: DateTime<Utc>) -> Option<NaiveDateTime> {
    task.schedule(book)
        .ok()
        .and_then(|schedule| schedule.next_after(now))
        .map(to_db)
}

/// Pauses a scene: none of its tasks fires until it is resumed, whatever their own state,
/// which stays as it is (their versions too: a scene's pause is not theirs). Returns how many
/// of its tasks stop firing (its enabled ones); 0 if it was paused already.
pub async fn pause_scene(
    conn: &mut Conn,
    scene: &SceneName,
    now: NaiveDateTime,
    by: &str,
) -> Result<usize, StoreError> {
    let (scene, by) = (scene.clone(), author(by));
    conn.transaction(|conn| {
        Box::pin(async move {
            if !lock_scenes(conn, &[scene.as_str()], SceneLock::Exclusive)
                .await?
                .is_empty()
            {
                return Ok(0);
            }
            set_scene_pause(conn, &scene, Some((now, by))).await?;
            Ok(with_conn!(conn, |c| diesel::update(
                t::ax_task
                    .filter(t::scene.eq(&scene))
                    .filter(t::status.eq(TaskStatus::Enabled))
            )
            .set(t::next_run_at.eq(None::<NaiveDateTime>))
            .execute(c)
            .await)?)
        })
    })
    .await
}

/// Resumes a paused scene: each of its enabled tasks gets its next run computed from `now`;
/// those paused one by one stay paused. Returns the tasks that fire again (empty if the scene
/// was not paused).
pub async fn resume_scene(
    conn: &mut Conn,
    scene: &SceneName,
    now: DateTime<Utc>,
) -> Result<Vec<Task>, StoreError> {
    let scene = scene.clone();
    conn.transaction(|conn| {
        Box::pin(async move {
            if lock_scenes(conn, &[scene.as_str()], SceneLock::Exclusive)
                .await?
                .is_empty()
            {
                return Ok(Vec::new());
            }
            set_scene_pause(conn, &scene, None).await?;
            let enabled: Vec<Task> = with_conn!(conn, |c| t::ax_task
                .filter(t::scene.eq(&scene))
                .filter(t::status.eq(TaskStatus::Enabled))
                .select(Task::as_select())
                .load(c)
                .await)?;
            let book = calendars::book_for(conn, &enabled).await?;
            let mut resumed = Vec::with_capacity(enabled.len());
            for mut task in enabled {
                let next = next_run(&task, &book, now);
                let changed = with_conn!(conn, |c| diesel::update(
                    t::ax_task
                        .filter(t::id.eq(task.id))
                        .filter(t::status.eq(TaskStatus::Enabled))
                )
                .set(t::next_run_at.eq(next))
                .execute(c)
                .await)?;
                if changed > 0 {
                    task.next_run_at = next;
                    resumed.push(task);
                }
            }
            Ok(resumed)
        })
    })
    .await
}

/// Sets a scene's pause, when and by whom (`None`: not paused), keeping the rest of its row
/// (its alert rule).
async fn set_scene_pause(
    conn: &mut Conn,
    scene: &SceneName,
    pause: Option<(NaiveDateTime, String)>,
) -> Result<(), StoreError> {
    let (paused_at, paused_by) = pause.unzip();
    let updated = with_conn!(conn, |c| diesel::update(
        sc::ax_scene.filter(sc::scene.eq(scene))
    )
    .set((sc::paused_at.eq(paused_at), sc::paused_by.eq(&paused_by)))
    .execute(c)
    .await)?;
    if updated == 0 {
        with_conn!(conn, |c| diesel::insert_into(sc::ax_scene)
            .values((
                sc::scene.eq(scene),
                sc::paused_at.eq(paused_at),
                sc::paused_by.eq(&paused_by),
            ))
            .execute(c)
            .await)?;
    }
    Ok(())
}

/// Who paused something, as its column holds it: the token's name, as the audit log has it.
fn author(name: &str) -> String {
    crate::rows::models::cut(name.to_string(), MAX_AUTHOR_CHARS)
}

/// The longest name `paused_by` holds.
const MAX_AUTHOR_CHARS: usize = 64;

/// Notes since when and by whom these tasks are paused: each one paused and not noted yet is
/// paused since `at` by `by` (a task paused again keeps when it was first paused); each one
/// enabled forgets it. Called after any write that may change a task's status (create,
/// update, register, pause, resume), it holds whatever the status is now.
pub async fn note_pauses(
    conn: &mut Conn,
    ids: &[TaskId],
    at: NaiveDateTime,
    by: &str,
) -> Result<(), StoreError> {
    if ids.is_empty() {
        return Ok(());
    }
    let by = author(by);
    with_conn!(conn, |c| diesel::update(
        t::ax_task
            .filter(t::id.eq_any(ids))
            .filter(t::status.eq(TaskStatus::Paused))
            .filter(t::paused_at.is_null())
    )
    .set((t::paused_at.eq(at), t::paused_by.eq(&by)))
    .execute(c)
    .await)?;
    with_conn!(conn, |c| diesel::update(
        t::ax_task
            .filter(t::id.eq_any(ids))
            .filter(t::status.ne(TaskStatus::Paused))
            .filter(t::paused_at.is_not_null())
    )
    .set((
        t::paused_at.eq(None::<NaiveDateTime>),
        t::paused_by.eq(None::<String>),
    ))
    .execute(c)
    .await)?;
    Ok(())
}

/// Task counts by scene and status.
pub async fn scene_counts(conn: &mut Conn) -> Result<Vec<(String, TaskStatus, i64)>, StoreError> {
    Ok(with_conn!(conn, |c| t::ax_task
        .group_by((t::scene, t::status))
        .select((t::scene, t::status, diesel::dsl::count_star()))
        .order((t::scene, t::status))
        .load(c)
        .await)?)
}
