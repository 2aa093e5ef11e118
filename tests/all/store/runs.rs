//! `crates/ax-store/src/queries/transitions.rs`, the write machinery: the SQL that `apply` makes of a write
//! does what the lifecycle's model says (`RunState::apply`), under the same condition
//! (`Expect::holds`), for one run and many to a statement; and `decide_many` decides several
//! events in order, each on what the previous left, as one-by-one `decide` would.

use ax_core::run::{
    blind, on_event, Change, Decided, Event, NewRun, Outcome, Refusal, Report, RequestId,
    RetryLimits, RetryPolicy, RunState, RunStatus, TaskId, Write,
};
use ax_store::queries::run_writes::Target;
use ax_store::queries::{run_writes, transitions};
use ax_store::rows::models::{NewRunRow, Run, Task, TaskStatus};
use ax_store::rows::schema::ax_instance::dsl as i;
use ax_store::{to_db, Db};
use chrono::{DateTime, Utc};
use diesel::prelude::*;
use diesel_async::RunQueryDsl;

use crate::store::support::{
    applied, at, base, born, columns, columns_of, conn, decide, fields, fired, insert_run,
    insert_task, instance, new_instance, on_every_backend, origin, request_id, state, with_retry,
};

on_every_backend!(
    sql_writes_match_the_model,
    decide_many_orders_events_of_one_run,
);

/// `base()` plus `n` seconds, as the lifecycle takes times.
fn t(n: i64) -> DateTime<Utc> {
    at(base()) + chrono::TimeDelta::seconds(n)
}

fn limits(task: &Task) -> RetryLimits {
    RetryLimits {
        max_retry: task.max_retry,
        policy: RetryPolicy::default().with_overrides(task.retry_backoff_secs, task.retry_factor),
    }
}

fn report(attempt: Option<i32>, outcome: Outcome, when: DateTime<Utc>) -> Event {
    Event::Report(Report {
        attempt,
        outcome,
        at: when,
        sent_at: None,
        member: None,
    })
}

fn ok(code: &str) -> Outcome {
    Outcome::Succeeded {
        code: Some(code.into()),
        message: Some("fine".into()),
    }
}

fn boom(retry: bool) -> Outcome {
    Outcome::Failed {
        code: Some("E".into()),
        message: Some("boom".into()),
        retry,
    }
}

fn accepted(deadline: DateTime<Utc>) -> Outcome {
    Outcome::Accepted { deadline }
}

fn claim(attempt: i32, claimant: &str, until: DateTime<Utc>, now: DateTime<Utc>) -> Event {
    Event::Claim {
        attempt,
        claimant: claimant.into(),
        until,
        at: now,
    }
}

/// Inserts a run of `task` in `run`'s state (with `deadline`, which the state leaves out),
/// and checks that `transitions::states` reads it back as it is.
async fn insert_state(
    db: &Db,
    task: &Task,
    run: &RunState,
    deadline: Option<DateTime<Utc>>,
) -> RequestId {
    let rid = request_id();
    let birth = NewRun {
        status: run.status,
        dispatched: run.dispatched,
        next_attempt_at: run.next_attempt_at,
        claimed_until: run.claimed_until,
        deadline_at: deadline,
        finished_at: None,
        code: None,
        message: None,
    };
    let mut who = origin(task.id, &rid, to_db(run.scheduled_at));
    who.fired_by = run.claimant.clone();
    insert_run(db, &NewRunRow::new(who, &birth)).await;
    // No birth has a later attempt: set it as it would be after retries.
    let (attempt, retries) = (run.attempt, run.retries_used);
    let mut c = conn(db).await;
    let changed = ax_store::with_conn!(&mut c, |c| diesel::update(
        i::ax_instance.filter(i::request_id.eq(&rid))
    )
    .set((i::attempt.eq(attempt), i::retry_count.eq(retries)))
    .execute(c)
    .await)
    .expect("set attempt");
    assert_eq!(changed, 1);
    drop(c);
    assert_eq!(state(db, &rid).await, *run, "the row as inserted");
    rid
}

async fn apply(db: &Db, writes: &[(&RequestId, &Write)]) -> usize {
    let writes: Vec<(Target, &Write)> = writes.iter().map(|(id, w)| ((*id).into(), *w)).collect();
    run_writes::apply(&mut conn(db).await, &writes, None)
        .await
        .expect("apply")
}

/// The columns a change sets hold its values; the others are as they were.
#[track_caller]
fn assert_change(name: &str, row: &Run, change: &Change, before: &Run) {
    let pick = |set: Option<Option<String>>, was: &Option<String>| set.unwrap_or(was.clone());
    let time = |set: Option<Option<DateTime<Utc>>>, was: Option<chrono::NaiveDateTime>| {
        set.map_or(was, |time| time.map(to_db))
    };
    assert_eq!(
        row.callback_code,
        pick(change.code.clone(), &before.callback_code),
        "{name}: code"
    );
    assert_eq!(
        row.callback_message,
        pick(change.message.clone(), &before.callback_message),
        "{name}: message"
    );
    assert_eq!(
        row.deadline_at,
        time(change.deadline_at, before.deadline_at),
        "{name}: deadline"
    );
    assert_eq!(
        row.finished_at,
        change.finished_at.map(to_db).or(before.finished_at),
        "{name}: finished"
    );
    assert_eq!(
        row.trigger_at,
        change.due_at.map_or(before.trigger_at, to_db),
        "{name}: due"
    );
    assert_eq!(
        (row.task_id, row.scheduled_at, row.created_at),
        (before.task_id, before.scheduled_at, before.created_at),
        "{name}: what no write touches"
    );
}

/// One starting state and an event whose write is checked, with a competing event whose
/// write lands first and takes the first write's condition away.
struct Case {
    name: &'static str,
    task: Task,
    state: RunState,
    deadline: Option<DateTime<Utc>>,
    event: Event,
    competitor: Event,
}

/// Every write shape the lifecycle produces, applied by the store, equals the model.
async fn sql_writes_match_the_model(db: &Db) {
    use RunStatus::*;
    let three = insert_task(db, fields("three", "s", TaskStatus::Enabled, None)).await;
    let none = insert_task(
        db,
        with_retry(fields("none", "s", TaskStatus::Enabled, None), 0),
    )
    .await;
    let mut custom = with_retry(fields("custom", "s", TaskStatus::Enabled, None), 2);
    custom.retry_backoff_secs = Some(2);
    custom.retry_factor = Some(3);
    let custom = insert_task(db, custom).await;

    let run = |task: &Task, status, attempt: i32, dispatched| RunState {
        task_id: task.id,
        status,
        attempt,
        dispatched,
        retries_used: attempt - 1,
        next_attempt_at: None,
        claimed_until: None,
        claimant: "A".into(),
        scheduled_at: t(0),
        retry: limits(task),
    };
    // A retry due at +20; a first attempt due now (manual); a claim held until +40; an
    // attempt the handler took; a run waiting for its upstreams.
    let due_retry = RunState {
        next_attempt_at: Some(t(20)),
        ..run(&three, Ready, 2, 1)
    };
    let due_first = RunState {
        next_attempt_at: Some(t(0)),
        ..run(&three, Ready, 1, 0)
    };
    let held = |task: &Task| RunState {
        claimed_until: Some(t(40)),
        ..run(task, Ready, 1, 1)
    };
    let running = |task: &Task| run(task, Running, 1, 1);
    let pending = run(&three, Pending, 1, 0);
    let (deadline, waits) = (Some(t(30)), Some(t(60)));
    let case = |name, task: &Task, state: &RunState, deadline, event, competitor| Case {
        name,
        task: task.clone(),
        state: state.clone(),
        deadline,
        event,
        competitor,
    };
    let cases = vec![
        case(
            "claim of a due retry",
            &three,
            &due_retry,
            None,
            claim(2, "B", t(70), t(20)),
            claim(2, "C", t(80), t(25)),
        ),
        case(
            "claim of a due first attempt",
            &three,
            &due_first,
            None,
            claim(1, "B", t(50), t(1)),
            Event::TaskDeleted { at: t(1) },
        ),
        case(
            "claim of a lapsed claim",
            &three,
            &held(&three),
            None,
            claim(1, "B", t(90), t(41)),
            claim(1, "C", t(95), t(45)),
        ),
        case(
            "accepted",
            &three,
            &held(&three),
            None,
            report(Some(1), accepted(t(30)), t(1)),
            report(Some(1), boom(true), t(2)),
        ),
        case(
            "accepted, no attempt named",
            &three,
            &held(&three),
            None,
            report(None, accepted(t(30)), t(1)),
            report(Some(1), ok("OK"), t(2)),
        ),
        case(
            "succeeded",
            &three,
            &running(&three),
            deadline,
            report(Some(1), ok("OK"), t(3)),
            Event::TimedOut {
                attempt: 1,
                at: t(31),
            },
        ),
        case(
            "succeeded while READY",
            &three,
            &held(&three),
            None,
            report(None, ok("OK"), t(3)),
            report(None, accepted(t(30)), t(1)),
        ),
        case(
            "succeeded, an earlier attempt",
            &three,
            &due_retry,
            None,
            report(Some(1), ok("LATE"), t(21)),
            claim(2, "B", t(70), t(20)),
        ),
        case(
            "failed, a retry left",
            &three,
            &running(&three),
            deadline,
            report(None, boom(true), t(4)),
            report(None, ok("OK"), t(3)),
        ),
        case(
            "failed, a retry left on the task's own back-off",
            &custom,
            &running(&custom),
            deadline,
            report(Some(1), boom(true), t(4)),
            Event::TaskDeleted { at: t(2) },
        ),
        case(
            "failed, no retry left",
            &none,
            &running(&none),
            deadline,
            report(None, boom(true), t(4)),
            Event::TaskDeleted { at: t(2) },
        ),
        case(
            "failed, not to be retried",
            &three,
            &held(&three),
            None,
            report(Some(1), boom(false), t(4)),
            report(Some(1), boom(true), t(2)),
        ),
        case(
            "timed out",
            &three,
            &running(&three),
            deadline,
            Event::TimedOut {
                attempt: 1,
                at: t(31),
            },
            report(Some(1), boom(true), t(4)),
        ),
        case(
            "timed out, no retry left",
            &none,
            &running(&none),
            deadline,
            Event::TimedOut {
                attempt: 1,
                at: t(31),
            },
            report(Some(1), ok("OK"), t(4)),
        ),
        case(
            "released",
            &three,
            &pending,
            waits,
            Event::Released { at: t(10) },
            Event::UpstreamFailed { at: t(9) },
        ),
        case(
            "upstream failed",
            &three,
            &pending,
            waits,
            Event::UpstreamFailed { at: t(10) },
            Event::Released { at: t(9) },
        ),
        case(
            "dependency timed out",
            &three,
            &pending,
            waits,
            Event::DependencyTimedOut { at: t(60) },
            Event::Released { at: t(9) },
        ),
        case(
            "recovered",
            &three,
            &held(&three),
            None,
            Event::Recovered {
                claimant: "A".into(),
                at: t(5),
            },
            Event::Fenced {
                claimant: "A".into(),
                unsent_from: t(0),
                at: t(6),
            },
        ),
        case(
            "recovered, committed ahead",
            &three,
            &RunState {
                scheduled_at: t(8),
                ..held(&three)
            },
            None,
            Event::Recovered {
                claimant: "A".into(),
                at: t(5),
            },
            claim(1, "C", t(95), t(41)),
        ),
        case(
            "fenced",
            &three,
            &held(&three),
            None,
            Event::Fenced {
                claimant: "A".into(),
                unsent_from: t(0),
                at: t(5),
            },
            claim(1, "C", t(95), t(41)),
        ),
        case(
            "task deleted, READY",
            &three,
            &due_retry,
            None,
            Event::TaskDeleted { at: t(7) },
            claim(2, "B", t(70), t(20)),
        ),
        case(
            "task deleted, RUNNING",
            &three,
            &running(&three),
            deadline,
            Event::TaskDeleted { at: t(7) },
            report(Some(1), boom(true), t(4)),
        ),
        case(
            "task deleted, PENDING",
            &three,
            &pending,
            waits,
            Event::TaskDeleted { at: t(7) },
            Event::Released { at: t(6) },
        ),
    ];

    for case in &cases {
        let write = on_event(&case.state, &case.event)
            .unwrap_or_else(|refusal| panic!("{}: refused {refusal:?}", case.name));
        check_write(db, case, case.name, &write, true).await;
        // A blind write applies where `on_event`'s would, and does the same.
        if let Some(blind) = blind(&case.event) {
            let name = format!("{} (blind)", case.name);
            assert!(blind.expect.holds(&case.state), "{name}");
            let mut by_event = case.state.clone();
            by_event.apply(&write.change);
            let mut by_blind = case.state.clone();
            by_blind.apply(&blind.change);
            assert_eq!(by_blind, by_event, "{name}");
            check_write(db, case, &name, &blind, false).await;
        }
    }
}

/// Applies `write` (decided on `case.state`) to fresh rows in that state: alone, twice, two
/// rows in one statement, and after the competitor's write. `invalidated`: the competitor
/// must take the write's condition away.
async fn check_write(db: &Db, case: &Case, name: &str, write: &Write, invalidated: bool) {
    let (task, start) = (&case.task, &case.state);
    let mut model = start.clone();
    model.apply(&write.change);

    let rid = insert_state(db, task, start, case.deadline).await;
    let before = instance(db, &rid).await;
    assert_eq!(apply(db, &[(&rid, write)]).await, 1, "{name}");
    assert_eq!(state(db, &rid).await, model, "{name}: as the model says");
    let after = instance(db, &rid).await;
    assert_change(name, &after, &write.change, &before);
    // Its condition does not hold on its own result: a second time changes nothing.
    assert!(
        !write.expect.holds(&model),
        "{name}: the model applies it twice"
    );
    assert_eq!(
        apply(db, &[(&rid, write)]).await,
        0,
        "{name}: applied twice"
    );
    assert_eq!(columns_of(db, &rid).await, columns(&after), "{name}");

    // Two runs in one statement.
    let (x, y) = (
        insert_state(db, task, start, case.deadline).await,
        insert_state(db, task, start, case.deadline).await,
    );
    let befores = [instance(db, &x).await, instance(db, &y).await];
    assert_eq!(apply(db, &[(&x, write), (&y, write)]).await, 2, "{name}");
    for (rid, before) in [&x, &y].into_iter().zip(&befores) {
        assert_eq!(state(db, rid).await, model, "{name}: many to a statement");
        assert_change(name, &instance(db, rid).await, &write.change, before);
    }

    // Another write first.
    let rid = insert_state(db, task, start, case.deadline).await;
    let other = on_event(start, &case.competitor)
        .unwrap_or_else(|refusal| panic!("{name}: competitor refused {refusal:?}"));
    assert_eq!(apply(db, &[(&rid, &other)]).await, 1, "{name}: competitor");
    let mut now = start.clone();
    now.apply(&other.change);
    assert_eq!(state(db, &rid).await, now, "{name}: competitor");
    let holds = write.expect.holds(&now);
    if invalidated {
        assert!(!holds, "{name}: the competitor leaves the condition");
    }
    let between = instance(db, &rid).await;
    let changed = apply(db, &[(&rid, write)]).await;
    assert_eq!(changed, usize::from(holds), "{name}: after the competitor");
    if holds {
        now.apply(&write.change);
        assert_change(name, &instance(db, &rid).await, &write.change, &between);
    } else {
        assert_eq!(columns_of(db, &rid).await, columns(&between), "{name}");
    }
    assert_eq!(state(db, &rid).await, now, "{name}: after the competitor");
}

async fn decide_many(db: &Db, events: &[(RequestId, Event)]) -> Vec<Decided> {
    transitions::decide_many(&mut conn(db).await, events, RetryPolicy::default(), None)
        .await
        .expect("decide_many")
}

/// How a run of the mix is born, and made ready for its events.
#[derive(Clone, Copy)]
enum Birth {
    Fired,
    Running,
    Pending,
    Manual,
    Missed,
}

async fn decide_many_orders_events_of_one_run(db: &Db) {
    use RunStatus::*;
    let task = insert_task(db, fields("many", "s", TaskStatus::Enabled, None)).await;

    // Three results for one run and others between them, in one call.
    let (r, x, unknown) = (request_id(), request_id(), request_id());
    insert_run(db, &fired(task.id, &r, base())).await;
    insert_run(db, &fired(task.id, &x, base())).await;
    let start = state(db, &r).await;
    let events = vec![
        (r.clone(), report(Some(1), boom(true), t(1))),
        (x.clone(), report(Some(1), accepted(t(30)), t(1))),
        (r.clone(), report(Some(1), ok("OK"), t(2))),
        (unknown.clone(), report(None, ok("OK"), t(2))),
        (r.clone(), report(None, boom(true), t(3))),
    ];
    let outcomes = decide_many(db, &events).await;
    // Each decided on the state the previous one left.
    let mut failed = start.clone();
    failed.apply(&on_event(&start, &events[0].1).expect("failure").change);
    assert_eq!(
        (failed.status, failed.attempt, failed.retries_used),
        (Ready, 2, 1)
    );
    assert_eq!(failed.next_attempt_at, Some(t(1 + 5)));
    let mut succeeded = failed.clone();
    succeeded.apply(&on_event(&failed, &events[2].1).expect("success").change);
    assert_eq!(
        (succeeded.status, succeeded.attempt),
        (Success, 2),
        "a SUCCESS of the attempt dispatched ends the run"
    );
    let x_running = state(db, &x).await;
    assert_eq!(x_running.status, Running, "x's write landed");
    assert_eq!(
        outcomes,
        vec![
            Decided::Applied(failed),
            Decided::Applied(x_running),
            Decided::Applied(succeeded.clone()),
            Decided::Unknown,
            Decided::Refused(Refusal::Final(Success), succeeded.clone()),
        ]
    );
    assert_eq!(state(db, &r).await, succeeded);
    let row = instance(db, &r).await;
    assert_eq!(row.status, Success);
    assert_eq!(
        (row.attempt, row.dispatched_attempt, row.retry_count),
        (2, 1, 1)
    );
    assert_eq!(row.callback_code.as_deref(), Some("OK"));
    assert_eq!(row.finished_at, Some(to_db(t(2))));
    assert_eq!((row.next_attempt_at, row.claimed_until), (None, None));

    // A mix over many runs, twice: decided in one call, and one by one. Each birth with the
    // events of its run; every birth twice, so single writes share statements.
    let births: Vec<(Birth, Vec<Event>)> = vec![
        (Birth::Fired, vec![report(Some(1), accepted(t(30)), t(1))]),
        (Birth::Fired, vec![report(Some(1), ok("A"), t(2))]),
        (Birth::Fired, vec![report(None, boom(true), t(2))]),
        (Birth::Fired, vec![report(Some(1), boom(false), t(2))]),
        (Birth::Fired, vec![report(Some(99), ok("B"), t(2))]),
        (Birth::Fired, vec![Event::TaskDeleted { at: t(3) }]),
        (Birth::Running, vec![report(None, ok("C"), t(3))]),
        (Birth::Running, vec![report(Some(1), boom(true), t(3))]),
        (
            Birth::Running,
            vec![Event::TimedOut {
                attempt: 1,
                at: t(31),
            }],
        ),
        (Birth::Running, vec![report(None, accepted(t(40)), t(3))]),
        (Birth::Pending, vec![Event::Released { at: t(4) }]),
        (Birth::Pending, vec![Event::UpstreamFailed { at: t(4) }]),
        (
            Birth::Pending,
            vec![Event::DependencyTimedOut { at: t(60) }],
        ),
        (Birth::Manual, vec![claim(1, "node-b", t(50), t(1))]),
        (Birth::Missed, vec![report(None, ok("D"), t(2))]),
        (
            Birth::Fired,
            vec![
                report(Some(1), accepted(t(30)), t(1)),
                report(None, ok("E"), t(5)),
            ],
        ),
        (
            Birth::Fired,
            vec![
                report(Some(1), boom(true), t(1)),
                claim(2, "node-b", t(60), t(6)),
                report(Some(2), accepted(t(36)), t(6)),
            ],
        ),
    ];
    let mut sets: Vec<Vec<RequestId>> = Vec::new();
    for set in 0..2 {
        let name = format!("set-{set}");
        let set_task = insert_task(db, fields(&name, "s", TaskStatus::Enabled, None)).await;
        let mut rids = Vec::new();
        for copy in 0..2 {
            for (k, (birth, _)) in births.iter().enumerate() {
                rids.push(born_as(db, &set_task, *birth, (copy * births.len() + k) as i64).await);
            }
        }
        sets.push(rids);
    }
    // Round robin: the first event of every run, then the second ones, …
    let events_of = |rids: &[RequestId]| {
        let mut events: Vec<(RequestId, Event)> = Vec::new();
        for round in 0..3 {
            for (n, rid) in rids.iter().enumerate() {
                if let Some(event) = births[n % births.len()].1.get(round) {
                    events.push((rid.clone(), event.clone()));
                }
            }
        }
        events.push((request_id(), report(None, ok("F"), t(9))));
        events
    };
    let (at_once, one_by_one) = (events_of(&sets[0]), events_of(&sets[1]));
    let batched = decide_many(db, &at_once).await;
    let mut single = Vec::new();
    for (rid, event) in &one_by_one {
        single.push(decide(db, rid, event).await);
    }
    assert_eq!(batched.len(), at_once.len());
    // The two sets are runs of two tasks: alike but for the task.
    let of_no_task = |decided: &Decided| match decided.clone() {
        Decided::Applied(run) => Decided::Applied(RunState {
            task_id: TaskId(0),
            ..run
        }),
        Decided::Refused(why, run) => Decided::Refused(
            why,
            RunState {
                task_id: TaskId(0),
                ..run
            },
        ),
        Decided::Unknown => Decided::Unknown,
    };
    for (n, (got, want)) in batched.iter().zip(&single).enumerate() {
        assert_eq!(
            of_no_task(got),
            of_no_task(want),
            "event {n}: {:?}",
            at_once[n].1
        );
    }
    for (a, b) in sets[0].iter().zip(&sets[1]) {
        assert_eq!(columns_of(db, a).await, columns_of(db, b).await);
    }
    // The mix did change runs of every kind.
    let applied_count = batched
        .iter()
        .filter(|d| matches!(d, Decided::Applied(_)))
        .count();
    let refused_count = batched
        .iter()
        .filter(|d| matches!(d, Decided::Refused(..)))
        .count();
    assert_eq!((applied_count, refused_count), (2 * 17, 2 * 3));
}

/// A run of `task` born as `birth` (its scheduled time `base() + n` seconds, its claimant
/// "node-test"), made ready for its events.
async fn born_as(db: &Db, task: &Task, birth: Birth, n: i64) -> RequestId {
    let rid = request_id();
    let scheduled = base() + chrono::TimeDelta::seconds(n);
    let row = match birth {
        Birth::Fired | Birth::Running => fired(task.id, &rid, scheduled),
        Birth::Pending => born(
            task.id,
            &rid,
            scheduled,
            &NewRun::waiting_for_upstreams(t(60)),
        ),
        Birth::Manual => born(task.id, &rid, scheduled, &NewRun::due(t(0))),
        Birth::Missed => {
            let mut row = new_instance(task.id, &rid, scheduled, RunStatus::Missed);
            row.finished_at = Some(scheduled);
            row
        }
    };
    insert_run(db, &row).await;
    if let Birth::Running = birth {
        let outcome = decide(db, &rid, &report(Some(1), accepted(t(30)), t(0))).await;
        assert_eq!(applied(outcome).status, RunStatus::Running);
    }
    rid
}
