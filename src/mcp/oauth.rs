//! OAuth for MCP providers behind the MCP authorization spec, for a service with no person at a
//! browser: the client-credentials grant with a pre-registered client (`client_secret_basic`,
//! `client_secret_post` or `private_key_jwt`).
//!
//! * **Discovery is reactive**, as the spec and the reference SDKs do it: the first request goes
//!   out without a token; the server's `401` and its `WWW-Authenticate` challenge lead to the
//!   protected resource metadata (the challenge's `resource_metadata`, else the well-known
//!   paths), then to the authorization server's metadata (RFC 8414, then OpenID Connect, with
//!   the spec's fallbacks). rmcp's `AuthorizationManager` does the discovery and the token
//!   request; this module decides when to ask for a token and which scopes.
//! * **Scopes**: the configured ones, else the challenge's `scope`, else the resource
//!   metadata's `scopes_supported`. A `403 insufficient_scope` adds the challenge's scopes and
//!   asks again (step-up), at most `max_scope_upgrades` times per request.
//! * **One token per provider**, cached here and shared by every session and call of the
//!   provider (the pool has one [`OAuth`] per provider). It is replaced *before* it expires
//!   (a fifth of its lifetime early, at most a minute), so a long job never sends an expired
//!   token; a `401` on a token that should still be good (revoked, server restarted) gets one
//!   fresh token and one retry, so no call is lost to it.
//! * **Secrets** (the client secret, the private key, tokens) are never logged or put into
//!   errors: messages name the provider and what failed; `connect::redact` cuts the configured
//!   secrets out of anything a library quoted.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::stream::BoxStream;
use oauth2::TokenResponse as _;
use reqwest::header::{HeaderName, HeaderValue};
use rmcp::model::ClientJsonRpcMessage;
use rmcp::transport::auth::{
    AuthError, AuthorizationManager, ClientCredentialsConfig, JwtSigningAlgorithm,
    WWWAuthenticateParams,
};
use rmcp::transport::streamable_http_client::SseError;
use rmcp::transport::streamable_http_client::{
    StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
};
use secrecy::{ExposeSecret, SecretString};
use sse_stream_rmcp::Sse;
use tokio::sync::Mutex;

use crate::config::{McpOAuthConfig, resolve_api_key};

/// The largest SSE event the plain client methods accept: rmcp's default (16 MiB), which it
/// does not export.
pub(super) const SSE_EVENT_LIMIT: usize = 16 * 1024 * 1024;

/// A token is replaced this share of its lifetime before it expires...
const REFRESH_SHARE: u32 = 5;
/// ...but never more than this early.
const REFRESH_AT_MOST: Duration = Duration::from_secs(60);

/// One provider's OAuth client and its token.
pub(crate) struct OAuth {
    provider: Arc<str>,
    /// The provider's endpoint: the resource, and where discovery starts.
    endpoint: String,
    client_id: String,
    credential: Credential,
    configured_scopes: Option<Vec<String>>,
    max_scope_upgrades: u32,
    state: Mutex<State>,
}

#[derive(Clone)]
enum Credential {
    Secret(SecretString),
    Key {
        pem: SecretString,
        algorithm: JwtSigningAlgorithm,
    },
}

#[derive(Default)]
struct State {
    /// Discovered metadata and the configured client; `None` until a challenge arrives.
    manager: Option<Arc<AuthorizationManager>>,
    /// The scopes asked for (grown by step-ups).
    scopes: Vec<String>,
    token: Option<Token>,
}

struct Token {
    value: SecretString,
    /// When to replace it (`None`: the server gave no lifetime; kept until refused).
    renew_at: Option<Instant>,
}

impl Token {
    fn fresh(&self) -> bool {
        self.renew_at.is_none_or(|at| Instant::now() < at)
    }
}

/// An OAuth failure, as the pool reports it (never holding a secret).
fn failed(provider: &str, what: &str, e: impl std::fmt::Display) -> String {
    format!("OAuth for MCP provider '{provider}': {what}: {e}")
}

impl OAuth {
    /// The provider's OAuth client; secrets resolved like `api_key` (an env var name first).
    pub(crate) fn new(provider: &str, endpoint: &str, cfg: &McpOAuthConfig) -> Self {
        let env = |k: &str| std::env::var(k).ok();
        let credential = match (&cfg.client_secret, &cfg.private_key) {
            (_, Some(pem)) => Credential::Key {
                pem: resolve_api_key(pem, env),
                algorithm: algorithm(cfg.signing_algorithm.as_deref()),
            },
            (Some(secret), None) => Credential::Secret(resolve_api_key(secret, env)),
            // The config check requires one of the two.
            (None, None) => Credential::Secret(SecretString::from(String::new())),
        };
        Self {
            provider: provider.into(),
            endpoint: endpoint.to_owned(),
            client_id: cfg.client_id.clone(),
            credential,
            configured_scopes: cfg.scopes.clone(),
            max_scope_upgrades: cfg.max_scope_upgrades,
            state: Mutex::new(State::default()),
        }
    }

    /// The secrets to cut out of any message (see `connect::redact`).
    pub(crate) fn secrets(&self) -> Vec<String> {
        let mut out = vec![match &self.credential {
            Credential::Secret(s) => s.expose_secret().to_owned(),
            Credential::Key { pem, .. } => pem.expose_secret().to_owned(),
        }];
        if let Ok(st) = self.state.try_lock()
            && let Some(t) = &st.token
        {
            out.push(t.value.expose_secret().to_owned());
        }
        out
    }

    /// The token to send: the cached one while fresh, a new one when it is due (asked for
    /// before it expires), or none before the server has challenged us.
    async fn current(&self) -> Result<Option<String>, String> {
        let mut st = self.state.lock().await;
        if let Some(t) = st.token.as_ref().filter(|t| t.fresh()) {
            return Ok(Some(t.value.expose_secret().to_owned()));
        }
        if st.manager.is_none() {
            return Ok(None);
        }
        self.exchange(&mut st).await.map(Some)
    }

    /// After a `401` on `sent`: a token another request got meanwhile, else a new one
    /// (discovering the authorization server from `challenge` the first time).
    async fn unauthorized(&self, sent: Option<&str>, challenge: &str) -> Result<String, String> {
        let mut st = self.state.lock().await;
        if let Some(t) = st.token.as_ref().filter(|t| t.fresh())
            && Some(t.value.expose_secret()) != sent
        {
            return Ok(t.value.expose_secret().to_owned());
        }
        st.token = None;
        if st.manager.is_none() {
            self.discover(&mut st, challenge).await?;
        }
        self.exchange(&mut st).await
    }

    /// After a `403 insufficient_scope` on `sent`: a token another request got meanwhile (its
    /// step-up may already cover this one), else the scopes asked for grow by the challenge's
    /// and a token for them is fetched.
    async fn step_up(&self, sent: Option<&str>, challenge: &str) -> Result<String, String> {
        let base = reqwest::Url::parse(&self.endpoint)
            .map_err(|e| failed(&self.provider, "endpoint", e))?;
        let params = WWWAuthenticateParams::parse(challenge, &base);
        let wanted: Vec<String> = params
            .scope
            .as_deref()
            .unwrap_or_default()
            .split_whitespace()
            .map(str::to_owned)
            .collect();
        let mut st = self.state.lock().await;
        if let Some(t) = st.token.as_ref().filter(|t| t.fresh())
            && Some(t.value.expose_secret()) != sent
        {
            return Ok(t.value.expose_secret().to_owned());
        }
        let before = st.scopes.len();
        for s in wanted {
            if !st.scopes.contains(&s) {
                st.scopes.push(s);
            }
        }
        if st.scopes.len() == before {
            return Err(failed(
                &self.provider,
                "insufficient scope",
                format!(
                    "the server asks for no scope beyond those already granted ({})",
                    st.scopes.join(" ")
                ),
            ));
        }
        tracing::info!(mcp.provider = %self.provider, scopes = %st.scopes.join(" "),
            "MCP provider asked for more scopes; requesting a new token");
        st.token = None;
        if st.manager.is_none() {
            self.discover(&mut st, challenge).await?;
        }
        self.exchange(&mut st).await
    }

    /// Finds the authorization server from the challenge and configures the client.
    async fn discover(&self, st: &mut State, challenge: &str) -> Result<(), String> {
        let endpoint = self.endpoint.clone();
        let challenge = challenge.to_owned();
        let configured = self.configured_scopes.clone();
        let provider = self.provider.clone();
        let grant = self.grant_template();
        let (manager, scopes) = off_thread(move || async move {
            // Providers come from the operator's config, so an authorization server on a
            // private address (an internal SSO) is expected; loopback still needs a loopback
            // endpoint.
            let mut manager = AuthorizationManager::new_allowing_private_addresses(&*endpoint)
                .await
                .map_err(|e| failed(&provider, "client setup", e))?;
            let resolved = manager
                .resolve_metadata_from_challenge(Some(&challenge))
                .await
                .map_err(|e| failed(&provider, "authorization server discovery", e))?;
            if !resolved.source.is_discovered() {
                return Err(failed(
                    &provider,
                    "authorization server discovery",
                    "the server publishes no protected resource or authorization server metadata",
                ));
            }
            manager.set_metadata(resolved.metadata);
            let scopes = match configured {
                Some(s) => s,
                // The challenge's scope, else the resource's scopes_supported. No
                // `offline_access`: a client-credentials client asks again instead of
                // refreshing.
                None => manager
                    .select_initial_scopes(&[])
                    .await
                    .into_iter()
                    .filter(|s| s != "offline_access")
                    .collect(),
            };
            let cfg = grant(&scopes);
            manager
                .validate_client_credentials_metadata(&cfg)
                .map_err(|e| failed(&provider, "authorization server", e))?;
            manager
                .configure_client_credentials(&cfg)
                .map_err(|e| failed(&provider, "client setup", e))?;
            Ok((manager, scopes))
        })
        .await??;
        st.manager = Some(Arc::new(manager));
        st.scopes = scopes;
        Ok(())
    }

    /// Asks the authorization server for a token for the current scopes and caches it.
    async fn exchange(&self, st: &mut State) -> Result<String, String> {
        let cfg = self.grant(&st.scopes);
        let Some(manager) = st.manager.clone() else {
            return Err(failed(&self.provider, "token", "not discovered yet"));
        };
        let provider = self.provider.clone();
        let resp = off_thread(move || async move {
            manager
                .exchange_client_credentials(&cfg)
                .await
                .map_err(|e| failed(&provider, "token request", e))
        })
        .await??;
        let value = resp.access_token().secret().to_owned();
        let lifetime = resp.expires_in();
        let renew_at = lifetime.map(|l| {
            let early = (l / REFRESH_SHARE).min(REFRESH_AT_MOST);
            Instant::now() + l.saturating_sub(early)
        });
        tracing::info!(mcp.provider = %self.provider, expires_in_sec = lifetime.map(|l| l.as_secs()),
            "MCP provider token obtained");
        metrics::counter!(crate::metrics::MCP_OAUTH_TOKENS, "provider" => self.provider.to_string())
            .increment(1);
        st.token = Some(Token {
            value: value.clone().into(),
            renew_at,
        });
        Ok(value)
    }

    /// [`Self::grant`] as a function of the scopes, to move into the discovery task.
    fn grant_template(&self) -> impl Fn(&[String]) -> ClientCredentialsConfig + Send + 'static {
        let (endpoint, client_id) = (self.endpoint.clone(), self.client_id.clone());
        let credential = self.credential.clone();
        move |scopes| grant(&endpoint, &client_id, &credential, scopes)
    }

    /// The grant as rmcp takes it.
    fn grant(&self, scopes: &[String]) -> ClientCredentialsConfig {
        grant(&self.endpoint, &self.client_id, &self.credential, scopes)
    }
}

/// Runs rmcp's discovery or token request on a blocking thread of the runtime: their futures
/// hold a non-`Sync` URL form serializer across an await, so they are not `Send`, and the
/// streamable HTTP client trait needs `Send` futures. A token is asked for once per lifetime,
/// so the thread hand-off costs nothing that matters.
async fn off_thread<T, F, Fut>(f: F) -> Result<T, String>
where
    F: FnOnce() -> Fut + Send + 'static,
    Fut: Future<Output = T>,
    T: Send + 'static,
{
    let handle = tokio::runtime::Handle::current();
    tokio::task::spawn_blocking(move || handle.block_on(f()))
        .await
        .map_err(|e| format!("OAuth task failed: {e}"))
}

/// The grant as rmcp takes it. The resource (RFC 8707) is the provider's endpoint.
fn grant(
    endpoint: &str,
    client_id: &str,
    credential: &Credential,
    scopes: &[String],
) -> ClientCredentialsConfig {
    let resource = Some(endpoint.to_owned());
    match credential {
        Credential::Secret(s) => ClientCredentialsConfig::ClientSecret {
            client_id: client_id.to_owned(),
            client_secret: s.expose_secret().to_owned(),
            scopes: scopes.to_vec(),
            resource,
        },
        Credential::Key { pem, algorithm } => ClientCredentialsConfig::PrivateKeyJwt {
            client_id: client_id.to_owned(),
            signing_key: pem.expose_secret().as_bytes().to_vec(),
            signing_algorithm: *algorithm,
            token_endpoint_audience: None,
            scopes: scopes.to_vec(),
            resource,
        },
    }
}

/// The configured algorithm (the config check allows only these names).
fn algorithm(name: Option<&str>) -> JwtSigningAlgorithm {
    match name {
        Some("RS384") => JwtSigningAlgorithm::RS384,
        Some("RS512") => JwtSigningAlgorithm::RS512,
        Some("ES256") => JwtSigningAlgorithm::ES256,
        Some("ES384") => JwtSigningAlgorithm::ES384,
        _ => JwtSigningAlgorithm::RS256,
    }
}

/// The streamable HTTP client of every HTTP provider: its lanes (`laned_http.rs`), and for an
/// OAuth provider its token on every request, a new token on a `401` and more scopes on a
/// `403 insufficient_scope`. Without OAuth each call goes to the lanes as rmcp made it (with
/// the static key's header, if any). One type for both so that rmcp's transport, generic over
/// its client, is compiled once (see `any_transport.rs`).
#[derive(Clone)]
pub(crate) struct ProviderHttp {
    pub(crate) http: super::laned_http::Laned,
    pub(crate) oauth: Option<Arc<OAuth>>,
}

type HttpError = StreamableHttpError<reqwest::Error>;

impl ProviderHttp {
    fn auth_error(message: String) -> HttpError {
        StreamableHttpError::Auth(AuthError::InternalError(message))
    }

    /// Runs `call` with the current token and answers the server's challenges: one new token
    /// after a `401`, up to `max_scope_upgrades` step-ups after `403 insufficient_scope`.
    async fn authorized<T, F, Fut>(&self, oauth: &OAuth, call: F) -> Result<T, HttpError>
    where
        F: Fn(Option<String>) -> Fut,
        Fut: Future<Output = Result<T, HttpError>>,
    {
        let mut token = oauth.current().await.map_err(Self::auth_error)?;
        let mut reauthorized = false;
        let mut upgrades = 0;
        loop {
            match call(token.clone()).await {
                Err(StreamableHttpError::AuthRequired(e)) if !reauthorized => {
                    reauthorized = true;
                    let fresh = oauth
                        .unauthorized(token.as_deref(), &e.www_authenticate_header)
                        .await
                        .map_err(Self::auth_error)?;
                    token = Some(fresh);
                }
                Err(StreamableHttpError::InsufficientScope(e))
                    if upgrades < oauth.max_scope_upgrades =>
                {
                    upgrades += 1;
                    let fresh = oauth
                        .step_up(token.as_deref(), &e.www_authenticate_header)
                        .await
                        .map_err(Self::auth_error)?;
                    token = Some(fresh);
                }
                other => return other,
            }
        }
    }
}

impl StreamableHttpClient for ProviderHttp {
    type Error = reqwest::Error;

    // rmcp's transport calls only the `_with_max_sse_event_size` variants; the plain ones
    // delegate to them with rmcp's own default bound (not exported), so the token handling
    // lives in one place.
    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse, HttpError> {
        self.post_message_with_max_sse_event_size(
            uri,
            message,
            session_id,
            auth_header,
            custom_headers,
            SSE_EVENT_LIMIT,
        )
        .await
    }

    async fn post_message_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<StreamableHttpPostResponse, HttpError> {
        let Some(oauth) = &self.oauth else {
            return self
                .http
                .post_message_with_max_sse_event_size(
                    uri,
                    message,
                    session_id,
                    auth_header,
                    custom_headers,
                    max_sse_event_size,
                )
                .await;
        };
        self.authorized(oauth, |token| {
            self.http.post_message_with_max_sse_event_size(
                uri.clone(),
                message.clone(),
                session_id.clone(),
                token,
                custom_headers.clone(),
                max_sse_event_size,
            )
        })
        .await
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), HttpError> {
        let Some(oauth) = &self.oauth else {
            return self
                .http
                .delete_session(uri, session_id, auth_header, custom_headers)
                .await;
        };
        self.authorized(oauth, |token| {
            self.http.delete_session(
                uri.clone(),
                session_id.clone(),
                token,
                custom_headers.clone(),
            )
        })
        .await
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, HttpError> {
        self.get_stream_with_max_sse_event_size(
            uri,
            session_id,
            last_event_id,
            auth_header,
            custom_headers,
            SSE_EVENT_LIMIT,
        )
        .await
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, HttpError> {
        let Some(oauth) = &self.oauth else {
            return self
                .http
                .get_stream_with_max_sse_event_size(
                    uri,
                    session_id,
                    last_event_id,
                    auth_header,
                    custom_headers,
                    max_sse_event_size,
                )
                .await;
        };
        self.authorized(oauth, |token| {
            self.http.get_stream_with_max_sse_event_size(
                uri.clone(),
                session_id.clone(),
                last_event_id.clone(),
                token,
                custom_headers.clone(),
                max_sse_event_size,
            )
        })
        .await
    }
}
