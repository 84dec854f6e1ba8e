//! `GET /v1/tools`: the MCP providers' state and what each server tool config offers, as far
//! as the calling API key may use them.

use std::collections::{HashMap, HashSet};

use axum::Json;
use axum::extract::State;
use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::auth::Caller;
use crate::domain::models::ToolConfig;
use crate::mcp::ProviderStatus;
use crate::state::AppState;

pub(super) fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(list_tools))
}

/// The tool layer as this replica sees it.
#[derive(Debug, Serialize, ToSchema)]
pub struct ToolsResponse {
    /// The MCP providers of the server config, in name order (for a key with `allow_tools`:
    /// those its tool configs route to, listing only the tools they offer).
    pub providers: Vec<ProviderStatus>,
    /// The tool configs of the server config the key may use, resolved.
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
/// `connect_timeout_sec`); the lists come from the shared cache. An API key with
/// `allow_tools` sees only the tool configs in its list, and only the providers and tools
/// they reach.
#[utoipa::path(get, path = "/v1/tools", tag = "tools",
    responses(
        (status = 200, description = "Providers and tool configs", body = ToolsResponse),
    ))]
pub async fn list_tools(State(state): State<AppState>, caller: Caller) -> Json<ToolsResponse> {
    Json(tools_for(&state, &caller).await)
}

/// What [`list_tools`] answers (also the MCP tool `list_tools`).
pub(super) async fn tools_for(state: &AppState, caller: &Caller) -> ToolsResponse {
    let hub = &state.tools;
    let visible: Vec<&ToolConfig> = state
        .config
        .tool_configs
        .iter()
        .filter(|c| caller.may_use_tools(&c.tool_alias))
        .collect();
    let reach = caller.restricts_tools().then(|| reach(&visible));
    let views = visible.into_iter().map(|cfg| async move {
        let (tools, error) = match hub.toolset(cfg, None, None).await {
            Ok(ts) => (
                Some(
                    ts.describe()
                        .into_iter()
                        .map(|(spec, provider)| ToolView {
                            name: spec.name.clone(),
                            description: spec.description.clone(),
                            provider: provider.to_owned(),
                            input_schema: (*spec.parameters).clone(),
                        })
                        .collect(),
                ),
                None,
            ),
            Err(e) => (
                None,
                Some(ToolConfigError {
                    code: e.code().to_owned(),
                    message: e.to_string(),
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
    // Read after the listing above, so the tool names of providers it connected are there.
    let mut providers = hub.pool().status();
    // A key without a list may bring tool configs of its own over any server provider, so
    // every provider and tool is within its reach; a key with one reaches only these.
    if let Some(reach) = &reach {
        providers.retain(|p| reach.contains_key(p.name.as_str()));
        for p in &mut providers {
            if let (Some(Some(allowed)), Some(tools)) = (reach.get(p.name.as_str()), &mut p.tools) {
                tools.retain(|t| allowed.contains(t.as_str()));
            }
        }
    }
    ToolsResponse {
        providers,
        tool_configs,
    }
}

/// The providers `configs` route to, each with the tools they allow there (`None`: all).
fn reach<'a>(configs: &[&'a ToolConfig]) -> HashMap<&'a str, Option<HashSet<&'a str>>> {
    let mut out: HashMap<&str, Option<HashSet<&str>>> = HashMap::new();
    for cfg in configs {
        for p in &cfg.providers {
            let entry = out
                .entry(p.as_str())
                .or_insert_with(|| Some(HashSet::new()));
            match (&cfg.allow_tools, entry.as_mut()) {
                (None, _) => *entry = None,
                (Some(allow), Some(names)) => names.extend(allow.iter().map(String::as_str)),
                (Some(_), None) => {}
            }
        }
    }
    out
}
