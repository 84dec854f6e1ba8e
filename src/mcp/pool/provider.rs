//! One MCP provider of the pool: its session slots (one per key, connected once however many
//! callers wait), its health and reconnect back-off, its tool list, and its calls.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::FutureExt;
use futures::future::{BoxFuture, Shared};
use rmcp::model::CallToolResponse;
use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::ServiceError;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::Instrument;
use tracing::field::Empty;

use crate::config::{McpProviderConfig, McpTransport, SessionScope};
use crate::lanes::{Lanes, Origin};
use crate::mcp::cache::{Source, ToolCache, ToolList};
use crate::mcp::connect::{self, Handler};
use crate::mcp::{BUSY_SESSION_CALLS, CallScope, McpError, ProviderState, ProviderStatus};
use crate::metrics as m;
use crate::telemetry::SPANS;

use super::{CONNECT_ATTEMPTS, Key, MAX_COOLDOWN, Session, config_secs};

type Connect = Shared<BoxFuture<'static, Result<Arc<Session>, McpError>>>;

#[derive(Clone)]
enum Slot {
    Connecting(u64, Connect),
    Ready(Arc<Session>),
}

#[derive(Default)]
struct Health {
    /// Consecutive failed reconnects.
    failures: u32,
    /// No connect attempt before this instant.
    retry_at: Option<Instant>,
    last_error: Option<String>,
    /// Its code, for `GET /v1/tools` (see `ProviderStatus::last_error_code`).
    last_error_code: Option<&'static str>,
    reconnects: u64,
    /// A session was evicted as dead; the next successful connect is a reconnect.
    evicted: bool,
}

pub(crate) struct Provider {
    pub(crate) cfg: McpProviderConfig,
    name: Arc<str>,
    pub(crate) cache: Arc<ToolCache>,
    calls: Option<Semaphore>,
    slots: Mutex<HashMap<Key, Slot>>,
    health: Mutex<Health>,
    next_connect: AtomicU64,
    /// An `sse` or `streamable_http` provider's connections, shared by all its sessions
    /// (see `crate::lanes`); `None` for `stdio`.
    lanes: Option<Arc<Lanes>>,
    /// The provider's OAuth client and token, shared by all its sessions.
    oauth: Option<Arc<crate::mcp::oauth::OAuth>>,
    tasks: TaskTracker,
    closing: CancellationToken,
}

impl Provider {
    /// A provider for `cfg`, not connected; its sessions run under `tasks` and stop at
    /// `closing`.
    pub(super) fn new(
        cfg: &McpProviderConfig,
        tasks: TaskTracker,
        closing: CancellationToken,
    ) -> Result<Self, McpError> {
        let lanes = match (cfg.transport(), cfg.endpoint.as_deref()) {
            (McpTransport::Stdio, _) | (_, None) => None,
            (_, Some(url)) => {
                let origin = Origin {
                    kind: "mcp_provider",
                    name: cfg.name.clone(),
                };
                let lanes = crate::lanes::lanes_for(origin, cfg.tls_ca_file.as_deref(), url)
                    .map_err(|e| McpError::Client {
                        provider: cfg.name.clone(),
                        message: e.to_string(),
                    })?;
                Some(Arc::new(lanes))
            }
        };
        Ok(Self {
            cfg: cfg.clone(),
            name: Arc::from(cfg.name.as_str()),
            cache: Arc::new(ToolCache::new(Duration::from_secs(cfg.tools_cache_ttl_sec))),
            calls: cfg.max_concurrent_calls.map(|n| Semaphore::new(n as usize)),
            slots: Mutex::default(),
            health: Mutex::default(),
            next_connect: AtomicU64::new(0),
            lanes,
            oauth: cfg.oauth.as_ref().map(|o| {
                let endpoint = cfg.endpoint.as_deref().unwrap_or_default();
                Arc::new(crate::mcp::oauth::OAuth::new(&cfg.name, endpoint, o))
            }),
            tasks,
            closing,
        })
    }

    pub(super) fn key(&self, scope: Option<&CallScope>) -> Key {
        match (self.cfg.session_scope, scope) {
            (SessionScope::Shared, _) | (_, None) => Key::Shared(0),
            (SessionScope::PerJob, Some(s)) => Key::Job(s.job),
            (SessionScope::PerRecord, Some(s)) => Key::Record(s.record),
        }
    }

    pub(super) fn label(&self) -> String {
        self.name.to_string()
    }

    /// The live session for `key`, connecting (or joining a connect under way) if needed.
    async fn session(self: &Arc<Self>, key: Key) -> Result<Arc<Session>, McpError> {
        let connect = self.session_or_connect(key)?;
        match connect {
            Ok(s) => Ok(s),
            Err(f) => f.await,
        }
    }

    /// The live session, or the connect to wait for (joined or started here).
    fn session_or_connect(
        self: &Arc<Self>,
        key: Key,
    ) -> Result<Result<Arc<Session>, Connect>, McpError> {
        let mut slots = self.slots.lock().expect("slots lock");
        match slots.get(&key).cloned() {
            Some(Slot::Ready(s)) if !s.is_dead() => return Ok(Ok(s)),
            Some(Slot::Ready(dead)) => {
                slots.remove(&key);
                self.count_sessions(&slots);
                self.retire(dead, true);
            }
            Some(Slot::Connecting(_, f)) => return Ok(Err(f)),
            None => {}
        }
        if self.closing.is_cancelled() {
            return Err(McpError::ShuttingDown);
        }
        {
            let h = self.health.lock().expect("health lock");
            if let Some(at) = h.retry_at
                && let Some(left) = at.checked_duration_since(Instant::now())
            {
                return Err(McpError::Unavailable {
                    provider: self.label(),
                    message: h.last_error.clone().unwrap_or_default(),
                    retry_in_ms: u64::try_from(left.as_millis()).unwrap_or(u64::MAX),
                });
            }
        }
        let id = self.next_connect.fetch_add(1, Ordering::Relaxed);
        let f = self.clone().connect(key, id).boxed().shared();
        slots.insert(key, Slot::Connecting(id, f.clone()));
        Ok(Err(f))
    }

    /// Connects with a few quick retries; on success the slot becomes `Ready`, on failure the
    /// provider cools down (exponentially, up to [`MAX_COOLDOWN`]) so records fail fast
    /// instead of each waiting on a dead server.
    async fn connect(self: Arc<Self>, key: Key, id: u64) -> Result<Arc<Session>, McpError> {
        let timeout = config_secs(self.cfg.connect_timeout_sec);
        let mut delays = backon::BackoffBuilder::build(
            backon::ExponentialBuilder::default()
                .with_min_delay(Duration::from_millis(200))
                .with_max_delay(Duration::from_secs(2))
                .with_max_times(CONNECT_ATTEMPTS as usize - 1),
        );
        let handler = Handler {
            provider: self.name.clone(),
            cache: self.cache.clone(),
        };
        let started = Instant::now();
        // A root span: the session outlives the request that happened to open it, and rmcp's
        // background task would otherwise log under that request's span forever.
        let span = tracing::info_span!(parent: None, "mcp_session", mcp.provider = %self.name);
        let mut code: &'static str;
        let last = loop {
            // The attempt's own span (exported only), timed but not entered: rmcp's session
            // task keeps the span it starts in for as long as the session lives.
            let initialize = tracing::info_span!(
                target: SPANS,
                parent: &span,
                "mcp.request",
                otel.name = "initialize",
                otel.kind = "client",
                mcp.method.name = "initialize",
                synthgate.mcp.provider = %self.name,
                error.type = Empty,
                otel.status_code = Empty,
            );
            let attempt = tokio::select! {
                r = tokio::time::timeout(timeout, connect::connect(&self.cfg, self.lanes.as_ref(), self.oauth.as_ref(), handler.clone(), &self.tasks).instrument(span.clone())) => r,
                () = self.closing.cancelled() => return Err(self.abandon(key, id, McpError::ShuttingDown)),
            };
            if !matches!(attempt, Ok(Ok(_))) {
                initialize.record("error.type", "mcp_connect_failed");
                initialize.record("otel.status_code", "ERROR");
            }
            drop(initialize);
            let message;
            (code, message) = match attempt {
                Ok(Ok(service)) => {
                    let session = Arc::new(Session::new(service));
                    return Ok(self.connected(key, id, session, started));
                }
                Ok(Err(message)) => ("connect_failed", message),
                Err(_) => (
                    "connect_timeout",
                    format!(
                        "no answer to initialize within {}s (connect_timeout_sec)",
                        self.cfg.connect_timeout_sec
                    ),
                ),
            };
            tracing::warn!(mcp.provider = %self.name, error = %message, "MCP connect failed");
            match delays.next() {
                Some(d) => tokio::time::sleep(d).await,
                None => break message,
            }
        };
        let cooldown = {
            let mut h = self.health.lock().expect("health lock");
            h.failures += 1;
            let cooldown =
                Duration::from_secs(1 << h.failures.min(5).saturating_sub(1)).min(MAX_COOLDOWN);
            h.retry_at = Some(Instant::now() + cooldown);
            h.last_error = Some(last.clone());
            h.last_error_code = Some(code);
            cooldown
        };
        metrics::counter!(m::MCP_CONNECT_FAILURES, "provider" => self.label()).increment(1);
        tracing::error!(mcp.provider = %self.name, error = %last, cooldown_ms = cooldown.as_millis() as u64,
            "MCP provider unavailable");
        Err(self.abandon(
            key,
            id,
            McpError::Connect {
                provider: self.label(),
                message: last,
            },
        ))
    }

    fn connected(
        &self,
        key: Key,
        id: u64,
        session: Arc<Session>,
        started: Instant,
    ) -> Arc<Session> {
        let reconnect = {
            let mut h = self.health.lock().expect("health lock");
            h.failures = 0;
            h.retry_at = None;
            h.last_error = None;
            h.last_error_code = None;
            let reconnect = std::mem::take(&mut h.evicted);
            if reconnect {
                h.reconnects += 1;
            }
            reconnect
        };
        let mut slots = self.slots.lock().expect("slots lock");
        let ours = matches!(slots.get(&key), Some(Slot::Connecting(i, _)) if *i == id);
        if ours && !self.closing.is_cancelled() {
            slots.insert(key, Slot::Ready(session.clone()));
            self.count_sessions(&slots);
        } else {
            // Shutdown or a scope release overtook the connect: close what we opened.
            self.retire(session.clone(), false);
        }
        drop(slots);
        metrics::counter!(m::MCP_SESSIONS_OPENED, "provider" => self.label()).increment(1);
        if reconnect {
            metrics::counter!(m::MCP_RECONNECTS, "provider" => self.label()).increment(1);
        }
        let lane = match key {
            Key::Shared(n) => Some(n),
            _ => None,
        };
        tracing::info!(mcp.provider = %self.name, reconnect, lane, ms = started.elapsed().as_millis() as u64,
            "MCP session open");
        session
    }

    /// Sets the open-sessions gauge from `slots`.
    fn count_sessions(&self, slots: &HashMap<Key, Slot>) {
        metrics::gauge!(m::MCP_SESSIONS, "provider" => self.label())
            .set(live_sessions(slots) as f64);
    }

    /// The shared session a call goes to: the one with the fewest calls in flight. When even
    /// that one has [`BUSY_SESSION_CALLS`] and `max_sessions` allows, another is connected in
    /// the background (one at a time; the call does not wait for it), so a busy stdio server
    /// whose calls take real CPU gets a process per session instead of one.
    fn lane(self: &Arc<Self>) -> Key {
        let max = u16::try_from(self.cfg.max_sessions.max(1)).unwrap_or(u16::MAX);
        if max == 1 {
            return Key::Shared(0);
        }
        let slots = self.slots.lock().expect("slots lock");
        let (mut best, mut connecting, mut free) = (None::<(u16, usize)>, None, None);
        for n in 0..max {
            match slots.get(&Key::Shared(n)) {
                Some(Slot::Ready(s)) if !s.is_dead() => {
                    let load = s.load();
                    if best.is_none_or(|(_, l)| load < l) {
                        best = Some((n, load));
                    }
                }
                Some(Slot::Connecting(..)) => connecting = connecting.or(Some(n)),
                _ => free = free.or(Some(n)),
            }
        }
        drop(slots);
        let Some((lane, load)) = best else {
            // Nothing open: wait on the connect under way, or start lane 0's (or the first
            // free one's, when lane 0 is being replaced).
            return Key::Shared(connecting.or(free).unwrap_or(0));
        };
        if load >= BUSY_SESSION_CALLS
            && connecting.is_none()
            && let Some(n) = free
            && let Ok(Err(connect)) = self.session_or_connect(Key::Shared(n))
        {
            tracing::info!(mcp.provider = %self.name, lane = n, calls = load,
                "every MCP session is busy; opening another");
            self.tasks.spawn(async move {
                let _ = connect.await;
            });
        }
        Key::Shared(lane)
    }

    fn abandon(&self, key: Key, id: u64, e: McpError) -> McpError {
        let mut slots = self.slots.lock().expect("slots lock");
        if matches!(slots.get(&key), Some(Slot::Connecting(i, _)) if *i == id) {
            slots.remove(&key);
        }
        e
    }

    /// Drops `session` from its slot if it is still there (a concurrent caller may already
    /// have replaced it) and closes it in the background.
    fn evict(&self, key: Key, session: &Arc<Session>) {
        let mut slots = self.slots.lock().expect("slots lock");
        if matches!(slots.get(&key), Some(Slot::Ready(s)) if Arc::ptr_eq(s, session)) {
            slots.remove(&key);
            self.count_sessions(&slots);
            drop(slots);
            self.retire(session.clone(), true);
        }
    }

    /// Closes a session off the caller's path; `dead` marks the next connect a reconnect.
    pub(super) fn retire(&self, session: Arc<Session>, dead: bool) {
        if dead {
            self.health.lock().expect("health lock").evicted = true;
            tracing::warn!(mcp.provider = %self.name, "MCP session lost; reconnecting on next use");
        }
        self.tasks.spawn(async move { session.close().await });
    }

    /// The provider's tools, from the cache or one shared `tools/list` walk of all pages.
    pub(super) async fn tools(self: &Arc<Self>, key: Key) -> Result<Arc<ToolList>, McpError> {
        let me = self.clone();
        let (result, source) = self
            .cache
            .get(move || async move { me.fetch_tools(key).await }.boxed())
            .await;
        let metric = match source {
            Source::Hit => m::MCP_CACHE_HITS,
            Source::Fetched => m::MCP_CACHE_MISSES,
            Source::Stale => {
                tracing::warn!(mcp.provider = %self.name, "tools/list failed; using the previous list");
                m::MCP_CACHE_MISSES
            }
        };
        metrics::counter!(metric, "provider" => self.label()).increment(1);
        result
    }

    /// One `tools/list` walk, in its span (exported only): a child of the record that asked
    /// first; the records that shared the walk wait in their own spans.
    async fn fetch_tools(self: Arc<Self>, key: Key) -> Result<Arc<ToolList>, McpError> {
        let span = tracing::info_span!(
            target: SPANS,
            "mcp.request",
            otel.name = "tools/list",
            otel.kind = "client",
            mcp.method.name = "tools/list",
            synthgate.mcp.provider = %self.name,
            synthgate.mcp.tools = Empty,
            error.type = Empty,
            otel.status_code = Empty,
        );
        let result = self.list_tools(key).instrument(span.clone()).await;
        match &result {
            Ok(list) => span.record(
                "synthgate.mcp.tools",
                i64::try_from(list.tools.len()).unwrap_or(i64::MAX),
            ),
            Err(e) => {
                span.record("error.type", e.code());
                span.record("otel.status_code", "ERROR")
            }
        };
        result
    }

    async fn list_tools(self: Arc<Self>, key: Key) -> Result<Arc<ToolList>, McpError> {
        let timeout = config_secs(self.cfg.call_timeout_sec);
        let mut retried = false;
        loop {
            let session = self.session(key).await?;
            metrics::counter!(m::MCP_TOOLS_LIST, "provider" => self.label()).increment(1);
            match tokio::time::timeout(timeout, session.peer.list_all_tools()).await {
                Ok(Ok(tools)) => {
                    tracing::debug!(mcp.provider = %self.name, tools = tools.len(), "tools listed");
                    return Ok(Arc::new(ToolList::from_rmcp(&self.name, tools)));
                }
                Ok(Err(e)) if is_dead(&e) || session.is_dead() => {
                    self.evict(key, &session);
                    if retried {
                        return Err(self.transport_error(&e));
                    }
                    retried = true;
                }
                Ok(Err(e)) => return Err(protocol_error(e)),
                Err(_) => {
                    return Err(McpError::Timeout {
                        seconds: self.cfg.call_timeout_sec,
                    });
                }
            }
        }
    }

    pub(super) async fn call(
        self: &Arc<Self>,
        key: Key,
        params: CallToolRequestParams,
    ) -> Result<CallToolResult, McpError> {
        let _permit = match &self.calls {
            Some(s) => Some(s.acquire().await.map_err(|_| McpError::ShuttingDown)?),
            None => None,
        };
        let key = match key {
            Key::Shared(_) => self.lane(),
            other => other,
        };
        let mut retried = false;
        loop {
            let session = self.session(key).await?;
            let in_call = session.in_call();
            let answer = session
                .answer(session.peer.call_tool_once(params.clone()))
                .await;
            drop(in_call);
            let Some(answer) = answer else {
                // The transport closed and the request was left pending: the same case as a
                // dead-session error, retried once on a new session.
                self.evict(key, &session);
                if retried || self.closing.is_cancelled() {
                    return Err(McpError::Transport {
                        provider: self.label(),
                        message: "the session closed before the call was answered".into(),
                    });
                }
                retried = true;
                continue;
            };
            match answer {
                Ok(CallToolResponse::Complete(r)) => return Ok(r),
                Ok(CallToolResponse::InputRequired(_)) => {
                    return Err(McpError::Unsupported(
                        "the tool asked for user input (MCP input_required), which a batch job cannot give".into(),
                    ));
                }
                Ok(CallToolResponse::Task(_)) => {
                    return Err(McpError::Unsupported(
                        "the tool answered with an asynchronous task, which synthgate does not poll".into(),
                    ));
                }
                Ok(_) => {
                    return Err(McpError::Unsupported(
                        "the server answered tools/call with an unknown result type".into(),
                    ));
                }
                Err(e) if is_dead(&e) || session.is_dead() => {
                    // The session broke under this call: replace it and try once more, so a
                    // server restart costs a reconnect, not the record.
                    self.evict(key, &session);
                    if retried || self.closing.is_cancelled() {
                        return Err(self.transport_error(&e));
                    }
                    retried = true;
                }
                Err(e) => return Err(protocol_error(e)),
            }
        }
    }

    fn transport_error(&self, e: &ServiceError) -> McpError {
        McpError::Transport {
            provider: self.label(),
            message: e.to_string(),
        }
    }

    pub(super) fn status(&self) -> ProviderStatus {
        let slots = self.slots.lock().expect("slots lock");
        let sessions = live_sessions(&slots);
        let connecting = slots.values().any(|s| matches!(s, Slot::Connecting(..)));
        drop(slots);
        let h = self.health.lock().expect("health lock");
        let retry_in_ms = h
            .retry_at
            .and_then(|at| at.checked_duration_since(Instant::now()))
            .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        let state = if sessions > 0 {
            ProviderState::Connected
        } else if connecting {
            ProviderState::Connecting
        } else if retry_in_ms.is_some() || h.last_error_code.is_some() {
            // Still unavailable once the cooldown is over: the last connect failed, and only a
            // successful one (which clears `last_error`) makes the provider anything else.
            ProviderState::Unavailable
        } else {
            ProviderState::Idle
        };
        ProviderStatus {
            name: self.label(),
            transport: self.cfg.transport(),
            session_scope: self.cfg.session_scope,
            state,
            sessions,
            tools: self
                .cache
                .peek()
                .map(|l| l.tools.iter().map(|t| t.name.clone()).collect()),
            reconnects: h.reconnects,
            last_error_code: h.last_error_code,
            retry_in_ms,
        }
    }

    /// Removes every slot (or those `keep` rejects) and returns their sessions.
    pub(super) fn take_sessions(&self, mut matches: impl FnMut(&Key) -> bool) -> Vec<Arc<Session>> {
        let mut slots = self.slots.lock().expect("slots lock");
        let keys: Vec<Key> = slots.keys().copied().filter(|k| matches(k)).collect();
        let taken = keys
            .into_iter()
            .filter_map(|k| match slots.remove(&k) {
                Some(Slot::Ready(s)) => Some(s),
                _ => None,
            })
            .collect();
        self.count_sessions(&slots);
        taken
    }
}

fn is_dead(e: &ServiceError) -> bool {
    matches!(
        e,
        ServiceError::TransportClosed
            | ServiceError::TransportSend(_)
            | ServiceError::Cancelled { .. }
    )
}

fn protocol_error(e: ServiceError) -> McpError {
    match e {
        ServiceError::McpError(e) => McpError::Protocol {
            code: e.code.0,
            message: e.message.into_owned(),
        },
        other => McpError::Unsupported(other.to_string()),
    }
}

/// Sessions open and alive in `slots`: what `GET /v1/tools` and the sessions gauge both show.
fn live_sessions(slots: &HashMap<Key, Slot>) -> usize {
    slots
        .values()
        .filter(|s| matches!(s, Slot::Ready(s) if !s.is_dead()))
        .count()
}
