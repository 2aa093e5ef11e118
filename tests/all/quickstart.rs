//! The README's quick start runs as written: every ```sh block of its section, in order, in one
//! bash, against a fresh ax it starts itself (on free ports, in an empty folder, with the built
//! `ax` first on the PATH); the ```text block right after a ```sh block is what that block
//! prints, `…` standing for any text. Everything the blocks start is stopped at the end. Then
//! it runs again in the same folder, on the same ports, as a user trying it twice would: the
//! same blocks print the same (nothing the first run paused stays paused).

use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{channel, Receiver};
use std::time::Duration;

const SECTION: &str = "## Quick start";
const DONE: &str = "__quickstart_block_done__";
const BLOCK_TIMEOUT: Duration = Duration::from_secs(90);

/// A ```sh block of the section and the ```text block that follows it, if any.
struct Block {
    script: String,
    expected: Option<String>,
}

/// The blocks of the README's quick start section.
fn blocks(readme: &str) -> Vec<Block> {
    let section: Vec<&str> = readme
        .lines()
        .skip_while(|line| *line != SECTION)
        .skip(1)
        .take_while(|line| !line.starts_with("## "))
        .collect();
    assert!(!section.is_empty(), "README.md has no {SECTION} section");
    let mut fenced: Vec<(String, String)> = Vec::new(); // (language, text), prose as ("", "")
    let mut lines = section.into_iter();
    while let Some(line) = lines.next() {
        if let Some(language) = line.strip_prefix("```") {
            let body: Vec<&str> = lines.by_ref().take_while(|l| *l != "```").collect();
            fenced.push((language.to_string(), body.join("\n") + "\n"));
        } else if !line.trim().is_empty() {
            fenced.push((String::new(), String::new()));
        }
    }
    let mut blocks = Vec::new();
    let mut items = fenced.into_iter().peekable();
    while let Some((language, text)) = items.next() {
        if language != "sh" {
            continue;
        }
        let expected = match items.peek() {
            Some((next, _)) if next == "text" => items.next().map(|(_, text)| text),
            _ => None,
        };
        blocks.push(Block {
            script: text,
            expected,
        });
    }
    blocks
}

/// Whether `text` is `pattern`, where `…` stands for any text (newlines included).
fn matches(pattern: &str, text: &str) -> bool {
    let pieces: Vec<&str> = pattern.split('…').collect();
    let (first, last) = (pieces[0], pieces[pieces.len() - 1]);
    if pieces.len() == 1 {
        return text == pattern;
    }
    if !text.starts_with(first) || text.len() < first.len() + last.len() {
        return false;
    }
    let mut rest = &text[first.len()..];
    for piece in &pieces[1..pieces.len() - 1] {
        match rest.find(piece) {
            Some(at) => rest = &rest[at + piece.len()..],
            None => return false,
        }
    }
    rest.ends_with(last)
}

/// One bash in a process group of its own, fed block after block; its process group (and so
/// whatever the blocks started in the background) is killed when it is dropped.
struct Shell {
    child: Child,
    stdin: ChildStdin,
    lines: Receiver<String>,
}

impl Shell {
    fn start(dir: &Path, env: &[(&str, String)]) -> Shell {
        let mut command = Command::new("bash");
        command
            .current_dir(dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .env_remove("RUST_LOG")
            .process_group(0);
        for (name, _) in std::env::vars_os() {
            if name.to_string_lossy().starts_with("AX") {
                command.env_remove(name);
            }
        }
        for (name, value) in env {
            command.env(name, value);
        }
        let mut child = command.spawn().expect("bash");
        let stdin = child.stdin.take().expect("stdin");
        let stdout = child.stdout.take().expect("stdout");
        let (send, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if send.send(line).is_err() {
                    break;
                }
            }
        });
        let mut shell = Shell {
            child,
            stdin,
            lines,
        };
        // What a block writes to stderr is part of what it prints.
        shell.send("exec 2>&1\n");
        shell
    }

    fn send(&mut self, text: &str) {
        self.stdin
            .write_all(text.as_bytes())
            .expect("write to bash");
        self.stdin.flush().expect("flush bash");
    }

    /// Runs `script`; its output and exit status.
    fn run(&mut self, script: &str) -> (String, i32) {
        self.send(&format!("{script}\necho \"{DONE} $?\"\n"));
        let mut output = String::new();
        loop {
            let line = self
                .lines
                .recv_timeout(BLOCK_TIMEOUT)
                .unwrap_or_else(|_| panic!("block did not finish:\n{script}\noutput:\n{output}"));
            if let Some(status) = line.strip_prefix(DONE) {
                return (output, status.trim().parse().unwrap_or(-1));
            }
            output.push_str(&line);
            output.push('\n');
        }
    }
}

impl Drop for Shell {
    fn drop(&mut self) {
        let group = format!("-{}", self.child.id());
        let _ = Command::new("kill").args(["-TERM", "--", &group]).status();
        std::thread::sleep(Duration::from_millis(500));
        let _ = Command::new("kill").args(["-KILL", "--", &group]).status();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|addr| addr.port())
        .expect("free port")
}

/// Runs every block in one shell in `dir`, checking each one's status and output; `pass`
/// (1 or 2) names the run in failures.
fn run_blocks(blocks: &[Block], dir: &Path, env: &[(&str, String)], pass: u32) {
    let mut shell = Shell::start(dir, env);
    for (n, block) in blocks.iter().enumerate() {
        let (output, status) = shell.run(&block.script);
        let log = std::fs::read_to_string(dir.join("ax.log")).unwrap_or_default();
        assert_eq!(
            status,
            0,
            "run {pass}, block {} exited {status}:\n{}\noutput:\n{output}\nax.log:\n{log}",
            n + 1,
            block.script
        );
        if let Some(expected) = &block.expected {
            assert!(
                matches(expected, &output),
                "run {pass}, block {} printed what the README does not say:\n{}\nREADME:\n{expected}\nprinted:\n{output}\nax.log:\n{log}",
                n + 1,
                block.script
            );
        }
    }
}

#[test]
fn the_readmes_quick_start_runs_as_written_twice_in_one_folder() {
    let readme = include_str!("../../README.md");
    let blocks = blocks(readme);
    assert!(blocks.len() >= 4, "too few blocks in {SECTION}");
    let dir = tempfile::tempdir().expect("temp dir");
    let bin = Path::new(env!("CARGO_BIN_EXE_ax"))
        .parent()
        .expect("the binary's folder")
        .to_path_buf();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    // The same ports both times: a second run in the folder is the same commands again.
    let env = [
        ("PATH", path),
        ("AX_PORT", free_port().to_string()),
        ("EXECUTOR_PORT", free_port().to_string()),
    ];
    run_blocks(&blocks, dir.path(), &env, 1);
    assert!(
        dir.path().join("data/ax.db").is_file(),
        "the first run's store is kept"
    );
    run_blocks(&blocks, dir.path(), &env, 2);
}

#[test]
fn an_ellipsis_matches_any_text() {
    assert!(matches("a…c\n", "abbb\nbc\n"));
    assert!(matches("…", "anything"));
    assert!(matches("x\n", "x\n"));
    assert!(!matches("x\n", "y\n"));
    assert!(!matches("a…b…c", "acb"));
    assert!(!matches("ab…ba", "aba"));
}
