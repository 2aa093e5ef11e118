//! Logs a person can read, from a real `ax serve`: a failed attempt is a WARN with the
//! handler's code and message and what follows it (a retry, or final); a run recorded but not
//! dispatched says why; the missed-run warning says how many periods its one run stands for;
//! every run line names its task and request; every time is RFC 3339 UTC with milliseconds;
//! what an executor said is quoted escaped, one line.

use std::time::{Duration, Instant};

use serde_json::json;

use crate::common::{Api, AxProcess, Executor, Reply, TestStore};

fn log_of(ax: &AxProcess) -> String {
    std::fs::read_to_string(ax.log_path()).unwrap_or_default()
}

/// Waits until the log has a line containing every one of `parts`; returns it.
async fn line_with(ax: &AxProcess, parts: &[&str]) -> String {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let log = log_of(ax);
        if let Some(line) = log.lines().find(|l| parts.iter().all(|p| l.contains(p))) {
            return line.to_string();
        }
        assert!(
            Instant::now() < deadline,
            "no line with {parts:?} in:\n{log}"
        );
        actix_rt::time::sleep(Duration::from_millis(200)).await;
    }
}

/// `[2026-12-01T14:10:37.123Z LEVEL …`: the timestamp env_logger writes, in the one form.
fn stamped_in_rfc3339_millis(line: &str) -> bool {
    let Some(stamp) = line.strip_prefix('[').and_then(|l| l.split(' ').next()) else {
        return false;
    };
    stamp.len() == 24
        && stamp.ends_with('Z')
        && stamp.as_bytes()[19] == b'.'
        && chrono::DateTime::parse_from_rfc3339(stamp).is_ok()
}

#[actix_rt::test(system = "crate::common::TestSystem")]
async fn run_lines_say_what_happened_and_why() {
    let store = TestStore::sqlite();
    let dir = tempfile::tempdir().expect("dir");
    let env = [("AX_STORE_URL", store.url()), ("RUST_LOG", "info".into())]
        .map(|(key, value)| (key.to_string(), value))
        .to_vec();
    let failing = Executor::start(Reply::Failed).await;
    let fine = Executor::start(Reply::Success).await;
    let mut ax = AxProcess::start(dir.path(), "logs", env).await;
    let api = Api::at(ax.base());
    // Fails twice (a retry after 1 s, then final), from a whole-minute-away schedule: once,
    // by a manual run.
    let flaky = api
        .create_task(
            json!({"name": "flaky", "cron": "0 0 0 1 1 *", "handlerUrl": failing.url,
            "maxRetry": 1, "retryBackoffSecs": 1}),
        )
        .await;
    let (status, run) = api
        .post(&format!("/api/tasks/{}/trigger", flaky["id"]), json!({}))
        .await;
    assert_eq!(status, 201, "{run}");
    let (task, request) = (
        flaky["id"].to_string(),
        run["requestId"].as_str().expect("id"),
    );
    let first = line_with(
        &ax,
        &[
            "WARN",
            request,
            "attempt 1 failed (E1: boom); retry 1 of 1 at",
        ],
    )
    .await;
    assert!(
        first.contains(&format!("task {task} request {request}")),
        "{first}"
    );
    let last = line_with(
        &ax,
        &["WARN", request, "attempt 2 failed (E1: boom); final"],
    )
    .await;
    assert!(last.contains("the run FAILED"), "{last}");

    // Every second; stopped for a while, then started again: a task with a 1 s misfire
    // threshold records its run MISSED, the other fires once for the periods it missed.
    let every = |name: &str, threshold: Option<i64>| {
        json!({"name": name, "cron": "* * * * * *", "handlerUrl": fine.url,
            "misfireThresholdSecs": threshold})
    };
    let once = api.create_task(every("once", None)).await;
    let missed = api.create_task(every("missed", Some(1))).await;
    fine.wait_for(2, Duration::from_secs(5)).await;
    ax.stop().await;
    actix_rt::time::sleep(Duration::from_secs(6)).await;
    ax.restart().await;
    let missed_line = line_with(
        &ax,
        &[
            &format!("task {} request", missed["id"]),
            "recorded, not dispatched: MISSED",
        ],
    )
    .await;
    assert!(
        missed_line.contains("periods the task missed"),
        "{missed_line}"
    );
    let summary = line_with(&ax, &["WARN", "stalled tasks fire once", "stands for"]).await;
    let periods: u64 = summary
        .split("stands for ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no period count in {summary}"));
    assert!(periods >= 5, "six seconds down: {summary}");
    line_with(
        &ax,
        &[
            &format!("task {} request", once["id"]),
            "fired, one run for the",
        ],
    )
    .await;
    ax.stop().await;

    let log = log_of(&ax);
    let lines: Vec<&str> = log.lines().filter(|l| l.starts_with('[')).collect();
    assert!(lines.len() > 10, "{log}");
    for line in &lines {
        assert!(stamped_in_rfc3339_millis(line), "{line}");
        // A time inside a line is in the same form: no `2027-01-01 00:00:00` style.
        assert!(!has_spaced_time(line), "{line}");
    }
    for line in lines
        .iter()
        .filter(|l| l.contains(" request ") && l.contains("ax::"))
    {
        assert!(line.contains("task "), "a run line names its task: {line}");
    }
}

/// Whether `line` holds a time written `YYYY-MM-DD HH:MM:SS` (a space between date and time).
fn has_spaced_time(line: &str) -> bool {
    let bytes = line.as_bytes();
    bytes.windows(19).any(|w| {
        let digits = |range: std::ops::Range<usize>| w[range].iter().all(u8::is_ascii_digit);
        digits(0..4)
            && w[4] == b'-'
            && digits(5..7)
            && w[7] == b'-'
            && digits(8..10)
            && w[10] == b' '
            && digits(11..13)
            && w[13] == b':'
    })
}

/// What an executor says is quoted escaped: a message's newline cannot forge a log line, nor
/// its escape sequence reach the terminal; the run keeps the message's lines (not its ESC).
#[actix_rt::test(system = "crate::common::TestSystem")]
async fn executor_text_is_logged_escaped() {
    let store = TestStore::sqlite();
    let dir = tempfile::tempdir().expect("dir");
    let env = [("AX_STORE_URL", store.url()), ("RUST_LOG", "info".into())]
        .map(|(key, value)| (key.to_string(), value))
        .to_vec();
    let forged = "first\n[2027-01-01T00:00:00.000Z INFO  ax] forged\u{1b}[2K";
    let reply = json!({"status": "FAILED", "code": 7, "message": forged, "retry": false});
    let executor = Executor::start(Reply::Body(reply.to_string())).await;
    let mut ax = AxProcess::start(dir.path(), "escaped", env).await;
    let api = Api::at(ax.base());
    let task = api
        .create_task(json!({"name": "forger", "cron": "0 0 0 1 1 *", "handlerUrl": executor.url}))
        .await;
    let (status, run) = api
        .post(&format!("/api/tasks/{}/trigger", task["id"]), json!({}))
        .await;
    assert_eq!(status, 201, "{run}");
    let line = line_with(
        &ax,
        &[
            "WARN",
            "attempt 1 failed (7: first\\n[2027-01-01T00:00:00.000Z INFO  ax] forged[2K)",
        ],
    )
    .await;
    assert!(line.contains("final"), "{line}");
    let path = format!("/api/instances/{}", run["requestId"].as_str().expect("id"));
    let (_, stored) = api.get(&path).await;
    assert_eq!(stored["code"], "7", "{stored}");
    assert_eq!(
        stored["message"],
        "first\n[2027-01-01T00:00:00.000Z INFO  ax] forged[2K"
    );
    ax.stop().await;
    let log = log_of(&ax);
    assert!(!log.contains('\u{1b}'), "{log}");
    assert!(
        !log.lines()
            .any(|l| l.starts_with("[2027-01-01T00:00:00.000Z")),
        "a forged line: {log}"
    );
    executor.stop().await;
}
