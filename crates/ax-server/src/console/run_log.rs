//! A run's log on its page: per attempt, the progress as a bar, the lines the executor sent
//! (a marker where the oldest were dropped) and the output of its reply or callback.

use maud::{html, Markup};

use ax_core::run::logs::{dropped_marker, Limits};
use ax_store::from_db;
use ax_store::queries::run_log::AttemptLog;

/// Every attempt's log, oldest attempt first.
pub fn section(logs: &[AttemptLog], limits: Limits) -> Markup {
    html! {
        h2 #log-heading { "Log" }
        @if logs.is_empty() {
            p.muted { "The executor sent no log lines or progress." }
        }
        @for log in logs {
            (attempt(log, limits))
        }
    }
}

fn attempt(log: &AttemptLog, limits: Limits) -> Markup {
    let heading = format!("log-{}-heading", log.attempt);
    html! {
        section.log aria-labelledby=(heading) {
            h3 id=(heading) { "Attempt " (log.attempt) }
            @if let Some(progress) = log.progress {
                p.progress {
                    label for=(format!("progress-{}", log.attempt)) { "Progress" }
                    " "
                    progress id=(format!("progress-{}", log.attempt)) max="100" value=(progress) { (progress) " %" }
                    " " (progress) " %"
                }
            }
            @if log.lines.is_empty() && log.dropped == 0 {
                p.muted { "No log lines." }
            } @else {
                p.hint { "Line times are UTC." }
                pre.lines tabindex="0" aria-label=(format!("Log lines of attempt {}", log.attempt)) {
                    @if log.dropped > 0 {
                        span.marker { (dropped_marker(log.dropped, limits)) } "\n"
                    }
                    @for (at, text) in &log.lines {
                        time.at.fixed datetime=(ax_core::time::clock::rfc3339(from_db(*at))) { (at.format("%H:%M:%S%.3f")) }
                        " " (text) "\n"
                    }
                }
            }
            @if let Some(output) = &log.output {
                details open {
                    summary { "Output" }
                    pre.output tabindex="0" { (output) }
                }
            }
        }
    }
}
