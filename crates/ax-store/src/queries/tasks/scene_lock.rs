//! The scenes' pause as writers of tasks hold it: a task written while its scene pauses keeps
//! no next run.

use std::collections::{HashMap, HashSet};

use chrono::NaiveDateTime;
use diesel::mysql::Mysql;
use diesel::prelude::*;
use diesel::query_builder::{BoxedSqlQuery, SqlQuery};
use diesel::sql_types::{Nullable, Text, Timestamp};
use diesel_async::RunQueryDsl;

use crate::rows::models::TaskFields;
use crate::rows::schema::ax_scene::dsl as sc;
use crate::with_conn;
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
/// on each other in a cycle. On MySQL the lock is the scene's row, made when first needed: an
/// exclusive lock is an upsert, which takes it at once (a read then a write would deadlock two
/// pauses); a shared one is an insert that skips an existing row, then a read in share mode.
/// SQLite's `BEGIN IMMEDIATE` already holds its only write lock.
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
    if let Conn::Mysql(c) = conn {
        let rows = vec!["(?)"; scenes.len()].join(", ");
        let insert = match lock {
            SceneLock::Exclusive => format!(
                "INSERT INTO ax_scene (scene) VALUES {rows} ON DUPLICATE KEY UPDATE scene = scene"
            ),
            SceneLock::Shared => format!("INSERT IGNORE INTO ax_scene (scene) VALUES {rows}"),
        };
        bind_scenes(diesel::sql_query(insert).into_boxed(), &scenes)
            .execute(&mut **c)
            .await?;
        if lock == SceneLock::Shared {
            // Every named row is read (and so locked), paused or not.
            let read = format!(
                "SELECT scene, paused_at FROM ax_scene WHERE scene IN ({}) LOCK IN SHARE MODE",
                vec!["?"; scenes.len()].join(", ")
            );
            let rows: Vec<ScenePause> = bind_scenes(diesel::sql_query(read).into_boxed(), &scenes)
                .load(&mut **c)
                .await?;
            let paused = rows.into_iter().filter(|row| row.paused_at.is_some());
            return Ok(paused.map(|row| row.scene).collect());
        }
    }
    Ok(paused_scenes(conn, Some(&scenes))
        .await?
        .into_keys()
        .collect())
}

/// A scene's pause, as [`lock_scenes`] reads it.
#[derive(QueryableByName)]
struct ScenePause {
    #[diesel(sql_type = Text)]
    scene: String,
    #[diesel(sql_type = Nullable<Timestamp>)]
    paused_at: Option<NaiveDateTime>,
}

/// A raw MySQL statement, its parameters bound one by one.
type MysqlSql<'a> = BoxedSqlQuery<'a, Mysql, SqlQuery>;

/// `query` with each scene bound, in order.
fn bind_scenes<'a>(mut query: MysqlSql<'a>, scenes: &[&'a str]) -> MysqlSql<'a> {
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
