//! A timeline of runs (a Gantt strip, a lane per task, each run a bar from its first dispatch
//! for its duration, coloured by outcome) and the failure heat-maps (90 days by day, 7 days by
//! hour), drawn as inline SVG on the server.

use std::collections::HashMap;

use chrono::{DateTime, Datelike, Duration, Utc};
use maud::{html, Markup};

use super::layout::millis;
use super::paths::run_href;
use ax_core::run::history::{by_day, by_hour, Span};
use ax_core::run::{RunStatus, TaskId};

const WIDTH: f64 = 720.0;
const LANE: f64 = 18.0;
const LEFT: f64 = 120.0;
const AXIS: f64 = 16.0;

/// Where a bar lies on a strip `width` wide covering `[from, to]`: (x, width), at least 2
/// wide, inside the strip.
pub fn bar_geometry(
    span: (DateTime<Utc>, DateTime<Utc>),
    (from, to): (DateTime<Utc>, DateTime<Utc>),
    width: f64,
) -> (f64, f64) {
    let total = (to - from).num_milliseconds().max(1) as f64;
    let at =
        |t: DateTime<Utc>| ((t - from).num_milliseconds() as f64 / total * width).clamp(0.0, width);
    let (x, end) = (at(span.0), at(span.1));
    let w = (end - x).max(2.0).min(width);
    (x.min(width - w), w)
}

fn outcome_class(status: RunStatus) -> &'static str {
    match status {
        RunStatus::Success => "ok",
        RunStatus::Failed => "bad",
        RunStatus::Missed | RunStatus::Skipped | RunStatus::Cancelled => "idle",
        RunStatus::Pending | RunStatus::Ready | RunStatus::Running => "busy",
    }
}

/// The strip of `spans` over the `hours` hours up to `now`, a lane per task of `lanes`
/// (id, name), in order.
pub fn gantt<'a>(
    spans: impl Iterator<Item = &'a Span>,
    lanes: &[(TaskId, String)],
    now: DateTime<Utc>,
    hours: i64,
) -> Markup {
    let from = now - Duration::hours(hours);
    let lane_of: HashMap<TaskId, usize> = lanes
        .iter()
        .enumerate()
        .map(|(n, (id, _))| (*id, n))
        .collect();
    let plot = WIDTH - LEFT;
    let height = LANE * lanes.len().max(1) as f64 + AXIS;
    let spans: Vec<&Span> = spans.collect();
    html! {
        svg.timeline viewBox=(format!("0 0 {WIDTH} {height}")) role="img" aria-label=(format!("Timeline of {} runs, last {hours} h", spans.len())) {
            @for (n, (_, name)) in lanes.iter().enumerate() {
                text.lane x="2" y=(format!("{:.1}", LANE * n as f64 + 13.0)) { (name) }
            }
            @for step in 0..=4 {
                @let x = LEFT + plot * step as f64 / 4.0;
                @let at = from + Duration::minutes(hours * 60 * step / 4);
                line.axis x1=(format!("{x:.1}")) y1="0" x2=(format!("{x:.1}")) y2=(format!("{:.1}", height - AXIS)) {}
                text.tick x=(format!("{x:.1}")) y=(format!("{:.1}", height - 3.0)) text-anchor=(if step == 0 { "start" } else if step == 4 { "end" } else { "middle" }) { (at.format("%m-%d %H:%M")) }
            }
            @for span in &spans {
                @if let Some(lane) = lane_of.get(&span.task_id) {
                    @let (x, w) = bar_geometry((span.start(), span.end(now)), (from, now), plot);
                    a href=(run_href(&span.request_id.to_string())) {
                        rect class=(format!("run {}", outcome_class(span.status))) data-status=(span.status.as_str())
                            x=(format!("{:.1}", LEFT + x)) y=(format!("{:.1}", LANE * *lane as f64 + 3.0))
                            width=(format!("{w:.1}")) height=(format!("{:.1}", LANE - 6.0)) {
                            title { (span.status.as_str()) ", started " (span.start().format("%Y-%m-%d %H:%M:%S UTC")) ", " (millis((span.end(now) - span.start()).num_milliseconds())) }
                        }
                    }
                }
            }
        }
    }
}

fn level(count: u32, most: u32) -> u32 {
    match count {
        0 => 0,
        _ => (count * 4).div_ceil(most.max(1)).clamp(1, 4),
    }
}

/// Failures per day over `days` days as a calendar (a column per week, a row per weekday)
/// and per hour over the last 7 days (a row per day, a cell per hour), with a legend.
pub fn heatmaps(failures: &[DateTime<Utc>], now: DateTime<Utc>, days: i64) -> Markup {
    let cell = 12.0;
    let daily = by_day(failures, now.date_naive(), days as usize);
    let most_daily = daily.iter().map(|d| d.1).max().unwrap_or(0);
    let first_monday = daily
        .first()
        .map(|d| d.0.week(chrono::Weekday::Mon).first_day());
    let hourly = by_hour(failures, now, 7 * 24);
    let most_hourly = hourly.iter().map(|h| h.1).max().unwrap_or(0);
    let first_hour = hourly.first().map(|h| h.0.date_naive());
    html! {
        h3 { "Failed runs by day, last " (days) " days (UTC)" }
        svg.heatmap.by-day viewBox=(format!("0 0 {} {}", cell * 14.0 + 30.0, cell * 7.0)) role="img" aria-label=(format!("{} failed runs in {days} days", daily.iter().map(|d| d.1).sum::<u32>())) {
            @for (n, day) in ["Mon", "Wed", "Fri", "Sun"].iter().enumerate() {
                text.tick x="0" y=(format!("{:.1}", cell * (n * 2) as f64 + 10.0)) { (day) }
            }
            @for (date, count) in &daily {
                @let week = first_monday.map_or(0, |monday| (*date - monday).num_days() / 7);
                rect class=(format!("cell l{}", level(*count, most_daily))) data-count=(count)
                    x=(format!("{:.1}", 30.0 + cell * week as f64)) y=(format!("{:.1}", cell * date.weekday().num_days_from_monday() as f64))
                    width=(cell - 2.0) height=(cell - 2.0) {
                    title { (date.format("%Y-%m-%d")) ": " (count) " failed" }
                }
            }
        }
        h3 { "Failed runs by hour, last 7 days (UTC)" }
        svg.heatmap.by-hour viewBox=(format!("0 0 {} {}", cell * 24.0 + 44.0, cell * 8.0)) role="img" aria-label=(format!("{} failed runs in 7 days", hourly.iter().map(|h| h.1).sum::<u32>())) {
            @for (at, count) in &hourly {
                @let row = first_hour.map_or(0, |first| (at.date_naive() - first).num_days());
                rect class=(format!("cell l{}", level(*count, most_hourly))) data-count=(count)
                    x=(format!("{:.1}", 44.0 + cell * f64::from(chrono::Timelike::hour(at)))) y=(format!("{:.1}", cell * row as f64))
                    width=(cell - 2.0) height=(cell - 2.0) {
                    title { (at.format("%Y-%m-%d %H:00")) ": " (count) " failed" }
                }
            }
            // 168 hours ending with the current one touch 8 dates: a row per date.
            @for n in 0..8 {
                @if let Some(first) = first_hour {
                    text.tick x="0" y=(format!("{:.1}", cell * n as f64 + 10.0)) { ((first + Duration::days(n)).format("%m-%d")) }
                }
            }
        }
        p.legend {
            "Fewer "
            @for n in 0..=4 { span class=(format!("swatch l{n}")) {} }
            " more failed runs (FAILED: errors, timeouts, upstream failures). Hover a cell for its count."
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn at(secs: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(secs, 0).expect("a time")
    }

    #[test]
    fn a_bar_starts_and_ends_at_its_times() {
        let window = (at(0), at(1_000));
        assert_eq!(
            bar_geometry((at(100), at(600)), window, 100.0),
            (10.0, 50.0)
        );
        // A run of no duration still shows; one before the window is clipped to it.
        assert_eq!(bar_geometry((at(500), at(500)), window, 100.0), (50.0, 2.0));
        assert_eq!(
            bar_geometry((at(-500), at(200)), window, 100.0),
            (0.0, 20.0)
        );
        assert_eq!(
            bar_geometry((at(1_000), at(1_000)), window, 100.0),
            (98.0, 2.0)
        );
    }

    #[test]
    fn levels_scale_to_the_busiest_cell() {
        assert_eq!(
            (level(0, 9), level(1, 9), level(9, 9), level(5, 9)),
            (0, 1, 4, 3)
        );
    }

    proptest! {
        #[test]
        fn bars_stay_inside_the_strip(start in -2_000i64..3_000, length in 0i64..5_000) {
            let (x, w) = bar_geometry((at(start), at(start + length)), (at(0), at(1_000)), 300.0);
            prop_assert!(x >= 0.0 && w >= 2.0 && x + w <= 300.0 + 1e-9);
        }
    }
}
