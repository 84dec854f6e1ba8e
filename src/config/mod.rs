//! One typed `Config`, loaded and validated once at start-up.
//!
//! Sources, in order: the YAML file (`--config`, `SYNTHGATE_CONFIG`, else
//! `config/synthgate.yaml` if it exists, else built-in defaults), `${VAR}` / `${env:VAR}` /
//! `${VAR:-default}` substitution inside string values, then `SYNTHGATE__SECTION__KEY=value`
//! environment overrides (values parsed as YAML scalars, list items addressed by index).
//! Every error names the key it is about, so an operator can fix it without reading code.

mod collect;
mod datasets;
mod host_entry;
mod limits;
mod llm;
mod otel;
mod providers;
mod secrets;
mod sections;
mod validators;

use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;

pub use datasets::{
    DECODED_RATIO_FLOOR, DEFAULT_SEED_CACHE_BYTES, DatasetLimits, DatasetsConfig, DecoderLimits,
    HfConfig,
};
pub use host_entry::HostEntry;
pub use limits::LimitsConfig;
pub use llm::{AdmissionConfig, CacheConfig, LlmConfig};
pub use otel::{OtelConfig, OtlpProtocol, RecordTraces};
pub use providers::{
    InlineToolConfig, McpOAuthConfig, McpProviderConfig, McpTransport, ModelProviderConfig,
    ProviderType, SessionScope, StructuredOutput, resolve_api_key,
};
pub use secrets::secret_forms;
pub use sections::{
    ApiKeyConfig, AuthConfig, DatabaseConfig, LogFormat, LoggingConfig, McpConfig, SamplersConfig,
    ServerConfig, WorkersConfig,
};
pub use validators::ValidatorsConfig;

use crate::domain::models::{ModelConfig, ToolConfig};

/// The config file used when none is named and it exists.
pub const DEFAULT_CONFIG_PATH: &str = "config/synthgate.yaml";

/// Prefix of environment overrides: `SYNTHGATE__SERVER__PORT=9000`.
const ENV_PREFIX: &str = "SYNTHGATE__";

/// The whole server configuration.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// HTTP listener, limits on requests, docs.
    #[serde(default)]
    pub server: ServerConfig,
    /// Where jobs, records and traces live.
    #[serde(default)]
    pub database: DatabaseConfig,
    /// The record worker pool.
    #[serde(default)]
    pub workers: WorkersConfig,
    /// Bounds on what one request may ask for.
    #[serde(default)]
    pub limits: LimitsConfig,
    /// API keys; absent or empty = no authentication.
    #[serde(default)]
    pub auth: AuthConfig,
    /// Log format and level.
    #[serde(default)]
    pub logging: LoggingConfig,
    /// OTLP span export (off unless an endpoint is set; the `OTEL_*` variables win).
    #[serde(default)]
    pub otel: OtelConfig,
    /// Files samplers read (the managed person datasets).
    #[serde(default)]
    pub samplers: SamplersConfig,
    /// Stored datasets (seed files): upload and import limits, the seed block cache, the
    /// server-side seed sources (allow-listed directories, the Hugging Face Hub).
    #[serde(default)]
    pub datasets: DatasetsConfig,
    /// LLM request retries.
    #[serde(default)]
    pub llm: LlmConfig,
    /// LLM endpoints with their secrets. Only the server defines these.
    #[serde(default)]
    pub model_providers: Vec<ModelProviderConfig>,
    /// Model aliases every job may use.
    #[serde(default)]
    pub model_configs: Vec<ModelConfig>,
    /// The MCP client: `connect_on_start`.
    #[serde(default)]
    pub mcp: McpConfig,
    /// MCP servers with their commands, URLs and secrets. Only the server defines these.
    #[serde(default)]
    pub mcp_providers: Vec<McpProviderConfig>,
    /// Tool aliases every job may use.
    #[serde(default)]
    pub tool_configs: Vec<ToolConfig>,
    /// Inline tools executed by the service (LlamaFarm's `tools[]`).
    #[serde(default)]
    pub tools: Vec<InlineToolConfig>,
    /// What validation columns may run: the ruff executable, remote endpoints.
    #[serde(default)]
    pub validators: ValidatorsConfig,
}

/// Why the config could not be loaded. Each message names the key or file concerned.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read config file {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    /// The file is not valid YAML.
    #[error("config file {path} is not valid YAML: {message}")]
    Yaml { path: PathBuf, message: String },
    /// One or more keys are wrong; every problem is listed.
    #[error("invalid config:\n  - {}", .0.join("\n  - "))]
    Invalid(Vec<String>),
}

impl Config {
    /// Loads from `path` (or the default), the process environment, and validates.
    pub fn load(path: Option<&Path>) -> Result<Self, ConfigError> {
        let env: Vec<(String, String)> = std::env::vars().collect();
        Self::load_with_env(path, &env)
    }

    /// Like [`Config::load`], with the environment given explicitly (for tests).
    pub fn load_with_env(
        path: Option<&Path>,
        env: &[(String, String)],
    ) -> Result<Self, ConfigError> {
        let default = Path::new(DEFAULT_CONFIG_PATH);
        let text = match path {
            Some(p) => Some((p.to_path_buf(), read(p)?)),
            None if default.exists() => Some((default.to_path_buf(), read(default)?)),
            None => None,
        };
        let value = match &text {
            Some((p, t)) => parse_yaml(p, t)?,
            None => Value::Object(Default::default()),
        };
        Self::from_value(value, env)
    }

    /// Builds the config from an already-parsed document plus the environment.
    pub fn from_value(mut value: Value, env: &[(String, String)]) -> Result<Self, ConfigError> {
        if value.is_null() {
            value = Value::Object(Default::default());
        }
        let lookup = |name: &str| env.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone());
        let mut problems = Vec::new();
        substitute(&mut value, "", &lookup, &mut problems);
        apply_env_overrides(&mut value, env, &mut problems);
        if !problems.is_empty() {
            return Err(ConfigError::Invalid(problems));
        }
        // Every problem in one run: those that stop deserializing (each key removed and the
        // rest tried again), then the checks of the values, then what the environment lacks.
        let collected = collect::deserialize_all::<Config>(value);
        let (mut problems, reported) = (collected.problems, collected.keys);
        let Some(mut config) = collected.value else {
            return Err(ConfigError::Invalid(problems));
        };
        config.otel.apply_env(&lookup, &mut problems);
        let mut checks = config.problems();
        config.datasets.env_problems(&lookup, &mut checks);
        config.auth.env_problems(&lookup, &mut checks);
        // A key already reported (removed, so checked at its default) is not reported again.
        checks.retain(|p| {
            !reported
                .iter()
                .any(|key| p.starts_with(&format!("config key `{key}")))
        });
        problems.extend(checks);
        if problems.is_empty() {
            Ok(config)
        } else {
            Err(ConfigError::Invalid(problems))
        }
    }

    /// Every semantic problem, each naming its key.
    pub fn problems(&self) -> Vec<String> {
        let mut out = Vec::new();
        self.server.problems(&mut out);
        self.database.problems(&mut out);
        self.workers.problems(&mut out);
        self.limits.problems(&mut out);
        self.auth.problems(&mut out);
        self.llm.problems(&mut out);
        self.validators.problems(&mut out);
        self.datasets.problems(&mut out);
        self.otel.problems(&mut out);
        providers::problems(self, &mut out);
        providers::allow_list_problems(self, &mut out);
        out
    }
}

fn read(path: &Path) -> Result<String, ConfigError> {
    std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
        path: path.to_path_buf(),
        source,
    })
}

fn parse_yaml(path: &Path, text: &str) -> Result<Value, ConfigError> {
    yaml_serde::from_str::<Value>(text).map_err(|e| ConfigError::Yaml {
        path: path.to_path_buf(),
        message: e.to_string(),
    })
}

/// Replaces `${VAR}`, `${env:VAR}` and `${VAR:-default}` in every string value.
fn substitute(
    value: &mut Value,
    path: &str,
    lookup: &dyn Fn(&str) -> Option<String>,
    problems: &mut Vec<String>,
) {
    match value {
        Value::String(s) if s.contains("${") => match expand(s, lookup) {
            Ok(v) => *s = v,
            Err(var) => problems.push(format!(
                "config key `{path}`: environment variable `{var}` is not set"
            )),
        },
        Value::Array(items) => {
            for (i, item) in items.iter_mut().enumerate() {
                substitute(item, &format!("{path}[{i}]"), lookup, problems);
            }
        }
        Value::Object(map) => {
            for (k, v) in map.iter_mut() {
                let child = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                substitute(v, &child, lookup, problems);
            }
        }
        _ => {}
    }
}

/// Expands one string; `Err(name)` names the first unset variable without a default.
fn expand(s: &str, lookup: &dyn Fn(&str) -> Option<String>) -> Result<String, String> {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let Some(end) = rest[start..].find('}') else {
            // An unterminated `${` is kept literally, like a shell would not.
            out.push_str(&rest[start..]);
            return Ok(out);
        };
        let inner = &rest[start + 2..start + end];
        let inner = inner.strip_prefix("env:").unwrap_or(inner);
        let (name, default) = match inner.split_once(":-") {
            Some((n, d)) => (n, Some(d)),
            None => (inner, None),
        };
        match (lookup(name), default) {
            (Some(v), _) => out.push_str(&v),
            (None, Some(d)) => out.push_str(d),
            (None, None) => return Err(name.to_owned()),
        }
        rest = &rest[start + end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// Applies `SYNTHGATE__A__B=v`: sets key `a.b` to `v` parsed as a YAML scalar or flow value.
fn apply_env_overrides(value: &mut Value, env: &[(String, String)], problems: &mut Vec<String>) {
    let mut overrides: Vec<&(String, String)> = env
        .iter()
        .filter(|(k, _)| k.starts_with(ENV_PREFIX))
        .collect();
    // Sorted so that `..__0__NAME` creates list items in a predictable order.
    overrides.sort();
    for (key, raw) in overrides {
        let segments: Vec<String> = key[ENV_PREFIX.len()..]
            .split("__")
            .map(|s| s.to_ascii_lowercase())
            .collect();
        if segments.iter().any(String::is_empty) {
            problems.push(format!("environment variable `{key}`: empty key segment"));
            continue;
        }
        let parsed =
            yaml_serde::from_str::<Value>(raw).unwrap_or_else(|_| Value::String(raw.clone()));
        // An empty value or a bare `~` would otherwise become null and erase a section.
        let parsed = if parsed.is_null() {
            Value::String(raw.clone())
        } else {
            parsed
        };
        if let Err(msg) = set_path(value, &segments, parsed) {
            problems.push(format!("environment variable `{key}`: {msg}"));
        }
    }
}

fn set_path(root: &mut Value, segments: &[String], new: Value) -> Result<(), String> {
    let mut cur = root;
    for (i, seg) in segments.iter().enumerate() {
        let last = i + 1 == segments.len();
        if cur.is_null() {
            *cur = if seg.parse::<usize>().is_ok() {
                Value::Array(Vec::new())
            } else {
                Value::Object(Default::default())
            };
        }
        cur = match cur {
            Value::Object(map) => {
                if last {
                    map.insert(seg.clone(), new);
                    return Ok(());
                }
                map.entry(seg.clone()).or_insert(Value::Null)
            }
            Value::Array(items) => {
                let idx: usize = seg
                    .parse()
                    .map_err(|_| format!("`{seg}` must be a list index here"))?;
                if idx > items.len() {
                    return Err(format!(
                        "list index {idx} skips items (list has {})",
                        items.len()
                    ));
                }
                if idx == items.len() {
                    items.push(Value::Null);
                }
                if last {
                    items[idx] = new;
                    return Ok(());
                }
                &mut items[idx]
            }
            _ => return Err(format!("`{}` is not a section", segments[..i].join("."))),
        };
    }
    Ok(())
}

/// `s` as an absolute http(s) URL with a host, the only kind an endpoint key takes: a prefix
/// check alone let `http://` or `http://a b` through, to fail on every request instead of at
/// start. The model client keeps the parsed URL, so requests do not parse it again.
pub(crate) fn http_url(s: &str) -> Option<reqwest::Url> {
    reqwest::Url::parse(s)
        .ok()
        .filter(|u| matches!(u.scheme(), "http" | "https") && u.host().is_some())
}

#[cfg(test)]
mod tests;
