//! Executors' log lines, progress and output per attempt (see `ax_core::run::logs`): lines
//! appended within the attempt's bounds, read for a run's page, deleted with their runs.

use chrono::{DateTime, NaiveDateTime, Utc};
use diesel::prelude::*;
use diesel_async::RunQueryDsl;

use crate::rows::schema::ax_run_log::dsl as l;
use crate::rows::schema::ax_run_log_attempt::dsl as s;
use crate::{server_or_sqlite, with_conn};
use crate::{to_db, Conn, StoreError};
use ax_core::run::logs::{cut_output, overflow, Limits};
use ax_core::run::RequestId;

/// What one call adds to an attempt's log.
#[derive(Debug, Clone)]
pub struct LogAppend<'a> {
    pub run: &'a RequestId,
    pub attempt: i32,
    pub lines: &'a [String],
    pub progress: Option<i32>,
    pub at: DateTime<Utc>,
    pub limits: Limits,
}

/// What became of a call's lines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Appended {
    /// Lines the attempt's log holds now.
    pub kept: i64,
    /// Lines gone from it so far, the oldest first.
    pub dropped: i64,
}

/// An attempt's log as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttemptLog {
    pub attempt: i32,
    pub progress: Option<i32>,
    pub dropped: i64,
    pub output: Option<String>,
    pub lines: Vec<(NaiveDateTime, String)>,
}

#[derive(Insertable)]
#[diesel(table_name = crate::rows::schema::ax_run_log)]
struct NewLine<'a> {
    request_id: &'a str,
    attempt: i32,
    at: NaiveDateTime,
    text: &'a str,
    bytes: i32,
}

/// Rows a statement inserts on MariaDB.
const INSERT_CHUNK: usize = 500;

/// Adds a call's lines, progress and output to an attempt's log, keeping its last lines
/// within `limits`; in the caller's transaction. The attempt's row is locked first, so two
/// calls for one attempt count its lines one after the other.
pub async fn append(conn: &mut Conn, add: &LogAppend<'_>) -> Result<Appended, StoreError> {
    let run = add.run.as_str();
    let at = to_db(add.at);
    open_attempt(conn, add.run, add.attempt, at).await?;
    let of_attempt = s::ax_run_log_attempt
        .filter(s::request_id.eq(run))
        .filter(s::attempt.eq(add.attempt))
        .select((s::line_count, s::byte_count, s::dropped));
    let (count, bytes, mut dropped): (i32, i64, i64) =
        server_or_sqlite!(conn, |c| of_attempt.for_update().first(c).await?, |c| {
            of_attempt.first(c).await?
        });
    // Lines that would not fit even alone are not written at all.
    let sizes: Vec<usize> = add.lines.iter().map(String::len).collect();
    let skip = overflow(&sizes, add.limits);
    dropped += skip as i64;
    let rows: Vec<NewLine> = add.lines[skip..]
        .iter()
        .map(|text| NewLine {
            request_id: run,
            attempt: add.attempt,
            at,
            text,
            bytes: i32::try_from(text.len()).unwrap_or(i32::MAX),
        })
        .collect();
    // A database server takes many rows a statement; SQLite (no round trip) one at a time.
    server_or_sqlite!(
        conn,
        |c| {
            for chunk in rows.chunks(INSERT_CHUNK) {
                diesel::insert_into(l::ax_run_log)
                    .values(chunk)
                    .execute(c)
                    .await?;
            }
        },
        |c| {
            for row in &rows {
                diesel::insert_into(l::ax_run_log)
                    .values(row)
                    .execute(c)
                    .await?;
            }
        }
    );
    let mut count = i64::from(count) + rows.len() as i64;
    let mut bytes = bytes + rows.iter().map(|row| i64::from(row.bytes)).sum::<i64>();
    if count > add.limits.lines as i64 || bytes > add.limits.bytes as i64 {
        let (gone, gone_bytes) = drop_oldest(conn, add.run, add.attempt, add.limits).await?;
        count -= gone;
        bytes -= gone_bytes;
        dropped += gone;
    }
    let progress = add.progress.map(Some);
    with_conn!(conn, |c| diesel::update(
        s::ax_run_log_attempt
            .filter(s::request_id.eq(run))
            .filter(s::attempt.eq(add.attempt))
    )
    .set((
        s::line_count.eq(i32::try_from(count).unwrap_or(i32::MAX)),
        s::byte_count.eq(bytes),
        s::dropped.eq(dropped),
        s::updated_at.eq(at),
        progress.map(|p| s::progress.eq(p)),
    ))
    .execute(c)
    .await)?;
    Ok(Appended {
        kept: count,
        dropped,
    })
}

/// Gives the attempt its row, if it has none.
async fn open_attempt(
    conn: &mut Conn,
    run: &RequestId,
    attempt: i32,
    at: NaiveDateTime,
) -> Result<(), StoreError> {
    with_conn!(conn, |c| diesel::insert_into(s::ax_run_log_attempt)
        .values((
            s::request_id.eq(run.as_str()),
            s::attempt.eq(attempt),
            s::line_count.eq(0),
            s::byte_count.eq(0_i64),
            s::dropped.eq(0_i64),
            s::updated_at.eq(at),
        ))
        .on_conflict_do_nothing()
        .execute(c)
        .await)?;
    Ok(())
}

/// Keeps the output a reply or a callback carried with its attempt (see
/// `run_log::cut_output`); a later one replaces it.
pub async fn keep_output(
    conn: &mut Conn,
    run: &RequestId,
    attempt: i32,
    output: &str,
    at: DateTime<Utc>,
) -> Result<(), StoreError> {
    let at = to_db(at);
    open_attempt(conn, run, attempt, at).await?;
    with_conn!(conn, |c| diesel::update(
        s::ax_run_log_attempt
            .filter(s::request_id.eq(run.as_str()))
            .filter(s::attempt.eq(attempt))
    )
    .set((s::output.eq(cut_output(output)), s::updated_at.eq(at)))
    .execute(c)
    .await)?;
    Ok(())
}

/// Deletes the oldest lines of an attempt until the rest fit; returns how many lines and
/// bytes went.
async fn drop_oldest(
    conn: &mut Conn,
    run: &RequestId,
    attempt: i32,
    limits: Limits,
) -> Result<(i64, i64), StoreError> {
    let stored: Vec<(i64, i32)> = with_conn!(conn, |c| l::ax_run_log
        .filter(l::request_id.eq(run.as_str()))
        .filter(l::attempt.eq(attempt))
        .order(l::id.asc())
        .select((l::id, l::bytes))
        .load(c)
        .await)?;
    let sizes: Vec<usize> = stored
        .iter()
        .map(|(_, bytes)| usize::try_from(*bytes).unwrap_or(0))
        .collect();
    let gone = overflow(&sizes, limits);
    let Some(&(last_gone, _)) = gone.checked_sub(1).and_then(|i| stored.get(i)) else {
        return Ok((0, 0));
    };
    with_conn!(conn, |c| diesel::delete(
        l::ax_run_log
            .filter(l::request_id.eq(run.as_str()))
            .filter(l::attempt.eq(attempt))
            .filter(l::id.le(last_gone))
    )
    .execute(c)
    .await)?;
    let gone_bytes = stored[..gone].iter().map(|(_, b)| i64::from(*b)).sum();
    Ok((gone as i64, gone_bytes))
}

/// A run's logs, by attempt, each with its lines in order.
pub async fn of_run(conn: &mut Conn, run: &RequestId) -> Result<Vec<AttemptLog>, StoreError> {
    let attempts: Vec<(i32, Option<i32>, i64, Option<String>)> =
        with_conn!(conn, |c| s::ax_run_log_attempt
            .filter(s::request_id.eq(run.as_str()))
            .order(s::attempt.asc())
            .select((s::attempt, s::progress, s::dropped, s::output))
            .load(c)
            .await)?;
    let mut lines: Vec<(i32, NaiveDateTime, String)> = with_conn!(conn, |c| l::ax_run_log
        .filter(l::request_id.eq(run.as_str()))
        .order((l::attempt.asc(), l::id.asc()))
        .select((l::attempt, l::at, l::text))
        .load(c)
        .await)?
    .into_iter()
    .rev()
    .collect();
    Ok(attempts
        .into_iter()
        .map(|(attempt, progress, dropped, output)| {
            let mut own = Vec::new();
            while lines.last().is_some_and(|(a, ..)| *a == attempt) {
                if let Some((_, at, text)) = lines.pop() {
                    own.push((at, text));
                }
            }
            AttemptLog {
                attempt,
                progress,
                dropped,
                output,
                lines: own,
            }
        })
        .collect())
}

/// Deletes the logs of these runs (their runs are being deleted).
pub async fn delete_of_runs(conn: &mut Conn, runs: &[String]) -> Result<(), StoreError> {
    with_conn!(conn, |c| diesel::delete(
        l::ax_run_log.filter(l::request_id.eq_any(runs))
    )
    .execute(c)
    .await)?;
    with_conn!(conn, |c| diesel::delete(
        s::ax_run_log_attempt.filter(s::request_id.eq_any(runs))
    )
    .execute(c)
    .await)?;
    Ok(())
}
