//! Process metrics in the Prometheus text format: counters and histograms kept in atomics, so
//! recording on hot paths costs an atomic add.

use crate::ids::GroupName;
use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Mutex};
use std::time::Duration;

use crate::dispatch::host_slots::HostLoad;
use crate::run::Overlap;

/// The wheel's gauges, for `/metrics`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WheelStats {
    /// Runs and attempts held.
    pub entries: usize,
    /// How far behind the clock the wheel is, in seconds.
    pub behind_secs: i64,
    /// Runs between the wheel and the dispatchers.
    pub queued_runs: usize,
}

/// A Prometheus histogram with fixed upper bounds.
pub struct Histogram {
    bounds: &'static [f64],
    /// Per bound (not cumulative), plus one for +Inf.
    counts: Vec<AtomicU64>,
    /// Sum of observations, in millionths.
    sum_micros: AtomicU64,
}

impl Histogram {
    fn new(bounds: &'static [f64]) -> Self {
        Histogram {
            bounds,
            counts: (0..=bounds.len()).map(|_| AtomicU64::new(0)).collect(),
            sum_micros: AtomicU64::new(0),
        }
    }

    pub fn observe(&self, value: f64) {
        let value = value.max(0.0);
        let slot = self
            .bounds
            .iter()
            .position(|bound| value <= *bound)
            .unwrap_or(self.bounds.len());
        self.counts[slot].fetch_add(1, Ordering::Relaxed);
        self.sum_micros
            .fetch_add((value * 1e6) as u64, Ordering::Relaxed);
    }

    pub fn observe_duration(&self, elapsed: Duration) {
        self.observe(elapsed.as_secs_f64());
    }

    fn render(&self, out: &mut String, name: &str, help: &str) {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} histogram");
        let mut cumulative = 0;
        for (i, count) in self.counts.iter().enumerate() {
            cumulative += count.load(Ordering::Relaxed);
            let le = self
                .bounds
                .get(i)
                .map_or("+Inf".to_string(), |b| b.to_string());
            let _ = writeln!(out, "{name}_bucket{{le=\"{le}\"}} {cumulative}");
        }
        let sum = self.sum_micros.load(Ordering::Relaxed) as f64 / 1e6;
        let _ = writeln!(out, "{name}_sum {sum}\n{name}_count {cumulative}");
    }
}

const SECONDS: &[f64] = &[
    0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];
const ROWS: &[f64] = &[1.0, 5.0, 10.0, 25.0, 50.0, 100.0, 250.0, 500.0, 1000.0];

/// The overlap policy's decisions, as counted.
const OVERLAP_DECISIONS: [&str; 3] = ["skipped", "buffered", "replaced"];

/// How a dispatch attempt ended, as counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DispatchResult {
    Success,
    Failed,
    Accepted,
}

/// Every metric of the process.
pub struct Metrics {
    pub fires: AtomicU64,
    pub missed: AtomicU64,
    pub alerts_sent: AtomicU64,
    pub alerts_failed: AtomicU64,
    pub retries: AtomicU64,
    pub lock_conflicts: AtomicU64,
    /// Commands this process sent to Redis.
    pub redis_commands: AtomicU64,
    /// Dispatcher replies made moot by their run's result before they were written.
    pub writes_folded: AtomicU64,
    dispatch_results: [AtomicU64; 3],
    /// Runs the overlap policy skipped, held back, and replaced (see `OVERLAP_DECISIONS`).
    overlap: [AtomicU64; 3],
    /// Runs cancelled by a user.
    pub cancelled: AtomicU64,
    /// Scheduled time to dispatch.
    pub trigger_lag: Histogram,
    pub batch_rows: Histogram,
    pub commit_seconds: Histogram,
    /// Time to handle a result callback (until it is committed).
    pub callback_seconds: Histogram,
    /// How long the start-up preload of the window took, in ms; `u64::MAX` until it is done.
    startup_preload_ms: AtomicU64,
    /// How far the database's clock was ahead of this process's at the last check, in ms.
    clock_offset_ms: AtomicI64,
    /// Each executor host's load, by host (as last looked at).
    dispatch_hosts: Mutex<BTreeMap<Arc<str>, HostLoad>>,
    /// Handlers in the slow lane of their hosts (as last looked at).
    dispatch_slow_handlers: AtomicU64,
    /// How long attempts waited for a slot of their executor host or member.
    pub slot_wait_seconds: Histogram,
    /// By the executor groups showing them: several ax apps in one process (tests) each keep
    /// their own.
    executor_members: Mutex<BTreeMap<u64, Vec<MemberGauge>>>,
}

/// One executor group member's health and load in this process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberGauge {
    pub group: GroupName,
    pub member: String,
    pub healthy: bool,
    pub in_flight: usize,
    pub successes: u64,
    pub failures: u64,
}

static METRICS: LazyLock<Metrics> = LazyLock::new(|| Metrics {
    fires: AtomicU64::new(0),
    missed: AtomicU64::new(0),
    alerts_sent: AtomicU64::new(0),
    alerts_failed: AtomicU64::new(0),
    retries: AtomicU64::new(0),
    lock_conflicts: AtomicU64::new(0),
    redis_commands: AtomicU64::new(0),
    writes_folded: AtomicU64::new(0),
    dispatch_results: Default::default(),
    overlap: Default::default(),
    cancelled: AtomicU64::new(0),
    trigger_lag: Histogram::new(SECONDS),
    batch_rows: Histogram::new(ROWS),
    commit_seconds: Histogram::new(SECONDS),
    callback_seconds: Histogram::new(SECONDS),
    startup_preload_ms: AtomicU64::new(u64::MAX),
    clock_offset_ms: AtomicI64::new(0),
    dispatch_hosts: Mutex::default(),
    dispatch_slow_handlers: AtomicU64::new(0),
    slot_wait_seconds: Histogram::new(SECONDS),
    executor_members: Mutex::default(),
});

/// The process's metrics.
pub fn metrics() -> &'static Metrics {
    &METRICS
}

/// Adds `n` to a counter.
pub fn add(counter: &AtomicU64, n: u64) {
    counter.fetch_add(n, Ordering::Relaxed);
}

impl Metrics {
    pub fn startup_preload_done(&self, took: std::time::Duration) {
        let ms = u64::try_from(took.as_millis()).unwrap_or(u64::MAX - 1);
        self.startup_preload_ms.store(ms, Ordering::Relaxed);
    }

    pub fn set_clock_offset_ms(&self, offset_ms: i64) {
        self.clock_offset_ms.store(offset_ms, Ordering::Relaxed);
    }

    /// The runs waiting for each executor host now; `gone`: hosts shown before that have no
    /// work any more, left out from now on.
    pub fn dispatch_hosts(&self, gone: &[Arc<str>], hosts: &[HostLoad], slow_handlers: usize) {
        let mut shown = self
            .dispatch_hosts
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        for host in gone {
            shown.remove(host);
        }
        shown.extend(hosts.iter().map(|load| (load.host.clone(), load.clone())));
        self.dispatch_slow_handlers
            .store(slow_handlers as u64, Ordering::Relaxed);
    }

    /// The executor group members one process's groups (numbered `shown_as`) route over now,
    /// replacing those they showed before; `None` when those groups are gone.
    pub fn executor_members(&self, shown_as: u64, members: Option<Vec<MemberGauge>>) {
        let mut shown = self
            .executor_members
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match members {
            Some(members) => shown.insert(shown_as, members),
            None => shown.remove(&shown_as),
        };
    }

    fn render_executor_members(&self, out: &mut String) {
        let mut members: Vec<MemberGauge> = self
            .executor_members
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .values()
            .flatten()
            .cloned()
            .collect();
        // One series per member even when two ax apps of one process route to it.
        members.sort_by(|a, b| (&a.group, &a.member).cmp(&(&b.group, &b.member)));
        members.dedup_by(|a, b| (&a.group, &a.member) == (&b.group, &b.member));
        type Gauge = (&'static str, &'static str, fn(&MemberGauge) -> u64);
        let gauges: [Gauge; 4] = [
            ("ax_executor_member_healthy", "gauge", |m| {
                u64::from(m.healthy)
            }),
            ("ax_executor_member_in_flight", "gauge", |m| {
                m.in_flight as u64
            }),
            ("ax_executor_member_successes_total", "counter", |m| {
                m.successes
            }),
            ("ax_executor_member_failures_total", "counter", |m| {
                m.failures
            }),
        ];
        for (name, kind, value) in gauges {
            let _ = writeln!(
                out,
                "# HELP {name} Executor group members as this ax process dispatches to them.\n\
                 # TYPE {name} {kind}"
            );
            for member in &members {
                let _ = writeln!(
                    out,
                    "{name}{{group=\"{}\",member=\"{}\"}} {}",
                    member.group,
                    member.member.replace('\\', "\\\\").replace('"', "\\\""),
                    value(member)
                );
            }
        }
    }

    pub fn dispatch_result(&self, result: DispatchResult) {
        add(&self.dispatch_results[result as usize], 1);
    }

    /// Counts what the overlap policy did to a due run (and to the runs it replaced).
    pub fn overlap_decision(&self, decision: &Overlap) {
        match decision {
            Overlap::Proceed => {}
            Overlap::Skip(_) => add(&self.overlap[0], 1),
            Overlap::Buffer => add(&self.overlap[1], 1),
            Overlap::Replace(runs) => add(&self.overlap[2], runs.len() as u64),
        }
    }

    /// The metrics in the Prometheus text exposition format.
    pub fn render(&self, wheel: Option<WheelStats>) -> String {
        let mut out = String::new();
        let counter = |out: &mut String, name: &str, help: &str, value: &AtomicU64| {
            let value = value.load(Ordering::Relaxed);
            let _ = writeln!(
                out,
                "# HELP {name} {help}\n# TYPE {name} counter\n{name} {value}"
            );
        };
        counter(
            &mut out,
            "ax_fires_total",
            "Runs recorded for dispatch.",
            &self.fires,
        );
        counter(
            &mut out,
            "ax_missed_runs_total",
            "Runs recorded MISSED.",
            &self.missed,
        );
        counter(
            &mut out,
            "ax_alerts_sent_total",
            "Alerts delivered to a channel (one per alert and channel).",
            &self.alerts_sent,
        );
        counter(
            &mut out,
            "ax_alerts_failed_total",
            "Alerts given up on a channel after the retry time.",
            &self.alerts_failed,
        );
        counter(
            &mut out,
            "ax_retries_total",
            "Failed attempts scheduled for a retry.",
            &self.retries,
        );
        counter(
            &mut out,
            "ax_lock_conflicts_total",
            "Fires skipped because another ax held the task's lock.",
            &self.lock_conflicts,
        );
        counter(
            &mut out,
            "ax_redis_commands_total",
            "Commands this process sent to Redis (fire locks, heartbeats, the process list).",
            &self.redis_commands,
        );
        counter(
            &mut out,
            "ax_writes_folded_total",
            "Accepted replies not written: their run's result came before they were, and was \
             written in their place.",
            &self.writes_folded,
        );
        let name = "ax_dispatch_results_total";
        let _ = writeln!(
            out,
            "# HELP {name} Dispatch attempts by outcome.\n# TYPE {name} counter"
        );
        for (outcome, count) in ["success", "failed", "accepted"]
            .iter()
            .zip(&self.dispatch_results)
        {
            let _ = writeln!(
                out,
                "{name}{{outcome=\"{outcome}\"}} {}",
                count.load(Ordering::Relaxed)
            );
        }
        let name = "ax_overlap_runs_total";
        let _ = writeln!(
            out,
            "# HELP {name} Runs the overlap policy skipped, held back (buffered) or cancelled \
             (replaced).\n# TYPE {name} counter"
        );
        for (decision, count) in OVERLAP_DECISIONS.iter().zip(&self.overlap) {
            let _ = writeln!(
                out,
                "{name}{{decision=\"{decision}\"}} {}",
                count.load(Ordering::Relaxed)
            );
        }
        let name = "ax_dispatch_queued";
        let _ = writeln!(
            out,
            "# HELP {name} Runs waiting for a slot of their executor host (host:port), which is \
             at dispatch.max_in_flight_per_host.\n# TYPE {name} gauge"
        );
        let hosts = self
            .dispatch_hosts
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        for (host, load) in &hosts {
            let _ = writeln!(out, "{name}{{host=\"{host}\"}} {}", load.waiting);
        }
        let name = "ax_dispatch_slow_in_flight";
        let _ = writeln!(
            out,
            "# HELP {name} Requests in flight to an executor host's slow handlers (their share \
             of its slots is dispatch.slow_share_percent).\n# TYPE {name} gauge"
        );
        for (host, load) in &hosts {
            let _ = writeln!(out, "{name}{{host=\"{host}\"}} {}", load.slow_in_flight);
        }
        gauge(
            &mut out,
            "ax_dispatch_slow_handlers",
            "Handlers whose attempt held their executor host's slot for dispatch.slow_after_ms \
             or longer, in their host's slow lane until their attempts are quick again.",
            i64::try_from(self.dispatch_slow_handlers.load(Ordering::Relaxed)).unwrap_or(i64::MAX),
        );
        self.render_executor_members(&mut out);
        self.slot_wait_seconds.render(
            &mut out,
            "ax_dispatch_slot_wait_seconds",
            "How long attempts waited for a slot of their executor host or group member.",
        );
        counter(
            &mut out,
            "ax_cancelled_runs_total",
            "Runs cancelled by a user.",
            &self.cancelled,
        );
        self.trigger_lag.render(
            &mut out,
            "ax_trigger_lag_seconds",
            "From a run's scheduled time to its dispatch.",
        );
        self.batch_rows.render(
            &mut out,
            "ax_store_batch_rows",
            "Writes per store transaction.",
        );
        self.commit_seconds.render(
            &mut out,
            "ax_store_commit_seconds",
            "Duration of store transactions.",
        );
        self.callback_seconds.render(
            &mut out,
            "ax_callback_seconds",
            "Time to handle a result callback, until it is committed.",
        );
        let preload_ms = self.startup_preload_ms.load(Ordering::Relaxed);
        if preload_ms != u64::MAX {
            let name = "ax_startup_preload_seconds";
            let _ = writeln!(
                out,
                "# HELP {name} How long the start-up preload of the window took.\n# TYPE {name} gauge\n{name} {}",
                preload_ms as f64 / 1000.0
            );
        }
        let name = "ax_clock_skew_seconds";
        let _ = writeln!(
            out,
            "# HELP {name} How far the database's clock (the cluster's reference) was ahead of this process's at the last check.\n# TYPE {name} gauge\n{name} {}",
            self.clock_offset_ms.load(Ordering::Relaxed) as f64 / 1000.0
        );
        if let Some(wheel) = wheel {
            let count = |n: usize| i64::try_from(n).unwrap_or(i64::MAX);
            gauge(
                &mut out,
                "ax_wheel_entries",
                "Runs and attempts held in the time wheel.",
                count(wheel.entries),
            );
            gauge(
                &mut out,
                "ax_wheel_behind_seconds",
                "How far behind the clock the wheel is: 0 unless ax is past its ceiling.",
                wheel.behind_secs,
            );
            gauge(
                &mut out,
                "ax_fire_queued_runs",
                "Runs between the wheel and the dispatchers (planned, committing, waiting).",
                count(wheel.queued_runs),
            );
        }
        out
    }
}

/// Writes one gauge without labels.
fn gauge(out: &mut String, name: &str, help: &str, value: i64) {
    let _ = writeln!(
        out,
        "# HELP {name} {help}\n# TYPE {name} gauge\n{name} {value}"
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histograms_are_cumulative_with_sum_and_count() {
        let histogram = Histogram::new(&[0.1, 1.0]);
        for value in [0.05, 0.5, 0.7, 3.0] {
            histogram.observe(value);
        }
        let mut out = String::new();
        histogram.render(&mut out, "x", "help");
        assert!(out.contains("x_bucket{le=\"0.1\"} 1\n"), "{out}");
        assert!(out.contains("x_bucket{le=\"1\"} 3\n"), "{out}");
        assert!(out.contains("x_bucket{le=\"+Inf\"} 4\n"), "{out}");
        assert!(
            out.contains("x_sum 4.25\n") && out.contains("x_count 4\n"),
            "{out}"
        );
    }

    #[test]
    fn every_metric_is_rendered() {
        let text = metrics().render(Some(WheelStats {
            entries: 7,
            behind_secs: 3,
            queued_runs: 120,
        }));
        for name in [
            "ax_fires_total",
            "ax_missed_runs_total",
            "ax_retries_total",
            "ax_lock_conflicts_total",
            "ax_redis_commands_total",
            "ax_dispatch_results_total{outcome=\"success\"}",
            "ax_overlap_runs_total{decision=\"buffered\"}",
            "ax_cancelled_runs_total",
            "ax_trigger_lag_seconds_bucket",
            "ax_store_batch_rows_count",
            "ax_store_commit_seconds_sum",
            "ax_callback_seconds_bucket",
            "ax_wheel_entries 7",
            "ax_clock_skew_seconds",
            "ax_wheel_behind_seconds 3",
            "ax_fire_queued_runs 120",
            "ax_dispatch_slow_handlers",
        ] {
            assert!(text.contains(name), "{name} missing");
        }
    }
}
