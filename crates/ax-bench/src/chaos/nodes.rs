//! The ax processes under test: `ax serve` children as in `ax bench`, each of which a scenario
//! may kill, pause, or start again another way (in the network namespace, under a skewed
//! clock, on another Redis URL). Dropping [`Nodes`] stops them all.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};

use super::faults::{self, Signal};
use crate::load::cluster::{
    kill_remaining, spawn, stop_all, wait_healthy, AxProcess, ClusterSpec, Launch, STOP_TIMEOUT,
};

/// How long a process may take to answer after it is started.
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// The ax processes of the suite.
pub struct Nodes {
    spec: ClusterSpec,
    config: PathBuf,
    processes: Vec<AxProcess>,
    /// Environment of every process, under each launch's own.
    common_env: Vec<(String, String)>,
    client: awc::Client,
}

/// What `/healthz` said, if anything.
#[derive(Debug, Clone, PartialEq)]
pub enum Health {
    /// No answer (not up yet, paused, cut off, or exited).
    Silent,
    /// HTTP status and the `redis` field (`up`, `down`, or none without Redis).
    Answered { status: u16, redis: Option<String> },
}

impl Nodes {
    /// Starts `spec.instances` processes the normal way, with `common_env` besides the spec's,
    /// and waits until each is healthy.
    pub async fn start(
        spec: ClusterSpec,
        common_env: Vec<(String, String)>,
    ) -> anyhow::Result<Nodes> {
        let config = crate::load::cluster::write_config(&spec)?;
        let mut nodes = Nodes {
            spec,
            config,
            processes: Vec::new(),
            common_env,
            client: awc::Client::builder()
                .timeout(Duration::from_secs(2))
                .finish(),
        };
        for n in 1..=nodes.spec.instances {
            let process = spawn(
                &nodes.spec,
                &nodes.config,
                &instance_id(n as usize - 1),
                &nodes.with_common_env(&Launch::default()),
            )?;
            nodes.processes.push(process);
        }
        for process in &mut nodes.processes {
            wait_healthy(&nodes.client, process).await?;
        }
        Ok(nodes)
    }

    pub fn base_urls(&self) -> Vec<String> {
        self.processes.iter().map(|p| p.base_url.clone()).collect()
    }

    pub fn len(&self) -> usize {
        self.processes.len()
    }

    pub fn pid(&self, n: usize) -> u32 {
        self.processes[n].pid()
    }

    pub fn signal(&self, n: usize, signal: Signal) -> anyhow::Result<()> {
        faults::send(self.pid(n), signal)
            .with_context(|| format!("signalling {}", self.processes[n].instance_id))
    }

    /// `kill -9` of process `n`.
    pub fn kill(&mut self, n: usize) {
        self.processes[n].kill();
    }

    /// Stops process `n` (SIGTERM, killed if it lingers; nothing if it is gone already) and
    /// starts it again, with the same instance id, as `launch` says; returns once it answers
    /// `/healthz` at all (a process with a skewed clock answers 503).
    pub async fn restart(&mut self, n: usize, launch: &Launch) -> anyhow::Result<()> {
        stop_all(std::slice::from_mut(&mut self.processes[n]), STOP_TIMEOUT).await;
        let launch = self.with_common_env(launch);
        self.processes[n] = spawn(&self.spec, &self.config, &instance_id(n), &launch)?;
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            let process = &mut self.processes[n];
            if process.has_exited() {
                bail!(
                    "{} exited at start-up; see {}: {}",
                    process.instance_id,
                    process.log.display(),
                    last_line(&process.log)
                );
            }
            if self.health(n).await != Health::Silent {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!(
                    "{} did not answer within {START_TIMEOUT:?}",
                    self.processes[n].instance_id
                );
            }
            actix_rt::time::sleep(Duration::from_millis(100)).await;
        }
    }

    fn with_common_env(&self, launch: &Launch) -> Launch {
        let mut env = self.common_env.clone();
        env.extend(launch.env.iter().cloned());
        Launch {
            env,
            ..launch.clone()
        }
    }

    /// What process `n`'s `/healthz` says now.
    pub async fn health(&self, n: usize) -> Health {
        let url = format!("{}/healthz", self.processes[n].base_url);
        let Ok(mut response) = self.client.get(&url).send().await else {
            return Health::Silent;
        };
        let body: serde_json::Value = response.json().await.unwrap_or_default();
        Health::Answered {
            status: response.status().as_u16(),
            redis: body["redis"].as_str().map(str::to_string),
        }
    }

    /// Waits until every process answers 200 with Redis up; an error names the ones that do
    /// not.
    pub async fn wait_all_healthy(&self, timeout: Duration) -> anyhow::Result<()> {
        let deadline = Instant::now() + timeout;
        loop {
            let mut unwell = Vec::new();
            for n in 0..self.len() {
                let health = self.health(n).await;
                let well = matches!(&health, Health::Answered { status: 200, redis }
                    if redis.as_deref() != Some("down"));
                if !well {
                    unwell.push(format!("{}: {health:?}", self.processes[n].instance_id));
                }
            }
            if unwell.is_empty() {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!("not healthy after {timeout:?}: {}", unwell.join("; "));
            }
            actix_rt::time::sleep(Duration::from_millis(250)).await;
        }
    }

    /// Stops every process (SIGCONT first, in case one is paused).
    pub async fn stop(&mut self) {
        for n in 0..self.len() {
            let _ = self.signal(n, Signal::Cont);
        }
        stop_all(&mut self.processes, STOP_TIMEOUT).await;
    }
}

impl Drop for Nodes {
    /// The safety net for errors and panics: a paused process would ignore SIGTERM.
    fn drop(&mut self) {
        kill_remaining(&mut self.processes);
    }
}

fn instance_id(n: usize) -> String {
    format!("chaos-{}", n + 1)
}

/// The last line of a log, to say why a process exited.
fn last_line(log: &std::path::Path) -> String {
    std::fs::read_to_string(log)
        .ok()
        .and_then(|text| text.lines().last().map(str::to_string))
        .unwrap_or_default()
}
