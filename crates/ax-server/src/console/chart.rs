//! The dashboard's chart: fires per minute over the last hour as bars, with the trigger lag's
//! p50 and p99 as lines, drawn as inline SVG on the server (no chart library, no script).

use chrono::{DateTime, Duration, DurationRound, Utc};
use maud::{html, Markup};

use super::layout::millis;
use ax_core::run::percentile::percentile;

/// Minutes the chart covers.
pub const MINUTES: i64 = 60;

const WIDTH: f64 = 600.0;
const HEIGHT: f64 = 160.0;
/// Room for the labels: left, right, top, bottom.
const PAD: (f64, f64, f64, f64) = (36.0, 44.0, 14.0, 18.0);

/// One minute of the chart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Minute {
    pub start: DateTime<Utc>,
    pub fires: usize,
    /// ax's lag from due to first dispatched, of the minute's dispatched runs.
    pub p50_ms: Option<i64>,
    pub p99_ms: Option<i64>,
}

/// The last [`MINUTES`] whole and current minutes up to `now`, from runs given as (scheduled,
/// ax's lag to the first dispatch in ms).
pub fn per_minute(now: DateTime<Utc>, runs: &[(DateTime<Utc>, Option<i64>)]) -> Vec<Minute> {
    let current = now.duration_trunc(Duration::minutes(1)).unwrap_or(now);
    let first = current - Duration::minutes(MINUTES - 1);
    let mut lags: Vec<Vec<i64>> = vec![Vec::new(); MINUTES as usize];
    let mut fires = vec![0usize; MINUTES as usize];
    for (scheduled, lag) in runs {
        let Ok(index) = usize::try_from((*scheduled - first).num_minutes()) else {
            continue;
        };
        if *scheduled < first || index >= fires.len() {
            continue;
        }
        fires[index] += 1;
        if let Some(lag) = lag {
            lags[index].push(*lag);
        }
    }
    lags.into_iter()
        .zip(fires)
        .enumerate()
        .map(|(n, (mut lags, fires))| {
            lags.sort_unstable();
            Minute {
                start: first + Duration::minutes(n as i64),
                fires,
                p50_ms: percentile(&lags, 50.0),
                p99_ms: percentile(&lags, 99.0),
            }
        })
        .collect()
}

/// The chart, with a text summary for those who cannot see it.
pub fn svg(minutes: &[Minute]) -> Markup {
    let (left, right, top, bottom) = PAD;
    let (plot_w, plot_h) = (WIDTH - left - right, HEIGHT - top - bottom);
    let most_fires = minutes.iter().map(|m| m.fires).max().unwrap_or(0).max(1);
    let most_lag = minutes
        .iter()
        .filter_map(|m| m.p99_ms)
        .max()
        .unwrap_or(0)
        .max(1);
    let slot = plot_w / minutes.len().max(1) as f64;
    let x = |n: usize| left + slot * n as f64;
    let fire_y = |fires: usize| top + plot_h * (1.0 - fires as f64 / most_fires as f64);
    let lag_y = |ms: i64| top + plot_h * (1.0 - ms.max(0) as f64 / most_lag as f64);
    let line = |lag: fn(&Minute) -> Option<i64>| {
        let points: Vec<String> = minutes
            .iter()
            .enumerate()
            .filter_map(|(n, m)| {
                lag(m).map(|ms| format!("{:.1},{:.1}", x(n) + slot / 2.0, lag_y(ms)))
            })
            .collect();
        points.join(" ")
    };
    let total: usize = minutes.iter().map(|m| m.fires).sum();
    let summary = format!(
        "{total} runs in the last hour, at most {most_fires} a minute; trigger lag p99 at most {}.",
        millis(most_lag)
    );
    let label = |at: Option<&Minute>| at.map(|m| m.start.format("%H:%M UTC").to_string());
    html! {
        svg.chart viewBox=(format!("0 0 {WIDTH} {HEIGHT}")) role="img" aria-labelledby="chart-title chart-desc" {
            title #chart-title { "Fires per minute and trigger lag, last hour" }
            desc #chart-desc { (summary) }
            line.axis x1=(left) y1=(top + plot_h) x2=(left + plot_w) y2=(top + plot_h) {}
            @for (n, minute) in minutes.iter().enumerate() {
                @if minute.fires > 0 {
                    rect.bar x=(format!("{:.1}", x(n) + 0.5)) y=(format!("{:.1}", fire_y(minute.fires)))
                        width=(format!("{:.1}", (slot - 1.0).max(0.5)))
                        height=(format!("{:.1}", top + plot_h - fire_y(minute.fires))) {}
                }
            }
            polyline.p50 points=(line(|m| m.p50_ms)) {}
            polyline.p99 points=(line(|m| m.p99_ms)) {}
            text x="2" y=(top + 4.0) { (most_fires) "/min" }
            text x=(WIDTH - 2.0) y=(top + 4.0) text-anchor="end" { (millis(most_lag)) }
            @if let Some(first) = label(minutes.first()) {
                text x=(left) y=(HEIGHT - 4.0) { (first) }
            }
            @if let Some(last) = label(minutes.last()) {
                text x=(left + plot_w) y=(HEIGHT - 4.0) text-anchor="end" { (last) }
            }
        }
        p.muted {
            (summary) " Bars: runs by scheduled minute (left scale). Lines: lag from scheduled to \
             first dispatched, p50 green and p99 amber (right scale)."
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(secs, 0).expect("a time")
    }

    #[test]
    fn runs_fall_in_their_minute_with_lag_percentiles() {
        let now = at(3_600 * 10 + 30);
        let runs = vec![
            (at(3_600 * 10), Some(10)),
            (at(3_600 * 10), Some(30)),
            (at(3_600 * 10), Some(20)),
            (at(3_600 * 10), None),
            (at(3_600 * 10 - 60), Some(1_000)),
            // Before the hour, and after now: left out.
            (at(3_600 * 9 - 1), None),
            (at(3_600 * 11), None),
        ];
        let minutes = per_minute(now, &runs);
        assert_eq!(minutes.len(), 60);
        let current = &minutes[59];
        assert_eq!(current.start, at(3_600 * 10));
        assert_eq!(
            (current.fires, current.p50_ms, current.p99_ms),
            (4, Some(20), Some(30))
        );
        assert_eq!((minutes[58].fires, minutes[58].p50_ms), (1, Some(1_000)));
        assert_eq!(minutes.iter().map(|m| m.fires).sum::<usize>(), 5);
    }

    #[test]
    fn an_empty_hour_draws_an_empty_chart() {
        let chart = svg(&per_minute(at(7_200), &[])).into_string();
        assert!(chart.contains("0 runs in the last hour"));
        assert!(!chart.contains("<rect"));
    }
}
