//! The console's search: runs by the start of their request id, tasks by text in their
//! `scene/name` (what is searched for is decided in `ax_core::task::search`).

use diesel::prelude::*;
use diesel_async::RunQueryDsl;

use super::tasks;
use crate::rows::models::{Run, Task};
use crate::rows::schema::ax_instance::dsl as i;
use crate::rows::schema::ax_task::dsl as t;
use crate::with_conn;
use crate::{Conn, StoreError};
use ax_core::run::{RequestIdPrefix, TaskId};
use ax_core::task::search::TaskMatch;

diesel::define_sql_function! {
    /// `text` with its letters in lower case.
    fn lower(text: diesel::sql_types::Text) -> diesel::sql_types::Text;
}

/// Up to `limit` runs whose request id starts with `prefix`, the latest made first (a request
/// id starts with the time it was made): the end of one range of the request-id index, read
/// backwards, however many runs the prefix names (six digits name four hours of runs).
pub async fn runs_by_prefix(
    conn: &mut Conn,
    prefix: &RequestIdPrefix,
    limit: i64,
) -> Result<Vec<Run>, StoreError> {
    let (start, end) = (prefix.as_str().to_string(), prefix.end());
    let runs: Vec<Run> = with_conn!(conn, |c| i::ax_instance
        .filter(i::request_id.ge(&start).and(i::request_id.lt(&end)))
        .order(i::request_id.desc())
        .limit(limit)
        .select(Run::as_select())
        .load(c)
        .await)?;
    // The range is the prefix's in any collation of hex digits and dashes; this keeps it so.
    Ok(runs
        .into_iter()
        .filter(|run| prefix.matches(&run.request_id))
        .collect())
}

/// Up to `limit` tasks whose `scene/name` the patterns match, by scene and name. No index
/// serves "contains": the ids are read from the `(scene, name)` index alone (a read of every
/// task's scene and name at worst, in that index's order, which stops at `limit`; 60 ms for
/// 100,000 tasks on MariaDB where reading the rows takes 300), then the tasks by id.
pub async fn tasks_matching(
    conn: &mut Conn,
    text: &TaskMatch,
    limit: i64,
) -> Result<Vec<Task>, StoreError> {
    let within = &text.within;
    let (scene_end, name_start) = text.across.clone().unzip();
    let ids: Vec<TaskId> = with_conn!(conn, |c| {
        let mut query = t::ax_task
            .filter(
                lower(t::scene)
                    .like(within)
                    .escape('\\')
                    .or(lower(t::name).like(within).escape('\\')),
            )
            .into_boxed();
        if let (Some(scene_end), Some(name_start)) = (&scene_end, &name_start) {
            query = query.or_filter(
                lower(t::scene)
                    .like(scene_end)
                    .escape('\\')
                    .and(lower(t::name).like(name_start).escape('\\')),
            );
        }
        query
            .order((t::scene, t::name))
            .limit(limit)
            .select(t::id)
            .load(c)
            .await
    })?;
    let mut tasks = tasks::find_many(conn, ids).await?;
    tasks.sort_by(|a, b| (&a.scene, &a.name).cmp(&(&b.scene, &b.name)));
    Ok(tasks)
}
