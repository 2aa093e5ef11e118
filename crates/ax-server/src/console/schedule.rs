//! The schedule ahead (`/console/schedule`): a heat-map of the next day's runs by minute
//! across all tasks, its busiest seconds named with their tasks, and a jitter suggestion.

use std::collections::HashMap;

use actix_web::{web, HttpResponse};
use maud::{html, Markup};

use super::layout::{page, Section};
use super::runs::task_link;
use super::session::Visitor;
use super::{ok, ConsoleError};
use crate::web::ApiState;
use ax_core::run::TaskId;
use ax_core::task::schedule_load::{clock, thousands, Busy, Load};

/// The hours the page shows.
const HOURS: i64 = 24;
/// Tasks named beside a busy second.
const NAMED: usize = 5;

/// `GET /console/schedule`.
pub async fn show(
    state: web::Data<ApiState>,
    visitor: Visitor,
) -> Result<HttpResponse, ConsoleError> {
    let load = state.service.schedule_load(HOURS).await?;
    let ids: Vec<TaskId> = load
        .busiest
        .iter()
        .flat_map(|busy| busy.tasks.iter().take(NAMED).copied())
        .collect();
    let names = state.service.task_names(ids).await?;
    Ok(ok(schedule_page(&visitor, &load, &names)))
}

fn schedule_page(visitor: &Visitor, load: &Load, names: &HashMap<TaskId, String>) -> Markup {
    page(
        visitor,
        "Schedule ahead",
        Some(Section::Schedule),
        html! {
            p.hint {
                (thousands(load.total_runs)) " runs of " (load.tasks) " tasks in the next " (HOURS)
                " h, from " (load.from.format("%Y-%m-%d %H:%M:%SZ").to_string()) ". The same as "
                code { "GET /api/schedule/load?hours=24" } " and " code { "ax plan" } "."
            }
            section aria-labelledby="busiest-heading" {
                h2 #busiest-heading { "Busiest seconds" }
                (busiest(load, names))
                @if let Some(suggestion) = &load.suggestion {
                    p #jitter-suggestion.notice { strong { "Suggestion: " } (suggestion) }
                }
            }
            section aria-labelledby="heatmap-heading" {
                h2 #heatmap-heading { "Runs by minute (UTC)" }
                (heat_map(load))
            }
        },
    )
}

fn busiest(load: &Load, names: &HashMap<TaskId, String>) -> Markup {
    if load.busiest.is_empty() {
        return html! { p.muted { "No task fires in the next " (HOURS) " h." } };
    }
    html! {
        ol #busiest {
            @for busy in &load.busiest {
                li { (busy_line(busy, load.tasks)) (named_tasks(busy, names)) }
            }
        }
    }
}

/// e.g. "00:00:00Z (the top of the hour) — 4,812 runs: 61 % of tasks".
fn busy_line(busy: &Busy, tasks: usize) -> Markup {
    let share = (busy.tasks.len() * 100).checked_div(tasks).unwrap_or(0);
    html! {
        strong { (clock(busy.at)) } " — " (thousands(busy.runs)) " runs: " (share) " % of tasks"
    }
}

fn named_tasks(busy: &Busy, names: &HashMap<TaskId, String>) -> Markup {
    let more = busy.tasks.len().saturating_sub(NAMED);
    html! {
        span.muted {
            " ("
            @for (n, id) in busy.tasks.iter().take(NAMED).enumerate() {
                @if n > 0 { ", " }
                (task_link(*id, names))
            }
            @if more > 0 { " and " (more) " more" }
            ")"
        }
    }
}

const CELL: f64 = 11.0;
const LEFT: f64 = 34.0;
const TOP: f64 = 14.0;

/// 24 rows of hours by 60 minutes, darker for more runs; a table of the hours for those who
/// cannot see it.
fn heat_map(load: &Load) -> Markup {
    let most = load.per_minute.iter().copied().max().unwrap_or(0).max(1);
    let width = LEFT + CELL * 60.0;
    let rows = load.per_minute.len().div_ceil(60);
    let height = TOP + CELL * rows as f64;
    let start = load.from;
    html! {
        svg #schedule-heatmap.heatmap role="img" viewBox=(format!("0 0 {width} {height}"))
            aria-label=(format!("Runs per minute over the next {HOURS} hours; the busiest minute has {most}")) {
            @for minute in (0..60).step_by(10) {
                text x=(LEFT + CELL * minute as f64) y=(TOP - 4.0) font-size="9" { ":" (format!("{minute:02}")) }
            }
            @for (n, runs) in load.per_minute.iter().enumerate() {
                @let (row, col) = (n / 60, n % 60);
                @let at = start + chrono::Duration::minutes(n as i64);
                @if col == 0 {
                    text x="0" y=(TOP + CELL * row as f64 + 9.0) font-size="9" { (at.format("%H:%M").to_string()) }
                }
                rect x=(LEFT + CELL * col as f64) y=(TOP + CELL * row as f64)
                    width=(CELL - 1.0) height=(CELL - 1.0) fill-opacity=(opacity(*runs, most))
                    class="cell" data-runs=(runs) {
                    title { (at.format("%H:%M").to_string()) " — " (thousands(*runs)) " runs" }
                }
            }
        }
        details {
            summary { "Runs by hour" }
            table {
                thead { tr { th scope="col" { "Hour (UTC)" } th.num scope="col" { "Runs" } th.num scope="col" { "Busiest minute" } } }
                tbody {
                    @for (row, hour) in load.per_minute.chunks(60).enumerate() {
                        tr {
                            td { ((start + chrono::Duration::hours(row as i64)).format("%H:%M").to_string()) }
                            td.num { (thousands(hour.iter().sum())) }
                            td.num { (thousands(hour.iter().copied().max().unwrap_or(0))) }
                        }
                    }
                }
            }
        }
    }
}

/// An empty minute is faint; the busiest is solid.
fn opacity(runs: u64, most: u64) -> String {
    if runs == 0 {
        return "0.05".into();
    }
    format!("{:.2}", 0.15 + 0.85 * runs as f64 / most as f64)
}
