//! `ax executors list|get`.

use ax_core::ids::GroupName;
use std::process::ExitCode;

use clap::Subcommand;
use serde_json::{json, Value};

use crate::api::error::ClientError;
use crate::api::http::{request, Call};
use crate::api::output::{self, Column, Format};
use crate::Connection;
use ax_server::api::validate::executor::group_name;

#[derive(Debug, Clone, Subcommand)]
pub enum ExecutorsCommand {
    /// Every executor group: a line each, or with --wide (-o wide) a line for each member with
    /// its health here.
    List {
        /// A line per member: its state, requests in flight, failures, last heartbeat.
        #[arg(long)]
        wide: bool,
    },
    /// One group and its members.
    Get {
        #[arg(value_parser = group)]
        group: GroupName,
    },
}

/// A group's name, checked as the API checks it.
fn group(text: &str) -> Result<GroupName, String> {
    group_name(text.to_string(), "GROUP").map_err(|err| err.to_string())
}

const GROUP_COLUMNS: &[Column] = &[
    ("GROUP", "name"),
    ("ROUTING", "routing"),
    ("MAX IN FLIGHT", "maxInFlight"),
    ("MEMBERS", "members"),
    ("UPDATED", "updatedAt"),
];

/// A member's line (in a wide list, after its group's name).
const MEMBER_COLUMNS: &[Column] = &[
    ("URL", "url"),
    ("STATE", "state"),
    ("IN FLIGHT", "inFlight"),
    ("CAPACITY", "capacity"),
    ("FAILURES", "failures"),
    ("LAST SEEN", "lastSeenAt"),
    ("LAST ERROR", "lastError"),
];

/// Runs `ax executors list|get`.
pub fn executors(conn: Connection, command: ExecutorsCommand) -> ExitCode {
    crate::finish(run(conn, command))
}

async fn run(conn: Connection, command: ExecutorsCommand) -> Result<(), ClientError> {
    match command {
        ExecutorsCommand::List { wide } => {
            let body = request(&conn, &Call::new("GET", "/api/executors".into()))
                .await?
                .body;
            let format = match (wide, conn.format) {
                (true, Format::Table) => Format::Wide,
                (_, format) => format,
            };
            output::print(format, &body, |body, wide| match wide {
                true => members_table(body),
                false => groups_table(body),
            })
        }
        ExecutorsCommand::Get { group } => {
            let call = Call::new("GET", format!("/api/executors/{group}"));
            let body = request(&conn, &call).await?.body;
            output::print(conn.format, &body, |body, _| group_text(body))
        }
    }
}

/// A line per group, its members counted.
fn groups_table(body: &Value) -> String {
    let rows: Vec<Value> = output::items(body)
        .iter()
        .map(|group| {
            let mut row = group.clone();
            row["members"] = json!(members(group).count());
            row
        })
        .collect();
    output::table(GROUP_COLUMNS, &rows)
}

/// A line per member, after its group's name; a group without members still has its line.
fn members_table(body: &Value) -> String {
    let columns = [&[("GROUP", "group")], MEMBER_COLUMNS].concat();
    let rows: Vec<Value> = output::items(body)
        .iter()
        .flat_map(|group| {
            let name = &group["name"];
            let mut rows: Vec<Value> = members(group).cloned().collect();
            if rows.is_empty() {
                rows.push(json!({}));
            }
            rows.into_iter().map(move |mut row| {
                row["group"] = name.clone();
                row
            })
        })
        .collect();
    output::table(&columns, &rows)
}

/// One group: its fields, then its members' table.
fn group_text(body: &Value) -> String {
    let mut group = body.clone();
    let listed = group.as_object_mut().and_then(|g| g.remove("members"));
    let listed = listed
        .and_then(|members| members.as_array().cloned())
        .unwrap_or_default();
    format!(
        "{}\n{}",
        output::fields(&group),
        output::table(MEMBER_COLUMNS, &listed)
    )
}

/// The members of a group.
fn members(group: &Value) -> impl Iterator<Item = &Value> {
    group["members"].as_array().into_iter().flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

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
            groups_table(&body),
            "GROUP    ROUTING      MAX IN FLIGHT  MEMBERS  UPDATED\n\
             billing  ROUND_ROBIN  64             1        2027-01-01T00:00:00.000Z\n\
             empty    FIRST        8              0        2027-01-02T00:00:00.000Z\n"
        );
        assert_eq!(
            members_table(&body),
            "GROUP    URL                    STATE    IN FLIGHT  CAPACITY  FAILURES  LAST SEEN  LAST ERROR\n\
             billing  http://10.0.0.7:9000/  HEALTHY  2          -         1         -          HTTP 500\n\
             empty    -                      -        -          -         -         -          -\n"
        );
        let one = group_text(&body["items"][0]);
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
}
