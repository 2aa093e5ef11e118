//! `--watch`: a read repeated until interrupted (or, for a run, until it ends).

use std::io::{IsTerminal, Write};
use std::time::Duration;

/// How often a watched read is repeated.
pub const EVERY: Duration = Duration::from_secs(2);

/// Prints one screen of a watch: on a terminal over the last one, else after a blank line, so
/// a pipe or a file keeps each in turn.
pub fn print_screen(text: &str, first: bool) {
    let mut out = std::io::stdout().lock();
    // A closed pipe ends the watch with the next failed request or Ctrl-C; nothing to report.
    let _ = match (std::io::stdout().is_terminal(), first) {
        (true, _) => write!(out, "\x1b[H\x1b[2J{text}"),
        (false, true) => write!(out, "{text}"),
        (false, false) => write!(out, "\n{text}"),
    };
    let _ = out.flush();
}
