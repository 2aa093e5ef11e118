//! `ax tasks list|get|create|edit|delete|pause|resume|trigger|backfill`.

use std::io::{BufRead, IsTerminal, Write};

use std::process::ExitCode;

use clap::Subcommand;
use serde_json::{json, Value};

use super::task_files;
use super::{flags, watch};
use crate::api::error::ClientError;
use crate::api::http::{request, Call};
use crate::api::output::{self, Column};
use crate::commands::task_ref::{self, scene_name, TaskRef};
use crate::Connection;

#[derive(Debug, Clone, Subcommand)]
pub enum TasksCommand {
    /// List tasks by id: all of them, page after page, unless --limit.
    List {
        /// Only this scene's tasks.
        #[arg(long)]
        scene: Option<String>,
        /// ENABLED or PAUSED.
        #[arg(long, value_parser = flags::task_status)]
        status: Option<String>,
        /// Only tasks with this label: KEY=VALUE (team=billing).
        #[arg(long, value_parser = flags::label)]
        label: Option<String>,
        /// Print at most this many (the number left out is said on stderr).
        #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
        limit: Option<u64>,
        /// Print the list again every 2 seconds, until interrupted.
        #[arg(long)]
        watch: bool,
    },
    /// One task.
    Get {
        #[arg(value_parser = task_ref::id_or_scene_name)]
        task: TaskRef,
    },
    /// Create a task from a file (one task, as an entry of an `ax apply` file) or from flags.
    Create(task_files::CreateArgs),
    /// Edit a task's definition in $EDITOR (YAML, as `ax export` writes it), then save it.
    Edit {
        #[arg(value_parser = task_ref::id_or_scene_name)]
        task: TaskRef,
    },
    /// Delete a task (its runs stay in the history); asks first, unless --yes.
    Delete {
        #[arg(value_parser = task_ref::id_or_scene_name)]
        task: TaskRef,
        /// Delete without asking (needed without a terminal).
        #[arg(long, short = 'y')]
        yes: bool,
    },
    /// Pause a task: it fires no more until resumed.
    Pause {
        #[arg(value_parser = task_ref::id_or_scene_name)]
        task: TaskRef,
    },
    /// Resume a task from now.
    Resume {
        #[arg(value_parser = task_ref::id_or_scene_name)]
        task: TaskRef,
    },
    /// Fire one run of a task now, outside its schedule.
    Trigger {
        #[arg(value_parser = task_ref::id_or_scene_name)]
        task: TaskRef,
        /// Params of this run instead of the task's: a JSON object.
        #[arg(long, value_parser = flags::json_object)]
        params: Option<Value>,
    },
    /// Give every fire time in [FROM, TO) a run with its scheduled request id.
    Backfill {
        #[arg(value_parser = task_ref::id_or_scene_name)]
        task: TaskRef,
        #[arg(long, value_parser = flags::time)]
        from: String,
        #[arg(long, value_parser = flags::time)]
        to: String,
    },
}

const TASK_COLUMNS: &[Column] = &[
    ("ID", "id"),
    ("NAME", "name"),
    ("SCENE", "scene"),
    ("STATUS", "status"),
    ("CRON", "cron"),
    ("ZONE", "timeZone"),
    ("NEXT RUN", "nextRunAt"),
];

/// `-o wide`: where runs go, and the rest of what people look for.
const WIDE_TASK_COLUMNS: &[Column] = &[
    ("HANDLER", "handler"),
    ("OVERLAP", "overlap"),
    ("VERSION", "version"),
    ("LABELS", "labels"),
];

/// Tasks a page of `GET /api/tasks` holds at most.
const PAGE: u64 = 500;

/// Runs `ax tasks …`.
pub fn tasks(conn: Connection, command: TasksCommand) -> ExitCode {
    crate::finish(run(conn, command))
}

async fn run(conn: Connection, command: TasksCommand) -> Result<(), ClientError> {
    match command {
        TasksCommand::List {
            scene,
            status,
            label,
            limit,
            watch,
        } => {
            let filter = Call::new("GET", "/api/tasks".into())
                .with("scene", scene)
                .with("status", status)
                .with("label", label);
            match watch {
                true => watch_list(&conn, &filter, limit).await,
                false => print_list(&conn, &filter, limit, true).await.map(drop),
            }
        }
        TasksCommand::Get { task } => {
            let task = task.find(&conn).await?;
            output::print(conn.format, &task, |task, _| output::fields(task))
        }
        TasksCommand::Create(args) => task_files::create(&conn, args).await,
        TasksCommand::Edit { task } => task_files::edit(&conn, &task).await,
        TasksCommand::Delete { task, yes } => delete(&conn, &task, yes).await,
        TasksCommand::Pause { task } => change(&conn, &task, "pause", "paused").await,
        TasksCommand::Resume { task } => change(&conn, &task, "resume", "resumed").await,
        TasksCommand::Trigger { task, params } => trigger(&conn, &task, params).await,
        TasksCommand::Backfill { task, from, to } => {
            let id = task.id(&conn).await?;
            let call = Call::new("POST", format!("/api/tasks/{id}/backfill"))
                .body(json!({"from": from, "to": to}));
            let reply = request(&conn, &call).await?.body;
            output::one_line(conn.format, &reply, || {
                format!(
                    "backfilled task {task} (id {id}): {} runs, {} existing",
                    reply["runs"], reply["existing"]
                )
            })
        }
    }
}

/// Prints every task of `filter` (or the first `limit`), reading page after page; the number
/// left out goes to stderr, so the table stays whole.
async fn print_list(
    conn: &Connection,
    filter: &Call,
    limit: Option<u64>,
    first: bool,
) -> Result<(), ClientError> {
    let (tasks, total) = list(conn, filter, limit).await?;
    let page = json!({"items": tasks, "total": total});
    let text = output::render(conn.format, &page, |page, wide| {
        let rows: Vec<Value> = output::items(page).iter().map(row).collect();
        output::table(
            &output::columns(TASK_COLUMNS, WIDE_TASK_COLUMNS, wide),
            &rows,
        )
    })?;
    watch::print_screen(&text, first);
    let more = total.saturating_sub(tasks.len() as u64);
    if more > 0 {
        eprintln!("… {more} more");
    }
    Ok(())
}

/// `--watch`: the list again every few seconds until interrupted (or a request fails).
async fn watch_list(
    conn: &Connection,
    filter: &Call,
    limit: Option<u64>,
) -> Result<(), ClientError> {
    let mut first = true;
    loop {
        print_list(conn, filter, limit, first).await?;
        first = false;
        actix_rt::time::sleep(watch::EVERY).await;
    }
}

/// The tasks of `filter` up to `limit` (all without), and how many there are in all.
async fn list(
    conn: &Connection,
    filter: &Call,
    limit: Option<u64>,
) -> Result<(Vec<Value>, u64), ClientError> {
    let mut tasks: Vec<Value> = Vec::new();
    loop {
        let wanted = limit.map_or(PAGE, |limit| (limit - tasks.len() as u64).min(PAGE));
        let call = filter
            .clone()
            .with("limit", Some(wanted.to_string()))
            .with("offset", Some(tasks.len().to_string()));
        let page = request(conn, &call).await?.body;
        let items = output::items(&page);
        let total = page["total"].as_u64().unwrap_or(0);
        let short = (items.len() as u64) < wanted;
        tasks.extend_from_slice(items);
        let done = short || limit.is_some_and(|limit| tasks.len() as u64 >= limit);
        if done || tasks.len() as u64 >= total {
            let total = total.max(tasks.len() as u64);
            return Ok((tasks, total));
        }
    }
}

/// A task as a line of the list: its status cell says whether it fires (its own status, and
/// `PAUSED (scene)` while its scene is paused, which stops it whatever its own), and the
/// `handler` cell of a wide line is its URL, or its executor group and path.
fn row(task: &Value) -> Value {
    let mut row = task.clone();
    row["status"] = json!(status_cell(task));
    let executor = &task["executor"];
    row["handler"] = match executor["group"].as_str() {
        Some(group) => json!(format!(
            "{group}:{}",
            executor["path"].as_str().unwrap_or("")
        )),
        None => task["handlerUrl"].clone(),
    };
    row
}

/// `ENABLED` or `PAUSED`, the task's own status, unless its scene is paused: `PAUSED (scene)`,
/// or `PAUSED (task, scene)` when both are (resuming one leaves it paused by the other).
fn status_cell(task: &Value) -> String {
    let own = output::text(&task["status"]);
    match (task["scenePaused"] == true, own.as_str()) {
        (false, _) => own,
        (true, "PAUSED") => "PAUSED (task, scene)".into(),
        (true, _) => "PAUSED (scene)".into(),
    }
}

/// Pauses or resumes a task: one line.
async fn change(
    conn: &Connection,
    task: &TaskRef,
    verb: &str,
    done: &str,
) -> Result<(), ClientError> {
    let id = task.id(conn).await?;
    let call = Call::new("POST", format!("/api/tasks/{id}/{verb}"));
    let reply = request(conn, &call).await?.body;
    output::one_line(conn.format, &reply, || {
        format!("{done} task {} (id {id})", scene_name(&reply))
    })
}

/// Fires a run now: one line with its request id.
async fn trigger(
    conn: &Connection,
    task: &TaskRef,
    params: Option<Value>,
) -> Result<(), ClientError> {
    let id = task.id(conn).await?;
    let body = params.map_or_else(|| json!({}), |params| json!({ "params": params }));
    let call = Call::new("POST", format!("/api/tasks/{id}/trigger")).body(body);
    let run = request(conn, &call).await?.body;
    output::one_line(conn.format, &run, || {
        format!(
            "triggered task {task} (id {id}): run {}",
            output::text(&run["requestId"])
        )
    })
}

/// Deletes a task once confirmed: asked on a terminal, `--yes` without one.
async fn delete(conn: &Connection, task: &TaskRef, yes: bool) -> Result<(), ClientError> {
    let terminal = std::io::stdin().is_terminal();
    if !yes && !terminal {
        return Err(ClientError::usage(format!(
            "tasks delete {task}: no terminal to ask for a confirmation; pass --yes to delete \
             without asking"
        )));
    }
    let found = task.find(conn).await?;
    let id = found["id"].as_i64().unwrap_or(0);
    let named = scene_name(&found);
    if !yes && !confirm(&format!("Delete task {named} (id {id})? [y/N] "))? {
        println!("not deleted");
        return Ok(());
    }
    // Only the version that was confirmed: a task changed meanwhile is not deleted.
    let call = Call::new("DELETE", format!("/api/tasks/{id}"))
        .if_match(format!("\"{}\"", found["version"]));
    request(conn, &call).await?;
    output::one_line(conn.format, &json!({"id": id, "deleted": true}), || {
        format!("deleted task {named} (id {id})")
    })
}

/// Asks on the terminal; yes only for `y` or `yes`.
fn confirm(question: &str) -> Result<bool, ClientError> {
    let failed = |err: std::io::Error| ClientError::Failed(format!("cannot ask: {err}"));
    let mut out = std::io::stderr();
    out.write_all(question.as_bytes()).map_err(failed)?;
    out.flush().map_err(failed)?;
    let mut answer = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut answer)
        .map_err(failed)?;
    Ok(matches!(
        answer.trim().to_ascii_lowercase().as_str(),
        "y" | "yes"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_listing_is_an_aligned_table_and_wide_says_where_runs_go() {
        let items = [
            json!({"id": 1, "name": "nightly-report", "scene": "default", "status": "ENABLED",
             "cron": "0 0 2 * * *", "timeZone": "Europe/Berlin",
             "nextRunAt": "2027-01-01T01:00:00.000Z", "handlerUrl": "http://x/run",
             "overlap": "ALLOW", "version": 2, "labels": {}}),
            json!({"id": 12, "name": "x", "scene": "b", "status": "PAUSED", "cron": "* * * * * *",
             "timeZone": "UTC", "nextRunAt": null, "handlerUrl": null,
             "executor": {"group": "billing", "path": "/jobs/x"}}),
        ];
        assert_eq!(
            output::table(TASK_COLUMNS, &items),
            "ID  NAME            SCENE    STATUS   CRON         ZONE           NEXT RUN\n\
             1   nightly-report  default  ENABLED  0 0 2 * * *  Europe/Berlin  2027-01-01T01:00:00.000Z\n\
             12  x               b        PAUSED   * * * * * *  UTC            -\n"
        );
        let rows: Vec<Value> = items.iter().map(row).collect();
        let wide = output::table(
            &output::columns(TASK_COLUMNS, WIDE_TASK_COLUMNS, true),
            &rows,
        );
        assert!(wide.contains("http://x/run"), "{wide}");
        assert!(wide.contains("billing:/jobs/x"), "{wide}");
    }

    #[test]
    fn a_task_in_a_paused_scene_is_listed_as_paused() {
        let task = |status: &str, scene_paused: bool| {
            json!({"id": 1, "name": "n", "scene": "s", "status": status,
             "scenePaused": scene_paused, "cron": "* * * * * *", "timeZone": "UTC",
             "nextRunAt": null, "handlerUrl": "http://x/run"})
        };
        let status = |task: Value| row(&task)["status"].clone();
        assert_eq!(status(task("ENABLED", false)), "ENABLED");
        assert_eq!(status(task("PAUSED", false)), "PAUSED");
        assert_eq!(status(task("ENABLED", true)), "PAUSED (scene)");
        assert_eq!(status(task("PAUSED", true)), "PAUSED (task, scene)");
        let table = output::table(TASK_COLUMNS, &[row(&task("ENABLED", true))]);
        assert!(table.contains("  PAUSED (scene)  "), "{table}");
    }
}
