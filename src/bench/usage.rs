//! What the measuring window cost: counters of the ax processes, the database server and Redis
//! read when the window opens and when it closes, and their differences per fire.

use std::time::Instant;

use anyhow::Context as _;
use serde::Serialize;

use std::sync::atomic::Ordering;

use super::cluster::{Cluster, CLOCK_TICKS_PER_SEC};
use super::db::{BenchStore, ServerCounters};
use super::executor::MockExecutor;
use super::report::{round1, round2};

/// Counters as they were when the window opened.
pub struct Window {
    opened: Instant,
    at_open: Counters,
}

/// One reading of every counter; `None` where a counter is not available (the database is
/// SQLite, the server runs elsewhere, no Redis).
#[derive(Debug, Clone, Copy, Default)]
struct Counters {
    ax_cpu_ticks: u64,
    http: Traffic,
    db_cpu_ticks: Option<u64>,
    db: Option<ServerCounters>,
    redis: Option<RedisCounters>,
}

/// Bytes ax sent and received over the network: HTTP (counted by the mock executor), the
/// database server's and Redis's counters of their clients' traffic.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Traffic {
    pub sent: u64,
    pub received: u64,
}

impl Traffic {
    fn plus(self, other: Traffic) -> Traffic {
        Traffic {
            sent: self.sent + other.sent,
            received: self.received + other.received,
        }
    }

    pub fn since(self, before: Traffic) -> Traffic {
        Traffic {
            sent: self.sent.saturating_sub(before.sent),
            received: self.received.saturating_sub(before.received),
        }
    }
}

/// Redis's counters of all its clients.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct RedisCounters {
    commands: u64,
    /// From the clients' side: what they sent (`total_net_input_bytes`) and received.
    traffic: Traffic,
}

/// What the window used, from the differences of the counters.
#[derive(Debug, Clone, Copy)]
pub struct WindowUse {
    pub wall_secs: f64,
    pub ax_cpu_ticks: u64,
    /// Everything ax sent and received over the network.
    traffic: Traffic,
    db_cpu_ticks: Option<u64>,
    db: Option<ServerCounters>,
    redis_commands: Option<u64>,
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

impl Window {
    pub async fn open(peers: &Peers<'_>) -> anyhow::Result<Self> {
        Ok(Window {
            at_open: Counters::read(peers).await?,
            opened: Instant::now(),
        })
    }

    pub async fn close(self, peers: &Peers<'_>) -> anyhow::Result<WindowUse> {
        let wall_secs = self.opened.elapsed().as_secs_f64();
        let now = Counters::read(peers).await?;
        let before = self.at_open;
        let minus = |after: Option<u64>, before: Option<u64>| Some(after?.saturating_sub(before?));
        let db = now
            .db
            .zip(before.db)
            .map(|(after, before)| after.since(&before));
        let redis = now
            .redis
            .zip(before.redis)
            .map(|(after, before)| RedisCounters {
                commands: after.commands.saturating_sub(before.commands),
                traffic: after.traffic.since(before.traffic),
            });
        let traffic = [db.map(|db| db.traffic), redis.map(|r| r.traffic)]
            .into_iter()
            .flatten()
            .fold(now.http.since(before.http), Traffic::plus);
        Ok(WindowUse {
            wall_secs,
            ax_cpu_ticks: now.ax_cpu_ticks.saturating_sub(before.ax_cpu_ticks),
            traffic,
            db_cpu_ticks: minus(now.db_cpu_ticks, before.db_cpu_ticks),
            db,
            redis_commands: redis.map(|r| r.commands),
        })
    }
}

/// What the window's counters are read from.
pub struct Peers<'a> {
    pub cluster: &'a Cluster,
    pub store: &'a BenchStore,
    pub executor: &'a MockExecutor,
    pub redis: bool,
}

impl Counters {
    async fn read(peers: &Peers<'_>) -> anyhow::Result<Self> {
        let db_cpu_ticks = match peers.store.server_pid() {
            Some(pid) => Some(process_cpu_ticks(pid)?),
            None => None,
        };
        let http = &peers.executor.counters().http_bytes;
        Ok(Counters {
            ax_cpu_ticks: peers.cluster.cpu_ticks()?,
            http: Traffic {
                sent: http.ax_sent.load(Ordering::Relaxed),
                received: http.ax_received.load(Ordering::Relaxed),
            },
            db_cpu_ticks,
            db: peers.store.server_counters().await?,
            redis: match peers.redis {
                true => Some(redis_counters().await?),
                false => None,
            },
        })
    }
}

impl WindowUse {
    /// The cost of one fire, over `fires` fires made in the window.
    pub fn per_fire(&self, fires: usize) -> PerFire {
        if fires == 0 {
            return PerFire::default();
        }
        let each = |total: u64| total as f64 / fires as f64;
        let cpu_us = |ticks: u64| round1(each(ticks) * 1e6 / CLOCK_TICKS_PER_SEC as f64);
        PerFire {
            ax_cpu_us: Some(cpu_us(self.ax_cpu_ticks)),
            db_cpu_us: self.db_cpu_ticks.map(cpu_us),
            redis_commands: self.redis_commands.map(|n| round2(each(n))),
            db_statements: self.db.map(|db| round2(each(db.statements))),
            db_rows_written: self.db.map(|db| round2(each(db.rows_written))),
            bytes_sent: Some(round1(each(self.traffic.sent))),
            bytes_received: Some(round1(each(self.traffic.received))),
        }
    }
}

/// utime + stime of a process, in clock ticks.
pub fn process_cpu_ticks(pid: u32) -> anyhow::Result<u64> {
    let path = format!("/proc/{pid}/stat");
    let stat = std::fs::read_to_string(&path).with_context(|| format!("cannot read {path}"))?;
    parse_cpu_ticks(&stat).with_context(|| format!("unexpected format of {path}"))
}

/// utime + stime of a `/proc/<pid>/stat` line, in clock ticks.
pub fn parse_cpu_ticks(stat: &str) -> Option<u64> {
    // The command name (field 2) is in parentheses and may hold spaces: count from after it.
    // Fields after it start at field 3 (state); utime and stime are fields 14 and 15.
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace().skip(11);
    let utime: u64 = fields.next()?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some(utime + stime)
}

/// The first process on this machine whose command name is one of `names`.
pub fn find_process(names: &[&str]) -> Option<u32> {
    std::fs::read_dir("/proc")
        .ok()?
        .filter_map(Result::ok)
        .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
        .find(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/comm"))
                .is_ok_and(|comm| names.contains(&comm.trim()))
        })
}

/// The bench's Redis's counters since it started.
async fn redis_counters() -> anyhow::Result<RedisCounters> {
    let client = redis::Client::open(super::REDIS_URL).context("bad Redis URL")?;
    let mut conn = client
        .get_multiplexed_async_connection()
        .await
        .context("cannot reach Redis")?;
    let info: String = redis::cmd("INFO")
        .arg("stats")
        .query_async(&mut conn)
        .await
        .context("cannot read Redis INFO")?;
    let field =
        |name: &str| info_field(&info, name).with_context(|| format!("no {name} in Redis INFO"));
    Ok(RedisCounters {
        commands: field("total_commands_processed")?,
        traffic: Traffic {
            sent: field("total_net_input_bytes")?,
            received: field("total_net_output_bytes")?,
        },
    })
}

/// A numeric field of Redis's `INFO` text.
fn info_field(info: &str, name: &str) -> Option<u64> {
    info.lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(':'))
        .and_then(|value| value.trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_ticks_are_utime_plus_stime() {
        let stat = "4242 (ax serve (x)) S 1 4242 4242 0 -1 4194560 1234 0 0 0 \
                    250 70 0 0 20 0 9 0 123456 1000000 2000 18446744073709551615";
        assert_eq!(parse_cpu_ticks(stat), Some(320));
        assert_eq!(parse_cpu_ticks("4242 (ax) S 1"), None);
        let own = std::fs::read_to_string(format!("/proc/{}/stat", std::process::id()));
        assert!(parse_cpu_ticks(&own.expect("stat")).is_some());
    }

    #[test]
    fn redis_info_fields_are_found_by_name() {
        let info = "# Stats\r\ntotal_connections_received:7\r\ntotal_commands_processed:9120\r\n";
        assert_eq!(info_field(info, "total_commands_processed"), Some(9120));
        assert_eq!(info_field(info, "total_commands"), None);
    }

    #[test]
    fn the_cost_is_divided_by_the_fires() {
        let used = WindowUse {
            wall_secs: 10.0,
            ax_cpu_ticks: 300, // 3 s of CPU
            traffic: Traffic {
                sent: 120_000,
                received: 50_000,
            },
            db_cpu_ticks: Some(150),
            db: Some(ServerCounters {
                statements: 250,
                rows_written: 2_000,
                traffic: Traffic::default(),
            }),
            redis_commands: None,
        };
        assert_eq!(
            used.per_fire(1_000),
            PerFire {
                ax_cpu_us: Some(3_000.0),
                db_cpu_us: Some(1_500.0),
                redis_commands: None,
                db_statements: Some(0.25),
                db_rows_written: Some(2.0),
                bytes_sent: Some(120.0),
                bytes_received: Some(50.0),
            }
        );
        assert_eq!(used.per_fire(0), PerFire::default());
    }

    #[test]
    fn this_process_is_found_by_its_name() {
        let comm = std::fs::read_to_string("/proc/self/comm").expect("comm");
        assert!(find_process(&[comm.trim()]).is_some());
        assert_eq!(find_process(&["no-such-process-name"]), None);
    }
}
