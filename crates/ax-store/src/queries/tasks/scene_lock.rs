//! The scenes' pause as writers of tasks hold it: a task written while its scene pauses keeps
//! no next run.

use std::collections::{HashMap, HashSet};

use chrono::NaiveDateTime;
use diesel::backend::Backend;
use diesel::prelude::*;
use diesel::query_builder::{BoxedSqlQuery, SqlQuery};
use diesel::serialize::ToSql;
use diesel::sql_types::{HasSqlType, Nullable, Text, Timestamp};
use diesel_async::RunQueryDsl;

use crate::rows::models::TaskFields;
use crate::rows::schema::ax_scene::dsl as sc;
use crate::{server_or_sqlite, with_conn};
use crate::{Conn, StoreError};

/// How a transaction holds the pause of the scenes it names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum SceneLock {
    /// A writer of tasks: the pause cannot change until it commits; other writers of the same
    /// scenes go on beside it.
    Shared,
    /// A pause or resume of the scene: it waits for the writers and they wait for it.
    Exclusive,
}

/// Locks the pause of these scenes for the rest of the transaction and returns the paused
/// ones. A scene's pause and every write of a task's next run take this lock before any task
/// row, so a task written while its scene pauses cannot keep a next run, and the two never wait
/// on each other in a cycle. On a database server the lock is the scene's row, made when first
/// needed: an exclusive lock is an upsert, which takes it at once (a read then a write would
/// deadlock two pauses); a shared one is an insert that skips an existing row, then a read in
/// share mode (each in MySQL's or PostgreSQL's words). SQLite's `BEGIN IMMEDIATE` already holds
/// its only write lock.
pub(super) async fn lock_scenes(
    conn: &mut Conn,
    scenes: &[&str],
    lock: SceneLock,
) -> Result<HashSet<String>, StoreError> {
    let mut scenes = scenes.to_vec();
    // In one order: two writers of several scenes lock them alike.
    scenes.sort_unstable();
    scenes.dedup();
    if scenes.is_empty() {
        return Ok(HashSet::new());
    }
    // SQLite's write lock is held already.
    let Some((insert, share)) = scene_rows(conn, lock) else {
        return Ok(paused_scenes(conn, Some(&scenes))
            .await?
            .into_keys()
            .collect());
    };
    let rows = vec!["(?)"; scenes.len()].join(", ");
    let insert = conn.binds(insert.replace("{rows}", &rows));
    server_or_sqlite!(
        conn,
        |c| bind_scenes(diesel::sql_query(insert).into_boxed(), &scenes)
            .execute(c)
            .await?,
        |_c| 0
    );
    if lock == SceneLock::Exclusive {
        return Ok(paused_scenes(conn, Some(&scenes))
            .await?
            .into_keys()
            .collect());
    }
    // Every named row is read (and so locked), paused or not.
    let read = format!(
        "SELECT scene, paused_at FROM ax_scene WHERE scene IN ({}) {share}",
        vec!["?"; scenes.len()].join(", ")
    );
    let read = conn.binds(read);
    let rows: Vec<ScenePause> = server_or_sqlite!(
        conn,
        |c| bind_scenes(diesel::sql_query(read).into_boxed(), &scenes)
            .load(c)
            .await?,
        |_c| Vec::new()
    );
    let paused = rows.into_iter().filter(|row| row.paused_at.is_some());
    Ok(paused.map(|row| row.scene).collect())
}

/// On a database server, the statement that makes the named scenes' rows (`{rows}` their
/// values) and takes `lock` on them at once (exclusive) or leaves them for a read to lock,
/// and how that read locks them in share mode; none on SQLite.
fn scene_rows(conn: &Conn, lock: SceneLock) -> Option<(&'static str, &'static str)> {
    let insert = match (conn, lock) {
        (Conn::Sqlite(..), _) => return None,
        (Conn::Mysql(_), SceneLock::Exclusive) => {
            "INSERT INTO ax_scene (scene) VALUES {rows} ON DUPLICATE KEY UPDATE scene = scene"
        }
        (Conn::Mysql(_), SceneLock::Shared) => "INSERT IGNORE INTO ax_scene (scene) VALUES {rows}",
        (Conn::Postgres(_), SceneLock::Exclusive) => {
            "INSERT INTO ax_scene (scene) VALUES {rows} \
             ON CONFLICT (scene) DO UPDATE SET scene = excluded.scene"
        }
        (Conn::Postgres(_), SceneLock::Shared) => {
            "INSERT INTO ax_scene (scene) VALUES {rows} ON CONFLICT DO NOTHING"
        }
    };
    // MariaDB has no `FOR SHARE`.
    let share = match conn {
        Conn::Mysql(_) => "LOCK IN SHARE MODE",
        _ => "FOR SHARE",
    };
    Some((insert, share))
}
/// A scene's pause, as [`lock_scenes`] reads it.
#[derive(QueryableByName)]
struct ScenePause {
    #[diesel(sql_type = Text)]
    scene: String,
    #[diesel(sql_type = Nullable<Timestamp>)]
    paused_at: Option<NaiveDateTime>,
}

/// `query` with each scene bound, in order.
fn bind_scenes<'a, DB>(
    mut query: BoxedSqlQuery<'a, DB, SqlQuery>,
    scenes: &[&'a str],
) -> BoxedSqlQuery<'a, DB, SqlQuery>
where
    DB: Backend + HasSqlType<Text>,
    &'a str: ToSql<Text, DB>,
{
    for scene in scenes {
        query = query.bind::<Text, _>(*scene);
    }
    query
}

/// Clears the next runs of the tasks whose scene is paused, and locks those scenes' pause (see
/// [`lock_scenes`]): what is written next keeps no next run in a paused scene.
pub(super) async fn hold_if_scene_paused(
    conn: &mut Conn,
    fields: Vec<&mut TaskFields>,
) -> Result<(), StoreError> {
    let scenes: Vec<&str> = fields.iter().map(|f| f.scene.as_str()).collect();
    let paused = lock_scenes(conn, &scenes, SceneLock::Shared).await?;
    for fields in fields
        .into_iter()
        .filter(|f| paused.contains(f.scene.as_str()))
    {
        fields.next_run_at = None;
    }
    Ok(())
}

/// The paused scenes (of `among`, or all), with when each was paused.
pub async fn paused_scenes(
    conn: &mut Conn,
    among: Option<&[&str]>,
) -> Result<HashMap<String, NaiveDateTime>, StoreError> {
    let rows: Vec<(String, Option<NaiveDateTime>)> = with_conn!(conn, |c| {
        let mut query = sc::ax_scene
            .filter(sc::paused_at.is_not_null())
            .select((sc::scene, sc::paused_at))
            .into_boxed();
        if let Some(among) = among {
            let among: Vec<String> = among.iter().map(|scene| scene.to_string()).collect();
            query = query.filter(sc::scene.eq_any(among));
        }
        query.load(c).await
    })?;
    Ok(rows
        .into_iter()
        .filter_map(|(scene, at)| Some((scene, at?)))
        .collect())
}
