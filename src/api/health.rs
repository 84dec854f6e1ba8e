//! `/healthz` (the process is up) and `/readyz` (the database answers).

use std::time::Duration;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde_json::{Map, Value};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::dto::HealthResponse;
use crate::state::AppState;

/// A readiness probe must answer quickly even when the database hangs.
const READY_TIMEOUT: Duration = Duration::from_secs(2);

pub(super) fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(healthz))
        .routes(routes!(readyz))
        .routes(routes!(get_metrics))
}

/// Prometheus metrics
///
/// Counters of records, jobs, LLM requests and tokens (by model alias), in the Prometheus text
/// format. Open like `/healthz`: it carries no secrets and no per-job data.
#[utoipa::path(get, path = "/metrics", tag = "health",
    responses((status = 200, description = "Prometheus exposition text", content_type = "text/plain", body = String)))]
pub async fn get_metrics() -> ([(axum::http::HeaderName, &'static str); 1], String) {
    (
        [(
            axum::http::header::CONTENT_TYPE,
            "text/plain; version=0.0.4",
        )],
        crate::metrics::render(),
    )
}

/// Liveness
///
/// `200` while the process serves HTTP. Never checks dependencies, so an orchestrator does not
/// restart a healthy process because its database is briefly away.
#[utoipa::path(get, path = "/healthz", tag = "health",
    responses((status = 200, description = "Up", body = HealthResponse)))]
pub async fn healthz() -> Json<HealthResponse> {
    Json(HealthResponse {
        status: "ok".into(),
        checks: None,
    })
}

/// Readiness
///
/// `200` when the database answers within 2 s, else `503` with what failed. `checks.mcp`
/// reports each MCP provider's state (`idle`, `connecting`, `connected`, `unavailable`)
/// without affecting readiness.
#[utoipa::path(get, path = "/readyz", tag = "health",
    responses(
        (status = 200, description = "Ready", body = HealthResponse),
        (status = 503, description = "Not ready", body = HealthResponse),
    ))]
pub async fn readyz(State(state): State<AppState>) -> (StatusCode, Json<HealthResponse>) {
    let db = match tokio::time::timeout(READY_TIMEOUT, state.store.ping()).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "readiness: database check failed");
            Err("unreachable".to_owned())
        }
        Err(_) => Err("timed out".to_owned()),
    };
    let mut checks = Map::new();
    let ready = db.is_ok();
    checks.insert(
        "database".into(),
        Value::String(db.err().unwrap_or_else(|| "ok".into())),
    );
    // Reported, not gating: jobs without tools still run while an MCP server is away, and
    // records that need it get `Error:` tool results instead of waiting.
    let providers = state.tools.pool().status();
    if !providers.is_empty() {
        let mcp: Map<String, Value> = providers
            .into_iter()
            .map(|p| {
                (
                    p.name.clone(),
                    serde_json::to_value(p.state).unwrap_or(Value::Null),
                )
            })
            .collect();
        checks.insert("mcp".into(), Value::Object(mcp));
    }
    let status = if ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (
        status,
        Json(HealthResponse {
            status: if ready { "ready" } else { "not_ready" }.into(),
            checks: Some(checks),
        }),
    )
}
