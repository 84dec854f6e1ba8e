//! `GET /v1/data-designer/settings`: the defaults the client offers a notebook user
//! (`get_default_model_configs()`, `get_default_model_providers()`).

use axum::Json;
use axum::extract::State;
use serde::Serialize;
use serde_json::{Map, Value};
use utoipa::ToSchema;

use crate::api::models::models_for;
use crate::auth::Caller;
use crate::state::AppState;

/// The client's `SettingsResponse`.
#[derive(Debug, Serialize, ToSchema)]
pub struct SettingsResponse {
    /// The model configs a config may name, and the default provider.
    pub defaults: SettingsDefaults,
    /// The providers of those model configs: names and protocols, never endpoints or keys.
    pub model_providers: Vec<DisplayModelProvider>,
}

/// The client's `SettingsDefaults`.
#[derive(Debug, Serialize, ToSchema)]
pub struct SettingsDefaults {
    /// The server's model configs this key may use, in Data Designer's shape.
    #[schema(value_type = Vec<Object>)]
    pub model_configs: Vec<Value>,
    /// The provider of the first of them (empty when there is none).
    pub model_provider: String,
}

/// The client's `DisplayModelProvider`.
#[derive(Debug, Serialize, ToSchema)]
pub struct DisplayModelProvider {
    /// The provider's name, as model configs name it.
    pub name: String,
    /// `openai` or `anthropic`.
    pub provider_type: String,
}

/// Data Designer settings
///
/// The server's model configs this key may use, as Data Designer model configs (alias,
/// model, provider, inference parameters), and their providers' names and protocols. Never a
/// provider's endpoint, key, headers or `extra_body`.
#[utoipa::path(get, path = "/v1/data-designer/settings", tag = "data-designer",
    responses(
        (status = 200, description = "Model configs and providers", body = SettingsResponse),
    ))]
pub async fn settings(State(state): State<AppState>, caller: Caller) -> Json<SettingsResponse> {
    let models = models_for(&state.config, &caller).models;
    let mut providers: Vec<DisplayModelProvider> = Vec::new();
    let model_configs = models
        .iter()
        .map(|m| {
            if !providers.iter().any(|p| p.name == m.provider) {
                providers.push(DisplayModelProvider {
                    name: m.provider.clone(),
                    provider_type: m.provider_type.clone(),
                });
            }
            let mut params = Map::new();
            params.insert(
                "max_parallel_requests".into(),
                m.limits.max_parallel_requests.into(),
            );
            if let Some(t) = m.limits.max_tokens {
                params.insert("max_tokens".into(), t.into());
            }
            if let Some(t) = m.limits.timeout_sec {
                params.insert("timeout".into(), t.into());
            }
            serde_json::json!({
                "alias": m.alias,
                "model": m.model,
                "provider": m.provider,
                "inference_parameters": params,
            })
        })
        .collect();
    Json(SettingsResponse {
        defaults: SettingsDefaults {
            model_configs,
            model_provider: models
                .first()
                .map(|m| m.provider.clone())
                .unwrap_or_default(),
        },
        model_providers: providers,
    })
}
