//! `ax tasks|runs|scenes|audit|cluster|executors|calendars|alerts|plan …`: a thin client of
//! the HTTP API, a module per resource. Each command makes a request or a few (lists page
//! through everything; `--watch` and `runs logs --follow` repeat theirs); the reply is printed as
//! `-o table|wide|json|yaml`. Errors are [`ClientError`]s, mapped to exit codes in one place:
//! 2 for bad usage or input, 1 when the server said no or could not be reached.

mod api;
pub mod apply;
mod commands;

use std::future::Future;
use std::process::ExitCode;

use clap::Args;

pub use api::error::{exit_with, ClientError};
pub use api::http::{request, send, Call, Reply};
pub use api::output::Format;
pub use commands::alerts::{alerts, AlertsCommand};
pub use commands::audit::{audit, AuditCommand};
pub use commands::calendars::{calendars, CalendarsCommand};
pub use commands::cluster::cluster;
pub use commands::cron::{cron_next, CronNext};
pub use commands::executor_check::{check_executor, CheckArgs};
pub use commands::executors::{executors, ExecutorsCommand};
pub use commands::plan::plan;
pub use commands::runs::{runs, RunsCommand};
pub use commands::scenes::{scenes, ScenesCommand};
pub use commands::task_ref::TaskRef;
pub use commands::tasks::{tasks, TasksCommand};

/// The flags every API command takes, before or after its subcommand.
#[derive(Debug, Clone, Args)]
pub struct GlobalArgs {
    /// The ax HTTP API.
    #[arg(
        long,
        env = "AX_URL",
        default_value = "http://127.0.0.1:8901",
        global = true
    )]
    pub url: String,
    /// The admin token (`Authorization: Bearer`), when ax has one.
    #[arg(long, env = "AX_ADMIN_TOKEN", global = true, hide_env_values = true)]
    pub token: Option<String>,
    /// How to print replies: table, wide (more columns), json (the API's reply) or yaml.
    #[arg(short = 'o', long = "output", value_enum, global = true)]
    pub output: Option<Format>,
    /// The same as `-o json`.
    #[arg(long, global = true)]
    pub json: bool,
}

impl GlobalArgs {
    /// The connection these flags describe; a URL that is not one is a usage error.
    pub fn connection(self) -> Result<Connection, ClientError> {
        let url = url::Url::parse(&self.url)
            .ok()
            .filter(|url| matches!(url.scheme(), "http" | "https") && url.has_host());
        if url.is_none() {
            return Err(ClientError::usage(format!(
                "--url: expected http://HOST:PORT, like http://127.0.0.1:8901, not `{}`",
                self.url
            )));
        }
        let format = match (self.output, self.json) {
            (Some(format), true) if format != Format::Json => {
                return Err(ClientError::usage(
                    "--json is -o json: give one of --json and -o",
                ))
            }
            (_, true) => Format::Json,
            (format, false) => format.unwrap_or_default(),
        };
        Ok(Connection {
            url: self.url,
            token: self.token,
            json: format == Format::Json,
            format,
        })
    }
}

/// Where the API is, and how to print its replies.
#[derive(Debug, Clone)]
pub struct Connection {
    /// The ax HTTP API.
    pub url: String,
    /// The admin token (`Authorization: Bearer`), when ax has one.
    pub token: Option<String>,
    /// Print the API's JSON (`-o json` or `--json`).
    pub json: bool,
    pub format: Format,
}

/// Runs a client command to its end: its error printed, its exit code.
pub(crate) fn finish(command: impl Future<Output = Result<(), ClientError>>) -> ExitCode {
    api::error::exit_with(actix_rt::System::new().block_on(command))
}
