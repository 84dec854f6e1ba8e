//! The GenAI `chat` span of one LLM call (OpenTelemetry's GenAI semantic conventions): what
//! was asked of which model, how it answered, its tokens, its retries (each retry's warning is an
//! event on it, with its cause), and, only with content capture on, the messages. Also the latency histogram.

use std::time::Duration;

use opentelemetry::{Array, StringValue, Value};
use tracing::field::Empty;
use tracing_opentelemetry::OpenTelemetrySpanExt;

use super::error::LlmError;
use super::params::Sampled;
use super::types::{ChatRequest, ChatResponse};
use crate::config::ProviderType;
use crate::domain::models::ModelConfig;
use crate::metrics as m;
use crate::telemetry::{self, SPANS};

/// `gen_ai.provider.name` of a provider type (the conventions' well-known values).
fn provider_name(kind: Option<ProviderType>) -> &'static str {
    match kind {
        Some(ProviderType::Openai) => "openai",
        Some(ProviderType::Anthropic) => "anthropic",
        None => "unknown",
    }
}

/// The span of a chat call to `model` (served by a provider of `kind`, when it exists).
pub(super) fn chat(model: &ModelConfig, kind: Option<ProviderType>) -> tracing::Span {
    tracing::info_span!(
        target: SPANS,
        "chat",
        otel.name = %format_args!("chat {}", model.model),
        otel.kind = "client",
        gen_ai.operation.name = "chat",
        gen_ai.provider.name = provider_name(kind),
        gen_ai.request.model = %model.model,
        gen_ai.request.temperature = Empty,
        gen_ai.request.top_p = Empty,
        gen_ai.request.max_tokens = Empty,
        gen_ai.usage.input_tokens = Empty,
        gen_ai.usage.output_tokens = Empty,
        gen_ai.usage.reasoning_tokens = Empty,
        server.address = Empty,
        server.port = Empty,
        synthgate.llm.provider = %model.provider,
        synthgate.llm.model_alias = %model.alias,
        synthgate.llm.tools_offered = Empty,
        synthgate.llm.attempts = Empty,
        synthgate.llm.retries = Empty,
        error.type = Empty,
        otel.status_code = Empty,
    )
}

/// What was requested: the parameters drawn for this call, and the server it goes to.
pub(super) fn requested(span: &tracing::Span, sampled: &Sampled, url: &str, req: &ChatRequest) {
    if span.is_disabled() {
        return;
    }
    if let Some(t) = sampled.temperature {
        span.record("gen_ai.request.temperature", t);
    }
    if let Some(p) = sampled.top_p {
        span.record("gen_ai.request.top_p", p);
    }
    if let Some(n) = sampled.max_tokens {
        span.record("gen_ai.request.max_tokens", int(n));
    }
    if let Ok(u) = reqwest::Url::parse(url) {
        if let Some(host) = u.host_str() {
            span.record("server.address", host);
        }
        if let Some(port) = u.port_or_known_default() {
            span.record("server.port", i64::from(port));
        }
    }
    span.record("synthgate.llm.tools_offered", int(req.tools.len() as u64));
    if telemetry::capture_content() {
        span.set_attribute("gen_ai.input.messages", json(&req.messages));
    }
}

/// How the call ended, on its span and in the latency histogram.
pub(super) fn ended(
    span: &tracing::Span,
    model: &ModelConfig,
    provider_known: bool,
    elapsed: Duration,
    result: &Result<ChatResponse, LlmError>,
) {
    let code = result.as_ref().err().map(LlmError::code);
    let outcome = code.as_ref().map_or("ok", |c| c.as_str());
    // Labels bounded to server-defined names: a job's own model configs count as one alias,
    // and a provider name the server lacks as `unknown`.
    let alias = m::model_alias_label(&model.alias, model.job_limit.is_none());
    let provider = if provider_known {
        model.provider.clone()
    } else {
        "unknown".to_owned()
    };
    metrics::histogram!(m::LLM_REQUEST_SECONDS,
        "provider" => provider, "model_alias" => alias, "outcome" => outcome.to_owned())
    .record(elapsed.as_secs_f64());
    if span.is_disabled() {
        return;
    }
    match result {
        Ok(r) => {
            span.record("gen_ai.usage.input_tokens", int(r.usage.prompt_tokens));
            span.record("gen_ai.usage.output_tokens", int(r.usage.completion_tokens));
            if let Some(n) = r.usage.reasoning_tokens {
                span.record("gen_ai.usage.reasoning_tokens", int(n));
            }
            span.record("synthgate.llm.attempts", i64::from(r.attempts));
            span.record(
                "synthgate.llm.retries",
                i64::from(r.attempts.saturating_sub(1)),
            );
            if let Some(reason) = &r.finish_reason {
                let reasons = Array::String(vec![StringValue::from(reason.clone())]);
                span.set_attribute("gen_ai.response.finish_reasons", Value::Array(reasons));
            }
            if telemetry::capture_content() {
                span.set_attribute(
                    "gen_ai.output.messages",
                    json(std::slice::from_ref(&r.message)),
                );
            }
        }
        Err(e) => {
            span.record("synthgate.llm.attempts", i64::from(e.attempts()));
            span.record(
                "synthgate.llm.retries",
                i64::from(e.attempts().saturating_sub(1)),
            );
            span.record("error.type", e.code().as_str());
            span.record("otel.status_code", "ERROR");
        }
    }
}

/// A count as the integer attribute the conventions ask for (tracing-opentelemetry writes a
/// `u64` as a string).
fn int(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// Messages as the JSON text the conventions put in `gen_ai.*.messages`.
fn json<T: serde::Serialize>(messages: &[T]) -> String {
    serde_json::to_string(messages).unwrap_or_default()
}
