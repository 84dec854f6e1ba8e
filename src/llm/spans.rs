//! The GenAI span of one model call (OpenTelemetry's GenAI semantic conventions: `chat`,
//! `embeddings`, `generate_content` for images): what was asked of which model, how it
//! answered, its tokens, its retries (each retry's warning is an event on it, with its cause),
//! and, only with content capture on, the messages. Also the latency histogram.

use std::time::Duration;

use opentelemetry::{Array, StringValue, Value};
use tracing::field::Empty;
use tracing_opentelemetry::OpenTelemetrySpanExt;

use super::error::LlmError;
use super::params::Sampled;
use super::types::{ChatMessage, ChatRequest, Usage};
use crate::config::ProviderType;
use crate::domain::models::ModelConfig;
use crate::metrics as m;
use crate::telemetry::{self, SPANS};

/// A GenAI operation, as `gen_ai.operation.name` names it.
#[derive(Debug, Clone, Copy)]
pub(super) enum Operation {
    Chat,
    Embeddings,
    /// Image generation.
    GenerateContent,
}

impl Operation {
    fn as_str(self) -> &'static str {
        match self {
            Self::Chat => "chat",
            Self::Embeddings => "embeddings",
            Self::GenerateContent => "generate_content",
        }
    }
}

/// `gen_ai.provider.name` of a provider type (the conventions' well-known values).
fn provider_name(kind: Option<ProviderType>) -> &'static str {
    match kind {
        Some(ProviderType::Openai) => "openai",
        Some(ProviderType::Anthropic) => "anthropic",
        None => "unknown",
    }
}

/// The span of an `op` call to `model` (served by a provider of `kind`, when it exists).
pub(super) fn call(
    op: Operation,
    model: &ModelConfig,
    kind: Option<ProviderType>,
) -> tracing::Span {
    tracing::info_span!(
        target: SPANS,
        "llm",
        otel.name = %format_args!("{} {}", op.as_str(), model.model),
        otel.kind = "client",
        gen_ai.operation.name = op.as_str(),
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
        synthgate.llm.cost = Empty,
        error.type = Empty,
        otel.status_code = Empty,
    )
}

/// The server a call goes to (`base`: the provider's endpoint).
pub(super) fn server(span: &tracing::Span, base: &str) {
    if span.is_disabled() {
        return;
    }
    if let Ok(u) = reqwest::Url::parse(base) {
        if let Some(host) = u.host_str() {
            span.record("server.address", host);
        }
        if let Some(port) = u.port_or_known_default() {
            span.record("server.port", i64::from(port));
        }
    }
}

/// What a chat call asked: the parameters drawn for it, the tools offered, and (with content
/// capture on) the messages.
pub(super) fn chat_request(span: &tracing::Span, sampled: &Sampled, req: &ChatRequest) {
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
    span.record("synthgate.llm.tools_offered", int(req.tools.len() as u64));
    if telemetry::capture_content() {
        span.set_attribute("gen_ai.input.messages", json(&req.messages));
    }
}

/// What a call that succeeded answered.
pub(super) struct Answer<'a> {
    pub(super) usage: &'a Usage,
    pub(super) attempts: u32,
    /// Chat only.
    pub(super) finish_reason: Option<&'a str>,
    /// Chat only: the assistant message (on the span only with content capture on).
    pub(super) message: Option<&'a ChatMessage>,
}

tokio::task_local! {
    /// Time the call running on this task has waited for `max_parallel_requests` slots.
    static SLOT_WAIT: std::cell::Cell<Duration>;
}

/// Runs `call` and returns what it answered and how long it waited for slots
/// ([`waited_for_slot`]): the latency histogram counts the provider's time, not the queue in
/// front of it, which grows with the number of records in flight and says nothing about the
/// provider.
pub(super) async fn counting_slot_waits<F: std::future::Future>(call: F) -> (F::Output, Duration) {
    SLOT_WAIT
        .scope(std::cell::Cell::new(Duration::ZERO), async {
            let out = call.await;
            (out, SLOT_WAIT.with(std::cell::Cell::get))
        })
        .await
}

/// Adds a wait for a slot to the call running on this task (none outside
/// [`counting_slot_waits`]).
pub(super) fn waited_for_slot(waited: Duration) {
    let _ = SLOT_WAIT.try_with(|w| w.set(w.get() + waited));
}

/// How the call ended, on its span and in the latency histogram.
pub(super) fn ended(
    span: &tracing::Span,
    op: Operation,
    model: &ModelConfig,
    provider_known: bool,
    elapsed: Duration,
    result: Result<Answer<'_>, &LlmError>,
) {
    let code = result.as_ref().err().map(|e| e.code());
    let outcome = code.as_ref().map_or("ok", |c| c.as_str()).to_owned();
    // Labels bounded to server-defined names: a job's own model configs count as one alias,
    // and a provider name the server lacks as `unknown`.
    let alias = m::model_alias_label(&model.alias, model.job_limit.is_none());
    let provider = if provider_known {
        model.provider.clone()
    } else {
        "unknown".to_owned()
    };
    metrics::histogram!(m::LLM_REQUEST_SECONDS, "operation" => op.as_str(),
        "provider" => provider, "model_alias" => alias, "outcome" => outcome)
    .record(elapsed.as_secs_f64());
    if span.is_disabled() {
        return;
    }
    match result {
        Ok(a) => {
            span.record("gen_ai.usage.input_tokens", int(a.usage.prompt_tokens));
            span.record("gen_ai.usage.output_tokens", int(a.usage.completion_tokens));
            if let Some(n) = a.usage.reasoning_tokens {
                span.record("gen_ai.usage.reasoning_tokens", int(n));
            }
            // What the call cost at the server's prices (a priced model only; an image's
            // price is counted with the record, not here).
            if let Some(p) = &model.prices {
                let u = a.usage;
                let nanos =
                    p.cost_nanos(u.prompt_tokens, u.completion_tokens, u.reasoning_tokens, 0);
                span.record(
                    "synthgate.llm.cost",
                    crate::domain::models::prices::from_nanos(nanos),
                );
            }
            span.record("synthgate.llm.attempts", i64::from(a.attempts));
            span.record(
                "synthgate.llm.retries",
                i64::from(a.attempts.saturating_sub(1)),
            );
            if let Some(reason) = a.finish_reason {
                let reasons = Array::String(vec![StringValue::from(reason.to_owned())]);
                span.set_attribute("gen_ai.response.finish_reasons", Value::Array(reasons));
            }
            if let Some(message) = a.message
                && telemetry::capture_content()
            {
                span.set_attribute(
                    "gen_ai.output.messages",
                    json(std::slice::from_ref(message)),
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
