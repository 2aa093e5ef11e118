//! Behavioural tests for the public API.

use std::time::{Duration, Instant};

use chrono::{DateTime, Datelike, NaiveDate, TimeZone, Timelike, Utc};

use super::{CronError, CronSchedule};

mod dst;
mod quartz;

fn at(y: i32, mo: u32, d: u32, h: u32, mi: u32, s: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(y, mo, d, h, mi, s).unwrap()
}

fn sched(expr: &str) -> CronSchedule {
    CronSchedule::parse(expr).unwrap_or_else(|e| panic!("`{expr}` should parse: {e}"))
}

fn next(expr: &str, after: DateTime<Utc>) -> DateTime<Utc> {
    sched(expr)
        .next_after(after)
        .unwrap_or_else(|| panic!("`{expr}` should fire after {after}"))
}

/// The first `n` fire times after `start`.
fn chain(expr: &str, start: DateTime<Utc>, n: usize) -> Vec<DateTime<Utc>> {
    let s = sched(expr);
    let mut out = Vec::with_capacity(n);
    let mut t = start;
    for _ in 0..n {
        t = s.next_after(t).expect("fires");
        out.push(t);
    }
    out
}

fn err(expr: &str) -> CronError {
    match CronSchedule::parse(expr) {
        Ok(s) => panic!("`{expr}` should be rejected, parsed as {s:?}"),
        Err(e) => e,
    }
}

/// Asserts the error's field and that its message quotes `token`.
fn assert_field_err(expr: &str, field: &str, token: &str) -> CronError {
    let e = err(expr);
    assert_eq!(e.field(), Some(field), "`{expr}`: {e}");
    let msg = e.to_string();
    assert!(
        msg.contains(&format!("`{token}`")),
        "`{expr}`: message `{msg}` should name `{token}`"
    );
    assert!(
        msg.contains(field),
        "`{expr}`: message `{msg}` should name field {field}"
    );
    e
}

// ---------------------------------------------------------------- basics

#[test]
fn api_basics() {
    let s: CronSchedule = "  0 */5 * * * *\t".parse().unwrap();
    assert_eq!(s.expression(), "0 */5 * * * *");
    assert_eq!(s.to_string(), "0 */5 * * * *");
    assert_eq!(s.clone(), s);
    assert_ne!(s, sched("0 */10 * * * *"));
}

#[test]
fn every_second_and_strictly_after() {
    let t = at(2024, 5, 17, 10, 20, 30);
    assert_eq!(next("* * * * * *", t), at(2024, 5, 17, 10, 20, 31));
    // A fire time itself is not returned again.
    assert_eq!(next("30 20 10 * * *", t), at(2024, 5, 18, 10, 20, 30));
}

#[test]
fn sub_second_part_ignored_and_result_whole_seconds() {
    let t = at(2024, 5, 17, 10, 20, 30) + chrono::Duration::milliseconds(999);
    let n = next("* * * * * *", t);
    assert_eq!(n, at(2024, 5, 17, 10, 20, 31));
    assert_eq!(n.nanosecond(), 0);
    let t = at(2024, 5, 17, 10, 20, 29) + chrono::Duration::nanoseconds(1);
    assert_eq!(next("30 * * * * *", t), at(2024, 5, 17, 10, 20, 30));
}

#[test]
fn whitespace_runs_tabs_and_trim() {
    let a = sched("0 30 9 * * 1");
    let b = sched(" \t0  30\t\t9 *   * 1 \n");
    let t = at(2024, 1, 1, 0, 0, 0);
    assert_eq!(a.next_after(t), b.next_after(t));
    assert_eq!(b.expression(), "0  30\t\t9 *   * 1");
}

#[test]
fn five_field_form_means_second_zero() {
    let t = at(2024, 3, 10, 8, 59, 59);
    assert_eq!(next("30 9 * * *", t), at(2024, 3, 10, 9, 30, 0));
    assert_eq!(
        next("* * * * *", at(2024, 3, 10, 8, 0, 1)),
        at(2024, 3, 10, 8, 1, 0)
    );
    assert_eq!(
        next("*/15 * * * *", at(2024, 3, 10, 8, 0, 0)),
        at(2024, 3, 10, 8, 15, 0)
    );
}

// ---------------------------------------------------------------- field syntax

#[test]
fn lists_ranges_and_steps() {
    let start = at(2024, 1, 1, 0, 0, 0);
    assert_eq!(
        chain("0 5,10,50 * * * *", start, 4),
        vec![
            at(2024, 1, 1, 0, 5, 0),
            at(2024, 1, 1, 0, 10, 0),
            at(2024, 1, 1, 0, 50, 0),
            at(2024, 1, 1, 1, 5, 0)
        ]
    );
    assert_eq!(
        chain("0 0 22-23,1 * * *", start, 4),
        vec![
            at(2024, 1, 1, 1, 0, 0),
            at(2024, 1, 1, 22, 0, 0),
            at(2024, 1, 1, 23, 0, 0),
            at(2024, 1, 2, 1, 0, 0)
        ]
    );
    assert_eq!(
        chain("*/20 * * * * *", start, 4),
        vec![
            at(2024, 1, 1, 0, 0, 20),
            at(2024, 1, 1, 0, 0, 40),
            at(2024, 1, 1, 0, 1, 0),
            at(2024, 1, 1, 0, 1, 20)
        ]
    );
    assert_eq!(
        chain("0 10-40/15 * * * *", start, 4),
        vec![
            at(2024, 1, 1, 0, 10, 0),
            at(2024, 1, 1, 0, 25, 0),
            at(2024, 1, 1, 0, 40, 0),
            at(2024, 1, 1, 1, 10, 0)
        ]
    );
    // a/n: a, a+n, ... up to the field max.
    assert_eq!(
        chain("0 0 20/2 * * *", start, 3),
        vec![
            at(2024, 1, 1, 20, 0, 0),
            at(2024, 1, 1, 22, 0, 0),
            at(2024, 1, 2, 20, 0, 0)
        ]
    );
    assert_eq!(
        chain("0 0 0 */10 * *", start, 5),
        vec![
            at(2024, 1, 11, 0, 0, 0),
            at(2024, 1, 21, 0, 0, 0),
            at(2024, 1, 31, 0, 0, 0),
            at(2024, 2, 1, 0, 0, 0),
            at(2024, 2, 11, 0, 0, 0)
        ]
    );
    assert_eq!(
        chain("0 0 0 1 */5 *", start, 3),
        vec![
            at(2024, 6, 1, 0, 0, 0),
            at(2024, 11, 1, 0, 0, 0),
            at(2025, 1, 1, 0, 0, 0)
        ]
    );
}

#[test]
fn names_any_case() {
    let start = at(2024, 1, 1, 0, 0, 0); // Monday
    assert_eq!(next("0 0 0 1 jul *", start), at(2024, 7, 1, 0, 0, 0));
    assert_eq!(next("0 0 0 1 Jul *", start), next("0 0 0 1 7 *", start));
    assert_eq!(next("0 0 0 1 feb-MAR *", start), at(2024, 2, 1, 0, 0, 0));
    assert_eq!(next("0 0 12 * * wed", start), at(2024, 1, 3, 12, 0, 0));
    assert_eq!(next("0 0 12 * * Sat-sun", start), at(2024, 1, 6, 12, 0, 0));
    assert_eq!(
        chain("0 0 9 * * MON-FRI", at(2024, 1, 5, 10, 0, 0), 2),
        vec![at(2024, 1, 8, 9, 0, 0), at(2024, 1, 9, 9, 0, 0)]
    );
    assert_eq!(next("0 0 0 * JAN,jun SUN", start), at(2024, 1, 7, 0, 0, 0));
}

#[test]
fn sunday_is_0_and_7() {
    let start = at(2024, 1, 1, 0, 0, 0); // Monday; next Sunday is Jan 7
    for e in [
        "0 0 0 * * 0",
        "0 0 0 * * 7",
        "0 0 0 * * SUN",
        "0 0 0 * * 6-7",
    ] {
        assert_eq!(
            next(e, at(2024, 1, 6, 12, 0, 0)),
            at(2024, 1, 7, 0, 0, 0),
            "{e}"
        );
    }
    assert_eq!(next("0 0 0 * * 7", start), at(2024, 1, 7, 0, 0, 0));
    assert_eq!(
        sched("0 0 0 * * 0").next_after(start),
        sched("0 0 0 * * 7").next_after(start)
    );
    // 6-7 = Saturday + Sunday
    assert_eq!(
        chain("0 0 0 * * 6-7", start, 2),
        vec![at(2024, 1, 6, 0, 0, 0), at(2024, 1, 7, 0, 0, 0)]
    );
}

#[test]
fn question_mark_in_day_fields() {
    let start = at(2024, 1, 1, 0, 0, 0);
    assert_eq!(
        next("0 0 0 ? * MON", at(2024, 1, 2, 0, 0, 0)),
        at(2024, 1, 8, 0, 0, 0)
    );
    assert_eq!(next("0 0 0 15 * ?", start), at(2024, 1, 15, 0, 0, 0));
    assert_eq!(next("0 0 0 ? * ?", start), at(2024, 1, 2, 0, 0, 0));
    for (e, field) in [
        ("? * * * * *", "second"),
        ("0 ? * * * *", "minute"),
        ("0 0 ? * * *", "hour"),
        ("0 0 0 * ? *", "month"),
    ] {
        let er = assert_field_err(e, field, "?");
        assert!(matches!(er, CronError::QuestionMarkNotAllowed { .. }));
    }
}

#[test]
fn dom_and_dow_intersect() {
    // Friday the 13ths: 2024-09-13, 2024-12-13, 2025-06-13, 2026-02-13.
    assert_eq!(
        chain("0 0 0 13 * FRI", at(2024, 1, 1, 0, 0, 0), 4),
        vec![
            at(2024, 9, 13, 0, 0, 0),
            at(2024, 12, 13, 0, 0, 0),
            at(2025, 6, 13, 0, 0, 0),
            at(2026, 2, 13, 0, 0, 0)
        ]
    );
    for t in chain("0 0 0 1-7 * MON", at(2024, 1, 1, 0, 0, 0), 24) {
        assert!(t.day() <= 7 && t.weekday() == chrono::Weekday::Mon, "{t}");
    }
    // One side `*`: only the other restricts.
    assert_eq!(
        chain("0 0 0 * * FRI", at(2024, 1, 1, 0, 0, 0), 1),
        vec![at(2024, 1, 5, 0, 0, 0)]
    );
    assert_eq!(
        chain("0 0 0 13 * *", at(2024, 1, 1, 0, 0, 0), 1),
        vec![at(2024, 1, 13, 0, 0, 0)]
    );
}

// ---------------------------------------------------------------- macros

#[test]
fn macros() {
    let t = at(2024, 5, 17, 10, 20, 30); // Friday
    let cases = [
        ("@yearly", at(2025, 1, 1, 0, 0, 0)),
        ("@annually", at(2025, 1, 1, 0, 0, 0)),
        ("@monthly", at(2024, 6, 1, 0, 0, 0)),
        ("@weekly", at(2024, 5, 19, 0, 0, 0)),
        ("@daily", at(2024, 5, 18, 0, 0, 0)),
        ("@midnight", at(2024, 5, 18, 0, 0, 0)),
        ("@hourly", at(2024, 5, 17, 11, 0, 0)),
        ("@HOURLY", at(2024, 5, 17, 11, 0, 0)),
        ("@Daily", at(2024, 5, 18, 0, 0, 0)),
    ];
    for (m, want) in cases {
        let s = sched(m);
        assert_eq!(s.next_after(t), Some(want), "{m}");
        assert_eq!(s.expression(), m);
    }
    assert_eq!(
        sched("@yearly").next_after(t),
        sched("0 0 0 1 1 *").next_after(t)
    );
    for bad in ["@fortnightly", "@", "@daily *", "@reboot"] {
        let e = err(bad);
        assert!(matches!(e, CronError::UnknownMacro(_)), "{bad}: {e}");
        assert_eq!(e.field(), None);
        assert!(e.to_string().contains(bad), "{e}");
    }
}

// ---------------------------------------------------------------- calendar

#[test]
fn year_rollover() {
    assert_eq!(
        next("* * * * * *", at(2023, 12, 31, 23, 59, 59)),
        at(2024, 1, 1, 0, 0, 0)
    );
    assert_eq!(
        next("0 0 0 1 1 *", at(2023, 6, 1, 0, 0, 0)),
        at(2024, 1, 1, 0, 0, 0)
    );
    assert_eq!(
        next("0 0 0 1 1 *", at(2024, 1, 1, 0, 0, 0)),
        at(2025, 1, 1, 0, 0, 0)
    );
    assert_eq!(
        next("59 59 23 31 12 *", at(2024, 12, 31, 23, 59, 59)),
        at(2025, 12, 31, 23, 59, 59)
    );
    assert_eq!(
        next("0 0 0 * JAN MON", at(2024, 12, 31, 0, 0, 0)),
        at(2025, 1, 6, 0, 0, 0)
    );
}

#[test]
fn month_lengths() {
    assert_eq!(
        chain("0 0 0 31 * *", at(2024, 1, 31, 0, 0, 0), 4),
        vec![
            at(2024, 3, 31, 0, 0, 0),
            at(2024, 5, 31, 0, 0, 0),
            at(2024, 7, 31, 0, 0, 0),
            at(2024, 8, 31, 0, 0, 0)
        ]
    );
    assert_eq!(
        next("0 0 0 30 * *", at(2023, 1, 30, 0, 0, 0)),
        at(2023, 3, 30, 0, 0, 0)
    );
    assert_eq!(
        next("0 0 0 * * *", at(2023, 4, 30, 0, 0, 0)),
        at(2023, 5, 1, 0, 0, 0)
    );
    assert_eq!(
        next("0 0 0 * * *", at(2023, 2, 28, 0, 0, 0)),
        at(2023, 3, 1, 0, 0, 0)
    );
    assert_eq!(
        next("0 0 0 * * *", at(2024, 2, 28, 0, 0, 0)),
        at(2024, 2, 29, 0, 0, 0)
    );
}

#[test]
fn leap_day() {
    assert_eq!(
        chain("0 0 0 29 2 *", at(2023, 1, 1, 0, 0, 0), 3),
        vec![
            at(2024, 2, 29, 0, 0, 0),
            at(2028, 2, 29, 0, 0, 0),
            at(2032, 2, 29, 0, 0, 0)
        ]
    );
    // 2000 is a leap year; 2100 is not, so 2096 is followed by 2104.
    assert_eq!(
        next("0 0 0 29 2 *", at(1999, 3, 1, 0, 0, 0)),
        at(2000, 2, 29, 0, 0, 0)
    );
    assert_eq!(
        next("0 0 0 29 2 *", at(2096, 2, 29, 0, 0, 0)),
        at(2104, 2, 29, 0, 0, 0)
    );
    assert_eq!(
        next("0 0 0 29 2 *", at(1896, 2, 29, 0, 0, 0)),
        at(1904, 2, 29, 0, 0, 0)
    );
}

#[test]
fn leap_day_monday_jumps_2072_to_2112() {
    let s = sched("0 0 0 29 2 MON");
    let begin = Instant::now();
    assert_eq!(
        s.next_after(at(2072, 2, 29, 0, 0, 0)),
        Some(at(2112, 2, 29, 0, 0, 0))
    );
    assert_eq!(
        s.next_after(at(2072, 1, 1, 0, 0, 0)),
        Some(at(2072, 2, 29, 0, 0, 0))
    );
    // Field jumping visits ~40 Februaries; even unoptimised this is microseconds.
    assert!(
        begin.elapsed() < Duration::from_millis(50),
        "took {:?}",
        begin.elapsed()
    );
}

#[test]
fn rare_but_valid_expressions_are_accepted() {
    for e in [
        "0 0 0 29 2 *",
        "0 0 0 29 2 MON",
        "0 0 0 31 12 SUN",
        "0 0 0 30 4 ?",
        "0 0 0 29 FEB SUN",
    ] {
        assert!(CronSchedule::parse(e).is_ok(), "{e}");
    }
}

#[test]
fn never_firing_expressions_rejected() {
    for e in [
        "0 0 0 31 2 *",
        "0 0 0 30 2 *",
        "0 0 0 31 4,6,9,11 *",
        "0 0 31 2 *",
        "0 0 0 30-31 FEB ?",
    ] {
        let er = err(e);
        assert!(matches!(er, CronError::NeverFires(_)), "{e}: {er}");
        assert_eq!(er.field(), None);
        assert!(er.to_string().contains("never fires"), "{er}");
    }
}

#[test]
fn far_future_and_chrono_range_end() {
    // Near the end of chrono's range: None instead of a panic or wrong date.
    let max = DateTime::<Utc>::MAX_UTC;
    assert_eq!(sched("* * * * * *").next_after(max), None);
    assert_eq!(
        sched("0 0 0 1 1 *").next_after(max - chrono::Duration::days(2)),
        None
    );
    let min = DateTime::<Utc>::MIN_UTC;
    assert!(sched("0 0 0 1 1 *").next_after(min).is_some());
    assert_eq!(
        next("0 0 0 1 1 *", at(-1, 6, 1, 0, 0, 0)),
        at(0, 1, 1, 0, 0, 0)
    );
}

#[test]
fn previews_stop_at_the_end_of_9999() {
    let fires: Vec<_> = sched("* * * * * *")
        .upcoming(at(9999, 12, 31, 23, 59, 58), 10)
        .into_iter()
        .map(|fire| fire.utc)
        .collect();
    assert_eq!(fires, [at(9999, 12, 31, 23, 59, 59)]);
    assert!(sched("0 0 0 1 1 *")
        .upcoming(at(9999, 6, 1, 0, 0, 0), 3)
        .is_empty());
    // `next_after` itself is not bounded by it: the scheduler's own range is chrono's.
    assert_eq!(
        sched("0 0 0 1 1 *").next_after(at(9999, 6, 1, 0, 0, 0)),
        Some(at(10_000, 1, 1, 0, 0, 0))
    );
}

// ---------------------------------------------------------------- errors

#[test]
fn error_empty_and_field_counts() {
    for e in ["", "   ", "\t\n"] {
        assert_eq!(err(e), CronError::Empty);
        assert_eq!(err(e).field(), None);
    }
    for (e, n) in [("*", 1), ("* *", 2), ("* * * *", 4), ("* * * * * * * *", 8)] {
        let er = err(e);
        assert_eq!(er, CronError::FieldCount(n));
        let msg = er.to_string();
        assert!(
            msg.contains(&n.to_string()) && msg.contains('5') && msg.contains('6'),
            "{msg}"
        );
        assert_eq!(er.field(), None);
    }
    let er = err("0 0 0 1 1 * 2024");
    assert_eq!(er, CronError::YearFieldUnsupported);
    assert!(
        er.to_string().contains("year field is not supported"),
        "{er}"
    );
    assert_eq!(er.field(), None);
}

#[test]
fn error_out_of_range() {
    for (e, field, tok) in [
        ("60 * * * * *", "second", "60"),
        ("* 60 * * * *", "minute", "60"),
        ("* * 24 * * *", "hour", "24"),
        ("* * * 0 * *", "dayOfMonth", "0"),
        ("* * * 32 * *", "dayOfMonth", "32"),
        ("* * * * 0 *", "month", "0"),
        ("* * * * 13 *", "month", "13"),
        ("* * * * * 8", "dayOfWeek", "8"),
        ("* 1-60 * * * *", "minute", "60"),
        ("* * 5,25 * * *", "hour", "25"),
        ("* * * * 14/2 *", "month", "14"),
        (
            "99999999999999999999 * * * * *",
            "second",
            "99999999999999999999",
        ),
        ("61 * * * *", "minute", "61"),
    ] {
        let er = assert_field_err(e, field, tok);
        assert!(matches!(er, CronError::OutOfRange { .. }), "{e}: {er}");
        assert!(er.to_string().contains("out of range"), "{er}");
    }
}

#[test]
fn error_steps() {
    for (e, field, tok) in [
        ("*/0 * * * * *", "second", "*/0"),
        ("0 5-10/0 * * * *", "minute", "5-10/0"),
    ] {
        let er = assert_field_err(e, field, tok);
        assert!(matches!(er, CronError::ZeroStep { .. }), "{e}: {er}");
    }
    for (e, field, tok) in [
        ("*/ * * * * *", "second", "*/"),
        ("0 */x * * * *", "minute", "*/x"),
        ("0 0 1/2/3 * * *", "hour", "1/2/3"),
        ("0 0 0 1/-2 * *", "dayOfMonth", "1/-2"),
        ("0 0 0 * 1/+2 *", "month", "1/+2"),
    ] {
        let er = assert_field_err(e, field, tok);
        assert!(matches!(er, CronError::InvalidStep { .. }), "{e}: {er}");
    }
    // Larger than the field's range: such a step never repeats within it.
    for (e, field, tok) in [
        ("*/99 * * * * *", "second", "*/99"),
        ("25 */61 * * * *", "minute", "*/61"),
        ("0 0 0-23/25 * * *", "hour", "0-23/25"),
        ("0 0 0 1/32 * *", "dayOfMonth", "1/32"),
        ("0 0 0 * */13 *", "month", "*/13"),
        ("0 0 0 * * MON/8", "dayOfWeek", "MON/8"),
        ("0 1,2/99 * * * *", "minute", "2/99"),
    ] {
        let er = assert_field_err(e, field, tok);
        assert!(matches!(er, CronError::StepTooLarge { .. }), "{e}: {er}");
        assert!(
            er.to_string().contains("larger than the field's range"),
            "{er}"
        );
    }
    // As large as the range: once per cycle, which is what it says.
    assert_eq!(
        chain("*/60 * * * * *", at(2027, 1, 1, 0, 0, 0), 2),
        [at(2027, 1, 1, 0, 1, 0), at(2027, 1, 1, 0, 2, 0)]
    );
}

/// A task stored by an earlier ax with a step larger than its field's range keeps firing as
/// it did: at the item's first value.
#[test]
fn a_stored_step_larger_than_its_range_fires_as_before() {
    let fires = |expr: &str| {
        let s = CronSchedule::parse_stored(expr).expect("stored");
        s.upcoming(at(2027, 1, 1, 0, 0, 30), 2)
            .into_iter()
            .map(|fire| fire.utc)
            .collect::<Vec<_>>()
    };
    assert_eq!(
        fires("*/99 * * * * *"),
        [at(2027, 1, 1, 0, 1, 0), at(2027, 1, 1, 0, 2, 0)]
    );
    assert_eq!(
        fires("25 */61 * * * *"),
        [at(2027, 1, 1, 1, 0, 25), at(2027, 1, 1, 2, 0, 25)]
    );
    // Anything else stored is read as any expression is.
    assert_eq!(
        CronSchedule::parse_stored("0 0 0 31 2 *"),
        CronSchedule::parse("0 0 0 31 2 *")
    );
    assert_eq!(
        CronSchedule::parse_stored("*/15 * * * * *"),
        CronSchedule::parse("*/15 * * * * *")
    );
}

#[test]
fn error_reversed_range() {
    for (e, field, tok) in [
        ("5-2 * * * * *", "second", "5-2"),
        ("0 0 0 * DEC-JAN *", "month", "DEC-JAN"),
        ("0 0 0 * * FRI-MON", "dayOfWeek", "FRI-MON"),
        ("0 0 0 * * 7-1", "dayOfWeek", "7-1"),
    ] {
        let er = assert_field_err(e, field, tok);
        assert!(matches!(er, CronError::ReversedRange { .. }), "{e}: {er}");
    }
}

#[test]
fn error_unknown_tokens() {
    for (e, field, tok) in [
        ("x * * * * *", "second", "x"),
        ("0 0 0 * FOO *", "month", "FOO"),
        ("0 0 0 * * MONDAY", "dayOfWeek", "MONDAY"),
        ("0 0 0 * * JAN", "dayOfWeek", "JAN"),
        ("-1 * * * * *", "second", "-1"),
        ("1-/2 * * * * *", "second", "1-/2"),
        ("a-b-c * * * * *", "second", "a-b-c"),
        ("0 +5 * * * *", "minute", "+5"),
        ("0 0 ** * * *", "hour", "**"),
        ("0 0 0 ½ * *", "dayOfMonth", "½"),
        ("0 0 0 * * 1.5", "dayOfWeek", "1.5"),
    ] {
        let er = assert_field_err(e, field, tok);
        assert!(matches!(er, CronError::UnknownToken { .. }), "{e}: {er}");
    }
}

#[test]
fn error_empty_list_items() {
    for (e, field, tok) in [
        ("1,,2 * * * * *", "second", "1,,2"),
        ("0 1, * * * *", "minute", "1,"),
        ("0 0 ,3 * * *", "hour", ",3"),
        ("0 0 0 * , *", "month", ","),
    ] {
        let er = assert_field_err(e, field, tok);
        assert!(matches!(er, CronError::EmptyListItem { .. }), "{e}: {er}");
    }
}

#[test]
fn error_unsupported_quartz_forms() {
    for (e, field, tok) in [
        ("0 H * * * *", "minute", "H"),
        ("0 H/15 * * * *", "minute", "H/15"),
        ("0 0 H(0-5) * * *", "hour", "H(0-5)"),
        ("0 0 L * * *", "hour", "L"),
        ("0 0 0 H * *", "dayOfMonth", "H"),
        ("0 0 0 5#3 * *", "dayOfMonth", "5#3"),
        ("0 0 0 6L * *", "dayOfMonth", "6L"),
        ("0 0 0 W * *", "dayOfMonth", "W"),
        ("0 0 0 ? * LW", "dayOfWeek", "LW"),
        ("0 0 0 ? * 5W", "dayOfWeek", "5W"),
        ("0 0 0 ? * L", "dayOfWeek", "L"),
        ("0 0 0 ? L *", "month", "L"),
        ("0 0 0 ? 1#2 *", "month", "1#2"),
    ] {
        let er = assert_field_err(e, field, tok);
        assert!(matches!(er, CronError::QuartzExtension { .. }), "{e}: {er}");
        assert!(er.to_string().contains("not supported"), "{er}");
    }
}

#[test]
fn no_panic_on_junk() {
    let junk = [
        "",
        "*",
        "* * * * * * * *",
        "99999999999999999999 * * * * *",
        "*/99999999999999999999 * * * * *",
        "0-99999999999999999999 * * * * *",
        "-1 * * * * *",
        "*/ * * * * *",
        "1-/2 * * * * *",
        "a-b-c * * * * *",
        "ü * * * * *",
        "日本 * * * * *",
        "* * * * * 🙂",
        "\u{0} * * * * *",
        "* * * * * *\u{200b}",
        "/ / / / / /",
        "- - - - - -",
        ", , , , , ,",
        "@",
        "@@daily",
        "@daily\u{0}",
        "#",
        "1#",
        "#1 * * * * *",
        "/1 * * * * *",
        "1/ * * * * *",
        "*-5 * * * * *",
        "5-* * * * * *",
        "?/2 * * * * *",
        "0 0 0 ?/2 * *",
        "0 0 0 ?-3 * *",
        "L-L * * * * *",
        "H( * * * * *",
        "0 0 0 * * 0-7/0",
        "0 0 0 * * SUN-SUN",
        "0 0 0 * * 7-7",
        "0 0 0 * * 7/1",
        "0 0 0 * * ---",
        "0 0 0 31 2 MON",
        "0 0 0 * * mon-sun",
        "\t\t\t",
        "63 63 63 63 63 63",
        "4294967295 * * * * *",
        "4294967296 * * * * *",
        "*/4294967295 * * * * *",
        "*/18446744073709551616 * * * * *",
    ];
    for j in junk {
        // Must return (Ok or Err) without panicking; valid ones must not hang.
        if let Ok(s) = CronSchedule::parse(j) {
            let _ = s.next_after(at(2024, 1, 1, 0, 0, 0));
            let _ = s.next_after(DateTime::<Utc>::MAX_UTC);
            let _ = s.next_after(DateTime::<Utc>::MIN_UTC);
        } else if let Err(e) = CronSchedule::parse(j) {
            let _ = (e.to_string(), e.field());
        }
    }
    // Generated junk: every short string over a small alphabet.
    let alphabet = [
        '1', '7', '*', '-', '/', ',', '?', 'L', 'W', '#', ' ', 'a', 'J',
    ];
    let mut buf = String::new();
    for a in alphabet {
        for b in alphabet {
            for c in alphabet {
                for d in alphabet {
                    buf.clear();
                    buf.extend([a, b, c, d]);
                    for expr in [
                        format!("{buf} * * * * *"),
                        format!("0 0 0 {buf} * {buf}"),
                        format!("0 0 0 * {buf} {buf}"),
                    ] {
                        if let Ok(s) = CronSchedule::parse(&expr) {
                            assert!(s.next_after(at(2024, 1, 1, 0, 0, 0)).is_some(), "{expr}");
                        }
                    }
                }
            }
        }
    }
}

// ---------------------------------------------------------------- brute force

/// Naive matcher, independent of the engine: walks days with chrono's own
/// calendar, then hours/minutes/seconds, collecting fire times in order.
fn brute_force(expr: &str, after: DateTime<Utc>, days: i64, limit: usize) -> Vec<DateTime<Utc>> {
    // Raw field masks (the engine itself only keeps combined day masks).
    let m = super::parse::parse_masks(expr.trim(), super::parse::Steps::Bounded).expect("valid");
    let bit = |mask: u64, v: u32| mask & (1u64 << v) != 0;
    let mut out = Vec::new();
    let start_day = after.date_naive();
    for i in 0..days {
        let date: NaiveDate = start_day + chrono::Duration::days(i);
        if !bit(u64::from(m.months), date.month())
            || !bit(u64::from(m.dom.days), date.day())
            || !bit(u64::from(m.dow.days), date.weekday().num_days_from_sunday())
        {
            continue;
        }
        for h in 0..24 {
            if !bit(u64::from(m.hours), h) {
                continue;
            }
            for mi in 0..60 {
                if !bit(m.minutes, mi) {
                    continue;
                }
                for sec in 0..60 {
                    if !bit(m.seconds, sec) {
                        continue;
                    }
                    let t = Utc.from_utc_datetime(&date.and_hms_opt(h, mi, sec).unwrap());
                    if t > after {
                        out.push(t);
                        if out.len() == limit {
                            return out;
                        }
                    }
                }
            }
        }
    }
    out
}

#[test]
fn brute_force_consistency() {
    let exprs = [
        "* * * * * *",
        "*/7 * * * * *",
        "0 */5 * * * *",
        "30 30 9-17 * * MON-FRI",
        "0 0 0 1 * *",
        "0 0 12 * * MON-FRI",
        "0 30 2 */2 * *",
        "0 0 0 29 2 *",
        "0 0 0 13 * FRI",
        "0 0 0 1-7 * MON",
        "15,45 10 3,15 * * SAT,SUN",
        "0 0 0 31 * *",
        "0 0 0 30 * ?",
        "0 0 6 ? JAN,JUL 7",
        "0 59 23 28-31 * *",
        "1/13 2/17 1/5 3/9 2/3 1/2",
        "0 0 0 * * 0",
        "@weekly",
        "*/30 0 0 1 1 *",
    ];
    let starts = [
        at(2023, 12, 31, 23, 59, 59),
        at(2024, 2, 28, 12, 0, 0) + chrono::Duration::milliseconds(500),
        at(1999, 12, 31, 23, 0, 0),
        at(2099, 11, 30, 0, 0, 0),
        at(2024, 9, 13, 0, 0, 0),
        at(-1, 12, 31, 23, 59, 59),
        at(2399, 6, 1, 0, 0, 0),
        at(200_000, 2, 27, 23, 59, 0),
    ];
    for expr in exprs {
        sched(expr); // every listed expression must be valid
        for start in starts {
            // Long windows for sparse schedules, short for dense ones.
            let want = brute_force(expr, start, 366 * 9, 300);
            assert!(!want.is_empty(), "{expr} from {start}");
            let got = chain(expr, start, want.len());
            assert_eq!(got, want, "{expr} from {start}");
        }
    }
}

/// Pseudo-random expressions (fixed-seed LCG) against the brute force.
#[test]
fn brute_force_random_expressions() {
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut rnd = |n: u32| {
        seed = seed
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        ((seed >> 33) % u64::from(n)) as u32
    };
    let field = |min: u32, max: u32, rnd: &mut dyn FnMut(u32) -> u32| -> String {
        let span = max - min + 1;
        match rnd(6) {
            0 => "*".to_string(),
            1 => format!("{}", min + rnd(span)),
            2 => {
                let a = min + rnd(span);
                let b = a + rnd(max - a + 1);
                format!("{a}-{b}")
            }
            3 => format!("*/{}", 1 + rnd(span)),
            4 => format!("{}/{}", min + rnd(span), 1 + rnd(span)),
            _ => format!("{},{}", min + rnd(span), min + rnd(span)),
        }
    };
    let mut tested = 0;
    for _ in 0..150 {
        let expr = format!(
            "{} {} {} {} {} {}",
            field(0, 59, &mut rnd),
            field(0, 59, &mut rnd),
            field(0, 23, &mut rnd),
            field(1, 31, &mut rnd),
            field(1, 12, &mut rnd),
            field(0, 7, &mut rnd),
        );
        let Ok(_) = CronSchedule::parse(&expr) else {
            continue;
        };
        let start = at(
            2020 + rnd(10) as i32,
            1 + rnd(12),
            1 + rnd(28),
            rnd(24),
            rnd(60),
            rnd(60),
        );
        let want = brute_force(&expr, start, 366 * 30, 50);
        let got = chain(&expr, start, want.len());
        assert_eq!(got, want, "{expr} from {start}");
        tested += 1;
    }
    assert!(tested > 100, "only {tested} random expressions parsed");
}
