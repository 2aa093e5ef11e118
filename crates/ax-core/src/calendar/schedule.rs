//! A task's schedule: its cron expression in its zone, with its days off applied.
//!
//! A fire's day is the date of its instant in the task's zone. Where that day is off:
//! - `SKIP`: the fire is left out;
//! - `PREVIOUS_OPEN_DAY` / `NEXT_OPEN_DAY`: it fires at the same wall-clock time on the nearest
//!   open day before / after, resolved as a fixed time is (a time in a DST gap at the gap's
//!   end, a repeated time in its first copy). Fires that land on one instant, moved or not,
//!   fire once.
//!
//! The search goes open day by open day: an open day's fires are its own and those moved onto
//! it from the run of days off next to it (before it for `NEXT_OPEN_DAY`, after it for
//! `PREVIOUS_OPEN_DAY`), so each step reads a few fires and the next open day with any is found
//! by jumping to the cron's next fire.

use std::sync::Arc;

use chrono::{DateTime, Duration, NaiveDate, NaiveTime, Utc};

use super::{CalendarPolicy, DaysOff, MAX_DAYS_OFF_IN_A_ROW};
use ax_cron::{CronSchedule, Fire, Zone, LAST_TIME};

/// How far after its start a search for the next fire looks, in days.
const SEARCH_DAYS: i64 = MAX_DAYS_OFF_IN_A_ROW;

/// When a task fires: its cron schedule (zone included), less its days off.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schedule {
    cron: CronSchedule,
    days_off: Option<Arc<DaysOff>>,
}

/// One fire of a schedule with days off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CalendarFire {
    pub at: DateTime<Utc>,
    /// The day off it was moved from; `None` for a fire on its own day.
    pub moved_from: Option<NaiveDate>,
}

impl From<CronSchedule> for Schedule {
    fn from(cron: CronSchedule) -> Self {
        Schedule {
            cron,
            days_off: None,
        }
    }
}

impl Schedule {
    /// `cron` less the days off (none when `days_off` holds no calendar).
    pub fn new(cron: CronSchedule, days_off: Option<Arc<DaysOff>>) -> Self {
        let days_off = days_off.filter(|off| !off.calendars.is_empty());
        Schedule { cron, days_off }
    }

    pub fn cron(&self) -> &CronSchedule {
        &self.cron
    }

    pub fn days_off(&self) -> Option<&DaysOff> {
        self.days_off.as_deref()
    }

    /// The first fire strictly after `after` (whole seconds, UTC); `None` if the schedule
    /// never fires again, or not within ten years of days off.
    pub fn next_after(&self, after: DateTime<Utc>) -> Option<DateTime<Utc>> {
        match &self.days_off {
            None => self.cron.next_after(after),
            Some(_) => self.next_fire_after(after).map(|fire| fire.at),
        }
    }

    /// [`Schedule::next_after`], saying whether the fire was moved off its day.
    pub fn next_fire_after(&self, after: DateTime<Utc>) -> Option<CalendarFire> {
        let Some(off) = &self.days_off else {
            return self.cron.next_after(after).map(own_day);
        };
        let search = Search {
            cron: &self.cron,
            zone: self.cron.zone(),
            off,
            after,
        };
        match off.policy {
            CalendarPolicy::Skip => search.skipping(),
            CalendarPolicy::PreviousOpenDay | CalendarPolicy::NextOpenDay => search.moving(),
        }
        .filter(|fire| fire.at <= LAST_TIME)
    }

    /// The next `count` fires after `after` (up to [`LAST_TIME`]), each with its note (a DST
    /// change) and, where it was moved, the day off it was moved from.
    pub fn upcoming(&self, after: DateTime<Utc>, count: usize) -> Vec<(Fire, Option<NaiveDate>)> {
        let mut fires = Vec::new();
        let mut at = after;
        while fires.len() < count {
            // As the cron's own previews, up to the last time the API takes back.
            let Some(next) = self.next_fire_after(at).filter(|next| next.at <= LAST_TIME) else {
                break;
            };
            let Some(fire) = self.cron.fire_at(next.at) else {
                break;
            };
            at = next.at;
            fires.push((fire, next.moved_from));
        }
        fires
    }

    /// What a preview lists: the next `count` fires after `after`, each moved one with the day
    /// and calendar it was moved from, and among them the cron's fires left out or moved off
    /// their days (those up to the last fire listed, or up to a year on when none is).
    pub fn preview(&self, after: DateTime<Utc>, count: usize) -> Vec<Previewed> {
        let fires = self.upcoming(after, count);
        let through = fires
            .last()
            .map_or(after + Duration::days(366), |(fire, _)| fire.utc);
        let holder = |day: NaiveDate| {
            self.days_off()
                .and_then(|off| off.holder(day))
                .map_or_else(String::new, |name| name.to_string())
        };
        let mut listed: Vec<Previewed> = fires
            .into_iter()
            .map(|(fire, moved_from)| Previewed {
                fire,
                day_off: moved_from.map(|day| DayOff::MovedFrom(day, holder(day))),
            })
            .chain(
                self.fires_off(after, through, count)
                    .into_iter()
                    .map(|(fire, calendar)| Previewed {
                        fire,
                        day_off: Some(DayOff::Off(calendar)),
                    }),
            )
            .collect();
        listed.sort_by_key(|item| item.fire.utc);
        listed
    }

    /// The cron's own fires from `after` (excluded) through `through` that fall on a day off,
    /// each with the calendar holding its day: what a preview shows as left out or moved.
    pub fn fires_off(
        &self,
        after: DateTime<Utc>,
        through: DateTime<Utc>,
        count: usize,
    ) -> Vec<(Fire, String)> {
        let Some(off) = &self.days_off else {
            return Vec::new();
        };
        let mut found = Vec::new();
        let mut at = after;
        while found.len() < count {
            let Some(next) = self.cron.next_after(at).filter(|next| *next <= through) else {
                break;
            };
            at = next;
            let holder = self
                .cron
                .zone()
                .wall_clock(next)
                .and_then(|wall| off.holder(wall.date()));
            if let (Some(holder), Some(fire)) = (holder, self.cron.fire_at(next)) {
                found.push((fire, holder.to_string()));
            }
        }
        found
    }
}

/// One line of a preview.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Previewed {
    pub fire: Fire,
    /// `None`: a fire on its own day.
    pub day_off: Option<DayOff>,
}

/// How a previewed line meets a day off.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DayOff {
    /// A fire moved here from this day off, of this calendar.
    MovedFrom(NaiveDate, String),
    /// The cron's fire on a day off of this calendar: left out, or moved (see the policy).
    Off(String),
}

fn own_day(at: DateTime<Utc>) -> CalendarFire {
    CalendarFire {
        at,
        moved_from: None,
    }
}

/// One search for the first fire after `after`.
struct Search<'a> {
    cron: &'a CronSchedule,
    zone: &'a Zone,
    off: &'a DaysOff,
    after: DateTime<Utc>,
}

impl Search<'_> {
    /// `SKIP`: the cron's fires, jumping past each day off.
    fn skipping(&self) -> Option<CalendarFire> {
        let horizon = self.first_day()? + Duration::days(SEARCH_DAYS);
        let mut at = self.after;
        loop {
            let fire = self.cron.next_after(at)?;
            let day = self.day_of(fire)?;
            if !self.off.is_off(day) {
                return Some(own_day(fire));
            }
            if day > horizon {
                return None;
            }
            // The day's other fires are off too: on from its last instant.
            at = self.start_of(day.succ_opt()?)? - Duration::seconds(1);
        }
    }

    /// `PREVIOUS_OPEN_DAY` / `NEXT_OPEN_DAY`: open day by open day, each with the fires moved
    /// onto it.
    fn moving(&self) -> Option<CalendarFire> {
        let first = self.first_day()?;
        let horizon = first + Duration::days(SEARCH_DAYS);
        let mut day = self.off.open_from(first)?;
        while day <= horizon {
            let (from, through) = self.days_moved_onto(day);
            let moved = days(from, through)
                .filter(|off_day| *off_day != day)
                .filter_map(|off_day| self.first_moved(off_day, day))
                .min_by_key(|fire| fire.at);
            let own = self.first_own(day);
            let best = match (own, moved) {
                (Some(own), Some(moved)) if moved.at < own.at => Some(moved),
                (Some(own), _) => Some(own),
                (None, moved) => moved,
            };
            if best.is_some() {
                return best;
            }
            // The next open day with a fire: the owner of the cron's next fire past the days
            // this one covered.
            let fire = self
                .cron
                .next_after(self.start_of(through.succ_opt()?)? - Duration::seconds(1))?;
            let fire_day = self.day_of(fire)?;
            day = match self.off.policy {
                CalendarPolicy::PreviousOpenDay => self
                    .off
                    .open_until(fire_day)
                    .filter(|open| *open > through)
                    .or_else(|| self.off.open_from(fire_day))?,
                _ => self.off.open_from(fire_day)?,
            };
        }
        None
    }

    /// The days whose fires land on the open `day`: itself and the days off next to it.
    fn days_moved_onto(&self, day: NaiveDate) -> (NaiveDate, NaiveDate) {
        let mut edge = day;
        loop {
            let next = match self.off.policy {
                CalendarPolicy::PreviousOpenDay => edge.succ_opt(),
                _ => edge.pred_opt(),
            };
            match next {
                Some(next)
                    if self.off.is_off(next)
                        && (next - day).num_days().abs() <= MAX_DAYS_OFF_IN_A_ROW =>
                {
                    edge = next
                }
                _ => break,
            }
        }
        (day.min(edge), day.max(edge))
    }

    /// The first of `day`'s own fires after `after`.
    fn first_own(&self, day: NaiveDate) -> Option<CalendarFire> {
        let from = self.after.max(self.start_of(day)? - Duration::seconds(1));
        let fire = self.cron.next_after(from)?;
        (self.day_of(fire)? == day).then(|| own_day(fire))
    }

    /// The first fire of the day off `off_day` that, moved onto `day`, is after `after`.
    fn first_moved(&self, off_day: NaiveDate, day: NaiveDate) -> Option<CalendarFire> {
        let day_start = self.start_of(day)?;
        // Times before `after`'s wall-clock time map to instants before it: start there.
        let from = if self.after < day_start {
            self.start_of(off_day)?
        } else {
            let time = self.zone.wall_clock(self.after)?.time();
            self.zone.earliest_at(off_day.and_time(time))?
        };
        let mut at = from - Duration::seconds(1);
        loop {
            let fire = self.cron.next_after(at)?;
            if self.day_of(fire)? != off_day {
                return None;
            }
            let time = self.zone.wall_clock(fire)?.time();
            let moved = self.at(day, time)?;
            if moved > self.after {
                return Some(CalendarFire {
                    at: moved,
                    moved_from: Some(off_day),
                });
            }
            at = fire;
        }
    }

    /// The day the search starts on: that of the first instant after `after`.
    fn first_day(&self) -> Option<NaiveDate> {
        self.day_of(self.after + Duration::seconds(1))
    }

    fn day_of(&self, at: DateTime<Utc>) -> Option<NaiveDate> {
        Some(self.zone.wall_clock(at)?.date())
    }

    /// The first instant of `day` in the zone.
    fn start_of(&self, day: NaiveDate) -> Option<DateTime<Utc>> {
        self.at(day, NaiveTime::MIN)
    }

    fn at(&self, day: NaiveDate, time: NaiveTime) -> Option<DateTime<Utc>> {
        self.zone.earliest_at(day.and_time(time))
    }
}

/// The days `from` through `through`.
fn days(from: NaiveDate, through: NaiveDate) -> impl Iterator<Item = NaiveDate> {
    from.iter_days().take_while(move |day| *day <= through)
}
