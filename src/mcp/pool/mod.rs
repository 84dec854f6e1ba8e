//! The session pool: one live session per provider (a few under load where `max_sessions`
//! allows, or one per job / per record for providers that opt out of sharing), connected
//! lazily, replaced when it dies, closed on shutdown.
//!
//! This file holds the sessions and the pool's doors; `provider.rs` holds one provider's
//! slots, health, reconnects, tool lists and calls.

mod provider;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rmcp::RoleClient;
use rmcp::model::{CallToolRequestParams, CallToolResult, RequestParamsMeta};
use rmcp::service::Peer;
use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::Instrument;
use tracing::field::Empty;
use uuid::Uuid;

use super::cache::ToolList;
use super::connect::Service;
use super::{CallScope, McpError, ProviderStatus};
use crate::config::{McpProviderConfig, SessionScope};
use crate::metrics as m;
use crate::telemetry::SPANS;
use provider::Provider;

/// Connect attempts per reconnect before the provider is marked unavailable.
const CONNECT_ATTEMPTS: u32 = 3;
/// Longest wait before a failed provider is tried again.
const MAX_COOLDOWN: Duration = Duration::from_secs(30);
/// How long closing one session may take (a stdio child gets stdin closed, then SIGTERM, then
/// SIGKILL from rmcp; this bounds the whole sequence).
const CLOSE_TIMEOUT: Duration = Duration::from_secs(10);
/// How often a pending call checks whether its session's transport has closed under it.
const DEAD_POLL: Duration = Duration::from_millis(250);

/// Which session a call uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Key {
    /// One of a shared provider's sessions: 0, and up to `max_sessions - 1` more under load.
    Shared(u16),
    Job(Uuid),
    Record(Uuid),
}

/// One open session.
pub(crate) struct Session {
    peer: Peer<RoleClient>,
    /// Taken on close; dropping a `RunningService` would also end it, without waiting.
    service: Mutex<Option<Service>>,
    /// Tool calls in flight on this session: what picks among a shared provider's sessions,
    /// and what tells it to open another.
    calls: AtomicUsize,
}

/// Counts a call on its session while it lives.
struct InCall<'a>(&'a AtomicUsize);

impl Drop for InCall<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Session {
    fn new(service: Service) -> Self {
        Self {
            peer: service.peer().clone(),
            service: Mutex::new(Some(service)),
            calls: AtomicUsize::new(0),
        }
    }

    fn load(&self) -> usize {
        self.calls.load(Ordering::Relaxed)
    }

    fn in_call(&self) -> InCall<'_> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        InCall(&self.calls)
    }

    fn is_dead(&self) -> bool {
        self.peer.is_transport_closed()
    }

    /// Awaits `request` on this session, or `None` once the session's transport has closed
    /// with the request still unanswered. A request written just as a stdio child died can
    /// otherwise stay pending until the call timeout, holding its record for the whole
    /// `call_timeout_sec`, though nothing can answer it.
    async fn answer<T>(&self, request: impl Future<Output = T>) -> Option<T> {
        tokio::pin!(request);
        loop {
            tokio::select! {
                // An answer that is already there wins over a transport that closed after it.
                biased;
                answer = &mut request => return Some(answer),
                () = tokio::time::sleep(DEAD_POLL) => {
                    if self.is_dead() {
                        return None;
                    }
                }
            }
        }
    }

    async fn close(&self) {
        let service = self.service.lock().expect("session lock").take();
        if let Some(mut s) = service {
            let _ = s.close_with_timeout(CLOSE_TIMEOUT).await;
        }
    }
}

/// All MCP providers of the server config, each with its session(s) and tool cache. Cheap to
/// clone; every worker and job shares one.
#[derive(Clone)]
pub struct McpPool {
    inner: Arc<Inner>,
}

struct Inner {
    providers: BTreeMap<String, Arc<Provider>>,
    tasks: TaskTracker,
    closing: CancellationToken,
}

impl McpPool {
    /// A pool over `providers`; nothing connects until first use. Fails when an HTTP
    /// provider's client cannot be built (its `tls_ca_file` holds no certificate).
    pub fn new(providers: &[McpProviderConfig]) -> Result<Self, McpError> {
        let tasks = TaskTracker::new();
        let closing = CancellationToken::new();
        let providers = providers
            .iter()
            .map(|cfg| {
                let p = Provider::new(cfg, tasks.clone(), closing.clone())?;
                Ok((cfg.name.clone(), Arc::new(p)))
            })
            .collect::<Result<_, McpError>>()?;
        Ok(Self {
            inner: Arc::new(Inner {
                providers,
                tasks,
                closing,
            }),
        })
    }

    fn provider(&self, name: &str) -> Result<&Arc<Provider>, McpError> {
        self.inner
            .providers
            .get(name)
            .ok_or_else(|| McpError::UnknownProvider(name.to_owned()))
    }

    /// The provider's tools (cached; see [`super::cache`]).
    pub async fn tools(
        &self,
        provider: &str,
        scope: Option<&CallScope>,
    ) -> Result<Arc<ToolList>, McpError> {
        let p = self.provider(provider)?;
        if scope.is_none() && p.cfg.session_scope != SessionScope::Shared {
            // Listing outside a job (submit checks, GET /v1/tools) for a provider that does not
            // share sessions: a throwaway session, closed once the list is cached.
            let temp = Uuid::new_v4();
            let result = p.tools(Key::Record(temp)).await;
            self.release_record(temp);
            return result;
        }
        p.tools(p.key(scope)).await
    }

    /// Calls `tool` on `provider` within `timeout`, or the provider's `call_timeout_sec` when
    /// `None` (waiting for a call slot included). On timeout the request is dropped, which
    /// makes rmcp send `notifications/cancelled`.
    pub async fn call(
        &self,
        provider: &str,
        scope: Option<&CallScope>,
        tool: &str,
        arguments: Map<String, Value>,
        timeout: Option<Duration>,
    ) -> Result<CallToolResult, McpError> {
        let p = self.provider(provider)?;
        let timeout = timeout.unwrap_or_else(|| config_secs(p.cfg.call_timeout_sec));
        let mut params = CallToolRequestParams::new(tool.to_owned()).with_arguments(arguments);
        // The MCP client span (the MCP semantic conventions' `tools/call`), whose context the
        // server receives in `_meta` (SEP-414), whatever the transport.
        let span = tracing::info_span!(
            target: SPANS,
            "mcp.request",
            otel.name = %format_args!("tools/call {tool}"),
            otel.kind = "client",
            mcp.method.name = "tools/call",
            gen_ai.tool.name = %tool,
            synthgate.mcp.provider = %provider,
            error.type = Empty,
            otel.status_code = Empty,
        );
        if let Some(tp) = span.in_scope(crate::telemetry::current_traceparent) {
            params.set_traceparent(&tp);
        }
        let started = Instant::now();
        let call = tokio::time::timeout(timeout, p.call(p.key(scope), params));
        let result = match call.instrument(span.clone()).await {
            Ok(r) => r,
            Err(_) => Err(McpError::Timeout {
                seconds: timeout.as_secs_f64(),
            }),
        };
        let outcome = match &result {
            Ok(r) if r.is_error == Some(true) => "tool_error",
            Ok(_) => "ok",
            Err(e) => e.code(),
        };
        if outcome != "ok" {
            span.record("error.type", outcome);
            span.record("otel.status_code", "ERROR");
        }
        let labels = [("provider", p.label()), ("tool", tool.to_owned())];
        metrics::histogram!(m::MCP_CALL_SECONDS, &labels).record(started.elapsed().as_secs_f64());
        metrics::counter!(
            m::MCP_CALLS,
            &[
                ("provider", p.label()),
                ("tool", tool.to_owned()),
                ("outcome", outcome.to_owned())
            ]
        )
        .increment(1);
        result
    }

    /// Closes the sessions a finished record held (providers with `session_scope: per_record`).
    pub fn release_record(&self, record: Uuid) {
        self.release(|k| *k == Key::Record(record));
    }

    /// Closes the sessions a finished job held (providers with `session_scope: per_job`).
    pub fn release_job(&self, job: Uuid) {
        self.release(|k| *k == Key::Job(job));
    }

    fn release(&self, matches: impl Fn(&Key) -> bool) {
        for p in self.inner.providers.values() {
            if p.cfg.session_scope == SessionScope::Shared {
                continue;
            }
            for s in p.take_sessions(&matches) {
                p.retire(s, false);
            }
        }
    }

    /// Every provider's state, in name order.
    pub fn status(&self) -> Vec<ProviderStatus> {
        self.inner.providers.values().map(|p| p.status()).collect()
    }

    /// Closes every session (stdio children exit or are killed and reaped) and waits for the
    /// background tasks (closes, stderr readers), at most `deadline`.
    pub async fn shutdown(&self, deadline: Duration) {
        self.inner.closing.cancel();
        let sessions: Vec<Arc<Session>> = self
            .inner
            .providers
            .values()
            .flat_map(|p| p.take_sessions(|_| true))
            .collect();
        let n = sessions.len();
        let close = futures::future::join_all(sessions.iter().map(|s| s.close()));
        self.inner.tasks.close();
        let all = async {
            close.await;
            self.inner.tasks.wait().await;
        };
        if tokio::time::timeout(deadline, all).await.is_err() {
            tracing::warn!("MCP sessions did not all close before the deadline");
        }
        tracing::info!(sessions = n, "MCP sessions closed");
    }
}

/// A timeout from the provider config. The config check bounds it (greater than 0, at most a
/// day); should an unchecked value get here, it means a minute rather than a panic.
fn config_secs(secs: f64) -> Duration {
    crate::domain::models::duration_from_secs(secs)
        .filter(|d| !d.is_zero())
        .unwrap_or(Duration::from_secs(60))
}
