//! Inline tools (LlamaFarm's `tools[]`): defined in the server config and run by the service
//! itself by POSTing the arguments as JSON to the tool's `endpoint`. LlamaFarm hands such
//! calls back to its client; a batch job has no client to ask, so the endpoint answers.

use std::time::Duration;

use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use secrecy::ExposeSecret;
use serde_json::{Map, Value};

use super::InlineToolError;
use crate::config::InlineToolConfig;
use crate::domain::models::duration_from_secs;
use crate::lanes::{Lanes, Origin};
use crate::llm::{ContentBlock, ToolSpec};

/// Largest answer read from a tool's endpoint, as much as one event of an MCP server may carry
/// (rmcp's 16 MiB). The result is cut to `limits.max_tool_result_chars` afterwards anyway; the
/// bound keeps an endpoint from filling the service's memory within its timeout.
const MAX_ANSWER_BYTES: usize = 16 * 1024 * 1024;

/// Longest response body kept from an error answer, in the `Error:` message.
const ERROR_BODY_CHARS: usize = 500;
/// Deadline when neither the tool nor the tool config sets one.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// One inline tool with its compiled argument schema.
pub struct InlineTool {
    pub(crate) cfg: InlineToolConfig,
    pub(crate) validator: Option<jsonschema::Validator>,
    /// What the model is offered, built once.
    spec: ToolSpec,
    /// Its endpoint's connections (see `crate::lanes`).
    lanes: Lanes,
}

impl InlineTool {
    /// Fails when the endpoint's HTTP client cannot be built (TLS).
    pub(crate) fn new(cfg: InlineToolConfig) -> Result<Self, InlineToolError> {
        let origin = Origin {
            kind: "inline_tool",
            name: cfg.name.clone(),
        };
        let lanes =
            crate::lanes::lanes_for(origin, None, &cfg.endpoint).map_err(|e| InlineToolError {
                tool: cfg.name.clone(),
                message: e.to_string(),
            })?;
        // The config check already rejected schemas that do not compile.
        let validator = jsonschema::validator_for(&cfg.parameters).ok();
        let spec = ToolSpec::new(
            cfg.name.clone(),
            cfg.description.clone(),
            cfg.parameters.clone(),
        );
        Ok(Self {
            cfg,
            validator,
            spec,
            lanes,
        })
    }

    pub(crate) fn spec(&self) -> ToolSpec {
        self.spec.clone()
    }

    /// POSTs `args`; a 2xx body is the result (a JSON string body is unwrapped to its text),
    /// anything else is an error message for the model. `timeout` (the tool config's) wins
    /// over the tool's own `timeout_sec`.
    pub(crate) async fn call(
        &self,
        args: Map<String, Value>,
        timeout: Option<Duration>,
    ) -> Result<Vec<ContentBlock>, String> {
        let name = &self.cfg.name;
        let timeout = timeout
            .or_else(|| self.cfg.timeout_sec.and_then(duration_from_secs))
            .unwrap_or(DEFAULT_TIMEOUT);
        let outcome = |o: &'static str| {
            metrics::counter!(crate::metrics::INLINE_TOOL_CALLS, "tool" => name.clone(), "outcome" => o)
                .increment(1);
        };
        let lane = self.lanes.pick();
        let send = lane
            .http()
            .post(&self.cfg.endpoint)
            .headers(self.headers()?)
            .timeout(timeout)
            .json(&args)
            .send();
        let resp = match send.await {
            Ok(r) => r,
            Err(e) if e.is_timeout() => {
                outcome("timeout");
                return Err(format!(
                    "Tool '{name}' timed out after {}s and was cancelled.",
                    timeout.as_secs_f64()
                ));
            }
            Err(e) => {
                outcome("transport");
                // Without the URL: it may carry a key in its query string.
                return Err(format!(
                    "Tool '{name}' failed: its endpoint could not be reached ({}).",
                    e.without_url()
                ));
            }
        };
        self.lanes.answered_over(resp.version());
        let status = resp.status();
        let body = match crate::bounded_body::read(resp, MAX_ANSWER_BYTES).await {
            Ok(Some(body)) => String::from_utf8_lossy(&body).into_owned(),
            Ok(None) => {
                outcome("too_large");
                return Err(format!(
                    "Tool '{name}' failed: its answer is larger than {} MiB.",
                    MAX_ANSWER_BYTES >> 20
                ));
            }
            Err(e) => {
                return Err(format!(
                    "Tool '{name}' failed: reading its answer failed ({}).",
                    e.without_url()
                ));
            }
        };
        drop(lane);
        if !status.is_success() {
            outcome("http_error");
            let body: String = body.chars().take(ERROR_BODY_CHARS).collect();
            return Err(format!("Tool '{name}' failed with HTTP {status}: {body}"));
        }
        outcome("ok");
        let text = match serde_json::from_str::<Value>(&body) {
            Ok(Value::String(s)) => s,
            _ => body,
        };
        Ok(vec![ContentBlock::text(text)])
    }

    fn headers(&self) -> Result<HeaderMap, String> {
        let mut out = HeaderMap::new();
        for (k, v) in &self.cfg.headers {
            let name = HeaderName::from_bytes(k.as_bytes()).map_err(|_| {
                format!(
                    "Tool '{}' is misconfigured: bad header name.",
                    self.cfg.name
                )
            })?;
            let mut value = HeaderValue::from_str(v.expose_secret()).map_err(|_| {
                format!(
                    "Tool '{}' is misconfigured: bad header value.",
                    self.cfg.name
                )
            })?;
            value.set_sensitive(true);
            out.insert(name, value);
        }
        Ok(out)
    }
}
