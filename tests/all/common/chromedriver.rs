//! chromedriver as a process of the tests: Debian's `chromedriver` on a port it picks, with
//! Debian's Chromium under it in a fresh profile, and nothing of either left once dropped.

use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Debian's `chromium` package (`scripts/test.sh` installs it when missing).
pub const CHROMIUM: &str = "/usr/bin/chromium";
/// Debian's `chromium-driver` package, of the same Chromium release.
const CHROMEDRIVER: &str = "/usr/bin/chromedriver";
/// The browser's time zone: not UTC, so times shown in the browser's zone read differently
/// (`… UTC+05:30`).
pub const BROWSER_ZONE: &str = "Asia/Kolkata";
/// Chromium's flags: headless, and quiet — without the background-networking ones it waits on
/// connections the closed test network refuses.
pub const CHROMIUM_ARGS: &[&str] = &[
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--lang=en-US",
];

/// chromedriver in a process group of its own, with Chromium under it, and the temp dir of
/// the profile and the log: all of it goes on drop.
pub struct Driver {
    child: Child,
    dir: tempfile::TempDir,
}

impl Driver {
    /// Starts chromedriver on a port it picks itself (no race for a free one).
    pub fn spawn() -> Driver {
        for path in [CHROMIUM, CHROMEDRIVER] {
            assert!(
                std::path::Path::new(path).exists(),
                "{path} is missing: install Debian's chromium and chromium-driver \
                 (scripts/test.sh does)"
            );
        }
        let dir = tempfile::tempdir().expect("temp dir");
        let log = std::fs::File::create(dir.path().join("chromedriver.log")).expect("log file");
        let child = Command::new(CHROMEDRIVER)
            .arg("--port=0")
            .env("TZ", BROWSER_ZONE)
            // Nothing is written to the user's home: Chromium's crash database, say.
            .env("HOME", dir.path())
            .env("XDG_CONFIG_HOME", dir.path().join("config"))
            .env("XDG_CACHE_HOME", dir.path().join("cache"))
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log file"))
            .stderr(log)
            .process_group(0)
            .spawn()
            .unwrap_or_else(|err| panic!("start {CHROMEDRIVER}: {err}"));
        Driver { child, dir }
    }

    /// Where Chromium keeps its profile: under the temp dir, so it goes on drop.
    pub fn profile_dir(&self) -> std::path::PathBuf {
        self.dir.path().join("profile")
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("chromedriver.log")).unwrap_or_default()
    }

    /// The port chromedriver says it listens on, once it has said so.
    pub async fn port(&self) -> u16 {
        const STARTED: &str = "started successfully on port ";
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let log = self.log();
            if let Some(at) = log.find(STARTED) {
                let digits: String = log[at + STARTED.len()..]
                    .chars()
                    .take_while(char::is_ascii_digit)
                    .collect();
                if let Ok(port) = digits.parse() {
                    return port;
                }
            }
            assert!(
                Instant::now() < deadline,
                "chromedriver did not start within 10 s:\n{log}"
            );
            actix_rt::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        // chromedriver and the Chromium it started share its process group; Chromium's crash
        // handlers leave the group but name the temp dir (their database is under its HOME).
        // Killed again until none is left.
        let kill = |target: &str| {
            Command::new("kill")
                .args(["-KILL", "--", target])
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|status| status.success())
        };
        let group = format!("-{}", self.child.id());
        kill(&group);
        let _ = self.child.wait();
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let strays = processes_naming(self.dir.path());
            let alive = kill(&group) | strays.iter().fold(false, |any, pid| kill(pid) | any);
            if !alive || Instant::now() > deadline {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// The ids of the processes whose command line names `dir`.
fn processes_naming(dir: &std::path::Path) -> Vec<String> {
    let dir = dir.as_os_str().as_encoded_bytes();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
        .filter(|pid| pid.bytes().all(|b| b.is_ascii_digit()))
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|line| line.windows(dir.len()).any(|part| part == dir))
        })
        .collect()
}
