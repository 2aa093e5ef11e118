//! `ax bench`: a load test of ax from the outside. It starts a mock executor in this process and
//! ax itself as child processes (`ax serve` of this very binary), registers tasks through the
//! HTTP API, lets them fire for a measured window, and compares what the executor received with
//! what the tasks' schedules asked for. The result is one JSON line on stdout.
//!
//! Every step is bounded in time, and the ax processes are stopped whatever happens (see
//! [`cluster::Cluster`]'s `Drop`).
//!
//! `ax bench console` measures the web console's pages on a seeded database instead (see
//! [`console`]).

mod chaos;
mod load;
mod measure;

pub use load::console;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context as _};
use chrono::{DateTime, Utc};
use serde_json::json;

use ax_core::EXIT_USAGE;
use ax_server::config::StoreConfig;
use load::cluster::{Cluster, ClusterSpec, CLOCK_TICKS_PER_SEC, STOP_TIMEOUT};
use load::db::BenchStore;
use load::event_streams::EventStreams;
use load::executor::{Behaviour, MockExecutor};
pub use load::kinds::{Mode, StoreKind};
use load::register::{progress, register_tasks};
use load::timing::{interrupted, next_whole_second, parse_period, sleep_until};
use load::usage::Window;
use measure::analysis::{cpu_percent, expected_fires, match_deliveries, received_within};
pub use measure::report::FIELDS_HELP;
use measure::report::{round1, Lag, Report};

const REDIS_URL: &str = "redis://127.0.0.1:6379";
/// The largest run the bench accepts: expected runs are held in memory.
const MAX_EXPECTED_RUNS: u64 = 20_000_000;

/// `ax bench`: the load test, or another bench named by a subcommand.
#[derive(Debug, Clone, clap::Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct Command {
    #[command(subcommand)]
    pub bench: Option<Bench>,
    #[command(flatten)]
    pub load: Args,
}

/// The benches besides the load test.
#[derive(Debug, Clone, clap::Subcommand)]
pub enum Bench {
    /// The web console's pages at size: seeds a MariaDB database (100,000 tasks and 5,000,000
    /// runs by default), starts ax on it and times every page; one JSON line of figures.
    #[command(after_long_help = console::PAGES_HELP)]
    Console(console::Args),
    /// Faults under a steady load: kills, pauses, skewed clocks, Redis and database outages, a
    /// process cut off from the network; starts its own MariaDB, Redis and ax processes on
    /// loopback and prints what was lost, delivered twice or late in each scenario.
    #[command(after_long_help = chaos::SCENARIOS_HELP)]
    Chaos(chaos::Args),
}

/// Runs `ax bench` or the bench its subcommand names.
pub fn main(command: Command) -> ExitCode {
    match command.bench {
        Some(Bench::Console(args)) => console::run(args),
        Some(Bench::Chaos(args)) => chaos::run(args),
        None => run(command.load),
    }
}

/// Options of `ax bench`.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// Tasks to register.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub tasks: u32,
    /// Seconds between two runs of a task: a divisor of 60, or a whole number of minutes
    /// dividing an hour (3600: hourly). Task i fires at the seconds congruent to i mod PERIOD,
    /// so fires spread evenly: TASKS/PERIOD per second.
    #[arg(long, default_value_t = 30, value_parser = parse_period)]
    pub period: u32,
    /// Seconds between the last registration and the measuring window.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u64).range(0..=600))]
    pub warmup: u64,
    /// Length of the measuring window, in seconds.
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub duration: u64,
    #[arg(long, value_enum, default_value_t = StoreKind::Sqlite)]
    pub store: StoreKind,
    /// Use the Redis of 127.0.0.1:6379 for the fire lock.
    #[arg(long)]
    pub redis: bool,
    /// ax processes sharing the store (more than one needs --store mysql or postgres).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=16))]
    pub instances: u32,
    #[arg(long, value_enum, default_value_t = Mode::Sync)]
    pub mode: Mode,
    /// Fraction of runs the executor answers with HTTP 500 (0.0-1.0).
    #[arg(long, default_value_t = 0.0, value_parser = parse_fraction)]
    pub fail_rate: f64,
    /// The executor's simulated work, in ms: before its reply (sync) or its callback.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(0..=60_000))]
    pub executor_delay_ms: u64,
    /// Restart ax after registering, so the window measures a cold start on the registered
    /// tasks; the report then has how long the start-up preload took.
    #[arg(long)]
    pub restart: bool,
    /// Dispatch to an executor group of this many members (the mock executor listening on as
    /// many ports) instead of one handler URL; 0: a handler URL.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u32).range(0..=64))]
    pub executors: u32,
    /// Keep the temporary folder (the config and logs of the ax processes); without it, it
    /// is removed unless the logs have warnings.
    #[arg(long)]
    pub keep: bool,
    /// Turn alerts on: one webhook channel (the mock executor's `/alerts`) in the default rule
    /// for every event, so with --fail-rate the failures alert as in production.
    #[arg(long)]
    pub alerts: bool,
    /// Hold this many `GET /api/events` streams open during the window (live consoles),
    /// spread over the ax processes.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u32).range(0..=1000))]
    pub event_streams: u32,
    /// Record a CPU profile of the ax processes during the window into this file, with Linux
    /// `perf` (`scripts/bench.sh profile …` draws it as a flame graph).
    #[arg(long, value_name = "FILE")]
    pub profile: Option<PathBuf>,
    /// The ax binary to load instead of this one: another build measured by the same bench
    /// (its schema must be this build's).
    #[arg(long, value_name = "PATH")]
    pub ax: Option<PathBuf>,
}

fn parse_fraction(text: &str) -> Result<f64, String> {
    let value: f64 = text
        .parse()
        .map_err(|_| format!("`{text}` is not a number"))?;
    if !(0.0..=1.0).contains(&value) {
        return Err("must be between 0.0 and 1.0".into());
    }
    Ok(value)
}

impl Args {
    /// Rules that involve several options.
    fn check(&self) -> Result<(), String> {
        if self.instances > 1 && !self.store.is_shared() {
            return Err(
                "--instances above 1 needs --store mysql or postgres: one ax process per SQLite \
                 file"
                    .into(),
            );
        }
        let runs = u64::from(self.tasks) * self.duration / u64::from(self.period);
        if runs > MAX_EXPECTED_RUNS {
            return Err(format!(
                "{runs} runs in the window is too many (at most {MAX_EXPECTED_RUNS}): lower \
                 --tasks or --duration, or raise --period"
            ));
        }
        Ok(())
    }

    /// How long the results may take to land after the window: late deliveries, callbacks and
    /// the group commit of their results (twice its interval).
    fn grace(&self) -> Duration {
        Duration::from_secs(5) + 2 * Duration::from_millis(StoreConfig::default().batch_interval_ms)
    }

    /// The longest a whole run may take before the bench gives up on it.
    fn time_limit(&self) -> Duration {
        let startup = Duration::from_secs(30 * u64::from(self.instances) + 30);
        startup
            + registration_limit(self.tasks)
            + Duration::from_secs(self.warmup + self.duration + 1)
            + self.grace()
            + STOP_TIMEOUT
            + Duration::from_secs(30)
    }
}

fn registration_limit(tasks: u32) -> Duration {
    Duration::from_secs(30) + Duration::from_millis(20) * tasks
}

/// Runs `ax bench`; 0 when the run completed (whatever its figures), 2 for bad arguments,
/// 1 when the set-up failed.
pub fn run(args: Args) -> ExitCode {
    if let Err(message) = args.check() {
        eprintln!("ax bench: {message}");
        return ExitCode::from(EXIT_USAGE);
    }
    let dir = std::env::temp_dir().join(format!("ax-bench-{}", uuid::Uuid::new_v4().simple()));
    if let Err(err) = std::fs::create_dir_all(&dir) {
        eprintln!("ax bench: cannot create {}: {err}", dir.display());
        return ExitCode::FAILURE;
    }
    let result = actix_rt::System::new().block_on(run_bounded(&args, &dir));
    match result {
        Ok(report) => {
            println!("{}", report.to_json_line());
            if report.ax_log_warnings > 0 || args.keep {
                eprintln!(
                    "ax bench: {} warnings in the ax logs; logs kept in {}",
                    report.ax_log_warnings,
                    dir.display()
                );
            } else if let Err(err) = std::fs::remove_dir_all(&dir) {
                eprintln!("ax bench: cannot remove {}: {err}", dir.display());
            }
            ExitCode::SUCCESS
        }
        Err(err) => {
            eprintln!("ax bench: {err:#}");
            eprintln!("ax bench: logs kept in {}", dir.display());
            ExitCode::FAILURE
        }
    }
}

/// The bench, stopped by its time limit or by SIGINT/SIGTERM; either way the ax processes are
/// stopped when the bench's future is dropped.
async fn run_bounded(args: &Args, dir: &Path) -> anyhow::Result<Report> {
    let limit = args.time_limit();
    tokio::select! {
        result = tokio::time::timeout(limit, bench(args, dir)) => {
            result.unwrap_or_else(|_| Err(anyhow!("the run took longer than {limit:?}: stopped")))
        }
        signal = interrupted() => Err(anyhow!("{signal} received: stopped")),
    }
}

/// One bench run, start to end. Locals drop in reverse order, so on any error the cluster
/// stops before the store (and its database) goes.
async fn bench(args: &Args, dir: &Path) -> anyhow::Result<Report> {
    let started = Instant::now();
    let store = BenchStore::create(args.store, dir).await?;
    let executor = MockExecutor::start(
        Behaviour {
            mode: args.mode,
            fail_rate: args.fail_rate,
            delay: Duration::from_millis(args.executor_delay_ms),
        },
        args.executors as usize,
    )?;
    let spec = ClusterSpec {
        store_url: store.url.clone(),
        redis_url: args.redis.then(|| REDIS_URL.to_string()),
        instances: args.instances,
        dir: dir.to_path_buf(),
        alerts_url: args.alerts.then(|| executor.alerts_url()),
        exe: match &args.ax {
            Some(exe) => exe.clone(),
            None => std::env::current_exe().context("cannot find the ax binary")?,
        },
    };
    let mut cluster = Cluster::start(&spec).await?;
    executor.set_callback_targets(&cluster.base_urls());
    log::info!(
        "bench: {} ax process(es) up; registering {} tasks",
        args.instances,
        args.tasks
    );

    let registering = Instant::now();
    let limit = registration_limit(args.tasks);
    let target = match args.executors {
        0 => json!({"handlerUrl": executor.url}),
        _ => {
            define_group(&cluster.base_urls()[0], &executor.bases).await?;
            json!({"executor": {"group": BENCH_GROUP, "path": "/run"}})
        }
    };
    let tasks = tokio::time::timeout(
        limit,
        register_tasks(
            &cluster.base_urls(),
            &target,
            args.tasks,
            args.period,
            &store,
        ),
    )
    .await
    .map_err(|_| anyhow!("registering {} tasks took over {limit:?}", args.tasks))??;
    let registration_secs = registering.elapsed().as_secs_f64();
    let startup_preload_secs = if args.restart {
        log::info!("bench: restarting ax on the registered tasks");
        cluster.stop(STOP_TIMEOUT).await;
        cluster = Cluster::start(&spec).await?;
        executor.set_callback_targets(&cluster.base_urls());
        Some(round1(cluster.startup_preload_secs().await?))
    } else {
        None
    };

    let start = next_whole_second(Utc::now() + Duration::from_secs(args.warmup));
    let end = start + Duration::from_secs(args.duration);
    executor.set_window(start.timestamp(), end.timestamp());
    log::info!("bench: tasks registered; measuring [{start}, {end})");
    let streams = EventStreams::open(&cluster.base_urls(), args.event_streams).await?;
    sleep_until(start).await;
    let peers = load::usage::Peers {
        cluster: &cluster,
        store: &store,
        executor: &executor,
        redis: args.redis.then_some(REDIS_URL),
    };
    let window = Window::open(&peers).await?;
    let recording = match &args.profile {
        Some(file) => Some(measure::profile::Recording::start(
            &cluster.pids(),
            args.duration,
            file,
        )?),
        None => None,
    };
    let measuring = progress(args.duration, "measuring (s)");
    for second in 1..=args.duration {
        sleep_until(start + Duration::from_secs(second)).await;
        measuring.set_position(second);
    }
    measuring.finish_and_clear();
    let window = window.close(&peers).await?;
    if let Some(recording) = recording {
        recording.finish().await?;
    }
    let events_received = streams.close();

    actix_rt::time::sleep(args.grace()).await;
    let sizes = cluster.rss_mb_each()?;
    let ax_peak_rss_mb = sizes.iter().map(|(peak, _)| *peak).fold(0.0, f64::max);
    let mut per_process = window.processes.clone();
    for (process, (peak, now)) in per_process.iter_mut().zip(sizes) {
        process.peak_rss_mb = round1(peak);
        process.rss_mb = round1(now);
    }
    let ax_clean_exit = cluster.stop(STOP_TIMEOUT).await;
    let ax_log_warnings = count_log_warnings(&cluster.logs());
    let deliveries = executor.deliveries();
    let callback_ms = executor.callback_ms();
    executor.stop().await;

    let expected = expected_fires(&tasks, start, end);
    let matching = match_deliveries(&expected, &deliveries, start.timestamp(), end.timestamp());
    let statuses = store.statuses_in(start, end).await?;
    // Every run of the bench: none is scheduled a day after the window.
    let all_statuses = store
        .statuses_in(DateTime::UNIX_EPOCH, end + chrono::Duration::days(1))
        .await?;
    let counters = executor.counters();
    // The fires ax made in the window, whatever their scheduled time: what its cost is shared by.
    let received = received_within(&deliveries, start.timestamp(), end.timestamp());
    let load =
        |counter: &std::sync::atomic::AtomicU64| counter.load(std::sync::atomic::Ordering::Relaxed);
    Ok(Report {
        tasks: args.tasks,
        period: args.period,
        store: args.store.as_str(),
        redis: args.redis,
        instances: args.instances,
        executors: args.executors,
        mode: args.mode.as_str(),
        fail_rate: args.fail_rate,
        window_secs: args.duration,
        expected: expected.len(),
        delivered: matching.delivered,
        fires_per_sec: round1(matching.delivered as f64 / args.duration as f64),
        received_per_sec: round1(received as f64 / args.duration as f64),
        lag_ms: Lag::of(&matching.lags_ms),
        callback_ms: Lag::of(&callback_ms),
        lost: matching.lost,
        duplicate_deliveries: matching.duplicate_deliveries,
        unexpected: matching.unexpected,
        mismatched_request_ids: matching.mismatched_request_ids,
        duplicate_rows: store.duplicate_rows().await?,
        not_final: load::db::not_final(&statuses),
        statuses,
        open_after_stop: load::db::open_only(all_statuses),
        ax_cpu_percent: cpu_percent(window.ax_cpu_ticks, CLOCK_TICKS_PER_SEC, window.wall_secs)
            .map(round1),
        ax_peak_rss_mb: round1(ax_peak_rss_mb),
        per_process,
        per_fire: window.per_fire(received),
        injected_failures: load(&counters.injected_failures),
        callbacks_ok: load(&counters.callbacks_ok),
        callback_errors: load(&counters.callback_errors),
        bad_requests: load(&counters.bad_requests),
        alerts_received: load(&counters.alerts_received),
        event_streams: args.event_streams,
        events_received,
        ax_log_warnings,
        ax_clean_exit,
        registration_secs: round1(registration_secs),
        startup_preload_secs,
        elapsed_secs: round1(started.elapsed().as_secs_f64()),
    })
}

/// The executor group of `--executors`.
const BENCH_GROUP: &str = "bench";

/// Defines the bench's executor group with these members.
async fn define_group(ax_url: &str, members: &[String]) -> anyhow::Result<()> {
    let mut response = awc::Client::default()
        .put(format!("{ax_url}/api/executors/{BENCH_GROUP}"))
        .send_json(&json!({"members": members}))
        .await
        .map_err(|err| anyhow!("cannot define the executor group: {err}"))?;
    if !response.status().is_success() {
        let body = response.body().await.unwrap_or_default();
        bail!(
            "defining the executor group: HTTP {}: {}",
            response.status(),
            String::from_utf8_lossy(&body)
        );
    }
    Ok(())
}

/// WARN and ERROR lines (and panics) in the ax logs: a clean run has none. The start-up
/// notice that no admin token is set is expected (the bench's ax listens on 127.0.0.1 only).
fn count_log_warnings(logs: &[PathBuf]) -> usize {
    logs.iter()
        .filter_map(|log| std::fs::read_to_string(log).ok())
        .map(|text| text.lines().filter(|line| is_warning(line)).count())
        .sum()
}

fn is_warning(line: &str) -> bool {
    let flagged = line.contains(" WARN ") || line.contains(" ERROR ") || line.contains("panicked");
    flagged && !line.contains(ax_server::app::NO_TOKEN_NOTICE)
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: Args,
    }

    #[test]
    fn the_no_token_notice_is_no_warning() {
        let notice = format!(
            "[2027-01-01T00:00:00.000Z WARN  ax::app] {} (server.admin_token / …)",
            ax_server::app::NO_TOKEN_NOTICE
        );
        assert!(!is_warning(&notice));
        assert!(is_warning(
            "[2027-01-01T00:00:00.000Z WARN  ax::actors::dispatch] task 1 …"
        ));
        assert!(is_warning("thread 'x' panicked at src/lib.rs:1"));
        assert!(!is_warning(
            "[2027-01-01T00:00:00.000Z INFO  ax::app] listening"
        ));
    }

    fn parse(argv: &[&str]) -> Result<Args, clap::Error> {
        Cli::try_parse_from(std::iter::once("bench").chain(argv.iter().copied())).map(|c| c.args)
    }

    #[test]
    fn defaults_follow_the_brief() {
        let args = parse(&[]).expect("defaults");
        assert_eq!(
            (args.tasks, args.period, args.warmup, args.duration),
            (1000, 30, 5, 20)
        );
        assert_eq!(
            (args.store, args.mode, args.instances),
            (StoreKind::Sqlite, Mode::Sync, 1)
        );
        assert_eq!((args.fail_rate, args.executor_delay_ms), (0.0, 1));
        assert!(!args.redis);
        assert!(args.check().is_ok());
    }

    #[test]
    fn bad_values_are_usage_errors() {
        for argv in [
            &["--period", "7"][..],
            &["--period", "0"],
            &["--period", "90"],
            &["--period", "7200"],
            &["--tasks", "0"],
            &["--duration", "0"],
            &["--fail-rate", "1.5"],
            &["--fail-rate", "NaN"],
            &["--instances", "0"],
            &["--store", "oracle"],
            &["--mode", "async"],
        ] {
            let err = parse(argv)
                .err()
                .unwrap_or_else(|| panic!("{argv:?} accepted"));
            assert_eq!(err.exit_code(), 2, "{argv:?}");
        }
        let args = parse(&["--instances", "2"]).expect("parses");
        assert!(args.check().unwrap_err().contains("--store mysql"));
        let args =
            parse(&["--tasks", "100000", "--period", "1", "--duration", "3600"]).expect("parses");
        assert!(args.check().unwrap_err().contains("too many"));
        let args = parse(&["--instances", "3", "--store", "mysql", "--redis"]).expect("parses");
        assert!(args.check().is_ok());
    }

    #[test]
    fn the_window_starts_on_a_whole_second() {
        let whole = Utc.timestamp_opt(1_800_000_000, 0).single().expect("time");
        assert_eq!(next_whole_second(whole), whole);
        let later = Utc
            .timestamp_opt(1_800_000_000, 1_000)
            .single()
            .expect("time");
        assert_eq!(next_whole_second(later), whole + Duration::from_secs(1));
    }

    #[test]
    fn log_warnings_are_counted() {
        let dir = std::env::temp_dir().join(format!("ax-bench-test-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).expect("dir");
        let log = dir.join("a.log");
        std::fs::write(
            &log,
            "[2027-01-01T00:00:00Z WARN  ax::actors::wheel] late\n\
             [2027-01-01T00:00:00Z INFO  ax] fine\n\
             [2027-01-01T00:00:01Z ERROR ax::actors::store] boom\n",
        )
        .expect("write");
        assert_eq!(count_log_warnings(&[log, dir.join("missing.log")]), 2);
        let _ = std::fs::remove_dir_all(dir);
    }
}
