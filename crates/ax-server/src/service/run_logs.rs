//! Executors' log lines, progress and output: taken while a run is open (and for
//! `run_logs.grace_secs` after), read with the run.

use chrono::Duration;

use super::error::{Result, ServiceError};
use super::Service;
use crate::actors::store::boxed;
use ax_core::run::logs::{takes_lines, Limits};
use ax_core::run::RequestId;
use ax_store::from_db;
use ax_store::queries::run_log::{self, Appended, AttemptLog, LogAppend};
use ax_store::queries::runs;

/// What an executor sends to a run's log.
#[derive(Debug, Clone, Default)]
pub struct LogInput {
    /// The attempt the lines belong to; the one dispatched last without.
    pub attempt: Option<i32>,
    pub lines: Vec<String>,
    pub progress: Option<i32>,
}

impl Service {
    /// Adds to the log of an attempt of a run; the attempt's lines and how many were dropped.
    pub async fn append_log(&self, id: RequestId, input: LogInput) -> Result<(i32, Appended)> {
        let now = self.clock.now();
        let limits = self.run_log_limits();
        let grace = Duration::seconds(self.run_logs.grace_secs);
        let answer = self
            .store
            .write((id, input), move |conn, (id, input)| {
                boxed(conn.transaction(move |conn| {
                    boxed(async move {
                        let Some(run) = runs::find_by_request_id(conn, &id).await? else {
                            return Ok(Err(ServiceError::RunNotFound(id)));
                        };
                        let attempt = input.attempt.unwrap_or(run.dispatched_attempt.max(1));
                        let ended = run.finished_at.map(from_db);
                        if let Err(closed) =
                            takes_lines(attempt, run.dispatched_attempt, ended, now, grace)
                        {
                            return Ok(Err(ServiceError::LogClosed(closed)));
                        }
                        let add = LogAppend {
                            run: &id,
                            attempt,
                            lines: &input.lines,
                            progress: input.progress,
                            at: now,
                            limits,
                        };
                        Ok(Ok((attempt, run_log::append(conn, &add).await?)))
                    })
                }))
            })
            .await?;
        answer
    }

    /// Keeps the output a callback carried with its attempt.
    pub async fn keep_output(&self, id: RequestId, attempt: i32, output: String) -> Result<()> {
        let at = self.clock.now();
        self.store
            .query(move |conn| {
                boxed(async move { run_log::keep_output(conn, &id, attempt, &output, at).await })
            })
            .await?;
        Ok(())
    }

    /// A run's logs by attempt; a run never logged to has none.
    pub async fn run_log(&self, id: RequestId) -> Result<Vec<AttemptLog>> {
        let logs = self
            .store
            .query(move |conn| {
                boxed(async move {
                    if runs::find_by_request_id(conn, &id).await?.is_none() {
                        return Ok(Err(ServiceError::RunNotFound(id)));
                    }
                    Ok(Ok(run_log::of_run(conn, &id).await?))
                })
            })
            .await?;
        logs
    }

    pub fn run_log_limits(&self) -> Limits {
        Limits {
            lines: self.run_logs.max_lines,
            bytes: self.run_logs.max_bytes,
        }
    }
}
