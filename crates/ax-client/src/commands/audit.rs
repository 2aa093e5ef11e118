//! `ax audit list`: who changed what and when, newest first.

use std::process::ExitCode;

use clap::Subcommand;
use serde_json::{json, Value};

use crate::api::error::ClientError;
use crate::api::http::{request, Call};
use crate::api::output::{self, Column};
use crate::Connection;

#[derive(Debug, Clone, Subcommand)]
pub enum AuditCommand {
    /// The audit log, newest first.
    List {
        /// How many entries (pages of 500 are read until there are enough).
        #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u64).range(1..))]
        limit: u64,
    },
}

const AUDIT_COLUMNS: &[Column] = &[
    ("AT", "at"),
    ("ACTOR", "actor"),
    ("ACTION", "action"),
    ("TARGET", "target"),
    ("SUMMARY", "summary"),
];

/// Entries a page of `GET /api/audit` holds at most.
const PAGE: u64 = 500;

/// Runs `ax audit …`.
pub fn audit(conn: Connection, command: AuditCommand) -> ExitCode {
    let AuditCommand::List { limit } = command;
    crate::finish(async move {
        let (entries, more) = entries(&conn, limit).await?;
        let page = json!({ "items": entries });
        output::print(conn.format, &page, |page, _| {
            output::table(AUDIT_COLUMNS, output::items(page))
        })?;
        if more {
            eprintln!("… more: raise --limit");
        }
        Ok(())
    })
}

/// Up to `limit` entries, newest first, and whether there are more.
async fn entries(conn: &Connection, limit: u64) -> Result<(Vec<Value>, bool), ClientError> {
    let mut entries: Vec<Value> = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let wanted = (limit - entries.len() as u64).min(PAGE);
        let call = Call::new("GET", "/api/audit".into())
            .with("limit", Some(wanted.to_string()))
            .with("cursor", cursor.take());
        let page = request(conn, &call).await?.body;
        entries.extend_from_slice(output::items(&page));
        cursor = page["nextCursor"].as_str().map(str::to_string);
        if cursor.is_none() || entries.len() as u64 >= limit {
            return Ok((entries, cursor.is_some()));
        }
    }
}
