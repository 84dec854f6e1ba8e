//! The mock's OAuth mode (test double): `/mcp` wants a bearer token from the mock's own
//! authorization server, which grants `client_credentials` to one pre-registered client.
//!
//! * `GET /.well-known/oauth-protected-resource/mcp`: RFC 9728 metadata (`resource` is the
//!   `/mcp` URL, the authorization server is the mock itself, `scopes_supported: [mcp]`).
//! * `GET /.well-known/oauth-authorization-server`: RFC 8414 metadata (`client_secret_basic` and
//!   `client_secret_post`, grant `client_credentials`).
//! * `POST /token`: checks the client (HTTP Basic or form fields) and the grant; answers a token
//!   `tok-<n>` valid for [`OAuthOptions::token_ttl`].
//! * `/mcp` without a valid token: `401` with `WWW-Authenticate: Bearer resource_metadata=...,
//!   scope="mcp"` (and `error="invalid_token"` for a token that expired or was revoked).
//! * A `tools/call` of a tool in [`OAuthOptions::scoped_tools`] with a token not granted its
//!   scope: `403` with `error="insufficient_scope", scope="mcp <scope>"` (the step-up challenge).
//!   A token is granted the scopes its request asked for (all of them: the mock trusts its one
//!   client).
//!
//! [`OAuthStats`] counts tokens issued and requests refused by reason, and revokes tokens.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::{Form, Json, Router};
use base64::Engine as _;
use serde::Deserialize;
use serde_json::json;

/// The pre-registered client and the tokens' lifetime.
#[derive(Debug, Clone)]
pub struct OAuthOptions {
    /// The one client the authorization server knows.
    pub client_id: String,
    /// Its secret.
    pub client_secret: String,
    /// How long a token is valid (sent as whole seconds in `expires_in`, at least 1).
    pub token_ttl: Duration,
    /// `(tool, scope)`: calling the tool needs a token granted the scope.
    pub scoped_tools: Vec<(String, String)>,
    /// A refused token request's `error_description` repeats the credentials it was sent, as
    /// some authorization servers do (the client must keep them out of its log).
    pub echo_refused: bool,
}

/// What the OAuth mode saw, and a handle to revoke its tokens.
#[derive(Debug, Default)]
pub struct OAuthStats {
    issued: AtomicU64,
    missing: AtomicU64,
    expired: AtomicU64,
    revoked: AtomicU64,
    bad_client: AtomicU64,
    insufficient: AtomicU64,
    /// Token → when it expires, and whether it was revoked.
    tokens: Mutex<HashMap<String, (Instant, bool)>>,
    /// Token → the scopes it was granted.
    scopes: Mutex<HashMap<String, Vec<String>>>,
}

impl OAuthStats {
    /// Tokens issued.
    pub fn issued(&self) -> u64 {
        self.issued.load(Ordering::SeqCst)
    }
    /// `/mcp` requests refused for carrying no bearer token.
    pub fn rejected_missing(&self) -> u64 {
        self.missing.load(Ordering::SeqCst)
    }
    /// `/mcp` requests refused for an expired token.
    pub fn rejected_expired(&self) -> u64 {
        self.expired.load(Ordering::SeqCst)
    }
    /// `/mcp` requests refused for a revoked (or unknown) token.
    pub fn rejected_revoked(&self) -> u64 {
        self.revoked.load(Ordering::SeqCst)
    }
    /// Token requests refused for bad client credentials.
    pub fn rejected_clients(&self) -> u64 {
        self.bad_client.load(Ordering::SeqCst)
    }
    /// `tools/call` requests refused with `403 insufficient_scope`.
    pub fn rejected_scope(&self) -> u64 {
        self.insufficient.load(Ordering::SeqCst)
    }
    /// The scopes the latest token was granted.
    pub fn last_scopes(&self) -> Vec<String> {
        let n = self.issued();
        self.scopes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&format!("tok-{n}"))
            .cloned()
            .unwrap_or_default()
    }
    /// Revokes every token issued so far: the next request with one gets a `401`.
    pub fn revoke_all(&self) {
        let mut tokens = self.tokens.lock().unwrap_or_else(PoisonError::into_inner);
        for t in tokens.values_mut() {
            t.1 = true;
        }
    }
}

struct Auth {
    opts: OAuthOptions,
    stats: Arc<OAuthStats>,
    base: String,
}

/// `/mcp` (the given service) behind a bearer check, plus the metadata and token routes.
pub(super) fn wrap(
    mcp: Router,
    addr: SocketAddr,
    opts: OAuthOptions,
    stats: Arc<OAuthStats>,
) -> Router {
    let auth = Arc::new(Auth {
        opts,
        stats,
        base: format!("http://{addr}"),
    });
    let guarded = mcp.layer(axum::middleware::from_fn_with_state(auth.clone(), guard));
    Router::new()
        .route(
            "/.well-known/oauth-protected-resource/mcp",
            axum::routing::get(resource_metadata),
        )
        .route(
            "/.well-known/oauth-authorization-server",
            axum::routing::get(server_metadata),
        )
        .route("/token", axum::routing::post(token))
        .with_state(auth)
        .merge(guarded)
}

async fn resource_metadata(State(a): State<Arc<Auth>>) -> Json<serde_json::Value> {
    Json(json!({
        "resource": format!("{}/mcp", a.base),
        "authorization_servers": [a.base],
        "scopes_supported": ["mcp"],
        "bearer_methods_supported": ["header"],
    }))
}

async fn server_metadata(State(a): State<Arc<Auth>>) -> Json<serde_json::Value> {
    Json(json!({
        "issuer": a.base,
        "authorization_endpoint": format!("{}/authorize", a.base),
        "token_endpoint": format!("{}/token", a.base),
        "grant_types_supported": ["client_credentials"],
        "token_endpoint_auth_methods_supported": ["client_secret_basic", "client_secret_post"],
        "scopes_supported": ["mcp"],
        "response_types_supported": ["code"],
    }))
}

#[derive(Deserialize)]
struct TokenForm {
    grant_type: String,
    client_id: Option<String>,
    client_secret: Option<String>,
    scope: Option<String>,
}

async fn token(
    State(a): State<Arc<Auth>>,
    headers: HeaderMap,
    Form(form): Form<TokenForm>,
) -> Response {
    let basic = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Basic "))
        .and_then(|b| base64::engine::general_purpose::STANDARD.decode(b).ok())
        .and_then(|b| String::from_utf8(b).ok());
    let (id, secret) = match &basic {
        Some(pair) => match pair.split_once(':') {
            Some((i, s)) => (Some(i.to_owned()), Some(s.to_owned())),
            None => (None, None),
        },
        None => (form.client_id.clone(), form.client_secret.clone()),
    };
    if id.as_deref() != Some(a.opts.client_id.as_str())
        || secret.as_deref() != Some(a.opts.client_secret.as_str())
    {
        a.stats.bad_client.fetch_add(1, Ordering::SeqCst);
        let mut body = json!({"error": "invalid_client"});
        if a.opts.echo_refused {
            body["error_description"] = json!(format!(
                "no client with client_id={} and client_secret={} (grant_type={})",
                id.as_deref().unwrap_or(""),
                secret.as_deref().unwrap_or(""),
                form.grant_type
            ));
        }
        return (StatusCode::UNAUTHORIZED, Json(body)).into_response();
    }
    if form.grant_type != "client_credentials" {
        return (
            StatusCode::BAD_REQUEST,
            Json(json!({"error": "unsupported_grant_type"})),
        )
            .into_response();
    }
    let n = a.stats.issued.fetch_add(1, Ordering::SeqCst) + 1;
    let value = format!("tok-{n}");
    let ttl = a.opts.token_ttl.max(Duration::from_secs(1));
    a.stats
        .tokens
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .insert(value.clone(), (Instant::now() + ttl, false));
    let granted: Vec<String> = form
        .scope
        .as_deref()
        .unwrap_or("mcp")
        .split_whitespace()
        .map(str::to_owned)
        .collect();
    let scope = granted.join(" ");
    a.stats
        .scopes
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .insert(value.clone(), granted);
    Json(json!({
        "access_token": value,
        "token_type": "Bearer",
        "expires_in": ttl.as_secs(),
        "scope": scope,
    }))
    .into_response()
}

async fn guard(State(a): State<Arc<Auth>>, req: Request, next: Next) -> Response {
    let presented = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::to_owned);
    let challenge = |error: Option<&str>| {
        let mut v = format!(
            "Bearer resource_metadata=\"{}/.well-known/oauth-protected-resource/mcp\", scope=\"mcp\"",
            a.base
        );
        if let Some(e) = error {
            v.push_str(&format!(", error=\"{e}\""));
        }
        (
            StatusCode::UNAUTHORIZED,
            [(header::WWW_AUTHENTICATE, v)],
            "unauthorized",
        )
            .into_response()
    };
    let Some(token) = presented else {
        a.stats.missing.fetch_add(1, Ordering::SeqCst);
        return challenge(None);
    };
    let state = a
        .stats
        .tokens
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .get(&token)
        .copied();
    match state {
        Some((_, true)) | None => {
            a.stats.revoked.fetch_add(1, Ordering::SeqCst);
            challenge(Some("invalid_token"))
        }
        Some((expires, false)) if Instant::now() >= expires => {
            a.stats.expired.fetch_add(1, Ordering::SeqCst);
            challenge(Some("invalid_token"))
        }
        Some(_) if a.opts.scoped_tools.is_empty() => next.run(req).await,
        Some(_) => check_scope(&a, &token, req, next).await,
    }
}

/// Refuses a `tools/call` of a scoped tool whose scope the token lacks, with the step-up
/// challenge; anything else goes on.
async fn check_scope(a: &Auth, token: &str, req: Request, next: Next) -> Response {
    let (parts, body) = req.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, 1 << 20).await else {
        return StatusCode::BAD_REQUEST.into_response();
    };
    let message: serde_json::Value = serde_json::from_slice(&bytes).unwrap_or_default();
    let needed = (message["method"] == "tools/call")
        .then(|| message["params"]["name"].as_str())
        .flatten()
        .and_then(|tool| a.opts.scoped_tools.iter().find(|(t, _)| t == tool))
        .map(|(_, scope)| scope.clone());
    if let Some(scope) = needed {
        let granted = a
            .stats
            .scopes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(token)
            .cloned()
            .unwrap_or_default();
        if !granted.contains(&scope) {
            a.stats.insufficient.fetch_add(1, Ordering::SeqCst);
            let v = format!(
                "Bearer error=\"insufficient_scope\", scope=\"mcp {scope}\", resource_metadata=\"{}/.well-known/oauth-protected-resource/mcp\"",
                a.base
            );
            return (
                StatusCode::FORBIDDEN,
                [(header::WWW_AUTHENTICATE, v)],
                "insufficient scope",
            )
                .into_response();
        }
    }
    next.run(Request::from_parts(parts, axum::body::Body::from(bytes)))
        .await
}
