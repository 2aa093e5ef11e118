//! The faults: signals to a process (ax, `redis-server`, `mariadbd`) and commands run as root
//! (`ip`). Sent through kill(1) and ip(8), so the bench needs no `unsafe` and no libc.

use std::process::{Command, Stdio};

use anyhow::{bail, Context as _};

/// A signal the suite sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    /// Death without a word (`kill -9`).
    Kill,
    /// A pause: the process keeps its sockets and memory and does nothing.
    Stop,
    /// The end of a pause.
    Cont,
}

impl Signal {
    fn name(self) -> &'static str {
        match self {
            Signal::Kill => "KILL",
            Signal::Stop => "STOP",
            Signal::Cont => "CONT",
        }
    }
}

/// Sends `signal` to `pid`.
pub fn send(pid: u32, signal: Signal) -> anyhow::Result<()> {
    run("kill", &[&format!("-{}", signal.name()), &pid.to_string()])
}

/// Runs `program` with `args`, quietly; an error names the command and its stderr.
pub fn run(program: &str, args: &[&str]) -> anyhow::Result<()> {
    let output = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("cannot run {program}"))?;
    if !output.status.success() {
        bail!(
            "`{program} {}` failed ({}): {}",
            args.join(" "),
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    Ok(())
}
