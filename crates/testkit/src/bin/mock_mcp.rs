//! `mock-mcp`: synthgate's scripted MCP server **test double** (not a real tool server), for
//! tests and benches. Configure it as an MCP provider with the stdio transport (command
//! `mock-mcp stdio`) or the HTTP transport (endpoint `http://<addr>/mcp`). The tools and their
//! answers are listed in `synthgate_testkit::mock_mcp`.
//!
//! ```text
//! mock-mcp stdio
//! mock-mcp http --addr 127.0.0.1:0        # prints `listening on http://127.0.0.1:PORT/mcp`
//! mock-mcp http --tls --max-streams 100    # HTTPS, HTTP/2, 100 streams per connection
//! MOCK_MCP_EVENTS=/tmp/ev MOCK_MCP_PAGE_SIZE=2 mock-mcp stdio
//! ```
//!
//! In HTTP mode `GET /_mock/stats` answers the `tools/call` requests seen and the most in
//! flight at once. stdout is the protocol in stdio mode and carries exactly one line in HTTP
//! mode, so logs go to stderr (`RUST_LOG`, default `warn`). The `crash` tool exits with code 3.

use std::io::Write;
use std::net::SocketAddr;
use std::num::NonZeroUsize;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use synthgate_testkit::mock_mcp::{Options, serve_http, serve_https, serve_stdio};
use synthgate_testkit::signals::watch_signals;
use synthgate_testkit::tls::TlsArgs;
use tokio_util::sync::CancellationToken;
use tracing_subscriber::EnvFilter;

#[derive(Parser)]
#[command(
    name = "mock-mcp",
    version,
    about = "A scripted MCP server test double (not a real tool server)"
)]
struct Args {
    /// Append `init <pid>`, `list <pid>` and `call <pid> <tool>` lines to this file.
    #[arg(long, global = true, env = "MOCK_MCP_EVENTS")]
    events: Option<PathBuf>,
    /// Tools per `tools/list` page (clients must follow `nextCursor`); 0 = one page.
    #[arg(long, global = true, env = "MOCK_MCP_PAGE_SIZE", default_value_t = 0)]
    page_size: usize,
    #[command(subcommand)]
    mode: Mode,
}

#[derive(Subcommand)]
enum Mode {
    /// Serve one session over stdin/stdout.
    Stdio,
    /// Serve streamable HTTP at `/mcp`.
    Http {
        /// Address to bind (port 0 picks a free one; the real one is printed).
        #[arg(long, default_value = "127.0.0.1:0")]
        addr: SocketAddr,
        #[command(flatten)]
        tls: TlsArgs,
    },
}

/// jemalloc, as the product: the scale benches drive the doubles at tens of thousands of
/// requests a second, where glibc's malloc was the largest part of the double's own CPU.
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

#[tokio::main]
async fn main() -> ExitCode {
    let args = Args::parse();
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("warn"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
    let opts = Options {
        events: args.events,
        page_size: NonZeroUsize::new(args.page_size),
        exit_on_crash: true,
        // In-process tests set it; the binary serves without auth.
        oauth: None,
    };
    // Fail before printing `listening on`, so a test never connects to a server about to exit.
    if let Some(path) = &opts.events
        && let Err(e) = std::fs::File::options()
            .create(true)
            .append(true)
            .open(path)
    {
        eprintln!(
            "mock-mcp: cannot open the events file {}: {e}",
            path.display()
        );
        return ExitCode::FAILURE;
    }
    let stop = CancellationToken::new();
    let server = async {
        match args.mode {
            Mode::Stdio => serve_stdio(opts, stop.clone()).await,
            Mode::Http { addr, tls } => {
                let listener = tokio::net::TcpListener::bind(addr).await?;
                let bound = listener.local_addr()?;
                let scheme = tls.scheme();
                // Tests read the real port from this line, so it must be whole and flushed.
                let mut out = std::io::stdout().lock();
                writeln!(out, "listening on {scheme}://{bound}/mcp")?;
                out.flush()?;
                drop(out);
                match tls.options() {
                    Some(tls) => serve_https(listener, opts, stop.clone(), tls).await,
                    None => serve_http(listener, opts, stop.clone()).await,
                }
            }
        }
    };
    let (served, ()) = tokio::join!(
        async {
            let served = server.await;
            // Stdin closed or the server failed: stop waiting for signals too.
            stop.cancel();
            served
        },
        watch_signals(stop.clone())
    );
    match served {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("mock-mcp: {e:#}");
            ExitCode::FAILURE
        }
    }
}
