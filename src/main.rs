//! The `ax` command: CLI wiring only.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use chrono::{DateTime, SecondsFormat, Utc};
use clap::{Parser, Subcommand};

use ax::clock::SystemClock;
use ax::config::Config;
use ax::cron::CronSchedule;

/// A fast allocator: firing and dispatching allocate many small, short-lived buffers.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Exit status for bad input (an invalid expression, option or config).
const EXIT_USAGE: u8 = 2;

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
    },
    /// Apply pending database migrations and exit.
    Migrate {
        #[arg(long)]
        config: Option<PathBuf>,
    },
    /// Load-test ax: a mock executor, ax child processes, tasks, one JSON line of figures.
    Bench(ax::bench::Args),
    /// Cron expression tools.
    Cron {
        #[command(subcommand)]
        command: CronCommand,
    },
}

#[derive(Subcommand)]
enum CronCommand {
    /// Print the next fire times of an expression, one per line, RFC3339 UTC.
    Next {
        /// 6 fields `sec min hour day month weekday` (or 5, seconds = 0), or a macro.
        expr: String,
        /// Start (exclusive), RFC3339; default now.
        #[arg(long)]
        from: Option<String>,
        /// How many times to print.
        #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=100_000))]
        count: u32,
    },
}

fn main() -> ExitCode {
    // Log times in the one form ax shows people: RFC 3339, UTC, milliseconds.
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("info"))
        .format_timestamp_millis()
        .init();
    match Cli::parse().command {
        Command::Serve { config } => with_config(config, serve),
        Command::Migrate { config } => with_config(config, migrate),
        Command::Bench(args) => ax::bench::run(args),
        Command::Cron {
            command: CronCommand::Next { expr, from, count },
        } => cron_next(&expr, from.as_deref(), count),
    }
}

fn with_config(path: Option<PathBuf>, run: fn(Config) -> ExitCode) -> ExitCode {
    match Config::load(path.as_deref()) {
        Ok(config) => run(config),
        Err(err) => {
            eprintln!("ax: {err}");
            ExitCode::from(EXIT_USAGE)
        }
    }
}

fn serve(config: Config) -> ExitCode {
    actix_rt::System::new().block_on(async move {
        let ax = match ax::app::start(&config, Arc::new(SystemClock)).await {
            Ok(ax) => ax,
            Err(err) => {
                // The one line that says why: not logged as well, so it is not said twice.
                eprintln!("ax: cannot start: {err}");
                return ExitCode::FAILURE;
            }
        };
        wait_for_signal().await;
        ax.shutdown().await;
        ExitCode::SUCCESS
    })
}

/// Waits for SIGINT or SIGTERM.
async fn wait_for_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = match signal(SignalKind::terminate()) {
        Ok(term) => term,
        Err(err) => {
            log::warn!("cannot watch SIGTERM ({err}); stop with Ctrl-C");
            let _ = tokio::signal::ctrl_c().await;
            return;
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => log::info!("SIGINT received"),
        _ = term.recv() => log::info!("SIGTERM received"),
    }
}

fn migrate(config: Config) -> ExitCode {
    let result = actix_rt::System::new().block_on(async {
        let url = ax::store::StoreUrl::parse(&config.store.url)?;
        ax::store::run_migrations(url).await
    });
    match result {
        Ok(()) => {
            println!("migrations applied to {}", config.store.url);
            ExitCode::SUCCESS
        }
        Err(err) => {
            eprintln!("ax: {err}");
            ExitCode::FAILURE
        }
    }
}

fn cron_next(expr: &str, from: Option<&str>, count: u32) -> ExitCode {
    let schedule = match CronSchedule::parse(expr) {
        Ok(schedule) => schedule,
        Err(err) => {
            eprintln!("ax: invalid cron expression `{expr}`: {err}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let mut at = match from.map(DateTime::parse_from_rfc3339) {
        None => Utc::now(),
        Some(Ok(from)) => from.with_timezone(&Utc),
        Some(Err(err)) => {
            eprintln!("ax: invalid --from (expected RFC3339, e.g. 2027-02-03T04:05:06Z): {err}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let mut out = String::new();
    for _ in 0..count {
        match schedule.next_after(at) {
            Some(next) => {
                out.push_str(&next.to_rfc3339_opts(SecondsFormat::Secs, true));
                out.push('\n');
                at = next;
            }
            None => break,
        }
    }
    print!("{out}");
    ExitCode::SUCCESS
}
