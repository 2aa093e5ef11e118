//! A scene's own alert rule, kept in its row.

use ax_core::ids::SceneName;
use diesel::prelude::*;
use diesel_async::RunQueryDsl;

use crate::rows::schema::ax_scene::dsl as sc;
use crate::with_conn;
use crate::{Conn, StoreError};

/// A scene's own rule (`None`: the default applies).
pub async fn scene_rule(conn: &mut Conn, scene: &SceneName) -> Result<Option<String>, StoreError> {
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
    scene: &SceneName,
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
