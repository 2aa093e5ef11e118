//! Schedules in time zones: the examples, and an independent
//! brute-force scanner over local wall-clock time around real transitions.

use chrono::{DateTime, Datelike, Duration, NaiveDate, NaiveDateTime, TimeZone, Timelike, Utc};
use jiff::tz::{AmbiguousOffset, TimeZone as JiffZone, TimeZoneDatabase};

use super::{at, sched};
use crate::{CronSchedule, Fire, Zone};

fn zoned(expr: &str, zone: &str) -> CronSchedule {
    sched(expr).in_zone(Zone::parse(zone).expect("known zone"))
}

/// Fires as `local time with offset` strings, with their notes.
fn preview(
    expr: &str,
    zone: &str,
    after: DateTime<Utc>,
    n: usize,
) -> Vec<(String, Option<String>)> {
    zoned(expr, zone)
        .upcoming(after, n)
        .into_iter()
        .map(|f| (f.local.to_rfc3339(), f.note))
        .collect()
}

fn plain(local: &str) -> (String, Option<String>) {
    (local.to_string(), None)
}

fn noted(local: &str, note: &str) -> (String, Option<String>) {
    (local.to_string(), Some(note.to_string()))
}

// ---------------------------------------------------------------- the examples

#[test]
fn berlin_gap_fixed_time_moves_to_the_end_of_the_gap() {
    let s = zoned("0 30 2 * * *", "Europe/Berlin");
    assert_eq!(
        s.next_after(at(2027, 3, 27, 12, 0, 0)),
        Some(at(2027, 3, 28, 1, 0, 0))
    );
    assert_eq!(
        preview(
            "0 30 2 * * *",
            "Europe/Berlin",
            at(2027, 3, 27, 12, 0, 0),
            2
        ),
        [
            noted("2027-03-28T03:00:00+02:00", "moved from 02:30 (DST gap)"),
            plain("2027-03-29T02:30:00+02:00"),
        ]
    );
}

#[test]
fn berlin_gap_interval_fires_once_after_the_gap() {
    assert_eq!(
        preview(
            "0 */15 * * * *",
            "Europe/Berlin",
            at(2027, 3, 28, 0, 40, 0),
            3
        ),
        [
            plain("2027-03-28T01:45:00+01:00"),
            noted("2027-03-28T03:00:00+02:00", "moved from 02:00 (DST gap)"),
            plain("2027-03-28T03:15:00+02:00"),
        ]
    );
}

#[test]
fn berlin_overlap_fixed_time_fires_once_in_the_first_copy() {
    assert_eq!(
        preview(
            "0 30 2 * * *",
            "Europe/Berlin",
            at(2027, 10, 30, 12, 0, 0),
            2
        ),
        [
            plain("2027-10-31T02:30:00+02:00"),
            plain("2027-11-01T02:30:00+01:00"),
        ]
    );
}

#[test]
fn berlin_overlap_interval_fires_in_both_copies() {
    assert_eq!(
        preview(
            "0 */30 * * * *",
            "Europe/Berlin",
            at(2027, 10, 30, 23, 45, 0),
            5
        ),
        [
            plain("2027-10-31T02:00:00+02:00"),
            plain("2027-10-31T02:30:00+02:00"),
            noted("2027-10-31T02:00:00+01:00", "repeated 02:00 (DST overlap)"),
            noted("2027-10-31T02:30:00+01:00", "repeated 02:30 (DST overlap)"),
            plain("2027-10-31T03:00:00+01:00"),
        ]
    );
}

#[test]
fn gap_note_shows_seconds_when_set() {
    assert_eq!(
        preview(
            "15 10 2 * * *",
            "Europe/Berlin",
            at(2027, 3, 27, 12, 0, 0),
            1
        ),
        [noted(
            "2027-03-28T03:00:00+02:00",
            "moved from 02:10:15 (DST gap)"
        )]
    );
}

#[test]
fn starting_inside_a_gap_or_an_overlap() {
    let fixed = zoned("0 30 2 * * *", "Europe/Berlin");
    // 00:59:59Z is 01:59:59+01:00, just before the gap: the moved fire follows.
    assert_eq!(
        fixed.next_after(at(2027, 3, 28, 0, 59, 59)),
        Some(at(2027, 3, 28, 1, 0, 0))
    );
    // From the moved fire itself: the next day.
    assert_eq!(
        fixed.next_after(at(2027, 3, 28, 1, 0, 0)),
        Some(at(2027, 3, 29, 0, 30, 0))
    );
    // In the second copy of 02:00-03:00 (01:10Z = 02:10+01:00): the fixed
    // fire was in the first copy, so the next one is the next day.
    assert_eq!(
        fixed.next_after(at(2027, 10, 31, 1, 10, 0)),
        Some(at(2027, 11, 1, 1, 30, 0))
    );
    // An interval schedule does fire in the second copy.
    assert_eq!(
        zoned("0 */30 * * * *", "Europe/Berlin").next_after(at(2027, 10, 31, 1, 10, 0)),
        Some(at(2027, 10, 31, 1, 30, 0))
    );
}

#[test]
fn utc_and_zone_accessors() {
    let s = sched("0 30 2 * * *");
    assert_eq!(s.zone(), &Zone::utc());
    let berlin = s.clone().in_zone(Zone::parse("Europe/Berlin").unwrap());
    assert_eq!(berlin.zone().name(), "Europe/Berlin");
    assert_ne!(berlin, s);
    assert_eq!(berlin.expression(), s.expression());
    // UTC previews have a zero offset and no notes.
    let fires = s.upcoming(at(2027, 3, 27, 0, 0, 0), 2);
    assert_eq!(
        fires,
        [
            Fire {
                utc: at(2027, 3, 27, 2, 30, 0),
                local: at(2027, 3, 27, 2, 30, 0).fixed_offset(),
                note: None
            },
            Fire {
                utc: at(2027, 3, 28, 2, 30, 0),
                local: at(2027, 3, 28, 2, 30, 0).fixed_offset(),
                note: None
            },
        ]
    );
    assert!(s.upcoming(at(2027, 3, 27, 0, 0, 0), 0).is_empty());
}

#[test]
fn thirty_minute_shift_lord_howe() {
    // Lord Howe Island: +10:30 standard, +11:00 in summer; clocks go 02:00 → 02:30
    // on 2027-10-03 and 02:00 → 01:30 on 2027-04-04.
    assert_eq!(
        preview(
            "0 */20 * * * *",
            "Australia/Lord_Howe",
            at(2027, 10, 2, 15, 0, 0),
            3
        ),
        [
            plain("2027-10-03T01:40:00+10:30"),
            noted("2027-10-03T02:30:00+11:00", "moved from 02:00 (DST gap)"),
            plain("2027-10-03T02:40:00+11:00"),
        ]
    );
    assert_eq!(
        preview(
            "0 */20 1 * * *",
            "Australia/Lord_Howe",
            at(2027, 4, 3, 13, 59, 0),
            5
        ),
        [
            plain("2027-04-04T01:00:00+11:00"),
            plain("2027-04-04T01:20:00+11:00"),
            plain("2027-04-04T01:40:00+11:00"),
            noted("2027-04-04T01:40:00+10:30", "repeated 01:40 (DST overlap)"),
            plain("2027-04-05T01:00:00+10:30"),
        ]
    );
}

// ---------------------------------------------------------------- brute force

/// The fires of `expr` in `zone` in `(from, to]`, found by walking local
/// wall-clock time and applying the rule to each matching local time with
/// the tz crate's local-to-instant conversion.
fn brute_force(
    expr: &str,
    zone: &str,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> Vec<DateTime<Utc>> {
    let tz = TimeZoneDatabase::bundled().get(zone).expect("zone");
    let m = crate::parse::parse_masks(expr, crate::parse::Steps::Bounded).expect("valid");
    let body = if expr == "@hourly" {
        "0 0 * * * *"
    } else {
        expr
    };
    let fields: Vec<&str> = body.split_whitespace().collect();
    let interval = fields.len() == 6 && fields[..3].iter().any(|f| f.contains(['*', '-', '/']));
    let bit = |mask: u64, v: u32| mask & (1u64 << v) != 0;
    let mut out = Vec::new();
    // Local dates covering the window, with a day to spare on each side.
    let first_day = from.date_naive() - Duration::days(2);
    let days = (to - from).num_days() + 4;
    for date in first_day.iter_days().take(days as usize) {
        if !bit(u64::from(m.months), date.month())
            || !bit(u64::from(m.dom.days), date.day())
            || !bit(u64::from(m.dow.days), date.weekday().num_days_from_sunday())
        {
            continue;
        }
        for h in (0..24).filter(|&h| bit(u64::from(m.hours), h)) {
            for mi in (0..60).filter(|&mi| bit(m.minutes, mi)) {
                for sec in (0..60).filter(|&sec| bit(m.seconds, sec)) {
                    let local = date.and_hms_opt(h, mi, sec).expect("valid time");
                    out.extend(instants(&tz, local, interval));
                }
            }
        }
    }
    out.retain(|t| *t > from && *t <= to);
    out.sort();
    out.dedup();
    out
}

/// The rule for one matching local time.
fn instants(tz: &JiffZone, local: NaiveDateTime, interval: bool) -> Vec<DateTime<Utc>> {
    let civil = jiff::civil::DateTime::new(
        local.year() as i16,
        local.month() as i8,
        local.day() as i8,
        local.hour() as i8,
        local.minute() as i8,
        local.second() as i8,
        0,
    )
    .expect("civil time");
    let naive = local.and_utc().timestamp();
    let utc = |t: i64| DateTime::from_timestamp(t, 0).expect("in range");
    match tz.to_ambiguous_timestamp(civil).offset() {
        AmbiguousOffset::Unambiguous { offset } => vec![utc(naive - i64::from(offset.seconds()))],
        AmbiguousOffset::Fold { before, after } => {
            let first = utc(naive - i64::from(before.seconds()));
            let second = utc(naive - i64::from(after.seconds()));
            if interval {
                vec![first, second]
            } else {
                vec![first]
            }
        }
        AmbiguousOffset::Gap { before, after } => {
            // The first instant after the gap: the first with the new offset,
            // found by bisection between the two readings of `local`.
            let (mut lo, mut hi) = (
                naive - i64::from(after.seconds()),
                naive - i64::from(before.seconds()),
            );
            let offset_at = |t: i64| {
                tz.to_offset(jiff::Timestamp::from_second(t).expect("in range"))
                    .seconds()
            };
            while hi - lo > 1 {
                let mid = lo + (hi - lo) / 2;
                if offset_at(mid) == before.seconds() {
                    lo = mid;
                } else {
                    hi = mid;
                }
            }
            vec![utc(hi)]
        }
    }
}

/// Fires in `(from, to]` by chaining `next_after`.
fn chained(s: &CronSchedule, from: DateTime<Utc>, to: DateTime<Utc>) -> Vec<DateTime<Utc>> {
    let mut out = Vec::new();
    let mut t = from;
    while let Some(n) = s.next_after(t) {
        assert!(n > t, "{} went backwards: {t} -> {n}", s.expression());
        if n > to {
            break;
        }
        out.push(n);
        t = n;
    }
    out
}

/// Compares chaining, `upcoming`, and `next_after` from many starting
/// points (inside gaps and overlaps too) with the brute force.
fn check(expr: &str, zone: &str, from: DateTime<Utc>, to: DateTime<Utc>, probe_step: i64) {
    let s = zoned(expr, zone);
    let want = brute_force(expr, zone, from, to);
    let what = format!("`{expr}` in {zone} from {from} to {to}");
    assert_eq!(chained(&s, from, to), want, "{what}");
    let up: Vec<_> = s
        .upcoming(from, want.len())
        .into_iter()
        .map(|f| f.utc)
        .collect();
    assert_eq!(up, want, "{what}: upcoming");
    // From any instant, the next fire is the first brute-force fire after it.
    let mut t = from;
    while t < to {
        if let Some(&expected) = want.iter().find(|&&w| w > t) {
            assert_eq!(s.next_after(t), Some(expected), "{what}: after {t}");
        }
        t += Duration::seconds(probe_step);
    }
}

/// A UTC instant to the minute: year, month, day, hour, minute.
type Minute = (i32, u32, u32, u32, u32);

/// Transitions (as UTC instants) in zones of different kinds.
const TRANSITIONS: [(&str, Minute); 14] = [
    ("Europe/Berlin", (2027, 3, 28, 1, 0)),
    ("Europe/Berlin", (2027, 10, 31, 1, 0)),
    ("America/New_York", (2027, 3, 14, 7, 0)),
    ("America/New_York", (2027, 11, 7, 6, 0)),
    // 30-minute shifts.
    ("Australia/Lord_Howe", (2027, 4, 3, 15, 0)),
    ("Australia/Lord_Howe", (2027, 10, 2, 15, 30)),
    // Southern hemisphere: gap in October, overlap in April.
    ("Australia/Sydney", (2027, 4, 3, 16, 0)),
    ("Australia/Sydney", (2027, 10, 2, 16, 0)),
    // Sao Paulo's last DST (a midnight gap and overlap), then none in 2019.
    ("America/Sao_Paulo", (2018, 11, 4, 3, 0)),
    ("America/Sao_Paulo", (2019, 2, 17, 2, 0)),
    ("America/Sao_Paulo", (2019, 11, 3, 3, 0)),
    // Moscow: permanent summer time from 2011, back to +03:00 in 2014.
    ("Europe/Moscow", (2011, 3, 26, 23, 0)),
    ("Europe/Moscow", (2014, 10, 25, 22, 0)),
    // Samoa skipped 2011-12-30 altogether.
    ("Pacific/Apia", (2011, 12, 30, 10, 0)),
];

const EXPRS: [&str; 18] = [
    "0 30 2 * * *",
    "0 */15 * * * *",
    "0 */30 * * * *",
    "0 0 * * * *",
    "0 0 2 * * *",
    "0 0 3 * * *",
    "0 0 0 * * *",
    "0 30 23 * * *",
    "0 45 1 * * *",
    "0 0,30 0,1,2,3 * * *",
    "0 15 1-3 * * *",
    "30 * 2 * * *",
    "*/20 */7 * * * *",
    "15 10 2 * * *",
    "0 0 2 * * SUN",
    "0 0 12 * * *",
    "@hourly",
    "0 20,50 * * * *",
];

fn around(t: Minute, hours: i64) -> (DateTime<Utc>, DateTime<Utc>) {
    let t = at(t.0, t.1, t.2, t.3, t.4, 0);
    (t - Duration::hours(hours), t + Duration::hours(hours))
}

#[test]
fn brute_force_around_transitions() {
    for (zone, t) in TRANSITIONS {
        let (from, to) = around(t, 30);
        for expr in EXPRS {
            check(expr, zone, from, to, 601);
        }
    }
}

#[test]
fn brute_force_every_second_near_transitions() {
    for (zone, t) in TRANSITIONS {
        let (from, to) = around(t, 2);
        for expr in ["* * * * * *", "*/7 * 0-3 * * *", "59 59 * * * *"] {
            check(expr, zone, from, to, 97);
        }
    }
}

/// Random expressions (fixed-seed LCG) × zones × windows around transitions.
#[test]
fn brute_force_random_expressions_in_zones() {
    let mut seed = 0x853c_49e6_748f_ea9bu64;
    let mut rnd = |n: u32| {
        seed = seed
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        ((seed >> 33) % u64::from(n)) as u32
    };
    let field = |max: u32, rnd: &mut dyn FnMut(u32) -> u32| -> String {
        match rnd(5) {
            0 => "*".to_string(),
            1 => format!("{}", rnd(max + 1)),
            2 => {
                let a = rnd(max + 1);
                format!("{a}-{}", a + rnd(max - a + 1))
            }
            3 => format!("*/{}", 1 + rnd(max)),
            _ => format!("{},{}", rnd(max + 1), rnd(max + 1)),
        }
    };
    for i in 0..120 {
        // Seconds mostly fixed, to keep the scanner's work small.
        let sec = if i % 4 == 0 {
            field(59, &mut rnd)
        } else {
            format!("{}", rnd(60))
        };
        let expr = format!(
            "{sec} {} {} * * *",
            field(59, &mut rnd),
            field(23, &mut rnd)
        );
        let (zone, t) = TRANSITIONS[rnd(TRANSITIONS.len() as u32) as usize];
        let (from, to) = around(t, 6);
        check(&expr, zone, from, to, 1013);
    }
}

/// A zone that is UTC under another name takes the zoned path: it must agree
/// with the direct UTC path; so must a fixed-offset zone, shifted.
#[test]
fn zoned_path_agrees_with_the_utc_path() {
    let starts = [
        at(2024, 2, 28, 23, 59, 59),
        at(2027, 12, 31, 23, 0, 0),
        at(2000, 1, 1, 0, 0, 0),
    ];
    for expr in [
        "* * * * * *",
        "0 */5 * * * *",
        "0 30 9 * * MON-FRI",
        "0 0 0 29 2 *",
        "0 0 0 L * FRI",
        "0 0 0 ? * MON#5",
        "@yearly",
    ] {
        let utc = sched(expr);
        let etc = zoned(expr, "Etc/UTC");
        // Etc/GMT-3 is UTC+03:00 (POSIX signs).
        let plus3 = zoned(expr, "Etc/GMT-3");
        for start in starts {
            let mut a = start;
            for _ in 0..50 {
                let Some(n) = utc.next_after(a) else { break };
                assert_eq!(etc.next_after(a), Some(n), "{expr} after {a}");
                let shifted = a - Duration::hours(3);
                assert_eq!(
                    plus3.next_after(shifted),
                    Some(n - Duration::hours(3)),
                    "{expr} after {shifted}"
                );
                a = n;
            }
        }
    }
}

#[test]
fn zones_out_of_range_return_none() {
    let s = zoned("0 0 0 * * *", "Europe/Berlin");
    assert_eq!(s.next_after(DateTime::<Utc>::MAX_UTC), None);
    assert_eq!(
        s.next_after(Utc.with_ymd_and_hms(10_000, 1, 1, 0, 0, 0).unwrap()),
        None
    );
    // Well inside the range, far from today: rules projected forward.
    let date = NaiveDate::from_ymd_opt(9000, 7, 1).unwrap();
    let from = date.and_hms_opt(0, 0, 0).unwrap().and_utc();
    assert_eq!(s.next_after(from), Some(at(9000, 7, 1, 22, 0, 0)));
}
