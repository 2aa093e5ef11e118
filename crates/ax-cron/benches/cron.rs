//! Next-fire benchmarks: ax vs the `cron` and `croner` crates.
//!
//! Every expression is checked to give identical results in all three crates
//! before anything is timed, so the comparison is like for like. Expressions
//! never restrict both day-of-month and day-of-week (ax intersects them, the
//! others take the union) and use weekday names (the `cron` crate numbers
//! weekdays 1-7 from Sunday). A last group times ax alone, for information:
//! a schedule in a time zone, and Quartz day forms the others lack or read
//! differently.

use std::hint::black_box;
use std::str::FromStr;
use std::time::Duration;

use ax_cron::{CronSchedule, Zone};
use chrono::{DateTime, TimeZone, Utc};
use criterion::{criterion_group, criterion_main, Criterion};
use croner::parser::{CronParser, Seconds};

const EXPRS: [&str; 20] = [
    "* * * * * *",
    "*/15 * * * * *",
    "10-20 * * * * *",
    "0 */5 * * * *",
    "0 0,15,30,45 * * * *",
    "0 0 */6 * * *",
    "0 0 8,12,18 * * *",
    "0 0 9-17/2 * * *",
    "0 30 9-17 * * MON-FRI",
    "0 0 12 * * MON-FRI",
    "0 15 10 * * SAT,SUN",
    "0 0 0 * * SUN",
    "0 5 4 * * TUE",
    "0 30 2 */2 * *",
    "0 0 6 1-7 * *",
    "0 0 23 28 * *",
    "0 0 0 1 * *",
    "0 0 0 1 JAN,APR,JUL,OCT *",
    "0 0 0 15 JUN *",
    "0 0 0 1 1 *",
];

/// Chained "next, next, next…" runs use these (one dense, two business-hours).
/// The leap-day schedule is kept out: 1000 leap days span 4000 years, past
/// the `cron` crate's supported years.
const CHAIN_EXPRS: [&str; 3] = [
    "0 */5 * * * *",
    "0 30 9-17 * * MON-FRI",
    "0 0 12 * * MON-FRI",
];
const CHAIN_LEN: usize = 1000;

/// Quartz day forms, timed for ax only.
const QUARTZ_EXPRS: [&str; 4] = [
    "0 0 0 L * *",
    "0 0 9 LW * *",
    "0 0 12 ? * FRIL",
    "0 0 9 ? * MON#2",
];

/// Fixed start instant for every benchmark (a Friday, mid-morning).
fn start() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2024, 3, 15, 10, 17, 23).unwrap()
}

struct Parsed {
    ax: Vec<CronSchedule>,
    cron: Vec<cron::Schedule>,
    croner: Vec<croner::Cron>,
}

fn parse_all(exprs: &[&str]) -> Parsed {
    let croner_parser = CronParser::builder().seconds(Seconds::Required).build();
    Parsed {
        ax: exprs
            .iter()
            .map(|e| CronSchedule::parse(e).unwrap_or_else(|err| panic!("ax `{e}`: {err}")))
            .collect(),
        cron: exprs
            .iter()
            .map(|e| cron::Schedule::from_str(e).unwrap_or_else(|err| panic!("cron `{e}`: {err}")))
            .collect(),
        croner: exprs
            .iter()
            .map(|e| {
                croner_parser
                    .parse(e)
                    .unwrap_or_else(|err| panic!("croner `{e}`: {err}"))
            })
            .collect(),
    }
}

fn ax_next(s: &CronSchedule, t: DateTime<Utc>) -> DateTime<Utc> {
    s.next_after(t).expect("ax fires")
}

fn cron_next(s: &cron::Schedule, t: DateTime<Utc>) -> DateTime<Utc> {
    s.after(&t).next().expect("cron fires")
}

fn croner_next(s: &croner::Cron, t: DateTime<Utc>) -> DateTime<Utc> {
    s.find_next_occurrence(&t, false).expect("croner fires")
}

/// Panics unless all three crates agree, for single steps and for chains.
fn assert_agreement(single: &Parsed, chained: &Parsed) {
    let t0 = start();
    for (i, e) in EXPRS.iter().enumerate() {
        let a = ax_next(&single.ax[i], t0);
        let c = cron_next(&single.cron[i], t0);
        let r = croner_next(&single.croner[i], t0);
        assert!(
            a == c && a == r,
            "`{e}` disagrees: ax {a}, cron {c}, croner {r}"
        );
    }
    for (i, e) in CHAIN_EXPRS.iter().enumerate() {
        let (mut a, mut c, mut r) = (t0, t0, t0);
        for n in 0..CHAIN_LEN {
            a = ax_next(&chained.ax[i], a);
            c = cron_next(&chained.cron[i], c);
            r = croner_next(&chained.croner[i], r);
            assert!(
                a == c && a == r,
                "`{e}` step {n} disagrees: ax {a}, cron {c}, croner {r}"
            );
        }
    }
}

fn benches(c: &mut Criterion) {
    let single = parse_all(&EXPRS);
    let chained = parse_all(&CHAIN_EXPRS);
    assert_agreement(&single, &chained);
    let t0 = start();

    let mut g = c.benchmark_group("next_20_exprs");
    g.bench_function("ax", |b| {
        b.iter(|| {
            for s in &single.ax {
                black_box(s.next_after(black_box(t0)));
            }
        })
    });
    g.bench_function("cron", |b| {
        b.iter(|| {
            for s in &single.cron {
                black_box(s.after(black_box(&t0)).next());
            }
        })
    });
    g.bench_function("croner", |b| {
        b.iter(|| {
            for s in &single.croner {
                black_box(s.find_next_occurrence(black_box(&t0), false).ok());
            }
        })
    });
    g.finish();

    let mut g = c.benchmark_group("chain_1000x3");
    // croner needs ~5 ms per iteration; fewer samples keep the run short.
    g.sample_size(20);
    g.bench_function("ax", |b| {
        b.iter(|| {
            for s in &chained.ax {
                let mut t = black_box(t0);
                for _ in 0..CHAIN_LEN {
                    t = ax_next(s, t);
                }
                black_box(t);
            }
        })
    });
    g.bench_function("cron", |b| {
        b.iter(|| {
            for s in &chained.cron {
                // The crate's own iterator is its natural (and fastest) chain.
                black_box(s.after(black_box(&t0)).take(CHAIN_LEN).last());
            }
        })
    });
    g.bench_function("croner", |b| {
        b.iter(|| {
            for s in &chained.croner {
                let mut t = black_box(t0);
                for _ in 0..CHAIN_LEN {
                    t = croner_next(s, t);
                }
                black_box(t);
            }
        })
    });
    g.finish();

    zoned_and_quartz(c, &chained.ax, t0);
}

/// ax alone: the chained schedules in Europe/Berlin, and Quartz forms.
fn zoned_and_quartz(c: &mut Criterion, chained: &[CronSchedule], t0: DateTime<Utc>) {
    let berlin = Zone::parse("Europe/Berlin").expect("zone");
    let zoned: Vec<CronSchedule> = chained
        .iter()
        .map(|s| s.clone().in_zone(berlin.clone()))
        .collect();
    let quartz: Vec<CronSchedule> = QUARTZ_EXPRS
        .iter()
        .map(|e| CronSchedule::parse(e).unwrap_or_else(|err| panic!("ax `{e}`: {err}")))
        .collect();

    let mut g = c.benchmark_group("ax_only");
    g.sample_size(20);
    g.bench_function("chain_1000x3_europe_berlin", |b| {
        b.iter(|| {
            for s in &zoned {
                let mut t = black_box(t0);
                for _ in 0..CHAIN_LEN {
                    t = ax_next(s, t);
                }
                black_box(t);
            }
        })
    });
    g.bench_function("next_4_quartz_exprs", |b| {
        b.iter(|| {
            for s in &quartz {
                black_box(s.next_after(black_box(t0)));
            }
        })
    });
    g.finish();
}

fn config() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(4))
        .sample_size(50)
}

criterion_group! {
    name = cron_benches;
    config = config();
    targets = benches
}
criterion_main!(cron_benches);
