//! The bench's result: one JSON line on stdout.

use std::collections::BTreeMap;

use serde::Serialize;

use ax_core::run::percentile::percentile;

/// `ax bench --help`: every key of the report line, what it holds.
pub const FIELDS_HELP: &str = "\
The report: one JSON line on stdout, with these keys.
  tasks, period, store, redis, instances, executors, mode, fail_rate   the run's options
  window_secs             length of the measuring window
  expected                runs scheduled in the window
  delivered               distinct runs scheduled in the window that reached the executor
  fires_per_sec           delivered / window_secs
  received_per_sec        distinct runs the executor first received during the window, whatever
                          their scheduled time: the throughput, also when ax runs late
  lag_ms                  {p50, p99, p999, max, min}: executor receive time minus scheduledAt, in ms
                          (negative: before its time)
  callback_ms             {p50, p99, p999, max, min}: callback mode, the executor's round trip of its
                          callbacks, from sending to ax's answer (sent once the result is committed)
  lost                    runs scheduled in the window never delivered
  duplicate_deliveries    deliveries beyond the first of a run
  unexpected              runs delivered in the window that no task's schedule holds
  mismatched_request_ids  deliveries whose requestId is not derived from (task, scheduled second)
  duplicate_rows          run rows beyond the first of a (task, scheduled second), after ax stopped
  not_final               runs of the window not SUCCESS, FAILED or MISSED after ax stopped
  statuses                runs of the window by status, from the database
  open_after_stop         runs of any time left open at stop, by status (shutdown should leave none)
  ax_cpu_percent          ax CPU time in the window, in percent of one core
  ax_peak_rss_mb          the ax processes' peak resident memory
  per_process             each ax process's part of the window: instance_id, cpu_percent (of one
                          core), peak_rss_mb (registering the tasks included), rss_mb (after
                          the window), fires_per_sec (runs it fired) and
                          redis_commands_per_sec (commands it sent to Redis)
  per_fire                the window's cost divided by the runs received in it (received_per_sec
                          × window_secs); null where not measured:
    ax_cpu_us             ax CPU time, in µs
    db_cpu_us             the database server's CPU time (its process on this machine), in µs;
                          null on SQLite
    redis_commands        commands Redis processed (server-wide); null without --redis
    db_statements         statements the database server received (Questions, server-wide);
                          null on SQLite
    db_rows_written       rows the server inserted, updated and deleted (Handler_write, _update,
                          _delete: server-wide, triggers included); null on SQLite
    bytes_sent            bytes ax sent over the network: HTTP to the executor (counted as
                          HTTP/1.1 text by the executor), to MariaDB (its Bytes_received) and to
                          Redis (its total_net_input_bytes)
    bytes_received        bytes ax received the same ways
  injected_failures       deliveries answered 500 on purpose (--fail-rate)
  callbacks_ok            callbacks ax accepted
  callback_errors         callbacks refused by ax or not sent
  bad_requests            requests to the executor that were not a run
  alerts_received         with --alerts: alerts the channel (the executor's /alerts) received
  event_streams           --event-streams: GET /api/events streams held open in the window
  events_received         the events those streams received
  ax_log_warnings         WARN and ERROR lines in the ax logs (the no-token notice aside)
  ax_clean_exit           every ax process exited 0 on SIGTERM in time
  registration_secs       registering the tasks (bulk calls of 1,000, then reading their ids)
  startup_preload_secs    with --restart: from the restart to the window being in the wheel
  elapsed_secs            the whole bench";

/// What one ax process used in the window.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProcessUse {
    pub instance_id: String,
    /// Its CPU time, in percent of one core.
    pub cpu_percent: f64,
    /// Its peak resident memory, and its resident memory once the window is over (both filled
    /// in then).
    pub peak_rss_mb: f64,
    pub rss_mb: f64,
    pub fires_per_sec: f64,
    pub redis_commands_per_sec: f64,
}

/// Everything one run measured. Field names are the report's keys.
#[derive(Debug, Default, Serialize)]
pub struct Report {
    pub tasks: u32,
    pub period: u32,
    pub store: &'static str,
    pub redis: bool,
    pub instances: u32,
    /// `--executors`: members of the executor group dispatched to (0: a handler URL).
    pub executors: u32,
    pub mode: &'static str,
    pub fail_rate: f64,
    pub window_secs: u64,
    /// Runs scheduled in the window.
    pub expected: usize,
    /// Distinct runs scheduled in the window that reached the executor.
    pub delivered: usize,
    pub fires_per_sec: f64,
    /// Distinct runs the executor first received during the window, whatever their scheduled
    /// time, per second: the throughput, also when ax runs late (past its ceiling).
    pub received_per_sec: f64,
    /// Receive time minus scheduled time of the window's deliveries.
    pub lag_ms: Lag,
    /// `--mode callback`: the executor's round trip of the window's accepted callbacks, from
    /// sending to ax's answer (which comes once the result is committed).
    pub callback_ms: Lag,
    pub lost: usize,
    pub duplicate_deliveries: usize,
    /// Distinct runs delivered in the window that no task's schedule holds.
    pub unexpected: usize,
    /// Deliveries whose request id is not derived from (task, scheduled second).
    pub mismatched_request_ids: usize,
    /// From the database, after ax stopped.
    pub duplicate_rows: u64,
    pub not_final: u64,
    /// Runs scheduled in the window, by status, from the database.
    pub statuses: BTreeMap<String, u64>,
    /// Runs of any time (the window's and the grace period's) left open, by status, once ax
    /// stopped: its shutdown should leave none.
    pub open_after_stop: BTreeMap<String, u64>,
    pub ax_cpu_percent: Option<f64>,
    pub ax_peak_rss_mb: f64,
    pub per_process: Vec<ProcessUse>,
    /// The window's cost per run received in it.
    pub per_fire: PerFire,
    /// Executor counters, for runs scheduled in the window.
    pub injected_failures: u64,
    pub callbacks_ok: u64,
    pub callback_errors: u64,
    pub bad_requests: u64,
    /// With `--alerts`: alerts the mock channel received, at any time.
    pub alerts_received: u64,
    /// `--event-streams`: streams held open during the window, and the events they received.
    pub event_streams: u32,
    pub events_received: u64,
    /// WARN and ERROR lines in the ax logs.
    pub ax_log_warnings: usize,
    /// Every ax process exited 0 on SIGTERM within the stop timeout.
    pub ax_clean_exit: bool,
    pub registration_secs: f64,
    /// With `--restart`: from the restarted process's start to its window being in the wheel.
    pub startup_preload_secs: Option<f64>,
    pub elapsed_secs: f64,
}

/// The window's cost divided by the fires ax made in it; `null` where not measured.
#[derive(Debug, Default, Serialize, PartialEq)]
pub struct PerFire {
    pub ax_cpu_us: Option<f64>,
    pub db_cpu_us: Option<f64>,
    pub redis_commands: Option<f64>,
    pub db_statements: Option<f64>,
    pub db_rows_written: Option<f64>,
    pub bytes_sent: Option<f64>,
    pub bytes_received: Option<f64>,
}

/// Percentiles of durations in milliseconds (the lag may be negative); null when there are none.
#[derive(Debug, Default, Serialize, PartialEq)]
pub struct Lag {
    pub p50: Option<f64>,
    pub p99: Option<f64>,
    pub p999: Option<f64>,
    pub max: Option<f64>,
    /// Negative means a run reached the executor before its time.
    pub min: Option<f64>,
}

impl Lag {
    /// Summarises values sorted in ascending order.
    pub fn of(lags: &[f64]) -> Lag {
        Lag {
            p50: percentile(lags, 50.0).map(round1),
            p99: percentile(lags, 99.0).map(round1),
            p999: percentile(lags, 99.9).map(round1),
            max: lags.last().copied().map(round1),
            min: lags.first().copied().map(round1),
        }
    }
}

/// Rounds to one decimal: finer figures are noise and make the line hard to read.
pub fn round1(value: f64) -> f64 {
    (value * 10.0).round() / 10.0
}

/// Rounds to two decimals, for ratios near a tenth.
pub fn round2(value: f64) -> f64 {
    (value * 100.0).round() / 100.0
}

impl Report {
    pub fn to_json_line(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|err| format!("{{\"error\":\"{err}\"}}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_help_names_every_key_of_the_report() {
        let report = serde_json::to_value(Report::default()).expect("json");
        let keys = report.as_object().expect("object").keys();
        for key in keys {
            let named = FIELDS_HELP
                .lines()
                .any(|line| line.trim_start().split([' ', ',']).any(|word| word == key));
            assert!(named, "`{key}` is not explained in FIELDS_HELP");
        }
    }

    #[test]
    fn lag_is_summarised_from_sorted_values() {
        assert_eq!(
            Lag::of(&[-3.0, 1.04, 2.0, 250.56]),
            Lag {
                p50: Some(1.0),
                p99: Some(250.6),
                p999: Some(250.6),
                max: Some(250.6),
                min: Some(-3.0),
            }
        );
        let empty = Lag::of(&[]);
        assert_eq!(
            serde_json::to_string(&empty).expect("json"),
            r#"{"p50":null,"p99":null,"p999":null,"max":null,"min":null}"#
        );
    }
}
