//! `ax bench console`: how fast the web console's pages are at size. It seeds a MariaDB
//! database of its own (see [`crate::load::seed`]), starts ax on it in this process, requests each
//! page many times and reports per page the time to the full response: one JSON line on
//! stdout, a table on stderr.
//!
//! ax runs on a clock that starts at the seed's "now", so a reused database looks to it as it
//! did when it was seeded (the last hour still holds the last hour's runs), and its scheduler
//! fires the seeded tasks at their pace, to a mock executor, while the pages are measured.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context as _};
use chrono::{DateTime, Utc};
use diesel::prelude::*;
use diesel_async::RunQueryDsl;
use serde::Serialize;

use crate::load::executor::{Behaviour, MockExecutor};
use crate::load::seed::{self, Seeded, Size};
use crate::measure::report::{round1, round2};
use crate::{Mode, StoreKind};
use ax_core::run::percentile::percentile;
use ax_core::run::RunStatus;
use ax_core::time::clock::Clock;
use ax_core::EXIT_USAGE;
use ax_server::config::Config;
use ax_store::queries::runs::{self, RunFilter};
use ax_store::queries::tasks as task_queries;
use ax_store::rows::schema::ax_task::dsl as t;

/// The pages measured unless `--page` is given: `name=path`, with the placeholders of
/// [`PAGES_HELP`].
pub const DEFAULT_PAGES: &[&str] = &[
    "dashboard=/console",
    "tasks=/console/tasks",
    "tasks-scene=/console/tasks?scene={scene}",
    "tasks-small-scene=/console/tasks?scene={small_scene}",
    "tasks-paused=/console/tasks?status=PAUSED",
    "tasks-search=/console/tasks?q={name}",
    "tasks-last-page=/console/tasks?after={last_after}",
    "tasks-by-name=/console/tasks?sort=name",
    "tasks-by-name-desc=/console/tasks?sort=-name",
    "tasks-by-name-middle=/console/tasks?sort=name&after={name_cursor}",
    "tasks-by-name-previous=/console/tasks?sort=name&before={name_cursor}",
    "tasks-by-scene=/console/tasks?sort=scene",
    "tasks-by-status-desc=/console/tasks?sort=-status",
    "tasks-by-status-middle=/console/tasks?sort=status&after={middle}:ENABLED",
    "tasks-by-next=/console/tasks?sort=next",
    "tasks-by-next-middle=/console/tasks?sort=next&after={next_cursor}",
    "tasks-by-next-desc-previous=/console/tasks?sort=-next&before={next_cursor}",
    "tasks-scene-by-next=/console/tasks?scene={scene}&sort=next",
    "tasks-search-by-next=/console/tasks?q={name}&sort=-next",
    "task=/console/tasks/{task}",
    "task-new=/console/tasks/new?scene={scene}",
    "task-edit=/console/tasks/{task}/edit",
    "task-delete=/console/tasks/{task}/delete",
    "runs=/console/runs",
    "runs-page-2=/console/runs?cursor={cursor}",
    "runs-task=/console/runs?task={task}",
    "runs-scene=/console/runs?scene={scene}",
    "runs-small-scene=/console/runs?scene={small_scene}",
    "runs-failed=/console/runs?status=FAILED",
    "runs-running=/console/runs?status=RUNNING",
    "runs-range=/console/runs?from={from}&to={to}",
    "runs-task-failed=/console/runs?task={task}&status=FAILED",
    "runs-scene-failed-range=/console/runs?scene={scene}&status=FAILED&from={from}&to={to}",
    "runs-task-name=/console/runs?task={name}",
    "runs-statuses=/console/runs?status=FAILED&status=RUNNING",
    "run=/console/runs/{request}",
    "run-cancel=/console/runs/{request}/cancel",
    "scenes=/console/scenes",
    "scene=/console/scenes/{scene}",
    "scene-small=/console/scenes/{small_scene}",
    "scene-pause=/console/scenes/pause?scene={scene}",
    "alerts=/console/alerts",
    "executors=/console/executors",
    "schedule=/console/schedule",
    "search-run-prefix=/console/search?q={request_start}",
    "search-tasks=/console/search?q={name}",
    "schedule-load=/api/schedule/load?hours=24",
    "audit=/console/audit",
];

/// `ax bench console --help`: the pages and their placeholders.
pub const PAGES_HELP: &str = "\
Pages: --page NAME=PATH, repeated, replaces the default list (below). PATH may hold:
  {task}         the seeded task with the most runs
  {scene}        the largest scene; {small_scene} the smallest
  {name}         a task name to search for (q=)
  {request}      the request id of the latest failed run
  {request_start} its first 8 characters (the runs made in the same 65 s)
  {from} {to}    an hour of ten days ago (UTC, YYYY-MM-DDTHH:MM)
  {last_after}   the task id after which the last page of tasks starts
  {middle}       the id of the task in the middle
  {name_cursor}  a cursor in the middle of the tasks sorted by name (id:name)
  {next_cursor}  a cursor in the middle of the tasks sorted by next run (id:Unix ms)
  {cursor}       the cursor of the second page of /console/runs
Default pages:
  dashboard, tasks (all, a scene, the smallest scene, paused, a name search, the last page;
  sorted by name, scene, status and next run, first pages, pages from the middle both ways),
  task (its page, the editor new and edit, the delete confirmation), runs (all, second page,
  by task, by scene, smallest scene, FAILED, RUNNING, a time range, task+FAILED,
  scene+FAILED+range, by task name, two statuses), run (its page, the cancel confirmation),
  scenes (the list, the largest and smallest scene's page, the pause confirmation), alerts,
  executors, schedule (the page and GET /api/schedule/load?hours=24), audit.
The report: one JSON line on stdout (snake_case keys: the size, seed_secs (null when reused),
budget_ms, and per page name, path, p50_ms, p95_ms, max_ms, bytes, within_budget), a table on
stderr. The database is kept for --reuse; drop it with DROP DATABASE when done.";

/// Options of `ax bench console`.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// Tasks to seed.
    #[arg(long, default_value_t = 100_000, value_parser = clap::value_parser!(u32).range(10..=1_000_000))]
    pub tasks: u32,
    /// Runs to seed, over the last 30 days.
    #[arg(long, default_value_t = 5_000_000, value_parser = clap::value_parser!(u64).range(0..=100_000_000))]
    pub runs: u64,
    /// Scenes the tasks are spread over (unevenly).
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub scenes: u32,
    /// Audit log entries to seed.
    #[arg(long, default_value_t = 10_000, value_parser = clap::value_parser!(u32).range(0..=10_000_000))]
    pub audit: u32,
    /// The store: MariaDB, or PostgreSQL (seeded on MariaDB, whose Sequence engine makes the
    /// runs, then copied as `ax copy` does, into a database of the same name).
    #[arg(long, value_enum, default_value_t = StoreKind::Mysql)]
    pub store: StoreKind,
    /// The database the bench seeds (dropped first) and keeps: on 127.0.0.1:3306, and with
    /// --store postgres also on 127.0.0.1:5432.
    #[arg(long, default_value = "ax_console_bench", value_parser = parse_database)]
    pub database: String,
    /// Keep the database if it holds a seed of this size (ax's pending migrations are applied
    /// to it); seed it afresh otherwise.
    #[arg(long)]
    pub reuse: bool,
    /// Timed requests per page, after the warm-up.
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub requests: u32,
    /// Untimed requests per page first.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(0..=1_000))]
    pub warmup: u32,
    /// The budget of a page's p95, in ms.
    #[arg(long, default_value_t = 200)]
    pub budget_ms: u64,
    /// A page to measure, NAME=PATH (repeatable; replaces the default list, see below).
    #[arg(long = "page", value_parser = parse_page)]
    pub pages: Vec<PageSpec>,
}

/// A page to measure: its name in the report and its path with placeholders.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PageSpec {
    pub name: String,
    pub path: String,
}

fn parse_page(text: &str) -> Result<PageSpec, String> {
    let (name, path) = text
        .split_once('=')
        .ok_or_else(|| format!("`{text}` is not NAME=PATH"))?;
    if name.is_empty() || !path.starts_with('/') {
        return Err(format!("`{text}`: a name, `=`, and a path starting with /"));
    }
    Ok(PageSpec {
        name: name.into(),
        path: path.into(),
    })
}

fn parse_database(text: &str) -> Result<String, String> {
    let valid = (1..=64).contains(&text.len())
        && text
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    match valid {
        true => Ok(text.into()),
        false => Err("1-64 of a-z 0-9 _".into()),
    }
}

impl Args {
    fn size(&self) -> Size {
        Size {
            tasks: self.tasks,
            runs: self.runs,
            scenes: self.scenes,
            audit: self.audit,
        }
    }

    fn check(&self) -> Result<(), String> {
        if !self.store.is_shared() {
            return Err(
                "the console bench runs on MariaDB or PostgreSQL: --store mysql or \
                        postgres"
                    .into(),
            );
        }
        seed::check(&self.size())
    }

    fn pages(&self) -> Vec<PageSpec> {
        match self.pages.is_empty() {
            true => DEFAULT_PAGES
                .iter()
                .map(|spec| parse_page(spec).expect("the default pages are NAME=PATH"))
                .collect(),
            false => self.pages.clone(),
        }
    }
}

/// Redis for the bench's ax: a database number of its own, so its locks (by task id) and its
/// membership never meet those of other ax processes on the same Redis.
const REDIS_URL: &str = "redis://127.0.0.1:6379/15";
/// The longest one request may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(120);

/// Runs `ax bench console`: 0 when every page was measured (whatever the figures), 2 for bad
/// arguments, 1 when the set-up failed or a page did not answer 200.
pub fn run(args: Args) -> ExitCode {
    if let Err(message) = args.check() {
        eprintln!("ax bench console: {message}");
        return ExitCode::from(EXIT_USAGE);
    }
    match actix_rt::System::new().block_on(bench(&args)) {
        Ok(report) => {
            eprint!("{}", report.table());
            println!(
                "{}",
                serde_json::to_string(&report).unwrap_or_else(|err| format!("{err}"))
            );
            ExitCode::SUCCESS
        }
        Err(err) => {
            eprintln!("ax bench console: {err:#}");
            ExitCode::FAILURE
        }
    }
}

/// ax's clock: the wall clock, moved back to the seed's time.
struct SeedClock {
    behind: chrono::Duration,
}

impl Clock for SeedClock {
    fn now(&self) -> DateTime<Utc> {
        Utc::now() - self.behind
    }
}

async fn bench(args: &Args) -> anyhow::Result<Report> {
    let size = args.size();
    let mut seeded = seed::prepare(&args.database, size, args.reuse).await?;
    if args.store == StoreKind::Postgres {
        seeded = seed::onto_postgres(seeded, &args.database).await?;
    }
    let executor = MockExecutor::start(
        Behaviour {
            mode: Mode::Sync,
            fail_rate: 0.0,
            delay: Duration::from_millis(1),
        },
        1,
    )?;
    point_tasks_at(&seeded, &executor.url).await?;
    let mut config = Config::default();
    config.store.url = seeded.url.clone();
    // The seeded history stays whole while it is measured.
    config.store.retention_days = 3650;
    config.redis.url = Some(REDIS_URL.into());
    config.server.port = 0;
    config.server.bind = Some("127.0.0.1".into());
    config.server.instance_id = Some("ax-console-bench".into());
    // Its clock is the seed's, behind the database's on purpose: checked against it, ax would
    // fire nothing while the pages are measured.
    config.cluster.max_clock_skew_ms = 0;
    let clock = Arc::new(SeedClock {
        behind: Utc::now() - seeded.seeded_at,
    });
    let ax = ax_server::app::start(&config, clock)
        .await
        .map_err(|err| anyhow!("cannot start ax: {err}"))?;
    let base = format!("http://{}", ax.addr());
    let measured = measure_pages(args, &seeded, &base).await;
    ax.shutdown().await;
    executor.stop().await;
    let pages = measured?;
    Ok(Report {
        tasks: size.tasks,
        runs: size.runs,
        scenes: size.scenes,
        audit: size.audit,
        database: args.database.clone(),
        seed_secs: seeded.seed_secs.map(round1),
        requests: args.requests,
        budget_ms: args.budget_ms,
        all_within_budget: pages.iter().all(|page| page.within_budget),
        pages,
    })
}

/// Points every seeded task at this bench's executor, so what ax fires meanwhile succeeds.
async fn point_tasks_at(seeded: &Seeded, url: &str) -> anyhow::Result<()> {
    let mut conn = seeded.db.conn().await?;
    ax_store::with_conn!(&mut conn, |c| diesel::update(t::ax_task)
        .set(t::handler_url.eq(url))
        .execute(c)
        .await)
    .context("cannot point the tasks at the executor")?;
    Ok(())
}

async fn measure_pages(
    args: &Args,
    seeded: &Seeded,
    base: &str,
) -> anyhow::Result<Vec<PageResult>> {
    let client = awc::Client::builder().timeout(REQUEST_TIMEOUT).finish();
    let mut values = placeholders(args, seeded).await?;
    let (_, runs_page) = fetch(&client, &format!("{base}/console/runs")).await?;
    let cursor = next_cursor(&runs_page).unwrap_or_default();
    values.push(("cursor", cursor));
    let mut results = Vec::new();
    for spec in args.pages() {
        let path = fill(&spec.path, &values);
        let url = format!("{base}{path}");
        for _ in 0..args.warmup {
            fetch(&client, &url).await?;
        }
        let mut times = Vec::with_capacity(args.requests as usize);
        let mut bytes = 0;
        for _ in 0..args.requests {
            let started = Instant::now();
            let (status, body) = fetch(&client, &url).await?;
            times.push(started.elapsed().as_secs_f64() * 1000.0);
            if status != 200 {
                bail!("{} ({path}) answered {status}", spec.name);
            }
            bytes = body.len();
        }
        times.sort_by(f64::total_cmp);
        let p95 = percentile(&times, 95.0).unwrap_or_default();
        let result = PageResult {
            name: spec.name.clone(),
            path,
            p50_ms: round2(percentile(&times, 50.0).unwrap_or_default()),
            p95_ms: round2(p95),
            max_ms: round2(times.last().copied().unwrap_or_default()),
            bytes,
            within_budget: p95 <= args.budget_ms as f64,
        };
        log::info!(
            "console bench: {} p50 {} ms, p95 {} ms",
            result.name,
            result.p50_ms,
            result.p95_ms
        );
        results.push(result);
    }
    Ok(results)
}

/// GETs `url`: its status and its whole body.
async fn fetch(client: &awc::Client, url: &str) -> anyhow::Result<(u16, String)> {
    // awc's errors are not `Send`: keep their text only.
    let mut response = client
        .get(url)
        .send()
        .await
        .map_err(|err| anyhow!("GET {url}: {err}"))?;
    let body = response
        .body()
        .limit(64 << 20)
        .await
        .map_err(|err| anyhow!("GET {url}: reading the page: {err}"))?;
    Ok((
        response.status().as_u16(),
        String::from_utf8_lossy(&body).into_owned(),
    ))
}

/// The cursor of a runs page's "next" link.
fn next_cursor(page: &str) -> Option<String> {
    let at = page.find("cursor=")? + "cursor=".len();
    let rest = &page[at..];
    let end = rest.find(['"', '&'])?;
    Some(rest[..end].to_string())
}

/// `path` with each `{key}` replaced by its value.
fn fill(path: &str, values: &[(&str, String)]) -> String {
    values.iter().fold(path.to_string(), |path, (key, value)| {
        path.replace(&format!("{{{key}}}"), value)
    })
}

/// The values of the placeholders but `{cursor}`, read from the seeded database with ax's own
/// queries.
async fn placeholders(args: &Args, seeded: &Seeded) -> anyhow::Result<Vec<(&'static str, String)>> {
    let mut conn = seeded.db.conn().await?;
    let mut scenes: std::collections::HashMap<String, i64> = Default::default();
    for (scene, _, count) in task_queries::scene_counts(&mut conn).await? {
        *scenes.entry(scene).or_default() += count;
    }
    let largest = scenes
        .iter()
        .max_by_key(|(scene, n)| (**n, (*scene).clone()));
    let smallest = scenes
        .iter()
        .min_by_key(|(scene, n)| (**n, (*scene).clone()));
    let (Some((scene, _)), Some((small_scene, _))) = (largest, smallest) else {
        bail!("the seeded database has no tasks");
    };
    let failed = RunFilter {
        statuses: vec![RunStatus::Failed],
        ..RunFilter::default()
    };
    let request = runs::history(&mut conn, &failed, None, 1)
        .await?
        .into_iter()
        .next()
        .map(|run| run.request_id.to_string())
        .unwrap_or_default();
    let from = seeded.seeded_at - chrono::Duration::days(10);
    let minute = |at: DateTime<Utc>| at.format("%Y-%m-%dT%H:%M").to_string();
    let middle = u64::from(args.tasks) / 2;
    Ok(vec![
        // The seed's first task is of its busiest class (every 15 minutes).
        ("task", "1".to_string()),
        ("scene", scene.clone()),
        ("small_scene", small_scene.clone()),
        ("name", seed::task_name(u64::from(args.tasks) / 2)),
        ("request_start", request.chars().take(8).collect()),
        ("request", request),
        ("from", minute(from)),
        ("to", minute(from + chrono::Duration::hours(1))),
        (
            "last_after",
            (i64::from(args.tasks) - 50).max(0).to_string(),
        ),
        ("middle", middle.to_string()),
        (
            "name_cursor",
            format!("{middle}:{}", seed::task_name(middle)),
        ),
        (
            "next_cursor",
            format!(
                "{middle}:{}",
                (seeded.seeded_at + chrono::Duration::minutes(30)).timestamp_millis()
            ),
        ),
    ])
}

/// The figures of one page.
#[derive(Debug, Clone, Serialize)]
struct PageResult {
    name: String,
    path: String,
    p50_ms: f64,
    p95_ms: f64,
    max_ms: f64,
    /// The size of the page.
    bytes: usize,
    within_budget: bool,
}

/// The report line.
#[derive(Debug, Clone, Serialize)]
struct Report {
    tasks: u32,
    runs: u64,
    scenes: u32,
    audit: u32,
    database: String,
    seed_secs: Option<f64>,
    requests: u32,
    budget_ms: u64,
    all_within_budget: bool,
    pages: Vec<PageResult>,
}

impl Report {
    /// The figures as a table for people.
    fn table(&self) -> String {
        let mut out = format!(
            "{:<26} {:>9} {:>9} {:>9} {:>9}  ≤ {} ms\n",
            "page", "p50 ms", "p95 ms", "max ms", "KB", self.budget_ms
        );
        for page in &self.pages {
            out.push_str(&format!(
                "{:<26} {:>9.1} {:>9.1} {:>9.1} {:>9.1}  {}\n",
                page.name,
                page.p50_ms,
                page.p95_ms,
                page.max_ms,
                page.bytes as f64 / 1024.0,
                if page.within_budget { "yes" } else { "NO" }
            ));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_are_filled() {
        let values = vec![("task", "7".to_string()), ("scene", "etl-1".to_string())];
        assert_eq!(
            fill("/console/runs?task={task}&scene={scene}", &values),
            "/console/runs?task=7&scene=etl-1"
        );
    }

    #[test]
    fn the_next_cursor_is_read_from_the_runs_page() {
        let page =
            r#"<a href="/console/runs?status=FAILED&amp;cursor=1700000000000.42" rel="next">"#;
        assert_eq!(next_cursor(page).as_deref(), Some("1700000000000.42"));
        assert_eq!(next_cursor("<p>no link</p>"), None);
    }

    #[test]
    fn pages_are_name_and_path() {
        assert!(parse_page("tasks=/console/tasks").is_ok());
        assert!(parse_page("/console/tasks").is_err());
        assert!(parse_page("x=console").is_err());
        for spec in DEFAULT_PAGES {
            assert!(parse_page(spec).is_ok(), "{spec}");
        }
    }
}
