//! The queue of events the folder takes: run ends and events about no run, recorded while
//! alerts are on.

use chrono::{DateTime, Utc};
use diesel::prelude::*;
use diesel_async::RunQueryDsl;

use crate::rows::schema::ax_alert_event::dsl as e;
use crate::rows::schema::ax_alert_state::dsl as s;
use crate::with_conn;
use crate::{to_db, Conn, StoreError};
use ax_core::alerting::AlertEvent;
use ax_core::run::TaskId;

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
        Conn::Postgres(_) => (
            "CAST(EXTRACT(EPOCH FROM i.dispatched_at - i.trigger_at) * 1000 AS BIGINT)",
            "'task:' || i.task_id",
            "CAST(statement_timestamp() AT TIME ZONE 'utc' AS TIMESTAMP(3))",
        ),
        Conn::Sqlite(..) => (
            "CAST((julianday(i.dispatched_at) - julianday(i.trigger_at)) * 86400000 AS INTEGER)",
            "'task:' || i.task_id",
            "strftime('%Y-%m-%d %H:%M:%f', 'now')",
        ),
    };
    let ids = vec!["?"; request_ids.len()].join(", ");
    let sql = conn.binds(format!(
        "INSERT INTO ax_alert_event (request_id, task_id, status, code, message, at, lag_ms) \
         SELECT i.request_id, i.task_id, i.status, i.callback_code, i.callback_message, \
                COALESCE(i.finished_at, {now}), {lag} \
         FROM ax_instance i JOIN ax_task t ON t.id = i.task_id \
         WHERE i.request_id IN ({ids}) \
           AND (EXISTS (SELECT 1 FROM ax_alert_fold f \
                        WHERE f.subject = {subject} AND f.alerted = 1) \
                OR (t.alert_lag_ms IS NOT NULL AND {lag} > t.alert_lag_ms))"
    ));
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
