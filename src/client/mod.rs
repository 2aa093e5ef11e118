//! `ax tasks …`, `ax runs …` and `ax executors list|get`: a thin client of the HTTP API. Each command is one request (`runs logs --follow` one a second);
//! the reply is printed as a table (or as it came, with `--json`); an API error exits 1 with
//! its message.

use std::collections::HashMap;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Subcommand};
use serde_json::{json, Value};

use crate::api::validate::executor::group_name;
use crate::labels;
use crate::run::{RequestId, RunStatus};
use crate::EXIT_USAGE;

/// Where the API is, and how to print its replies.
#[derive(Debug, Clone, Args)]
pub struct Connection {
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
    /// Print the API's JSON reply instead of a table.
    #[arg(long, global = true)]
    pub json: bool,
}

#[derive(Debug, Clone, Subcommand)]
pub enum TasksCommand {
    /// List tasks (by id).
    List {
        /// Only this scene's tasks.
        #[arg(long)]
        scene: Option<String>,
        /// ENABLED or PAUSED.
        #[arg(long)]
        status: Option<String>,
        /// Only tasks with this label: KEY=VALUE (team=billing).
        #[arg(long)]
        label: Option<String>,
    },
    /// One task.
    Get { id: i64 },
    /// Pause a task: it fires no more until resumed.
    Pause { id: i64 },
    /// Resume a task from now.
    Resume { id: i64 },
    /// Fire one run of a task now, outside its schedule.
    Trigger { id: i64 },
    /// Give every fire time in [FROM, TO) a run with its scheduled request id (RFC3339 times).
    Backfill {
        id: i64,
        #[arg(long)]
        from: String,
        #[arg(long)]
        to: String,
    },
}

#[derive(Debug, Clone, Subcommand)]
pub enum RunsCommand {
    /// The run history, newest scheduled first.
    List {
        /// Only this task's runs.
        #[arg(long)]
        task: Option<i64>,
        /// PENDING, READY, RUNNING, SUCCESS, FAILED, MISSED, SKIPPED or CANCELLED.
        #[arg(long)]
        status: Option<String>,
        /// How many (1-500).
        #[arg(long, default_value_t = 50)]
        limit: u32,
    },
    /// One run, by its request id.
    Get { request_id: String },
    /// Cancel an open run: no further attempt, later results change nothing.
    Cancel { request_id: String },
    /// The log lines and progress its executor sent, by attempt.
    Logs {
        request_id: String,
        /// Keep printing new lines until the run ends.
        #[arg(long, short = 'f')]
        follow: bool,
    },
}

#[derive(Debug, Clone, Subcommand)]
pub enum ExecutorsCommand {
    /// Every executor group: a line each, or with --wide a line for each member with its
    /// health here.
    List {
        /// A line per member: its state, requests in flight, failures, last heartbeat.
        #[arg(long)]
        wide: bool,
    },
    /// One group and its members.
    Get { group: String },
}

#[derive(Debug, Clone, Subcommand)]
pub enum AlertsCommand {
    /// The alerts, newest first, one line per alert and channel.
    List {
        /// Only this task's alerts.
        #[arg(long)]
        task: Option<i64>,
        /// Only the alerts of this scene's tasks.
        #[arg(long)]
        scene: Option<String>,
        /// pending, sent, folded or failed.
        #[arg(long)]
        status: Option<String>,
        /// How many (1-500).
        #[arg(long, default_value_t = 50)]
        limit: u32,
    },
    /// Send a test alert to a configured channel now.
    Test {
        /// The channel's name (alerts.channels).
        channel: String,
    },
}

/// A request of a command: method, path, query and body.
pub struct Call {
    method: &'static str,
    path: String,
    query: Vec<(&'static str, String)>,
    body: Option<Value>,
}

impl Call {
    pub fn new(method: &'static str, path: String) -> Call {
        Call {
            method,
            path,
            query: Vec::new(),
            body: None,
        }
    }

    pub fn with(mut self, name: &'static str, value: Option<String>) -> Call {
        if let Some(value) = value {
            self.query.push((name, value));
        }
        self
    }

    pub fn body(mut self, body: Value) -> Call {
        self.body = Some(body);
        self
    }
}

/// Runs `ax plan`.
pub fn plan(conn: Connection, hours: i64) -> ExitCode {
    let call = Call::new("GET", "/api/schedule/load".into()).with("hours", Some(hours.to_string()));
    run(&conn, call, Shape::Plan)
}

/// The busiest seconds of `GET /api/schedule/load`, a line each, then the suggestion.
fn plan_lines(body: &Value) -> String {
    let tasks = body["tasks"].as_u64().unwrap_or(0);
    let mut out = format!(
        "{} runs of {tasks} tasks from {} to {}\n",
        body["totalRuns"],
        text(&body["from"]),
        text(&body["to"])
    );
    for busy in body["busiest"].as_array().into_iter().flatten() {
        let at = text(&busy["at"]);
        let firing = busy["tasks"].as_array().map_or(0, Vec::len) as u64;
        let share = (firing * 100).checked_div(tasks).unwrap_or(0);
        out.push_str(&format!(
            "{at}  {} runs  {share} % of tasks\n",
            crate::schedule_load::thousands(busy["runs"].as_u64().unwrap_or(0))
        ));
    }
    if let Some(suggestion) = body["suggestion"].as_str() {
        out.push_str(&format!("suggestion: {suggestion}\n"));
    }
    out
}

/// Runs `ax tasks …`.
pub fn tasks(conn: Connection, command: TasksCommand) -> ExitCode {
    let (call, shape) = match command {
        TasksCommand::List {
            scene,
            status,
            label,
        } => {
            // Checked before any request, as the API checks it: a usage error.
            if let Some(Err(message)) = label.as_deref().map(labels::filter) {
                eprintln!("ax: invalid --label: {message}");
                return ExitCode::from(EXIT_USAGE);
            }
            (
                Call::new("GET", "/api/tasks".into())
                    .with("scene", scene)
                    .with("status", status)
                    .with("label", label)
                    .with("limit", Some("500".into())),
                Shape::Tasks,
            )
        }
        TasksCommand::Get { id } => (Call::new("GET", format!("/api/tasks/{id}")), Shape::One),
        TasksCommand::Pause { id } => (
            Call::new("POST", format!("/api/tasks/{id}/pause")),
            Shape::One,
        ),
        TasksCommand::Resume { id } => (
            Call::new("POST", format!("/api/tasks/{id}/resume")),
            Shape::One,
        ),
        TasksCommand::Trigger { id } => (
            Call::new("POST", format!("/api/tasks/{id}/trigger")),
            Shape::One,
        ),
        TasksCommand::Backfill { id, from, to } => (
            Call::new("POST", format!("/api/tasks/{id}/backfill"))
                .body(serde_json::json!({"from": from, "to": to})),
            Shape::One,
        ),
    };
    run(&conn, call, shape)
}

/// Runs `ax runs …`.
pub fn runs(conn: Connection, command: RunsCommand) -> ExitCode {
    let (call, shape) = match command {
        RunsCommand::List {
            task,
            status,
            limit,
        } => (
            Call::new("GET", "/api/instances".into())
                .with("taskId", task.map(|t| t.to_string()))
                .with("status", status)
                .with("limit", Some(limit.to_string())),
            Shape::Runs,
        ),
        RunsCommand::Get { request_id } => (
            Call::new("GET", format!("/api/instances/{request_id}")),
            Shape::One,
        ),
        RunsCommand::Cancel { request_id } => (
            Call::new("POST", format!("/api/instances/{request_id}/cancel")),
            Shape::One,
        ),
        RunsCommand::Logs { request_id, follow } => return logs(conn, request_id, follow),
    };
    run(&conn, call, shape)
}

/// Runs `ax executors list|get`.
pub fn executors(conn: Connection, command: ExecutorsCommand) -> ExitCode {
    let (call, shape) = match command {
        ExecutorsCommand::List { wide } => (
            Call::new("GET", "/api/executors".into()),
            if wide { Shape::Members } else { Shape::Groups },
        ),
        ExecutorsCommand::Get { group } => {
            // Checked before any request, as the API checks it: a usage error.
            let group = match group_name(group, "GROUP") {
                Ok(group) => group,
                Err(err) => {
                    eprintln!("ax: invalid {err}");
                    return ExitCode::from(EXIT_USAGE);
                }
            };
            (
                Call::new("GET", format!("/api/executors/{group}")),
                Shape::Group,
            )
        }
    };
    run(&conn, call, shape)
}

/// Runs `ax alerts list|test`.
pub fn alerts(conn: Connection, command: AlertsCommand) -> ExitCode {
    let (call, shape) = match command {
        AlertsCommand::List {
            task,
            scene,
            status,
            limit,
        } => (
            Call::new("GET", "/api/alerts".into())
                .with("task", task.map(|t| t.to_string()))
                .with("scene", scene)
                .with("status", status)
                .with("limit", Some(limit.to_string())),
            Shape::Alerts,
        ),
        AlertsCommand::Test { channel } => (
            Call::new("POST", "/api/alerts/test".into()).body(json!({ "channel": channel })),
            Shape::One,
        ),
    };
    run(&conn, call, shape)
}

/// How a reply is printed as text.
#[derive(Clone, Copy)]
enum Shape {
    /// The schedule ahead: its busiest seconds, a line each.
    Plan,
    Tasks,
    Runs,
    Alerts,
    /// Executor groups, a line each.
    Groups,
    /// Executor groups, a line per member.
    Members,
    /// One group: its fields, then its members.
    Group,
    /// One object: a field a line.
    One,
}

const TASK_COLUMNS: &[(&str, &str)] = &[
    ("ID", "id"),
    ("NAME", "name"),
    ("SCENE", "scene"),
    ("STATUS", "status"),
    ("CRON", "cron"),
    ("ZONE", "timeZone"),
    ("NEXT RUN", "nextRunAt"),
];

const RUN_COLUMNS: &[(&str, &str)] = &[
    ("REQUEST ID", "requestId"),
    ("TASK", "taskId"),
    ("STATUS", "status"),
    ("ATTEMPT", "attempt"),
    ("SCHEDULED", "scheduledAt"),
    ("DISPATCHED", "dispatchedAt"),
    ("CODE", "code"),
];

const ALERT_COLUMNS: &[(&str, &str)] = &[
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

const GROUP_COLUMNS: &[(&str, &str)] = &[
    ("GROUP", "name"),
    ("ROUTING", "routing"),
    ("MAX IN FLIGHT", "maxInFlight"),
    ("MEMBERS", "members"),
    ("UPDATED", "updatedAt"),
];

/// A member's line (with `--wide`, after its group's name).
const MEMBER_COLUMNS: &[(&str, &str)] = &[
    ("URL", "url"),
    ("STATE", "state"),
    ("IN FLIGHT", "inFlight"),
    ("CAPACITY", "capacity"),
    ("FAILURES", "failures"),
    ("LAST SEEN", "lastSeenAt"),
    ("LAST ERROR", "lastError"),
];

fn run(conn: &Connection, call: Call, shape: Shape) -> ExitCode {
    let reply = actix_rt::System::new().block_on(send(conn, &call));
    match reply {
        Ok(body) if conn.json => {
            println!("{body:#}");
            ExitCode::SUCCESS
        }
        Ok(body) => {
            print!("{}", render(shape, &body));
            ExitCode::SUCCESS
        }
        Err(message) => {
            eprintln!("ax: {message}");
            ExitCode::FAILURE
        }
    }
}

/// Sends the call; the JSON reply of a 2xx, else the API's error message.
pub async fn send(conn: &Connection, call: &Call) -> Result<Value, String> {
    let client = awc::Client::builder()
        .timeout(Duration::from_secs(30))
        .finish();
    let url = format!("{}{}", conn.url.trim_end_matches('/'), call.path);
    let method =
        awc::http::Method::from_bytes(call.method.as_bytes()).map_err(|e| e.to_string())?;
    let mut request = client
        .request(method, &url)
        .query(&call.query)
        .map_err(|err| format!("bad query: {err}"))?;
    if let Some(token) = &conn.token {
        request = request.bearer_auth(token);
    }
    let sent = match (&call.body, call.method) {
        (Some(body), _) => request.send_json(body).await,
        (None, "POST") => request.send_json(&serde_json::json!({})).await,
        (None, _) => request.send().await,
    };
    let mut response = sent.map_err(|err| format!("cannot reach ax at {}: {err}", conn.url))?;
    let bytes = response
        .body()
        .limit(64 << 20)
        .await
        .map_err(|err| format!("reading the reply of {url}: {err}"))?;
    let body: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    if response.status().is_success() {
        return Ok(body);
    }
    let error = &body["error"];
    Err(match (error["code"].as_str(), error["message"].as_str()) {
        (Some(code), Some(message)) => match error["field"].as_str() {
            Some(field) => format!("{code} ({field}): {message}"),
            None => format!("{code}: {message}"),
        },
        _ => format!("HTTP {} from {url}", response.status()),
    })
}

/// The reply as text: a table of a listing, a field a line of one object.
fn render(shape: Shape, body: &Value) -> String {
    match shape {
        Shape::Plan => plan_lines(body),
        Shape::Tasks => table(TASK_COLUMNS, body["items"].as_array()),
        Shape::Runs => table(RUN_COLUMNS, body["items"].as_array()),
        Shape::Alerts => table(ALERT_COLUMNS, body["items"].as_array()),
        Shape::Groups => {
            let rows = groups(body).map(|group| {
                let mut row = group.clone();
                row["members"] = json!(members(group).count());
                row
            });
            table(GROUP_COLUMNS, Some(&rows.collect()))
        }
        Shape::Members => {
            let columns = [&[("GROUP", "group")], MEMBER_COLUMNS].concat();
            let rows = groups(body).flat_map(|group| {
                let name = &group["name"];
                let mut rows: Vec<Value> = members(group).cloned().collect();
                // A group without members still has its line.
                if rows.is_empty() {
                    rows.push(json!({}));
                }
                rows.into_iter().map(move |mut row| {
                    row["group"] = name.clone();
                    row
                })
            });
            table(&columns, Some(&rows.collect()))
        }
        Shape::Group => {
            let mut group = body.clone();
            let listed = group.as_object_mut().and_then(|g| g.remove("members"));
            let listed = listed.and_then(|members| members.as_array().cloned());
            format!(
                "{}\n{}",
                fields(&group),
                table(MEMBER_COLUMNS, listed.as_ref())
            )
        }
        Shape::One => fields(body),
    }
}

/// The groups of a listing.
fn groups(body: &Value) -> impl Iterator<Item = &Value> {
    body["items"].as_array().into_iter().flatten()
}

/// The members of a group.
fn members(group: &Value) -> impl Iterator<Item = &Value> {
    group["members"].as_array().into_iter().flatten()
}

fn text(value: &Value) -> String {
    match value {
        Value::Null => "-".into(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Aligned columns with a header line.
fn table(columns: &[(&str, &str)], items: Option<&Vec<Value>>) -> String {
    let items = items.map(Vec::as_slice).unwrap_or_default();
    let rows: Vec<Vec<String>> = items
        .iter()
        .map(|item| columns.iter().map(|(_, key)| text(&item[*key])).collect())
        .collect();
    let widths: Vec<usize> = columns
        .iter()
        .enumerate()
        .map(|(n, (title, _))| {
            rows.iter()
                .map(|row| row[n].chars().count())
                .chain([title.len()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let line = |cells: Vec<String>| {
        let padded: Vec<String> = cells
            .iter()
            .zip(&widths)
            .map(|(cell, width)| format!("{cell:<width$}"))
            .collect();
        format!("{}\n", padded.join("  ").trim_end())
    };
    let mut out = line(columns.iter().map(|(title, _)| title.to_string()).collect());
    for row in rows {
        out.push_str(&line(row));
    }
    out
}

/// `key  value` lines of an object, by key.
fn fields(body: &Value) -> String {
    let Some(object) = body.as_object() else {
        return format!("{}\n", text(body));
    };
    let width = object.keys().map(String::len).max().unwrap_or(0);
    object
        .iter()
        .map(|(key, value)| format!("{key:<width$}  {}\n", text(value)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_listing_is_an_aligned_table() {
        let body = json!({"items": [
            {"id": 1, "name": "nightly-report", "scene": "default", "status": "ENABLED",
             "cron": "0 0 2 * * *", "timeZone": "Europe/Berlin",
             "nextRunAt": "2027-01-01T01:00:00.000Z"},
            {"id": 12, "name": "x", "scene": "b", "status": "PAUSED", "cron": "* * * * * *",
             "timeZone": "UTC", "nextRunAt": null}]});
        assert_eq!(
            render(Shape::Tasks, &body),
            "ID  NAME            SCENE    STATUS   CRON         ZONE           NEXT RUN\n\
             1   nightly-report  default  ENABLED  0 0 2 * * *  Europe/Berlin  2027-01-01T01:00:00.000Z\n\
             12  x               b        PAUSED   * * * * * *  UTC            -\n"
        );
        assert_eq!(
            render(Shape::Runs, &json!({"items": []})).lines().count(),
            1
        );
    }

    #[test]
    fn executor_groups_are_a_line_each_or_a_line_per_member() {
        let member = json!({"url": "http://10.0.0.7:9000/", "registered": false,
            "capacity": null, "state": "HEALTHY", "inFlight": 2, "successes": 5, "failures": 1,
            "lastSeenAt": null, "lastError": "HTTP 500"});
        let body = json!({"items": [
            {"name": "billing", "routing": "ROUND_ROBIN", "maxInFlight": 64,
             "updatedAt": "2027-01-01T00:00:00.000Z", "members": [member]},
            {"name": "empty", "routing": "FIRST", "maxInFlight": 8,
             "updatedAt": "2027-01-02T00:00:00.000Z", "members": []}]});
        assert_eq!(
            render(Shape::Groups, &body),
            "GROUP    ROUTING      MAX IN FLIGHT  MEMBERS  UPDATED\n\
             billing  ROUND_ROBIN  64             1        2027-01-01T00:00:00.000Z\n\
             empty    FIRST        8              0        2027-01-02T00:00:00.000Z\n"
        );
        assert_eq!(
            render(Shape::Members, &body),
            "GROUP    URL                    STATE    IN FLIGHT  CAPACITY  FAILURES  LAST SEEN  LAST ERROR\n\
             billing  http://10.0.0.7:9000/  HEALTHY  2          -         1         -          HTTP 500\n\
             empty    -                      -        -          -         -         -          -\n"
        );
        let one = render(Shape::Group, &body["items"][0]);
        assert!(
            one.starts_with("maxInFlight  64\nname         billing\n"),
            "{one}"
        );
        assert!(
            one.ends_with("\nURL                    STATE    IN FLIGHT  CAPACITY  FAILURES  LAST SEEN  LAST ERROR\n\
                 http://10.0.0.7:9000/  HEALTHY  2          -         1         -          HTTP 500\n"),
            "{one}"
        );
    }

    #[test]
    fn one_object_is_a_field_a_line() {
        let body = json!({"id": 3, "status": "PAUSED", "nextRunAt": null});
        assert_eq!(
            render(Shape::One, &body),
            "id         3\nnextRunAt  -\nstatus     PAUSED\n"
        );
    }
}

// `ax runs logs REQUEST_ID [--follow]`: a run's log lines, by attempt; with `--follow`, the
// new ones as they come, until the run ends.

/// How often `--follow` asks for new lines.
const FOLLOW_EVERY: Duration = Duration::from_secs(1);

/// Prints the run's log; with `follow`, keeps printing until the run is final and its last
/// lines are out.
pub fn logs(conn: Connection, request_id: String, follow: bool) -> ExitCode {
    // Checked before any request: a usage error.
    if RequestId::parse(&request_id).is_none() {
        eprintln!("ax: REQUEST_ID: expected a UUID like 0b6f1c52-8a47-4cf5-9d3e-2f7c1a9e4b10");
        return ExitCode::from(crate::EXIT_USAGE);
    }
    let printed = actix_rt::System::new().block_on(print_log(&conn, &request_id, follow));
    match printed {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("ax: {message}");
            ExitCode::FAILURE
        }
    }
}

async fn print_log(conn: &Connection, request_id: &str, follow: bool) -> Result<(), String> {
    let log = Call::new("GET", format!("/api/instances/{request_id}/log"));
    let run = Call::new("GET", format!("/api/instances/{request_id}"));
    let mut seen = Seen::default();
    loop {
        // The run's state first: lines sent before it ended are in the log read after.
        let ended = !follow || is_final(&send(conn, &run).await?);
        let body = send(conn, &log).await?;
        if conn.json && !follow {
            println!("{body:#}");
            return Ok(());
        }
        for line in seen.new_lines(&body, conn.json) {
            println!("{line}");
        }
        if ended {
            return Ok(());
        }
        actix_rt::time::sleep(FOLLOW_EVERY).await;
    }
}

fn is_final(run: &Value) -> bool {
    run["status"]
        .as_str()
        .and_then(RunStatus::parse)
        .is_some_and(RunStatus::is_final)
}

/// What was printed of each attempt: how many of its lines ever sent (dropped ones included),
/// and its progress.
#[derive(Debug, Default)]
struct Seen {
    attempts: HashMap<i64, (i64, Option<i64>)>,
}

impl Seen {
    /// The lines of `log` not printed yet, as text (`AT  TEXT`, an attempt's header before its
    /// first) or as JSON lines.
    fn new_lines(&mut self, log: &Value, json: bool) -> Vec<String> {
        let mut out = Vec::new();
        for attempt in log["attempts"].as_array().into_iter().flatten() {
            let number = attempt["attempt"].as_i64().unwrap_or(0);
            let progress = attempt["progress"].as_i64();
            let lines: Vec<&Value> = attempt["lines"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|line| line["marker"] != true)
                .collect();
            let dropped = attempt["droppedLines"].as_i64().unwrap_or(0);
            let total = dropped + lines.len() as i64;
            let first = !self.attempts.contains_key(&number);
            let (printed, shown_progress) = self.attempts.entry(number).or_insert((0, None));
            if first && !json {
                out.push(format!("--- attempt {number}"));
                if dropped > *printed {
                    out.push(format!("[ax] {dropped} earlier lines dropped"));
                }
            }
            let skip = usize::try_from((*printed - dropped).max(0)).unwrap_or(0);
            for line in lines.iter().skip(skip) {
                let (at, text) = (line["at"].as_str().unwrap_or(""), line["text"].as_str());
                out.push(match json {
                    true => {
                        serde_json::json!({"attempt": number, "at": at, "text": text}).to_string()
                    }
                    false => format!("{at}  {}", text.unwrap_or("")),
                });
            }
            *printed = total.max(*printed);
            if progress != *shown_progress && !json {
                if let Some(p) = progress {
                    out.push(format!("--- attempt {number}: {p} %"));
                }
            }
            *shown_progress = progress;
        }
        out
    }
}

#[cfg(test)]
mod logs_tests {
    use super::*;
    use serde_json::json;

    fn log(dropped: i64, texts: &[&str], progress: i64) -> Value {
        let lines: Vec<Value> = texts
            .iter()
            .map(|t| json!({"at": "2027-01-01T00:00:00.000Z", "text": t}))
            .collect();
        json!({"attempts": [{"attempt": 1, "progress": progress, "droppedLines": dropped, "lines": lines}]})
    }

    #[test]
    fn each_line_is_printed_once_though_old_ones_are_dropped() {
        let mut seen = Seen::default();
        let first = seen.new_lines(&log(0, &["a", "b"], 10), false);
        assert_eq!(
            first,
            [
                "--- attempt 1",
                "2027-01-01T00:00:00.000Z  a",
                "2027-01-01T00:00:00.000Z  b",
                "--- attempt 1: 10 %"
            ]
        );
        assert!(seen.new_lines(&log(0, &["a", "b"], 10), false).is_empty());
        // Two more came and the two oldest went: only the new ones are printed.
        let next = seen.new_lines(&log(2, &["c", "d"], 60), false);
        assert_eq!(
            next,
            [
                "2027-01-01T00:00:00.000Z  c",
                "2027-01-01T00:00:00.000Z  d",
                "--- attempt 1: 60 %"
            ]
        );
        let json = Seen::default().new_lines(&log(0, &["x"], 0), true);
        assert_eq!(
            json,
            [r#"{"at":"2027-01-01T00:00:00.000Z","attempt":1,"text":"x"}"#]
        );
    }
}
