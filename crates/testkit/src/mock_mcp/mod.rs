//! **A scripted test double, not a real tool server.** `mock_mcp` is an rmcp MCP server with a
//! fixed set of tools whose answers cover the shapes the gateway must handle: plain text,
//! structured content, images, mixed blocks, embedded resources, tool errors (`isError`),
//! protocol errors (unknown tool), slow and cancelled calls, a crashing server and a tool list
//! that changes at run time (`notifications/tools/list_changed`). Tests and benches reach it
//! over stdio (the `mock-mcp stdio` binary, started by the gateway like any stdio server) or
//! streamable HTTP at `/mcp` (the binary's `http` mode, or [`serve_http`] / [`MockMcpHttp`]
//! in-process), plain or over TLS with HTTP/2 and a cap on a connection's streams
//! ([`serve_https`], [`MockMcpHttp::start_tls`]). Over HTTP, `GET /_mock/stats` answers the
//! [`CallStats`].
//!
//! The tools, with what they return:
//!
//! | tool              | arguments          | result                                                           |
//! |-------------------|--------------------|------------------------------------------------------------------|
//! | `echo`            | `{text}`           | text `text`                                                      |
//! | `add`             | `{a, b}` (numbers) | text `5`, structuredContent `{"sum": 5}` (an integer when whole) |
//! | `image`           | `{}`               | one image block: [`PNG_1X1`], `image/png`                        |
//! | `mixed`           | `{}`               | text `before`, the PNG, text `after`                             |
//! | `broken_image`    | `{}`               | text `look`, then an image block whose data is not base64        |
//! | `structured_only` | `{}`               | no content blocks, structuredContent `{"k": "v"}`                |
//! | `resource`        | `{}`               | embedded text resource `mock://note`: `resource text`            |
//! | `fail`            | `{message?}`       | `isError: true`, text `tool failed: <message or boom>`           |
//! | `slow`            | `{ms}` (integer)   | text `slept <ms>ms` after sleeping; stops early when cancelled   |
//! | `crash`           | `{}`               | the binary exits with code 3; in-process, the server stops       |
//! | `toggle_tools`    | `{}`               | text `tools changed`; adds/removes `bonus`; sends `list_changed` |
//! | `bonus`           | `{}`               | text `bonus!` (listed only while toggled on)                     |
//! | `whoami`          | `{}`               | text `pid=<pid> session=<n>`                                     |
//!
//! An unknown (or toggled-off) tool gets the JSON-RPC error `-32602 tool not found`, as from any
//! rmcp server. Arguments that do not match a tool's schema get rmcp's tool error
//! (`isError: true`, `failed to deserialize parameters: ...`).
//!
//! **State is per server**, that is per process for the binary and per [`serve_http`] call
//! in-process: the `bonus` toggle, the session counter and the events file. In HTTP mode every
//! session therefore sees the same tool list, and `toggle_tools` notifies every open session,
//! not only the caller's.
//!
//! Options come from flags or the environment (the gateway starts stdio servers with a given
//! env): [`EVENTS_ENV`] names a file that gets one line per `initialize`, `tools/list` and
//! `tools/call` (see [`Options::events`]); [`PAGE_SIZE_ENV`] splits `tools/list` into pages
//! joined by `nextCursor`, so clients must follow cursors.

mod events;
mod oauth;
mod tools;

#[cfg(test)]
mod tests;

use std::net::SocketAddr;
use std::num::NonZeroUsize;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Duration;

use anyhow::Context as _;
use axum::serve::ListenerExt;
use rmcp::handler::server::tool::{ToolCallContext, ToolRouter};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, Implementation, InitializeRequestParams,
    InitializeResult, ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig,
    Tool,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, Peer, RoleServer, ServerHandler, ServiceExt};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::tls::TlsOptions;
use events::EventLog;
pub use oauth::{OAuthOptions, OAuthStats};
pub use tools::PNG_1X1;
use tools::{BONUS, router};

/// Env var (and `--events`): the events file.
pub const EVENTS_ENV: &str = "MOCK_MCP_EVENTS";
/// Env var (and `--page-size`): tools per `tools/list` page.
pub const PAGE_SIZE_ENV: &str = "MOCK_MCP_PAGE_SIZE";
/// Where the HTTP modes answer `GET` with the [`CallStats`] as JSON.
pub const STATS_PATH: &str = "/_mock/stats";
/// Exit code of the binary after the `crash` tool.
pub const CRASH_EXIT_CODE: i32 = 3;

/// How long `toggle_tools` waits for one session's `list_changed` to be queued. Sessions live
/// in this process, so only a wedged session takes this long; the others still get theirs.
const NOTIFY_TIMEOUT: Duration = Duration::from_secs(1);

/// What the mock does beyond its fixed tools.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Append `init <pid>` per `initialize`, `list <pid>` per `tools/list` request (each page
    /// counts), `call <pid> <tool>` per `tools/call` (unknown names too) and `cancel <pid> slow`
    /// when a `slow` call is cancelled. Lines are written and flushed before the answer is sent.
    pub events: Option<PathBuf>,
    /// Tools per `tools/list` page; `None` answers with every tool and no cursor.
    pub page_size: Option<NonZeroUsize>,
    /// `crash` ends the process with [`CRASH_EXIT_CODE`] (the binary) instead of only cancelling
    /// the server's token (in-process).
    pub exit_on_crash: bool,
    /// HTTP only: `/mcp` wants a bearer token from the mock's own authorization server (see
    /// the `oauth` module).
    pub oauth: Option<OAuthOptions>,
}

/// Serves MCP over stdin/stdout until the client closes stdin or `shutdown` fires. Logs must
/// go to stderr: stdout carries the protocol.
pub async fn serve_stdio(opts: Options, shutdown: CancellationToken) -> anyhow::Result<()> {
    let shared = Shared::new(opts, shutdown.clone())?;
    // `stdio_pipes`, not `stdio`: with pipes (how clients start us) reads run on the reactor, so
    // a pending stdin read cannot hold the runtime open after SIGTERM. Falls back to `stdio()`.
    let running = MockMcp::new(shared)
        .serve_with_ct(rmcp::transport::stdio_pipes(), shutdown.child_token())
        .await
        .context("MCP initialization over stdio failed")?;
    let reason = running.waiting().await?;
    tracing::info!(?reason, "stdio session ended");
    Ok(())
}

/// Serves MCP over streamable HTTP at `/mcp` on `listener` until `shutdown` fires (or the
/// `crash` tool fires it). Each HTTP session gets its own handler; all share one server state
/// (see the module docs).
pub async fn serve_http(
    listener: TcpListener,
    opts: Options,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    serve_shared(
        listener,
        Shared::new(opts, shutdown.clone())?,
        shutdown,
        None,
    )
    .await
}

/// [`serve_http`] over TLS, with HTTP/2 by ALPN and `tls.max_streams` streams per connection
/// (see [`crate::tls`]), as an MCP server behind a CDN or gateway answers. Not with
/// [`Options::oauth`], whose metadata names `http://` URLs.
pub async fn serve_https(
    listener: TcpListener,
    opts: Options,
    shutdown: CancellationToken,
    tls: TlsOptions,
) -> anyhow::Result<()> {
    anyhow::ensure!(
        opts.oauth.is_none(),
        "the OAuth mode is served over plain HTTP only"
    );
    serve_shared(
        listener,
        Shared::new(opts, shutdown.clone())?,
        shutdown,
        Some(tls),
    )
    .await
}

/// [`serve_http`] with its state built (so [`MockMcpHttp::start`] can report a bad events path).
async fn serve_shared(
    listener: TcpListener,
    shared: Arc<Shared>,
    shutdown: CancellationToken,
    tls: Option<TlsOptions>,
) -> anyhow::Result<()> {
    let shared_oauth = shared.oauth.clone();
    let calls = Arc::clone(&shared.calls);
    // rmcp calls the factory for every POST (to read tool schemas for header checks), not only
    // per session, so a handler must be cheap: the router and state live in `shared`.
    let service: StreamableHttpService<MockMcp, LocalSessionManager> = StreamableHttpService::new(
        move || Ok(MockMcp::new(Arc::clone(&shared))),
        Arc::default(),
        // The token ends every session (and its SSE streams) so graceful shutdown can finish.
        // No Host allow-list: DNS rebinding protection has nothing to protect in a test double,
        // and benches reach it by a compose service name.
        StreamableHttpServerConfig::default()
            .with_cancellation_token(shutdown.child_token())
            .disable_allowed_hosts(),
    );
    let mut app = axum::Router::new().nest_service("/mcp", service);
    if let Some((opts, stats)) = &shared_oauth {
        app = oauth::wrap(app, listener.local_addr()?, opts.clone(), stats.clone());
    }
    // Outside the OAuth guard: what the bench reads after a run.
    let app = app.route(
        STATS_PATH,
        axum::routing::get(move || std::future::ready(axum::Json(calls.stats()))),
    );
    if let Some(tls) = tls {
        return crate::tls::serve_router(listener, app, shutdown, tls)
            .await
            .context("HTTPS server failed");
    }
    // TCP_NODELAY, as real servers set it (uvicorn, Go's net/http): rmcp answers a POST as an
    // SSE stream in several small writes, and with Nagle on each one after the first waits for
    // the client's delayed ACK, some 40 ms per tool call.
    let listener = listener.tap_io(|tcp| {
        let _ = tcp.set_nodelay(true);
    });
    axum::serve(listener, app)
        .with_graceful_shutdown(shutdown.cancelled_owned())
        .await
        .context("HTTP server failed")
}

/// A mock MCP server running in-process over HTTP (for tests). Dropping it stops the server.
#[derive(Debug)]
pub struct MockMcpHttp {
    addr: SocketAddr,
    stop: CancellationToken,
    tasks: TaskTracker,
    oauth: Option<Arc<OAuthStats>>,
    calls: Arc<CallCounter>,
    tls: bool,
}

impl MockMcpHttp {
    /// Starts the mock on `127.0.0.1` with a random port.
    pub async fn start(opts: Options) -> anyhow::Result<Self> {
        Self::launch(opts, None).await
    }

    /// Starts the mock on `127.0.0.1` with a random port, over TLS (see [`serve_https`]).
    pub async fn start_tls(opts: Options, tls: TlsOptions) -> anyhow::Result<Self> {
        anyhow::ensure!(
            opts.oauth.is_none(),
            "the OAuth mode is served over plain HTTP only"
        );
        Self::launch(opts, Some(tls)).await
    }

    async fn launch(opts: Options, tls: Option<TlsOptions>) -> anyhow::Result<Self> {
        let listener = TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0))).await?;
        let addr = listener.local_addr()?;
        let stop = CancellationToken::new();
        let shared = Shared::new(opts, stop.clone())?;
        let oauth = shared.oauth.as_ref().map(|(_, stats)| stats.clone());
        let calls = Arc::clone(&shared.calls);
        let is_tls = tls.is_some();
        let tasks = TaskTracker::new();
        let server_stop = stop.clone();
        tasks.spawn(async move {
            if let Err(e) = serve_shared(listener, shared, server_stop, tls).await {
                tracing::error!(error = %e, "mock-mcp stopped with an error");
            }
        });
        tasks.close();
        Ok(Self {
            addr,
            stop,
            tasks,
            oauth,
            calls,
            tls: is_tls,
        })
    }

    /// The `tools/call` requests seen so far, and the most in flight at once.
    pub fn call_stats(&self) -> CallStats {
        self.calls.stats()
    }

    /// What the OAuth mode saw (`None` without [`Options::oauth`]).
    pub fn oauth(&self) -> Option<&OAuthStats> {
        self.oauth.as_deref()
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://<addr>/mcp` (`https://` when started with [`MockMcpHttp::start_tls`]): the
    /// endpoint of an MCP provider with the HTTP transport.
    pub fn url(&self) -> String {
        let scheme = if self.tls { "https" } else { "http" };
        format!("{scheme}://{}/mcp", self.addr)
    }

    /// The server's stop token; `crash` cancels it too.
    pub fn stop_token(&self) -> CancellationToken {
        self.stop.clone()
    }

    /// Stops accepting, ends the sessions, and waits for the server task.
    pub async fn shutdown(self) {
        self.stop.cancel();
        self.tasks.wait().await;
    }
}

impl Drop for MockMcpHttp {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// State shared by every session of one server.
struct Shared {
    /// Every tool, `bonus` included; built once because schema generation is not free.
    router: ToolRouter<MockMcp>,
    /// The events file, if any.
    events: Option<EventLog>,
    /// Tools per `tools/list` page.
    page_size: Option<NonZeroUsize>,
    /// See [`Options::exit_on_crash`].
    exit_on_crash: bool,
    /// Whether `bonus` is listed and callable.
    bonus: AtomicBool,
    /// `initialize` requests seen; the last one numbers the newest session.
    sessions: AtomicU64,
    /// Every initialized session's peer, to broadcast `list_changed`. Closed ones are dropped
    /// at the next broadcast.
    peers: Mutex<Vec<Peer<RoleServer>>>,
    /// The server's stop token, cancelled by `crash`.
    stop: CancellationToken,
    /// See [`Options::oauth`], with what it saw.
    oauth: Option<(OAuthOptions, Arc<OAuthStats>)>,
    /// `tools/call` requests, for [`MockMcpHttp::call_stats`] and [`STATS_PATH`].
    calls: Arc<CallCounter>,
}

/// The `tools/call` requests a server has seen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CallStats {
    /// Requests seen.
    pub calls: u64,
    /// The most answered at once: what a cap on the client's side shows up in.
    pub max_in_flight: u64,
}

#[derive(Debug, Default)]
struct CallCounter {
    calls: AtomicU64,
    in_flight: AtomicU64,
    max_in_flight: AtomicU64,
}

impl CallCounter {
    /// Counts a call in flight until the guard drops.
    fn enter(&self) -> InCall<'_> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        let now = self.in_flight.fetch_add(1, Ordering::Relaxed) + 1;
        self.max_in_flight.fetch_max(now, Ordering::Relaxed);
        InCall(self)
    }

    fn stats(&self) -> CallStats {
        CallStats {
            calls: self.calls.load(Ordering::Relaxed),
            max_in_flight: self.max_in_flight.load(Ordering::Relaxed),
        }
    }
}

struct InCall<'a>(&'a CallCounter);

impl Drop for InCall<'_> {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Shared {
    fn new(opts: Options, stop: CancellationToken) -> anyhow::Result<Arc<Self>> {
        let events = match &opts.events {
            Some(path) => Some(
                EventLog::open(path)
                    .with_context(|| format!("cannot open the events file {}", path.display()))?,
            ),
            None => None,
        };
        Ok(Arc::new(Self {
            router: router(),
            events,
            page_size: opts.page_size,
            exit_on_crash: opts.exit_on_crash,
            oauth: opts.oauth.map(|o| (o, Arc::default())),
            bonus: AtomicBool::new(false),
            sessions: AtomicU64::new(0),
            peers: Mutex::new(Vec::new()),
            stop,
            calls: Arc::default(),
        }))
    }

    fn record(&self, kind: &str, detail: Option<&str>) {
        if let Some(events) = &self.events {
            events.record(kind, detail);
        }
    }

    fn visible(&self, name: &str) -> bool {
        name != BONUS || self.bonus.load(Ordering::SeqCst)
    }

    /// The listed tools, sorted by name (so pages are stable while the list does not change).
    fn tools(&self) -> Vec<Tool> {
        let mut tools = self.router.list_all();
        tools.retain(|t| self.visible(&t.name));
        tools
    }

    /// Flips `bonus` and tells every open session. rmcp routes `list_changed` to a session's
    /// standalone SSE stream (the client's GET), not to the response of the call that caused
    /// it, so a client that has not opened that stream yet misses it (rmcp drops it).
    async fn toggle_bonus(&self) {
        let was_on = self.bonus.fetch_xor(true, Ordering::SeqCst);
        tracing::info!(bonus = !was_on, "tool list changed");
        let peers = {
            let mut peers = self.peers.lock().unwrap_or_else(PoisonError::into_inner);
            peers.retain(|p| !p.is_transport_closed());
            peers.clone()
        };
        let sends = peers
            .iter()
            .map(|p| tokio::time::timeout(NOTIFY_TIMEOUT, p.notify_tool_list_changed()));
        for sent in futures::future::join_all(sends).await {
            match sent {
                Ok(Ok(())) => {}
                Ok(Err(e)) => tracing::debug!(error = %e, "list_changed not delivered"),
                Err(_) => tracing::warn!("list_changed timed out for one session"),
            }
        }
    }

    /// The `crash` tool: stop serving, and in the binary die on the spot like a real crash (no
    /// answer, no clean shutdown).
    fn crash(&self) {
        tracing::warn!(exit_code = CRASH_EXIT_CODE, "crash tool called");
        self.stop.cancel();
        if self.exit_on_crash {
            std::process::exit(CRASH_EXIT_CODE);
        }
    }
}

/// One session's handler: the shared state plus this session's number.
struct MockMcp {
    /// Server-wide state.
    shared: Arc<Shared>,
    /// Set by `initialize`: 1 for the server's first session, 2 for the next, ...
    session: OnceLock<u64>,
}

impl MockMcp {
    fn new(shared: Arc<Shared>) -> Self {
        Self {
            shared,
            session: OnceLock::new(),
        }
    }

    /// This session's number, 0 if it never sent `initialize` (stateless requests).
    fn session_number(&self) -> u64 {
        self.session.get().copied().unwrap_or(0)
    }
}

impl ServerHandler for MockMcp {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .build(),
        )
        .with_server_info(Implementation::new("mock-mcp", env!("CARGO_PKG_VERSION")))
        .with_instructions("A scripted MCP test double: fixed tools with canned answers.")
    }

    /// rmcp's default, plus the session number, the peer for `list_changed` and the event.
    async fn initialize(
        &self,
        request: InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, ErrorData> {
        let n = self.shared.sessions.fetch_add(1, Ordering::SeqCst) + 1;
        let _ = self.session.set(n);
        self.shared.record("init", None);
        self.shared
            .peers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(context.peer.clone());
        context.peer.set_peer_info(request.clone());
        self.negotiate_initialize(&request)
    }

    /// One page of the visible tools. The cursor is the index of the page's first tool.
    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        self.shared.record("list", None);
        let tools = self.shared.tools();
        let Some(size) = self.shared.page_size else {
            return Ok(ListToolsResult::with_all_items(tools));
        };
        let start = match request.and_then(|r| r.cursor) {
            None => 0,
            Some(cursor) => cursor
                .parse::<usize>()
                .ok()
                .filter(|&i| i <= tools.len())
                .ok_or_else(|| {
                    ErrorData::invalid_params(format!("invalid cursor {cursor:?}"), None)
                })?,
        };
        let end = start.saturating_add(size.get()).min(tools.len());
        let mut page = ListToolsResult::with_all_items(tools[start..end].to_vec());
        page.next_cursor = (end < tools.len()).then(|| end.to_string());
        Ok(page)
    }

    /// Routes to the tool, hiding `bonus` while it is toggled off.
    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        self.shared.record("call", Some(&request.name));
        let _in_call = self.shared.calls.enter();
        // The caller's trace context (SEP-414), which rmcp moves from `_meta` to the context.
        if let Some(tp) = context.meta.get_traceparent() {
            self.shared.record("trace", Some(tp));
        }
        // Over HTTP, the `traceparent` header of the POST that carried the call.
        let header = context
            .extensions
            .get::<axum::http::request::Parts>()
            .and_then(|p| p.headers.get("traceparent"))
            .and_then(|v| v.to_str().ok());
        if let Some(tp) = header {
            self.shared.record("trace-header", Some(tp));
        }
        if !self.shared.visible(&request.name) {
            // The same error the router gives for a name it does not know.
            return Err(ErrorData::invalid_params("tool not found", None));
        }
        let call = ToolCallContext::new(self, request, context);
        self.shared.router.call(call).await
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        if !self.shared.visible(name) {
            return None;
        }
        self.shared.router.get(name).cloned()
    }
}
