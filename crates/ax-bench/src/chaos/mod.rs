//! `ax bench chaos`: faults under a steady load, from the outside. The suite starts its own
//! MariaDB and Redis (so that it may kill and pause them), a recording executor, and 3 `ax
//! serve` processes on them, all on loopback; registers every-second tasks; then runs each
//! scenario in a window of its own — from a healthy cluster, its fault at a fixed offset, the
//! cluster restored after — and compares what the schedule asked for in the window with what
//! the executor received and the run rows say. It prints one table (or `--json`).
//!
//! Exit status: 0 when every scenario that ran kept its promises, 1 when one lost a run, wrote
//! two rows for one run, delivered a run under another request id or could not complete (or
//! the suite could not start), 2 for bad arguments. A scenario this build or machine cannot run
//! (no Sentinel support, no CAP_NET_ADMIN) is shown as not run and fails nothing.

mod faults;
mod fixtures;
mod nodes;
mod scenarios;
mod suite;
mod table;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{anyhow, Context as _};
use chrono::Utc;
use serde_json::json;

use crate::load::cluster::{ClusterSpec, Launch};
use crate::load::db::BenchStore;
use crate::load::executor::{Behaviour, MockExecutor};
use crate::load::kinds::Mode;
use crate::load::register::register_tasks;
use crate::load::timing::{next_whole_second, sleep_until};
use crate::measure::analysis::expected_fires;
use fixtures::{Mariadb, Netns, Redis};
use nodes::Nodes;
use scenarios::{Scenario, Timing};
use suite::{Load, Suite};
use table::{Outcome, Row};

/// The scenarios, for `ax bench chaos --help`.
pub const SCENARIOS_HELP: &str = "\
Scenarios (--scenarios, comma-separated; all by default):
  kill-9               kill -9 of a process, restarted 5 s later (3 s with --short)
  sigstop              SIGSTOP of a process for 20 s (8 s), then SIGCONT
  clock-ahead          a process 30 s ahead (libfaketime) the whole window
  clock-behind         a process 30 s behind (libfaketime) the whole window
  redis-kill           kill -9 of Redis, restarted 15 s (8 s) later
  redis-stop           SIGSTOP of Redis for 30 s (8 s)
  redis-failover       Redis behind 3 Sentinels, its primary killed; not run on a build
                       that refuses redis+sentinel:// URLs
  db-stop              SIGSTOP of MariaDB for 30 s (8 s)
  galera-kill          the processes on a 3-node Galera cluster, each listing every node from
                       a node of its own on; that node of one killed, restarted 20 s (8 s)
                       later
  net-cut              a process in a network namespace, its veth pair cut for 20 s (8 s);
                       needs CAP_NET_ADMIN
  start-without-redis  Redis killed, a process restarted while it is down, Redis back 20 s
                       (8 s) after the kill
Columns: expected = runs the schedule asks for in the window; delivered = of those, received
by the executor; lost = neither delivered nor folded (a run row or not); folded = seconds the
missed-run policy stood one late catch-up run for; delivered twice = request ids received more
than once; late = first delivery over 2 s after its second; worst lateness = the most.
Exit 1 when a scenario lost a run, wrote two rows for one run, sent one under another request
id, or did not complete; a scenario this build cannot run is shown and fails nothing.";

/// Options of `ax bench chaos`.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// Windows of 20 s with faults of at most 8 s instead of 90 s and 20-30 s (for CI).
    #[arg(long)]
    pub short: bool,
    /// The scenarios to run, in this order.
    #[arg(long, value_enum, value_delimiter = ',')]
    pub scenarios: Vec<Scenario>,
    /// Tasks to register.
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..=5000))]
    pub tasks: u32,
    /// Seconds between two runs of a task (as `ax bench --period`, a divisor of 60): TASKS /
    /// PERIOD fires per second.
    #[arg(long, default_value_t = 1, value_parser = parse_period)]
    pub period: u32,
    /// ax processes.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(2..=3))]
    pub instances: u32,
    /// One JSON line instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Keep the temporary folder (logs of ax, MariaDB and Redis) even when nothing failed.
    #[arg(long)]
    pub keep: bool,
}

fn parse_period(text: &str) -> Result<u32, String> {
    match crate::load::timing::parse_period(text)? {
        period if period <= 60 => Ok(period),
        _ => Err("must divide 60: a window holds every task's runs".into()),
    }
}

/// Runs the suite; see the module's documentation for the exit status.
pub fn run(args: Args) -> ExitCode {
    let dir = std::env::temp_dir().join(format!("ax-chaos-{}", uuid::Uuid::new_v4().simple()));
    if let Err(err) = std::fs::create_dir_all(&dir) {
        eprintln!("ax bench chaos: cannot create {}: {err}", dir.display());
        return ExitCode::FAILURE;
    }
    let scenarios = match args.scenarios.is_empty() {
        true => scenarios::ALL.to_vec(),
        false => args.scenarios.clone(),
    };
    let result = actix_rt::System::new().block_on(async {
        tokio::select! {
            rows = run_suite(&args, &scenarios, dir.clone()) => rows,
            signal = crate::load::timing::interrupted() => Err(anyhow!("{signal} received: stopped")),
        }
    });
    let rows = match result {
        Ok(rows) => rows,
        Err(err) => {
            eprintln!("ax bench chaos: {err:#}");
            eprintln!("ax bench chaos: logs kept in {}", dir.display());
            return ExitCode::FAILURE;
        }
    };
    if args.json {
        println!("{}", json!({ "scenarios": rows }));
    } else {
        print!("{}", table::render(&rows));
    }
    let failed = rows.iter().any(|row| row.failure().is_some());
    if failed || args.keep {
        eprintln!("ax bench chaos: logs kept in {}", dir.display());
    } else if let Err(err) = std::fs::remove_dir_all(&dir) {
        eprintln!("ax bench chaos: cannot remove {}: {err}", dir.display());
    }
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

impl Suite {
    /// How a process is started inside the namespace, reaching the servers over the pair.
    fn netns_launch(&self) -> Option<Launch> {
        let netns = self.netns.as_ref()?;
        Some(Launch {
            bind: netns.ns_address.clone(),
            wrapper: netns.wrapper(),
            env: vec![
                ("AX_STORE_URL".into(), self.mariadb.url(&netns.host_address)),
                ("AX_REDIS_URL".into(), self.redis.url(&netns.host_address)),
            ],
        })
    }

    fn netns_missing(&self) -> String {
        self.netns_error
            .clone()
            .unwrap_or_else(|| "no network namespace".into())
    }
}

async fn run_suite(args: &Args, scenarios: &[Scenario], dir: PathBuf) -> anyhow::Result<Vec<Row>> {
    let timing = if args.short {
        Timing::SHORT
    } else {
        Timing::FULL
    };
    let mut suite = start_suite(args, scenarios, dir).await?;
    let load = f64::from(args.tasks) / f64::from(args.period);
    let mut rows = Vec::new();
    for scenario in scenarios {
        eprintln!("ax bench chaos: {} …", scenario.name());
        // Bounded: a scenario that hangs fails, and the next one still starts from scratch.
        let limit = timing.window + timing.settle + Duration::from_secs(240);
        let outcome = tokio::time::timeout(limit, run_scenario(&mut suite, *scenario, &timing))
            .await
            .unwrap_or_else(|_| Err(anyhow!("took longer than {limit:?}")));
        let outcome = outcome.unwrap_or_else(|err| Outcome::Failed {
            error: format!("{err:#}"),
        });
        let row = Row {
            scenario: scenario.name(),
            load,
            expects: scenario.expects(),
            outcome,
        };
        eprint!("{}", table::render(std::slice::from_ref(&row)));
        rows.push(row);
        if let Err(err) = restore(&mut suite).await {
            // The next scenarios would not start from a healthy cluster: stop here.
            eprintln!("ax bench chaos: cannot restore a healthy cluster: {err:#}");
            for scenario in &scenarios[rows.len()..] {
                rows.push(Row {
                    scenario: scenario.name(),
                    load,
                    expects: scenario.expects(),
                    outcome: Outcome::Failed {
                        error: "the cluster was not healthy after the scenario before".into(),
                    },
                });
            }
            break;
        }
    }
    suite.nodes.stop().await;
    suite.executor.stop().await;
    Ok(rows)
}

/// Starts the servers, the executor and the ax processes, and registers the tasks.
async fn start_suite(args: &Args, scenarios: &[Scenario], dir: PathBuf) -> anyhow::Result<Suite> {
    let (netns, netns_error) = match scenarios.contains(&Scenario::NetCut) {
        true => match Netns::create() {
            Ok(netns) => (Some(netns), None),
            Err(err) => (None, Some(format!("{err:#}"))),
        },
        false => (None, None),
    };
    let host = netns
        .as_ref()
        .map_or("127.0.0.1".to_string(), |n| n.host_address.clone());
    let mut binds = vec!["127.0.0.1".to_string()];
    if netns.is_some() {
        binds.push(host.clone());
    }
    eprintln!(
        "ax bench chaos: starting MariaDB, Redis and {} ax processes in {}",
        args.instances,
        dir.display()
    );
    let mariadb = Mariadb::start(&dir, &binds).await?;
    let redis = Redis::start("redis", &dir, &binds, &[]).await?;
    let store = BenchStore::open(&mariadb.url("127.0.0.1")).await?;
    // On the pair's host address when there is one: the process in the namespace reaches it
    // there, the others as well.
    let behaviour = Behaviour {
        mode: Mode::Sync,
        fail_rate: 0.0,
        delay: Duration::from_millis(1),
    };
    let executor = MockExecutor::start_on(behaviour, 1, &host)?;
    let spec = ClusterSpec {
        store_url: store.url.clone(),
        redis_url: Some(redis.url("127.0.0.1")),
        instances: args.instances,
        dir: dir.clone(),
        alerts_url: None,
        exe: std::env::current_exe().context("cannot find the ax binary")?,
    };
    // The executor's address: a link-local one is refused unless allowed.
    let allowlist = vec![("AX_HANDLER_ALLOWLIST".to_string(), host.clone())];
    let nodes = Nodes::start(spec, allowlist).await?;
    // Short claims and quick retries: a run held by a process that is cut off goes back to
    // the others within the settle time.
    let target = json!({
        "handlerUrl": executor.url,
        "timeoutMs": 5_000,
        "maxRetry": 3,
        "retryBackoffSecs": 1,
        "retryFactor": 1,
    });
    let tasks =
        register_tasks(&nodes.base_urls(), &target, args.tasks, args.period, &store).await?;
    Ok(Suite {
        nodes,
        executor,
        store,
        redis,
        mariadb,
        netns,
        netns_error,
        dir,
        tasks,
        target,
        load: Load {
            tasks: args.tasks,
            period: args.period,
        },
    })
}

/// One scenario: prepare, a window with the fault in it, the settle time, the count.
async fn run_scenario(
    suite: &mut Suite,
    scenario: Scenario,
    timing: &Timing,
) -> anyhow::Result<Outcome> {
    let mut prepared = scenario.prepare(suite).await?;
    if let Some(reason) = prepared.not_run.take() {
        restore_launches(suite, prepared.relaunched).await?;
        return Ok(Outcome::NotRun { reason });
    }
    let start = next_whole_second(Utc::now() + Duration::from_secs(2));
    let end = start + timing.window;
    scenario.inject(suite, &mut prepared, start, timing).await?;
    sleep_until(end + timing.settle).await;
    let (store, tasks) = match &prepared.store {
        Some((store, tasks)) => (store, tasks),
        None => (&suite.store, &suite.tasks),
    };
    let expected = expected_fires(tasks, start, end);
    let deliveries = suite.executor.deliveries();
    let rows = store.runs_in(start, end).await?;
    restore_launches(suite, prepared.relaunched).await?;
    drop(prepared);
    Ok(Outcome::Measured(table::tally(
        &expected,
        &deliveries,
        &rows,
        start.timestamp()..end.timestamp(),
    )))
}

/// Starts every process the normal way again when a scenario started some another way.
async fn restore_launches(suite: &mut Suite, relaunched: bool) -> anyhow::Result<()> {
    if relaunched {
        for n in 0..suite.nodes.len() {
            suite.nodes.restart(n, &Launch::default()).await?;
        }
    }
    Ok(())
}

/// Whatever a scenario left: every server running and answering, every process running the
/// normal way and healthy.
async fn restore(suite: &mut Suite) -> anyhow::Result<()> {
    let _ = suite.mariadb.signal(faults::Signal::Cont);
    if fixtures::redis_command(suite.redis.port, "PING").is_none() {
        let _ = suite.redis.signal(faults::Signal::Cont);
        if fixtures::redis_command(suite.redis.port, "PING").is_none() {
            suite.redis.kill();
            suite.redis.restart().await?;
        }
    }
    if let Some(netns) = &suite.netns {
        netns.set_cut(false)?;
    }
    for n in 0..suite.nodes.len() {
        let _ = suite.nodes.signal(n, faults::Signal::Cont);
    }
    if suite
        .nodes
        .wait_all_healthy(Duration::from_secs(30))
        .await
        .is_err()
    {
        // A process that died or hangs: start it again.
        restore_launches(suite, true).await?;
        suite
            .nodes
            .wait_all_healthy(Duration::from_secs(60))
            .await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: Args,
    }

    fn parse(argv: &[&str]) -> Result<Args, clap::Error> {
        Cli::try_parse_from(std::iter::once("chaos").chain(argv.iter().copied())).map(|c| c.args)
    }

    #[test]
    fn scenarios_are_named_as_the_table_names_them() {
        let args = parse(&["--short", "--scenarios", "kill-9,db-stop,net-cut"]).expect("parses");
        assert!(args.short);
        assert_eq!(
            args.scenarios,
            [Scenario::Kill9, Scenario::DbStop, Scenario::NetCut]
        );
        for scenario in scenarios::ALL {
            let parsed = parse(&["--scenarios", scenario.name()]).expect("parses");
            assert_eq!(parsed.scenarios, [scenario]);
            assert!(
                SCENARIOS_HELP.contains(scenario.name()),
                "{}",
                scenario.name()
            );
        }
        let defaults = parse(&[]).expect("defaults");
        assert_eq!(
            (defaults.tasks, defaults.period, defaults.instances),
            (100, 1, 3)
        );
    }

    #[test]
    fn bad_values_are_usage_errors() {
        for argv in [
            &["--scenarios", "kill-7"][..],
            &["--period", "120"],
            &["--period", "7"],
            &["--instances", "1"],
            &["--tasks", "0"],
        ] {
            let err = parse(argv)
                .err()
                .unwrap_or_else(|| panic!("{argv:?} accepted"));
            assert_eq!(err.exit_code(), 2, "{argv:?}");
        }
    }
}
