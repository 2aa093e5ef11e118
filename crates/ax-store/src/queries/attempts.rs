//! The attempts of runs that ended without ending their run (see `run::ended_attempt`):
//! written with the retry they led to, read for a run's timeline.

use chrono::NaiveDateTime;
use diesel::prelude::*;
use diesel::sql_types::{Integer, Nullable, Text, Timestamp};
use diesel_async::RunQueryDsl;

use crate::rows::schema::ax_attempt::dsl as a;
use crate::with_conn;
use crate::{to_db, Conn, StoreError};
use ax_core::run::{EndedAttempt, RequestId};

/// An ended attempt as stored.
#[derive(Debug, Clone, PartialEq, Eq, Queryable)]
pub struct AttemptRow {
    pub attempt: i32,
    pub ended_at: NaiveDateTime,
    pub code: Option<String>,
    pub message: Option<String>,
    pub process: String,
    pub member: Option<String>,
}

/// Records these ended attempts, in one statement.
pub async fn record(
    conn: &mut Conn,
    ended: &[(RequestId, EndedAttempt)],
) -> Result<(), StoreError> {
    if ended.is_empty() {
        return Ok(());
    }
    // Plain SQL: diesel's batch insert of nullable columns is not there for SQLite. An
    // attempt ended by a callback or a timeout has no member of its own: the run's row names
    // the one it was sent to.
    let sql = format!(
        "INSERT INTO ax_attempt (request_id, attempt, ended_at, code, message, process, member) \
         VALUES {}",
        vec![
            "(?, ?, ?, ?, ?, ?, COALESCE(?, (SELECT member FROM ax_instance WHERE request_id = ?)))";
            ended.len()
        ]
        .join(", ")
    );
    let sql = conn.binds(sql);
    with_conn!(conn, |c| {
        let mut query = diesel::sql_query(sql.as_str()).into_boxed();
        for (id, attempt) in ended {
            query = query
                .bind::<Text, _>(id.to_string())
                .bind::<Integer, _>(attempt.attempt)
                .bind::<Timestamp, _>(to_db(attempt.at))
                .bind::<Nullable<Text>, _>(attempt.code.as_deref())
                .bind::<Nullable<Text>, _>(attempt.message.as_deref())
                .bind::<Text, _>(attempt.process.as_str())
                .bind::<Nullable<Text>, _>(attempt.member.as_deref())
                .bind::<Text, _>(id.to_string());
        }
        query.execute(c).await
    })?;
    Ok(())
}

/// The ended attempts of a run, in order.
pub async fn of_run(conn: &mut Conn, id: &RequestId) -> Result<Vec<AttemptRow>, StoreError> {
    let id = id.to_string();
    Ok(with_conn!(conn, |c| a::ax_attempt
        .filter(a::request_id.eq(&id))
        .order((a::attempt.asc(), a::id.asc()))
        .select((
            a::attempt,
            a::ended_at,
            a::code,
            a::message,
            a::process,
            a::member,
        ))
        .load(c)
        .await)?)
}
