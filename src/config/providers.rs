//! Model providers, MCP providers and inline tools: the parts of the config that hold URLs,
//! commands and secrets, and therefore never come with a job.
//!
//! Both DataDesigner's spelling (`provider_type`, `endpoint`) and LlamaFarm's (`transport`,
//! `base_url`, `http`) are accepted for MCP providers.

use std::collections::{BTreeMap, HashSet};

use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;
use serde_json::{Map, Value};

use super::Config;
use crate::domain::models::{check_timeout_sec, reserved_extra_body_fields};

/// An LLM endpoint (DataDesigner's `ModelProvider`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelProviderConfig {
    /// Name that model configs use in `provider`.
    pub name: String,
    /// Base URL, e.g. `https://integrate.api.nvidia.com/v1`.
    pub endpoint: String,
    /// Wire protocol.
    #[serde(default)]
    pub provider_type: ProviderType,
    /// An environment variable name, else the literal key (DataDesigner's rule).
    #[serde(default)]
    pub api_key: Option<SecretString>,
    /// Merged into every request body.
    #[serde(default)]
    pub extra_body: Option<Map<String, Value>>,
    /// Extra HTTP headers on every request.
    #[serde(default)]
    pub extra_headers: Option<BTreeMap<String, String>>,
    /// A PEM file of CA certificates to trust for this provider besides the system's (a
    /// gateway or a self-hosted server behind a private CA). synthgate's own key, not
    /// DataDesigner's.
    #[serde(default)]
    pub tls_ca_file: Option<std::path::PathBuf>,
    /// How structured and judge columns ask this provider for JSON. synthgate's own key, not
    /// DataDesigner's.
    #[serde(default)]
    pub structured_output: StructuredOutput,
}

/// How a provider is asked for JSON by `llm-structured` and `llm-judge` columns. The format
/// instructions and the `<response_schema>` go in the prompt in every mode (DataDesigner's
/// way), and the answer is parsed and checked the same way; a mode other than `prompt` also
/// sends the column's schema as `response_format`, so a server that constrains decoding to it
/// (llama.cpp, vLLM, OpenAI's structured outputs) answers valid JSON. A small model that fails
/// free-form JSON most of the time then answers every record.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StructuredOutput {
    /// The prompt only (DataDesigner's behaviour).
    #[default]
    Prompt,
    /// `{"type": "json_schema", "json_schema": {"name": "response", "schema": ...}}`: OpenAI,
    /// vLLM, llama.cpp's `llama-server`, Ollama.
    JsonSchema,
    /// `{"type": "json_object", "schema": ...}`: llama-cpp-python's server (0.3), which
    /// refuses `json_schema`.
    JsonObject,
}

impl StructuredOutput {
    /// The `response_format` asking for JSON under `schema`, if this mode sends one.
    pub fn response_format(self, schema: &Value) -> Option<Value> {
        match self {
            Self::Prompt => None,
            Self::JsonSchema => Some(serde_json::json!({
                "type": "json_schema",
                "json_schema": {"name": "response", "schema": schema},
            })),
            Self::JsonObject => Some(serde_json::json!({"type": "json_object", "schema": schema})),
        }
    }
}

/// DataDesigner's secret rule for a provider's `api_key` (LLM and MCP alike): the configured
/// value names an environment variable if one by that name is set (and not empty), otherwise
/// it is the key itself. Applied by the code that sends the key (the LLM client when it is
/// built, an MCP transport when it connects), not at config load.
pub fn resolve_api_key(
    configured: &SecretString,
    env: impl Fn(&str) -> Option<String>,
) -> SecretString {
    let raw = configured.expose_secret();
    match env(raw).filter(|v| !v.is_empty()) {
        Some(v) => v.into(),
        None => raw.to_owned().into(),
    }
}

/// LLM wire protocol.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProviderType {
    /// OpenAI-compatible Chat Completions.
    #[default]
    Openai,
    /// Anthropic Messages API.
    Anthropic,
}

/// An MCP server that tool configs route calls to.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpProviderConfig {
    /// Name that tool configs use in `providers`.
    pub name: String,
    /// Transport; inferred when absent: `stdio` if `command` is set, else DataDesigner's
    /// default `sse`.
    #[serde(default, alias = "transport")]
    pub provider_type: Option<McpTransport>,
    /// URL for `sse` and `streamable_http`.
    #[serde(default, alias = "base_url")]
    pub endpoint: Option<String>,
    /// Sent as `Authorization: Bearer`; an env var name first, else the literal key.
    #[serde(default)]
    pub api_key: Option<SecretString>,
    /// Extra HTTP headers (values may use `${env:VAR}`).
    #[serde(default)]
    pub headers: BTreeMap<String, SecretString>,
    /// Program to start for `stdio`.
    #[serde(default)]
    pub command: Option<String>,
    /// Its arguments.
    #[serde(default)]
    pub args: Vec<String>,
    /// Merged over a minimal inherited environment (HOME, LOGNAME, PATH, SHELL, TERM, USER).
    #[serde(default)]
    pub env: BTreeMap<String, SecretString>,
    /// Working directory of the child.
    #[serde(default)]
    pub cwd: Option<String>,
    /// `shared` (default): one session for everything; `per_job`/`per_record` for stateful servers.
    #[serde(default)]
    pub session_scope: SessionScope,
    /// Concurrent tool calls to this provider; absent = unbounded.
    #[serde(default)]
    pub max_concurrent_calls: Option<u32>,
    /// Sessions a `shared` provider may open under load (one more whenever every open one
    /// has [`crate::mcp::BUSY_SESSION_CALLS`] calls in flight), all behind one tool list.
    /// A stdio server is one process, often one core: a stateless one whose calls do real work
    /// gets more processes this way. (On the bench's trivial server it changed nothing: one
    /// session carried 23 thousand calls a second.) Default 1: a second stdio child is a second
    /// process with its own state.
    #[serde(default = "default_max_sessions")]
    pub max_sessions: u32,
    /// How long a fetched tool list is trusted (a `list_changed` notice refreshes it sooner).
    #[serde(default = "default_tools_cache_ttl_sec")]
    pub tools_cache_ttl_sec: u64,
    /// Deadline for starting the transport and the `initialize` handshake.
    #[serde(default = "default_connect_timeout_sec")]
    pub connect_timeout_sec: f64,
    /// Deadline of one tool call (and of `tools/list`) when the tool config sets no
    /// `timeout_sec`. DataDesigner waits forever; a batch job should not.
    #[serde(default = "default_call_timeout_sec")]
    pub call_timeout_sec: f64,
    /// OAuth client credentials (`streamable_http` only), per the MCP authorization spec.
    #[serde(default)]
    pub oauth: Option<McpOAuthConfig>,
    /// A PEM file of CA certificates to trust for this provider besides the system's (`sse`
    /// and `streamable_http` servers behind a private CA). synthgate's own key. With `oauth`,
    /// the discovery and token requests still trust the system's roots only: rmcp's OAuth
    /// client filters the addresses that discovered metadata names, which a client of ours
    /// would give up.
    #[serde(default)]
    pub tls_ca_file: Option<std::path::PathBuf>,
}

/// A pre-registered OAuth client of an MCP provider's authorization server, for the
/// client-credentials grant: the only grant a service without a person at a browser can use.
/// The authorization server is discovered from the provider (protected resource metadata, then
/// the server's metadata, with the spec's fallbacks).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpOAuthConfig {
    /// The client id the authorization server registered.
    pub client_id: String,
    /// For `client_secret_basic` / `client_secret_post` (chosen from the server's metadata):
    /// an env var name first, else the literal secret.
    #[serde(default)]
    pub client_secret: Option<SecretString>,
    /// For `private_key_jwt`: the PEM private key (an env var name first, else the literal
    /// PEM, or `${env:VAR}`), signing an RFC 7523 assertion per token request.
    #[serde(default)]
    pub private_key: Option<SecretString>,
    /// The assertion's algorithm: `RS256` (default), `RS384`, `RS512`, `ES256`, `ES384`.
    #[serde(default)]
    pub signing_algorithm: Option<String>,
    /// Scopes to ask for; absent = the `scope` of the server's `WWW-Authenticate` challenge,
    /// else the protected resource metadata's `scopes_supported`.
    #[serde(default)]
    pub scopes: Option<Vec<String>>,
    /// How many times one request may step up its scopes on `insufficient_scope`.
    #[serde(default = "default_max_scope_upgrades")]
    pub max_scope_upgrades: u32,
}

fn default_max_scope_upgrades() -> u32 {
    2
}

/// The most sessions one provider may open (`max_sessions`): a few per core of a large machine.
pub const MAX_SESSIONS: u32 = 32;

/// The JWT algorithms `private_key_jwt` may sign with.
pub const OAUTH_SIGNING_ALGORITHMS: [&str; 5] = ["RS256", "RS384", "RS512", "ES256", "ES384"];

/// What is wrong with a provider's `oauth` block.
fn oauth_problems(key: &str, p: &McpProviderConfig, o: &McpOAuthConfig, out: &mut Vec<String>) {
    if p.transport() != McpTransport::StreamableHttp {
        out.push(format!(
            "config key `{key}.oauth`: OAuth is served for streamable_http providers only"
        ));
    }
    if p.api_key.is_some() {
        out.push(format!(
            "config key `{key}.oauth`: set either api_key (a static bearer key) or oauth, not both"
        ));
    }
    if o.client_id.trim().is_empty() {
        out.push(format!(
            "config key `{key}.oauth.client_id`: must not be empty"
        ));
    }
    match (&o.client_secret, &o.private_key) {
        (Some(_), Some(_)) => out.push(format!(
            "config key `{key}.oauth`: set either client_secret or private_key, not both"
        )),
        (None, None) => out.push(format!(
            "config key `{key}.oauth`: client_secret (client_secret_basic/post) or private_key (private_key_jwt) is required"
        )),
        _ => {}
    }
    if let Some(alg) = &o.signing_algorithm {
        if o.private_key.is_none() {
            out.push(format!(
                "config key `{key}.oauth.signing_algorithm`: applies to private_key only"
            ));
        } else if !OAUTH_SIGNING_ALGORITHMS.contains(&alg.as_str()) {
            out.push(format!(
                "config key `{key}.oauth.signing_algorithm`: '{alg}' is not one of {}",
                OAUTH_SIGNING_ALGORITHMS.join(", ")
            ));
        }
    }
}

fn default_tools_cache_ttl_sec() -> u64 {
    300
}

fn default_connect_timeout_sec() -> f64 {
    30.0
}

fn default_max_sessions() -> u32 {
    1
}

fn default_call_timeout_sec() -> f64 {
    60.0
}

impl McpProviderConfig {
    /// The transport, with the inference rule applied.
    pub fn transport(&self) -> McpTransport {
        self.provider_type.unwrap_or(if self.command.is_some() {
            McpTransport::Stdio
        } else {
            McpTransport::Sse
        })
    }
}

/// MCP transport.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum McpTransport {
    /// A child process speaking JSON-RPC on stdin/stdout.
    Stdio,
    /// The legacy HTTP+SSE transport.
    Sse,
    /// Streamable HTTP (LlamaFarm's `http`).
    #[serde(alias = "http")]
    StreamableHttp,
}

impl McpTransport {
    /// The config spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Stdio => "stdio",
            Self::Sse => "sse",
            Self::StreamableHttp => "streamable_http",
        }
    }
}

/// Who shares an MCP session.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SessionScope {
    /// One session per provider for every job and worker.
    #[default]
    Shared,
    /// One session per job.
    PerJob,
    /// One session per record.
    PerRecord,
}

/// A tool executed by the service itself: its arguments are POSTed as JSON to `endpoint`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InlineToolConfig {
    /// Tool name shown to the model.
    pub name: String,
    /// LlamaFarm's `type`; only `function` exists.
    #[serde(default, rename = "type")]
    pub kind: Option<String>,
    /// Description shown to the model.
    #[serde(default)]
    pub description: String,
    /// JSON Schema of the arguments.
    #[serde(default = "empty_object_schema")]
    pub parameters: Value,
    /// URL that receives the arguments.
    pub endpoint: String,
    /// Extra HTTP headers.
    #[serde(default)]
    pub headers: BTreeMap<String, SecretString>,
    /// Per-call timeout.
    #[serde(default)]
    pub timeout_sec: Option<f64>,
}

fn empty_object_schema() -> Value {
    serde_json::json!({"type": "object", "properties": {}})
}

/// A provider's `tls_ca_file` must be a file (what is in it is checked when its client is
/// built, at start).
fn ca_file_problems(key: &str, ca: Option<&std::path::Path>, out: &mut Vec<String>) {
    if let Some(ca) = ca
        && !ca.is_file()
    {
        out.push(format!(
            "config key `{key}.tls_ca_file`: '{}' is not a file",
            ca.display()
        ));
    }
}

/// Cross-references and per-transport requirements, each problem naming its key.
pub(super) fn problems(cfg: &Config, out: &mut Vec<String>) {
    let mut model_providers = HashSet::new();
    for (i, p) in cfg.model_providers.iter().enumerate() {
        let key = format!("model_providers[{i}]");
        if !model_providers.insert(p.name.as_str()) {
            out.push(format!(
                "config key `{key}.name`: duplicate provider name '{}'",
                p.name
            ));
        }
        if super::http_url(&p.endpoint).is_none() {
            out.push(format!(
                "config key `{key}.endpoint`: must be an http(s) URL"
            ));
        }
        reserved_fields(&format!("{key}.extra_body"), p.extra_body.as_ref(), out);
        ca_file_problems(&key, p.tls_ca_file.as_deref(), out);
    }
    let mcp_names: HashSet<&str> = cfg.mcp_providers.iter().map(|p| p.name.as_str()).collect();
    let mut aliases = HashSet::new();
    for (i, m) in cfg.model_configs.iter().enumerate() {
        let key = format!("model_configs[{i}]");
        if let Some(p) = &m.prices {
            out.extend(p.problems(&format!("{key}.prices")));
        }
        if !aliases.insert(m.alias.as_str()) {
            out.push(format!(
                "config key `{key}.alias`: duplicate alias '{}'",
                m.alias
            ));
        }
        if !model_providers.contains(m.provider.as_str()) {
            out.push(format!(
                "config key `{key}.provider`: unknown model provider '{}' (defined: {})",
                m.provider,
                list(&model_providers)
            ));
        }
        // The access list filters MCP providers by name: a name that matches none would
        // silently take tools away from the model, so it is an error, not a no-op.
        for (j, name) in m.mcp_servers.iter().flatten().enumerate() {
            if !mcp_names.contains(name.as_str()) {
                out.push(format!(
                    "config key `{key}.mcp_servers[{j}]`: unknown MCP provider '{name}' (defined: {})",
                    list(&mcp_names)
                ));
            }
        }
        for p in m.problems() {
            out.push(format!("config key `{key}.{}`: {}", p.field, p.message));
        }
        reserved_fields(
            &format!("{key}.inference_parameters.extra_body"),
            m.inference_parameters.extra_body.as_ref(),
            out,
        );
    }
    let mut mcp = HashSet::new();
    for (i, p) in cfg.mcp_providers.iter().enumerate() {
        let key = format!("mcp_providers[{i}]");
        if !mcp.insert(p.name.as_str()) {
            out.push(format!(
                "config key `{key}.name`: duplicate MCP provider name '{}'",
                p.name
            ));
        }
        match p.transport() {
            McpTransport::Stdio => {
                if p.command.as_deref().is_none_or(str::is_empty) {
                    out.push(format!(
                        "config key `{key}.command`: required for stdio providers"
                    ));
                }
            }
            McpTransport::Sse | McpTransport::StreamableHttp => match &p.endpoint {
                Some(e) if super::http_url(e).is_some() => {}
                Some(_) => out.push(format!(
                    "config key `{key}.endpoint`: must be an http(s) URL"
                )),
                None => out.push(format!(
                    "config key `{key}.endpoint`: required for sse and streamable_http providers"
                )),
            },
        }
        for (field, v) in [
            ("connect_timeout_sec", p.connect_timeout_sec),
            ("call_timeout_sec", p.call_timeout_sec),
        ] {
            if let Err(msg) = check_timeout_sec(v) {
                out.push(format!("config key `{key}.{field}`: {msg}"));
            }
        }
        if p.max_concurrent_calls == Some(0) {
            out.push(format!(
                "config key `{key}.max_concurrent_calls`: must be at least 1"
            ));
        }
        if !(1..=MAX_SESSIONS).contains(&p.max_sessions) {
            out.push(format!(
                "config key `{key}.max_sessions`: must be from 1 to {MAX_SESSIONS}"
            ));
        } else if p.max_sessions > 1 && p.session_scope != SessionScope::Shared {
            out.push(format!(
                "config key `{key}.max_sessions`: only a `shared` provider opens sessions by load; \
                 `per_job` and `per_record` open one per job or record"
            ));
        }
        if let Some(o) = &p.oauth {
            oauth_problems(&key, p, o, out);
        }
        ca_file_problems(&key, p.tls_ca_file.as_deref(), out);
    }
    let inline: HashSet<&str> = cfg.tools.iter().map(|t| t.name.as_str()).collect();
    let mut tool_aliases = HashSet::new();
    for (i, t) in cfg.tool_configs.iter().enumerate() {
        let key = format!("tool_configs[{i}]");
        if !tool_aliases.insert(t.tool_alias.as_str()) {
            out.push(format!(
                "config key `{key}.tool_alias`: duplicate alias '{}'",
                t.tool_alias
            ));
        }
        for (j, name) in t.providers.iter().enumerate() {
            if !mcp.contains(name.as_str()) && !inline.contains(name.as_str()) {
                out.push(format!(
                    "config key `{key}.providers[{j}]`: unknown MCP provider '{name}' (defined: {})",
                    list(&mcp)
                ));
            }
        }
        for p in t.problems() {
            out.push(format!("config key `{key}.{}`: {}", p.field, p.message));
        }
    }
    for (i, t) in cfg.tools.iter().enumerate() {
        if super::http_url(&t.endpoint).is_none() {
            out.push(format!(
                "config key `tools[{i}].endpoint`: must be an http(s) URL"
            ));
        }
        if !t.parameters.is_object() {
            out.push(format!(
                "config key `tools[{i}].parameters`: must be a JSON Schema object"
            ));
        } else if let Err(e) = jsonschema::validator_for(&t.parameters) {
            out.push(format!(
                "config key `tools[{i}].parameters`: is not a valid JSON Schema: {e}"
            ));
        }
        if t.kind.as_deref().is_some_and(|k| k != "function") {
            out.push(format!("config key `tools[{i}].type`: must be `function`"));
        }
        if let Some(v) = t.timeout_sec
            && let Err(msg) = check_timeout_sec(v)
        {
            out.push(format!("config key `tools[{i}].timeout_sec`: {msg}"));
        }
        if mcp.contains(t.name.as_str()) {
            out.push(format!(
                "config key `tools[{i}].name`: '{}' is also an MCP provider name; tool configs could not tell them apart",
                t.name
            ));
        }
    }
}

/// An API key's allow lists name server aliases: a job's own definitions are for keys
/// without a list (a restricted key is held to the server's definitions).
pub(super) fn allow_list_problems(cfg: &Config, out: &mut Vec<String>) {
    let models: HashSet<&str> = cfg.model_configs.iter().map(|m| m.alias.as_str()).collect();
    let tools: HashSet<&str> = cfg
        .tool_configs
        .iter()
        .map(|t| t.tool_alias.as_str())
        .collect();
    for (i, k) in cfg.auth.api_keys.iter().enumerate() {
        for (field, allowed, known, what) in [
            ("allow_models", &k.allow_models, &models, "model_configs"),
            ("allow_tools", &k.allow_tools, &tools, "tool_configs"),
        ] {
            for (j, alias) in allowed.iter().flatten().enumerate() {
                if !known.contains(alias.as_str()) {
                    out.push(format!(
                        "config key `auth.api_keys[{i}].{field}[{j}]`: '{alias}' is not an alias of the server's `{what}` (defined: {}); allow lists name server aliases",
                        list(known)
                    ));
                }
            }
        }
    }
}

/// `extra_body` may not set a request field the service computes.
fn reserved_fields(key: &str, extra_body: Option<&Map<String, Value>>, out: &mut Vec<String>) {
    for field in extra_body
        .map(reserved_extra_body_fields)
        .unwrap_or_default()
    {
        out.push(format!(
            "config key `{key}.{field}`: extra_body may not set '{field}': the service computes it"
        ));
    }
}

fn list(names: &HashSet<&str>) -> String {
    if names.is_empty() {
        return "none".into();
    }
    let mut v: Vec<&str> = names.iter().copied().collect();
    v.sort_unstable();
    v.join(", ")
}
