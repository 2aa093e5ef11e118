//! `ax executor check` (protocol.md, "Checking an executor") against the README's ten-line
//! example: every check conforms.

use std::process::Command;

use crate::harness::{ax_bin, free_port, start_example, Ax, SECRET};

#[actix_web::test]
async fn the_ten_line_example_passes_ax_executor_check() {
    let help = Command::new(ax_bin())
        .args(["executor", "check", "--help"])
        .output()
        .expect("run ax");
    assert!(
        help.status.success(),
        "this ax has no `ax executor check` (`{} executor check --help` failed: {}): build an ax \
         that has it, or point AX_BIN at one",
        ax_bin().display(),
        String::from_utf8_lossy(&help.stderr)
            .lines()
            .next()
            .unwrap_or("")
    );
    let ax = Ax::start().await;
    let port = free_port();
    let url = format!("http://127.0.0.1:{port}");
    let _example = start_example("reconcile", port, &ax, &[("EXECUTOR_URL", url.clone())]).await;
    let check = Command::new(ax_bin())
        .args([
            "executor",
            "check",
            &url,
            "--path",
            "/reconcile",
            "--secret",
            SECRET,
        ])
        .args(["--params", r#"{"region":"eu"}"#])
        .env("AX_URL", &ax.url)
        .output()
        .expect("run ax executor check");
    assert!(
        check.status.success(),
        "ax executor check failed ({}):\n{}\n{}",
        check.status,
        String::from_utf8_lossy(&check.stdout),
        String::from_utf8_lossy(&check.stderr)
    );
}
