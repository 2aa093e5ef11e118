//! What the measuring window cost: counters of the ax processes, the database server and Redis
//! read when the window opens and when it closes, and their differences per fire.

use std::sync::atomic::Ordering;
use std::time::Instant;

use anyhow::Context as _;

use crate::load::cluster::{Cluster, ProcessReading, CLOCK_TICKS_PER_SEC};
use crate::load::counters::{info_field, ServerCounters, Traffic};
use crate::load::db::BenchStore;
use crate::load::executor::MockExecutor;
use crate::measure::report::{round1, round2, PerFire, ProcessUse};

/// Counters as they were when the window opened.
pub struct Window {
    opened: Instant,
    at_open: Counters,
    processes_at_open: Vec<ProcessReading>,
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

/// Redis's counters of all its clients.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct RedisCounters {
    commands: u64,
    /// From the clients' side: what they sent (`total_net_input_bytes`) and received.
    traffic: Traffic,
}

/// What the window used, from the differences of the counters.
#[derive(Debug, Clone)]
pub struct WindowUse {
    pub wall_secs: f64,
    pub ax_cpu_ticks: u64,
    /// Everything ax sent and received over the network.
    traffic: Traffic,
    db_cpu_ticks: Option<u64>,
    db: Option<ServerCounters>,
    redis_commands: Option<u64>,
    /// Each process's part, in the cluster's order.
    pub processes: Vec<ProcessUse>,
}

impl Window {
    pub async fn open(peers: &Peers<'_>) -> anyhow::Result<Self> {
        Ok(Window {
            at_open: Counters::read(peers).await?,
            processes_at_open: peers.cluster.readings().await?,
            opened: Instant::now(),
        })
    }

    pub async fn close(self, peers: &Peers<'_>) -> anyhow::Result<WindowUse> {
        let wall_secs = self.opened.elapsed().as_secs_f64();
        let processes = peers.cluster.readings().await?;
        let now = Counters::read(peers).await?;
        let per_sec =
            |after: u64, before: u64| round1(after.saturating_sub(before) as f64 / wall_secs);
        let processes = processes
            .into_iter()
            .zip(&self.processes_at_open)
            .map(|(now, then)| ProcessUse {
                cpu_percent: round1(
                    now.cpu_ticks.saturating_sub(then.cpu_ticks) as f64 * 100.0
                        / CLOCK_TICKS_PER_SEC as f64
                        / wall_secs,
                ),
                peak_rss_mb: 0.0,
                rss_mb: 0.0,
                fires_per_sec: per_sec(now.fires, then.fires),
                redis_commands_per_sec: per_sec(now.redis_commands, then.redis_commands),
                instance_id: now.instance_id,
            })
            .collect();
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
            processes,
        })
    }
}

/// What the window's counters are read from.
pub struct Peers<'a> {
    pub cluster: &'a Cluster,
    pub store: &'a BenchStore,
    pub executor: &'a MockExecutor,
    /// The Redis of the fire lock, if ax uses one.
    pub redis: Option<&'a str>,
}

impl Counters {
    async fn read(peers: &Peers<'_>) -> anyhow::Result<Self> {
        let db_cpu_ticks = peers.store.server_cpu_ticks()?;
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
                Some(url) => Some(redis_counters(url).await?),
                None => None,
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

/// The bench's Redis's counters since it started.
async fn redis_counters(url: &str) -> anyhow::Result<RedisCounters> {
    let client = redis::Client::open(url).context("bad Redis URL")?;
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

#[cfg(test)]
mod tests {
    use super::*;

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
            processes: Vec::new(),
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
}
