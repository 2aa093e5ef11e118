//! Quartz day forms: each form, months of each length, leap years, unions,
//! the AND with the other day field, errors, and an independent matcher.

use chrono::{Datelike, Duration, NaiveDate, Weekday};

use super::{assert_field_err, at, chain, err, sched};
use crate::CronError;

/// The fire dates (midnight UTC) of `expr` from 2024-01-01, `n` of them.
fn dates(expr: &str, n: usize) -> Vec<(i32, u32, u32)> {
    chain(expr, at(2023, 12, 31, 23, 59, 59), n)
        .into_iter()
        .map(|t| (t.year(), t.month(), t.day()))
        .collect()
}

#[test]
fn last_day_of_the_month() {
    assert_eq!(
        dates("0 0 0 L * *", 4),
        [(2024, 1, 31), (2024, 2, 29), (2024, 3, 31), (2024, 4, 30)]
    );
    assert_eq!(
        chain("0 0 0 L 2 *", at(2023, 1, 1, 0, 0, 0), 3),
        [
            at(2023, 2, 28, 0, 0, 0),
            at(2024, 2, 29, 0, 0, 0),
            at(2025, 2, 28, 0, 0, 0)
        ]
    );
    // Lower case, and `L-0` is `L`.
    assert_eq!(dates("0 0 0 l * *", 3), dates("0 0 0 L-0 * *", 3));
}

#[test]
fn days_before_the_last() {
    assert_eq!(
        dates("0 0 0 L-2 * *", 4),
        [(2024, 1, 29), (2024, 2, 27), (2024, 3, 29), (2024, 4, 28)]
    );
    // L-30 is the 1st of 31-day months only.
    assert_eq!(
        dates("0 0 0 L-30 * *", 4),
        [(2024, 1, 1), (2024, 3, 1), (2024, 5, 1), (2024, 7, 1)]
    );
    // L-28 in February: the 1st of leap Februaries only.
    assert_eq!(
        chain("0 0 0 L-28 2 *", at(2021, 1, 1, 0, 0, 0), 2),
        [at(2024, 2, 1, 0, 0, 0), at(2028, 2, 1, 0, 0, 0)]
    );
}

#[test]
fn nearest_weekday() {
    // 2024-06-15 is a Saturday (→ Friday 14th); 2024-09-15 a Sunday (→ Monday 16th).
    let fires = dates("0 0 0 15W * *", 12);
    assert_eq!(fires[5], (2024, 6, 14));
    assert_eq!(fires[8], (2024, 9, 16));
    assert_eq!(fires[0], (2024, 1, 15));
    // 1W: Saturday the 1st → Monday the 3rd; Sunday the 1st → Monday the 2nd.
    let fires = dates("0 0 0 1W * *", 12);
    assert_eq!(fires[5], (2024, 6, 3));
    assert_eq!(fires[8], (2024, 9, 2));
    // 31W only in 31-day months; Sunday the 31st → Friday 29th, Saturday → Friday 30th.
    assert_eq!(
        dates("0 0 0 31W * *", 5),
        [
            (2024, 1, 31),
            (2024, 3, 29),
            (2024, 5, 31),
            (2024, 7, 31),
            (2024, 8, 30)
        ]
    );
    // 30W: June 2024 ends on Sunday the 30th → Friday 28th; no 30th in February.
    let fires = dates("0 0 0 30W * *", 6);
    assert_eq!(fires[1], (2024, 3, 29)); // Saturday 30th → Friday
    assert_eq!(fires[4], (2024, 6, 28));
    assert!(!fires.iter().any(|&(_, m, _)| m == 2));
}

#[test]
fn last_weekday_of_the_month() {
    let fires = dates("0 0 0 LW * *", 12);
    assert_eq!(fires[0], (2024, 1, 31));
    assert_eq!(fires[1], (2024, 2, 29));
    assert_eq!(fires[2], (2024, 3, 29)); // Sunday the 31st
    assert_eq!(fires[5], (2024, 6, 28)); // Sunday the 30th
    assert_eq!(fires[7], (2024, 8, 30)); // Saturday the 31st
    assert_eq!(fires[10], (2024, 11, 29)); // Saturday the 30th
    assert_eq!(dates("0 0 0 lw * *", 3), dates("0 0 0 LW * *", 3));
}

#[test]
fn last_weekday_n() {
    let last_fridays = [(2024, 1, 26), (2024, 2, 23), (2024, 3, 29)];
    for expr in ["0 0 0 ? * 5L", "0 0 0 ? * FRIL", "0 0 0 * * fril"] {
        assert_eq!(dates(expr, 3), last_fridays, "{expr}");
    }
    for expr in ["0 0 0 ? * 0L", "0 0 0 ? * 7L", "0 0 0 ? * SUNL"] {
        assert_eq!(dates(expr, 2), [(2024, 1, 28), (2024, 2, 25)], "{expr}");
    }
}

#[test]
fn nth_weekday() {
    for expr in ["0 0 0 ? * MON#2", "0 0 0 ? * 1#2", "0 0 0 ? * mon#2"] {
        assert_eq!(dates(expr, 2), [(2024, 1, 8), (2024, 2, 12)], "{expr}");
    }
    for expr in ["0 0 0 ? * 0#1", "0 0 0 ? * 7#1", "0 0 0 ? * SUN#1"] {
        assert_eq!(dates(expr, 2), [(2024, 1, 7), (2024, 2, 4)], "{expr}");
    }
    assert_eq!(
        dates("0 0 0 ? * MON#5", 5),
        [
            (2024, 1, 29),
            (2024, 4, 29),
            (2024, 7, 29),
            (2024, 9, 30),
            (2024, 12, 30)
        ]
    );
    // A fifth Monday in February: leap years whose February starts on a Monday.
    assert_eq!(
        chain("0 0 0 ? 2 MON#5", at(2000, 1, 1, 0, 0, 0), 3),
        [
            at(2016, 2, 29, 0, 0, 0),
            at(2044, 2, 29, 0, 0, 0),
            at(2072, 2, 29, 0, 0, 0)
        ]
    );
}

#[test]
fn list_items_are_unions() {
    assert_eq!(
        dates("0 0 0 1,L * *", 4),
        [(2024, 1, 1), (2024, 1, 31), (2024, 2, 1), (2024, 2, 29)]
    );
    assert_eq!(
        dates("0 0 0 15W,LW * *", 3),
        [(2024, 1, 15), (2024, 1, 31), (2024, 2, 15)]
    );
    assert_eq!(
        dates("0 0 0 ? * MON#1,FRIL", 3),
        [(2024, 1, 1), (2024, 1, 26), (2024, 2, 5)]
    );
    // `*` in a list selects every day, whatever else is listed.
    assert_eq!(dates("0 0 0 *,L * *", 3), dates("0 0 0 * * *", 3));
}

#[test]
fn and_with_the_other_day_field() {
    // The last day of the month, when it is a Friday.
    assert_eq!(
        dates("0 0 0 L * FRI", 3),
        [(2024, 5, 31), (2025, 1, 31), (2025, 2, 28)]
    );
    // The first Monday, when it is among the first three days.
    assert_eq!(
        dates("0 0 0 1-3 * MON#1", 3),
        [(2024, 1, 1), (2024, 4, 1), (2024, 6, 3)]
    );
    // Both Quartz: the last weekday of the month, when it is the last Friday.
    assert_eq!(dates("0 0 0 LW * 5L", 3), dates("0 0 0 LW * FRI", 3));
    // `?` and `*` leave the other field alone.
    assert_eq!(dates("0 0 0 L * ?", 3), dates("0 0 0 L * *", 3));
    assert_eq!(dates("0 0 0 ? * 5L", 3), dates("0 0 0 * * 5L", 3));
}

#[test]
fn never_firing_quartz_expressions_are_rejected() {
    for expr in [
        "0 0 0 30W 2 *",
        "0 0 0 31W 4,6,9,11 *",
        "0 0 0 L-29 2 *",
        "0 0 0 LW * SAT,SUN",
        "0 0 0 1-20 * 5L",
        "0 0 0 1-7 * MON#2",
    ] {
        assert!(
            matches!(err(expr), CronError::NeverFires(_)),
            "{expr} should never fire"
        );
    }
    sched("0 0 0 29W 2 *"); // leap years only, still fires
    sched("0 0 0 L-28 2 *");
}

#[test]
fn errors_name_the_field_and_token() {
    for (e, field, tok) in [
        ("0 0 0 L-40 * *", "dayOfMonth", "L-40"),
        ("0 0 0 L-31 * *", "dayOfMonth", "L-31"),
        ("0 0 0 32W * *", "dayOfMonth", "32W"),
        ("0 0 0 0W * *", "dayOfMonth", "0W"),
        ("0 0 0 ? * MON#6", "dayOfWeek", "MON#6"),
        ("0 0 0 ? * 1#0", "dayOfWeek", "1#0"),
        ("0 0 0 ? * 1#", "dayOfWeek", "1#"),
        ("0 0 0 ? * 1#x", "dayOfWeek", "1#x"),
    ] {
        let er = assert_field_err(e, field, tok);
        assert!(matches!(er, CronError::InvalidQuartz { .. }), "{e}: {er}");
    }
    for (e, field, tok) in [
        ("0 0 0 ? * 8#1", "dayOfWeek", "8"),
        ("0 0 0 ? * 8L", "dayOfWeek", "8"),
    ] {
        let er = assert_field_err(e, field, tok);
        assert!(matches!(er, CronError::OutOfRange { .. }), "{e}: {er}");
    }
    for (e, field, tok) in [
        ("0 0 0 1-L * *", "dayOfMonth", "1-L"),
        ("0 0 0 L/2 * *", "dayOfMonth", "L/2"),
        ("0 0 0 L-3/2 * *", "dayOfMonth", "L-3/2"),
        ("0 0 0 1W-5 * *", "dayOfMonth", "1W-5"),
        ("0 0 0 ? * 1-5L", "dayOfWeek", "1-5L"),
        ("0 0 0 ? * MON#2/2", "dayOfWeek", "MON#2/2"),
        ("0 0 0 ? * 1-2#3", "dayOfWeek", "1-2#3"),
    ] {
        let er = assert_field_err(e, field, tok);
        assert!(matches!(er, CronError::QuartzInRange { .. }), "{e}: {er}");
    }
    // `#` in day-of-month and `LW` in day-of-week are Quartz forms in the wrong field.
    for (e, field, tok) in [
        ("0 0 0 1#2 * *", "dayOfMonth", "1#2"),
        ("0 0 0 # * *", "dayOfMonth", "#"),
        ("0 0 0 ? * LW", "dayOfWeek", "LW"),
    ] {
        let er = assert_field_err(e, field, tok);
        assert!(matches!(er, CronError::QuartzExtension { .. }), "{e}: {er}");
    }
}

// ---------------------------------------------------------------- independent matcher

/// Quartz's definitions, written directly against chrono's calendar.
fn quartz_day_matches(item: &str, date: NaiveDate) -> bool {
    let first = date.with_day(1).expect("day 1");
    let last = (first + Duration::days(31)).with_day(1).expect("day 1") - Duration::days(1);
    let is_weekday = |d: NaiveDate| !matches!(d.weekday(), Weekday::Sat | Weekday::Sun);
    let month_days = first.iter_days().take_while(|d| d.month() == first.month());
    let wd = |s: &str| -> u32 {
        let n: u32 = s.parse().expect("weekday number");
        n % 7
    };
    if item == "L" {
        date == last
    } else if item == "LW" {
        Some(date) == month_days.filter(|d| is_weekday(*d)).last()
    } else if let Some(n) = item.strip_prefix("L-") {
        (last - date).num_days() == n.parse::<i64>().expect("n")
    } else if let Some(n) = item.strip_suffix('W') {
        let n: u32 = n.parse().expect("n");
        // The Monday-Friday day of the month nearest day n (ties are impossible).
        n <= last.day()
            && Some(date)
                == month_days
                    .filter(|d| is_weekday(*d))
                    .min_by_key(|d| d.day().abs_diff(n))
    } else if let Some(n) = item.strip_suffix('L') {
        date.weekday().num_days_from_sunday() == wd(n) && date + Duration::days(7) > last
    } else if let Some((n, k)) = item.split_once('#') {
        let same: Vec<NaiveDate> = month_days
            .filter(|d| d.weekday().num_days_from_sunday() == wd(n))
            .collect();
        same.get(k.parse::<usize>().expect("k") - 1) == Some(&date)
    } else {
        panic!("not a Quartz item: {item}")
    }
}

/// Random Quartz day expressions, chained, against the direct definitions.
#[test]
fn quartz_forms_match_their_definitions() {
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut rnd = |n: u32| {
        seed = seed
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        ((seed >> 33) % u64::from(n)) as u32
    };
    let mut tested = 0;
    for _ in 0..300 {
        let dom_item = match rnd(5) {
            0 => "L".to_string(),
            1 => "LW".to_string(),
            2 => format!("L-{}", rnd(31)),
            3 => format!("{}W", 1 + rnd(31)),
            _ => "?".to_string(),
        };
        let dow_item = match rnd(3) {
            0 => format!("{}L", rnd(8)),
            1 => format!("{}#{}", rnd(8), 1 + rnd(5)),
            _ => "*".to_string(),
        };
        let expr = format!("0 0 0 {dom_item} * {dow_item}");
        let Ok(s) = crate::CronSchedule::parse(&expr) else {
            continue;
        };
        let start = NaiveDate::from_ymd_opt(2020 + rnd(30) as i32, 1 + rnd(12), 1).expect("date");
        let want: Vec<_> = start
            .iter_days()
            .skip(1)
            .take(366 * 8)
            .filter(|d| {
                [&dom_item, &dow_item]
                    .iter()
                    .all(|i| matches!(i.as_str(), "?" | "*") || quartz_day_matches(i, *d))
            })
            .map(|d| d.and_hms_opt(0, 0, 0).expect("midnight").and_utc())
            .collect();
        let mut got = Vec::new();
        let mut t = start.and_hms_opt(0, 0, 0).expect("midnight").and_utc();
        while got.len() < want.len() {
            t = s.next_after(t).expect("fires");
            got.push(t);
        }
        assert_eq!(got, want, "{expr} from {start}");
        tested += 1;
    }
    assert!(tested > 200, "only {tested} expressions parsed");
}
