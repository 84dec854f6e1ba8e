//! `GET /v1/tools`: the MCP providers' state and what each server tool config offers.

use axum::Json;
use axum::extract::State;
use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::error::ErrorBody;
use crate::mcp::ProviderStatus;
use crate::state::AppState;

pub(super) fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(list_tools))
}

/// The tool layer as this replica sees it.
#[derive(Debug, Serialize, ToSchema)]
pub struct ToolsResponse {
    /// Every MCP provider of the server config, in name order.
    pub providers: Vec<ProviderStatus>,
    /// Every tool config of the server config, resolved.
    pub tool_configs: Vec<ToolConfigView>,
}

/// One server tool config and the tools it offers.
#[derive(Debug, Serialize, ToSchema)]
pub struct ToolConfigView {
    /// The alias LLM columns use.
    pub tool_alias: String,
    /// Providers (MCP providers or inline tools), in routing order.
    pub providers: Vec<String>,
    /// The allow list, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allow_tools: Option<Vec<String>>,
    /// Tool-calling turns before calls are refused.
    pub max_tool_call_turns: u32,
    /// Per-call deadline, if set.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout_sec: Option<f64>,
    /// The tools offered to models (before any model's `mcp_servers` filter).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<ToolView>>,
    /// Why the tools could not be listed (`duplicate_tool_name`, `unknown_tool`,
    /// `mcp_unavailable`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<ToolConfigError>,
}

/// A tool as models are offered it.
#[derive(Debug, Serialize, ToSchema)]
pub struct ToolView {
    /// The tool name.
    pub name: String,
    /// Its description.
    pub description: String,
    /// The MCP provider that serves it, or `inline`.
    pub provider: String,
    /// Its argument schema.
    #[schema(value_type = Object)]
    pub input_schema: Value,
}

/// A tool config that cannot be resolved right now.
#[derive(Debug, Serialize, ToSchema)]
pub struct ToolConfigError {
    /// Stable code.
    pub code: String,
    /// What is wrong.
    pub message: String,
}

/// List MCP providers and tool configs
///
/// Each MCP provider's connection state (`idle`, `connecting`, `connected`, `unavailable`),
/// live sessions, reconnects and cached tool names; and each server tool config with the
/// tools it offers. Listing connects to providers not yet connected (bounded by their
/// `connect_timeout_sec`); the lists come from the shared cache.
#[utoipa::path(get, path = "/v1/tools", tag = "tools",
    responses(
        (status = 200, description = "Providers and tool configs", body = ToolsResponse),
        (status = 503, description = "The database is unreachable", body = ErrorBody),
    ))]
pub async fn list_tools(State(state): State<AppState>) -> Json<ToolsResponse> {
    let hub = &state.tools;
    let views = state.config.tool_configs.iter().map(|cfg| async move {
        let (tools, error) = match hub.toolset(cfg, None, None).await {
            Ok(ts) => (
                Some(
                    ts.describe()
                        .into_iter()
                        .map(|(spec, provider)| ToolView {
                            name: spec.name.clone(),
                            description: spec.description.clone(),
                            provider: provider.to_owned(),
                            input_schema: spec.parameters.clone(),
                        })
                        .collect(),
                ),
                None,
            ),
            Err(e) => (
                None,
                Some(ToolConfigError {
                    code: e.code.to_owned(),
                    message: e.message,
                }),
            ),
        };
        ToolConfigView {
            tool_alias: cfg.tool_alias.clone(),
            providers: cfg.providers.clone(),
            allow_tools: cfg.allow_tools.clone(),
            max_tool_call_turns: cfg.max_tool_call_turns,
            timeout_sec: cfg.timeout_sec,
            tools,
            error,
        }
    });
    let tool_configs = futures::future::join_all(views).await;
    Json(ToolsResponse {
        providers: hub.pool().status(),
        tool_configs,
    })
}
