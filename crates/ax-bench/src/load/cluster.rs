//! The ax processes under test: children of the bench, running `ax serve` from this very
//! binary, each with its own port, instance id and log file. Whatever happens to the bench,
//! dropping the [`Cluster`] stops them.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};

use crate::load::counters::process_cpu_ticks;
use ax_server::config::env_vars;

/// How long an ax process may take to answer `/healthz` after it is spawned.
const START_TIMEOUT: Duration = Duration::from_secs(30);
/// Longest wait for a restarted process's start-up preload.
const PRELOAD_TIMEOUT: Duration = Duration::from_secs(120);
/// How long an ax process may take to exit after SIGTERM in a normal stop: ax's own shutdown
/// waits up to `server.shutdown_timeout_ms` (10 s by default) for in-flight dispatches.
pub const STOP_TIMEOUT: Duration = Duration::from_secs(20);
/// The same when the bench is failing: no figures depend on a clean exit any more.
const ABORT_TIMEOUT: Duration = Duration::from_secs(5);
/// `/proc/<pid>/stat` counts CPU time in clock ticks: USER_HZ, 100 on every Linux
/// architecture ax runs on (the kernel fixes it for user space whatever HZ is).
pub const CLOCK_TICKS_PER_SEC: u64 = 100;

/// One process's counters at one time (see [`Cluster::readings`]).
#[derive(Debug, Clone)]
pub struct ProcessReading {
    pub instance_id: String,
    pub cpu_ticks: u64,
    pub fires: u64,
    pub redis_commands: u64,
}

/// What every ax process of the cluster shares.
#[derive(Debug, Clone)]
pub struct ClusterSpec {
    pub store_url: String,
    pub redis_url: Option<String>,
    pub instances: u32,
    /// Where the config file and the log files go.
    pub dir: PathBuf,
    /// With `--alerts`: the webhook every event alerts to.
    pub alerts_url: Option<String>,
    /// The ax binary to run: this one, or another build (`--ax`).
    pub exe: PathBuf,
}

impl ClusterSpec {
    /// The Redis key prefix of this run's processes: its folder's name, unique to the run.
    fn redis_key_prefix(&self) -> String {
        let run = self.dir.file_name().map(|name| name.to_string_lossy());
        format!("{}:", run.as_deref().unwrap_or("ax-bench"))
    }
}

/// The processes' config file: empty, or one webhook channel in the default rule for every
/// event.
fn config_file(alerts_url: Option<&str>) -> String {
    match alerts_url {
        None => "# ax bench: built-in defaults\n{}\n".into(),
        Some(url) => format!(
            "# ax bench --alerts\nalerts:\n  channels:\n    - {{name: bench, kind: webhook, \
             url: \"{url}\"}}\n  default:\n    channels: [bench]\n"
        ),
    }
}

/// How one ax process is started besides what the cluster shares: the normal way (loopback,
/// the spec's store and Redis) unless `ax bench chaos` asks for a network namespace, a skewed
/// clock or another store or Redis address.
#[derive(Debug, Clone)]
pub struct Launch {
    /// The address ax binds and the bench reaches it on.
    pub bind: String,
    /// A command the ax binary runs under (`ip netns exec NS`), empty for none.
    pub wrapper: Vec<String>,
    /// Environment set on top of the cluster's (`LD_PRELOAD`, `AX_STORE_URL`, …).
    pub env: Vec<(String, String)>,
}

impl Default for Launch {
    fn default() -> Launch {
        Launch {
            bind: "127.0.0.1".into(),
            wrapper: Vec::new(),
            env: Vec::new(),
        }
    }
}

/// Writes the processes' config file into the spec's folder; returns its path. Built-in
/// defaults, whatever `config/ax.yaml` of the current directory says (but the alerts of
/// `--alerts`); the environment of [`spawn`] sets the rest.
pub fn write_config(spec: &ClusterSpec) -> anyhow::Result<PathBuf> {
    let config = spec.dir.join("ax.yaml");
    std::fs::write(&config, config_file(spec.alerts_url.as_deref()))
        .with_context(|| format!("cannot write {}", config.display()))?;
    Ok(config)
}

/// One ax child process.
pub struct AxProcess {
    pub instance_id: String,
    pub base_url: String,
    pub log: PathBuf,
    child: Child,
    exit: Option<ExitStatus>,
}

/// The ax processes of one bench run.
pub struct Cluster {
    processes: Vec<AxProcess>,
}

impl Cluster {
    /// Spawns every ax process and waits until each answers `/healthz`.
    pub async fn start(spec: &ClusterSpec) -> anyhow::Result<Cluster> {
        let config = write_config(spec)?;
        let mut cluster = Cluster {
            processes: Vec::new(),
        };
        for n in 1..=spec.instances {
            let instance_id = format!("bench-{n}");
            cluster
                .processes
                .push(spawn(spec, &config, &instance_id, &Launch::default())?);
        }
        let client = awc::Client::builder()
            .timeout(Duration::from_secs(2))
            .finish();
        for process in &mut cluster.processes {
            wait_healthy(&client, process).await?;
        }
        Ok(cluster)
    }

    /// Waits until every process has its window in the wheel; returns the longest start-up
    /// preload (`ax_startup_preload_seconds`).
    pub async fn startup_preload_secs(&self) -> anyhow::Result<f64> {
        let client = awc::Client::builder()
            .timeout(Duration::from_secs(5))
            .finish();
        let deadline = Instant::now() + PRELOAD_TIMEOUT;
        let mut longest: f64 = 0.0;
        for process in &self.processes {
            let url = format!("{}/metrics", process.base_url);
            loop {
                let text = match client.get(&url).send().await {
                    Ok(mut response) => response.body().await.ok(),
                    Err(_) => None,
                };
                let preload = text.as_deref().and_then(|body| {
                    gauge(&String::from_utf8_lossy(body), "ax_startup_preload_seconds")
                });
                if let Some(secs) = preload {
                    longest = longest.max(secs);
                    break;
                }
                if Instant::now() > deadline {
                    bail!(
                        "{} did not finish its start-up preload",
                        process.instance_id
                    );
                }
                actix_rt::time::sleep(Duration::from_millis(100)).await;
            }
        }
        Ok(longest)
    }

    pub fn pids(&self) -> Vec<u32> {
        self.processes.iter().map(|p| p.child.id()).collect()
    }

    pub fn base_urls(&self) -> Vec<String> {
        self.processes.iter().map(|p| p.base_url.clone()).collect()
    }

    /// CPU time used so far by all processes, in clock ticks.
    pub fn cpu_ticks(&self) -> anyhow::Result<u64> {
        let mut total = 0;
        for process in &self.processes {
            total += process_cpu_ticks(process.child.id())
                .with_context(|| format!("the CPU time of {}", process.instance_id))?;
        }
        Ok(total)
    }

    /// Each process's resident set size, in MiB: its peak (`VmHWM`, registration included)
    /// and now (`VmRSS`).
    pub fn rss_mb_each(&self) -> anyhow::Result<Vec<(f64, f64)>> {
        let mut sizes = Vec::new();
        for process in &self.processes {
            let path = format!("/proc/{}/status", process.child.id());
            let status = std::fs::read_to_string(&path)
                .with_context(|| format!("cannot read {path} of {}", process.instance_id))?;
            let kb =
                |field| status_kb(&status, field).with_context(|| format!("no {field} in {path}"));
            sizes.push((kb("VmHWM")? as f64 / 1024.0, kb("VmRSS")? as f64 / 1024.0));
        }
        Ok(sizes)
    }

    /// Each process's counters now: its CPU time, and from its `/metrics` the runs it fired
    /// and the commands it sent to Redis.
    pub async fn readings(&self) -> anyhow::Result<Vec<ProcessReading>> {
        let client = awc::Client::builder()
            .timeout(Duration::from_secs(5))
            .finish();
        let mut readings = Vec::new();
        for process in &self.processes {
            let url = format!("{}/metrics", process.base_url);
            let mut response = client
                .get(&url)
                .send()
                .await
                .map_err(|err| anyhow::anyhow!("{url}: {err}"))?;
            let body = response
                .body()
                .limit(16 * 1024 * 1024)
                .await
                .with_context(|| format!("{url}: no body"))?;
            let text = String::from_utf8_lossy(&body);
            readings.push(ProcessReading {
                instance_id: process.instance_id.clone(),
                cpu_ticks: process_cpu_ticks(process.child.id())
                    .with_context(|| format!("the CPU time of {}", process.instance_id))?,
                fires: gauge(&text, "ax_fires_total").unwrap_or(0.0) as u64,
                redis_commands: gauge(&text, "ax_redis_commands_total").unwrap_or(0.0) as u64,
            });
        }
        Ok(readings)
    }

    /// Stops every process the way an operator would (SIGTERM), waiting at most `timeout`
    /// before killing the stragglers. Returns whether all of them exited 0 by themselves.
    pub async fn stop(&mut self, timeout: Duration) -> bool {
        stop_all(&mut self.processes, timeout).await
    }

    fn all_exited(&mut self) -> bool {
        self.processes.iter_mut().all(AxProcess::has_exited)
    }

    fn kill_remaining(&mut self) {
        kill_remaining(&mut self.processes);
    }

    /// Log files, for the report of a failed run.
    pub fn logs(&self) -> Vec<PathBuf> {
        self.processes.iter().map(|p| p.log.clone()).collect()
    }
}

impl Drop for Cluster {
    /// The safety net for errors and panics: never leave an ax process behind.
    fn drop(&mut self) {
        if self.all_exited() {
            return;
        }
        for process in &mut self.processes {
            process.terminate();
        }
        let deadline = Instant::now() + ABORT_TIMEOUT;
        while !self.all_exited() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        self.kill_remaining();
    }
}

/// Stops `processes` with SIGTERM, waiting at most `timeout` before killing the stragglers.
/// Returns whether all of them exited 0 by themselves.
pub async fn stop_all(processes: &mut [AxProcess], timeout: Duration) -> bool {
    for process in processes.iter_mut() {
        process.terminate();
    }
    let deadline = Instant::now() + timeout;
    while !processes.iter_mut().all(AxProcess::has_exited) && Instant::now() < deadline {
        actix_rt::time::sleep(Duration::from_millis(50)).await;
    }
    let clean = processes
        .iter_mut()
        .all(|p| p.has_exited() && p.exit.is_some_and(|status| status.success()));
    kill_remaining(processes);
    clean
}

/// Kills (SIGKILL) every process of `processes` still running, and reaps it.
pub fn kill_remaining(processes: &mut [AxProcess]) {
    for process in processes {
        if !process.has_exited() {
            log::warn!("{} did not stop in time: killing it", process.instance_id);
            process.kill();
        }
    }
}

impl AxProcess {
    /// Its process id (the wrapper's, which execs ax).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// SIGKILL, and reaped.
    pub fn kill(&mut self) {
        if !self.has_exited() {
            let _ = self.child.kill();
            self.exit = self.child.wait().ok();
        }
    }

    /// Whether it has exited; reaps it if so.
    pub fn has_exited(&mut self) -> bool {
        if self.exit.is_none() {
            self.exit = self.child.try_wait().ok().flatten();
        }
        self.exit.is_some()
    }

    /// Sends SIGTERM (ax's graceful shutdown) through kill(1): std can only send SIGKILL, and
    /// this keeps the bench free of `unsafe` and of a libc dependency.
    pub fn terminate(&mut self) {
        if self.has_exited() {
            return;
        }
        let sent = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|status| status.success());
        if !sent && !self.has_exited() {
            let _ = self.child.kill();
        }
    }
}

/// Spawns one ax process of the cluster `spec` describes, started as `launch` says.
pub fn spawn(
    spec: &ClusterSpec,
    config: &Path,
    instance_id: &str,
    launch: &Launch,
) -> anyhow::Result<AxProcess> {
    // Free on the loopback of this namespace; a fresh network namespace has nothing bound.
    let port = free_port("127.0.0.1")?;
    let log = spec.dir.join(format!("{instance_id}.log"));
    // Appended to: a restarted process keeps the log of the one before.
    let out = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log)
        .with_context(|| format!("cannot create {}", log.display()))?;
    let err = out
        .try_clone()
        .with_context(|| format!("cannot open {} twice", log.display()))?;
    let mut command = match launch.wrapper.split_first() {
        Some((program, args)) => {
            let mut command = Command::new(program);
            command.args(args).arg(&spec.exe);
            command
        }
        None => Command::new(&spec.exe),
    };
    command.arg("serve").arg("--config").arg(config);
    // Only the settings below: a stray AX_… variable of the caller would skew the figures.
    for name in env_vars() {
        command.env_remove(name);
    }
    command
        .env("AX_BIND", &launch.bind)
        .env("AX_PORT", port.to_string())
        .env("AX_INSTANCE_ID", instance_id)
        .env("AX_STORE_URL", &spec.store_url)
        .env("AX_REDIS_URL", spec.redis_url.as_deref().unwrap_or(""))
        // Keys of this run's own: a process of another run (one left running, or another
        // bench at once) on the same Redis would count as one of this run's and own a share.
        .env("AX_REDIS_KEY_PREFIX", spec.redis_key_prefix())
        // The mock executor is one host standing for many executor hosts: it is not capped as
        // one real executor host is (64); the dispatchers' own bound (2 × 512) holds.
        .env("AX_DISPATCH_MAX_IN_FLIGHT_PER_HOST", "100000")
        .env("RUST_LOG", "warn")
        .envs(launch.env.iter().map(|(name, value)| (name, value)))
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err);
    let child = command
        .spawn()
        .with_context(|| format!("cannot start {instance_id}"))?;
    Ok(AxProcess {
        instance_id: instance_id.to_string(),
        base_url: format!("http://{}:{port}", launch.bind),
        log,
        child,
        exit: None,
    })
}

/// The value of a gauge in a Prometheus text exposition.
fn gauge(text: &str, name: &str) -> Option<f64> {
    text.lines().find_map(|line| {
        line.strip_prefix(name)?
            .strip_prefix(' ')?
            .trim()
            .parse()
            .ok()
    })
}

/// A port of `host` free now. Another process may take it before ax binds it; ax then exits
/// with a clear message, which the start-up check reports.
pub fn free_port(host: &str) -> anyhow::Result<u16> {
    let listener =
        TcpListener::bind((host, 0)).with_context(|| format!("no free port on {host}"))?;
    Ok(listener.local_addr().context("no local address")?.port())
}

/// Waits until `process` answers `/healthz` with 200.
pub async fn wait_healthy(client: &awc::Client, process: &mut AxProcess) -> anyhow::Result<()> {
    let deadline = Instant::now() + START_TIMEOUT;
    let url = format!("{}/healthz", process.base_url);
    loop {
        if process.has_exited() {
            bail!(
                "{} exited during start-up ({}); see {}",
                process.instance_id,
                process.exit.map_or("?".into(), |s| s.to_string()),
                process.log.display()
            );
        }
        if let Ok(response) = client.get(&url).send().await {
            if response.status().is_success() {
                return Ok(());
            }
        }
        if Instant::now() >= deadline {
            bail!(
                "{} did not answer {url} within {START_TIMEOUT:?}; see {}",
                process.instance_id,
                process.log.display()
            );
        }
        actix_rt::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A field of a `/proc/<pid>/status` text in KiB (`VmHWM`, the peak resident set size;
/// `VmRSS`, the resident set size).
pub fn status_kb(status: &str, field: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|value| value.split_whitespace().next())
        .and_then(|kb| kb.parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gauges_are_read_from_the_exposition() {
        let text = "# HELP ax_startup_preload_seconds x\n# TYPE ax_startup_preload_seconds \
                    gauge\nax_startup_preload_seconds 5.625\nax_wheel_entries 12\n";
        assert_eq!(gauge(text, "ax_startup_preload_seconds"), Some(5.625));
        assert_eq!(gauge(text, "ax_wheel_entries"), Some(12.0));
        assert_eq!(gauge(text, "ax_wheel"), None);
    }

    #[test]
    fn resident_sizes_are_read_from_the_status() {
        let status = "Name:\tax\nVmPeak:\t  900000 kB\nVmHWM:\t   51234 kB\nVmRSS:\t 40000 kB\n";
        assert_eq!(status_kb(status, "VmHWM"), Some(51_234));
        assert_eq!(status_kb(status, "VmRSS"), Some(40_000));
        assert_eq!(status_kb("Name:\tax\n", "VmHWM"), None);
    }

    #[test]
    fn this_process_can_be_measured() {
        let pid = std::process::id();
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
        assert!(status_kb(&status, "VmHWM").is_some_and(|kb| kb > 0));
    }
}
