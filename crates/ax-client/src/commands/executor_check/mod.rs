//! `ax executor check URL [--path P] [--secret S] [--slow-path P]`: plays ax against a running
//! executor and says, check by check, what conforms to the executor protocol
//! (`docs/protocol.md`). Exit 0 when everything does, 1 when something does not.

mod dispatch;
mod receiver;
mod verdict;

use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::Args;
use serde_json::{json, Value};

use self::dispatch::{Answered, Dispatcher, Signing, TestRun};
use self::receiver::Receiver;
use self::verdict::{read_callback, read_log, read_reply, Answer, Reported, Verdict};
use crate::api::error::ClientError;
use crate::Connection;

#[derive(Debug, Clone, Args)]
pub struct CheckArgs {
    /// The executor: a group member's base URL, or a handler's URL.
    #[arg(value_name = "URL")]
    pub executor_url: String,
    /// The handler's path, joined to URL (a task's `executor.path`).
    #[arg(long)]
    pub path: Option<String>,
    /// The signing secret the executor checks dispatches with (ax's `security.signing_secret`);
    /// without it, the signature checks are skipped.
    #[arg(long, env = "AX_SIGNING_SECRET", hide_env_values = true)]
    pub secret: Option<String>,
    /// A path whose handler answers `202` and reports by callback: checked for the callback
    /// and its log lines.
    #[arg(long)]
    pub slow_path: Option<String>,
    /// The params of the test dispatches, JSON: what the handler needs to run.
    #[arg(long, default_value = "{}")]
    pub params: String,
    /// How long to wait for an answer and for a callback, in seconds.
    #[arg(long, default_value_t = 30)]
    pub wait: u64,
    /// Where the check takes callbacks and log lines (its `callbackUrl` and `logUrl`).
    #[arg(long, default_value = "127.0.0.1:0")]
    pub listen: String,
    /// The address the executor reaches --listen on, when not the one bound (another machine).
    #[arg(long)]
    pub reply_to: Option<String>,
}

/// One check's outcome.
#[derive(Debug, serde::Serialize)]
struct Line {
    check: &'static str,
    result: Verdict,
    detail: String,
}

fn line(check: &'static str, result: Verdict, detail: impl Into<String>) -> Line {
    Line {
        check,
        result,
        detail: detail.into(),
    }
}

/// Runs `ax executor check`.
pub fn check_executor(conn: Connection, args: CheckArgs) -> ExitCode {
    crate::finish(run(conn, args))
}

/// What the checks need, read from the flags.
struct Setup {
    target: String,
    slow: Option<String>,
    params: Value,
    /// Whether dispatches carry the executor's own secret.
    secret_given: bool,
    wait: Duration,
}

async fn run(conn: Connection, args: CheckArgs) -> Result<(), ClientError> {
    let setup = setup(&args)?;
    let receiver = Receiver::start(&args.listen, args.reply_to.as_deref()).map_err(|err| {
        ClientError::usage(format!("--listen: cannot listen on {}: {err}", args.listen))
    })?;
    let secret = args
        .secret
        .clone()
        .unwrap_or_else(|| uuid::Uuid::new_v4().simple().to_string());
    let dispatcher = Dispatcher::new(secret, receiver.base.clone(), setup.wait);
    let lines = checks(&setup, &dispatcher, &receiver).await;
    receiver.stop().await;
    let failed: Vec<&str> = lines
        .iter()
        .filter(|line| line.result == Verdict::Fail)
        .map(|line| line.check)
        .collect();
    print(&conn, &setup.target, &lines, failed.is_empty());
    match failed.is_empty() {
        true => Ok(()),
        false => Err(ClientError::Failed(format!(
            "{} does not conform: {}",
            setup.target,
            failed.join(", ")
        ))),
    }
}

fn setup(args: &CheckArgs) -> Result<Setup, ClientError> {
    let base = url::Url::parse(&args.executor_url)
        .ok()
        .filter(|url| matches!(url.scheme(), "http" | "https") && url.has_host())
        .ok_or_else(|| {
            ClientError::usage(format!(
                "URL: expected the executor's http:// or https:// URL, not `{}`",
                args.executor_url
            ))
        })?;
    let join = |flag: &str, path: &Option<String>| match path {
        None => Ok(base.to_string()),
        Some(path) if path.starts_with('/') => {
            Ok(format!("{}{path}", base.as_str().trim_end_matches('/')))
        }
        Some(path) => Err(ClientError::usage(format!(
            "{flag}: expected a path starting with /, not `{path}`"
        ))),
    };
    let target = join("--path", &args.path)?;
    let slow = match &args.slow_path {
        None => None,
        slow => Some(join("--slow-path", slow)?),
    };
    let params = serde_json::from_str(&args.params)
        .map_err(|err| ClientError::usage(format!("--params: not JSON: {err}")))?;
    if let Some(reply_to) = &args.reply_to {
        if !(reply_to.starts_with("http://") || reply_to.starts_with("https://")) {
            return Err(ClientError::usage(format!(
                "--reply-to: expected an http:// or https:// URL, not `{reply_to}`"
            )));
        }
    }
    if !(1..=3600).contains(&args.wait) {
        return Err(ClientError::usage("--wait: expected 1-3600 seconds"));
    }
    Ok(Setup {
        target,
        slow,
        params,
        secret_given: args.secret.is_some(),
        wait: Duration::from_secs(args.wait),
    })
}

/// Every check, in order; a check that needs an answer the executor did not give is skipped.
async fn checks(setup: &Setup, dispatcher: &Dispatcher, receiver: &Receiver) -> Vec<Line> {
    let mut lines = Vec::new();
    let first = dispatcher.run(&setup.params);
    let answered = match dispatcher
        .send(&setup.target, &first, 1, Signing::Signed)
        .await
    {
        Ok(answered) => answered,
        Err(why) => {
            lines.push(line("reply", Verdict::Fail, why));
            return lines;
        }
    };
    let (reply, answer) = reply_check(&answered, setup.secret_given);
    lines.push(reply);
    let Some(answer) = answer else {
        return lines;
    };
    let (callback, result) = callback_check(&answer, &first, 1, receiver, setup.wait).await;
    lines.push(callback);
    lines.push(duplicate_check(setup, dispatcher, receiver, (&first, &answered, result)).await);
    lines.push(forged_check(setup, dispatcher).await);
    let mut runs = vec![first];
    if let Some(slow) = &setup.slow {
        let run = dispatcher.run(&setup.params);
        lines.push(slow_check(slow, dispatcher, receiver, &run, setup.wait).await);
        runs.push(run);
    }
    lines.push(log_check(receiver, &runs));
    lines
}

/// The first dispatch's answer: one ax can read.
fn reply_check(answered: &Answered, secret_given: bool) -> (Line, Option<Answer>) {
    let status = answered.status;
    let took = answered.took.as_millis();
    match read_reply(status, &answered.body) {
        Err(why) => (
            line("reply", Verdict::Fail, format!("{status}: {why}")),
            None,
        ),
        Ok(Answer::Refused(401 | 403)) => {
            let why = match secret_given {
                true => "is --secret the executor's signing secret?",
                false => "give the executor's signing secret with --secret",
            };
            let detail = format!("{status} to a signed dispatch: {why}");
            (line("reply", Verdict::Fail, detail), None)
        }
        Ok(Answer::Refused(status)) => {
            let detail = format!(
                "{status}: the handler failed (ax records HTTP_{status}); give it --params it takes"
            );
            (line("reply", Verdict::Fail, detail), None)
        }
        Ok(answer) => {
            let what = match &answer {
                Answer::Result(reported) => describe(reported),
                Answer::Running => "accepted: the result follows by callback".into(),
                _ => "no result: SUCCESS".into(),
            };
            let detail = format!("{status} in {took} ms, {what}");
            (line("reply", Verdict::Ok, detail), Some(answer))
        }
    }
}

fn describe(reported: &Reported) -> String {
    match &reported.code {
        Some(code) => format!("{} ({code})", reported.status),
        None => reported.status.clone(),
    }
}

/// After a `202`, the callback: the run's own token and attempt, a body ax takes.
async fn callback_check(
    answer: &Answer,
    run: &TestRun,
    attempt: i64,
    receiver: &Receiver,
    wait: Duration,
) -> (Line, Option<Reported>) {
    let result = match answer {
        Answer::Result(reported) => Some(reported.clone()),
        Answer::Done => Some(Reported {
            status: "SUCCESS".into(),
            code: None,
        }),
        _ => None,
    };
    if result.is_some() {
        let detail = "not needed: the result came in the reply";
        return (line("callback", Verdict::Skip, detail), result);
    }
    let started = Instant::now();
    let Some(body) = receiver.callback(&run.request_id, started + wait).await else {
        let detail = format!("no callback within {} s of the 202", wait.as_secs());
        return (line("callback", Verdict::Fail, detail), None);
    };
    match read_callback(&body, &run.request_id, &run.token, attempt) {
        Ok(reported) => {
            let detail = format!(
                "{} after {:.1} s",
                describe(&reported),
                started.elapsed().as_secs_f64()
            );
            (line("callback", Verdict::Ok, detail), Some(reported))
        }
        Err(why) => (line("callback", Verdict::Fail, why), None),
    }
}

/// The same run again: the kept result, not a second run of the job.
async fn duplicate_check(
    setup: &Setup,
    dispatcher: &Dispatcher,
    receiver: &Receiver,
    (run, first, result): (&TestRun, &Answered, Option<Reported>),
) -> Line {
    if !first.idempotent {
        return line(
            "duplicate",
            Verdict::Warn,
            "the executor does not say it keeps results (no X-Ax-Idempotent: true): a \
             re-delivery of the same requestId may run the job again",
        );
    }
    let Some(result) = result else {
        return line(
            "duplicate",
            Verdict::Skip,
            "the first delivery has no result",
        );
    };
    let again = match dispatcher
        .send(&setup.target, run, 2, Signing::Signed)
        .await
    {
        Ok(again) => again,
        Err(why) => return line("duplicate", Verdict::Fail, why),
    };
    if !again.duplicate {
        let detail = format!(
            "a second delivery of {} got {} without X-Ax-Duplicate: true: was it run again?",
            run.request_id, again.status
        );
        return line("duplicate", Verdict::Fail, detail);
    }
    let answer = match read_reply(again.status, &again.body) {
        Ok(answer) => answer,
        Err(why) => return line("duplicate", Verdict::Fail, why),
    };
    let kept = match answer {
        Answer::Result(reported) => reported,
        Answer::Done => Reported {
            status: "SUCCESS".into(),
            code: None,
        },
        Answer::Running => {
            let (line_, reported) = callback_check(&answer, run, 2, receiver, setup.wait).await;
            match reported {
                Some(reported) => reported,
                None => {
                    return Line {
                        check: "duplicate",
                        ..line_
                    }
                }
            }
        }
        Answer::Refused(status) => {
            let detail = format!("a second delivery was refused with {status}");
            return line("duplicate", Verdict::Fail, detail);
        }
    };
    match kept.status == result.status {
        true => line(
            "duplicate",
            Verdict::Ok,
            format!(
                "the kept result again ({}), marked X-Ax-Duplicate",
                describe(&kept)
            ),
        ),
        false => line(
            "duplicate",
            Verdict::Fail,
            format!(
                "the second delivery says {}, the first said {}",
                describe(&kept),
                describe(&result)
            ),
        ),
    }
}

/// Dispatches ax did not sign, or signed too long ago, are refused.
async fn forged_check(setup: &Setup, dispatcher: &Dispatcher) -> Line {
    if !setup.secret_given {
        return line(
            "forged",
            Verdict::Skip,
            "no --secret: the signature checks need the executor's signing secret",
        );
    }
    let mut said = Vec::new();
    let mut verdict = Verdict::Ok;
    for (signing, what) in [
        (Signing::Forged, "a wrong signature"),
        (Signing::Stale, "one signed 10 minutes ago"),
        (Signing::Unsigned, "an unsigned one"),
    ] {
        let run = dispatcher.run(&setup.params);
        let status = match dispatcher.send(&setup.target, &run, 1, signing).await {
            Ok(answered) => answered.status,
            Err(why) => return line("forged", Verdict::Fail, why),
        };
        let this = match status {
            401 | 403 => Verdict::Ok,
            400..=499 => Verdict::Warn,
            _ => Verdict::Fail,
        };
        if this == Verdict::Fail || verdict == Verdict::Ok {
            verdict = this;
        }
        said.push(format!("{status} to {what}"));
    }
    let mut detail = said.join(", ");
    match verdict {
        Verdict::Fail => detail.push_str(": the executor takes dispatches ax did not sign"),
        Verdict::Warn => detail.push_str(" (the protocol refuses with 401)"),
        _ => {}
    }
    line("forged", verdict, detail)
}

/// The slow path: `202`, then a callback.
async fn slow_check(
    url: &str,
    dispatcher: &Dispatcher,
    receiver: &Receiver,
    run: &TestRun,
    wait: Duration,
) -> Line {
    let answered = match dispatcher.send(url, run, 1, Signing::Signed).await {
        Ok(answered) => answered,
        Err(why) => return line("slow", Verdict::Fail, why),
    };
    match read_reply(answered.status, &answered.body) {
        Ok(Answer::Running) => {}
        Ok(Answer::Refused(status)) => {
            return line(
                "slow",
                Verdict::Fail,
                format!("{status} to a signed dispatch"),
            )
        }
        Ok(_) => {
            let detail = format!("{} with the result at once, not 202", answered.status);
            return line("slow", Verdict::Warn, detail);
        }
        Err(why) => return line("slow", Verdict::Fail, why),
    }
    let (callback, _) = callback_check(&Answer::Running, run, 1, receiver, wait).await;
    Line {
        check: "slow",
        detail: format!("202, then {}", callback.detail),
        ..callback
    }
}

/// Every log call the runs made: bodies ax takes, with the run's token.
fn log_check(receiver: &Receiver, runs: &[TestRun]) -> Line {
    let (mut calls, mut lines) = (0, 0);
    for run in runs {
        for sent in receiver
            .about(&run.request_id)
            .iter()
            .filter(|sent| sent.is_log)
        {
            if let Err(why) = read_log(&sent.body, &run.token) {
                return line("log", Verdict::Fail, format!("{}: {why}", sent.body));
            }
            calls += 1;
            lines += sent.body["lines"].as_array().map_or(0, Vec::len);
        }
    }
    match calls {
        0 => line("log", Verdict::Skip, "no log lines or progress were sent"),
        _ => {
            let detail = format!(
                "{} and {}, all as ax takes them",
                counted(calls, "call"),
                counted(lines, "line")
            );
            line("log", Verdict::Ok, detail)
        }
    }
}

/// `1 call`, `2 calls`.
fn counted(n: usize, thing: &str) -> String {
    match n {
        1 => format!("1 {thing}"),
        n => format!("{n} {thing}s"),
    }
}

fn print(conn: &Connection, target: &str, lines: &[Line], conforms: bool) {
    if conn.json {
        let report = json!({"url": target, "conforms": conforms, "checks": lines});
        println!("{report}");
        return;
    }
    println!("{:<10} {:<6} DETAIL", "CHECK", "RESULT");
    for line in lines {
        let result = serde_json::to_value(line.result).unwrap_or_default();
        println!(
            "{:<10} {:<6} {}",
            line.check,
            result.as_str().unwrap_or_default(),
            line.detail
        );
    }
    match conforms {
        true => println!("{target} conforms to the executor protocol, version 1"),
        false => println!("{target} does not conform"),
    }
}
