//! The `ax` command: CLI wiring only.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use chrono::{DateTime, SecondsFormat, Utc};
use clap::{Parser, Subcommand};

use ax::client::{AlertsCommand, Connection, ExecutorsCommand, RunsCommand, TasksCommand};
use ax::clock::SystemClock;
use ax::config::Config;
use ax::cron::{CronSchedule, Zone};
use ax::EXIT_USAGE;

/// A fast allocator: firing and dispatching allocate many small, short-lived buffers.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(
    name = "ax",
    version,
    about = "ax (Action eXecutor): a distributed cron scheduler"
)]
struct Cli {
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
        /// Store URL: sqlite://PATH or mysql://user:pass@host:port/db (store.url,
        /// AX_STORE_URL; default sqlite://./data/ax.db).
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
    /// Load-test ax: a mock executor, ax child processes, tasks, one JSON line of figures;
    /// `ax bench console` times the web console's pages on a seeded database.
    #[command(after_long_help = ax::bench::FIELDS_HELP)]
    Bench(ax::bench::Command),
    /// Tasks through the HTTP API: list, get, pause, resume, trigger.
    Tasks {
        #[command(flatten)]
        connection: Connection,
        #[command(subcommand)]
        command: TasksCommand,
    },
    /// Runs through the HTTP API: list (filtered by task and status), get by request id.
    Runs {
        #[command(flatten)]
        connection: Connection,
        #[command(subcommand)]
        command: RunsCommand,
    },
    /// Alerts through the HTTP API: list (by task and status), send a test alert.
    Alerts {
        #[command(flatten)]
        connection: Connection,
        #[command(subcommand)]
        command: AlertsCommand,
    },
    /// Executor groups through the HTTP API: list, get, apply a file of groups.
    Executors {
        #[command(flatten)]
        connection: Connection,
        #[command(subcommand)]
        command: ExecutorsAction,
    },
    /// Apply a file of tasks (YAML or JSON, the API's task shape), matched by scene and name:
    /// prints `+ created`, `~ changed: field old → new`, `- deleted` (with --prune: the tasks
    /// of the file's scenes it does not have), then a count. Its `executors:` groups are
    /// written first. `dependsOn` may name upstreams: `name` (same scene) or `scene/name`.
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
        #[command(flatten)]
        connection: Connection,
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
        #[command(flatten)]
        connection: Connection,
    },
    /// Print the tasks (of one scene) as a file `ax apply` takes (YAML; JSON with --json).
    Export {
        #[arg(long)]
        scene: Option<String>,
        #[command(flatten)]
        connection: Connection,
    },
    /// The schedule ahead across all tasks: the busiest seconds of the next hours with their
    /// run counts, and a jitter suggestion (the API's `GET /api/schedule/load`).
    Plan {
        /// The window, in hours (1-168).
        #[arg(long, default_value_t = 24, value_parser = clap::value_parser!(i64).range(1..=168))]
        hours: i64,
        #[command(flatten)]
        connection: Connection,
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
    },
}

fn main() -> ExitCode {
    let command = cli().command;
    // `migrate` prints what it applied; its log would say it twice.
    let level = match command {
        Command::Migrate { .. } => "warn",
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
        Command::Bench(command) => ax::bench::main(command),
        Command::Tasks {
            connection,
            command,
        } => ax::client::tasks(connection, command),
        Command::Alerts {
            connection,
            command,
        } => ax::client::alerts(connection, command),
        Command::Executors {
            connection,
            command: ExecutorsAction::Show(command),
        } => ax::client::executors(connection, command),
        Command::Executors {
            connection,
            command: ExecutorsAction::Apply { file },
        } => ax::apply::apply_groups(connection, &file),
        Command::Apply {
            file,
            dry_run,
            prune,
            yes,
            connection,
        } => {
            let options = ax::apply::ApplyOptions {
                dry_run,
                prune,
                yes,
            };
            ax::apply::apply(connection, &file, options)
        }
        Command::Diff {
            file,
            prune,
            connection,
        } => ax::apply::diff(connection, &file, prune),
        Command::Export { scene, connection } => ax::apply::export(connection, scene),
        Command::Runs {
            connection,
            command,
        } => ax::client::runs(connection, command),
        Command::Plan { hours, connection } => ax::client::plan(connection, hours),
        Command::Cron {
            command:
                CronCommand::Next {
                    expr,
                    from,
                    count,
                    tz,
                },
        } => cron_next(&expr, from.as_deref(), count, tz.as_deref()),
    }
}

/// The command line, with the environment variables listed in the help of the commands that
/// read them.
fn cli() -> Cli {
    use clap::{CommandFactory, FromArgMatches};
    let env = Config::env_help();
    let command = Cli::command()
        .mut_subcommand("serve", |c| c.after_help(env.clone()))
        .mut_subcommand("migrate", |c| c.after_help(env));
    Cli::from_arg_matches(&command.get_matches()).unwrap_or_else(|err| err.exit())
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
        let ax = match ax::app::start(&config, Arc::new(SystemClock)).await {
            Ok(ax) => ax,
            Err(err) => {
                // The one line that says why: not logged as well, so it is not said twice.
                eprintln!("ax: cannot start: {err}");
                return ExitCode::FAILURE;
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
        let url = ax::store::StoreUrl::parse(&config.store.url)?;
        ax::store::run_migrations(url).await
    });
    match result {
        Ok(applied) => {
            let store = ax::store::redacted(&config.store.url);
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
