//! `mock-llm`: synthgate's scripted OpenAI/Anthropic-compatible **test double** (not an LLM),
//! for benches and the README example. Point a model provider's `endpoint` at
//! `http://127.0.0.1:<port>/v1` (either `provider_type`).
//!
//! ```text
//! mock-llm --port 8090 --script bench/mock-script.json
//! ```

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use synthgate_testkit::mock_llm::{MockState, Script, serve, serve_tls};
use synthgate_testkit::signals::watch_signals;
use synthgate_testkit::tls::TlsArgs;
use tokio_util::sync::CancellationToken;

#[derive(Parser)]
#[command(
    name = "mock-llm",
    version,
    about = "A scripted OpenAI/Anthropic-compatible test double (not an LLM)"
)]
struct Args {
    /// Port to listen on (0 picks a free one).
    #[arg(long, default_value_t = 8090)]
    port: u16,
    /// Address to bind.
    #[arg(long, default_value = "127.0.0.1")]
    host: std::net::IpAddr,
    /// Script file (JSON, or YAML when it ends in .yaml/.yml); absent = default replies only.
    #[arg(long)]
    script: Option<PathBuf>,
    #[command(flatten)]
    tls: TlsArgs,
}

fn load(path: &PathBuf) -> Result<Script, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let yaml = path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("yaml") || e.eq_ignore_ascii_case("yml"));
    if yaml {
        yaml_serde::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))
    } else {
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))
    }
}

/// jemalloc, as the product: the scale benches drive the doubles at tens of thousands of
/// requests a second, where glibc's malloc was the largest part of the double's own CPU.
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

#[tokio::main]
async fn main() -> ExitCode {
    let args = Args::parse();
    let script = match args.script.as_ref().map(load).transpose() {
        Ok(s) => s.unwrap_or_default(),
        Err(e) => {
            eprintln!("mock-llm: bad script: {e}");
            return ExitCode::FAILURE;
        }
    };
    let listener = match tokio::net::TcpListener::bind(SocketAddr::new(args.host, args.port)).await
    {
        Ok(l) => l,
        Err(e) => {
            eprintln!("mock-llm: cannot bind {}:{}: {e}", args.host, args.port);
            return ExitCode::FAILURE;
        }
    };
    match listener.local_addr() {
        Ok(addr) => eprintln!(
            "mock-llm (a scripted test double, not an LLM) listening on {}://{addr}/v1 \
             with {} rule(s)",
            args.tls.scheme(),
            script.rules.len()
        ),
        Err(e) => eprintln!("mock-llm: {e}"),
    }
    let stop = CancellationToken::new();
    let state = MockState::new(script);
    let server = async {
        match args.tls.options() {
            Some(tls) => serve_tls(listener, state, stop.clone(), tls).await,
            None => serve(listener, state, stop.clone()).await,
        }
    };
    let signals = watch_signals(stop.clone());
    let (served, ()) = tokio::join!(server, signals);
    match served {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("mock-llm: {e}");
            ExitCode::FAILURE
        }
    }
}
