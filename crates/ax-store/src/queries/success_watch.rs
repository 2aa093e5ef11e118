//! Which tasks' successes the alert folder needs: an alerted task's (it resolves) and a task's
//! with `alertLagMs` (it may have come late). Writers of runs keep that set in memory, read
//! again only when the folder or a task change bumps the version on row 1 of
//! `ax_alert_state`, so a success of any other task is written without a look-up.
//!
//! Writers read row 1 under a shared lock held until they commit; a folder bumps it (an
//! exclusive lock) before it looks, in the same transaction, for successes of the tasks it
//! just alerted. So a success is either written after the bump (its writer sees the new set)
//! or committed before the folder looks (the folder finds it): none is missed.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use diesel::prelude::*;
use diesel::sql_types::{BigInt, Integer};
use diesel::QueryableByName;
use diesel_async::RunQueryDsl;

use crate::rows::schema::ax_alert_fold::dsl as f;
use crate::rows::schema::ax_alert_state::dsl as s;
use crate::rows::schema::ax_task::dsl as t;
use crate::with_conn;
use crate::{Conn, StoreError};
use ax_core::run::TaskId;

/// The tasks whose successes are queued for the folder, as of one version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Watched {
    version: i64,
    /// `None`: every task's (a writer keeping no set).
    tasks: Option<HashSet<TaskId>>,
}

impl Watched {
    /// Whether a success of a run of `task` (`None`: a task the writer does not know) is
    /// queued.
    pub fn needs(&self, task: Option<TaskId>) -> bool {
        match (&self.tasks, task) {
            (Some(tasks), Some(task)) => tasks.contains(&task),
            _ => true,
        }
    }
}

/// A process's copy of the watched set, shared by its writers of runs.
#[derive(Debug, Default)]
pub struct SuccessWatch {
    seen: Mutex<Option<Arc<Watched>>>,
}

/// Row 1 as writers of runs read it.
#[derive(QueryableByName)]
struct StateRow {
    #[diesel(sql_type = Integer)]
    enabled: i32,
    #[diesel(sql_type = BigInt)]
    watch_version: i64,
}

/// The watched set in the caller's transaction, `None` while alerts are off. Reads row 1
/// share-locked (see the module's note), and the set itself only when its version moved
/// since `cache` last saw it; without a cache every task is watched.
pub async fn watched(
    conn: &mut Conn,
    cache: Option<&SuccessWatch>,
) -> Result<Option<Arc<Watched>>, StoreError> {
    let lock = match conn {
        Conn::Mysql(_) => " LOCK IN SHARE MODE",
        Conn::Postgres(_) => " FOR SHARE",
        // SQLite's writer is alone.
        Conn::Sqlite(..) => "",
    };
    let sql = format!("SELECT enabled, watch_version FROM ax_alert_state WHERE id = 1{lock}");
    let row: Option<StateRow> = with_conn!(conn, |c| diesel::sql_query(sql.as_str())
        .get_result(c)
        .await
        .optional())?;
    let Some(row) = row.filter(|row| row.enabled == 1) else {
        return Ok(None);
    };
    let Some(cache) = cache else {
        return Ok(Some(Arc::new(Watched {
            version: row.watch_version,
            tasks: None,
        })));
    };
    if let Some(seen) = cached(cache).filter(|seen| seen.version == row.watch_version) {
        return Ok(Some(seen));
    }
    let watched = Arc::new(Watched {
        version: row.watch_version,
        tasks: Some(load(conn).await?),
    });
    if let Ok(mut seen) = cache.seen.lock() {
        *seen = Some(watched.clone());
    }
    Ok(Some(watched))
}

fn cached(cache: &SuccessWatch) -> Option<Arc<Watched>> {
    cache.seen.lock().ok().and_then(|seen| seen.clone())
}

/// The alerted tasks and the tasks with `alertLagMs`.
async fn load(conn: &mut Conn) -> Result<HashSet<TaskId>, StoreError> {
    let alerted: Vec<String> = with_conn!(conn, |c| f::ax_alert_fold
        .filter(f::alerted.eq(1))
        .filter(f::subject.like("task:%"))
        .select(f::subject)
        .load(c)
        .await)?;
    let lagging: Vec<TaskId> = with_conn!(conn, |c| t::ax_task
        .filter(t::alert_lag_ms.is_not_null())
        .select(t::id)
        .load(c)
        .await)?;
    let alerted = alerted
        .iter()
        .filter_map(|subject| subject.strip_prefix("task:")?.parse().ok())
        .map(TaskId);
    Ok(alerted.chain(lagging).collect())
}

/// Tells every writer of runs to read the watched set again, in the caller's transaction.
pub async fn bump(conn: &mut Conn) -> Result<(), StoreError> {
    with_conn!(conn, |c| diesel::update(
        s::ax_alert_state.filter(s::id.eq(1))
    )
    .set(s::watch_version.eq(s::watch_version + 1))
    .execute(c)
    .await)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_writer_without_a_set_queues_every_success_and_one_with_a_set_only_its_tasks() {
        let all = Watched {
            version: 3,
            tasks: None,
        };
        assert!(all.needs(Some(TaskId(7))) && all.needs(None));
        let some = Watched {
            version: 3,
            tasks: Some(HashSet::from([TaskId(7)])),
        };
        assert!(some.needs(Some(TaskId(7))));
        assert!(!some.needs(Some(TaskId(8))));
        assert!(some.needs(None), "a run of an unknown task is looked up");
    }
}
