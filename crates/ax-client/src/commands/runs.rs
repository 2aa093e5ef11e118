//! `ax runs list|get|cancel|logs`.

use std::collections::HashMap;
use std::process::ExitCode;

use clap::Subcommand;
use serde_json::{json, Value};

use super::{flags, logs, watch};
use crate::api::error::ClientError;
use crate::api::http::{request, Call};
use crate::api::output::one_line;
use crate::api::output::{self, Column};
use crate::commands::task_ref::{scene_name, TaskRef};
use crate::Connection;
use ax_core::run::RequestId;

#[derive(Debug, Clone, Subcommand)]
pub enum RunsCommand {
    /// The run history, newest scheduled first.
    List {
        /// Only this task's runs: its id, SCENE/NAME, or its name.
        #[arg(long)]
        task: Option<TaskRef>,
        /// Only the runs of this scene's tasks.
        #[arg(long)]
        scene: Option<String>,
        /// Only runs in these statuses (repeat it, or separate them with commas): PENDING,
        /// READY, RUNNING, SUCCESS, FAILED, MISSED, SKIPPED or CANCELLED.
        #[arg(long, value_delimiter = ',', value_parser = flags::run_status)]
        status: Vec<String>,
        /// Only runs scheduled at or after this time (RFC 3339).
        #[arg(long, value_parser = flags::time)]
        from: Option<String>,
        /// Only runs scheduled before this time (RFC 3339).
        #[arg(long, value_parser = flags::time)]
        to: Option<String>,
        /// How many (1-500).
        #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u32).range(1..=500))]
        limit: u32,
    },
    /// One run, by its request id or the start of it (6 hex digits or more) that no other
    /// run's shares.
    Get {
        #[arg(value_parser = flags::request_id_or_prefix)]
        request_id: String,
        /// Print it again as it changes, until it ends.
        #[arg(long)]
        watch: bool,
    },
    /// Cancel an open run: no further attempt, later results change nothing.
    Cancel {
        #[arg(value_parser = flags::request_id)]
        request_id: String,
    },
    /// The log lines and progress its executor sent, by attempt.
    Logs {
        #[arg(value_parser = flags::request_id)]
        request_id: String,
        /// Keep printing new lines until the run ends, then how it ended (its status, attempt,
        /// code and message).
        #[arg(long, short = 'f')]
        follow: bool,
    },
}

const RUN_COLUMNS: &[Column] = &[
    ("REQUEST ID", "requestId"),
    ("TASK", "task"),
    ("STATUS", "status"),
    ("ATTEMPT", "attempt"),
    ("SCHEDULED", "scheduledAt"),
    ("DISPATCHED", "dispatchedAt"),
    ("CODE", "code"),
];

/// `-o wide`: how it was fired, by whom, and why it ended so.
const WIDE_RUN_COLUMNS: &[Column] = &[
    ("TRIGGER", "triggerType"),
    ("DUE", "triggerAt"),
    ("FIRED BY", "firedBy"),
    ("MEMBER", "member"),
    ("MESSAGE", "message"),
];

/// Runs `ax runs …`.
pub fn runs(conn: Connection, command: RunsCommand) -> ExitCode {
    crate::finish(run(conn, command))
}

async fn run(conn: Connection, command: RunsCommand) -> Result<(), ClientError> {
    match command {
        RunsCommand::List {
            task,
            scene,
            status,
            from,
            to,
            limit,
        } => {
            let task = match task {
                Some(task) => Some(task.id(&conn).await?.to_string()),
                None => None,
            };
            let statuses = (!status.is_empty()).then(|| status.join(","));
            let call = Call::new("GET", "/api/instances".into())
                .with("taskId", task)
                .with("scene", scene)
                .with("status", statuses)
                .with("from", from)
                .with("to", to)
                .with("limit", Some(limit.to_string()));
            let page = request(&conn, &call).await?.body;
            let names = match conn.format.is_data() {
                true => HashMap::new(),
                false => task_names(&conn, output::items(&page)).await?,
            };
            output::print(conn.format, &page, |page, wide| {
                let columns = output::columns(RUN_COLUMNS, WIDE_RUN_COLUMNS, wide);
                let rows: Vec<Value> = output::items(page)
                    .iter()
                    .map(|run| with_task(run, &names))
                    .collect();
                output::table(&columns, &rows)
            })?;
            if !page["nextCursor"].is_null() {
                eprintln!("… more: raise --limit (up to 500) or narrow with --from and --to");
            }
            Ok(())
        }
        RunsCommand::Get { request_id, watch } => get(&conn, &request_id, watch).await,
        RunsCommand::Cancel { request_id } => {
            let call = Call::new("POST", format!("/api/instances/{request_id}/cancel"));
            let run = request(&conn, &call).await?.body;
            one_line(conn.format, &run, || format!("cancelled run {request_id}"))
        }
        RunsCommand::Logs { request_id, follow } => {
            logs::print_log(&conn, &request_id, follow).await
        }
    }
}

/// `scene/name` of each task the runs belong to, by id; a deleted task has none.
async fn task_names(
    conn: &Connection,
    runs: &[Value],
) -> Result<HashMap<i64, String>, ClientError> {
    let mut names = HashMap::new();
    for id in runs.iter().filter_map(|run| run["taskId"].as_i64()) {
        if names.contains_key(&id) {
            continue;
        }
        match request(conn, &Call::new("GET", format!("/api/tasks/{id}"))).await {
            Ok(task) => names.insert(id, scene_name(&task.body)),
            Err(err) if err.is_not_found() => continue,
            Err(err) => return Err(err),
        };
    }
    Ok(names)
}

/// A run with the `task` cell of its line: its task's `scene/name`, or the id of a task
/// deleted since.
fn with_task(run: &Value, names: &HashMap<i64, String>) -> Value {
    let mut row = run.clone();
    let id = run["taskId"].as_i64().unwrap_or(0);
    row["task"] = match names.get(&id) {
        Some(name) => json!(name),
        None => json!(format!("{id} (deleted)")),
    };
    row
}

/// Prints the run; with `watch`, again each time it changes, until it is final.
async fn get(conn: &Connection, request_id: &str, watch: bool) -> Result<(), ClientError> {
    let request_id = whole_request_id(conn, request_id).await?;
    let call = Call::new("GET", format!("/api/instances/{request_id}"));
    let mut shown: Option<Value> = None;
    loop {
        let run = request(conn, &call).await?.body;
        if shown.as_ref() != Some(&run) {
            let text = output::render(conn.format, &run, |run, _| output::fields(run))?;
            watch::print_screen(&text, shown.is_none());
        }
        if !watch || logs::is_final(&run) {
            return Ok(());
        }
        shown = Some(run);
        actix_rt::time::sleep(logs::FOLLOW_EVERY).await;
    }
}

/// Most runs a prefix that names several is told with.
const MATCHES_TOLD: usize = 5;

/// The request id `given` names: itself when it is whole, else the one run's whose request id
/// starts with it; a usage error naming it when no run's or several runs' do.
async fn whole_request_id(conn: &Connection, given: &str) -> Result<String, ClientError> {
    if RequestId::parse(given).is_some() {
        return Ok(given.to_string());
    }
    let call = Call::new("GET", "/api/instances".into())
        .with("requestIdPrefix", Some(given.to_string()))
        .with("limit", Some((MATCHES_TOLD + 1).to_string()));
    let page = request(conn, &call).await?.body;
    let ids: Vec<&str> = output::items(&page)
        .iter()
        .filter_map(|run| run["requestId"].as_str())
        .collect();
    match ids.as_slice() {
        [] => Err(ClientError::usage(format!(
            "no run's request id starts with {given}"
        ))),
        [id] => Ok(id.to_string()),
        several => {
            let shown = several[..several.len().min(MATCHES_TOLD)].join(", ");
            let more = if several.len() > MATCHES_TOLD {
                ", …"
            } else {
                ""
            };
            Err(ClientError::usage(format!(
                "{given} starts the request ids of several runs ({shown}{more}): give more of it"
            )))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_is_listed_with_its_tasks_scene_and_name() {
        let names = HashMap::from([(2, "reports/slow-export".to_string())]);
        let runs = [
            json!({"requestId": "r1", "taskId": 2, "status": "SUCCESS", "attempt": 1}),
            json!({"requestId": "r2", "taskId": 9, "status": "FAILED", "attempt": 3}),
        ];
        let rows: Vec<Value> = runs.iter().map(|run| with_task(run, &names)).collect();
        let table = output::table(&RUN_COLUMNS[..4], &rows);
        assert_eq!(
            table,
            "REQUEST ID  TASK                 STATUS   ATTEMPT\n\
             r1          reports/slow-export  SUCCESS  1\n\
             r2          9 (deleted)          FAILED   3\n"
        );
    }
}
