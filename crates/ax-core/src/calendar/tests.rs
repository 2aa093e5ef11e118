//! Calendars and schedules with days off. The schedule's search jumps over ranges and from one
//! open day to the next; it is compared here with a day-by-day scanner of the same rules,
//! written apart from it: its own days off, its own walk to the nearest open day, and local
//! times resolved from `Zone::wall_clock` alone. Then the rules' cases, with literal values.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ops::Bound::Excluded;
use std::sync::Arc;

use ax_cron::{CronSchedule, Zone};
use chrono::{DateTime, Datelike, Duration, NaiveDate, NaiveDateTime, NaiveTime, Utc, Weekday};
use proptest::prelude::*;
use serde_json::json;

use super::schedule::{DayOff, Schedule};
use super::{
    Calendar, CalendarPolicy, DateRange, DaysOff, TaskCalendars, Weekday3, MAX_DAYS_OFF_IN_A_ROW,
};
use crate::ids::CalendarName;

fn date(text: &str) -> NaiveDate {
    text.parse().expect("a date")
}

fn utc(text: &str) -> DateTime<Utc> {
    text.parse().expect("an instant")
}

fn cron(expr: &str, zone: &str) -> CronSchedule {
    CronSchedule::parse(expr)
        .expect("a cron expression")
        .in_zone(Zone::parse(zone).expect("a zone"))
}

fn calendar(dates: &[&str], ranges: &[(&str, &str)], weekdays: &[&str]) -> Calendar {
    Calendar {
        dates: dates.iter().map(|day| date(day)).collect(),
        ranges: ranges
            .iter()
            .map(|(from, to)| DateRange {
                from: date(from),
                to: date(to),
            })
            .collect(),
        weekdays: weekdays
            .iter()
            .map(|day| Weekday3::parse(day).expect("a weekday"))
            .collect(),
    }
}

fn days_off(calendars: Vec<(&str, Calendar)>, policy: CalendarPolicy) -> DaysOff {
    DaysOff {
        calendars: calendars
            .into_iter()
            .map(|(name, calendar)| (CalendarName::from(name), Arc::new(calendar)))
            .collect(),
        policy,
    }
}

fn schedule(
    expr: &str,
    zone: &str,
    calendars: Vec<(&str, Calendar)>,
    policy: CalendarPolicy,
) -> Schedule {
    Schedule::new(
        cron(expr, zone),
        Some(Arc::new(days_off(calendars, policy))),
    )
}

/// The schedule's next `count` fires after `after`, in local time with the day each was moved
/// from.
fn local_fires(
    schedule: &Schedule,
    after: DateTime<Utc>,
    count: usize,
) -> Vec<(String, Option<NaiveDate>)> {
    schedule
        .upcoming(after, count)
        .into_iter()
        .map(|(fire, moved_from)| (fire.local.to_rfc3339(), moved_from))
        .collect()
}

fn own(local: &str) -> (String, Option<NaiveDate>) {
    (local.to_string(), None)
}

fn moved(local: &str, from: &str) -> (String, Option<NaiveDate>) {
    (local.to_string(), Some(date(from)))
}

// ---------------------------------------------------------------- the scanner

/// A calendar as the scanner reads it: plain lists, apart from `Calendar::holds`.
#[derive(Debug, Clone)]
struct Days {
    dates: Vec<NaiveDate>,
    ranges: Vec<(NaiveDate, NaiveDate)>,
    weekdays: Vec<Weekday>,
}

impl Days {
    fn holds(&self, day: NaiveDate) -> bool {
        self.dates.contains(&day)
            || self.weekdays.contains(&day.weekday())
            || self
                .ranges
                .iter()
                .any(|(from, to)| *from <= day && day <= *to)
    }

    fn calendar(&self) -> Calendar {
        Calendar {
            dates: self.dates.iter().copied().collect(),
            ranges: self
                .ranges
                .iter()
                .map(|(from, to)| DateRange {
                    from: *from,
                    to: *to,
                })
                .collect(),
            weekdays: self.weekdays.iter().map(|day| Weekday3(*day)).collect(),
        }
    }
}

/// Local times resolved from `Zone::wall_clock` alone: the offsets in force around a day tried
/// one by one, and a bisection for a time in a gap.
struct Clock {
    zone: Zone,
    offsets: RefCell<HashMap<NaiveDate, Vec<i64>>>,
}

impl Clock {
    fn new(zone: Zone) -> Self {
        Clock {
            zone,
            offsets: RefCell::new(HashMap::new()),
        }
    }

    fn wall(&self, at: DateTime<Utc>) -> NaiveDateTime {
        self.zone
            .wall_clock(at)
            .expect("an instant in the zone's range")
    }

    fn offset(&self, at: DateTime<Utc>) -> i64 {
        (self.wall(at) - at.naive_utc()).num_seconds()
    }

    /// The offsets, sorted, that may be in force at one of `day`'s local times.
    fn offsets_around(&self, day: NaiveDate) -> Vec<i64> {
        if let Some(offsets) = self.offsets.borrow().get(&day) {
            return offsets.clone();
        }
        // Local times of the day are its noon ± 12 h, offsets within -12 h..+14 h: the instants
        // are within noon ± 26 h. Every offset lasts longer than the samples' half hour.
        let noon = day.and_hms_opt(12, 0, 0).expect("noon").and_utc();
        let offsets: Vec<i64> = (-60..=60)
            .map(|step| self.offset(noon + Duration::minutes(30 * step)))
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        self.offsets.borrow_mut().insert(day, offsets.clone());
        offsets
    }

    /// The first instant whose wall-clock time is `local` or later: its first copy if it
    /// exists, else (in a gap) the instant the wall clock jumps over it.
    fn first_at(&self, local: NaiveDateTime) -> DateTime<Utc> {
        let offsets = self.offsets_around(local.date());
        let read_as_utc = local.and_utc();
        let copies = offsets
            .iter()
            .map(|offset| read_as_utc - Duration::seconds(*offset))
            .filter(|at| self.wall(*at) == local);
        let first = copies.min().unwrap_or_else(|| {
            let (least, most) = (offsets[0], offsets[offsets.len() - 1]);
            let (mut below, mut above) = (
                read_as_utc - Duration::seconds(most),
                read_as_utc - Duration::seconds(least),
            );
            assert!(
                self.wall(below) < local && local < self.wall(above),
                "{local} in {}: neither a copy nor one gap",
                self.zone
            );
            while above - below > Duration::seconds(1) {
                let mid = below + Duration::seconds((above - below).num_seconds() / 2);
                if self.wall(mid) < local {
                    below = mid;
                } else {
                    above = mid;
                }
            }
            above
        });
        // The zone's own resolution must agree: the schedule relies on it.
        assert_eq!(
            self.zone.earliest_at(local),
            Some(first),
            "Zone::earliest_at({local}) in {}",
            self.zone
        );
        first
    }

    fn start_of(&self, day: NaiveDate) -> DateTime<Utc> {
        self.first_at(day.and_time(NaiveTime::MIN))
    }
}

/// Where a fire of the rules comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Origin {
    Own,
    /// The days off whose fires landed on it.
    Moved(BTreeSet<NaiveDate>),
}

/// The rules, applied one day at a time.
struct Scanner<'a> {
    cron: &'a CronSchedule,
    clock: Clock,
    calendars: &'a [Days],
    policy: CalendarPolicy,
}

impl Scanner<'_> {
    fn is_off(&self, day: NaiveDate) -> bool {
        self.calendars.iter().any(|days| days.holds(day))
    }

    /// The cron's own fires on the days `first..=last`, by day.
    fn own_fires(
        &self,
        first: NaiveDate,
        last: NaiveDate,
    ) -> BTreeMap<NaiveDate, Vec<DateTime<Utc>>> {
        let end = self.clock.start_of(last.succ_opt().expect("a day"));
        let mut at = self.clock.start_of(first) - Duration::seconds(1);
        let mut by_day: BTreeMap<NaiveDate, Vec<DateTime<Utc>>> = BTreeMap::new();
        while let Some(fire) = self.cron.next_after(at).filter(|fire| *fire < end) {
            let day = self.clock.wall(fire).date();
            assert!(first <= day && day <= last, "{fire} is on {day}");
            by_day.entry(day).or_default().push(fire);
            at = fire;
        }
        by_day
    }

    /// The nearest open day before (`step` -1) or after (1) the day off `day`.
    fn open_day(&self, day: NaiveDate, step: i64) -> NaiveDate {
        let mut open = day;
        for _ in 0..400 {
            open += Duration::days(step);
            if !self.is_off(open) {
                return open;
            }
        }
        panic!("no open day within 400 days of {day}");
    }

    /// Every fire of the days `first..=last` by the rules (moved ones land on open days
    /// possibly outside), with where it comes from.
    fn fires(&self, first: NaiveDate, last: NaiveDate) -> BTreeMap<DateTime<Utc>, Origin> {
        let mut fires = BTreeMap::new();
        for (day, own) in self.own_fires(first, last) {
            if !self.is_off(day) {
                for at in own {
                    fires.insert(at, Origin::Own);
                }
                continue;
            }
            let step = match self.policy {
                CalendarPolicy::Skip => continue,
                CalendarPolicy::PreviousOpenDay => -1,
                CalendarPolicy::NextOpenDay => 1,
            };
            let open = self.open_day(day, step);
            for at in own {
                let time = self.clock.wall(at).time();
                let landed = self.clock.first_at(open.and_time(time));
                if let Origin::Moved(from) = fires
                    .entry(landed)
                    .or_insert_with(|| Origin::Moved(BTreeSet::new()))
                {
                    from.insert(day);
                }
            }
        }
        fires
    }
}

// ---------------------------------------------------------------- scanner vs schedule

/// Zones, each with the days its clocks change on in 2026-2028 (other days for those that do
/// not): a window opens 12 days before one of them.
const ZONES: [(&str, [&str; 6]); 9] = [
    (
        "UTC",
        [
            "2026-03-29",
            "2026-11-01",
            "2027-06-20",
            "2027-12-26",
            "2028-02-20",
            "2028-10-29",
        ],
    ),
    (
        "Europe/Berlin",
        [
            "2026-03-29",
            "2026-10-25",
            "2027-03-28",
            "2027-10-31",
            "2028-03-26",
            "2028-10-29",
        ],
    ),
    (
        "America/New_York",
        [
            "2026-03-08",
            "2026-11-01",
            "2027-03-14",
            "2027-11-07",
            "2028-03-12",
            "2028-11-05",
        ],
    ),
    // 30-minute changes: 02:00 → 02:30 in October, 02:00 → 01:30 in April.
    (
        "Australia/Lord_Howe",
        [
            "2026-04-05",
            "2026-10-04",
            "2027-04-04",
            "2027-10-03",
            "2028-04-02",
            "2028-10-01",
        ],
    ),
    (
        "Australia/Sydney",
        [
            "2026-04-05",
            "2026-10-04",
            "2027-04-04",
            "2027-10-03",
            "2028-04-02",
            "2028-10-01",
        ],
    ),
    // At midnight: Sunday's 00:00-01:00 missing in September, Saturday's 23:00-24:00 twice
    // in April.
    (
        "America/Santiago",
        [
            "2026-04-05",
            "2026-09-06",
            "2027-04-04",
            "2027-09-05",
            "2028-04-02",
            "2028-09-03",
        ],
    ),
    // 00:00-01:00 missing in March, twice in November.
    (
        "America/Havana",
        [
            "2026-03-08",
            "2026-11-01",
            "2027-03-14",
            "2027-11-07",
            "2028-03-12",
            "2028-11-05",
        ],
    ),
    // +05:30 without DST; +13:00, without since 2021.
    (
        "Asia/Kolkata",
        [
            "2026-03-29",
            "2026-12-27",
            "2027-03-28",
            "2027-10-31",
            "2028-02-27",
            "2028-11-05",
        ],
    ),
    (
        "Pacific/Apia",
        [
            "2026-04-05",
            "2026-09-27",
            "2027-04-04",
            "2027-09-26",
            "2028-02-27",
            "2028-09-24",
        ],
    ),
];

/// Cron shapes, each with the days a window spans: dense ones short, sparse ones long. A
/// moved fire landing on a time the open day fires at anyway is that day's own, so most
/// shapes fire on some weekdays only; the DST changes are on Sunday (Saturday night in
/// Santiago).
const SHAPES: [(&str, i64); 22] = [
    ("0 0 9 * * *", 42),
    ("0 30 2 * * *", 42),
    // A time in the gap fires at its end, moved there: not one of the expression's times.
    ("0 30 2,9 * * *", 42),
    ("0 30 0,12 * * *", 42),
    ("0 30 0 * * SAT,SUN", 60),
    ("0 0 0 * * SUN", 90),
    ("0 30 23 * * FRI,SAT", 60),
    ("0 0 9 * * MON-FRI", 42),
    ("0 0 8,12,18 * * TUE,THU", 42),
    ("0 */15 8-10 * * MON,WED", 42),
    ("0 */15 0-2 * * SUN", 60),
    ("0 0,30 1-3 * * SAT,MON", 60),
    ("15 */20 1-2 * * SUN", 60),
    ("0 30 2 * * SAT", 90),
    ("0 0 * * * *", 24),
    ("0 0 * * * SAT", 42),
    ("0 0 */3 * * *", 30),
    ("0 0 10 * * MON", 120),
    ("0 0 12 1,15 * *", 240),
    ("0 0 9 L * *", 400),
    ("0 0 0 L-1 * *", 400),
    ("0 0 0 29 2 *", 800),
];

/// A calendar drawn relative to a window: days as thousandths of it (and 6 days either side).
#[derive(Debug, Clone)]
struct DaysDraw {
    dates: Vec<u32>,
    ranges: Vec<(u32, i64)>,
    weekdays: Vec<bool>,
}

impl DaysDraw {
    fn days(&self, first: NaiveDate, window_days: i64) -> Days {
        let day = |permille: u32| {
            first + Duration::days(-6 + i64::from(permille) * (window_days + 12) / 1000)
        };
        let mut weekdays: Vec<Weekday> = (0..7)
            .filter(|at| self.weekdays[*at])
            .map(|at| Weekday::try_from(at as u8).expect("a weekday"))
            .collect();
        // Never all seven: the scanner must find open days.
        if weekdays.len() == 7 {
            weekdays.remove(0);
        }
        Days {
            dates: self.dates.iter().map(|permille| day(*permille)).collect(),
            ranges: self
                .ranges
                .iter()
                .map(|(permille, length)| {
                    let from = day(*permille);
                    (from, from + Duration::days(length - 1))
                })
                .collect(),
            weekdays,
        }
    }
}

fn days_draw() -> impl Strategy<Value = DaysDraw> {
    (
        prop::collection::vec(0..1000u32, 0..8),
        prop::collection::vec((0..1000u32, 1..=12i64), 0..4),
        prop::collection::vec(prop::bool::weighted(0.3), 7),
    )
        .prop_map(|(dates, ranges, weekdays)| DaysDraw {
            dates,
            ranges,
            weekdays,
        })
}

fn policy() -> impl Strategy<Value = CalendarPolicy> {
    prop::sample::select(CalendarPolicy::ALL.to_vec())
}

/// The instants `lo..hi` where the scanner's window `first..=last` holds every fire: with
/// `NEXT_OPEN_DAY` the first open day may take fires from days before the window, with
/// `PREVIOUS_OPEN_DAY` the last one from days after it.
fn settled(
    scanner: &Scanner,
    first: NaiveDate,
    last: NaiveDate,
) -> Option<(DateTime<Utc>, DateTime<Utc>)> {
    let mut open = first
        .iter_days()
        .take_while(|day| *day <= last)
        .filter(|day| !scanner.is_off(*day));
    let first_open = open.next()?;
    let last_open = open.last().unwrap_or(first_open);
    let start = |day: NaiveDate| scanner.clock.start_of(day);
    let (lo, hi) = match scanner.policy {
        CalendarPolicy::Skip => (start(first), start(last.succ_opt()?)),
        CalendarPolicy::NextOpenDay => (start(first_open.succ_opt()?), start(last.succ_opt()?)),
        CalendarPolicy::PreviousOpenDay => (start(first), start(last_open)),
    };
    (lo < hi).then_some((lo, hi))
}

/// A fire as the comparison shows it: its local time, its instant, whether it was moved.
fn shown(clock: &Clock, at: DateTime<Utc>, moved: bool) -> String {
    let kind = if moved { "moved" } else { "own" };
    format!("{} ({at}) {kind}", clock.wall(at))
}

fn check_against_scanner(
    zone: &str,
    (expr, window_days): (&str, i64),
    policy: CalendarPolicy,
    start: &str,
    draws: &[DaysDraw],
    probes: &[u32],
) -> Result<(), TestCaseError> {
    let cron = cron(expr, zone);
    let first = date(start) - Duration::days(12);
    let last = first + Duration::days(window_days - 1);
    let calendars: Vec<Days> = draws
        .iter()
        .map(|draw| draw.days(first, window_days))
        .collect();
    let scanner = Scanner {
        cron: &cron,
        clock: Clock::new(cron.zone().clone()),
        calendars: &calendars,
        policy,
    };
    let Some((lo, hi)) = settled(&scanner, first, last) else {
        return Ok(());
    };
    let expected = scanner.fires(first, last);
    let names: Vec<String> = (0..calendars.len()).map(|at| format!("cal-{at}")).collect();
    let schedule = Schedule::new(
        cron.clone(),
        Some(Arc::new(DaysOff {
            calendars: names
                .iter()
                .zip(&calendars)
                .map(|(name, days)| (CalendarName::from(name.as_str()), Arc::new(days.calendar())))
                .collect(),
            policy,
        })),
    );

    // Chained from just before the settled instants.
    let mut got = Vec::new();
    let mut at = lo - Duration::seconds(1);
    while let Some(fire) = schedule.next_fire_after(at).filter(|fire| fire.at < hi) {
        prop_assert!(fire.at > at, "{fire:?} after {at}");
        prop_assert_eq!(schedule.next_after(at), Some(fire.at));
        got.push(fire);
        at = fire.at;
    }
    let clock = &scanner.clock;
    let wanted: Vec<String> = expected
        .range(lo..hi)
        .map(|(at, origin)| shown(clock, *at, *origin != Origin::Own))
        .collect();
    let found: Vec<String> = got
        .iter()
        .map(|fire| shown(clock, fire.at, fire.moved_from.is_some()))
        .collect();
    prop_assert_eq!(found, wanted, "{} in {} with {:?}", expr, zone, calendars);
    for fire in &got {
        if let (Some(from), Some(Origin::Moved(days))) = (fire.moved_from, expected.get(&fire.at)) {
            prop_assert!(days.contains(&from), "{fire:?} moved from one of {days:?}");
        }
    }

    // From anywhere in between: in gaps, in second copies, between a day's fires.
    let span = (hi - lo).num_seconds();
    for probe in probes {
        let after = lo - Duration::seconds(1) + Duration::seconds(span * i64::from(*probe) / 1000);
        let next = expected
            .range((Excluded(after), Excluded(hi)))
            .next()
            .map(|(at, _)| *at);
        let searched = schedule.next_after(after);
        match next {
            Some(next) => prop_assert_eq!(searched, Some(next), "after {}", after),
            None => prop_assert!(
                searched.is_none_or(|searched| searched >= hi),
                "after {after}: {searched:?}"
            ),
        }
    }

    // The cron's own fires on days off, each with the first calendar holding its day.
    let off_fires: Vec<(DateTime<Utc>, String)> = scanner
        .own_fires(first, last)
        .into_iter()
        .filter_map(|(day, fires)| {
            let holder = calendars.iter().position(|days| days.holds(day))?;
            Some(
                fires
                    .into_iter()
                    .map(move |at| (at, format!("cal-{holder}"))),
            )
        })
        .flatten()
        .filter(|(at, _)| lo <= *at && *at < hi)
        .collect();
    let listed: Vec<(DateTime<Utc>, String)> = schedule
        .fires_off(
            lo - Duration::seconds(1),
            hi - Duration::seconds(1),
            usize::MAX,
        )
        .into_iter()
        .map(|(fire, holder)| (fire.utc, holder))
        .collect();
    prop_assert_eq!(listed, off_fires);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// The schedule's search gives the scanner's fires, from any instant, moved ones marked.
    #[test]
    fn the_search_agrees_with_a_day_by_day_scan(
        (zone, starts) in prop::sample::select(ZONES.to_vec()),
        shape in prop::sample::select(SHAPES.to_vec()),
        policy in policy(),
        start in 0..6usize,
        draws in prop::collection::vec(days_draw(), 1..=3),
        probes in prop::collection::vec(0..=1000u32, 8),
    ) {
        check_against_scanner(zone, shape, policy, starts[start], &draws, &probes)?;
    }
}

// ---------------------------------------------------------------- the rules, literally

#[test]
fn payroll_on_the_last_business_day_of_each_month() {
    let payroll = schedule(
        "0 0 9 L * *",
        "Europe/Berlin",
        vec![
            ("weekends", calendar(&[], &[], &["SAT", "SUN"])),
            ("holidays", calendar(&["2027-12-31"], &[], &[])),
        ],
        CalendarPolicy::PreviousOpenDay,
    );
    assert_eq!(
        local_fires(&payroll, utc("2026-12-31T12:00:00Z"), 12),
        [
            moved("2027-01-29T09:00:00+01:00", "2027-01-31"),
            moved("2027-02-26T09:00:00+01:00", "2027-02-28"),
            own("2027-03-31T09:00:00+02:00"),
            own("2027-04-30T09:00:00+02:00"),
            own("2027-05-31T09:00:00+02:00"),
            own("2027-06-30T09:00:00+02:00"),
            moved("2027-07-30T09:00:00+02:00", "2027-07-31"),
            own("2027-08-31T09:00:00+02:00"),
            own("2027-09-30T09:00:00+02:00"),
            // Sunday the 31st is after the clocks go back; Friday the 29th is before.
            moved("2027-10-29T09:00:00+02:00", "2027-10-31"),
            own("2027-11-30T09:00:00+01:00"),
            moved("2027-12-30T09:00:00+01:00", "2027-12-31"),
        ]
    );
}

#[test]
fn a_range_off_moves_three_days_of_hourly_fires_onto_one_day_once() {
    // Wednesday 9 to Friday 11 June 2027 off; Saturday 12 is open.
    let closed = || {
        vec![(
            "closed",
            calendar(&[], &[("2027-06-09", "2027-06-11")], &[]),
        )]
    };
    let after = utc("2027-06-08T22:30:00Z");
    let weekdays = schedule(
        "0 0 * * * MON-FRI",
        "UTC",
        closed(),
        CalendarPolicy::NextOpenDay,
    );
    let fires = weekdays.upcoming(after, 26);
    let times: Vec<String> = fires
        .iter()
        .map(|(fire, _)| fire.utc.to_rfc3339())
        .collect();
    let mut expected = vec!["2027-06-08T23:00:00+00:00".to_string()];
    expected.extend((0..24).map(|hour| format!("2027-06-12T{hour:02}:00:00+00:00")));
    // Saturday and Sunday are not cron days: Monday's fires are next.
    expected.push("2027-06-14T00:00:00+00:00".to_string());
    assert_eq!(times, expected);
    assert_eq!(fires[0].1, None);
    let range = date("2027-06-09")..=date("2027-06-11");
    assert!(fires[1..25]
        .iter()
        .all(|(_, from)| from.is_some_and(|from| range.contains(&from))));
    assert_eq!(fires[25].1, None);

    // Every day a cron day: Saturday's own fires stand, the 72 moved ones fold into them.
    let daily = schedule("0 0 * * * *", "UTC", closed(), CalendarPolicy::NextOpenDay);
    let fires = daily.upcoming(after, 25);
    assert_eq!(fires[1].0.utc, utc("2027-06-12T00:00:00Z"));
    assert_eq!(fires[24].0.utc, utc("2027-06-12T23:00:00Z"));
    assert!(fires.iter().all(|(_, from)| from.is_none()));
}

#[test]
fn a_time_moved_into_a_gap_fires_at_its_end_and_into_an_overlap_in_the_first_copy() {
    let saturdays = || vec![("saturdays", calendar(&[], &[], &["SAT"]))];
    // Berlin springs forward on Sunday 2027-03-28: 02:00-03:00 does not exist.
    let next = schedule(
        "0 30 2 * * SAT",
        "Europe/Berlin",
        saturdays(),
        CalendarPolicy::NextOpenDay,
    );
    assert_eq!(
        local_fires(&next, utc("2027-03-26T00:00:00Z"), 2),
        [
            moved("2027-03-28T03:00:00+02:00", "2027-03-27"),
            moved("2027-04-04T02:30:00+02:00", "2027-04-03"),
        ]
    );
    // Monday's 02:30 back onto that Sunday.
    let previous = schedule(
        "0 30 2 * * MON",
        "Europe/Berlin",
        vec![("mondays", calendar(&[], &[], &["MON"]))],
        CalendarPolicy::PreviousOpenDay,
    );
    assert_eq!(
        previous.next_fire_after(utc("2027-03-27T00:00:00Z")),
        Some(super::schedule::CalendarFire {
            at: utc("2027-03-28T01:00:00Z"),
            moved_from: Some(date("2027-03-29")),
        })
    );
    // Lord Howe's gap is half an hour: 02:00-02:30 on 2027-10-03.
    let lord_howe = schedule(
        "0 15 2 * * SAT",
        "Australia/Lord_Howe",
        saturdays(),
        CalendarPolicy::NextOpenDay,
    );
    assert_eq!(
        local_fires(&lord_howe, utc("2027-10-01T00:00:00Z"), 1),
        [moved("2027-10-03T02:30:00+11:00", "2027-10-02")]
    );
    // Berlin falls back on Sunday 2027-10-31: 02:30 is twice, the first copy at +02:00.
    assert_eq!(
        local_fires(&next, utc("2027-10-29T00:00:00Z"), 2),
        [
            moved("2027-10-31T02:30:00+02:00", "2027-10-30"),
            moved("2027-11-07T02:30:00+01:00", "2027-11-06"),
        ]
    );
}

#[test]
fn a_moved_time_the_expression_lacks_comes_between_the_open_days_own_fires() {
    // Berlin's Sunday 2027-03-28 off: its 02:30 fired at the end of the gap, at 03:00, and
    // moves as 03:00, between the open day's 02:30 and 09:30; its 09:30 folds into theirs.
    let sunday = || vec![("sunday", calendar(&["2027-03-28"], &[], &[]))];
    let next = schedule(
        "0 30 2,9 * * *",
        "Europe/Berlin",
        sunday(),
        CalendarPolicy::NextOpenDay,
    );
    assert_eq!(
        local_fires(&next, utc("2027-03-27T12:00:00Z"), 4),
        [
            own("2027-03-29T02:30:00+02:00"),
            moved("2027-03-29T03:00:00+02:00", "2027-03-28"),
            own("2027-03-29T09:30:00+02:00"),
            own("2027-03-30T02:30:00+02:00"),
        ]
    );
    let previous = schedule(
        "0 30 2,9 * * *",
        "Europe/Berlin",
        sunday(),
        CalendarPolicy::PreviousOpenDay,
    );
    assert_eq!(
        local_fires(&previous, utc("2027-03-26T12:00:00Z"), 4),
        [
            own("2027-03-27T02:30:00+01:00"),
            moved("2027-03-27T03:00:00+01:00", "2027-03-28"),
            own("2027-03-27T09:30:00+01:00"),
            own("2027-03-29T02:30:00+02:00"),
        ]
    );
}

#[test]
fn skip_leaves_out_the_weekends() {
    let weekdays_only = schedule(
        "0 30 8 * * *",
        "Europe/Berlin",
        vec![("weekends", calendar(&[], &[], &["SAT", "SUN"]))],
        CalendarPolicy::Skip,
    );
    // Thursday 10 June 2027, after its fire.
    let after = utc("2027-06-10T07:00:00Z");
    assert_eq!(
        local_fires(&weekdays_only, after, 3),
        [
            own("2027-06-11T08:30:00+02:00"),
            own("2027-06-14T08:30:00+02:00"),
            own("2027-06-15T08:30:00+02:00"),
        ]
    );
    // From the middle of a weekend.
    assert_eq!(
        weekdays_only.next_after(utc("2027-06-12T10:00:00Z")),
        Some(utc("2027-06-14T06:30:00Z"))
    );
    let left_out: Vec<(String, String)> = weekdays_only
        .fires_off(after, utc("2027-06-14T23:59:59Z"), 10)
        .into_iter()
        .map(|(fire, holder)| (fire.local.to_rfc3339(), holder))
        .collect();
    assert_eq!(
        left_out,
        [
            (
                "2027-06-12T08:30:00+02:00".to_string(),
                "weekends".to_string()
            ),
            (
                "2027-06-13T08:30:00+02:00".to_string(),
                "weekends".to_string()
            ),
        ]
    );
    assert_eq!(
        weekdays_only
            .fires_off(after, utc("2027-06-14T23:59:59Z"), 1)
            .len(),
        1
    );
}

#[test]
fn a_preview_lists_moved_fires_with_their_day_and_the_fires_off_up_to_the_last() {
    let payroll = schedule(
        "0 0 9 L * *",
        "Europe/Berlin",
        vec![("weekends", calendar(&[], &[], &["SAT", "SUN"]))],
        CalendarPolicy::PreviousOpenDay,
    );
    let lines: Vec<(String, Option<DayOff>)> = payroll
        .preview(utc("2026-12-31T12:00:00Z"), 2)
        .into_iter()
        .map(|line| (line.fire.local.to_rfc3339(), line.day_off))
        .collect();
    let weekends = || "weekends".to_string();
    assert_eq!(
        lines,
        [
            (
                "2027-01-29T09:00:00+01:00".to_string(),
                Some(DayOff::MovedFrom(date("2027-01-31"), weekends()))
            ),
            (
                "2027-01-31T09:00:00+01:00".to_string(),
                Some(DayOff::Off(weekends()))
            ),
            // Sunday the 28th is after the last fire listed: not shown.
            (
                "2027-02-26T09:00:00+01:00".to_string(),
                Some(DayOff::MovedFrom(date("2027-02-28"), weekends()))
            ),
        ]
    );
    let plain = Schedule::from(cron("0 0 9 L * *", "Europe/Berlin"));
    assert!(plain
        .preview(utc("2026-12-31T12:00:00Z"), 2)
        .iter()
        .all(|line| line.day_off.is_none()));
}

#[test]
fn the_twenty_ninth_of_february() {
    let leap_day = || vec![("leap", calendar(&["2028-02-29"], &[], &[]))];
    let after = utc("2027-06-01T00:00:00Z");
    let next = |policy| schedule("0 0 0 29 2 *", "UTC", leap_day(), policy).next_fire_after(after);
    assert_eq!(
        next(CalendarPolicy::Skip).map(|fire| fire.at),
        Some(utc("2032-02-29T00:00:00Z"))
    );
    assert_eq!(
        next(CalendarPolicy::NextOpenDay).map(|fire| (fire.at, fire.moved_from)),
        Some((utc("2028-03-01T00:00:00Z"), Some(date("2028-02-29"))))
    );
    assert_eq!(
        next(CalendarPolicy::PreviousOpenDay).map(|fire| (fire.at, fire.moved_from)),
        Some((utc("2028-02-28T00:00:00Z"), Some(date("2028-02-29"))))
    );
}

#[test]
fn days_off_beyond_the_search_leave_no_fire() {
    let first = date("2027-01-01");
    let last = first + Duration::days(MAX_DAYS_OFF_IN_A_ROW + 10);
    let long = || {
        vec![(
            "long",
            Calendar {
                ranges: vec![DateRange {
                    from: first,
                    to: last,
                }],
                ..Calendar::default()
            },
        )]
    };
    for policy in CalendarPolicy::ALL {
        let daily = schedule("0 0 12 * * *", "UTC", long(), *policy);
        assert_eq!(
            daily.next_after(utc("2026-12-31T13:00:00Z")),
            None,
            "{policy}"
        );
    }
    let off = days_off(long(), CalendarPolicy::Skip);
    assert_eq!(off.open_from(first), None);
    assert_eq!(off.open_until(last), None);
    assert_eq!(off.open_until(first), first.pred_opt());
}

#[test]
fn no_calendars_is_the_cron_alone() {
    let plain = cron("0 30 8 * * *", "Europe/Berlin");
    let empty = Schedule::new(
        plain.clone(),
        Some(Arc::new(days_off(Vec::new(), CalendarPolicy::NextOpenDay))),
    );
    assert_eq!(empty.days_off(), None);
    assert_eq!(empty, Schedule::from(plain.clone()));
    let after = utc("2027-03-27T12:00:00Z");
    assert_eq!(empty.next_after(after), plain.next_after(after));
    assert_eq!(
        empty.next_fire_after(after).map(|fire| fire.moved_from),
        Some(None)
    );
    assert!(empty
        .fires_off(after, after + Duration::days(10), 10)
        .is_empty());
    assert_eq!(empty.cron(), &plain);
}

#[test]
fn upcoming_notes_dst_changes_and_moved_days() {
    let notes = |schedule: &Schedule, after: &str, count: usize| {
        schedule
            .upcoming(utc(after), count)
            .into_iter()
            .map(|(fire, from)| (fire.local.to_rfc3339(), fire.note, from))
            .collect::<Vec<(String, Option<String>, Option<NaiveDate>)>>()
    };
    let saturdays = || vec![("saturdays", calendar(&[], &[], &["SAT"]))];
    // Berlin springs forward on Sunday 2027-03-28. Saturday's 02:30 moves onto Sunday's, which
    // is in the gap: both fire once at its end, as Sunday's own.
    let daily = schedule(
        "0 30 2 * * *",
        "Europe/Berlin",
        saturdays(),
        CalendarPolicy::NextOpenDay,
    );
    assert_eq!(
        notes(&daily, "2027-03-26T12:00:00Z", 2),
        [
            (
                "2027-03-28T03:00:00+02:00".to_string(),
                Some("moved from 02:30 (DST gap)".to_string()),
                None
            ),
            ("2027-03-29T02:30:00+02:00".to_string(), None, None),
        ]
    );
    // Berlin falls back on Sunday 2027-10-31: Saturday's fires fold into Sunday's first copy,
    // the second copy is Sunday's own, noted.
    let half_hourly = schedule(
        "0 */30 2 * * *",
        "Europe/Berlin",
        saturdays(),
        CalendarPolicy::NextOpenDay,
    );
    assert_eq!(
        notes(&half_hourly, "2027-10-29T12:00:00Z", 5),
        [
            ("2027-10-31T02:00:00+02:00".to_string(), None, None),
            ("2027-10-31T02:30:00+02:00".to_string(), None, None),
            (
                "2027-10-31T02:00:00+01:00".to_string(),
                Some("repeated 02:00 (DST overlap)".to_string()),
                None
            ),
            (
                "2027-10-31T02:30:00+01:00".to_string(),
                Some("repeated 02:30 (DST overlap)".to_string()),
                None
            ),
            ("2027-11-01T02:00:00+01:00".to_string(), None, None),
        ]
    );
    // That Sunday off, on a Sunday-only schedule: its four fires (two wall-clock times, each
    // twice) land on Monday's two times, once each.
    let sundays = schedule(
        "0 */30 2 * * SUN",
        "Europe/Berlin",
        vec![("sundays", calendar(&["2027-10-31"], &[], &[]))],
        CalendarPolicy::NextOpenDay,
    );
    let sunday = Some(date("2027-10-31"));
    assert_eq!(
        notes(&sundays, "2027-10-29T12:00:00Z", 3),
        [
            ("2027-11-01T02:00:00+01:00".to_string(), None, sunday),
            ("2027-11-01T02:30:00+01:00".to_string(), None, sunday),
            ("2027-11-07T02:00:00+01:00".to_string(), None, None),
        ]
    );
    assert_eq!(notes(&sundays, "2027-10-29T12:00:00Z", 0), []);
}

// ---------------------------------------------------------------- days off

#[test]
fn open_days_jump_over_overlapping_ranges() {
    let off = days_off(
        vec![
            (
                "a",
                calendar(
                    &["2027-01-26"],
                    &[
                        ("2027-01-10", "2027-01-15"),
                        ("2027-01-12", "2027-01-13"),
                        ("2027-01-14", "2027-01-20"),
                    ],
                    &[],
                ),
            ),
            ("b", calendar(&[], &[("2027-01-20", "2027-01-25")], &[])),
            ("c", calendar(&[], &[], &["SAT", "SUN"])),
        ],
        CalendarPolicy::Skip,
    );
    // 2027-01-27 is a Wednesday, 2027-01-09 a Saturday.
    for day in [
        "2027-01-10",
        "2027-01-12",
        "2027-01-15",
        "2027-01-21",
        "2027-01-26",
    ] {
        assert_eq!(off.open_from(date(day)), Some(date("2027-01-27")), "{day}");
        assert_eq!(off.open_until(date(day)), Some(date("2027-01-08")), "{day}");
    }
    assert_eq!(off.open_from(date("2027-01-07")), Some(date("2027-01-07")));
    assert_eq!(off.open_until(date("2027-01-27")), Some(date("2027-01-27")));
    assert_eq!(off.open_from(date("2027-01-30")), Some(date("2027-02-01")));
    assert_eq!(off.open_until(date("2027-01-31")), Some(date("2027-01-29")));
    assert_eq!(
        off.holder(date("2027-01-20")).map(|name| name.as_str()),
        Some("a")
    );
    assert_eq!(
        off.holder(date("2027-01-23")).map(|name| name.as_str()),
        Some("b")
    );
    assert_eq!(
        off.holder(date("2027-01-30")).map(|name| name.as_str()),
        Some("c")
    );
    assert_eq!(off.holder(date("2027-01-27")), None);
}

#[test]
fn a_calendar_reads_its_json() {
    let read = Calendar::from_json(&json!({
        "dates": ["2027-12-25", "2027-12-26", "2027-12-25"],
        "ranges": [{"from": "2027-08-01", "to": "2027-08-14"}],
        "weekdays": ["sat", "SUN"],
    }))
    .expect("a calendar");
    assert_eq!(
        read,
        calendar(
            &["2027-12-25", "2027-12-26"],
            &[("2027-08-01", "2027-08-14")],
            &["SAT", "SUN"],
        )
    );
    assert_eq!(read.day_count(), 16);
    assert!(read.holds(date("2027-08-14")) && !read.holds(date("2027-08-16")));
    assert_eq!(
        serde_json::to_value(&read).expect("json"),
        json!({
            "dates": ["2027-12-25", "2027-12-26"],
            "ranges": [{"from": "2027-08-01", "to": "2027-08-14"}],
            "weekdays": ["SAT", "SUN"],
        })
    );
    assert_eq!(
        Calendar::from_json(&json!({"dates": null})),
        Ok(Calendar::default())
    );
}

#[test]
fn a_calendar_refused_names_the_field() {
    let field = |body: serde_json::Value| {
        Calendar::from_json(&body)
            .expect_err("refused")
            .field()
            .to_string()
    };
    assert_eq!(
        field(json!({"dates": ["2027-01-01", "2027-13-01"]})),
        "dates[1]"
    );
    assert_eq!(field(json!({"dates": ["2027-01-01", 5]})), "dates[1]");
    assert_eq!(field(json!({"dates": "2027-01-01"})), "dates");
    assert_eq!(field(json!({"dates": ["1969-12-31"]})), "dates");
    assert_eq!(
        field(json!({"ranges": [{"from": "2027-01-01"}]})),
        "ranges[0]"
    );
    assert_eq!(
        field(json!({"ranges": [{"from": "2027-01-01", "to": "2027-01-02", "by": 1}]})),
        "ranges[0]"
    );
    assert_eq!(
        field(json!({"ranges": [
            {"from": "2027-01-01", "to": "2027-01-02"},
            {"from": "2027-02-02", "to": "2027-02-01"},
        ]})),
        "ranges[1]"
    );
    // The date outside the years is the one named, `to` here.
    let err =
        Calendar::from_json(&json!({"ranges": [{"from": "2027-01-01", "to": "+10000-01-01"}]}))
            .expect_err("refused");
    assert_eq!(
        err.to_string(),
        "ranges[0]: +10000-01-01 is outside the years 1970 to 9999"
    );
    assert_eq!(field(json!({"weekdays": ["MONDAY"]})), "weekdays[0]");
    assert_eq!(field(json!({"weekdays": ["MON", "XYZ"]})), "weekdays[1]");
    assert_eq!(field(json!({"dates": [], "holidays": []})), "holidays");
    assert_eq!(field(json!(["2027-01-01"])), "body");
    let err = Calendar::from_json(&json!({"weekdays": ["FUNDAY"]})).expect_err("refused");
    assert_eq!(
        err.to_string(),
        "weekdays[0]: must be a weekday: MON, TUE, WED, THU, FRI, SAT or SUN (got \"FUNDAY\")"
    );
}

#[test]
fn calendar_names() {
    assert_eq!(
        super::name("de-holidays_2027.v1").map(|name| name.to_string()),
        Ok("de-holidays_2027.v1".to_string())
    );
    let long = "a".repeat(65);
    for bad in ["", "Holidays", "a b", "x/y", ".", "..", long.as_str()] {
        assert_eq!(super::name(bad).expect_err(bad).field(), "name");
    }
    assert!(super::name(&"a".repeat(64)).is_ok());
}

#[test]
fn task_calendars_read_their_json() {
    assert_eq!(TaskCalendars::from_json(&json!(null)), Ok(None));
    assert_eq!(TaskCalendars::from_json(&json!({"exclude": []})), Ok(None));
    let read = TaskCalendars::from_json(&json!({
        "exclude": ["de-holidays", "weekends", "de-holidays"],
        "policy": "PREVIOUS_OPEN_DAY",
    }))
    .expect("calendars")
    .expect("some");
    assert_eq!(
        read,
        TaskCalendars {
            exclude: vec![
                CalendarName::from("de-holidays"),
                CalendarName::from("weekends")
            ],
            policy: CalendarPolicy::PreviousOpenDay,
        }
    );
    assert_eq!(
        read.to_text(),
        r#"{"exclude":["de-holidays","weekends"],"policy":"PREVIOUS_OPEN_DAY"}"#
    );
    let skip = TaskCalendars::from_json(&json!({"exclude": ["weekends"]}))
        .expect("calendars")
        .expect("some");
    assert_eq!(skip.policy, CalendarPolicy::Skip);

    let field = |body: serde_json::Value| {
        TaskCalendars::from_json(&body)
            .expect_err("refused")
            .field()
            .to_string()
    };
    assert_eq!(
        field(json!({"exclude": ["a"], "policy": "LATER"})),
        "calendars.policy"
    );
    assert_eq!(
        field(json!({"exclude": ["a"], "policy": 1})),
        "calendars.policy"
    );
    assert_eq!(
        field(json!({"exclude": ["Bad Name"]})),
        "calendars.exclude[0]"
    );
    assert_eq!(field(json!({"exclude": ["a", 7]})), "calendars.exclude[1]");
    assert_eq!(field(json!({"exclude": "a"})), "calendars.exclude");
    let many: Vec<String> = (0..17).map(|at| format!("c{at}")).collect();
    assert_eq!(field(json!({ "exclude": many })), "calendars.exclude");
    assert_eq!(
        field(json!({"exclude": ["a"], "skip": true})),
        "calendars.skip"
    );
    assert_eq!(field(json!(["a"])), "calendars");
    let err = TaskCalendars::from_json(&json!({"exclude": ["a"], "policy": "LATER"}))
        .expect_err("refused");
    assert_eq!(
        err.message(),
        "must be SKIP, PREVIOUS_OPEN_DAY or NEXT_OPEN_DAY (got \"LATER\")"
    );
}
