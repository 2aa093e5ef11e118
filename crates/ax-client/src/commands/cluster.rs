//! `ax cluster`: the live ax processes (`GET /api/cluster`).

use std::process::ExitCode;

use serde_json::{json, Value};

use crate::api::http::{request, Call};
use crate::api::output::{self, Column};
use crate::Connection;

const INSTANCE_COLUMNS: &[Column] = &[
    ("INSTANCE", "instanceId"),
    ("ADDRESS", "addr"),
    ("STARTED", "startedAt"),
    ("LAST SEEN", "lastSeen"),
    ("", "answering"),
];

/// Runs `ax cluster`.
pub fn cluster(conn: Connection) -> ExitCode {
    crate::finish(async move {
        let body = request(&conn, &Call::new("GET", "/api/cluster".into()))
            .await?
            .body;
        output::print(conn.format, &body, |body, _| runs_table(body))
    })
}

/// A line per process; the one that answered is marked.
fn runs_table(body: &Value) -> String {
    let rows: Vec<Value> = body["instances"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|instance| {
            let mut row = instance.clone();
            let answering = instance["instanceId"] == body["self"];
            row["answering"] = json!(if answering { "(answered)" } else { "" });
            row
        })
        .collect();
    output::table(INSTANCE_COLUMNS, &rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_process_that_answered_is_marked() {
        let body = json!({"self": "b", "instances": [
            {"instanceId": "a", "addr": "10.0.0.1:8901", "startedAt": "s", "lastSeen": "l"},
            {"instanceId": "b", "addr": "10.0.0.2:8901", "startedAt": "s", "lastSeen": "l"}]});
        let text = runs_table(&body);
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[2].ends_with("(answered)"), "{text}");
        assert!(!lines[1].contains("answered"), "{text}");
    }
}
