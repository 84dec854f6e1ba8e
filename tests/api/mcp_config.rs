//! MCP providers and tool configs end to end: the gateway with real servers over real
//! transports, jobs through the public API, and what the model, the traces and the status
//! endpoints see.
//!
//! * `transports`: streamable HTTP (with its bearer key, and a server restart mid-job), legacy
//!   SSE against the official Python SDK, and an unmodified stdio server from PyPI.
//! * `submit`: tool-config errors are the client's 422/503 at submit (and preview) time, with
//!   nothing stored.
//! * `routing`: prompt-based tool calling, inline HTTP tools, per-model `mcp_servers`.
//! * `status`: `GET /v1/tools` and `/readyz`, and that provider secrets appear nowhere.
//!
//! Tests that need Python print why and pass without running when none is available (see
//! [`crate::mcp_support::python`]).

mod oauth;
mod routing;
mod status;
mod submit;
mod transports;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::helpers::TestApp;

/// Generous: jobs here take well under a second, but the CI machine may be busy.
const JOB_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

/// A job of `num_records` records whose LLM columns are `(name, model_alias, tool_alias,
/// prompt)`, each keeping its full trace, plus the job's own `model_configs`/`tool_configs`.
fn job(
    num_records: u32,
    columns: &[(&str, &str, &str, &str)],
    model_configs: Value,
    tool_configs: Value,
) -> Value {
    let mut cols = vec![
        json!({"name": "n", "column_type": "sampler", "sampler_type": "uniform",
        "params": {"low": 0, "high": 100}}),
    ];
    cols.extend(columns.iter().map(|(name, model, tools, prompt)| {
        json!({"name": name, "column_type": "llm-text", "model_alias": model,
            "prompt": prompt, "tool_alias": tools, "with_trace": "all_messages"})
    }));
    json!({"num_records": num_records, "config": {"columns": cols,
        "model_configs": model_configs, "tool_configs": tool_configs}})
}

/// The trace of `column` of record `record_id`.
async fn trace(app: &TestApp, record_id: &str, column: &str) -> Vec<Value> {
    let (status, t) = app
        .get(&format!("/v1/records/{record_id}/trace?column={column}"))
        .await;
    assert_eq!(status, 200, "{t}");
    t["traces"][0]["messages"].as_array().unwrap().clone()
}

/// The text of each `tool` message of a trace, in order (its text blocks joined).
fn tool_texts(trace: &[Value]) -> Vec<String> {
    trace
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| {
            m["content"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(|b| b["text"].as_str())
                .collect::<Vec<_>>()
                .join("\n")
        })
        .collect()
}

/// The tool names a recorded OpenAI request offered, in order (empty without `tools`).
fn offered(body: &Value) -> Vec<String> {
    body["tools"]
        .as_array()
        .map(|ts| {
            ts.iter()
                .map(|t| t["function"]["name"].as_str().unwrap().to_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// Asserts that the gateway stored no job.
async fn assert_no_jobs(app: &TestApp, after: &str) {
    let (status, list) = app.get("/v1/jobs").await;
    assert_eq!(status, 200, "{list}");
    assert_eq!(list["jobs"], json!([]), "a job was stored after {after}");
}

/// POSTs `body` to `path`; returns status and JSON body.
async fn post(app: &TestApp, path: &str, body: &Value) -> (u16, Value) {
    let resp = app
        .client
        .post(app.url(path))
        .json(body)
        .send()
        .await
        .expect("request");
    crate::helpers::status_json(resp).await
}

/// A reverse proxy in front of an MCP HTTP server that lets through only requests carrying
/// `Authorization: Bearer <key>` (others get 401), and records the method and `Authorization`
/// header of every request, so a test can see what the gateway sent. Response bodies are
/// streamed, so SSE streams pass through as they are produced.
struct AuthProxy {
    addr: SocketAddr,
    seen: Seen,
    stop: CancellationToken,
}

/// Method and `Authorization` value of each request the proxy got.
type Seen = Arc<Mutex<Vec<(Method, Option<String>)>>>;

struct ProxyState {
    upstream: String,
    expected: String,
    http: reqwest::Client,
    seen: Seen,
}

impl AuthProxy {
    /// Proxies to `upstream` (`http://host:port`, no path) requiring `key`.
    async fn start(upstream: SocketAddr, key: &str) -> Self {
        synthgate::telemetry::init_for_tests();
        synthgate::install_crypto_provider();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let state = Arc::new(ProxyState {
            upstream: format!("http://{upstream}"),
            expected: format!("Bearer {key}"),
            http: reqwest::Client::new(),
            seen: seen.clone(),
        });
        let app = axum::Router::new().fallback(forward).with_state(state);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let stop = CancellationToken::new();
        let shutdown = stop.clone().cancelled_owned();
        // Dropping the proxy cancels `stop`, which ends the server task.
        TaskTracker::new().spawn(async move {
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(shutdown)
                .await;
        });
        Self { addr, seen, stop }
    }

    /// The MCP endpoint through the proxy.
    fn url(&self) -> String {
        format!("http://{}/mcp", self.addr)
    }

    /// Every request so far: method and `Authorization` value.
    fn seen(&self) -> Vec<(Method, Option<String>)> {
        self.seen.lock().unwrap().clone()
    }
}

impl Drop for AuthProxy {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

async fn forward(State(s): State<Arc<ProxyState>>, req: Request) -> Response {
    let auth = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    s.seen
        .lock()
        .unwrap()
        .push((req.method().clone(), auth.clone()));
    if auth.as_deref() != Some(s.expected.as_str()) {
        return (StatusCode::UNAUTHORIZED, "unauthorized").into_response();
    }
    let (parts, body) = req.into_parts();
    let body = axum::body::to_bytes(body, usize::MAX).await.unwrap();
    let path = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    let mut headers = HeaderMap::new();
    for (k, v) in &parts.headers {
        if k != header::HOST && k != header::CONTENT_LENGTH {
            headers.append(k.clone(), v.clone());
        }
    }
    let upstream = s
        .http
        .request(parts.method, format!("{}{path}", s.upstream))
        .headers(headers)
        .body(body)
        .send()
        .await;
    let upstream = match upstream {
        Ok(r) => r,
        Err(e) => return (StatusCode::BAD_GATEWAY, e.to_string()).into_response(),
    };
    let mut out = Response::builder().status(upstream.status());
    for (k, v) in upstream.headers() {
        if k != header::CONTENT_LENGTH && k != header::TRANSFER_ENCODING {
            out = out.header(k, v);
        }
    }
    out.body(Body::from_stream(upstream.bytes_stream()))
        .unwrap_or_else(|_| StatusCode::BAD_GATEWAY.into_response())
}
