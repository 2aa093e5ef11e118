//! `ax runs logs REQUEST_ID [--follow]`: a run's log lines, by attempt; with `--follow`, the
//! new ones as they come, until the run ends, then the run's final status line.

use std::collections::HashMap;
use std::time::Duration;

use serde_json::Value;

use crate::api::error::ClientError;
use crate::api::http::{request, Call};
use crate::Connection;
use ax_core::run::RunStatus;
use ax_core::text::OnTerminal;

/// How often `--follow` asks for new lines.
pub const FOLLOW_EVERY: Duration = Duration::from_secs(1);

/// Prints the run's log; with `follow`, keeps printing until the run is final and its last
/// lines are out, then how it ended (so the one who waited learns it without another command).
pub async fn print_log(
    conn: &Connection,
    request_id: &str,
    follow: bool,
) -> Result<(), ClientError> {
    let log = Call::new("GET", format!("/api/instances/{request_id}/log"));
    let run = Call::new("GET", format!("/api/instances/{request_id}"));
    let mut seen = Seen::default();
    loop {
        // The run's state first: lines sent before it ended are in the log read after.
        let ended = match follow {
            true => Some(request(conn, &run).await?.body).filter(is_final),
            false => None,
        };
        let body = request(conn, &log).await?.body;
        if conn.format.is_data() && !follow {
            return crate::api::output::print(conn.format, &body, |_, _| String::new());
        }
        for line in seen.new_lines(&body, conn.json) {
            println!("{line}");
        }
        match ended {
            Some(run) => {
                println!("{}", final_status(&run, conn.json));
                return Ok(());
            }
            None if !follow => return Ok(()),
            None => actix_rt::time::sleep(FOLLOW_EVERY).await,
        }
    }
}

/// The line `--follow` ends with: `--- run FAILED (attempt 3, code E_UPSTREAM): refused`, or
/// with `--json` `{"status": …, "attempt": …, "code": …, "message": …}`.
fn final_status(run: &Value, json: bool) -> String {
    let (status, attempt) = (run["status"].as_str().unwrap_or("?"), &run["attempt"]);
    let (code, message) = (run["code"].as_str(), run["message"].as_str());
    if json {
        return serde_json::json!({"status": status, "attempt": attempt, "code": code,
            "message": message})
        .to_string();
    }
    let mut line = format!("--- run {status} (attempt {attempt}");
    if let Some(code) = code {
        line.push_str(&format!(", code {code}"));
    }
    line.push(')');
    if let Some(message) = message.filter(|message| !message.is_empty()) {
        line.push_str(&format!(": {message}"));
    }
    line
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
                    // Executor text is data: what could move the terminal is shown escaped.
                    false => format!("{at}  {}", OnTerminal(text.unwrap_or(""))),
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

/// Whether a run (as the API shows it) has ended.
pub fn is_final(run: &Value) -> bool {
    run["status"]
        .as_str()
        .and_then(RunStatus::parse)
        .is_some_and(RunStatus::is_final)
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
    fn following_ends_with_how_the_run_ended() {
        let failed = json!({"status": "FAILED", "attempt": 3, "code": "E_UPSTREAM",
            "message": "connection refused"});
        assert_eq!(
            final_status(&failed, false),
            "--- run FAILED (attempt 3, code E_UPSTREAM): connection refused"
        );
        let succeeded = json!({"status": "SUCCESS", "attempt": 1, "code": null, "message": null});
        assert_eq!(
            final_status(&succeeded, false),
            "--- run SUCCESS (attempt 1)"
        );
        assert_eq!(
            final_status(&succeeded, true),
            r#"{"attempt":1,"code":null,"message":null,"status":"SUCCESS"}"#
        );
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
        let escaped = Seen::default().new_lines(&log(0, &["\u{1b}[2Jgone\tcol"], 0), false);
        assert_eq!(
            escaped[1], "2027-01-01T00:00:00.000Z  \\u{1b}[2Jgone\tcol",
            "stored before ax cleaned lines: escaped, tabs kept"
        );
        let json = Seen::default().new_lines(&log(0, &["x"], 0), true);
        assert_eq!(
            json,
            [r#"{"at":"2027-01-01T00:00:00.000Z","attempt":1,"text":"x"}"#]
        );
    }
}
