//! The MCP layer: providers (MCP servers) reached over stdio, streamable HTTP or legacy SSE,
//! through ONE pool of sessions and ONE tool-list cache per provider, shared by every worker
//! and job of the process.
//!
//! ```text
//! McpPool (one per process)
//!   └─ Provider (per mcp_providers[] entry)
//!        ├─ slots: Shared(n) | Job(id) | Record(id) → Connecting(shared future) | Ready(session)
//!        │     lazy connect, concurrent connects coalesced, dead sessions evicted and
//!        │     reconnected (quick retries, then a cooldown), one retry of the failed call;
//!        │     a shared provider calls on its least busy session and opens another (up to
//!        │     max_sessions) when every one has BUSY_SESSION_CALLS calls in flight
//!        ├─ ToolCache: one tools/list walk (all pages) for all callers; TTL; list_changed
//!        └─ max_concurrent_calls semaphore
//! ```
//!
//! What DataDesigner 0.9.7 lacks and this adds: eviction and reconnect of dead sessions, a
//! per-call timeout that really cancels the request, a cache TTL, session scopes, call limits,
//! and children that are reaped on shutdown. Routing tool calls to providers, allow lists,
//! turning results into chat content blocks and failures into `Error:` messages for the model
//! live in [`crate::tools`].

mod any_transport;
mod cache;
mod connect;
mod error;
mod laned_http;
mod oauth;
mod pool;
pub mod sse;
mod traced_http;

pub use cache::{McpTool, ToolList};
pub use error::McpError;
pub use pool::McpPool;

/// Calls in flight on each of a shared provider's sessions at which it opens one more (where
/// `max_sessions` allows). Low enough that a loaded provider spreads out within a second, high
/// enough that a few records calling tools never start a second process.
pub const BUSY_SESSION_CALLS: usize = 8;

use serde::Serialize;
use utoipa::ToSchema;
use uuid::Uuid;

use crate::config::{McpTransport, SessionScope};

/// Who a call is made for; picks the session of providers with `session_scope: per_job` or
/// `per_record` (shared providers ignore it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CallScope {
    /// The job (or preview request).
    pub job: Uuid,
    /// The record.
    pub record: Uuid,
}

/// A provider's connection state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ProviderState {
    /// Not used yet (connects on first use).
    Idle,
    /// A connect is under way.
    Connecting,
    /// At least one live session.
    Connected,
    /// The last connect failed; calls fail fast until `retry_in_ms` passes.
    Unavailable,
}

/// What `/readyz` and `GET /v1/tools` report per provider. Holds no secrets.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ProviderStatus {
    /// Provider name.
    pub name: String,
    /// `stdio`, `sse` or `streamable_http`.
    #[schema(value_type = String)]
    pub transport: McpTransport,
    /// `shared`, `per_job` or `per_record`.
    #[schema(value_type = String)]
    pub session_scope: SessionScope,
    /// Connection state.
    pub state: ProviderState,
    /// Live sessions.
    pub sessions: usize,
    /// Tool names from the cache, when a list has been fetched.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<String>>,
    /// Sessions replaced after they died.
    pub reconnects: u64,
    /// Why the last connect failed, as a code (`connect_timeout`: no answer to `initialize`
    /// within `connect_timeout_sec`; `connect_failed`: anything else), while the provider is
    /// unavailable. Any key may read this list, so the server's own text (which may echo what
    /// it was sent) stays in the log.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_error_code: Option<&'static str>,
    /// Time until the next connect attempt, while unavailable.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retry_in_ms: Option<u64>,
}
