//! The HTTP API: `router(state)` merges the resource routers and wraps them in the middleware
//! stack (request id, trace, timeout, body limit, `Host`/`Origin` guard, panic catcher, error
//! envelope), and the web
//! UI's static page at `/ui`.

mod body_pace;
mod data_designer;
mod datasets;
mod downloads;
pub(crate) mod platform;
use crate::decode;
pub mod dto;
mod events;
pub mod extract;
mod health;
pub mod host_guard;
mod hub;
mod jobs;
mod long_requests;
pub mod mcp_server;
mod models;
pub mod openapi;
mod outputs;
mod preview;
mod records;
mod request_span;
mod tools;
pub mod ui;

use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::{HeaderName, Method, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use tower::ServiceBuilder;
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer};
use tower_http::trace::TraceLayer;
use utoipa::OpenApi;
use utoipa_axum::router::OpenApiRouter;
use utoipa_swagger_ui::SwaggerUi;

use crate::error::{ApiError, LoggedError};
use crate::state::AppState;

const REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

/// Every documented route, with its OpenAPI paths.
pub(crate) fn openapi_router() -> OpenApiRouter<AppState> {
    OpenApiRouter::with_openapi(openapi::ApiDoc::openapi())
        .merge(jobs::router())
        .merge(records::router())
        .merge(outputs::router())
        .merge(events::router())
        .merge(preview::router())
        .merge(health::router())
        .merge(tools::router())
        .merge(datasets::router())
        .merge(models::router())
        .merge(data_designer::router())
        .merge(platform::router())
        .merge(hub::router())
}

/// The application router with its middleware.
pub fn router(state: AppState) -> Router {
    let (routes, spec) = openapi_router().split_for_parts();
    let spec = openapi::with_auth(spec);
    let docs = if state.config.server.docs {
        Router::new().merge(SwaggerUi::new("/docs").url("/openapi.json", spec))
    } else {
        let spec = std::sync::Arc::new(spec);
        Router::new().route(
            "/openapi.json",
            axum::routing::get(move || {
                let spec = spec.clone();
                async move { axum::Json((*spec).clone()) }
            }),
        )
    };
    // The web UI is public static code (see `ui`); the auth middleware guards `/v1` only.
    let ui = if state.config.server.ui {
        ui::router()
    } else {
        Router::new()
    };
    // The API as MCP tools; behind the keys like `/v1` (see `auth::authenticate`).
    let mcp = if state.config.server.mcp {
        Router::new().route_service(mcp_server::PATH, mcp_server::service(state.clone()))
    } else {
        Router::new()
    };
    let timeout = Duration::from_secs(state.config.server.request_timeout_sec);
    let body_limit = state.config.server.max_body_bytes;
    let keys = state.keys.clone();
    routes
        .merge(docs)
        .merge(ui)
        .merge(mcp)
        .fallback(|req: Request| async move { ApiError::NotFound(req.uri().path().to_owned()) })
        .method_not_allowed_fallback(|| async { ApiError::MethodNotAllowed })
        .layer(middleware::from_fn_with_state(
            (
                timeout,
                body_limit,
                long_requests::LongRequests::new(
                    state.config.server.long_request_limit(),
                    state.config.server.long_request_limit_per_key(),
                ),
            ),
            request_timeout,
        ))
        .layer(middleware::from_fn_with_state(
            keys,
            crate::auth::authenticate,
        ))
        .layer(middleware::from_fn_with_state(
            host_guard::HostGuard::new(&state.config.server),
            host_guard::check_host_and_origin,
        ))
        .layer(DefaultBodyLimit::max(body_limit))
        .layer(middleware::from_fn_with_state(body_limit, error_envelope))
        .layer(middleware::from_fn(platform::errors::with_detail))
        .layer(
            ServiceBuilder::new()
                .layer(SetRequestIdLayer::new(REQUEST_ID, MakeRequestUuid))
                .layer(
                    TraceLayer::new_for_http()
                        .make_span_with(request_span::make)
                        .on_response(request_span::on_response),
                )
                .layer(PropagateRequestIdLayer::new(REQUEST_ID))
                .layer(CatchPanicLayer::custom(|_| {
                    ApiError::Internal("handler panicked".into()).into_response()
                })),
        )
        .with_state(state)
}

/// Cuts ordinary requests at `server.request_timeout_sec`; event streams and exports are exempt
/// because they are long by design, and dataset uploads because a large file on a slow link
/// takes as long as it takes (they time out when the client stalls instead). Those, and
/// `/mcp`'s server-sent stream, are bounded in number instead (`server.max_long_requests`).
async fn request_timeout(
    State((limit, body_limit, long)): State<(Duration, usize, long_requests::LongRequests)>,
    req: Request,
    next: Next,
) -> Response {
    // The key's name (authentication ran first): its share of the long requests.
    let key = req
        .extensions()
        .get::<crate::auth::Caller>()
        .and_then(|c| c.owner().map(str::to_owned));
    let key = key.as_deref();
    if mcp_server::is_mcp(req.uri().path()) {
        if req.method() == Method::GET {
            return long.run(key, next.run(req)).await;
        }
        return mcp_read_timeout(limit, body_limit, &long, key, req, next).await;
    }
    if records::is_streaming(req.uri().path(), req.uri().query())
        || outputs::is_streaming(req.uri().path())
        || datasets::is_upload(req.method(), req.uri().path())
        || data_designer::is_streaming(req.method(), req.uri().path())
        || platform::is_streaming(req.method(), req.uri().path())
    {
        return long.run(key, next.run(req)).await;
    }
    let handled = async {
        match body_pace::read(req, &long, key, body_limit).await {
            Ok(req) => next.run(req).await,
            Err(refused) => refused,
        }
    };
    match tokio::time::timeout(limit, handled).await {
        Ok(resp) => resp,
        Err(_) => ApiError::Timeout.into_response(),
    }
}

/// On `/mcp`, only reading the message is cut at `server.request_timeout_sec`. The answer may
/// wait for a tool (it is sent with the tool's result), and each tool has its own deadline
/// that ends it with a `request_timeout` tool error, which the client can attribute; cutting
/// the response here would race it with a bare HTTP error. Reading here also bounds the body
/// at `server.max_body_bytes` (the `DefaultBodyLimit` layer's) before rmcp sees it.
async fn mcp_read_timeout(
    limit: Duration,
    body_limit: usize,
    long: &long_requests::LongRequests,
    key: Option<&str>,
    req: Request,
    next: Next,
) -> Response {
    let read = body_pace::read(req, long, key, body_limit);
    match tokio::time::timeout(limit, read).await {
        Ok(Ok(req)) => {
            let (parts, body) = req.into_parts();
            // In memory already: the paced read buffered it whole.
            let bytes = axum::body::to_bytes(body, usize::MAX)
                .await
                .unwrap_or_default();
            if let Some(refused) = mcp_server::unreadable_message(&parts, &bytes) {
                return refused;
            }
            next.run(Request::from_parts(parts, Body::from(bytes)))
                .await
        }
        Ok(Err(refused)) => refused,
        Err(_) => ApiError::Timeout.into_response(),
    }
}

/// Logs each error once, inside the request span, and turns any bare error response (from axum
/// or tower layers) into the standard envelope so clients always get a code.
async fn error_envelope(State(body_limit): State<usize>, req: Request, next: Next) -> Response {
    let mcp = mcp_server::is_mcp(req.uri().path());
    let resp = next.run(req).await;
    let status = resp.status();
    if !(status.is_client_error() || status.is_server_error()) {
        return resp;
    }
    if let Some(logged) = resp.extensions().get::<LoggedError>() {
        if status.is_server_error() {
            tracing::error!(error.code = logged.code, error.cause = %logged.cause, "request failed");
        } else {
            tracing::info!(error.code = logged.code, error.message = %logged.cause, "request rejected");
        }
        return resp;
    }
    // MCP transport errors (406 without the SSE media type, a JSON-RPC error with 400, ...)
    // are the protocol's answers, which MCP clients read; the envelope would hide them.
    if mcp {
        tracing::info!(
            status = status.as_u16(),
            "MCP request rejected by the transport"
        );
        return resp;
    }
    let err = match status {
        StatusCode::PAYLOAD_TOO_LARGE => ApiError::PayloadTooLarge(body_limit),
        StatusCode::NOT_FOUND => ApiError::NotFound("this path".into()),
        StatusCode::METHOD_NOT_ALLOWED => ApiError::MethodNotAllowed,
        StatusCode::REQUEST_TIMEOUT => ApiError::Timeout,
        s if s.is_server_error() => ApiError::Internal(format!("bare {s} response")),
        s => ApiError::InvalidRequest(format!("request rejected ({s})")),
    };
    let mut new = err.into_response();
    // Keep the original status: the envelope explains it, it does not change it. So do the
    // headers that belong to that status: a 416's `Content-Range` (the representation's length,
    // RFC 9110 15.5.17), a 405's `Allow`, a `Retry-After`, a challenge.
    *new.status_mut() = status;
    for name in [
        header::CONTENT_RANGE,
        header::ACCEPT_RANGES,
        header::ALLOW,
        header::RETRY_AFTER,
        header::WWW_AUTHENTICATE,
    ] {
        if let Some(v) = resp.headers().get(&name) {
            new.headers_mut().insert(name, v.clone());
        }
    }
    tracing::info!(
        status = status.as_u16(),
        "bare error response wrapped in an envelope"
    );
    new
}
