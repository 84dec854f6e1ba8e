//! Each request's span: for the log, its method, path and request id; when spans are exported,
//! also an HTTP server span as the semantic conventions name it (`POST /v1/jobs`), a child of
//! the caller's `traceparent`, with the response's status.

use std::time::Duration;

use axum::extract::{MatchedPath, Request};
use axum::http::Response;
use tower_http::trace::{DefaultOnResponse, OnResponse};
use tracing::field::Empty;
use tracing_opentelemetry::OpenTelemetrySpanExt;

use super::REQUEST_ID;
use crate::telemetry;

/// Probes and scrapes: a span in the log when it asks for `debug`, never a trace of its own
/// every few seconds.
fn is_probe(path: &str) -> bool {
    matches!(path, "/healthz" | "/readyz" | "/metrics")
}

/// The span of `req`.
pub(super) fn make(req: &Request) -> tracing::Span {
    let id = req
        .headers()
        .get(REQUEST_ID)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let (method, path) = (req.method(), req.uri().path());
    if !telemetry::exporting() {
        return tracing::info_span!("http", method = %method, path = %path, request.id = %id);
    }
    if is_probe(path) {
        return tracing::debug_span!("http", method = %method, path = %path, request.id = %id);
    }
    // The route template, not the path: one span name per endpoint, not per job id.
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map_or(path, MatchedPath::as_str);
    let span = tracing::info_span!(
        "http",
        method = %method,
        path = %path,
        request.id = %id,
        otel.name = %format_args!("{method} {route}"),
        otel.kind = "server",
        http.request.method = %method,
        http.route = %route,
        url.path = %path,
        http.response.status_code = Empty,
        otel.status_code = Empty,
    );
    if let Some(parent) = telemetry::extract_parent(req.headers()) {
        let _ = span.set_parent(parent);
    }
    span
}

/// Records the status on the span (a 5xx marks it failed), then logs as tower-http does.
pub(super) fn on_response<B>(resp: &Response<B>, latency: Duration, span: &tracing::Span) {
    let status = resp.status();
    span.record("http.response.status_code", i64::from(status.as_u16()));
    if status.is_server_error() {
        span.record("otel.status_code", "ERROR");
    }
    DefaultOnResponse::default().on_response(resp, latency, span);
}
