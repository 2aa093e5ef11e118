//! `--profile FILE`: a CPU profile of the ax processes during the measuring window, recorded by
//! Linux `perf` (Debian's linux-perf) sampling the CPU clock with DWARF call stacks.
//! `scripts/bench.sh profile …` turns the file into a flame graph and a table of top entries.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};

/// Samples a second: enough for a stable top-entry table in 30 s, little enough that the
/// recording (stacks copied for DWARF unwinding) does not change the run much.
const SAMPLES_PER_SEC: u32 = 199;

/// A `perf record` running on the ax processes.
pub struct Recording {
    child: Child,
    secs: u64,
}

impl Recording {
    /// Starts recording `pids` for `secs` seconds into `file`.
    pub fn start(pids: &[u32], secs: u64, file: &Path) -> anyhow::Result<Recording> {
        let pids: Vec<String> = pids.iter().map(u32::to_string).collect();
        let child = Command::new("perf")
            .args(["record", "--quiet", "-e", "cpu-clock"])
            .args(["-F", &SAMPLES_PER_SEC.to_string()])
            .args(["--call-graph", "dwarf,16384", "-p", &pids.join(",")])
            .arg("-o")
            .arg(file)
            .args(["--", "sleep", &secs.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .spawn()
            .context("cannot start `perf record` (Debian's linux-perf package)")?;
        Ok(Recording { child, secs })
    }

    /// Waits for the recording to end by itself, a little past its length.
    pub async fn finish(mut self) -> anyhow::Result<()> {
        let deadline = Instant::now() + Duration::from_secs(self.secs + 30);
        loop {
            if let Some(status) = self.child.try_wait().context("waiting for perf")? {
                if !status.success() {
                    bail!("`perf record` failed: {status}");
                }
                return Ok(());
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                bail!("`perf record` did not stop after {} s", self.secs);
            }
            actix_rt::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

impl Drop for Recording {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}
