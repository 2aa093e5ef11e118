//! `ax plan`: the schedule ahead, its busiest seconds a line each.

use std::process::ExitCode;

use serde_json::Value;

use crate::api::http::{request, Call};
use crate::api::output::{self, text};
use crate::Connection;

/// Runs `ax plan`.
pub fn plan(conn: Connection, hours: i64) -> ExitCode {
    crate::finish(async move {
        let call =
            Call::new("GET", "/api/schedule/load".into()).with("hours", Some(hours.to_string()));
        let body = request(&conn, &call).await?.body;
        output::print(conn.format, &body, |body, _| plan_lines(body))
    })
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
            ax_core::task::schedule_load::thousands(busy["runs"].as_u64().unwrap_or(0))
        ));
    }
    if let Some(suggestion) = body["suggestion"].as_str() {
        out.push_str(&format!("suggestion: {suggestion}\n"));
    }
    out
}
