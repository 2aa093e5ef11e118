//! Backfill times: the fire times a backfill covers, and when each of its runs is due.

use chrono::{DateTime, Duration, Utc};

use crate::calendar::schedule::Schedule;

/// Most fire times one backfill covers.
pub const MAX_BACKFILL_RUNS: usize = 10_000;

/// The schedule's fire times in `[from, to)`, earliest first; `None` if there are more than
/// `max`.
pub fn fire_times(
    cron: &Schedule,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    max: usize,
) -> Option<Vec<DateTime<Utc>>> {
    let mut times = Vec::new();
    // `next_after` is exclusive: start one second back so that `from` itself counts.
    let mut next = cron.next_after(from - Duration::seconds(1));
    while let Some(at) = next.filter(|at| *at < to) {
        if times.len() == max {
            return None;
        }
        times.push(at);
        next = cron.next_after(at);
    }
    Some(times)
}

/// When the `n`-th (from 0) of a backfill's runs is due: `per_sec` a second, from the first
/// whole second at or after `start` (runs go out on the wheel's seconds: a fraction would put
/// two seconds' share in one).
pub fn paced(start: DateTime<Utc>, n: usize, per_sec: i64) -> DateTime<Utc> {
    let first = start.timestamp() + i64::from(start.timestamp_subsec_nanos() > 0);
    let second = first + n as i64 / per_sec.max(1);
    DateTime::from_timestamp(second, 0).unwrap_or(start)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cron(expr: &str) -> Schedule {
        ax_cron::CronSchedule::parse(expr)
            .expect("valid cron")
            .into()
    }

    fn t(secs: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(1_800_000_000 + secs, 0).expect("valid time")
    }

    #[test]
    fn fire_times_cover_the_half_open_range() {
        let every_ten = cron("*/10 * * * * *");
        let times = fire_times(&every_ten, t(100), t(140), 10).expect("few");
        assert_eq!(times, vec![t(100), t(110), t(120), t(130)]);
        assert_eq!(fire_times(&every_ten, t(101), t(110), 10), Some(vec![]));
        assert_eq!(
            fire_times(&every_ten, t(100), t(140), 4).map(|v| v.len()),
            Some(4)
        );
        assert_eq!(fire_times(&every_ten, t(100), t(141), 4), None);
    }

    #[test]
    fn backfills_are_paced_per_second() {
        assert_eq!(paced(t(50), 0, 50), t(50));
        assert_eq!(paced(t(50), 49, 50), t(50));
        assert_eq!(paced(t(50), 50, 50), t(51));
        assert_eq!(paced(t(50), 9_999, 50), t(249));
        assert_eq!(paced(t(50), 3, 1), t(53));
        let late = t(50) + Duration::milliseconds(300);
        assert_eq!(paced(late, 0, 2), t(51));
        assert_eq!(paced(late, 2, 2), t(52));
    }
}
