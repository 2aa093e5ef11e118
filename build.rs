//! Records the git commit the binary is built from, for `ax --version`: `AX_GIT_COMMIT`, the
//! first 12 hex digits, or `unknown` when git or the repository is absent (a build from a
//! source tarball still works).

use std::path::PathBuf;
use std::process::Command;

fn main() {
    let commit = git(&["rev-parse", "--short=12", "HEAD"]).unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=AX_GIT_COMMIT={commit}");
    println!("cargo:rerun-if-changed=build.rs");
    // Built again when HEAD moves: HEAD itself (a checkout), and the branch it points to (a
    // commit). In a worktree both live in the main repository's .git, so git says where.
    if let Some(head) = git(&["rev-parse", "--git-path", "HEAD"]) {
        println!("cargo:rerun-if-changed={}", absolute(head).display());
    }
    if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
        // A branch is a file of its own, or a line of packed-refs; a path that does not exist
        // would run this script on every build.
        let file = git(&["rev-parse", "--git-path", &branch])
            .map(absolute)
            .filter(|file| file.exists());
        let file = file.or_else(|| git(&["rev-parse", "--git-path", "packed-refs"]).map(absolute));
        if let Some(file) = file.filter(|file| file.exists()) {
            println!("cargo:rerun-if-changed={}", file.display());
        }
    }
}

/// A git command's output, trimmed; `None` if git is missing or fails.
fn git(args: &[&str]) -> Option<String> {
    let output = Command::new("git").args(args).output().ok()?;
    let text = String::from_utf8(output.stdout).ok()?;
    (output.status.success() && !text.trim().is_empty()).then(|| text.trim().to_string())
}

/// A path git gave relative to the package's directory, made absolute.
fn absolute(path: String) -> PathBuf {
    let path = PathBuf::from(path);
    match path.is_absolute() {
        true => path,
        false => PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default()).join(path),
    }
}
