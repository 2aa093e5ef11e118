//! The run's lifecycle, tested: a transition table (one row per starting state and event,
//! with the exact change or refusal), the births, the upstream decisions, and properties over
//! random event sequences applied to a model row the way the store applies them (a write
//! lands only where its compare-and-set condition holds).

use std::collections::{HashMap, HashSet};

use chrono::{DateTime, TimeZone, Utc};
use proptest::prelude::*;

use super::*;
use RunStatus::{Cancelled, Failed, Missed, Pending, Ready, Running, Skipped, Success};

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

/// The run's scheduled second in the table's rows.
const SCHEDULED: i64 = 100;
/// When a waiting row's next attempt is due.
const DUE: i64 = 120;
/// When a held row's claim lapses.
const CLAIM: i64 = 130;

fn at(secs: i64) -> DateTime<Utc> {
    Utc.timestamp_opt(secs, 0).single().expect("valid time")
}

/// Retry limits with the default back-off (5 s, 25 s, 125 s …).
fn limits(max_retry: i32) -> RetryLimits {
    RetryLimits {
        max_retry,
        policy: RetryPolicy::default(),
    }
}

/// A consistent row: claimed by "A", `attempt - 1` retries used of 2; a READY row holds a
/// claim until [`CLAIM`] when its attempt was dispatched, else it is due at [`DUE`].
fn state(status: RunStatus, attempt: i32, dispatched: i32) -> RunState {
    let ready = status == Ready;
    RunState {
        task_id: TaskId(1),
        status,
        attempt,
        dispatched,
        retries_used: attempt - 1,
        next_attempt_at: (ready && dispatched < attempt).then(|| at(DUE)),
        claimed_until: (ready && dispatched == attempt).then(|| at(CLAIM)),
        claimant: "A".into(),
        scheduled_at: at(SCHEDULED),
        retry: limits(2),
    }
}

/// The row a birth is stored as (its first attempt is attempt 1).
fn born(new: &NewRun, scheduled_at: DateTime<Utc>, claimant: &str, retry: RetryLimits) -> RunState {
    RunState {
        task_id: TaskId(1),
        status: new.status,
        attempt: 1,
        dispatched: new.dispatched,
        retries_used: 0,
        next_attempt_at: new.next_attempt_at,
        claimed_until: new.claimed_until,
        claimant: claimant.into(),
        scheduled_at,
        retry,
    }
}

fn claim(attempt: i32, claimant: &str, until: i64, now: i64) -> Event {
    Event::Claim {
        attempt,
        claimant: claimant.into(),
        until: at(until),
        at: at(now),
    }
}

fn report(attempt: Option<i32>, outcome: Outcome, now: i64) -> Event {
    Event::Report(Report {
        attempt,
        outcome,
        at: at(now),
        sent_at: None,
        member: None,
    })
}

fn succeeded(attempt: Option<i32>, now: i64) -> Event {
    let outcome = Outcome::Succeeded {
        code: None,
        message: None,
    };
    report(attempt, outcome, now)
}

fn failed(attempt: Option<i32>, now: i64) -> Event {
    report(attempt, failure(true), now)
}

/// A failure the executor said not to retry.
fn failed_for_good(attempt: Option<i32>, now: i64) -> Event {
    report(attempt, failure(false), now)
}

fn failure(retry: bool) -> Outcome {
    Outcome::Failed {
        code: None,
        message: None,
        retry,
    }
}

fn accepted(attempt: Option<i32>, deadline: i64, now: i64) -> Event {
    let outcome = Outcome::Accepted {
        deadline: at(deadline),
    };
    report(attempt, outcome, now)
}

fn timed_out(attempt: i32, now: i64) -> Event {
    Event::TimedOut {
        attempt,
        at: at(now),
    }
}

fn released(now: i64) -> Event {
    Event::Released { at: at(now) }
}

fn upstream_failed(now: i64) -> Event {
    Event::UpstreamFailed { at: at(now) }
}

fn dependency_timed_out(now: i64) -> Event {
    Event::DependencyTimedOut { at: at(now) }
}

fn recovered(claimant: &str, now: i64) -> Event {
    Event::Recovered {
        claimant: claimant.into(),
        at: at(now),
    }
}

fn fenced(claimant: &str, unsent_from: i64, now: i64) -> Event {
    Event::Fenced {
        claimant: claimant.into(),
        unsent_from: at(unsent_from),
        at: at(now),
    }
}

fn task_deleted(now: i64) -> Event {
    Event::TaskDeleted { at: at(now) }
}

fn skipped(now: i64) -> Event {
    Event::Skipped {
        message: "overlap",
        at: at(now),
    }
}

fn renewed(attempt: i32, claimant: &str, until: i64) -> Event {
    Event::Renewed {
        attempt,
        claimant: claimant.into(),
        until: at(until),
    }
}

/// The change of a claim of `attempt` by `claimant` until `until`.
fn claimed(attempt: i32, claimant: &str, until: i64) -> Change {
    Change {
        dispatched: Some(attempt),
        next_attempt_at: Some(None),
        claimed_until: Some(Some(at(until))),
        claimant: Some(claimant.into()),
        ..Change::default()
    }
}

/// The change that ends a run in `status` with `code` at `now`.
fn ended(status: RunStatus, code: Option<&str>, now: i64) -> Change {
    Change {
        status: Some(status),
        code: Some(code.map(Into::into)),
        finished_at: Some(at(now)),
        next_attempt_at: Some(None),
        claimed_until: Some(None),
        deadline_at: Some(None),
        ..Change::default()
    }
}

/// The change of a failure with retries left: `attempt` is due at `due`.
fn retry_due(attempt: i32, due: i64) -> Change {
    Change {
        status: Some(Ready),
        attempt: Some(attempt),
        retries_used: Some(attempt - 1),
        code: Some(None),
        next_attempt_at: Some(Some(at(due))),
        claimed_until: Some(None),
        deadline_at: Some(None),
        ..Change::default()
    }
}

/// The change of an accepted attempt: RUNNING until `deadline`.
fn running_until(deadline: i64) -> Change {
    Change {
        status: Some(Running),
        deadline_at: Some(Some(at(deadline))),
        claimed_until: Some(None),
        ..Change::default()
    }
}

/// The change of a lapsed claim: due again at `until`.
fn lapsed_to(until: i64) -> Change {
    Change {
        claimed_until: Some(Some(at(until))),
        ..Change::default()
    }
}

// ---------------------------------------------------------------------------------------------
// The transition table
// ---------------------------------------------------------------------------------------------

/// One row of the table: what `event` does to `run`.
struct Row {
    name: &'static str,
    run: RunState,
    event: Event,
    /// The change (its `message` not compared), or the refusal.
    want: Result<Change, Refusal>,
}

fn row(name: &'static str, run: RunState, event: Event, want: Result<Change, Refusal>) -> Row {
    Row {
        name,
        run,
        event,
        want,
    }
}

/// Checks every row, reporting all the rows that disagree at once.
fn check(rows: &[Row]) {
    let mut wrong = Vec::new();
    for row in rows {
        let got = on_event(&row.run, &row.event).map(|write| {
            assert!(
                write.expect.holds(&row.run),
                "{}: the condition of a write must hold on the row it was decided on",
                row.name
            );
            Change {
                message: None,
                ..write.change
            }
        });
        if got != row.want {
            wrong.push(format!(
                "{}:\n   got {got:?}\n  want {:?}",
                row.name, row.want
            ));
        }
    }
    assert!(wrong.is_empty(), "\n{}", wrong.join("\n"));
}

#[test]
fn table_claim() {
    use Refusal::{NotApplicable, Superseded};
    check(&[
        row(
            "due waiting run",
            state(Ready, 2, 1),
            claim(2, "B", 200, 125),
            Ok(claimed(2, "B", 200)),
        ),
        row(
            "due waiting run, claimed at the second it is due",
            state(Ready, 1, 0),
            claim(1, "B", 200, DUE),
            Ok(claimed(1, "B", 200)),
        ),
        row(
            "waiting run, not due yet",
            state(Ready, 2, 1),
            claim(2, "B", 200, DUE - 1),
            Err(NotApplicable),
        ),
        row(
            "lapsed claim",
            state(Ready, 1, 1),
            claim(1, "B", 200, CLAIM + 5),
            Ok(claimed(1, "B", 200)),
        ),
        row(
            "claim lapsing this second",
            state(Ready, 1, 1),
            claim(1, "B", 200, CLAIM),
            Ok(claimed(1, "B", 200)),
        ),
        row(
            "held attempt, claim not lapsed",
            state(Ready, 1, 1),
            claim(1, "B", 200, CLAIM - 1),
            Err(NotApplicable),
        ),
        row(
            "held attempt, claimed again by its own claimant",
            state(Ready, 1, 1),
            claim(1, "A", 200, 110),
            Err(NotApplicable),
        ),
        row(
            "an earlier attempt",
            state(Ready, 2, 1),
            claim(1, "B", 200, 125),
            Err(Superseded),
        ),
        row(
            "a later attempt",
            state(Ready, 2, 1),
            claim(3, "B", 200, 125),
            Err(Superseded),
        ),
        row(
            "a RUNNING run",
            state(Running, 1, 1),
            claim(1, "B", 200, 500),
            Err(Superseded),
        ),
        row(
            "a PENDING run",
            state(Pending, 1, 0),
            claim(1, "B", 200, 500),
            Err(Superseded),
        ),
        row(
            "a SUCCESS run",
            state(Success, 1, 1),
            claim(1, "B", 200, 500),
            Err(Refusal::Final(Success)),
        ),
        row(
            "a FAILED run",
            state(Failed, 3, 3),
            claim(3, "B", 200, 500),
            Err(Refusal::Final(Failed)),
        ),
        row(
            "a MISSED run",
            state(Missed, 1, 0),
            claim(1, "B", 200, 500),
            Err(Refusal::Final(Missed)),
        ),
    ]);
}

#[test]
fn table_renewed() {
    use Refusal::{NotApplicable, Superseded};
    let kept = Change {
        claimed_until: Some(Some(at(400))),
        ..Change::default()
    };
    check(&[
        row(
            "held attempt, by its claimant",
            state(Ready, 1, 1),
            renewed(1, "A", 400),
            Ok(kept.clone()),
        ),
        row(
            "held attempt whose claim lapsed, nobody took it",
            state(Ready, 2, 2),
            renewed(2, "A", 400),
            Ok(kept),
        ),
        row(
            "taken by another process",
            state(Ready, 1, 1),
            renewed(1, "B", 400),
            Err(NotApplicable),
        ),
        row(
            "an attempt not dispatched (failed and due again)",
            state(Ready, 2, 1),
            renewed(1, "A", 400),
            Err(Superseded),
        ),
        row(
            "a RUNNING run",
            state(Running, 1, 1),
            renewed(1, "A", 400),
            Err(Superseded),
        ),
        row(
            "a PENDING run",
            state(Pending, 1, 0),
            renewed(1, "A", 400),
            Err(Superseded),
        ),
        row(
            "a cancelled run",
            state(Cancelled, 1, 1),
            renewed(1, "A", 400),
            Err(Refusal::Final(Cancelled)),
        ),
        row(
            "a deleted task's run",
            state(Failed, 1, 1),
            renewed(1, "A", 400),
            Err(Refusal::Final(Failed)),
        ),
    ]);
}

#[test]
fn table_report_of_the_attempt_in_flight() {
    use Refusal::Superseded;
    check(&[
        row(
            "accepted while held",
            state(Ready, 1, 1),
            accepted(Some(1), 170, 110),
            Ok(running_until(170)),
        ),
        row(
            "accepted again while RUNNING",
            state(Running, 1, 1),
            accepted(Some(1), 170, 110),
            Err(Superseded),
        ),
        row(
            "succeeded while held",
            state(Ready, 1, 1),
            succeeded(Some(1), 110),
            Ok(ended(Success, None, 110)),
        ),
        row(
            "succeeded while RUNNING",
            state(Running, 2, 2),
            succeeded(Some(2), 110),
            Ok(ended(Success, None, 110)),
        ),
        row(
            "failed, 2 retries left: attempt 2 is due after 5 s",
            state(Running, 1, 1),
            failed(Some(1), 110),
            Ok(retry_due(2, 115)),
        ),
        row(
            "failed while held (dispatch failure), 2 retries left",
            state(Ready, 1, 1),
            failed(Some(1), 110),
            Ok(retry_due(2, 115)),
        ),
        row(
            "failed, 1 retry left: attempt 3 is due after 25 s",
            state(Running, 2, 2),
            failed(Some(2), 110),
            Ok(retry_due(3, 135)),
        ),
        row(
            "failed, no retry left",
            state(Running, 3, 3),
            failed(Some(3), 110),
            Ok(ended(Failed, None, 110)),
        ),
        row(
            "failed, retries left but the executor said not to retry",
            state(Running, 1, 1),
            failed_for_good(Some(1), 110),
            Ok(ended(Failed, None, 110)),
        ),
        row(
            "failed, the task allows no retry",
            RunState {
                retry: limits(0),
                ..state(Running, 1, 1)
            },
            failed(Some(1), 110),
            Ok(ended(Failed, None, 110)),
        ),
    ]);
}

#[test]
fn table_report_without_attempt_belongs_to_the_one_dispatched_last() {
    use Refusal::{NotDispatched, Superseded};
    check(&[
        row(
            "accepted",
            state(Ready, 1, 1),
            accepted(None, 170, 110),
            Ok(running_until(170)),
        ),
        row(
            "succeeded",
            state(Running, 2, 2),
            succeeded(None, 110),
            Ok(ended(Success, None, 110)),
        ),
        row(
            "failed",
            state(Running, 2, 2),
            failed(None, 110),
            Ok(retry_due(3, 135)),
        ),
        row(
            "failed while the retry after it waits: attempt 1's failure counted already",
            state(Ready, 2, 1),
            failed(None, 110),
            Err(Superseded),
        ),
        row(
            "succeeded while the retry after it waits",
            state(Ready, 2, 1),
            succeeded(None, 110),
            Ok(ended(Success, None, 110)),
        ),
        row(
            "a run never dispatched",
            state(Ready, 1, 0),
            failed(None, 110),
            Err(NotDispatched {
                attempt: 0,
                dispatched: 0,
            }),
        ),
        row(
            "a PENDING run",
            state(Pending, 1, 0),
            succeeded(None, 110),
            Err(NotDispatched {
                attempt: 0,
                dispatched: 0,
            }),
        ),
    ]);
}

#[test]
fn table_report_of_another_attempt() {
    use Refusal::{NotDispatched, Superseded};
    check(&[
        row(
            "SUCCESS of attempt 1 while attempt 2 waits ends the run",
            state(Ready, 2, 1),
            succeeded(Some(1), 110),
            Ok(ended(Success, None, 110)),
        ),
        row(
            "SUCCESS of attempt 1 while attempt 2 is held ends the run",
            state(Ready, 2, 2),
            succeeded(Some(1), 110),
            Ok(ended(Success, None, 110)),
        ),
        row(
            "SUCCESS of attempt 1 while attempt 3 is RUNNING ends the run",
            state(Running, 3, 3),
            succeeded(Some(1), 110),
            Ok(ended(Success, None, 110)),
        ),
        row(
            "FAILED of attempt 1 while attempt 2 waits",
            state(Ready, 2, 1),
            failed(Some(1), 110),
            Err(Superseded),
        ),
        row(
            "FAILED of attempt 1 while attempt 2 is RUNNING",
            state(Running, 2, 2),
            failed(Some(1), 110),
            Err(Superseded),
        ),
        row(
            "accepted of attempt 1 while attempt 2 is held",
            state(Ready, 2, 2),
            accepted(Some(1), 170, 110),
            Err(Superseded),
        ),
        row(
            "FAILED of attempt 99, never dispatched",
            state(Running, 1, 1),
            failed(Some(99), 110),
            Err(NotDispatched {
                attempt: 99,
                dispatched: 1,
            }),
        ),
        row(
            "SUCCESS of attempt 99, never dispatched",
            state(Ready, 2, 1),
            succeeded(Some(99), 110),
            Err(NotDispatched {
                attempt: 99,
                dispatched: 1,
            }),
        ),
        row(
            "SUCCESS of the attempt due, not dispatched yet",
            state(Ready, 2, 1),
            succeeded(Some(2), 110),
            Err(NotDispatched {
                attempt: 2,
                dispatched: 1,
            }),
        ),
        row(
            "accepted of a manual run's first attempt, not claimed yet",
            state(Ready, 1, 0),
            accepted(Some(1), 170, 110),
            Err(NotDispatched {
                attempt: 1,
                dispatched: 0,
            }),
        ),
        row(
            "attempt 0",
            state(Running, 1, 1),
            succeeded(Some(0), 110),
            Err(NotDispatched {
                attempt: 0,
                dispatched: 1,
            }),
        ),
    ]);
}

#[test]
fn table_report_of_a_result_counted_already() {
    check(&[
        row(
            "FAILED again, the retry after it waiting",
            state(Ready, 2, 1),
            failed(Some(1), 111),
            Err(Refusal::Superseded),
        ),
        row(
            "FAILED again, the retry after it RUNNING",
            state(Running, 2, 2),
            failed(Some(1), 111),
            Err(Refusal::Superseded),
        ),
        row(
            "FAILED again, the run FAILED",
            state(Failed, 3, 3),
            failed(Some(3), 111),
            Err(Refusal::Final(Failed)),
        ),
        row(
            "SUCCESS again",
            state(Success, 1, 1),
            succeeded(Some(1), 111),
            Err(Refusal::Final(Success)),
        ),
        row(
            "FAILED after SUCCESS",
            state(Success, 1, 1),
            failed(None, 111),
            Err(Refusal::Final(Success)),
        ),
        row(
            "anything for a MISSED run",
            state(Missed, 1, 0),
            succeeded(Some(1), 111),
            Err(Refusal::Final(Missed)),
        ),
    ]);
}

#[test]
fn table_timed_out() {
    use Refusal::Superseded;
    let timeout = |change: Change| Change {
        code: Some(Some("TIMEOUT".into())),
        ..change
    };
    check(&[
        row(
            "RUNNING, retries left",
            state(Running, 1, 1),
            timed_out(1, 140),
            Ok(timeout(retry_due(2, 145))),
        ),
        row(
            "RUNNING, no retry left",
            state(Running, 3, 3),
            timed_out(3, 140),
            Ok(timeout(ended(Failed, None, 140))),
        ),
        row(
            "RUNNING, an earlier attempt's deadline",
            state(Running, 2, 2),
            timed_out(1, 140),
            Err(Superseded),
        ),
        row(
            "RUNNING, an attempt never dispatched",
            state(Running, 2, 2),
            timed_out(99, 140),
            Err(Refusal::NotDispatched {
                attempt: 99,
                dispatched: 2,
            }),
        ),
        row(
            "held, not RUNNING",
            state(Ready, 1, 1),
            timed_out(1, 140),
            Err(Superseded),
        ),
        row(
            "waiting",
            state(Ready, 2, 1),
            timed_out(2, 140),
            Err(Superseded),
        ),
        row(
            "PENDING",
            state(Pending, 1, 0),
            timed_out(1, 140),
            Err(Superseded),
        ),
        row(
            "SUCCESS",
            state(Success, 1, 1),
            timed_out(1, 140),
            Err(Refusal::Final(Success)),
        ),
    ]);
}

#[test]
fn table_dependencies() {
    use Refusal::NotApplicable;
    let due_now = Change {
        status: Some(Ready),
        next_attempt_at: Some(Some(at(150))),
        deadline_at: Some(None),
        due_at: Some(at(150)),
        ..Change::default()
    };
    let mut rows = vec![
        row("released", state(Pending, 1, 0), released(150), Ok(due_now)),
        row(
            "an upstream failed",
            state(Pending, 1, 0),
            upstream_failed(150),
            Ok(ended(Failed, Some("UPSTREAM_FAILED"), 150)),
        ),
        row(
            "the upstreams timed out",
            state(Pending, 1, 0),
            dependency_timed_out(150),
            Ok(ended(Failed, Some("DEPENDENCY_TIMEOUT"), 150)),
        ),
    ];
    for event in [
        released(150),
        upstream_failed(150),
        dependency_timed_out(150),
    ] {
        for (name, run, want) in [
            ("waiting", state(Ready, 1, 0), Err(NotApplicable)),
            ("held", state(Ready, 1, 1), Err(NotApplicable)),
            ("RUNNING", state(Running, 1, 1), Err(NotApplicable)),
            ("FAILED", state(Failed, 1, 0), Err(Refusal::Final(Failed))),
            ("MISSED", state(Missed, 1, 0), Err(Refusal::Final(Missed))),
        ] {
            rows.push(row(name, run, event.clone(), want));
        }
    }
    check(&rows);
}

#[test]
fn table_recovered_and_fenced() {
    use Refusal::NotApplicable;
    check(&[
        row(
            "own claimant, claim held: due now",
            state(Ready, 1, 1),
            recovered("A", 110),
            Ok(lapsed_to(110)),
        ),
        row(
            "own claimant, a run committed ahead of its second: due at its second",
            state(Ready, 1, 1),
            recovered("A", 90),
            Ok(lapsed_to(SCHEDULED)),
        ),
        row(
            "another claimant",
            state(Ready, 1, 1),
            recovered("B", 110),
            Err(NotApplicable),
        ),
        row(
            "own claimant, claim lapsed already",
            state(Ready, 1, 1),
            recovered("A", CLAIM),
            Err(NotApplicable),
        ),
        row(
            "not claimed: waiting",
            state(Ready, 2, 1),
            recovered("A", 110),
            Err(NotApplicable),
        ),
        row(
            "not claimed: RUNNING",
            state(Running, 1, 1),
            recovered("A", 110),
            Err(NotApplicable),
        ),
        row(
            "not claimed: PENDING",
            state(Pending, 1, 0),
            recovered("A", 110),
            Err(NotApplicable),
        ),
        row(
            "final",
            state(Success, 1, 1),
            recovered("A", 110),
            Err(Refusal::Final(Success)),
        ),
        row(
            "fenced before the run's second: due now",
            state(Ready, 1, 1),
            fenced("A", SCHEDULED, 110),
            Ok(lapsed_to(110)),
        ),
        row(
            "fenced, a run committed ahead of its second: due at its second",
            state(Ready, 1, 1),
            fenced("A", SCHEDULED, 90),
            Ok(lapsed_to(SCHEDULED)),
        ),
        row(
            "fenced having maybe sent it: the claim stands until it expires",
            state(Ready, 1, 1),
            fenced("A", SCHEDULED + 1, 110),
            Err(NotApplicable),
        ),
        row(
            "another claimant fenced",
            state(Ready, 1, 1),
            fenced("B", SCHEDULED, 110),
            Err(NotApplicable),
        ),
        row(
            "fenced, not claimed",
            state(Running, 1, 1),
            fenced("A", SCHEDULED + 1, 110),
            Err(NotApplicable),
        ),
        row(
            "fenced, final",
            state(Failed, 1, 1),
            fenced("A", SCHEDULED, 110),
            Err(Refusal::Final(Failed)),
        ),
    ]);
}

#[test]
fn table_task_deleted() {
    let deleted = || Ok(ended(Failed, Some("TASK_DELETED"), 150));
    check(&[
        row(
            "PENDING",
            state(Pending, 1, 0),
            task_deleted(150),
            deleted(),
        ),
        row("due", state(Ready, 1, 0), task_deleted(150), deleted()),
        row(
            "retry waiting",
            state(Ready, 2, 1),
            task_deleted(150),
            deleted(),
        ),
        row("held", state(Ready, 1, 1), task_deleted(150), deleted()),
        row(
            "RUNNING",
            state(Running, 2, 2),
            task_deleted(150),
            deleted(),
        ),
        row(
            "SUCCESS",
            state(Success, 1, 1),
            task_deleted(150),
            Err(Refusal::Final(Success)),
        ),
        row(
            "FAILED",
            state(Failed, 1, 1),
            task_deleted(150),
            Err(Refusal::Final(Failed)),
        ),
        row(
            "MISSED",
            state(Missed, 1, 0),
            task_deleted(150),
            Err(Refusal::Final(Missed)),
        ),
    ]);
}

#[test]
fn table_cancel_and_overlap() {
    let cancelled = |code| Ok(ended(Cancelled, Some(code), 150));
    let mut rows = Vec::new();
    for (name, run) in [
        ("PENDING", state(Pending, 1, 0)),
        ("due", state(Ready, 1, 0)),
        ("retry waiting", state(Ready, 2, 1)),
        ("held", state(Ready, 1, 1)),
        ("RUNNING", state(Running, 2, 2)),
    ] {
        rows.push(row(
            name,
            run.clone(),
            Event::Cancelled { at: at(150) },
            cancelled("CANCELLED"),
        ));
        rows.push(row(
            name,
            run,
            Event::Replaced { at: at(150) },
            cancelled("REPLACED"),
        ));
    }
    for status in [Success, Failed, Missed, Skipped, Cancelled] {
        for event in [Event::Cancelled { at: at(150) }, skipped(150)] {
            let run = state(status, 1, 1);
            rows.push(row("final", run, event, Err(Refusal::Final(status))));
        }
    }
    let held_back = Change {
        status: Some(Pending),
        code: Some(Some("OVERLAP".into())),
        next_attempt_at: Some(None),
        ..Change::default()
    };
    let buffered = Event::Buffered { at: at(150) };
    rows.extend([
        row(
            "first attempt due: skipped",
            state(Ready, 1, 0),
            skipped(150),
            Ok(ended(Skipped, Some("OVERLAP"), 150)),
        ),
        row(
            "first attempt due: held back",
            state(Ready, 1, 0),
            buffered.clone(),
            Ok(held_back),
        ),
        row(
            "dispatched already: not skipped",
            state(Ready, 1, 1),
            skipped(150),
            Err(Refusal::NotApplicable),
        ),
        row(
            "a retry is not held back",
            state(Ready, 2, 1),
            buffered,
            Err(Refusal::NotApplicable),
        ),
        row(
            "held back, the earlier run final: due now",
            state(Pending, 1, 0),
            Event::EarlierFinished {
                waits_for_upstreams: false,
                at: at(150),
            },
            Ok(Change {
                status: Some(Ready),
                code: Some(None),
                next_attempt_at: Some(Some(at(150))),
                deadline_at: Some(None),
                due_at: Some(at(150)),
                ..Change::default()
            }),
        ),
        row(
            "held back, with upstreams: waits for them",
            state(Pending, 1, 0),
            Event::EarlierFinished {
                waits_for_upstreams: true,
                at: at(150),
            },
            Ok(Change {
                code: Some(None),
                ..Change::default()
            }),
        ),
        row(
            "not held back",
            state(Ready, 1, 0),
            Event::EarlierFinished {
                waits_for_upstreams: false,
                at: at(150),
            },
            Err(Refusal::NotApplicable),
        ),
    ]);
    check(&rows);
    // Replacing needs no read: its blind write is the decision wherever the run is open.
    assert!(blind(&Event::Replaced { at: at(150) }).is_some());
    assert!(blind(&Event::Cancelled { at: at(150) }).is_none());
}

/// Applies `event` to `run` where it is decided to, as the store does.
fn deliver(run: &mut RunState, event: &Event) -> Result<(), Refusal> {
    let write = on_event(run, event)?;
    assert!(write.expect.holds(run));
    run.apply(&write.change);
    Ok(())
}

/// The issue's case: three FAILED callbacks for a run dispatched once — one naming attempt 1,
/// two naming no attempt — count once, in any order: the run retries once, it does not fail
/// at attempt 3.
#[test]
fn issue_three_failed_callbacks_for_one_dispatch_count_once() {
    for first in 0..3 {
        let mut run = born(&NewRun::fired(at(CLAIM)), at(SCHEDULED), "A", limits(2));
        let results: Vec<_> = (0..3)
            .map(|i| {
                let attempt = (i == first).then_some(1);
                deliver(&mut run, &failed(attempt, 110 + i))
            })
            .collect();
        let counted = results.iter().filter(|r| r.is_ok()).count();
        assert_eq!(counted, 1, "attempt 1 named at {first}: {results:?}");
        assert_eq!(results[0], Ok(()));
        assert_eq!(results[1..], [Err(Refusal::Superseded); 2]);
        assert_eq!(run.status, Ready);
        assert_eq!((run.attempt, run.dispatched, run.retries_used), (2, 1, 1));
        assert_eq!(run.next_attempt_at, Some(at(115)));
        assert_eq!(run.claimed_until, None);
    }
    // With maxRetry 3 too: still one retry.
    let mut run = born(&NewRun::fired(at(CLAIM)), at(SCHEDULED), "A", limits(3));
    for attempt in [Some(1), None, None] {
        let _ = deliver(&mut run, &failed(attempt, 110));
    }
    assert_eq!((run.status, run.attempt, run.retries_used), (Ready, 2, 1));
}

/// A whole run: fired, dispatch fails, retried, accepted, timed out, retried, succeeds.
#[test]
fn a_run_through_its_retries() {
    let mut run = born(&NewRun::fired(at(CLAIM)), at(SCHEDULED), "A", limits(2));
    deliver(&mut run, &failed(Some(1), 100)).unwrap();
    assert_eq!(
        deliver(&mut run, &claim(2, "B", 200, 104)),
        Err(Refusal::NotApplicable)
    );
    deliver(&mut run, &claim(2, "B", 200, 105)).unwrap();
    deliver(&mut run, &accepted(Some(2), 160, 106)).unwrap();
    assert_eq!(run.status, Running);
    deliver(&mut run, &timed_out(2, 160)).unwrap();
    assert_eq!((run.status, run.attempt, run.dispatched), (Ready, 3, 2));
    assert_eq!(run.next_attempt_at, Some(at(185)));
    deliver(&mut run, &claim(3, "C", 300, 185)).unwrap();
    deliver(&mut run, &succeeded(None, 190)).unwrap();
    assert_eq!((run.status, run.attempt, run.retries_used), (Success, 3, 2));
    assert_eq!(
        deliver(&mut run, &failed(Some(3), 191)),
        Err(Refusal::Final(Success))
    );
}

#[test]
fn conditions_of_writes() {
    // A due attempt: whoever claims it first; the claim's condition is the attempts seen.
    let due = state(Ready, 2, 1);
    let b = on_event(&due, &claim(2, "B", 200, 125)).unwrap();
    let c = on_event(&due, &claim(2, "C", 210, 125)).unwrap();
    assert_eq!(b.expect.attempt, Some(2));
    assert_eq!(b.expect.dispatched, Some(1));
    assert_eq!(b.expect.claimed_until, None);
    let mut row = due.clone();
    row.apply(&b.change);
    assert!(!c.expect.holds(&row), "a due attempt is claimed once");

    // A lapsed claim: taken by the one who saw it lapse, and only once.
    let held = state(Ready, 1, 1);
    let b = on_event(&held, &claim(1, "B", 200, 140)).unwrap();
    let c = on_event(&held, &claim(1, "C", 210, 140)).unwrap();
    assert_eq!(b.expect.claimed_until, Some(at(CLAIM)));
    let mut row = held.clone();
    row.apply(&b.change);
    assert!(!c.expect.holds(&row), "a lapsed claim is taken once");
    assert_eq!(
        (row.claimant.as_str(), row.claimed_until),
        ("B", Some(at(200)))
    );

    // A restart lapses only the claim it saw, of the claimant it saw.
    let lapse = on_event(&held, &recovered("A", 110)).unwrap();
    assert_eq!(lapse.expect.claimant.as_deref(), Some("A"));
    assert_eq!(lapse.expect.claimed_until, Some(at(CLAIM)));
    assert!(!lapse.expect.holds(&row), "B's claim is not A's to lapse");

    // A result decided before a retry's claim does not land after it.
    let waiting = state(Ready, 2, 1);
    let task_gone = on_event(&waiting, &task_deleted(150)).unwrap();
    let mut row = waiting.clone();
    deliver(&mut row, &claim(2, "B", 200, 125)).unwrap();
    assert!(!task_gone.expect.holds(&row));
    assert!(blind(&task_deleted(150)).unwrap().expect.holds(&row));
}

/// The first attempt's reply records when it was sent, blind or decided; a callback, a
/// timeout and a retry's reply do not.
#[test]
fn the_first_attempts_reply_records_when_it_was_sent() {
    let sent = |attempt: i32, outcome: Outcome| {
        Event::Report(Report {
            attempt: Some(attempt),
            outcome,
            at: at(120),
            sent_at: Some(at(101)),
            member: None,
        })
    };
    let success = || Outcome::Succeeded {
        code: None,
        message: None,
    };
    let first = state(Ready, 1, 1);
    for event in [
        sent(1, success()),
        sent(1, failure(true)),
        sent(1, Outcome::Accepted { deadline: at(150) }),
    ] {
        let decided = on_event(&first, &event).unwrap();
        assert_eq!(decided.change.dispatched_at, Some(at(101)), "{event:?}");
        if let Some(write) = blind(&event) {
            assert_eq!(write.change.dispatched_at, Some(at(101)), "{event:?}");
        }
    }
    let retry = state(Ready, 2, 2);
    assert_eq!(
        on_event(&retry, &sent(2, success()))
            .unwrap()
            .change
            .dispatched_at,
        None
    );
    assert_eq!(
        blind(&sent(2, success())).unwrap().change.dispatched_at,
        None
    );
    let callback = succeeded(Some(1), 120);
    assert_eq!(
        on_event(&first, &callback).unwrap().change.dispatched_at,
        None
    );
    let running = state(Running, 1, 1);
    let timeout = Event::TimedOut {
        attempt: 1,
        at: at(150),
    };
    assert_eq!(
        on_event(&running, &timeout).unwrap().change.dispatched_at,
        None
    );
}

/// Found by `blind_writes_agree_with_decisions`: a blind SUCCESS held on every READY or
/// RUNNING row, so a reply naming an attempt never dispatched would have ended the run, where
/// `on_event` refuses it (`NotDispatched`).
#[test]
fn blind_success_of_an_attempt_never_dispatched_does_not_hold() {
    for (run, attempt) in [
        (state(Ready, 2, 1), 2),
        (state(Ready, 1, 0), 1),
        (state(Running, 1, 1), 99),
    ] {
        let event = succeeded(Some(attempt), 110);
        assert!(matches!(
            on_event(&run, &event),
            Err(Refusal::NotDispatched { .. })
        ));
        if let Some(write) = blind(&event) {
            assert!(!write.expect.holds(&run), "{run:?}, attempt {attempt}");
        }
    }
    assert_eq!(blind(&succeeded(Some(0), 110)), None);
    // Where it was dispatched, the blind SUCCESS holds, earlier attempts included.
    for (run, attempt) in [
        (state(Ready, 1, 1), 1),
        (state(Ready, 2, 1), 1),
        (state(Running, 3, 3), 2),
    ] {
        assert!(blind(&succeeded(Some(attempt), 110))
            .unwrap()
            .expect
            .holds(&run));
    }
}

// ---------------------------------------------------------------------------------------------
// Births and upstreams
// ---------------------------------------------------------------------------------------------

#[test]
fn births() {
    let scheduled = at(SCHEDULED);
    let fired = NewRun::fired(claim_until(scheduled, 20_000));
    assert_eq!(
        fired,
        NewRun {
            status: Ready,
            dispatched: 1,
            next_attempt_at: None,
            claimed_until: Some(at(SCHEDULED + 30)),
            deadline_at: None,
            finished_at: None,
            code: None,
            message: None,
        }
    );
    let run = born(&fired, scheduled, "A", limits(2));
    assert!(run.in_flight());
    assert_eq!(
        on_event(&run, &claim(1, "B", 200, SCHEDULED + 29)),
        Err(Refusal::NotApplicable),
        "a fired run's attempt is the firing process's"
    );

    let waiting = NewRun::waiting_for_upstreams(dependency_deadline(scheduled, 60));
    assert_eq!((waiting.status, waiting.dispatched), (Pending, 0));
    assert_eq!(waiting.deadline_at, Some(at(SCHEDULED + 60)));
    assert_eq!(
        (waiting.next_attempt_at, waiting.claimed_until),
        (None, None)
    );
    assert_eq!(waiting.finished_at, None);
    assert!(!born(&waiting, scheduled, "A", limits(2)).in_flight());

    let missed = NewRun::missed(at(SCHEDULED + 90));
    assert_eq!((missed.status, missed.dispatched), (Missed, 0));
    assert_eq!(missed.finished_at, Some(at(SCHEDULED + 90)));
    assert_eq!(missed.deadline_at, None);
    let run = born(&missed, scheduled, "A", limits(2));
    assert_eq!(
        on_event(&run, &claim(1, "B", 200, 500)),
        Err(Refusal::Final(Missed))
    );

    let manual = NewRun::due(at(150));
    assert_eq!((manual.status, manual.dispatched), (Ready, 0));
    assert_eq!(manual.next_attempt_at, Some(at(150)));
    assert_eq!((manual.claimed_until, manual.finished_at), (None, None));
    let run = born(&manual, at(150), "A", limits(2));
    assert!(!run.in_flight());
    assert_eq!(
        on_event(&run, &claim(1, "B", 200, 150)).map(|w| w.change),
        Ok(claimed(1, "B", 200))
    );
}

#[test]
fn dependency_deadline_saturates() {
    assert_eq!(dependency_deadline(at(100), 60), at(160));
    assert_eq!(
        dependency_deadline(DateTime::<Utc>::MAX_UTC, 60),
        DateTime::<Utc>::MAX_UTC
    );
}

#[test]
fn upstream_events() {
    let deadline = at(160);
    let decide =
        |upstreams: &[Option<RunStatus>], now| upstream_event(upstreams, at(now), deadline);
    let s = Some(Success);
    // Released once every upstream succeeded, even at or past the deadline.
    assert_eq!(decide(&[s, s], 150), Some(released(150)));
    assert_eq!(decide(&[s], 170), Some(released(170)));
    assert_eq!(decide(&[], 150), Some(released(150)));
    // Failed as soon as one did not succeed, whatever the others and the deadline.
    assert_eq!(decide(&[s, Some(Failed)], 150), Some(upstream_failed(150)));
    assert_eq!(
        decide(&[None, Some(Missed)], 150),
        Some(upstream_failed(150))
    );
    assert_eq!(
        decide(&[Some(Failed), None], 170),
        Some(upstream_failed(170))
    );
    // Waiting while one has no run yet or its run is open; timed out at the deadline.
    for open in [None, Some(Pending), Some(Ready), Some(Running)] {
        assert_eq!(decide(&[s, open], 159), None, "{open:?}");
        assert_eq!(decide(&[s, open], 160), Some(dependency_timed_out(160)));
        assert_eq!(decide(&[open], 200), Some(dependency_timed_out(200)));
    }
}

// ---------------------------------------------------------------------------------------------
// Properties
// ---------------------------------------------------------------------------------------------

const CLAIMANTS: [&str; 3] = ["A", "B", "C"];

/// An attempt an event names: the row's current one, or a number.
#[derive(Debug, Clone, Copy)]
enum Pick {
    Current,
    Named(i32),
}

impl Pick {
    fn attempt(self, run: &RunState) -> i32 {
        match self {
            Pick::Current => run.attempt,
            Pick::Named(attempt) => attempt,
        }
    }
}

#[derive(Debug, Clone, Copy)]
enum OutcomeGen {
    Accepted { deadline_after: i64 },
    Succeeded,
    Failed { retry: bool },
}

/// An event, its attempts picked against the row it is decided on.
#[derive(Debug, Clone)]
enum Gen {
    Claim {
        attempt: Pick,
        claimant: usize,
        hold: i64,
        now: i64,
    },
    Renewed {
        attempt: Pick,
        claimant: usize,
        until: i64,
    },
    Report {
        attempt: Option<Pick>,
        outcome: OutcomeGen,
        now: i64,
    },
    TimedOut {
        attempt: Pick,
        now: i64,
    },
    Released(i64),
    UpstreamFailed(i64),
    DependencyTimedOut(i64),
    Recovered {
        claimant: usize,
        now: i64,
    },
    Fenced {
        claimant: usize,
        unsent_from: i64,
        now: i64,
    },
    TaskDeleted(i64),
    Cancelled(i64),
    Replaced(i64),
    Skipped(i64),
    Buffered(i64),
    EarlierFinished {
        waits_for_upstreams: bool,
        now: i64,
    },
}

impl Gen {
    fn event(&self, run: &RunState) -> Event {
        match *self {
            Gen::Claim {
                attempt,
                claimant,
                hold,
                now,
            } => claim(attempt.attempt(run), CLAIMANTS[claimant], now + hold, now),
            Gen::Renewed {
                attempt,
                claimant,
                until,
            } => renewed(attempt.attempt(run), CLAIMANTS[claimant], until),
            Gen::Report {
                attempt,
                outcome,
                now,
            } => {
                let outcome = match outcome {
                    OutcomeGen::Accepted { deadline_after } => Outcome::Accepted {
                        deadline: at(now + deadline_after),
                    },
                    OutcomeGen::Succeeded => Outcome::Succeeded {
                        code: None,
                        message: None,
                    },
                    OutcomeGen::Failed { retry } => failure(retry),
                };
                report(attempt.map(|a| a.attempt(run)), outcome, now)
            }
            Gen::TimedOut { attempt, now } => timed_out(attempt.attempt(run), now),
            Gen::Released(now) => released(now),
            Gen::UpstreamFailed(now) => upstream_failed(now),
            Gen::DependencyTimedOut(now) => dependency_timed_out(now),
            Gen::Recovered { claimant, now } => recovered(CLAIMANTS[claimant], now),
            Gen::Fenced {
                claimant,
                unsent_from,
                now,
            } => fenced(CLAIMANTS[claimant], unsent_from, now),
            Gen::TaskDeleted(now) => task_deleted(now),
            Gen::Cancelled(now) => Event::Cancelled { at: at(now) },
            Gen::Replaced(now) => Event::Replaced { at: at(now) },
            Gen::Skipped(now) => skipped(now),
            Gen::Buffered(now) => Event::Buffered { at: at(now) },
            Gen::EarlierFinished {
                waits_for_upstreams,
                now,
            } => Event::EarlierFinished {
                waits_for_upstreams,
                at: at(now),
            },
        }
    }
}

fn pick() -> impl Strategy<Value = Pick> {
    prop_oneof![
        3 => Just(Pick::Current),
        4 => (1..=5i32).prop_map(Pick::Named),
        1 => Just(Pick::Named(99)),
        1 => Just(Pick::Named(0)),
    ]
}

fn outcome() -> impl Strategy<Value = OutcomeGen> {
    prop_oneof![
        2 => (0..120i64).prop_map(|deadline_after| OutcomeGen::Accepted { deadline_after }),
        1 => Just(OutcomeGen::Succeeded),
        3 => prop::bool::weighted(0.9).prop_map(|retry| OutcomeGen::Failed { retry }),
    ]
}

/// Seconds of the events: around the runs' scheduled seconds (50..150) and their retries.
fn now() -> impl Strategy<Value = i64> {
    0..600i64
}

fn gen() -> impl Strategy<Value = Gen> {
    let report_attempt = prop_oneof![1 => Just(None), 4 => pick().prop_map(Some)];
    // Events that end a run are rarer, so that histories reach retries.
    prop_oneof![
        18 => (pick(), 0..CLAIMANTS.len(), 0..90i64, now()).prop_map(
            |(attempt, claimant, hold, now)| Gen::Claim { attempt, claimant, hold, now }
        ),
        4 => (pick(), 0..CLAIMANTS.len(), now()).prop_map(
            |(attempt, claimant, until)| Gen::Renewed { attempt, claimant, until }
        ),
        24 => (report_attempt, outcome(), now())
            .prop_map(|(attempt, outcome, now)| Gen::Report { attempt, outcome, now }),
        6 => (pick(), now()).prop_map(|(attempt, now)| Gen::TimedOut { attempt, now }),
        6 => now().prop_map(Gen::Released),
        2 => now().prop_map(Gen::UpstreamFailed),
        2 => now().prop_map(Gen::DependencyTimedOut),
        6 => (0..CLAIMANTS.len(), now())
            .prop_map(|(claimant, now)| Gen::Recovered { claimant, now }),
        6 => (0..CLAIMANTS.len(), now(), now()).prop_map(|(claimant, unsent_from, now)| {
            Gen::Fenced { claimant, unsent_from, now }
        }),
        1 => now().prop_map(Gen::TaskDeleted),
        1 => now().prop_map(Gen::Cancelled),
        1 => now().prop_map(Gen::Replaced),
        1 => now().prop_map(Gen::Skipped),
        2 => now().prop_map(Gen::Buffered),
        2 => (prop::bool::ANY, now()).prop_map(|(waits_for_upstreams, now)| {
            Gen::EarlierFinished { waits_for_upstreams, now }
        }),
    ]
}

/// One step of a run's history.
#[derive(Debug, Clone)]
enum Step {
    /// An event decided on the row as it is, written.
    Now(Gen),
    /// An event decided on the row as it was `back` writes ago, written only where its
    /// condition holds on the row as it is (the store's compare-and-set).
    Stale { back: usize, event: Gen },
    /// An event delivered before, delivered again now (a duplicate, out of order).
    Again { back: usize },
    /// An event's blind write, where it has one (else decided now).
    Blind(Gen),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        6 => gen().prop_map(Step::Now),
        2 => (1..6usize, gen()).prop_map(|(back, event)| Step::Stale { back, event }),
        2 => (0..8usize).prop_map(|back| Step::Again { back }),
        2 => gen().prop_map(Step::Blind),
    ]
}

#[derive(Debug, Clone, Copy)]
enum Birth {
    Fired,
    Waiting,
    Manual,
    Missed,
}

/// A run as born: its row, and whether its birth set `finished_at`.
fn birth() -> impl Strategy<Value = (RunState, bool)> {
    let kind = prop_oneof![
        4 => Just(Birth::Fired),
        2 => Just(Birth::Waiting),
        3 => Just(Birth::Manual),
        1 => Just(Birth::Missed),
    ];
    (kind, 50..150i64, 0..=4i32, 0..=10i64, 1..=3i64).prop_map(
        |(kind, scheduled, max_retry, backoff_secs, factor)| {
            let scheduled = at(scheduled);
            let new = match kind {
                Birth::Fired => NewRun::fired(claim_until(scheduled, 20_000)),
                Birth::Waiting => NewRun::waiting_for_upstreams(dependency_deadline(scheduled, 60)),
                Birth::Manual => NewRun::due(scheduled),
                Birth::Missed => NewRun::missed(scheduled),
            };
            let retry = RetryLimits {
                max_retry,
                policy: RetryPolicy {
                    backoff_secs,
                    factor,
                },
            };
            (born(&new, scheduled, "A", retry), new.finished_at.is_some())
        },
    )
}

/// The attempt a result names, resolved on the row it is decided on; `None` for an event that
/// is no result (a timeout is one only for a RUNNING row).
fn result_attempt(run: &RunState, event: &Event) -> Option<i32> {
    match event {
        Event::Report(report) => Some(report.attempt.unwrap_or(run.dispatched)),
        Event::TimedOut { attempt, .. } if run.status == Running => Some(*attempt),
        _ => None,
    }
}

fn is_success(event: &Event) -> bool {
    matches!(
        event,
        Event::Report(Report {
            outcome: Outcome::Succeeded { .. },
            ..
        })
    )
}

fn is_failure(event: &Event) -> bool {
    matches!(
        event,
        Event::TimedOut { .. }
            | Event::Report(Report {
                outcome: Outcome::Failed { .. },
                ..
            })
    )
}

/// A run's row as the store holds it, and what the history so far says about it.
struct Model {
    run: RunState,
    /// Whether a write (or the birth) set `finished_at`.
    finished: bool,
    /// Every row the run had, oldest first.
    history: Vec<RunState>,
    delivered: Vec<Event>,
    /// A SUCCESS was written.
    succeeded: bool,
    /// The attempts whose failure was counted.
    failures_counted: HashSet<i32>,
}

impl Model {
    fn new(run: RunState, finished: bool) -> Model {
        Model {
            history: vec![run.clone()],
            run,
            finished,
            delivered: Vec::new(),
            succeeded: false,
            failures_counted: HashSet::new(),
        }
    }

    /// Runs one step; returns the change written, if any.
    fn step(&mut self, step: &Step) -> Result<Option<Change>, TestCaseError> {
        match step {
            Step::Now(gen) => {
                let event = gen.event(&self.run);
                self.decide_now(&event)
            }
            Step::Again { back } => match self.delivered.len() {
                0 => Ok(None),
                n => {
                    let event = self.delivered[n - 1 - back % n].clone();
                    self.decide_now(&event)
                }
            },
            Step::Stale { back, event } => {
                let old = self.history[self.history.len().saturating_sub(1 + back)].clone();
                let event = event.event(&old);
                self.delivered.push(event.clone());
                let Ok(write) = on_event(&old, &event) else {
                    return Ok(None);
                };
                prop_assert!(write.expect.holds(&old), "{write:?} on {old:?}");
                if !write.expect.holds(&self.run) {
                    return Ok(None);
                }
                // Where a stale decision's condition still holds, it is the decision of now.
                let decided_now = on_event(&self.run, &event);
                prop_assert_eq!(
                    decided_now.as_ref(),
                    Ok(&write),
                    "decided on {:?}, written on {:?}",
                    old,
                    self.run
                );
                self.write(&old, &event, &write.change);
                Ok(Some(write.change))
            }
            Step::Blind(gen) => {
                let event = gen.event(&self.run);
                let Some(write) = blind(&event) else {
                    return self.decide_now(&event);
                };
                self.delivered.push(event.clone());
                let decided = on_event(&self.run, &event);
                self.check_decision(&event, &decided)?;
                if write.expect.holds(&self.run) {
                    prop_assert_eq!(
                        decided.map(|w| w.change),
                        Ok(write.change.clone()),
                        "the blind write of {:?} holds on {:?}",
                        event,
                        self.run
                    );
                    let run = self.run.clone();
                    self.write(&run, &event, &write.change);
                    Ok(Some(write.change))
                } else {
                    if let Ok(w) = decided {
                        let mut after = self.run.clone();
                        after.apply(&w.change);
                        prop_assert_eq!(
                            &after,
                            &self.run,
                            "the blind write of {:?} does not hold, yet it is decided",
                            event
                        );
                    }
                    Ok(None)
                }
            }
        }
    }

    /// Decides `event` on the row as it is, checks the decision, and writes it.
    fn decide_now(&mut self, event: &Event) -> Result<Option<Change>, TestCaseError> {
        self.delivered.push(event.clone());
        let decided = on_event(&self.run, event);
        self.check_decision(event, &decided)?;
        let Ok(write) = decided else {
            return Ok(None);
        };
        prop_assert!(
            write.expect.holds(&self.run),
            "a decision's condition holds on the row it was decided on: {:?} on {:?}",
            write,
            self.run
        );
        let run = self.run.clone();
        self.write(&run, event, &write.change);
        if is_success(event) {
            prop_assert_eq!(self.run.status, Success);
        }
        Ok(Some(write.change))
    }

    /// The rules of results, for a decision on the row as it is.
    fn check_decision(
        &self,
        event: &Event,
        decided: &Result<Write, Refusal>,
    ) -> Result<(), TestCaseError> {
        let run = &self.run;
        if run.status.is_final() {
            prop_assert_eq!(decided, &Err(Refusal::Final(run.status)));
            return Ok(());
        }
        let Some(attempt) = result_attempt(run, event) else {
            return Ok(());
        };
        if attempt < 1 || attempt > run.dispatched {
            let refusal = Refusal::NotDispatched {
                attempt,
                dispatched: run.dispatched,
            };
            prop_assert_eq!(decided, &Err(refusal), "{:?} on {:?}", event, run);
        } else if is_success(event) {
            // A SUCCESS reply is never lost.
            prop_assert!(decided.is_ok(), "{:?} on {:?}: {:?}", event, run, decided);
        } else if self.failures_counted.contains(&attempt) {
            // One result per attempt counts.
            prop_assert_eq!(
                decided,
                &Err(Refusal::Superseded),
                "{:?} on {:?}",
                event,
                run
            );
        }
        Ok(())
    }

    /// Writes `change`, decided on `decided_on`, to the row.
    fn write(&mut self, decided_on: &RunState, event: &Event, change: &Change) {
        self.run.apply(change);
        self.finished |= change.finished_at.is_some();
        self.succeeded |= self.run.status == Success;
        if is_failure(event) {
            if let Some(attempt) = result_attempt(decided_on, event) {
                self.failures_counted.insert(attempt);
            }
        }
    }
}

/// What holds of every row a run can have, and of every write between two of them.
fn check_invariants(
    prev: &RunState,
    next: &RunState,
    change: Option<&Change>,
    model: &Model,
) -> Result<(), TestCaseError> {
    if prev.status.is_final() {
        prop_assert_eq!(next, prev, "a final run stays as it is");
    }
    if let Some(change) = change {
        prop_assert_eq!(
            change.finished_at.is_some(),
            change.status.is_some_and(RunStatus::is_final),
            "a write ends the run exactly when it sets finished_at: {:?}",
            change
        );
    }
    prop_assert_eq!(next.status.is_final(), model.finished);
    prop_assert!(next.attempt >= prev.attempt, "{:?} -> {:?}", prev, next);
    prop_assert!(
        next.dispatched >= prev.dispatched,
        "{:?} -> {:?}",
        prev,
        next
    );
    prop_assert!(next.attempt >= 1);
    prop_assert!(next.dispatched <= next.attempt, "{:?}", next);
    prop_assert_eq!(next.retries_used, next.attempt - 1);
    prop_assert!(next.retries_used <= next.retry.max_retry, "{:?}", next);
    match next.status {
        Ready if next.dispatched == next.attempt => {
            prop_assert!(next.claimed_until.is_some(), "held, no claim: {:?}", next)
        }
        Ready => prop_assert!(
            next.next_attempt_at.is_some(),
            "waiting, not due: {:?}",
            next
        ),
        Running => prop_assert_eq!(next.dispatched, next.attempt),
        Pending => prop_assert_eq!((next.attempt, next.dispatched), (1, 0)),
        Success | Failed | Missed | Skipped | Cancelled => {}
    }
    if model.succeeded {
        prop_assert_eq!(next.status, Success, "a SUCCESS is never lost");
    }
    Ok(())
}

/// A row in any state, its fields drawn independently — except that a PENDING row is at
/// attempt 1, none dispatched: no event leads to any other PENDING row (see
/// `histories_keep_the_rules`), and the blind writes need not agree on rows that never exist.
fn any_state() -> impl Strategy<Value = RunState> {
    (
        prop::sample::select(RunStatus::ALL),
        1..=5i32,
        0..=5i32,
        prop::option::of(0..300i64),
        prop::option::of(0..300i64),
        0..CLAIMANTS.len(),
        50..150i64,
        0..=3i32,
    )
        .prop_map(
            |(status, attempt, dispatched, next, claimed, claimant, scheduled, max_retry)| {
                let (attempt, dispatched) = match status {
                    Pending => (1, 0),
                    _ => (attempt, dispatched.min(attempt)),
                };
                RunState {
                    task_id: TaskId(1),
                    status,
                    attempt,
                    dispatched,
                    retries_used: (attempt - 1).min(max_retry),
                    next_attempt_at: next.map(at),
                    claimed_until: claimed.map(at),
                    claimant: CLAIMANTS[claimant].into(),
                    scheduled_at: at(scheduled),
                    retry: limits(max_retry),
                }
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2048))]

    /// Random histories — births, claims by several dispatchers, results for any attempt,
    /// duplicated and out of order, timeouts, dependency events, restarts, deletion, and
    /// writes decided on stale reads — keep every rule of the run.
    #[test]
    fn histories_keep_the_rules(
        (start, finished) in birth(),
        steps in prop::collection::vec(step(), 0..=40),
    ) {
        let mut model = Model::new(start.clone(), finished);
        check_invariants(&start, &start, None, &model)?;
        for step in &steps {
            let prev = model.run.clone();
            let change = model.step(step)?;
            check_invariants(&prev, &model.run, change.as_ref(), &model)?;
            model.history.push(model.run.clone());
        }
    }

    /// A blind write holds exactly where `on_event` decides a change, and is that change.
    #[test]
    fn blind_writes_agree_with_decisions(run in any_state(), gen in gen()) {
        let event = gen.event(&run);
        if let Some(write) = blind(&event) {
            let decided = on_event(&run, &event);
            if write.expect.holds(&run) {
                prop_assert_eq!(decided.map(|w| w.change), Ok(write.change), "{:?}", run);
            } else if let Ok(w) = decided {
                let mut after = run.clone();
                after.apply(&w.change);
                prop_assert_eq!(after, run, "decided, yet the blind write does not hold");
            }
        }
    }
}

proptest! {
    /// One row per (task, scheduled second): distinct pairs never share a request id.
    #[test]
    fn scheduled_request_ids_are_injective(
        pairs in prop::collection::hash_set((-50i64..200, -1000i64..3000), 1..300),
    ) {
        let mut seen = HashMap::new();
        for (task, second) in pairs {
            let id = RequestId::scheduled(TaskId(task), at(second));
            prop_assert_eq!(RequestId::parse(id.as_str()), Some(id.clone()));
            if let Some(other) = seen.insert(id.clone(), (task, second)) {
                prop_assert!(false, "{:?} and {:?} share {}", other, (task, second), id);
            }
        }
    }

    /// A run scheduled later has the greater id, whatever the tasks: a second's runs are
    /// neighbours in the request-id index.
    #[test]
    fn scheduled_request_ids_sort_by_their_second(
        (a, b) in (0i64..1_000_000, 0i64..1_000_000),
        (first, gap) in (0i64..4_000_000_000, 1i64..100_000),
        shard in 0i32..4,
    ) {
        let earlier = RequestId::scheduled_shard(TaskId(a), at(first), shard);
        let later = RequestId::scheduled(TaskId(b), at(first + gap));
        prop_assert!(earlier < later, "{} then {}", earlier, later);
    }
}

// ---------------------------------------------------------------------------------------------
// Ended attempts (a run's timeline)
// ---------------------------------------------------------------------------------------------

#[test]
fn a_failure_with_a_retry_ends_its_attempt_and_nothing_else_does() {
    let ends = |run: &RunState, event: &Event| {
        on_event(run, event)
            .ok()
            .and_then(|write| ended_attempt(run, event, &write))
    };
    let running = state(Running, 1, 1);
    let failing = report(
        Some(1),
        Outcome::Failed {
            code: Some("E1".into()),
            message: Some("boom".into()),
            retry: true,
        },
        140,
    );
    assert_eq!(
        ends(&running, &failing),
        Some(EndedAttempt {
            attempt: 1,
            at: at(140),
            code: Some("E1".into()),
            message: Some("boom".into()),
            process: "A".into(),
            member: None,
        })
    );
    let timed_out = ends(&running, &timed_out(1, 150)).expect("a timeout with a retry");
    assert_eq!(
        (timed_out.attempt, timed_out.code.as_deref()),
        (1, Some(TIMEOUT_CODE))
    );
    // The last attempt's outcome is the run's own (its row keeps it): no entry.
    assert_eq!(ends(&state(Running, 3, 3), &failed(Some(3), 140)), None);
    assert_eq!(ends(&running, &failed_for_good(Some(1), 140)), None);
    assert_eq!(ends(&running, &succeeded(Some(1), 140)), None);
    assert_eq!(ends(&state(Ready, 1, 1), &recovered("A", 140)), None);
}

/// A run of a batch the overlap policy decides, or an open run: distinct ids, few tasks (so
/// runs share them), few seconds (so they tie).
fn overlap_id(n: u128) -> RequestId {
    RequestId::from(uuid::Uuid::from_u128(n))
}

fn overlap_policy() -> impl Strategy<Value = OverlapPolicy> {
    prop::sample::select(OverlapPolicy::ALL.to_vec())
}

/// The due runs of a batch: (task, policy, scheduled second), ids 1000 + position, in time
/// order as fires and claims come.
fn due_batch() -> impl Strategy<Value = Vec<(i64, OverlapPolicy, i64)>> {
    prop::collection::vec((1..4i64, overlap_policy(), 0..20i64), 0..12).prop_map(|mut batch| {
        batch.sort_by_key(|&(_, _, second)| second);
        batch
    })
}

/// Open runs: (task, scheduled second, held back), ids 1 + position; some are due runs of the
/// batch themselves (a claimed run is open too).
fn open_set() -> impl Strategy<Value = (Vec<(i64, i64, bool)>, Vec<usize>)> {
    (
        prop::collection::vec((1..4i64, 0..20i64, prop::bool::weighted(0.3)), 0..8),
        prop::collection::vec(0..12usize, 0..3),
    )
}

fn due_runs<'a>(batch: &[(i64, OverlapPolicy, i64)], ids: &'a [RequestId]) -> Vec<DueRun<'a>> {
    batch
        .iter()
        .zip(ids)
        .map(|(&(task, policy, second), request_id)| DueRun {
            task_id: TaskId(task),
            policy,
            request_id,
            scheduled_at: at(second),
            sharded: false,
        })
        .collect()
}

fn open_map(
    open: &[(i64, i64, bool)],
    due_open: &[usize],
    due: &[DueRun<'_>],
) -> HashMap<TaskId, Vec<OpenRun>> {
    let mut map: HashMap<TaskId, Vec<OpenRun>> = HashMap::new();
    for (n, &(task, second, buffered)) in open.iter().enumerate() {
        map.entry(TaskId(task)).or_default().push(OpenRun {
            request_id: overlap_id(1 + n as u128),
            scheduled_at: at(second),
            buffered,
            sharded: false,
        });
    }
    for run in due_open.iter().filter_map(|&k| due.get(k)) {
        let runs = map.entry(run.task_id).or_default();
        if !runs.iter().any(|open| open.request_id == *run.request_id) {
            runs.push(OpenRun {
                request_id: run.request_id.clone(),
                scheduled_at: run.scheduled_at,
                buffered: false,
                sharded: false,
            });
        }
    }
    map
}

proptest! {
    /// One read of the open runs for a whole batch decides each run as a read of its own, made
    /// after the runs before it were written, would: the store may settle a batch at once.
    #[test]
    fn a_batch_is_decided_as_its_runs_one_by_one(
        batch in due_batch(),
        (open, due_open) in open_set(),
    ) {
        let ids: Vec<RequestId> = (0..batch.len()).map(|k| overlap_id(1000 + k as u128)).collect();
        let due = due_runs(&batch, &ids);
        let settled = on_due_runs(&due, open_map(&open, &due_open, &due));
        prop_assert_eq!(settled.decisions.len(), due.len());

        let mut rows = open_map(&open, &due_open, &due);
        let mut replaced = Vec::new();
        for (run, decision) in due.iter().zip(&settled.decisions) {
            let task_open = rows.get(&run.task_id).cloned().unwrap_or_default();
            let one = on_due_runs(std::slice::from_ref(run), HashMap::from([(run.task_id, task_open)]));
            prop_assert_eq!(&one.decisions[0], decision);
            // What the run's own write and the replaced runs' writes leave in the table.
            let runs = rows.entry(run.task_id).or_default();
            runs.retain(|other| !one.replaced.contains(&other.request_id));
            runs.retain(|other| other.request_id != *run.request_id);
            if decision.keeps_open() {
                runs.push(OpenRun {
                    request_id: run.request_id.clone(),
                    scheduled_at: run.scheduled_at,
                    buffered: *decision == Overlap::Buffer,
                    sharded: false,
                });
            }
            replaced.extend(one.replaced);
        }
        prop_assert_eq!(&settled.replaced, &replaced);
        let distinct: HashSet<&RequestId> = settled.replaced.iter().collect();
        prop_assert_eq!(distinct.len(), settled.replaced.len(), "a run is replaced once");
    }

    /// The store reads open runs only for the tasks whose policy can change a run: none when
    /// every policy is `ALLOW`, and then every run proceeds.
    #[test]
    fn only_tasks_with_a_policy_are_read(batch in due_batch()) {
        let ids: Vec<RequestId> = (0..batch.len()).map(|k| overlap_id(1000 + k as u128)).collect();
        let due = due_runs(&batch, &ids);
        let tasks = tasks_to_settle(&due);
        let mut want: Vec<TaskId> = due
            .iter()
            .filter(|run| run.policy != OverlapPolicy::Allow)
            .map(|run| run.task_id)
            .collect::<HashSet<_>>()
            .into_iter()
            .collect();
        want.sort_unstable();
        prop_assert_eq!(&tasks, &want);
        if tasks.is_empty() {
            let settled = on_due_runs(&due, HashMap::new());
            prop_assert!(settled.decisions.iter().all(|d| *d == Overlap::Proceed));
            prop_assert!(settled.replaced.is_empty());
        }
    }

    /// The rows a decision leaves are read back as it meant them: a held-back run is open and
    /// held (and released once nothing earlier is open), a skipped one is marked by the policy
    /// but not held, and a claimed first attempt the decision stops is stopped by its event.
    #[test]
    fn decisions_read_back_as_they_were_written(
        policy in overlap_policy(),
        (open, _) in open_set(),
        second in 0..20i64,
        attempt in 1..3i32,
        dispatched in 0..2i32,
    ) {
        let id = overlap_id(1000);
        let earlier: Vec<OpenRun> = open
            .iter()
            .enumerate()
            .map(|(n, &(_, s, buffered))| OpenRun {
                request_id: overlap_id(1 + n as u128),
                scheduled_at: at(s),
                buffered,
                sharded: false,
            })
            .filter(|run| run.is_before(at(second), &id, false))
            .collect();
        let decision = on_due(policy, &earlier);
        if let Some(birth) = decision.birth(None, at(second)) {
            prop_assert!(left_by_overlap(birth.code));
            prop_assert_eq!(
                held_by_overlap(birth.status, birth.code),
                decision == Overlap::Buffer
            );
            let row = OpenRun::of(id.clone(), at(second), birth.status, birth.code, false);
            prop_assert_eq!(row.buffered, decision == Overlap::Buffer);
        }
        prop_assert_eq!(buffer_released(&earlier, at(second), &id, false), earlier.is_empty());

        let run = state(Ready, attempt.max(dispatched), dispatched.min(attempt));
        let asks = claim_asks_overlap(&run, policy);
        prop_assert_eq!(
            asks,
            run.attempt == 1 && run.dispatched == 0 && policy != OverlapPolicy::Allow
        );
        if asks {
            if let Some(event) = decision.held_claim(at(second)) {
                prop_assert!(on_event(&run, &event).is_ok(), "{event:?}");
            }
        }
    }

    /// A result the store refused ends the attempt it reported on for good: it fails with
    /// `RESULT_REJECTED`, keeps the report's attempt and times, and never schedules a retry.
    #[test]
    fn a_rejected_result_fails_its_attempt_for_good(
        attempt in 1..4i32,
        outcome in outcome(),
        now in now(),
    ) {
        let run = state(Running, attempt, attempt);
        let outcome = match outcome {
            OutcomeGen::Accepted { deadline_after } => Outcome::Accepted { deadline: at(now + deadline_after) },
            OutcomeGen::Succeeded => Outcome::Succeeded { code: None, message: None },
            OutcomeGen::Failed { retry } => failure(retry),
        };
        let report = Report { attempt: Some(attempt), outcome, at: at(now), sent_at: Some(at(now)), member: None };
        let rejected = rejected_result(&report, "too long".into());
        prop_assert_eq!((rejected.attempt, rejected.at, rejected.sent_at), (report.attempt, report.at, report.sent_at));
        let is_rejection = matches!(
            &rejected.outcome,
            Outcome::Failed { code: Some(code), retry: false, .. } if code == RESULT_REJECTED_CODE
        );
        prop_assert!(is_rejection, "{:?}", rejected.outcome);
        let write = on_event(&run, &Event::Report(rejected));
        prop_assert!(matches!(&write, Ok(w) if w.change.status == Some(Failed)), "{write:?}");
    }
}

proptest! {
    /// A result folded into the acceptance still waiting to be written leaves the run as the
    /// two written in order would, and keeps when and to whom the attempt was sent.
    #[test]
    fn a_result_superseding_its_acceptance_ends_the_run_the_same(
        attempt in 1..3i32,
        name_attempt in any::<bool>(),
        outcome in outcome(),
        now in now(),
    ) {
        let run = state(Ready, attempt, attempt);
        let sent = Report {
            attempt: Some(attempt),
            outcome: Outcome::Accepted { deadline: at(now + 60) },
            at: at(now),
            sent_at: Some(at(now)),
            member: Some("http://127.0.0.1:9/".into()),
        };
        let accepted = Event::Report(sent.clone());
        let outcome = match outcome {
            OutcomeGen::Accepted { deadline_after } => Outcome::Accepted { deadline: at(now + deadline_after) },
            OutcomeGen::Succeeded => Outcome::Succeeded { code: None, message: None },
            OutcomeGen::Failed { retry } => failure(retry),
        };
        let result = report(name_attempt.then_some(attempt), outcome.clone(), now + 1);
        let Some(merged) = supersede(&accepted, &result) else {
            let was_acceptance = matches!(outcome, Outcome::Accepted { .. });
            prop_assert!(was_acceptance, "{:?}", outcome);
            return Ok(());
        };
        let mut in_order = run.clone();
        let first = on_event(&in_order, &accepted).expect("the acceptance applies");
        in_order.apply(&first.change);
        let second = on_event(&in_order, &result).expect("the result applies");
        in_order.apply(&second.change);
        let mut folded = run.clone();
        let write = on_event(&folded, &merged).expect("the folded result applies");
        folded.apply(&write.change);
        prop_assert_eq!(&folded, &in_order);
        prop_assert_eq!(write.change.dispatched_at, first.change.dispatched_at);
        prop_assert_eq!(write.change.member, first.change.member);
    }
}

#[test]
fn only_a_result_for_the_accepted_attempt_supersedes_it() {
    let sent = accepted(Some(2), 100, 10);
    assert!(supersede(&sent, &succeeded(Some(1), 11)).is_none());
    assert!(supersede(&sent, &sent.clone()).is_none());
    assert!(supersede(&succeeded(Some(2), 10), &succeeded(Some(2), 11)).is_none());
    assert!(supersede(&sent, &succeeded(Some(2), 11)).is_some());
    assert!(supersede(&sent, &succeeded(None, 11)).is_some());
    assert!(supersede(&accepted(None, 100, 10), &succeeded(None, 11)).is_none());
}
