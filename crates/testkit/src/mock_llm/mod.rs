//! **A scripted test double, not an LLM.** `mock_llm` serves the OpenAI Chat Completions
//! (`POST /v1/chat/completions`), embeddings (`POST /v1/embeddings`, vectors from
//! [`embedding_of`]) and image (`POST /v1/images/generations`, the [`PNG`]) APIs and Anthropic
//! Messages (`POST /v1/messages`) wire formats
//! with canned answers chosen by a [`Script`], so tests and benches exercise the real
//! LLM client (synthgate's `llm::LlmClient`) over real HTTP without any model or network.
//!
//! It records every request (the last `history_limit`), counts requests and in-flight requests
//! per model (with the maximum ever in flight, to assert `max_parallel_requests`), and injects
//! faults: HTTP errors with `Retry-After`, delays, malformed bodies, connections reset
//! mid-response, bodies without end. See [`script`] for the script format.
//!
//! Control endpoints: `GET /_mock/stats`, `GET /_mock/requests`, `GET|POST /_mock/script`,
//! `POST /_mock/reset`, `POST /_mock/release` (answers that `hold` go). In-process, the same
//! operations are methods of [`MockLlm`].

mod media;
mod reply;
pub mod script;
mod state;
mod view;

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Json;
use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::Value;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

pub use crate::tls::TlsOptions;
pub use media::{PNG, embedding_of};
pub use script::{Api, Faults, Reply, Rule, Script, ScriptedToolCall, When};
pub use state::{MockState, MockStats, ModelStats, RecordedRequest};

use reply::{error_body, success_body, tokens};
use state::Plan;
use view::View;

/// A running mock server (in-process, for tests). Dropping it stops the server.
#[derive(Debug)]
pub struct MockLlm {
    addr: SocketAddr,
    state: Arc<MockState>,
    stop: CancellationToken,
    tasks: TaskTracker,
    tls: bool,
}

impl MockLlm {
    /// Starts the mock on `127.0.0.1` with a random port.
    pub async fn start(script: Script) -> std::io::Result<Self> {
        Self::start_on(SocketAddr::from(([127, 0, 0, 1], 0)), script).await
    }

    /// Starts the mock on `addr`.
    pub async fn start_on(addr: SocketAddr, script: Script) -> std::io::Result<Self> {
        Self::launch(addr, script, None).await
    }

    /// Starts the mock on `127.0.0.1` with a random port, over TLS (see [`serve_tls`]).
    pub async fn start_tls(script: Script, tls: TlsOptions) -> std::io::Result<Self> {
        Self::launch(SocketAddr::from(([127, 0, 0, 1], 0)), script, Some(tls)).await
    }

    async fn launch(
        addr: SocketAddr,
        script: Script,
        tls: Option<TlsOptions>,
    ) -> std::io::Result<Self> {
        let listener = TcpListener::bind(addr).await?;
        let addr = listener.local_addr()?;
        let state = MockState::new(script);
        let stop = CancellationToken::new();
        let tasks = TaskTracker::new();
        let is_tls = tls.is_some();
        let (shared, token) = (Arc::clone(&state), stop.clone());
        tasks.spawn(async move {
            match tls {
                Some(tls) => serve_tls(listener, shared, token, tls).await,
                None => serve(listener, shared, token).await,
            }
        });
        tasks.close();
        Ok(Self {
            addr,
            state,
            stop,
            tasks,
            tls: is_tls,
        })
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://<addr>/v1` (`https://` when started with [`MockLlm::start_tls`]): the
    /// `endpoint` of a model provider of either `provider_type`.
    pub fn endpoint(&self) -> String {
        let scheme = if self.tls { "https" } else { "http" };
        format!("{scheme}://{}/v1", self.addr)
    }

    /// Replaces the script (rule counters start over; stats and history are kept).
    pub fn set_script(&self, script: Script) {
        self.state.set_script(script);
    }

    /// Request counters.
    pub fn stats(&self) -> MockStats {
        self.state.stats()
    }

    /// Recorded requests, oldest first.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.state.requests()
    }

    /// Forgets requests, counters and a release; keeps the script.
    pub fn reset(&self) {
        self.state.reset();
    }

    /// Lets the answers whose reply `hold`s go (see [`Reply::hold`](script::Reply::hold)).
    pub fn release(&self) {
        self.state.release();
    }

    /// Stops accepting, lets open requests finish, and waits for the server task.
    pub async fn shutdown(self) {
        self.stop.cancel();
        self.tasks.wait().await;
    }
}

impl Drop for MockLlm {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// Serves the mock on `listener` until `stop` fires (used by [`MockLlm`] and the binary).
pub async fn serve(
    listener: TcpListener,
    state: Arc<MockState>,
    stop: CancellationToken,
) -> std::io::Result<()> {
    axum::serve(listener, router(state))
        .with_graceful_shutdown(stop.cancelled_owned())
        .await
}

/// Serves the mock over TLS on `listener` until `stop` fires (see [`crate::tls`]).
pub async fn serve_tls(
    listener: TcpListener,
    state: Arc<MockState>,
    stop: CancellationToken,
    tls: TlsOptions,
) -> std::io::Result<()> {
    crate::tls::serve_router(listener, router(state), stop, tls).await
}

/// The mock's routes.
pub fn router(state: Arc<MockState>) -> Router {
    Router::new()
        .route("/v1/chat/completions", post(chat_completions))
        .route("/v1/messages", post(messages))
        .route("/v1/embeddings", post(embeddings))
        .route("/v1/images/generations", post(images))
        .route("/_mock/stats", get(get_stats))
        .route("/_mock/requests", get(get_requests))
        .route("/_mock/script", get(get_script).post(set_script))
        .route("/_mock/reset", post(reset))
        .route("/_mock/release", post(release))
        .with_state(state)
}

/// OpenAI-compatible Chat Completions.
async fn chat_completions(
    State(st): State<Arc<MockState>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    answer(st, Api::Openai, headers, body).await
}

/// Anthropic Messages.
async fn messages(State(st): State<Arc<MockState>>, headers: HeaderMap, body: Bytes) -> Response {
    answer(st, Api::Anthropic, headers, body).await
}

/// OpenAI-compatible embeddings.
async fn embeddings(State(st): State<Arc<MockState>>, headers: HeaderMap, body: Bytes) -> Response {
    answer(st, Api::Embeddings, headers, body).await
}

/// OpenAI-compatible image generation.
async fn images(State(st): State<Arc<MockState>>, headers: HeaderMap, body: Bytes) -> Response {
    answer(st, Api::Images, headers, body).await
}

async fn answer(st: Arc<MockState>, api: Api, headers: HeaderMap, raw: Bytes) -> Response {
    let parsed = serde_json::from_slice::<Value>(&raw).ok();
    let is_json = parsed.is_some();
    let request =
        parsed.unwrap_or_else(|| Value::String(String::from_utf8_lossy(&raw).into_owned()));
    let view = View::of(api, &request);
    let (seq, wait, plan, mut in_flight) = st.begin(&view, &headers, &request, is_json);
    if !wait.delay.is_zero() {
        tokio::time::sleep(wait.delay).await;
    }
    if wait.hold {
        st.released().await;
    }
    let (status, resp) = match plan {
        Plan::Answer(a) => {
            let body = match api {
                Api::Embeddings => media::embeddings_body(&view.model, &request),
                Api::Images => media::images_body(),
                Api::Openai | Api::Anthropic => {
                    success_body(api, &view.model, seq, &a, tokens(&view.all_text))
                }
            };
            (Some(200), Json(body).into_response())
        }
        Plan::Error {
            status,
            body,
            retry_after,
        } => {
            let code = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            let (content_type, bytes) = error_body(api, status, body.as_ref());
            let mut r = (code, [(header::CONTENT_TYPE, content_type)], bytes).into_response();
            if let Some(v) = retry_after.and_then(|v| v.parse().ok()) {
                r.headers_mut().insert(header::RETRY_AFTER, v);
            }
            (Some(code.as_u16()), r)
        }
        Plan::Malformed => {
            let r = (
                [(header::CONTENT_TYPE, "application/json")],
                r#"{"id": "chatcmpl-mock", "choices": [{"message": {"content": "#,
            )
                .into_response();
            (Some(200), r)
        }
        Plan::Reset => (None, reset_response()),
        Plan::Endless => (Some(200), endless_response()),
    };
    in_flight.answered(status);
    resp
}

/// Headers and the start of a body, then an I/O error: hyper aborts the connection, so the
/// client sees the response cut off mid-body.
fn reset_response() -> Response {
    let chunks: Vec<Result<Bytes, std::io::Error>> = vec![
        Ok(Bytes::from_static(
            b"{\"id\": \"chatcmpl-mock\", \"choices\": [",
        )),
        Err(std::io::Error::new(
            std::io::ErrorKind::ConnectionReset,
            "mock connection reset",
        )),
    ];
    let mut r = Response::new(Body::from_stream(futures::stream::iter(chunks)));
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("application/json"),
    );
    r
}

/// A 200 whose body is the start of an answer, then 64 KiB chunks of spaces for as long as
/// the client reads: hyper drops the stream when the client hangs up.
fn endless_response() -> Response {
    use futures::StreamExt as _;
    let start = Bytes::from_static(b"{\"id\": \"chatcmpl-mock\", \"choices\": [");
    let spaces = Bytes::from(vec![b' '; 64 * 1024]);
    let body = futures::stream::once(async move { Ok::<_, std::io::Error>(start) })
        .chain(futures::stream::repeat_with(move || Ok(spaces.clone())));
    let mut r = Response::new(Body::from_stream(body));
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("application/json"),
    );
    r
}

/// Request and in-flight counters.
async fn get_stats(State(st): State<Arc<MockState>>) -> Json<MockStats> {
    Json(st.stats())
}

/// Recorded requests, oldest first.
async fn get_requests(State(st): State<Arc<MockState>>) -> Json<Vec<RecordedRequest>> {
    Json(st.requests())
}

/// The active script.
async fn get_script(State(st): State<Arc<MockState>>) -> Json<Script> {
    Json(st.script())
}

/// Replaces the script.
async fn set_script(State(st): State<Arc<MockState>>, Json(script): Json<Script>) -> StatusCode {
    st.set_script(script);
    StatusCode::NO_CONTENT
}

/// Forgets requests and counters.
async fn reset(State(st): State<Arc<MockState>>) -> StatusCode {
    st.reset();
    StatusCode::NO_CONTENT
}

async fn release(State(st): State<Arc<MockState>>) -> StatusCode {
    st.release();
    StatusCode::NO_CONTENT
}
