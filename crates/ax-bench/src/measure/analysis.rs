//! The pure part of the bench: which runs the window should hold, and what the executor saw of
//! them. No I/O and no clock: every time is an argument, so all of it is unit-tested.

use std::collections::{HashMap, HashSet};

use chrono::{DateTime, Duration, Utc};
use uuid::Uuid;

use ax_core::run::{RequestId, TaskId};
use ax_cron::CronSchedule;

/// One run: (task id, scheduled second as a Unix timestamp).
pub type RunKey = (i64, i64);

/// The cron expression of the `index`-th bench task. Task `i` fires at the seconds congruent to
/// `i mod period`, so the fires of all tasks spread evenly, `tasks / period` per second.
/// `period` must divide 60 (checked with the arguments).
pub fn task_cron(index: u32, period: u32) -> String {
    let second = index % 60;
    // For periods of whole minutes: how many minutes a period has, and task i's minute in it.
    let minutes = (period / 60).max(1);
    let minute = (index / 60) % minutes;
    match period {
        1 => "* * * * * *".to_string(),
        // A step of 60 would be out of range for the field: one value says the same.
        60 => format!("{second} * * * * *"),
        3600 => format!("{second} {minute} * * * *"),
        p if p > 60 => format!("{second} {minute}/{minutes} * * * *"),
        _ => format!("{}/{period} * * * * *", index % period),
    }
}

/// Every run of `tasks` scheduled in `[start, end)`, computed with ax's own cron engine.
pub fn expected_fires(
    tasks: &[(i64, CronSchedule)],
    start: DateTime<Utc>,
    end: DateTime<Utc>,
) -> HashSet<RunKey> {
    let mut expected = HashSet::new();
    for (task_id, cron) in tasks {
        // `next_after` is exclusive: start one second back so that `start` itself counts.
        let mut next = cron.next_after(start - Duration::seconds(1));
        while let Some(at) = next.filter(|at| *at < end) {
            expected.insert((*task_id, at.timestamp()));
            next = cron.next_after(at);
        }
    }
    expected
}

/// One request the mock executor received.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Delivery {
    pub request_id: Uuid,
    pub task_id: i64,
    /// `scheduledAt` of the body, as a Unix timestamp.
    pub scheduled_at: i64,
    /// When the executor read the request, in Unix microseconds.
    pub received_at_us: i64,
}

/// How the deliveries of the window compare with the expected runs.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Matching {
    /// Distinct runs scheduled in the window that reached the executor.
    pub delivered: usize,
    /// Expected runs that never reached the executor.
    pub lost: usize,
    /// Deliveries beyond the first of a request id (scheduled in the window).
    pub duplicate_deliveries: usize,
    /// Distinct runs in the window that no task's schedule asked for.
    pub unexpected: usize,
    /// Deliveries whose request id is not the one ax derives from (task, scheduled second).
    pub mismatched_request_ids: usize,
    /// Receive time minus scheduled time of every delivery in the window, in ms, sorted.
    pub lags_ms: Vec<f64>,
}

/// Matches the executor's deliveries against the expected runs of `[start_sec, end_sec)`.
/// Deliveries of runs scheduled outside the window (warm-up, grace) are ignored.
pub fn match_deliveries(
    expected: &HashSet<RunKey>,
    deliveries: &[Delivery],
    start_sec: i64,
    end_sec: i64,
) -> Matching {
    let mut per_request: HashMap<Uuid, RunKey> = HashMap::with_capacity(expected.len());
    let mut seen_runs: HashSet<RunKey> = HashSet::with_capacity(expected.len());
    let mut matching = Matching::default();
    for delivery in deliveries {
        if !(start_sec..end_sec).contains(&delivery.scheduled_at) {
            continue;
        }
        let key = (delivery.task_id, delivery.scheduled_at);
        matching
            .lags_ms
            .push((delivery.received_at_us - delivery.scheduled_at * 1_000_000) as f64 / 1e3);
        if !has_derived_id(delivery) {
            matching.mismatched_request_ids += 1;
        }
        if per_request.insert(delivery.request_id, key).is_some() {
            matching.duplicate_deliveries += 1;
        }
        seen_runs.insert(key);
    }
    matching.delivered = per_request.len();
    matching.lost = expected.difference(&seen_runs).count();
    matching.unexpected = seen_runs.difference(expected).count();
    matching.lags_ms.sort_by(f64::total_cmp);
    matching
}

/// Distinct runs the executor first received within `[start_sec, end_sec)` of wall time,
/// whatever their scheduled time: ax's throughput in that window, which the runs scheduled in
/// it understate once ax runs late.
pub fn received_within(deliveries: &[Delivery], start_sec: i64, end_sec: i64) -> usize {
    let window = start_sec * 1_000_000..end_sec * 1_000_000;
    let mut seen = HashSet::with_capacity(deliveries.len());
    deliveries
        .iter()
        .filter(|delivery| seen.insert(delivery.request_id))
        .filter(|delivery| window.contains(&delivery.received_at_us))
        .count()
}

pub(crate) fn has_derived_id(delivery: &Delivery) -> bool {
    DateTime::from_timestamp(delivery.scheduled_at, 0)
        .is_some_and(|at| scheduled_request_id(delivery.task_id, at) == delivery.request_id)
}

/// The id ax gives the run of `task_id` scheduled at `at`, as the executor receives it.
pub(crate) fn scheduled_request_id(task_id: i64, at: DateTime<Utc>) -> Uuid {
    Uuid::parse_str(RequestId::scheduled(TaskId(task_id), at).as_str()).unwrap_or_default()
}

/// CPU use in percent of one core: `ticks` of CPU time (in `ticks_per_sec` units) over
/// `wall_secs` of wall time.
pub fn cpu_percent(ticks: u64, ticks_per_sec: u64, wall_secs: f64) -> Option<f64> {
    (wall_secs > 0.0 && ticks_per_sec > 0)
        .then(|| ticks as f64 / ticks_per_sec as f64 / wall_secs * 100.0)
}

/// Whether the mock executor answers this run with a 500. Decided by the request id's last 62
/// bits (past the variant's two), a SHA-1 hash (see `RequestId::scheduled`): uniform, and the
/// same answer for every delivery of a run.
pub fn injects_failure(request_id: &Uuid, fail_rate: f64) -> bool {
    if fail_rate <= 0.0 {
        return false;
    }
    let fraction = (request_id.as_u64_pair().1 << 2) as f64 / u64::MAX as f64;
    fail_rate >= 1.0 || fraction < fail_rate
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn at(secs: i64) -> DateTime<Utc> {
        Utc.timestamp_opt(secs, 0).single().expect("valid time")
    }

    fn cron(expr: &str) -> CronSchedule {
        CronSchedule::parse(expr).expect("valid cron")
    }

    /// A whole minute (a multiple of 60), so that second-of-minute arithmetic is easy to read.
    const T0: i64 = 1_800_000_000;

    fn delivery(task_id: i64, scheduled_at: i64, lag_ms: i64) -> Delivery {
        Delivery {
            request_id: scheduled_request_id(task_id, at(scheduled_at)),
            task_id,
            scheduled_at,
            received_at_us: scheduled_at * 1_000_000 + lag_ms * 1_000,
        }
    }

    #[test]
    fn throughput_counts_first_deliveries_by_receive_time() {
        let deliveries = [
            delivery(1, T0 - 20, 20_500), // scheduled before, received in the window
            delivery(2, T0, 100),
            delivery(2, T0, 9_000),     // a second delivery of the same run
            delivery(3, T0 + 9, 1_500), // received after the window
        ];
        assert_eq!(received_within(&deliveries, T0, T0 + 10), 2);
        assert_eq!(received_within(&deliveries, T0 + 10, T0 + 20), 1);
    }

    #[test]
    fn every_period_that_divides_60_gives_a_valid_evenly_spread_cron() {
        for period in [1, 2, 3, 4, 5, 6, 10, 12, 15, 20, 30, 60] {
            let tasks: Vec<(i64, CronSchedule)> = (0..period * 3)
                .map(|i| (i64::from(i), cron(&task_cron(i, period))))
                .collect();
            let expected = expected_fires(&tasks, at(T0), at(T0 + 60));
            assert_eq!(expected.len(), 3 * 60, "period {period}");
            // Every second of the minute holds the same number of fires.
            let mut per_second = HashMap::new();
            for (_, sec) in &expected {
                *per_second.entry(sec).or_insert(0) += 1;
            }
            assert_eq!(per_second.len(), 60, "period {period}");
            assert!(per_second.values().all(|n| *n == 3), "period {period}");
        }
    }

    #[test]
    fn periods_of_whole_minutes_spread_over_the_period() {
        for period in [120, 3600] {
            let tasks: Vec<(i64, CronSchedule)> = (0..period)
                .map(|i| (i64::from(i), cron(&task_cron(i, period))))
                .collect();
            let start = T0 - T0.rem_euclid(3600);
            let expected = expected_fires(&tasks, at(start), at(start + 3600));
            assert_eq!(expected.len(), 3600, "period {period}: one fire a second");
            let seconds: std::collections::HashSet<_> = expected.iter().map(|(_, s)| s).collect();
            assert_eq!(seconds.len(), 3600, "period {period}");
        }
        assert_eq!(task_cron(61, 3600), "1 1 * * * *");
        assert_eq!(task_cron(61, 120), "1 1/2 * * * *");
    }

    #[test]
    fn task_i_fires_at_its_offset() {
        assert_eq!(task_cron(0, 1), "* * * * * *");
        assert_eq!(task_cron(7, 5), "2/5 * * * * *");
        assert_eq!(task_cron(61, 60), "1 * * * * *");
        let tasks = vec![(9, cron(&task_cron(7, 5)))];
        let mut fires: Vec<_> = expected_fires(&tasks, at(T0), at(T0 + 20))
            .into_iter()
            .collect();
        fires.sort();
        assert_eq!(
            fires,
            vec![(9, T0 + 2), (9, T0 + 7), (9, T0 + 12), (9, T0 + 17)]
        );
    }

    #[test]
    fn the_window_includes_its_start_and_excludes_its_end() {
        let tasks = vec![(1, cron("* * * * * *"))];
        let fires = expected_fires(&tasks, at(T0), at(T0 + 3));
        assert_eq!(fires, HashSet::from([(1, T0), (1, T0 + 1), (1, T0 + 2)]));
        assert!(expected_fires(&tasks, at(T0), at(T0)).is_empty());
    }

    #[test]
    fn deliveries_are_matched_to_runs() {
        let expected = HashSet::from([(1, T0), (1, T0 + 1), (2, T0), (2, T0 + 1)]);
        let deliveries = [
            delivery(1, T0 - 1, 5), // warm-up: ignored
            delivery(1, T0, 10),
            delivery(1, T0, 900), // a second delivery of the same run
            delivery(1, T0 + 1, 20),
            delivery(2, T0 + 1, 30),
            delivery(3, T0 + 1, 40), // no such expectation
            delivery(2, T0 + 2, 5),  // after the window: ignored
        ];
        let m = match_deliveries(&expected, &deliveries, T0, T0 + 2);
        assert_eq!(m.delivered, 4);
        assert_eq!(m.duplicate_deliveries, 1);
        assert_eq!(m.lost, 1, "(2, T0) never came");
        assert_eq!(m.unexpected, 1);
        assert_eq!(m.mismatched_request_ids, 0);
        assert_eq!(m.lags_ms, vec![10.0, 20.0, 30.0, 40.0, 900.0]);
    }

    #[test]
    fn a_request_id_not_derived_from_the_run_is_counted() {
        let mut wrong = delivery(1, T0, 10);
        wrong.request_id = Uuid::nil();
        let m = match_deliveries(&HashSet::from([(1, T0)]), &[wrong], T0, T0 + 1);
        assert_eq!((m.delivered, m.lost, m.mismatched_request_ids), (1, 0, 1));
    }

    #[test]
    fn cpu_is_a_share_of_one_core() {
        assert_eq!(cpu_percent(150, 100, 10.0), Some(15.0));
        assert_eq!(cpu_percent(150, 100, 0.0), None);
    }

    #[test]
    fn injected_failures_follow_the_rate_and_the_request_id() {
        let ids: Vec<Uuid> = (0..10_000)
            .map(|s| scheduled_request_id(1, at(s)))
            .collect();
        let failed = ids.iter().filter(|id| injects_failure(id, 0.2)).count();
        assert!((1_800..2_200).contains(&failed), "{failed}");
        assert!(ids.iter().all(|id| injects_failure(id, 1.0)));
        assert!(!ids.iter().any(|id| injects_failure(id, 0.0)));
        assert_eq!(injects_failure(&ids[0], 0.5), injects_failure(&ids[0], 0.5));
    }
}
