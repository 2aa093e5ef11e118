//! A task's (or a scene's) run history summed up: success rate, duration and lag percentiles,
//! and failures counted by day and by hour for the heat-maps. Pure: the runs and the time are
//! arguments, days and hours are UTC.

use chrono::{DateTime, Duration, DurationRound, NaiveDate, Utc};

use crate::run::percentile::percentile;
use crate::run::{RequestId, RunStatus, TaskId, TriggerType};

/// One run as the timeline and the stats see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Span {
    pub request_id: RequestId,
    pub task_id: TaskId,
    pub status: RunStatus,
    pub trigger: TriggerType,
    pub scheduled: DateTime<Utc>,
    pub dispatched: Option<DateTime<Utc>>,
    pub finished: Option<DateTime<Utc>>,
}

impl Span {
    /// Where its bar starts: its first dispatch, or its scheduled time if it never went out.
    pub fn start(&self) -> DateTime<Utc> {
        self.dispatched.unwrap_or(self.scheduled)
    }

    /// Where its bar ends: when it finished, `now` while it is open.
    pub fn end(&self, now: DateTime<Utc>) -> DateTime<Utc> {
        self.finished.unwrap_or(now).max(self.start())
    }

    /// From first dispatch to finish, of a run that went out and ended.
    pub fn duration_ms(&self) -> Option<i64> {
        let (dispatched, finished) = (self.dispatched?, self.finished?);
        Some((finished - dispatched).num_milliseconds().max(0))
    }

    /// From scheduled to first dispatch; none for a backfilled run (late by design).
    pub fn lag_ms(&self) -> Option<i64> {
        match self.trigger {
            TriggerType::Backfill => None,
            _ => Some((self.dispatched? - self.scheduled).num_milliseconds()),
        }
    }
}

/// p50, p95 and p99 of some milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Percentiles {
    pub p50: i64,
    pub p95: i64,
    pub p99: i64,
}

impl Percentiles {
    /// The percentiles of these values; none when there are none.
    pub fn of(mut values: Vec<i64>) -> Option<Percentiles> {
        values.sort_unstable();
        Some(Percentiles {
            p50: percentile(&values, 50.0)?,
            p95: percentile(&values, 95.0)?,
            p99: percentile(&values, 99.0)?,
        })
    }
}

/// What a set of runs says about their task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stats {
    pub runs: usize,
    /// Runs that ended SUCCESS, and those that ended SUCCESS, FAILED or MISSED (the runs that
    /// were due to do their work; skipped and cancelled ones were not).
    pub succeeded: usize,
    pub decided: usize,
    pub duration_ms: Option<Percentiles>,
    pub lag_ms: Option<Percentiles>,
}

impl Stats {
    /// Successes in percent of the decided runs; none when none was decided.
    pub fn success_rate(&self) -> Option<f64> {
        (self.decided > 0).then(|| self.succeeded as f64 * 100.0 / self.decided as f64)
    }
}

/// The statuses counted as failures on the heat-maps: a timeout, an upstream's failure or a
/// dependency timeout all end a run FAILED, with their own code.
pub const FAILURES: &[RunStatus] = &[RunStatus::Failed];

/// The stats of these runs.
pub fn stats(spans: &[Span]) -> Stats {
    let decided = [RunStatus::Success, RunStatus::Failed, RunStatus::Missed];
    Stats {
        runs: spans.len(),
        succeeded: spans
            .iter()
            .filter(|s| s.status == RunStatus::Success)
            .count(),
        decided: spans.iter().filter(|s| decided.contains(&s.status)).count(),
        duration_ms: Percentiles::of(spans.iter().filter_map(Span::duration_ms).collect()),
        lag_ms: Percentiles::of(spans.iter().filter_map(Span::lag_ms).collect()),
    }
}

/// Failures per day over the `days` days ending with `today`, oldest first.
pub fn by_day(failures: &[DateTime<Utc>], today: NaiveDate, days: usize) -> Vec<(NaiveDate, u32)> {
    let first = today - Duration::days(days as i64 - 1);
    let mut counts: Vec<(NaiveDate, u32)> = (0..days)
        .map(|n| (first + Duration::days(n as i64), 0))
        .collect();
    for at in failures {
        let index = (at.date_naive() - first).num_days();
        if let Some(cell) = usize::try_from(index).ok().and_then(|n| counts.get_mut(n)) {
            cell.1 += 1;
        }
    }
    counts
}

/// Failures per hour over the `hours` hours ending with the one `now` is in, oldest first.
pub fn by_hour(
    failures: &[DateTime<Utc>],
    now: DateTime<Utc>,
    hours: usize,
) -> Vec<(DateTime<Utc>, u32)> {
    let current = now.duration_trunc(Duration::hours(1)).unwrap_or(now);
    let first = current - Duration::hours(hours as i64 - 1);
    let mut counts: Vec<(DateTime<Utc>, u32)> = (0..hours)
        .map(|n| (first + Duration::hours(n as i64), 0))
        .collect();
    for at in failures.iter().filter(|at| **at >= first) {
        let index = (*at - first).num_hours() as usize;
        if let Some(cell) = counts.get_mut(index) {
            cell.1 += 1;
        }
    }
    counts
}

/// Why a run is MISSED: how late it was when ax noticed it, and how many of the schedule's
/// periods the one run stands for (its own included, as the fire plan counts them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MissedReason {
    pub late: Duration,
    pub periods: u64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn at(secs: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(secs, 0).expect("a time")
    }

    fn span(
        status: RunStatus,
        scheduled: i64,
        dispatched: Option<i64>,
        finished: Option<i64>,
    ) -> Span {
        Span {
            request_id: RequestId::manual(),
            task_id: TaskId(1),
            status,
            trigger: TriggerType::Schedule,
            scheduled: at(scheduled),
            dispatched: dispatched.map(at),
            finished: finished.map(at),
        }
    }

    #[test]
    fn stats_count_decided_runs_and_take_percentiles() {
        let mut spans: Vec<Span> = (0..100)
            .map(|n| {
                span(
                    RunStatus::Success,
                    n * 60,
                    Some(n * 60 + 1),
                    Some(n * 60 + 1 + n),
                )
            })
            .collect();
        spans.push(span(RunStatus::Failed, 0, Some(2), Some(2)));
        spans.push(span(RunStatus::Missed, 0, None, Some(900)));
        spans.push(span(RunStatus::Skipped, 0, None, Some(0)));
        let mut backfill = span(RunStatus::Running, 0, Some(3_600), None);
        backfill.trigger = TriggerType::Backfill;
        spans.push(backfill);
        let stats = stats(&spans);
        assert_eq!(
            (stats.runs, stats.succeeded, stats.decided),
            (104, 100, 102)
        );
        let rate = stats.success_rate().expect("a rate");
        assert!((rate - 100.0 * 100.0 / 102.0).abs() < 1e-9);
        // Durations 0..=99 s and the failed run's 0 s.
        let duration = stats.duration_ms.expect("durations");
        assert_eq!(
            (duration.p50, duration.p95, duration.p99),
            (49_000, 94_000, 98_000)
        );
        // Lags: 100 of 1 s and the failed run's 2 s; the backfill is left out.
        let lag = stats.lag_ms.expect("lags");
        assert_eq!((lag.p50, lag.p99), (1_000, 1_000));
    }

    #[test]
    fn no_runs_no_rate_nor_percentiles() {
        let stats = stats(&[span(RunStatus::Pending, 0, None, None)]);
        assert_eq!(
            (stats.success_rate(), stats.duration_ms, stats.lag_ms),
            (None, None, None)
        );
    }

    #[test]
    fn failures_fall_in_their_day() {
        let day = 86_400;
        let today = at(100 * day).date_naive();
        let failures = [
            at(100 * day + 5),
            at(100 * day + 80_000),
            at(99 * day),
            at(10 * day + 1),
            at(101 * day),
        ];
        let days = by_day(&failures, today, 90);
        assert_eq!(days.len(), 90);
        assert_eq!(days[0].0, at(11 * day).date_naive());
        assert_eq!(days[89], (today, 2));
        assert_eq!(days[88].1, 1);
        // Before the 90 days, and after today: left out.
        assert_eq!(days.iter().map(|d| d.1).sum::<u32>(), 3);
    }

    #[test]
    fn failures_fall_in_their_hour() {
        let now = at(1_000 * 3_600 + 1_800);
        let failures = [
            at(1_000 * 3_600),
            at(1_000 * 3_600 + 10),
            at(999 * 3_600 + 3_599),
            at(832 * 3_600),
            at(833 * 3_600),
        ];
        let hours = by_hour(&failures, now, 168);
        assert_eq!(hours.len(), 168);
        assert_eq!(hours[167], (at(1_000 * 3_600), 2));
        assert_eq!(hours[166].1, 1);
        assert_eq!(hours[0], (at(833 * 3_600), 1));
        assert_eq!(hours.iter().map(|h| h.1).sum::<u32>(), 4);
    }

    proptest! {
        #[test]
        fn every_failure_in_range_is_counted_once(offsets in proptest::collection::vec(0i64..(200 * 3_600), 0..50)) {
            let now = at(10_000 * 3_600);
            let failures: Vec<DateTime<Utc>> = offsets.iter().map(|o| now - Duration::seconds(*o)).collect();
            let hours = by_hour(&failures, now, 168);
            let first = hours[0].0;
            let expected = failures.iter().filter(|f| **f >= first).count() as u32;
            prop_assert_eq!(hours.iter().map(|h| h.1).sum::<u32>(), expected);
            let days = by_day(&failures, now.date_naive(), 90);
            prop_assert_eq!(days.iter().map(|d| d.1).sum::<u32>(), failures.len() as u32);
        }
    }
}
