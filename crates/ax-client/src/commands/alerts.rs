//! `ax alerts list|test`.

use std::process::ExitCode;

use clap::Subcommand;
use serde_json::json;

use crate::api::error::ClientError;
use crate::api::http::{request, Call};
use crate::api::output::one_line;
use crate::api::output::{self, Column};
use crate::commands::task_ref::TaskRef;
use crate::Connection;

#[derive(Debug, Clone, Subcommand)]
pub enum AlertsCommand {
    /// The alerts, newest first, one line per alert and channel.
    List {
        /// Only this task's alerts: its id, SCENE/NAME, or its name.
        #[arg(long)]
        task: Option<TaskRef>,
        /// Only the alerts of this scene's tasks.
        #[arg(long)]
        scene: Option<String>,
        /// pending, sent, folded or failed.
        #[arg(long)]
        status: Option<String>,
        /// How many (1-500).
        #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u32).range(1..=500))]
        limit: u32,
    },
    /// Send a test alert to a configured channel now.
    Test {
        /// The channel's name (alerts.channels).
        channel: String,
    },
}

const ALERT_COLUMNS: &[Column] = &[
    ("CREATED", "createdAt"),
    ("EVENT", "event"),
    ("SUBJECT", "subject"),
    ("CHANNEL", "channel"),
    ("STATUS", "status"),
    ("COUNT", "count"),
    ("FOLDED", "folded"),
    ("CODE", "code"),
    ("ID", "id"),
];

/// Runs `ax alerts list|test`.
pub fn alerts(conn: Connection, command: AlertsCommand) -> ExitCode {
    crate::finish(run(conn, command))
}

async fn run(conn: Connection, command: AlertsCommand) -> Result<(), ClientError> {
    match command {
        AlertsCommand::List {
            task,
            scene,
            status,
            limit,
        } => {
            let task = match task {
                Some(task) => Some(task.id(&conn).await?.to_string()),
                None => None,
            };
            let call = Call::new("GET", "/api/alerts".into())
                .with("task", task)
                .with("scene", scene)
                .with("status", status)
                .with("limit", Some(limit.to_string()));
            let page = request(&conn, &call).await?.body;
            output::print(conn.format, &page, |page, _| {
                output::table(ALERT_COLUMNS, output::items(page))
            })
        }
        AlertsCommand::Test { channel } => {
            let call =
                Call::new("POST", "/api/alerts/test".into()).body(json!({ "channel": channel }));
            let reply = request(&conn, &call).await?.body;
            one_line(conn.format, &reply, || {
                format!("sent a test alert to {channel}")
            })
        }
    }
}
