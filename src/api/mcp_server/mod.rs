//! `/mcp`: the API as MCP tools over streamable HTTP, so an agent (Claude Desktop, Claude Code,
//! Cursor, any MCP client) can preview a config, submit a job, follow it and read its records
//! and traces. (`crate::mcp` is the other direction: the client pool for the tools LLM columns
//! call.)
//!
//! * **The same doors as `/v1`.** Each tool calls what the REST handler calls, takes the same
//!   input types and returns the same DTOs as structured content; its output schema is the
//!   DTO's OpenAPI schema (see `schemas`).
//! * **The same keys.** The auth middleware guards `/mcp` as it guards `/v1` (401 with the API's
//!   error envelope without a valid key) and puts the [`Caller`] into the request's extensions;
//!   rmcp hands the request's `http::request::Parts` to the tool, which acts as that key:
//!   ownership (another key's job is `job_not_found`) and model/tool allow lists.
//! * **Errors are tool errors** (`isError: true`), never JSON-RPC errors: the text carries the
//!   API's envelope as JSON, `{"error": {"code", "message", "details"?}}`. Not as structured
//!   content: that must match the tool's output schema (the success result), and clients that
//!   check it (the MCP Inspector) showed a schema error instead of `job_not_found`.
//!   Only protocol problems (an unknown tool, a malformed request) are JSON-RPC errors.
//! * **Stateless.** No MCP session lives in the process (rmcp's `legacy_session_mode` off): each
//!   POST is answered on its own, so replicas behind a load balancer need no sticky sessions and
//!   a restart loses nothing. An answer is a plain JSON body, unless the tool sends progress
//!   notifications first; then it is an SSE stream carrying them and the result. Without
//!   sessions there is no standalone GET stream; nothing here needs one.
//! * **Deadlines.** Each tool call has one (`server.request_timeout_sec`; `wait_job` its own
//!   bound) and ends with a `request_timeout` tool error past it. The router's request deadline
//!   covers only reading the message here (see `api::mcp_read_timeout`), so it never races a
//!   tool's.
//! * **Shutdown.** The open streams end when the service's shutdown token fires, so they do not
//!   hold the listener's drain open.

mod params;
mod progress;
mod schemas;
mod tools;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::http::request::Parts;
use rmcp::handler::server::tool::{ToolCallContext, ToolRouter};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, Implementation,
    ListPromptsRequestMethod, ListPromptsResult, ListResourceTemplatesRequestMethod,
    ListResourceTemplatesResult, ListResourcesRequestMethod, ListResourcesResult, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde::Serialize;
use tracing::Instrument as _;

use crate::auth::Caller;
use crate::error::ApiError;
use crate::state::AppState;

/// Where the service is mounted.
pub const PATH: &str = "/mcp";

/// Whether `path` is the MCP endpoint (its answers are the protocol's, not the API's envelope).
pub fn is_mcp(path: &str) -> bool {
    path == PATH
}

/// A JSON POST that is not a JSON-RPC message gets JSON-RPC's own answer, `400` with `-32700`
/// (not JSON) or `-32600` (JSON, but no request, notification or response), instead of rmcp's
/// `415` with a plain-text reason a client cannot act on. `None` lets the message through.
pub fn unreadable_message(
    parts: &axum::http::request::Parts,
    body: &[u8],
) -> Option<axum::response::Response> {
    use axum::response::IntoResponse;
    let json = parts
        .headers
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if parts.method != axum::http::Method::POST || !json {
        return None;
    }
    // The same strict reading as `/v1` bodies: duplicate keys, runaway nesting and size are
    // refused before rmcp parses the message (it would keep the last of two keys).
    let (code, message) = match super::decode::json(body) {
        Err(super::decode::DecodeError::Syntax(e)) => {
            (-32700, format!("Parse error: the body is not JSON ({e})"))
        }
        Err(super::decode::DecodeError::DuplicateKey(e)) => {
            (-32600, format!("Invalid Request: {e}"))
        }
        Ok(v) => match serde_json::from_value::<rmcp::model::ClientJsonRpcMessage>(v) {
            Ok(_) => return None,
            Err(e) => (
                -32600,
                format!("Invalid Request: not a JSON-RPC 2.0 message ({e})"),
            ),
        },
    };
    let body = serde_json::json!({"jsonrpc": "2.0", "id": null,
        "error": {"code": code, "message": message}});
    Some((axum::http::StatusCode::BAD_REQUEST, axum::Json(body)).into_response())
}

/// The tower service to mount at [`PATH`].
pub fn service(state: AppState) -> StreamableHttpService<SynthgateMcp, NeverSessionManager> {
    let config = StreamableHttpServerConfig::default()
        .with_legacy_session_mode(false)
        .with_json_response(true)
        .with_max_request_body_bytes(state.config.server.max_body_bytes)
        // Ends every open response stream at shutdown, so the drain does not wait on them.
        .with_cancellation_token(state.shutdown.child_token())
        // rmcp's own check accepts loopback `Host`s only. The router's guard
        // (`api::host_guard`) checks `Host` and `Origin` on every route, `/mcp` included,
        // against the configured names, so this one would only refuse what the operator allowed.
        .disable_allowed_hosts();
    let server = SynthgateMcp {
        state,
        tools: Arc::new(SynthgateMcp::router()),
    };
    // rmcp calls the factory for every POST, so a handler is two handle clones.
    StreamableHttpService::new(
        move || Ok(server.clone()),
        Arc::new(NeverSessionManager::default()),
        config,
    )
}

/// The MCP server: the app's state and the tools, built once.
#[derive(Clone)]
pub struct SynthgateMcp {
    state: AppState,
    tools: Arc<ToolRouter<SynthgateMcp>>,
}

impl SynthgateMcp {
    /// The tools, with the output schemas of their results.
    fn router() -> ToolRouter<Self> {
        let mut router = Self::tool_router();
        let components = schemas::Components::from_api();
        for (tool, component) in tools::OUTPUTS {
            if let Some(route) = router.map.get_mut(*tool) {
                route.attr.output_schema = components.output_schema(component);
            }
        }
        router
    }

    /// Who is calling: the key the auth middleware resolved. With keys configured a tool call
    /// without one is refused (the middleware should have stopped it; this fails closed).
    fn caller(&self, ctx: &RequestContext<RoleServer>) -> Result<Caller, ApiError> {
        let caller = ctx
            .extensions
            .get::<Parts>()
            .and_then(|p| p.extensions.get::<Caller>())
            .cloned();
        match caller {
            Some(c) => Ok(c),
            None if self.state.keys.enabled() => Err(ApiError::Unauthorized(
                "missing `Authorization: Bearer <api key>` header".into(),
            )),
            None => Ok(Caller::default()),
        }
    }

    /// The deadline of an ordinary tool call: the API's request deadline.
    fn request_timeout(&self) -> Duration {
        Duration::from_secs(self.state.config.server.request_timeout_sec)
    }

    /// Runs one tool call as its caller, within `limit`, and shapes the result: the value as
    /// structured content, or the API error as a tool error. Cancelled (the client went away,
    /// or sent `notifications/cancelled`) drops the work, which cancels what it started.
    async fn answer<T, F, Fut>(
        &self,
        tool: &'static str,
        ctx: &RequestContext<RoleServer>,
        limit: Duration,
        work: F,
    ) -> Result<CallToolResult, ErrorData>
    where
        T: Serialize,
        F: FnOnce(Caller) -> Fut,
        Fut: Future<Output = Result<T, ApiError>>,
    {
        let span = tracing::info_span!("mcp.tool", mcp.tool = tool);
        let run = async {
            let caller = self.caller(ctx)?;
            tokio::select! {
                out = tokio::time::timeout(limit, work(caller)) => out.unwrap_or(Err(ApiError::Timeout)),
                () = ctx.ct.cancelled() => Err(ApiError::InvalidRequest("the tool call was cancelled".into())),
            }
        };
        match run.instrument(span.clone()).await {
            Ok(value) => serde_json::to_value(value)
                .map(CallToolResult::structured)
                .map_err(|e| {
                    ErrorData::internal_error(format!("serializing the result: {e}"), None)
                }),
            Err(e) => {
                let _enter = span.enter();
                Ok(tool_error(&e))
            }
        }
    }
}

/// An API error as a tool error, logged once (as the REST middleware logs it).
fn tool_error(e: &ApiError) -> CallToolResult {
    if e.status().is_server_error() {
        tracing::error!(error.code = e.code(), error.cause = %e.cause(), "tool call failed");
    } else {
        tracing::info!(error.code = e.code(), error.message = %e, "tool call rejected");
    }
    // An envelope of strings always serializes; keep the code if it ever did not.
    let text = serde_json::to_string(&e.body()).unwrap_or_else(|_| e.code().to_owned());
    CallToolResult::error(vec![rmcp::model::ContentBlock::text(text)])
}

impl ServerHandler for SynthgateMcp {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("synthgate", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "synthgate generates synthetic datasets from NeMo DataDesigner configs. Try a \
                 config with preview_dataset (up to 10 records, with LLM traces, nothing stored), \
                 then submit_job; follow it with wait_job or get_job, read rows with get_records \
                 and one record's LLM messages with get_record_trace. list_models and list_tools \
                 name the model and tool aliases a config may use; list_datasets the uploaded \
                 seed datasets. Errors are tool errors whose content is \
                 {\"error\": {\"code\", \"message\"}} with the REST API's codes.",
            )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.tools.list_all()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let call = ToolCallContext::new(self, request, context);
        self.tools.call(call).await
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.tools.get(name).cloned()
    }

    // No `prompts` or `resources` capability is declared, so their methods do not exist here
    // (rmcp's defaults answered empty lists, as if the capability were there).
    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        Err(ErrorData::method_not_found::<ListPromptsRequestMethod>())
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        Err(ErrorData::method_not_found::<ListResourcesRequestMethod>())
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        Err(ErrorData::method_not_found::<
            ListResourceTemplatesRequestMethod,
        >())
    }
}
