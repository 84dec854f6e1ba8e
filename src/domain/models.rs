//! DataDesigner's `ModelConfig` and `ToolConfig`, shared by the server config and job configs.
//!
//! Field names and defaults follow DataDesigner 0.9.7 (`data_designer.config.models` and
//! `data_designer.config.mcp`). Unknown keys are rejected, as DataDesigner does.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use utoipa::ToSchema;

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
    /// in the system prompt and parses `<tool_call>` blocks from the reply.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_strategy: Option<ToolCallStrategy>,
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

/// DataDesigner's chat-completion inference parameters (`generation_type: chat-completion`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct InferenceParameters {
    /// Only `chat-completion` is served; `embedding` and `image` are rejected at validation.
    #[serde(default = "default_generation_type")]
    pub generation_type: String,
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
}

impl Default for InferenceParameters {
    fn default() -> Self {
        Self {
            generation_type: default_generation_type(),
            max_parallel_requests: default_max_parallel_requests(),
            timeout: None,
            extra_body: None,
            temperature: None,
            top_p: None,
            max_tokens: None,
        }
    }
}

fn default_generation_type() -> String {
    "chat-completion".to_owned()
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

/// DataDesigner's `ToolConfig`: which MCP providers an LLM column may call, and how.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ToolConfig {
    /// Name that columns use in `tool_alias`.
    pub tool_alias: String,
    /// MCP provider names (server config); each call goes to the provider that has the tool.
    pub providers: Vec<String>,
    /// Only these tools are shown to the model and may be called; absent = all.
    #[serde(default)]
    pub allow_tools: Option<Vec<String>>,
    /// Tool-calling turns before calls are refused (default 5).
    #[serde(default = "default_max_tool_call_turns")]
    pub max_tool_call_turns: u32,
    /// Per-call timeout in seconds; absent = the server default.
    #[serde(default)]
    pub timeout_sec: Option<f64>,
}

fn default_max_tool_call_turns() -> u32 {
    5
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
        if p.generation_type != "chat-completion" {
            push(
                "inference_parameters.generation_type",
                format!(
                    "'{}' is not served; only 'chat-completion' is supported",
                    p.generation_type
                ),
            );
        }
        if p.max_parallel_requests == 0 {
            push(
                "inference_parameters.max_parallel_requests",
                "must be at least 1".into(),
            );
        }
        if p.timeout == Some(0) {
            push("inference_parameters.timeout", "must be at least 1".into());
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

impl ToolConfig {
    /// Checks the ranges and duplicates DataDesigner enforces.
    pub fn problems(&self) -> Vec<FieldProblem> {
        let mut out = Vec::new();
        if self.tool_alias.trim().is_empty() {
            out.push(FieldProblem {
                field: "tool_alias".into(),
                message: "must not be empty".into(),
            });
        }
        if self.max_tool_call_turns == 0 {
            out.push(FieldProblem {
                field: "max_tool_call_turns".into(),
                message: "must be at least 1".into(),
            });
        }
        if let Some(t) = self.timeout_sec
            && !(t.is_finite() && t > 0.0)
        {
            out.push(FieldProblem {
                field: "timeout_sec".into(),
                message: "must be greater than 0".into(),
            });
        }
        if let Some(allow) = &self.allow_tools {
            let mut seen = std::collections::HashSet::new();
            for t in allow {
                if !seen.insert(t) {
                    out.push(FieldProblem {
                        field: "allow_tools".into(),
                        message: format!("tool '{t}' is listed more than once"),
                    });
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn model_config_defaults_match_datadesigner() {
        let m: ModelConfig =
            serde_json::from_value(json!({"alias": "a", "model": "m", "provider": "p"})).unwrap();
        assert_eq!(m.inference_parameters.max_parallel_requests, 4);
        assert_eq!(m.inference_parameters.generation_type, "chat-completion");
        assert!(m.problems().is_empty());
    }

    #[test]
    fn temperature_out_of_range_uses_datadesigner_message() {
        let m: ModelConfig = serde_json::from_value(json!({
            "alias": "a", "model": "m", "provider": "p",
            "inference_parameters": {"temperature": 2.5}
        }))
        .unwrap();
        let p = m.problems();
        assert_eq!(p.len(), 1);
        assert_eq!(p[0].field, "inference_parameters.temperature");
        assert_eq!(
            p[0].message,
            "temperature defined in model config must be between 0.0 and 2.0"
        );
    }

    #[test]
    fn distributions_parse_and_validate() {
        let m: ModelConfig = serde_json::from_value(json!({
            "alias": "a", "model": "m", "provider": "p",
            "inference_parameters": {
                "temperature": {"distribution_type": "uniform", "params": {"low": 0.5, "high": 0.2}},
                "top_p": {"distribution_type": "manual", "params": {"values": [0.9, 0.95], "weights": [1, 3]}}
            }
        }))
        .unwrap();
        let p = m.problems();
        assert_eq!(p.len(), 1, "{p:?}");
        assert!(p[0].message.contains("low < high"));
    }

    #[test]
    fn tool_config_defaults_and_unknown_fields() {
        let t: ToolConfig =
            serde_json::from_value(json!({"tool_alias": "t", "providers": ["x"]})).unwrap();
        assert_eq!(t.max_tool_call_turns, 5);
        assert_eq!(t.timeout_sec, None);
        let err = serde_json::from_value::<ToolConfig>(
            json!({"tool_alias": "t", "providers": [], "bogus": 1}),
        )
        .unwrap_err();
        assert!(err.to_string().contains("bogus"));
    }
}
