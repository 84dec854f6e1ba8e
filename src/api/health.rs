//! `/healthz` (the process is up), `/readyz` (the database answers) and `/metrics` (open, or
//! behind `server.metrics_token`).

use std::time::Duration;

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use secrecy::ExposeSecret;
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::dto::HealthResponse;
use crate::error::{ApiError, ErrorBody};
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
/// Counters of records, jobs, LLM requests and tokens (by model alias; aliases a job defines
/// itself are counted as `job_defined`), in the Prometheus text format. Open like `/healthz`
/// unless the server config sets `server.metrics_token`; then it needs
/// `Authorization: Bearer <token>`.
#[utoipa::path(get, path = "/metrics", tag = "health",
    security(("metrics_token" = []), ()),
    responses(
        (status = 200, description = "Prometheus exposition text", content_type = "text/plain", body = String),
        (status = 401, description = "`server.metrics_token` is set and the bearer token is missing or wrong (`unauthorized`)", body = ErrorBody),
    ))]
pub async fn get_metrics(
    State(state): State<AppState>,
    headers: HeaderMap,
) -> Result<([(axum::http::HeaderName, &'static str); 1], String), ApiError> {
    if let Some(token) = &state.config.server.metrics_token
        && !bearer_matches(&headers, token.expose_secret())
    {
        return Err(ApiError::Unauthorized(
            "/metrics needs `Authorization: Bearer <server.metrics_token>`".into(),
        ));
    }
    Ok((
        [(
            axum::http::header::CONTENT_TYPE,
            "text/plain; version=0.0.4",
        )],
        crate::metrics::render(),
    ))
}

/// Whether the request carries `Authorization: Bearer <expected>`. The scheme is
/// case-insensitive (RFC 9110); the tokens are compared as SHA-256 digests in constant time, so
/// timing reveals neither the token nor how much of it matched.
fn bearer_matches(headers: &HeaderMap, expected: &str) -> bool {
    let Some(value) = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
    else {
        return false;
    };
    let Some(token) = crate::auth::bearer_token(value.trim()) else {
        return false;
    };
    let presented: [u8; 32] = Sha256::digest(token.as_bytes()).into();
    let expected: [u8; 32] = Sha256::digest(expected.as_bytes()).into();
    bool::from(presented.ct_eq(&expected))
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
/// `200` when the database takes a write (one row) within 2 s, else `503` with what failed. `checks.mcp`
/// reports each MCP provider's state (`idle`, `connecting`, `connected`, `unavailable`) and
/// `checks.python_validator` the ruff Python code validators run (`ruff <version> (<path>)`,
/// `installing ruff <version>`, `unavailable: <why>`), without affecting readiness.
#[utoipa::path(get, path = "/readyz", tag = "health",
    responses(
        (status = 200, description = "Ready", body = HealthResponse),
        (status = 503, description = "Not ready", body = HealthResponse),
    ))]
pub async fn readyz(State(state): State<AppState>) -> (StatusCode, Json<HealthResponse>) {
    let db = match tokio::time::timeout(READY_TIMEOUT, state.jobs.probe_store()).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "readiness: database check failed");
            Err("unreachable or not writable".to_owned())
        }
        Err(_) => Err("timed out".to_owned()),
    };
    // A write of one row still succeeds on a disk with a few pages left while every real write
    // fails (`507 storage_full`): the embedded database's free space is checked as well.
    let db = db.and_then(|()| match &state.config.database.url {
        Some(_) => Ok(()),
        None => embedded_disk_problem(&state.config.database.sqlite_path).map_or(Ok(()), Err),
    });
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
    // Reported, not gating: only jobs with Python code validators need ruff.
    checks.insert(
        "python_validator".into(),
        Value::String(state.jobs.validators().ruff_status()),
    );
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

/// Free space under which the embedded database's disk counts as full for readiness: a few
/// records' and blocks' worth, so the server is taken out of rotation before writes fail.
const MIN_FREE_BYTES: u64 = 64 << 20;

/// What is wrong with the disk of the SQLite file at `path`, if anything.
fn embedded_disk_problem(path: &std::path::Path) -> Option<String> {
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => std::path::Path::new("."),
    };
    let free = rustix::fs::statvfs(dir)
        .ok()
        .map(|s| s.f_bavail.saturating_mul(s.f_frsize))?;
    disk_problem(free)
}

/// `free` bytes left on the database's disk: a problem under [`MIN_FREE_BYTES`].
fn disk_problem(free: u64) -> Option<String> {
    (free < MIN_FREE_BYTES).then(|| {
        format!(
            "disk nearly full: {} MiB free, under the {} MiB writes need",
            free >> 20,
            MIN_FREE_BYTES >> 20
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_nearly_full_disk_is_not_ready() {
        assert_eq!(disk_problem(MIN_FREE_BYTES), None);
        let problem = disk_problem(10 << 20).unwrap();
        assert!(problem.contains("10 MiB free"), "{problem}");
        // The test machine's own disk has room.
        assert_eq!(
            embedded_disk_problem(std::path::Path::new("synthgate.db")),
            None
        );
    }
}
