//! `GET /v1/models`: the server's model aliases the calling API key may use, with what a
//! client needs to pick one (provider, model id, generation type, limits, reachable tools).
//!
//! Built from the server config alone: it answers without calling any provider, and it never
//! shows what carries secrets (a provider's endpoint, api key, headers, or any `extra_body`,
//! which operators may use for credentials the API expects in the body).

use std::collections::HashSet;

use axum::Json;
use axum::extract::State;
use serde::Serialize;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::auth::Caller;
use crate::config::{Config, ProviderType};
use crate::domain::models::{GenerationType, ModelConfig, ToolCallStrategy};
use crate::state::AppState;

pub(super) fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(list_models))
}

/// The model aliases a key may use.
#[derive(Debug, Serialize, ToSchema)]
pub struct ModelsResponse {
    /// The server's model configs the key may use, in config order.
    pub models: Vec<ModelView>,
}

/// One server model alias, without its provider's endpoint or secrets.
#[derive(Debug, Serialize, ToSchema)]
pub struct ModelView {
    /// The name columns use in `model_alias`.
    pub alias: String,
    /// The model provider it calls (a name of the server config).
    pub provider: String,
    /// That provider's wire protocol: `openai` or `anthropic`.
    pub provider_type: String,
    /// The model id sent to the provider.
    pub model: String,
    /// `chat-completion`, `embedding` or `image` (DataDesigner's spelling): which columns
    /// may use it (LLM columns need `chat-completion`).
    pub generation_type: String,
    /// The limits the config sets.
    pub limits: ModelLimits,
    /// `native_api` or `prompt_based`, when the config sets it (absent: `native_api`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_call_strategy: Option<ToolCallStrategy>,
    /// The model's MCP access list (absent: every MCP provider; `[]`: none).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mcp_servers: Option<Vec<String>>,
    /// Chat models: the server tool aliases the key may use that reach at least one provider
    /// this model may call (inline tools are never filtered by `mcp_servers`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_aliases: Option<Vec<String>>,
}

/// A model's inference limits. Absent fields are not set and take the defaults noted.
#[derive(Debug, Serialize, ToSchema)]
pub struct ModelLimits {
    /// Concurrent requests to this provider and model across all jobs (default 4).
    pub max_parallel_requests: u32,
    /// Per-request timeout in seconds (absent: 60).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout_sec: Option<u64>,
    /// Chat models: the cap on generated tokens (absent: the provider's).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u64>,
    /// Embedding models: the vector length asked for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dimensions: Option<u64>,
}

/// List the model aliases this key may use
///
/// The server config's model aliases, in config order; an API key with `allow_models` sees
/// only those in its list. Each comes with its provider's name and protocol, the model id,
/// its generation type, the limits it sets, its MCP access list and the tool aliases a chat
/// model can use. Never a provider's endpoint, api key, headers or `extra_body`.
#[utoipa::path(get, path = "/v1/models", tag = "models",
    responses(
        (status = 200, description = "Model aliases the key may use", body = ModelsResponse),
    ))]
pub async fn list_models(State(state): State<AppState>, caller: Caller) -> Json<ModelsResponse> {
    Json(models_for(&state.config, &caller))
}

/// What [`list_models`] answers: pure, so the rules are read in one place.
pub(super) fn models_for(config: &Config, caller: &Caller) -> ModelsResponse {
    let inline: HashSet<&str> = config.tools.iter().map(|t| t.name.as_str()).collect();
    let models = config
        .model_configs
        .iter()
        .filter(|m| caller.may_use_model(&m.alias))
        .map(|m| view(config, caller, &inline, m))
        .collect();
    ModelsResponse { models }
}

fn view(config: &Config, caller: &Caller, inline: &HashSet<&str>, m: &ModelConfig) -> ModelView {
    let p = &m.inference_parameters;
    let kind = p.kind();
    let provider_type = config
        .model_providers
        .iter()
        .find(|pr| pr.name == m.provider)
        .map_or(ProviderType::Openai, |pr| pr.provider_type);
    let tool_aliases = (kind == Some(GenerationType::ChatCompletion)).then(|| {
        config
            .tool_configs
            .iter()
            .filter(|t| caller.may_use_tools(&t.tool_alias))
            .filter(|t| {
                t.providers.iter().any(|pr| {
                    inline.contains(pr.as_str())
                        || m.mcp_servers
                            .as_ref()
                            .is_none_or(|allowed| allowed.contains(pr))
                })
            })
            .map(|t| t.tool_alias.clone())
            .collect()
    });
    ModelView {
        alias: m.alias.clone(),
        provider: m.provider.clone(),
        provider_type: match provider_type {
            ProviderType::Openai => "openai",
            ProviderType::Anthropic => "anthropic",
        }
        .to_owned(),
        model: m.model.clone(),
        // The config was validated at start, so `kind` is known; the raw name is a fallback.
        generation_type: kind.map_or_else(
            || p.generation_type.clone().unwrap_or_default(),
            |k| k.as_str().to_owned(),
        ),
        limits: ModelLimits {
            max_parallel_requests: p.max_parallel_requests,
            timeout_sec: p.timeout,
            max_tokens: p.max_tokens,
            dimensions: p.dimensions,
        },
        tool_call_strategy: m.tool_call_strategy,
        mcp_servers: m.mcp_servers.clone(),
        tool_aliases,
    }
}
