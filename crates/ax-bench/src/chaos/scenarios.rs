//! The scenarios: each starts from a healthy cluster, may prepare a process another way before
//! its window (a skewed clock, a namespace, a Sentinel URL), injects its fault inside the
//! window at a fixed offset, and leaves the cluster as it found it.

use std::time::Duration;

use chrono::{DateTime, Utc};

use super::faults::Signal;
use super::fixtures::{Galera, Sentinels, GALERA};
use super::nodes::Health;
use super::suite::Suite;
use crate::load::cluster::Launch;
use crate::load::db::BenchStore;
use crate::load::register::register_tasks;
use crate::load::timing::sleep_until;
use ax_cron::CronSchedule;

/// libfaketime, from Debian's `faketime` package (scripts/test.sh installs it).
pub const FAKETIME: &str = "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1";

/// A fault the suite can inject.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Scenario {
    /// `kill -9` of a process, restarted a few seconds later.
    #[value(name = "kill-9")]
    Kill9,
    /// `SIGSTOP` of a process for 20 s, then `SIGCONT`.
    Sigstop,
    /// A process whose clock is 30 s ahead (libfaketime).
    ClockAhead,
    /// A process whose clock is 30 s behind (libfaketime).
    ClockBehind,
    /// `kill -9` of Redis, restarted after 15 s.
    RedisKill,
    /// Redis paused (`SIGSTOP`) for 30 s.
    RedisStop,
    /// Redis behind three Sentinels; its primary killed, the replica promoted.
    RedisFailover,
    /// MariaDB paused (`SIGSTOP`) for 30 s.
    DbStop,
    /// The processes on a 3-node Galera cluster, each listing every node from a node of its own
    /// on; that node of one killed, restarted 20 s later.
    GaleraKill,
    /// A process in a network namespace cut off from MariaDB, Redis and the executor for 20 s.
    NetCut,
    /// A process started while Redis is down.
    StartWithoutRedis,
}

/// The order of a full run.
pub const ALL: [Scenario; 11] = [
    Scenario::Kill9,
    Scenario::Sigstop,
    Scenario::ClockAhead,
    Scenario::ClockBehind,
    Scenario::RedisKill,
    Scenario::RedisStop,
    Scenario::RedisFailover,
    Scenario::DbStop,
    Scenario::GaleraKill,
    Scenario::NetCut,
    Scenario::StartWithoutRedis,
];

/// The process a fault hits, and the one a scenario starts another way: not the first, which
/// the suite registered the tasks through.
const VICTIM: usize = 1;

/// When things happen in a window.
#[derive(Debug, Clone, Copy)]
pub struct Timing {
    pub window: Duration,
    /// From the window's start to the fault.
    pub fault_at: Duration,
    /// The longest a fault lasts: the brief's 20-30 s in the full form, less in `--short`.
    pub max_hold: Duration,
    /// From a `kill -9` of a process to its restart.
    pub restart_after: Duration,
    /// From the window's end to the count: late deliveries and re-deliveries land.
    pub settle: Duration,
}

impl Timing {
    pub const FULL: Timing = Timing {
        window: Duration::from_secs(90),
        fault_at: Duration::from_secs(15),
        max_hold: Duration::from_secs(30),
        restart_after: Duration::from_secs(5),
        settle: Duration::from_secs(15),
    };
    pub const SHORT: Timing = Timing {
        window: Duration::from_secs(20),
        fault_at: Duration::from_secs(4),
        max_hold: Duration::from_secs(8),
        restart_after: Duration::from_secs(3),
        settle: Duration::from_secs(10),
    };

    fn hold(&self, nominal: u64) -> Duration {
        Duration::from_secs(nominal).min(self.max_hold)
    }
}

impl Scenario {
    pub fn name(self) -> &'static str {
        match self {
            Scenario::Kill9 => "kill-9",
            Scenario::Sigstop => "sigstop",
            Scenario::ClockAhead => "clock-ahead",
            Scenario::ClockBehind => "clock-behind",
            Scenario::RedisKill => "redis-kill",
            Scenario::RedisStop => "redis-stop",
            Scenario::RedisFailover => "redis-failover",
            Scenario::DbStop => "db-stop",
            Scenario::GaleraKill => "galera-kill",
            Scenario::NetCut => "net-cut",
            Scenario::StartWithoutRedis => "start-without-redis",
        }
    }

    /// What the scenario expects, as the table's JSON and docs/delivery.md say it.
    pub fn expects(self) -> &'static str {
        match self {
            Scenario::Kill9 => {
                "0 lost; late or folded only in the killed process's share until the others \
                 take it over (about 3 s) or it is back; delivered twice only for runs in flight \
                 at the kill"
            }
            Scenario::Sigstop => {
                "0 lost; late or folded only in the paused process's share until it is fenced \
                 (about 3 s); delivered twice only for runs in flight at the pause"
            }
            Scenario::ClockAhead | Scenario::ClockBehind => {
                "0 lost, 0 delivered twice, 0 late: the skewed process fires nothing and the \
                 others carry every run"
            }
            Scenario::RedisKill | Scenario::RedisStop => {
                "0 lost, 0 delivered twice: firing goes on unlocked, the database's \
                 compare-and-set keeps one row per run; late by at most Redis's first timeout"
            }
            Scenario::RedisFailover => {
                "0 lost, 0 delivered twice, as redis-kill while the Sentinels promote the replica"
            }
            Scenario::DbStop => {
                "0 lost, 0 delivered twice; nothing fires during the stall and each task's \
                 missed seconds fold into one catch-up run when the database is back"
            }
            Scenario::GaleraKill => {
                "0 lost, 0 delivered twice; the process on the killed node fires nothing until \
                 the node is back, the others carry its share"
            }
            Scenario::NetCut => {
                "0 lost; the cut process's share late or folded until it is fenced (about \
                 3 s); delivered twice only for runs it sent and could not record"
            }
            Scenario::StartWithoutRedis => {
                "0 lost, 0 delivered twice: the process starts without Redis and takes part"
            }
        }
    }

    /// Makes the cluster this scenario's window needs; `Ok(Some(reason))` when it cannot run
    /// here (a feature this build lacks, a permission).
    pub async fn prepare(self, suite: &mut Suite) -> anyhow::Result<Prepared> {
        let mut prepared = Prepared::default();
        match self {
            Scenario::ClockAhead | Scenario::ClockBehind => {
                if !std::path::Path::new(FAKETIME).exists() {
                    return Ok(Prepared::not_run(format!(
                        "{FAKETIME} is missing (apt-get install faketime)"
                    )));
                }
                let offset = if self == Scenario::ClockAhead {
                    "+30s"
                } else {
                    "-30s"
                };
                let launch = Launch {
                    env: vec![
                        ("LD_PRELOAD".into(), FAKETIME.into()),
                        ("FAKETIME".into(), offset.into()),
                    ],
                    ..Launch::default()
                };
                suite.nodes.restart(VICTIM, &launch).await?;
                prepared.relaunched = true;
            }
            Scenario::NetCut => {
                let Some(launch) = suite.netns_launch() else {
                    return Ok(Prepared::not_run(suite.netns_missing()));
                };
                prepared.relaunched = true;
                suite.nodes.restart(VICTIM, &launch).await?;
            }
            Scenario::RedisFailover => {
                let sentinels = Sentinels::start(&suite.dir).await?;
                let launch = Launch {
                    env: vec![("AX_REDIS_URL".into(), sentinels.url())],
                    ..Launch::default()
                };
                prepared.sentinels = Some(sentinels);
                prepared.relaunched = true;
                for n in 0..suite.nodes.len() {
                    if let Err(err) = suite.nodes.restart(n, &launch).await {
                        prepared.not_run = Some(format!(
                            "this build does not take the Sentinel URL: {err:#}"
                        ));
                        return Ok(prepared);
                    }
                }
                let waited = suite.nodes.wait_all_healthy(Duration::from_secs(15)).await;
                if let Err(err) = waited {
                    prepared.not_run = Some(format!(
                        "this build starts on the Sentinel URL but does not reach Redis \
                         through it: {err:#}"
                    ));
                }
            }
            Scenario::GaleraKill => {
                if !std::path::Path::new(GALERA).exists() {
                    return Ok(Prepared::not_run(format!(
                        "{GALERA} is missing (apt-get install galera-4 rsync)"
                    )));
                }
                let galera = Galera::start(&suite.dir).await?;
                let store = BenchStore::open(&galera.nodes[0].url("127.0.0.1")).await?;
                prepared.relaunched = true;
                for n in 0..suite.nodes.len() {
                    let launch = Launch {
                        env: vec![("AX_STORE_URL".into(), galera.url_from(n))],
                        ..Launch::default()
                    };
                    suite.nodes.restart(n, &launch).await?;
                }
                suite
                    .nodes
                    .wait_all_healthy(Duration::from_secs(30))
                    .await?;
                let tasks = register_tasks(
                    &suite.nodes.base_urls(),
                    &suite.target,
                    suite.load.tasks,
                    suite.load.period,
                    &store,
                )
                .await?;
                prepared.galera = Some(galera);
                prepared.store = Some((store, tasks));
            }
            _ => {}
        }
        Ok(prepared)
    }

    /// Injects the fault into the window that starts at `start`, and repairs it; returns when
    /// the fault is over (the window may still run).
    pub async fn inject(
        self,
        suite: &mut Suite,
        prepared: &mut Prepared,
        start: DateTime<Utc>,
        timing: &Timing,
    ) -> anyhow::Result<()> {
        let fault = start + timing.fault_at;
        sleep_until(fault).await;
        match self {
            Scenario::Kill9 => {
                suite.nodes.kill(VICTIM);
                sleep_until(fault + timing.restart_after).await;
                suite.nodes.restart(VICTIM, &Launch::default()).await?;
            }
            Scenario::Sigstop => {
                suite.nodes.signal(VICTIM, Signal::Stop)?;
                sleep_until(fault + timing.hold(20)).await;
                suite.nodes.signal(VICTIM, Signal::Cont)?;
            }
            Scenario::ClockAhead | Scenario::ClockBehind => {
                // The skew is the fault, the whole window long: say whether the process saw it.
                match suite.nodes.health(VICTIM).await {
                    Health::Answered { status: 503, .. } => {}
                    other => anyhow::bail!(
                        "the skewed process should answer 503 on /healthz, answered {other:?}"
                    ),
                }
            }
            Scenario::RedisKill => {
                suite.redis.kill();
                sleep_until(fault + timing.hold(15)).await;
                suite.redis.restart().await?;
            }
            Scenario::RedisStop => {
                suite.redis.signal(Signal::Stop)?;
                sleep_until(fault + timing.hold(30)).await;
                suite.redis.signal(Signal::Cont)?;
            }
            Scenario::RedisFailover => {
                let sentinels = prepared
                    .sentinels
                    .as_mut()
                    .ok_or_else(|| anyhow::anyhow!("no Sentinels"))?;
                let before = sentinels.primary_port();
                sentinels.primary.kill();
                sleep_until(fault + timing.hold(20)).await;
                let after = sentinels.primary_port();
                if after == before {
                    anyhow::bail!("the Sentinels did not fail over (primary still {before:?})");
                }
                // The old primary comes back; the Sentinels make it a replica.
                sentinels.primary.restart().await?;
            }
            Scenario::DbStop => {
                suite.mariadb.signal(Signal::Stop)?;
                sleep_until(fault + timing.hold(30)).await;
                suite.mariadb.signal(Signal::Cont)?;
            }
            Scenario::GaleraKill => {
                let galera = prepared
                    .galera
                    .as_mut()
                    .ok_or_else(|| anyhow::anyhow!("no Galera cluster"))?;
                // The node the victim process writes to.
                let node = &mut galera.nodes[VICTIM];
                node.kill();
                sleep_until(fault + timing.hold(20)).await;
                node.restart().await?;
            }
            Scenario::NetCut => {
                let netns = suite
                    .netns
                    .as_ref()
                    .ok_or_else(|| anyhow::anyhow!("no network namespace"))?;
                netns.set_cut(true)?;
                sleep_until(fault + timing.hold(20)).await;
                netns.set_cut(false)?;
            }
            Scenario::StartWithoutRedis => {
                suite.redis.kill();
                sleep_until(fault + Duration::from_secs(1)).await;
                suite.nodes.restart(VICTIM, &Launch::default()).await?;
                match suite.nodes.health(VICTIM).await {
                    Health::Answered {
                        status: 200,
                        redis: Some(redis),
                    } if redis == "down" => {}
                    other => anyhow::bail!(
                        "the process started without Redis should answer 200 with Redis down, \
                         answered {other:?}"
                    ),
                }
                sleep_until(fault + timing.hold(20)).await;
                suite.redis.restart().await?;
            }
        }
        Ok(())
    }
}

/// What a scenario's preparation changed, for its fault and its repair.
#[derive(Default)]
pub struct Prepared {
    /// Why the scenario cannot run here.
    pub not_run: Option<String>,
    /// Some processes run another way: start them all the normal way afterwards.
    pub relaunched: bool,
    pub sentinels: Option<Sentinels>,
    pub galera: Option<Galera>,
    /// Another store than the suite's, and the tasks registered in it.
    pub store: Option<(BenchStore, Vec<(i64, CronSchedule)>)>,
}

impl Prepared {
    fn not_run(reason: String) -> Prepared {
        Prepared {
            not_run: Some(reason),
            ..Prepared::default()
        }
    }
}
