//! The platform's model providers (`GET /apis/models/v2/workspaces/{workspace}/providers`),
//! which the client lists for `get_default_model_providers()`, and the auth discovery its
//! token login reads first.
//!
//! The providers are the server config's model providers: their names and protocols, never
//! their endpoints, keys, headers or `extra_body` (`host_url` is empty). They belong to every
//! workspace and are listed under [`WORKSPACE`]: a model config names one as `p`,
//! `default/p` or `<its workspace>/p` ([`super::platform_config`]).

use std::sync::LazyLock;

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::errors::PlatformErrorBody;
use super::list::PlatformPagination;
use super::views::check_name;
use crate::api::extract::{ApiPath, ApiQuery};
use crate::config::{ModelProviderConfig, ProviderType};
use crate::error::ApiError;
use crate::state::AppState;

/// The workspace the server's providers are listed under.
pub(super) const WORKSPACE: &str = "default";

/// When this process first listed its providers: the config they come from is read at start.
static LISTED_SINCE: LazyLock<String> = LazyLock::new(|| chrono::Utc::now().to_rfc3339());

/// A model provider (the platform's `ModelProvider`).
#[derive(Debug, Serialize, ToSchema)]
pub struct PlatformProvider {
    /// `default/<name>`.
    pub id: String,
    /// The name model configs use.
    pub name: String,
    /// Always `default`.
    pub workspace: String,
    /// `openai` or `anthropic`.
    pub provider_type: &'static str,
    /// Always empty: a provider's endpoint is not shown.
    pub host_url: &'static str,
    /// Always empty: any model id may be asked of the provider.
    pub enabled_models: Vec<String>,
    /// Always `READY`.
    pub status: &'static str,
    /// RFC 3339: when this process first listed it.
    #[schema(format = DateTime)]
    pub created_at: String,
    /// The same.
    #[schema(format = DateTime)]
    pub updated_at: String,
}

/// A page of providers.
#[derive(Debug, Serialize, ToSchema)]
pub struct PlatformProviderPage {
    pub data: Vec<PlatformProvider>,
    pub pagination: PlatformPagination,
}

/// Query of the provider list.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct ProvidersQuery {
    /// From 1.
    pub page: Option<u32>,
    /// Default and most 100.
    pub page_size: Option<u32>,
    /// `name` (the default) or `-name`.
    pub sort: Option<String>,
}

fn view(p: &ModelProviderConfig) -> PlatformProvider {
    PlatformProvider {
        id: format!("{WORKSPACE}/{}", p.name),
        name: p.name.clone(),
        workspace: WORKSPACE.to_owned(),
        provider_type: match p.provider_type {
            ProviderType::Openai => "openai",
            ProviderType::Anthropic => "anthropic",
        },
        host_url: "",
        enabled_models: Vec::new(),
        status: "READY",
        created_at: LISTED_SINCE.clone(),
        updated_at: LISTED_SINCE.clone(),
    }
}

/// A workspace path parameter: a name, or `-` for every workspace.
fn check_workspace(workspace: &str) -> Result<(), ApiError> {
    if workspace == "-" {
        Ok(())
    } else {
        check_name("workspace", workspace)
    }
}

/// List model providers
///
/// The server config's model providers, by name; `-` as the workspace lists every
/// workspace's, which are the same. Never an endpoint, key, header or `extra_body`.
#[utoipa::path(get, path = "/apis/models/v2/workspaces/{workspace}/providers",
    operation_id = "platform_list_providers", tag = "nemo-platform",
    params(("workspace" = String, Path, description = "Workspace, or `-` for all"), ProvidersQuery),
    responses(
        (status = 200, description = "A page of providers", body = PlatformProviderPage),
        (status = 422, description = "A malformed query or workspace (`invalid_request`)", body = PlatformErrorBody),
    ))]
pub async fn list_providers(
    State(state): State<AppState>,
    ApiPath(workspace): ApiPath<String>,
    ApiQuery(q): ApiQuery<ProvidersQuery>,
) -> Result<Json<PlatformProviderPage>, ApiError> {
    check_workspace(&workspace)?;
    let page = q.page.unwrap_or(1);
    let size = q.page_size.unwrap_or(100).min(100);
    if page == 0 || size == 0 {
        return Err(ApiError::InvalidRequest(
            "query parameters 'page' and 'page_size' start at 1".into(),
        ));
    }
    let mut all: Vec<&ModelProviderConfig> = state.config.model_providers.iter().collect();
    all.sort_by(|a, b| a.name.cmp(&b.name));
    match q.sort.as_deref() {
        None | Some("name") => {}
        Some("-name") => all.reverse(),
        Some(other) => {
            return Err(ApiError::InvalidRequest(format!(
                "query parameter 'sort': '{other}' is not one of name, -name"
            )));
        }
    }
    let start = usize::try_from(page - 1)
        .unwrap_or(usize::MAX)
        .saturating_mul(size as usize);
    let data: Vec<PlatformProvider> = all
        .iter()
        .skip(start)
        .take(size as usize)
        .map(|p| view(p))
        .collect();
    let total_pages = u32::try_from(all.len().div_ceil(size as usize))
        .unwrap_or(u32::MAX)
        .max(1);
    Ok(Json(PlatformProviderPage {
        pagination: PlatformPagination {
            page,
            page_size: size,
            current_page_size: data.len(),
            total_pages,
        },
        data,
    }))
}

/// Get a model provider
#[utoipa::path(get, path = "/apis/models/v2/workspaces/{workspace}/providers/{name}",
    operation_id = "platform_get_provider", tag = "nemo-platform",
    params(("workspace" = String, Path, description = "Workspace"),
        ("name" = String, Path, description = "Provider name")),
    responses(
        (status = 200, description = "The provider", body = PlatformProvider),
        (status = 404, description = "No such provider (`not_found`)", body = PlatformErrorBody),
        (status = 422, description = "A malformed workspace (`invalid_request`)", body = PlatformErrorBody),
    ))]
pub async fn get_provider(
    State(state): State<AppState>,
    ApiPath((workspace, name)): ApiPath<(String, String)>,
) -> Result<Json<PlatformProvider>, ApiError> {
    check_workspace(&workspace)?;
    state
        .config
        .model_providers
        .iter()
        .find(|p| p.name == name)
        .map(|p| Json(view(p)))
        .ok_or_else(|| ApiError::NotFound(format!("model provider '{name}'")))
}

/// What the platform's auth discovery answers.
#[derive(Debug, Serialize, ToSchema)]
pub struct AuthDiscovery {
    /// Always false: no OIDC login; a key goes in `Authorization: Bearer <key>`, which a
    /// client given `access_token=<key>` sends.
    pub auth_enabled: bool,
}

/// Auth discovery
///
/// The first call of a client made with `access_token=`: no OIDC here, so it sends the
/// token as a bearer key on every request.
#[utoipa::path(get, path = "/apis/auth/discovery", operation_id = "platform_auth_discovery",
    tag = "nemo-platform",
    responses((status = 200, description = "No OIDC", body = AuthDiscovery)))]
pub async fn auth_discovery() -> Json<AuthDiscovery> {
    Json(AuthDiscovery {
        auth_enabled: false,
    })
}
