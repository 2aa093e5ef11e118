//! The `ax` command: CLI wiring only.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use chrono::{DateTime, SecondsFormat, Utc};
use clap::{Parser, Subcommand};

use ax_client::{
    AlertsCommand, AuditCommand, CalendarsCommand, CheckArgs, ClientError, Connection,
    ExecutorsCommand, GlobalArgs, RunsCommand, ScenesCommand, TasksCommand,
};
use ax_core::time::clock::SystemClock;
use ax_core::EXIT_USAGE;
use ax_cron::{CronSchedule, Zone};
use ax_server::config::Config;

/// A fast allocator: firing and dispatching allocate many small, short-lived buffers.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// `ax --version`: the version and the commit it was built from (see build.rs).
const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("AX_GIT_COMMIT"),
    ")"
);

#[derive(Parser)]
#[command(
    name = "ax",
    version = VERSION,
    about = "ax (Action eXecutor): a distributed cron scheduler"
)]
struct Cli {
    /// `--url`, `--token`, `-o`: taken before or after the subcommand.
    #[command(flatten)]
    global: GlobalArgs,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the scheduler and the HTTP API (applies migrations first).
    Serve {
        /// Config file (default: config/ax.yaml if present, else built-in defaults).
        #[arg(long)]
        config: Option<PathBuf>,
        /// HTTP port (server.port, AX_PORT; default 8901).
        // Text, checked with the config: a bad port is refused in the key's words.
        #[arg(long)]
        port: Option<String>,
        /// Listen address (server.bind, AX_BIND; default 127.0.0.1, or 0.0.0.0 with an admin
        /// token).
        #[arg(long)]
        bind: Option<String>,
        /// Store URL: sqlite://PATH, mysql://user:pass@host:port/db or
        /// postgres://user:pass@host:port/db (store.url, AX_STORE_URL; default
        /// sqlite://./data/ax.db).
        #[arg(long)]
        store: Option<String>,
    },
    /// Apply pending database migrations, say which, and exit.
    Migrate {
        #[arg(long)]
        config: Option<PathBuf>,
        /// Store URL (store.url, AX_STORE_URL).
        #[arg(long)]
        store: Option<String>,
    },
    /// Copy a deployment from one store to another (any backends): tasks, scenes, executor
    /// groups, the audit log, and the runs of the last --runs-days days with their attempts,
    /// logs and alerts; prints a count of each. The target must be empty (or hold an
    /// unfinished copy of the same source, which a re-run completes). Stop ax first.
    Copy {
        /// The source's store URL (sqlite://, mysql:// or postgres://).
        #[arg(long)]
        from: String,
        /// The target's store URL; its schema is made if it has none.
        #[arg(long)]
        to: String,
        /// Copy the runs scheduled in this many days before now (0: no runs).
        #[arg(long, default_value_t = 30)]
        runs_days: u32,
    },
    /// Load-test ax: a mock executor, ax child processes, tasks, one JSON line of figures;
    /// `ax bench console` times the web console's pages on a seeded database.
    #[command(after_long_help = ax_bench::FIELDS_HELP)]
    Bench(ax_bench::Command),
    /// Tasks through the HTTP API: list, get, create, edit, delete, pause, resume, trigger,
    /// backfill; a task is named by its id or SCENE/NAME.
    Tasks {
        #[command(subcommand)]
        command: TasksCommand,
    },
    /// Runs through the HTTP API: list (by task, scene, status, time), get, cancel, logs.
    Runs {
        #[command(subcommand)]
        command: RunsCommand,
    },
    /// Scenes through the HTTP API: list, pause, resume.
    Scenes {
        #[command(subcommand)]
        command: ScenesCommand,
    },
    /// The audit log through the HTTP API: who changed what and when.
    Audit {
        #[command(subcommand)]
        command: AuditCommand,
    },
    /// The live ax processes of the cluster.
    Cluster,
    /// Alerts through the HTTP API: list (by task and status), send a test alert.
    Alerts {
        #[command(subcommand)]
        command: AlertsCommand,
    },
    /// Executor groups through the HTTP API: list, get, apply a file of groups; and `check`, an
    /// executor tried against the executor protocol (`ax executor check URL`).
    #[command(visible_alias = "executor")]
    Executors {
        #[command(subcommand)]
        command: ExecutorsAction,
    },
    /// Calendars of days off through the HTTP API: list, get, put a file, delete, import an
    /// iCalendar (.ics) holiday calendar.
    Calendars {
        #[command(subcommand)]
        command: CalendarsCommand,
    },
    /// Apply a file of tasks (YAML or JSON, the API's task shape), matched by scene and name:
    /// prints `+ created`, `~ changed (fields)`, `- deleted` (with --prune: the tasks of the
    /// file's scenes it does not have). Its `executors:` groups and `calendars:` are written
    /// first, and never deleted.
    Apply {
        /// The file.
        #[arg(short = 'f', long = "file")]
        file: PathBuf,
        /// Print what would change; change nothing.
        #[arg(long)]
        dry_run: bool,
        /// Delete the tasks of the file's scenes that the file does not list (asks first).
        #[arg(long)]
        prune: bool,
        /// Delete without asking (needed with --prune when stdin is not a terminal).
        #[arg(long)]
        yes: bool,
    },
    /// Print what `ax apply -f FILE` would change, without the count. Exit status: 0 no
    /// difference, 1 differences, 2 a bad file or option, 3 the server refused or could not be
    /// reached.
    Diff {
        /// The file.
        #[arg(short = 'f', long = "file")]
        file: PathBuf,
        /// Count the tasks of the file's scenes that it does not list as differences (deletes).
        #[arg(long)]
        prune: bool,
    },
    /// Print the tasks (of one scene) as a file `ax apply` takes (YAML; JSON with --json).
    Export {
        #[arg(long)]
        scene: Option<String>,
    },
    /// The schedule ahead across all tasks: the busiest seconds of the next hours with their
    /// run counts, and a jitter suggestion (the API's `GET /api/schedule/load`).
    Plan {
        /// The window, in hours (1-168).
        #[arg(long, default_value_t = 24, value_parser = clap::value_parser!(i64).range(1..=168))]
        hours: i64,
    },
    /// Print a completion script for a shell (`ax completion bash > /etc/bash_completion.d/ax`).
    Completion {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Cron expression tools.
    Cron {
        #[command(subcommand)]
        command: CronCommand,
    },
}

#[derive(Subcommand)]
enum ExecutorsAction {
    #[command(flatten)]
    Show(ExecutorsCommand),
    /// Create or replace the groups of a file (YAML or JSON): a list of `{name, routing?,
    /// maxInFlight?, members?}`, or `{executors: [...]}`; prints `+ NAME (created)` or
    /// `~ NAME (replaced)` for each.
    Apply {
        /// The file.
        #[arg(short = 'f', long = "file")]
        file: PathBuf,
    },
    /// Send an executor a handful of test dispatches (signed, repeated, forged, stale) and say
    /// what conforms to the executor protocol (docs/protocol.md): exit 0 when all does, 1 when
    /// something does not. The dispatches run its handler for real: point it at a test one.
    Check(CheckArgs),
}

#[derive(Subcommand)]
enum CronCommand {
    /// Print the next fire times of an expression, one per line, RFC3339 (UTC, or local time
    /// with its offset with --tz).
    Next {
        /// 6 fields `sec min hour day month weekday` (or 5, seconds = 0), or a macro.
        expr: String,
        /// Start (exclusive), RFC3339; default now.
        #[arg(long)]
        from: Option<String>,
        /// How many times to print.
        #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=100_000))]
        count: u32,
        /// Match the fields in this IANA time zone (e.g. Europe/Berlin); default UTC.
        #[arg(long)]
        tz: Option<String>,
        /// Leave out or move the fires on the days off of these calendars (names, by commas),
        /// as the server at --url holds them; a moved fire says from which day.
        #[arg(long, value_delimiter = ',')]
        calendar: Vec<String>,
        /// What a fire on a day off does: SKIP (the default), PREVIOUS_OPEN_DAY or
        /// NEXT_OPEN_DAY.
        #[arg(long, requires = "calendar")]
        policy: Option<String>,
    },
}

fn main() -> ExitCode {
    let Cli { global, command } = cli();
    // `migrate` prints what it applied, `executor check` its table: their logs would say it twice.
    let level = match command {
        Command::Migrate { .. } | Command::Executors { .. } => "warn",
        _ => "info",
    };
    // Log times in the one form ax shows people: RFC 3339, UTC, milliseconds.
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or(level))
        .format_timestamp_millis()
        .init();
    match command {
        Command::Serve {
            config,
            port,
            bind,
            store,
        } => {
            let flags = [
                ("--port", "server.port", port),
                ("--bind", "server.bind", bind),
                ("--store", "store.url", store),
            ];
            with_config(config, flags, serve)
        }
        Command::Migrate { config, store } => {
            with_config(config, [("--store", "store.url", store)], migrate)
        }
        Command::Copy {
            from,
            to,
            runs_days,
        } => copy(&from, &to, runs_days),
        Command::Bench(command) => ax_bench::main(command),
        Command::Tasks { command } => api(global, |conn| ax_client::tasks(conn, command)),
        Command::Runs { command } => api(global, |conn| ax_client::runs(conn, command)),
        Command::Scenes { command } => api(global, |conn| ax_client::scenes(conn, command)),
        Command::Audit { command } => api(global, |conn| ax_client::audit(conn, command)),
        Command::Cluster => api(global, ax_client::cluster),
        Command::Alerts { command } => api(global, |conn| ax_client::alerts(conn, command)),
        Command::Executors {
            command: ExecutorsAction::Show(command),
        } => api(global, |conn| ax_client::executors(conn, command)),
        Command::Executors {
            command: ExecutorsAction::Check(args),
        } => api(global, |conn| ax_client::check_executor(conn, args)),
        Command::Executors {
            command: ExecutorsAction::Apply { file },
        } => api(global, |conn| ax_client::apply::apply_groups(conn, &file)),
        Command::Calendars { command } => api(global, |conn| ax_client::calendars(conn, command)),
        Command::Apply {
            file,
            dry_run,
            prune,
            yes,
        } => {
            let options = ax_client::apply::ApplyOptions {
                dry_run,
                prune,
                yes,
            };
            api(global, |conn| ax_client::apply::apply(conn, &file, options))
        }
        Command::Diff { file, prune } => {
            api(global, |conn| ax_client::apply::diff(conn, &file, prune))
        }
        Command::Export { scene } => api(global, |conn| ax_client::apply::export(conn, scene)),
        Command::Plan { hours } => api(global, |conn| ax_client::plan(conn, hours)),
        Command::Completion { shell } => {
            clap_complete::generate(shell, &mut definition(), "ax", &mut std::io::stdout());
            ExitCode::SUCCESS
        }
        Command::Cron {
            command:
                CronCommand::Next {
                    expr,
                    from,
                    count,
                    tz,
                    calendar,
                    policy,
                },
        } => match calendar.is_empty() {
            true => cron_next(&expr, from.as_deref(), count, tz.as_deref()),
            // The calendars are the server's: the preview is asked of it.
            false if count > 100 => {
                eprintln!("ax: --count is at most 100 with --calendar");
                ExitCode::from(EXIT_USAGE)
            }
            false => {
                let asked = ax_client::CronNext {
                    expr,
                    from,
                    count,
                    tz,
                    calendars: calendar,
                    policy,
                };
                api(global, |conn| ax_client::cron_next(conn, asked))
            }
        },
    }
}

/// Runs an API command on the connection the global flags describe (a bad one is a usage
/// error).
fn api(global: GlobalArgs, run: impl FnOnce(Connection) -> ExitCode) -> ExitCode {
    match global.connection() {
        Ok(conn) => run(conn),
        Err(err) => ax_client::exit_with(Err::<(), ClientError>(err)),
    }
}

/// The command line, with the environment variables listed in the help of the commands that
/// read them.
fn cli() -> Cli {
    use clap::FromArgMatches;
    Cli::from_arg_matches(&definition().get_matches()).unwrap_or_else(|err| err.exit())
}

/// The command's definition, with the environment variables listed in the help of the
/// commands that read them.
fn definition() -> clap::Command {
    use clap::CommandFactory;
    let env = Config::env_help();
    Cli::command()
        .mut_subcommand("serve", |c| c.after_help(env.clone()))
        .mut_subcommand("migrate", |c| c.after_help(env))
}

/// Loads the config, with the flags given over it, and runs `run` on it.
fn with_config<const N: usize>(
    path: Option<PathBuf>,
    flags: [(&'static str, &'static str, Option<String>); N],
    run: fn(Config) -> ExitCode,
) -> ExitCode {
    let flags = flags
        .into_iter()
        .filter_map(|(flag, key, value)| Some((flag, key, value?)))
        .collect();
    match Config::load_with(path.as_deref(), flags) {
        Ok(config) => run(config),
        Err(err) => {
            eprintln!("ax: {err}");
            ExitCode::from(EXIT_USAGE)
        }
    }
}

fn serve(config: Config) -> ExitCode {
    actix_rt::System::new().block_on(async move {
        // Watched before anything starts: the port is taken first, and a SIGTERM that comes
        // while ax starts must stop it cleanly once it has, not kill it half-way.
        let stop = stop_signal();
        let ax = match ax_server::app::start(&config, Arc::new(SystemClock)).await {
            Ok(ax) => ax,
            Err(err) => {
                // The one line that says why: not logged as well, so it is not said twice.
                eprintln!("ax: cannot start: {err}");
                return if err.is_setting() {
                    ExitCode::from(EXIT_USAGE)
                } else {
                    ExitCode::FAILURE
                };
            }
        };
        stop.await;
        ax.shutdown().await;
        ExitCode::SUCCESS
    })
}

/// SIGINT or SIGTERM, watched from this call on (one that comes before the future is awaited
/// ends it at once).
fn stop_signal() -> impl std::future::Future<Output = ()> {
    use tokio::signal::unix::{signal, SignalKind};
    let watched = signal(SignalKind::terminate()).and_then(|term| {
        let int = signal(SignalKind::interrupt())?;
        Ok((term, int))
    });
    async move {
        match watched {
            Ok((mut term, mut int)) => tokio::select! {
                _ = int.recv() => log::info!("SIGINT received"),
                _ = term.recv() => log::info!("SIGTERM received"),
            },
            Err(err) => {
                log::warn!("cannot watch SIGTERM ({err}); stop with Ctrl-C");
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
}

fn migrate(config: Config) -> ExitCode {
    let result = actix_rt::System::new().block_on(async {
        let url = ax_store::StoreUrl::parse(&config.store.url)?;
        ax_store::run_migrations(url).await
    });
    match result {
        Ok(applied) => {
            let store = ax_store::redacted(&config.store.url);
            for name in &applied {
                println!("applied migration {name}");
            }
            match applied.len() {
                0 => println!("no migrations pending: {store} is up to date"),
                n => println!("{n} migrations applied to {store}"),
            }
            ExitCode::SUCCESS
        }
        Err(err) => {
            eprintln!("ax: {err}");
            ExitCode::FAILURE
        }
    }
}

fn copy(from: &str, to: &str, runs_days: u32) -> ExitCode {
    for (flag, url) in [("--from", from), ("--to", to)] {
        if let Err(err) = ax_store::StoreUrl::parse(url) {
            eprintln!("ax: invalid {flag}: {err}");
            return ExitCode::from(EXIT_USAGE);
        }
    }
    if ax_store::redacted(from) == ax_store::redacted(to) {
        eprintln!("ax: invalid --to: it is the same store as --from");
        return ExitCode::from(EXIT_USAGE);
    }
    let since = Utc::now() - chrono::Duration::days(i64::from(runs_days));
    let source = ax_store::redacted(from);
    let result = actix_rt::System::new().block_on(async {
        let source_db = ax_store::Db::connect(from, 2).await?;
        let target_db = ax_store::Db::connect(to, 2).await?;
        ax_store::copy::copy((&source_db, &source), &target_db, since).await
    });
    match result {
        Ok(counts) => {
            let target = ax_store::redacted(to);
            println!("copied {source} to {target} (runs scheduled since {since}):");
            for (kind, count) in counts.listed() {
                println!("  {kind:<13} {count}");
            }
            ExitCode::SUCCESS
        }
        Err(err) => {
            eprintln!("ax: {err}");
            ExitCode::FAILURE
        }
    }
}

fn cron_next(expr: &str, from: Option<&str>, count: u32, tz: Option<&str>) -> ExitCode {
    let schedule = match CronSchedule::parse(expr) {
        Ok(schedule) => schedule,
        Err(err) => {
            eprintln!("ax: invalid cron expression `{expr}`: {err}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let schedule = match tz.map(Zone::parse) {
        None => schedule,
        Some(Ok(zone)) => schedule.in_zone(zone),
        Some(Err(err)) => {
            eprintln!("ax: invalid --tz: {err}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let at = match from.map(DateTime::parse_from_rfc3339) {
        None => Utc::now(),
        Some(Ok(from)) => from.with_timezone(&Utc),
        Some(Err(err)) => {
            eprintln!("ax: invalid --from (expected RFC3339, e.g. 2027-02-03T04:05:06Z): {err}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let mut out = String::new();
    for fire in schedule.upcoming(at, count as usize) {
        // Without --tz, the UTC form with `Z`, exactly as before zones existed.
        let line = match tz {
            None => fire.utc.to_rfc3339_opts(SecondsFormat::Secs, true),
            Some(_) => fire.local.to_rfc3339_opts(SecondsFormat::Secs, false),
        };
        out.push_str(&line);
        out.push('\n');
    }
    print!("{out}");
    ExitCode::SUCCESS
}
