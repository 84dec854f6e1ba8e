//! Opening one MCP session over the provider's transport: a child process (`stdio`), streamable
//! HTTP, or the legacy HTTP+SSE transport. The `initialize` handshake is rmcp's.

use std::process::Stdio;
use std::sync::Arc;

use reqwest::header::{AUTHORIZATION, HeaderMap, HeaderName, HeaderValue};
use rmcp::model::{ClientCapabilities, ClientConfig, Implementation};
use rmcp::service::{NotificationContext, RunningService};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use secrecy::ExposeSecret;
use tokio::io::AsyncBufReadExt;
use tokio_util::task::TaskTracker;

use super::any_transport::AnyTransport;
use super::cache::ToolCache;
use super::laned_http::Laned;
use super::oauth::{OAuth, ProviderHttp};
use super::traced_http::Traced;
use crate::config::{McpProviderConfig, McpTransport, resolve_api_key};
use crate::lanes::Lanes;

/// The environment a stdio server inherits before its own `env` is merged over it: the MCP
/// SDKs' minimal POSIX set, so the service's own secrets never reach a tool server.
const INHERITED_ENV: [&str; 6] = ["HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER"];

/// Receives the server's notifications for one session. Only `tools/list_changed` matters:
/// it drops the provider's cached tool list.
#[derive(Clone)]
pub(crate) struct Handler {
    pub(crate) provider: Arc<str>,
    pub(crate) cache: Arc<ToolCache>,
}

impl ClientHandler for Handler {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("synthgate", env!("CARGO_PKG_VERSION")),
        )
    }

    fn on_tool_list_changed(
        &self,
        _context: NotificationContext<RoleClient>,
    ) -> impl Future<Output = ()> + Send + '_ {
        tracing::info!(mcp.provider = %self.provider, "tool list changed; cache dropped");
        self.cache.invalidate();
        metrics::counter!(crate::metrics::MCP_LIST_CHANGED, "provider" => self.provider.to_string())
            .increment(1);
        std::future::ready(())
    }
}

/// A live session.
pub(crate) type Service = RunningService<RoleClient, Handler>;

/// Starts the transport and runs `initialize`. `Err` is a message for [`super::McpError`].
pub(crate) async fn connect(
    cfg: &McpProviderConfig,
    lanes: Option<&Arc<Lanes>>,
    oauth: Option<&Arc<OAuth>>,
    handler: Handler,
    tasks: &TaskTracker,
) -> Result<Service, String> {
    open(cfg, lanes, oauth, handler, tasks)
        .await
        .map_err(|e| redact(cfg, oauth, e))
}

/// Connect errors end up in logs, `/v1/tools` and 503 bodies. Transport libraries quote URLs
/// (with their query, which may hold a key) and sometimes what they sent; every configured
/// secret is cut out of the message whatever quoted it.
fn redact(cfg: &McpProviderConfig, oauth: Option<&Arc<OAuth>>, mut message: String) -> String {
    let query = cfg
        .endpoint
        .as_deref()
        .and_then(|e| reqwest::Url::parse(e).ok())
        .and_then(|u| u.query().map(str::to_owned));
    let secrets = query
        .into_iter()
        .chain(api_key(cfg))
        .chain(cfg.headers.values().map(|v| v.expose_secret().to_owned()))
        .chain(cfg.env.values().map(|v| v.expose_secret().to_owned()))
        .chain(oauth.map(|o| o.secrets()).unwrap_or_default())
        .filter(|s| s.len() >= 4);
    // Every form an echo may carry it in (percent-encoded either case, JSON-escaped, base64),
    // longest first so a longer form is blanked whole.
    let mut forms: Vec<String> = secrets
        .flat_map(|s| std::iter::once(s.clone()).chain(crate::config::secret_forms(&s)))
        .collect();
    forms.sort_by_key(|f| std::cmp::Reverse(f.len()));
    forms.dedup();
    for f in forms {
        message = message.replace(&f, "<redacted>");
    }
    message
}

async fn open(
    cfg: &McpProviderConfig,
    lanes: Option<&Arc<Lanes>>,
    oauth: Option<&Arc<OAuth>>,
    handler: Handler,
    tasks: &TaskTracker,
) -> Result<Service, String> {
    let transport = transport(cfg, lanes, oauth, &handler, tasks).await?;
    handler
        .serve(transport)
        .await
        .map_err(|e| format!("initialize failed: {e}"))
}

/// The provider's transport, started (a child spawned, an SSE stream opened) but not yet
/// initialized.
async fn transport(
    cfg: &McpProviderConfig,
    lanes: Option<&Arc<Lanes>>,
    oauth: Option<&Arc<OAuth>>,
    handler: &Handler,
    tasks: &TaskTracker,
) -> Result<AnyTransport, String> {
    // The pool builds lanes for every HTTP provider.
    let lanes = || lanes.ok_or_else(|| "no HTTP client for an HTTP provider".to_owned());
    match cfg.transport() {
        McpTransport::Stdio => stdio(cfg, handler, tasks),
        McpTransport::StreamableHttp => {
            let url = cfg.endpoint.as_deref().unwrap_or_default();
            let mut config = StreamableHttpClientTransportConfig::with_uri(url)
                .reinit_on_expired_session(true)
                .custom_headers(custom_headers(cfg)?);
            // With OAuth the token comes from the provider's OAuth client on every request;
            // otherwise the static key, which rmcp sends with the `Bearer ` prefix.
            if oauth.is_none()
                && let Some(key) = api_key(cfg)
            {
                config = config.auth_header(key);
            }
            let client = Traced(ProviderHttp {
                http: Laned(Arc::clone(lanes()?)),
                oauth: oauth.cloned(),
            });
            Ok(AnyTransport::new(
                StreamableHttpClientTransport::with_client(client, config),
            ))
        }
        McpTransport::Sse => {
            let url = cfg.endpoint.as_deref().unwrap_or_default();
            let mut headers: HeaderMap = custom_headers(cfg)?.into_iter().collect();
            if let Some(key) = api_key(cfg) {
                let mut v = HeaderValue::from_str(&format!("Bearer {key}"))
                    .map_err(|_| "api_key is not a valid header value".to_owned())?;
                v.set_sensitive(true);
                headers.insert(AUTHORIZATION, v);
            }
            // Every answer comes down the session's one event stream: one client will do.
            let transport = super::sse::SseClientTransport::connect(lanes()?.first(), url, headers)
                .await
                .map_err(|e| e.to_string())?;
            Ok(AnyTransport::new(transport))
        }
    }
}

fn stdio(
    cfg: &McpProviderConfig,
    handler: &Handler,
    tasks: &TaskTracker,
) -> Result<AnyTransport, String> {
    let program = cfg.command.as_deref().unwrap_or_default();
    let mut cmd = tokio::process::Command::new(program);
    cmd.args(&cfg.args).env_clear();
    for k in INHERITED_ENV {
        if let Some(v) = std::env::var_os(k) {
            cmd.env(k, v);
        }
    }
    for (k, v) in &cfg.env {
        cmd.env(k, v.expose_secret());
    }
    if let Some(dir) = &cfg.cwd {
        cmd.current_dir(dir);
    }
    let mut wrapped = process_wrap::tokio::CommandWrap::from(cmd);
    wrapped.wrap(process_wrap::tokio::ProcessGroup::leader());
    let (transport, stderr) = TokioChildProcess::builder(wrapped)
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("starting `{program}` failed: {e}"))?;
    let pid = transport.id();
    if let Some(stderr) = stderr {
        let provider = handler.provider.clone();
        // Ends by itself at EOF, when the child exits.
        tasks.spawn(async move {
            let mut lines = tokio::io::BufReader::new(stderr).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                tracing::info!(target: "synthgate::mcp::stderr", provider = %provider, pid = pid, "{line}");
            }
        });
    }
    tracing::info!(mcp.provider = %handler.provider, pid, "MCP server started");
    Ok(AnyTransport::new(transport))
}

/// The bearer key: an environment variable name first, else the literal key (DataDesigner).
fn api_key(cfg: &McpProviderConfig) -> Option<String> {
    let key = cfg.api_key.as_ref()?;
    let key = resolve_api_key(key, |n| std::env::var(n).ok());
    let key = key.expose_secret();
    (!key.is_empty()).then(|| key.to_owned())
}

fn custom_headers(
    cfg: &McpProviderConfig,
) -> Result<std::collections::HashMap<HeaderName, HeaderValue>, String> {
    cfg.headers
        .iter()
        .map(|(k, v)| {
            let name = HeaderName::from_bytes(k.as_bytes())
                .map_err(|_| format!("header name '{k}' is not valid"))?;
            let mut value = HeaderValue::from_str(v.expose_secret())
                .map_err(|_| format!("the value of header '{k}' is not valid"))?;
            value.set_sensitive(true);
            Ok((name, value))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_cut_out_of_connect_errors() {
        let cfg: McpProviderConfig = serde_json::from_value(serde_json::json!({
            "name": "p", "provider_type": "streamable_http",
            "endpoint": "https://mcp.example/mcp?token=qs-secret-1",
            "api_key": "key-secret-2", "headers": {"X-A": "hdr-secret-3"},
        }))
        .unwrap();
        let msg = redact(
            &cfg,
            None,
            "error sending request for url (https://mcp.example/mcp?token=qs-secret-1) \
             with Bearer key-secret-2 and hdr-secret-3"
                .into(),
        );
        assert_eq!(
            msg,
            "error sending request for url (https://mcp.example/mcp?<redacted>) \
             with Bearer <redacted> and <redacted>"
        );
    }

    /// Round 3 (Q5): an upstream that echoes what it was sent, encoded: a base64-like key
    /// form-encoded with lowercase escapes, JSON-escaped, or inside a base64 body. None of the
    /// key's encodings is left.
    #[test]
    fn encoded_echoes_of_a_secret_are_cut_out_too() {
        use base64::Engine as _;
        let key = "AbC+dE/fG==hIjK";
        let cfg: McpProviderConfig = serde_json::from_value(serde_json::json!({
            "name": "p", "provider_type": "streamable_http",
            "endpoint": "https://mcp.example/mcp", "api_key": key,
        }))
        .unwrap();
        let echoes = [
            "invalid_client: client_secret=AbC%2bdE%2ffG%3d%3dhIjK".to_owned(),
            "invalid_client: client_secret=AbC%2BdE%2FfG%3D%3DhIjK".to_owned(),
            format!("{{\"echo\": {}}}", serde_json::to_string(key).unwrap()),
            base64::engine::general_purpose::STANDARD.encode(format!("secret={key}")),
        ];
        for echo in echoes {
            let msg = redact(&cfg, None, echo.clone());
            assert!(msg.contains("<redacted>"), "{echo} -> {msg}");
            for leak in ["dE%2", "dE/f", "dE%2f", "RS9mRz09"] {
                assert!(!msg.contains(leak), "{echo} -> {msg}");
            }
        }
    }
}
