//! DataDesigner's `ModelConfig` and `ToolConfig`, shared by the server config and job configs.
//!
//! Field names and defaults follow DataDesigner 0.9.7 (`data_designer.config.models` and
//! `data_designer.config.mcp`). Unknown keys are rejected, as DataDesigner does.

mod cache;
pub mod prices;
pub use prices::Prices;
mod tool_config;
pub use cache::CacheMode;

pub use tool_config::ToolConfig;

use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use utoipa::ToSchema;

/// The longest timeout any config may set, in seconds (one day). Every number that becomes a
/// [`Duration`] is checked against it when the config is read, so no input reaches a
/// conversion that could overflow, and no call waits for longer than a batch job could.
pub const MAX_TIMEOUT_SEC: u64 = 86_400;

/// `secs` as a [`Duration`], or `None` when it is negative, not a number or too large. Use
/// this, never `Duration::from_secs_f64` (which panics), on any number that came from outside.
pub fn duration_from_secs(secs: f64) -> Option<Duration> {
    Duration::try_from_secs_f64(secs).ok()
}

/// Request-body fields the LLM adapters compute: the model, the conversation, the tools the
/// model is offered and how it may use them, and the response framing the adapters parse.
/// `extra_body` (a job's model config, or the server's) may set any other field, but never
/// one of these: a job could otherwise call another model than its alias names, replace the
/// conversation, offer tools its allow lists hide (provider-side tools and MCP servers
/// included), or break response parsing.
pub const RESERVED_EXTRA_BODY_FIELDS: &[&str] = &[
    "model",
    "messages",
    "system",
    "tools",
    "tool_choice",
    "functions",
    "function_call",
    "mcp_servers",
    "web_search_options",
    "stream",
    "stream_options",
    "n",
];

/// The keys of `extra_body` that [`RESERVED_EXTRA_BODY_FIELDS`] forbids, in map order.
pub fn reserved_extra_body_fields(extra_body: &Map<String, Value>) -> Vec<&str> {
    extra_body
        .keys()
        .map(String::as_str)
        .filter(|k| RESERVED_EXTRA_BODY_FIELDS.contains(k))
        .collect()
}

/// A model alias that LLM columns reference by `model_alias`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ModelConfig {
    /// Name that columns use in `model_alias`.
    pub alias: String,
    /// Model id sent as `model` in each request.
    pub model: String,
    /// Name of a model provider defined in the server config.
    pub provider: String,
    /// Sampling and transport parameters.
    #[serde(default)]
    pub inference_parameters: InferenceParameters,
    /// Skip DataDesigner's readiness probe (accepted for compatibility; synthgate has none).
    #[serde(default)]
    pub skip_health_check: bool,
    /// LlamaFarm's per-model MCP access list: absent = all providers, `[]` = none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mcp_servers: Option<Vec<String>>,
    /// `native_api` (default) sends tools in the API's own field; `prompt_based` describes them
    /// in the system prompt and reads calls from the reply's text (see `crate::tools::prompt`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_strategy: Option<ToolCallStrategy>,
    /// With `prompt_based`: a reply with no call block that says "use the X tool" for an
    /// offered tool X calls it with no arguments (the MCP client guide's fallback). Off by
    /// default: prose that mentions a tool is not always a request to run it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub tool_call_fallback: bool,
    /// What the model costs (server model configs only: a job's own model config may not set
    /// them, and gets the server's for the same provider and model). Without prices no cost
    /// is counted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prices: Option<Prices>,
    /// Set by the job service on a model config that came with a job: the job's own
    /// `max_parallel_requests` then caps that job alone, and never the limit the server's
    /// configs set for the provider and model, which every job shares. Never read from input.
    #[serde(skip)]
    #[schema(ignore)]
    pub job_limit: Option<JobLimit>,
}

/// The concurrency cap of one job on one (provider, model) pair.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobLimit {
    /// Identifies the job (its id, or a preview's) among all callers of the LLM client.
    pub scope: String,
    /// The smallest `max_parallel_requests` of the job's own aliases for this pair.
    pub cap: u32,
}

/// How tool definitions reach the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ToolCallStrategy {
    /// Tools in the provider API's `tools` field.
    NativeApi,
    /// Tools described in the system prompt; `<tool_call>` blocks parsed from the text.
    PromptBased,
}

/// The kinds of model DataDesigner configures (`inference_parameters.generation_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GenerationType {
    /// Chat completions: what LLM columns call.
    ChatCompletion,
    /// Embeddings (`encoding_format`, `dimensions`).
    Embedding,
    /// Image generation (everything through `extra_body`).
    Image,
}

impl GenerationType {
    /// Every generation type, as DataDesigner spells them.
    pub const NAMES: [&str; 3] = ["chat-completion", "embedding", "image"];

    /// DataDesigner's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ChatCompletion => "chat-completion",
            Self::Embedding => "embedding",
            Self::Image => "image",
        }
    }
}

/// DataDesigner's inference parameters, of every generation type: the chat-completion ones
/// (`temperature`, `top_p`, `max_tokens`), the embedding ones (`encoding_format`,
/// `dimensions`), and those all share. A model config of any type is accepted; only
/// chat-completion models can serve LLM columns (checked where columns meet models).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct InferenceParameters {
    /// `chat-completion` (default), `embedding` or `image`. Absent with `encoding_format` or
    /// `dimensions` given means `embedding`, as DataDesigner coerces it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generation_type: Option<String>,
    /// Ceiling on concurrent requests for this provider+model across all jobs (default 4).
    #[serde(default = "default_max_parallel_requests")]
    pub max_parallel_requests: u32,
    /// Per-request timeout in whole seconds; absent means 60 s.
    #[serde(default)]
    pub timeout: Option<u64>,
    /// Merged into every request body.
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub extra_body: Option<Map<String, Value>>,
    /// A number in [0, 2] or a distribution sampled per request.
    #[serde(default)]
    pub temperature: Option<ParamValue>,
    /// A number in [0, 1] or a distribution sampled per request.
    #[serde(default)]
    pub top_p: Option<ParamValue>,
    /// Upper bound on generated tokens.
    #[serde(default)]
    pub max_tokens: Option<u64>,
    /// Chat models with tools: OpenAI's `tool_choice` (`auto`, `required`, `none`, or
    /// `{"type": "function", "function": {"name": ...}}`), sent until the first tool turn
    /// (DataDesigner 0.9.7's tool loop drops it then, so a forced call cannot repeat forever).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub tool_choice: Option<Value>,
    /// Embedding models: `float` (default) or `base64`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encoding_format: Option<String>,
    /// Embedding models: the vector length to ask for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dimensions: Option<u64>,
}

impl Default for InferenceParameters {
    fn default() -> Self {
        Self {
            generation_type: None,
            max_parallel_requests: default_max_parallel_requests(),
            timeout: None,
            extra_body: None,
            temperature: None,
            top_p: None,
            max_tokens: None,
            tool_choice: None,
            encoding_format: None,
            dimensions: None,
        }
    }
}

impl InferenceParameters {
    /// The generation type, as DataDesigner reads it: given, or `embedding` when the embedding
    /// fields are set, else `chat-completion`. `None` for a name that is not one of
    /// [`GenerationType::NAMES`] (reported by [`ModelConfig::problems`]).
    pub fn kind(&self) -> Option<GenerationType> {
        match self.generation_type.as_deref() {
            None if self.encoding_format.is_some() || self.dimensions.is_some() => {
                Some(GenerationType::Embedding)
            }
            None | Some("chat-completion") => Some(GenerationType::ChatCompletion),
            Some("embedding") => Some(GenerationType::Embedding),
            Some("image") => Some(GenerationType::Image),
            Some(_) => None,
        }
    }
}

/// The `tool_choice` shapes both adapters can send: `auto`, `required`, `none`, or a named
/// function (Anthropic's `auto`, `any`, `none` and `tool`).
fn check_tool_choice(choice: &Value) -> Result<(), String> {
    match choice {
        Value::String(s) if matches!(s.as_str(), "auto" | "required" | "none") => Ok(()),
        Value::Object(o)
            if o.get("type").and_then(Value::as_str) == Some("function")
                && o.get("function")
                    .and_then(|f| f.get("name"))
                    .and_then(Value::as_str)
                    .is_some_and(|n| !n.is_empty()) =>
        {
            Ok(())
        }
        _ => Err(
            "must be 'auto', 'required', 'none' or {\"type\": \"function\", \"function\": {\"name\": ...}}"
                .into(),
        ),
    }
}

fn default_max_parallel_requests() -> u32 {
    4
}

/// A fixed number, or a distribution sampled on every request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(untagged)]
pub enum ParamValue {
    /// A fixed value.
    Fixed(f64),
    /// `{distribution_type: uniform|manual, params: {...}}`.
    Distribution(Distribution),
}

/// DataDesigner's `UniformDistribution` and `ManualDistribution`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(
    tag = "distribution_type",
    content = "params",
    rename_all = "snake_case"
)]
pub enum Distribution {
    /// Uniform on `[low, high)`, `low < high`.
    Uniform {
        /// Lower bound.
        low: f64,
        /// Upper bound.
        high: f64,
    },
    /// One of `values`, with optional `weights` (normalized).
    Manual {
        /// Candidate values (at least one).
        values: Vec<f64>,
        /// Relative weights, same length as `values`.
        #[serde(default)]
        weights: Option<Vec<f64>>,
    },
}

/// A problem with one field of a model or tool config, for validation reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldProblem {
    /// Dotted field path inside the config object, e.g. `inference_parameters.temperature`.
    pub field: String,
    /// What is wrong, readable on its own.
    pub message: String,
}

impl ModelConfig {
    /// Checks the ranges DataDesigner enforces. Returns every problem found.
    pub fn problems(&self) -> Vec<FieldProblem> {
        let mut out = Vec::new();
        let p = &self.inference_parameters;
        let mut push = |field: &str, message: String| {
            out.push(FieldProblem {
                field: field.to_owned(),
                message,
            })
        };
        if self.alias.trim().is_empty() {
            push("alias", "must not be empty".into());
        }
        if self.model.trim().is_empty() {
            push("model", "must not be empty".into());
        }
        match p.kind() {
            None => push(
                "inference_parameters.generation_type",
                format!(
                    "'{}' is not a generation type; use one of {}",
                    p.generation_type.as_deref().unwrap_or_default(),
                    GenerationType::NAMES.join(", ")
                ),
            ),
            Some(kind) => {
                // Each type's own fields, on a model of another type.
                use GenerationType::{ChatCompletion, Embedding};
                for (name, set, owner) in [
                    ("temperature", p.temperature.is_some(), ChatCompletion),
                    ("top_p", p.top_p.is_some(), ChatCompletion),
                    ("max_tokens", p.max_tokens.is_some(), ChatCompletion),
                    ("tool_choice", p.tool_choice.is_some(), ChatCompletion),
                    ("encoding_format", p.encoding_format.is_some(), Embedding),
                    ("dimensions", p.dimensions.is_some(), Embedding),
                ] {
                    if set && kind != owner {
                        push(
                            &format!("inference_parameters.{name}"),
                            format!(
                                "{name} applies to {} models only, not to {} models",
                                owner.as_str(),
                                kind.as_str()
                            ),
                        );
                    }
                }
            }
        }
        if let Some(choice) = &p.tool_choice
            && let Err(why) = check_tool_choice(choice)
        {
            push("inference_parameters.tool_choice", why);
        }
        if let Some(f) = &p.encoding_format
            && !matches!(f.as_str(), "float" | "base64")
        {
            push(
                "inference_parameters.encoding_format",
                format!("must be 'float' or 'base64', got '{f}'"),
            );
        }
        if p.dimensions == Some(0) {
            push(
                "inference_parameters.dimensions",
                "must be at least 1".into(),
            );
        }
        if p.max_parallel_requests == 0 {
            push(
                "inference_parameters.max_parallel_requests",
                "must be at least 1".into(),
            );
        }
        if let Some(t) = p.timeout
            && !(1..=MAX_TIMEOUT_SEC).contains(&t)
        {
            push(
                "inference_parameters.timeout",
                format!("must be between 1 and {MAX_TIMEOUT_SEC} seconds, got {t}"),
            );
        }
        if p.max_tokens == Some(0) {
            push(
                "inference_parameters.max_tokens",
                "must be at least 1".into(),
            );
        }
        for (name, value, max) in [
            ("temperature", &p.temperature, 2.0),
            ("top_p", &p.top_p, 1.0),
        ] {
            if let Some(v) = value
                && let Err(msg) = v.check_range(0.0, max)
            {
                push(
                    &format!("inference_parameters.{name}"),
                    format!("{name} defined in model config {msg}"),
                );
            }
        }
        out
    }
}

impl ParamValue {
    fn check_range(&self, lo: f64, hi: f64) -> Result<(), String> {
        let in_range = |x: f64| x.is_finite() && (lo..=hi).contains(&x);
        let bounds = format!("must be between {lo:.1} and {hi:.1}");
        match self {
            Self::Fixed(x) if !in_range(*x) => Err(bounds),
            Self::Fixed(_) => Ok(()),
            Self::Distribution(Distribution::Uniform { low, high }) => {
                if !in_range(*low) || !in_range(*high) {
                    Err(bounds)
                } else if low >= high {
                    Err("uniform distribution needs low < high".into())
                } else {
                    Ok(())
                }
            }
            Self::Distribution(Distribution::Manual { values, weights }) => {
                if values.is_empty() {
                    return Err("manual distribution needs at least one value".into());
                }
                if values.iter().any(|v| !in_range(*v)) {
                    return Err(bounds);
                }
                if let Some(w) = weights {
                    if w.len() != values.len() {
                        return Err(
                            "manual distribution weights must match values in length".into()
                        );
                    }
                    if w.iter().any(|x| !x.is_finite() || *x < 0.0) || w.iter().sum::<f64>() <= 0.0
                    {
                        return Err(
                            "manual distribution weights must be non-negative with a non-zero sum"
                                .into(),
                        );
                    }
                }
                Ok(())
            }
        }
    }
}

/// The shortest timeout a config may give, in seconds: a millisecond. `5e-324` passed as
/// "greater than 0", and a timeout no request can meet is a mistake, not a setting.
pub const MIN_TIMEOUT_SEC: f64 = 0.001;

/// A timeout in (fractional) seconds: at least [`MIN_TIMEOUT_SEC`] and at most
/// [`MAX_TIMEOUT_SEC`].
pub fn check_timeout_sec(t: f64) -> Result<(), String> {
    #[expect(
        clippy::cast_precision_loss,
        reason = "a day in seconds is exact in an f64"
    )]
    let max = MAX_TIMEOUT_SEC as f64;
    if t.is_finite() && t >= MIN_TIMEOUT_SEC && t <= max {
        Ok(())
    } else {
        Err(format!(
            "must be at least {MIN_TIMEOUT_SEC} and at most {MAX_TIMEOUT_SEC} seconds, got {t}"
        ))
    }
}

#[cfg(test)]
mod tests;
