//! The `synthgate` binary: the service (`serve`), its spec (`openapi`), config checks, and a
//! small client (`submit`, `records`, `datasets`, `healthcheck`).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use synthgate::config::Config;

#[derive(Parser)]
#[command(
    name = "synthgate",
    version,
    about = "LLM data generation gateway (NeMo DataDesigner configs)"
)]
struct Cli {
    /// Server config file (default: config/synthgate.yaml if present, else built-in defaults).
    #[arg(long, global = true, env = "SYNTHGATE_CONFIG")]
    config: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the HTTP service and its worker pool.
    Serve,
    /// Print the OpenAPI spec (YAML) to stdout or a file.
    Openapi {
        /// Write to this file instead of stdout.
        #[arg(short, long)]
        output: Option<PathBuf>,
    },
    /// Submit a job from a DataDesigner config file; `--wait` shows a progress bar.
    Submit(synthgate::cli::SubmitArgs),
    /// Download a job's dataset (JSONL, CSV or Parquet).
    Records(synthgate::cli::RecordsArgs),
    /// Seed datasets on the server: upload, list, show, delete.
    Datasets(synthgate::cli::DatasetsArgs),
    /// Your jobs on the server: list, show, cancel, wait, delete.
    Jobs(synthgate::cli::JobsArgs),
    /// Exit 0 when the service answers on its health URL (for container health checks).
    Healthcheck(synthgate::cli::HealthcheckArgs),
    /// Decodes one dataset file for the service, in a process of its own (internal).
    #[command(hide = true)]
    DecodeDataset(synthgate::datasets::decoder::ChildArgs),
    /// Config file commands.
    Config {
        #[command(subcommand)]
        command: ConfigCommand,
    },
}

#[derive(Subcommand)]
enum ConfigCommand {
    /// Validate the config (file + environment) and report every problem with its key.
    Check,
}

/// jemalloc rather than glibc's malloc. The service allocates on many threads (the runtime's,
/// the blocking pool's that CPU sections hand off to, sqlx's SQLite workers), and glibc gives
/// each its own arena, up to 8 per core, each keeping what it freed: a tools job's peak heap
/// of 11 MiB (heaptrack) sat in 50 MiB of anonymous memory, growing with N. jemalloc with the
/// options below ran the same job in about 60 MiB of RSS where glibc took 80 to 100, and with
/// 10 to 20 % less CPU per record (bench/README.md).
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// jemalloc's options, read at its first allocation: one arena for every thread. Each thread
/// still allocates from its own cache; the arena's lock is taken only to refill or flush one,
/// and measured no slower than jemalloc's default of 4 arenas per core, in less memory. The
/// `_RJEM_MALLOC_CONF` environment variable overrides these (e.g. `narenas:8` on a large
/// machine where that lock shows up in profiles).
#[allow(non_upper_case_globals)]
#[unsafe(export_name = "_rjem_malloc_conf")]
static malloc_conf: &[u8; 10] = b"narenas:1\0";

/// jemalloc's own figures for `/metrics` (`synthgate_allocator_bytes`): `allocated` is what
/// the service holds, `active` the pages of those allocations, `resident` what jemalloc has in
/// RAM (freed pages it keeps included), `metadata` its bookkeeping, `retained` address space it
/// keeps unmapped for reuse. Read after advancing the stats epoch, as jemalloc requires.
fn jemalloc_stats() -> Vec<(&'static str, u64)> {
    use tikv_jemalloc_ctl::{epoch, stats};
    if epoch::advance().is_err() {
        return Vec::new();
    }
    [
        ("allocated", stats::allocated::read()),
        ("active", stats::active::read()),
        ("resident", stats::resident::read()),
        ("metadata", stats::metadata::read()),
        ("retained", stats::retained::read()),
    ]
    .into_iter()
    .filter_map(|(state, bytes)| Some((state, u64::try_from(bytes.ok()?).ok()?)))
    .collect()
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // Before the runtime: the decoder caps its own address space and needs no threads but
    // its one.
    if let Command::DecodeDataset(args) = cli.command {
        return synthgate::datasets::decoder::run_child(args);
    }
    synthgate::metrics::set_allocator_stats(jemalloc_stats);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match cli.command {
        Command::Serve => runtime.block_on(serve(cli.config)),
        Command::Submit(a) => runtime
            .block_on(synthgate::cli::submit(a))
            .unwrap_or_else(report),
        Command::Records(a) => runtime
            .block_on(synthgate::cli::records(a))
            .unwrap_or_else(report),
        Command::Datasets(a) => runtime
            .block_on(synthgate::cli::datasets(a))
            .unwrap_or_else(report),
        Command::Jobs(a) => runtime
            .block_on(synthgate::cli::jobs(a))
            .unwrap_or_else(report),
        Command::Healthcheck(a) => runtime
            .block_on(synthgate::cli::healthcheck(a))
            .unwrap_or_else(report),
        Command::Openapi { output } => {
            let yaml = synthgate::api::openapi::yaml();
            match output {
                Some(path) => match std::fs::write(&path, yaml) {
                    Ok(()) => ExitCode::SUCCESS,
                    Err(e) => {
                        eprintln!("error: cannot write {}: {e}", path.display());
                        ExitCode::FAILURE
                    }
                },
                None => {
                    print!("{yaml}");
                    ExitCode::SUCCESS
                }
            }
        }
        Command::DecodeDataset(_) => unreachable!("handled before the runtime starts"),
        Command::Config {
            command: ConfigCommand::Check,
        } => match Config::load(cli.config.as_deref()) {
            Ok(_) => {
                println!("config OK");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("error: {e}");
                ExitCode::FAILURE
            }
        },
    }
}

fn report(e: anyhow::Error) -> ExitCode {
    eprintln!("error: {e:#}");
    ExitCode::from(2)
}

async fn serve(path: Option<PathBuf>) -> ExitCode {
    let config = match Config::load(path.as_deref()) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    let telemetry = match synthgate::telemetry::init(&config) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    let running = match synthgate::app::start(config).await {
        Ok(r) => r,
        Err(e) => {
            tracing::error!(error = format!("{e:#}"), "start-up failed");
            eprintln!("error: {e:#}");
            telemetry.shutdown().await;
            return ExitCode::FAILURE;
        }
    };
    let signals = synthgate::shutdown::watch_signals(running.shutdown.clone());
    // The signal watcher ends when the token is cancelled, by a signal or by the app itself.
    tokio::join!(signals, running.wait());
    // Last: the spans of the drain (records finished, jobs closed) are exported too.
    telemetry.shutdown().await;
    ExitCode::SUCCESS
}
