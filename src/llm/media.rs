//! The non-chat calls of the client: text embeddings (`POST {endpoint}/embeddings`) here, and
//! image generation in [`super::images`], in DataDesigner's wire shape, through the same
//! limits, timeout and retries as chat.
//!
//! Only OpenAI-compatible providers have these APIs; an Anthropic provider's model fails the
//! call before anything is sent (submit refuses such a column first).

use base64::Engine as _;
use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::client::{LlmClient, Provider};
use super::error::LlmError;
use super::params::{self, apply_extra_body};
use super::spans::{self, Operation};
use super::types::Usage;
use crate::config::ProviderType;
use crate::domain::models::ModelConfig;

/// The vectors of one embeddings call, one per input in input order.
#[derive(Debug, Clone, PartialEq)]
pub struct Embeddings {
    /// One vector per input.
    pub vectors: Vec<Vec<f64>>,
    /// Tokens the provider reports (embeddings have no completion tokens).
    pub usage: Usage,
    /// HTTP attempts made (1 = no retry).
    pub attempts: u32,
}

impl LlmClient {
    /// Embeds `inputs` with `model` (an embedding model config): `{"model", "input",
    /// "encoding_format"?, "dimensions"?}` plus the merged `extra_body`, as DataDesigner sends
    /// it. Fails when the provider returns another number of vectors than inputs.
    pub async fn embed(
        &self,
        model: &ModelConfig,
        inputs: &[String],
        cancel: &CancellationToken,
    ) -> Result<Embeddings, LlmError> {
        let (span, started) = self.media_span(Operation::Embeddings, model);
        let (result, waited) = spans::counting_slot_waits(
            self.embed_inner(model, inputs, cancel)
                .instrument(span.clone()),
        )
        .await;
        let took = started.elapsed().saturating_sub(waited);
        self.media_ended(&span, Operation::Embeddings, model, took, &result, |e| {
            (&e.usage, e.attempts)
        });
        self.usage_book().record_usage(
            &model.alias,
            result.as_ref().map(|e| (e.attempts, &e.usage)),
        );
        result
    }

    async fn embed_inner(
        &self,
        model: &ModelConfig,
        inputs: &[String],
        cancel: &CancellationToken,
    ) -> Result<Embeddings, LlmError> {
        let provider = self.openai_provider(model, "embeddings")?;
        let ip = &model.inference_parameters;
        let mut body = Map::new();
        body.insert("model".into(), model.model.clone().into());
        body.insert("input".into(), inputs.to_vec().into());
        if let Some(f) = &ip.encoding_format {
            body.insert("encoding_format".into(), f.clone().into());
        }
        if let Some(d) = ip.dimensions {
            body.insert("dimensions".into(), d.into());
        }
        let expected = inputs.len();
        let ((vectors, usage), attempts) = self
            .post_media(model, provider, "embeddings", body, cancel, |v| {
                parse_embeddings(v, expected)
            })
            .await?;
        Ok(Embeddings {
            vectors,
            usage,
            attempts,
        })
    }

    /// The GenAI span of an embeddings or image call (see `spans`), and when it started.
    pub(super) fn media_span(
        &self,
        op: Operation,
        model: &ModelConfig,
    ) -> (tracing::Span, std::time::Instant) {
        let provider = self.provider(model).ok();
        let span = spans::call(op, model, provider.map(|p| p.kind));
        if let Some(p) = provider {
            spans::server(&span, &p.base);
        }
        (span, std::time::Instant::now())
    }

    /// Ends a span of [`Self::media_span`] with the call's usage (`usage_of` reads it from
    /// the answer); `took` leaves out the waits for a `max_parallel_requests` slot.
    pub(super) fn media_ended<T>(
        &self,
        span: &tracing::Span,
        op: Operation,
        model: &ModelConfig,
        took: std::time::Duration,
        result: &Result<T, LlmError>,
        usage_of: impl Fn(&T) -> (&Usage, u32),
    ) {
        let answer = result.as_ref().map(|t| {
            let (usage, attempts) = usage_of(t);
            spans::Answer {
                usage,
                attempts,
                finish_reason: None,
                message: None,
            }
        });
        let known = self.provider(model).is_ok();
        spans::ended(span, op, model, known, took, answer);
    }

    /// The model's provider, which must be OpenAI-compatible: Anthropic has no embeddings or
    /// image API, so the call fails before anything is sent.
    pub(super) fn openai_provider(
        &self,
        model: &ModelConfig,
        what: &str,
    ) -> Result<&Provider, LlmError> {
        let provider = self.provider(model)?;
        if provider.kind == ProviderType::Anthropic {
            return Err(no_api(model, &provider.name, what));
        }
        Ok(provider)
    }

    /// POSTs `body`, with the model's and provider's `extra_body` merged in, to
    /// `{endpoint}/{path}` through the client's limits, timeout and retries.
    pub(super) async fn post_media<T>(
        &self,
        model: &ModelConfig,
        provider: &Provider,
        path: &str,
        mut body: Map<String, Value>,
        cancel: &CancellationToken,
        parse: impl Fn(&Value) -> Result<T, String>,
    ) -> Result<(T, u32), LlmError> {
        let ip = &model.inference_parameters;
        let extra = params::merge_extra_body(ip.extra_body.as_ref(), provider.extra_body());
        apply_extra_body(&mut body, &extra);
        // `base` parsed at start and `path` is one of ours: this cannot fail in practice.
        let url = reqwest::Url::parse(&format!("{}/{path}", provider.base)).map_err(|e| {
            LlmError::InvalidResponse {
                model: model.alias.clone(),
                attempts: 0,
                message: format!("cannot build the request URL: {e}"),
            }
        })?;
        self.exchange(
            model,
            provider,
            &url,
            serde_json::to_vec(&body).map_err(|e| e.to_string()),
            cancel,
            parse,
        )
        .await
    }
}

fn no_api(model: &ModelConfig, provider: &str, what: &str) -> LlmError {
    LlmError::InvalidResponse {
        model: model.alias.clone(),
        attempts: 0,
        message: format!(
            "model provider '{provider}' is an Anthropic provider, which has no {what} API"
        ),
    }
}

/// `data[*].embedding` in order: a list of numbers, or (with `encoding_format: base64`) the
/// base64 of little-endian f32s, which DataDesigner reads as an empty vector and this decodes.
pub(super) fn parse_embeddings(
    body: &Value,
    expected: usize,
) -> Result<(Vec<Vec<f64>>, Usage), String> {
    let data = body
        .get("data")
        .and_then(Value::as_array)
        .ok_or("response has no `data` list")?;
    let mut vectors = Vec::with_capacity(data.len());
    for (i, item) in data.iter().enumerate() {
        let v = match item.get("embedding") {
            Some(Value::Array(xs)) => xs
                .iter()
                .map(|x| {
                    x.as_f64()
                        .ok_or(format!("`data[{i}].embedding` holds a non-number"))
                })
                .collect::<Result<Vec<f64>, String>>()?,
            Some(Value::String(b64)) => decode_f32s(b64).ok_or(format!(
                "`data[{i}].embedding` is not base64 of float32 values"
            ))?,
            _ => return Err(format!("`data[{i}].embedding` is missing")),
        };
        vectors.push(v);
    }
    if vectors.len() != expected {
        return Err(format!(
            "expected {expected} embeddings, but received {}",
            vectors.len()
        ));
    }
    let tokens = |k: &str| body.pointer(&format!("/usage/{k}")).and_then(Value::as_u64);
    let usage = Usage {
        prompt_tokens: tokens("prompt_tokens")
            .or(tokens("input_tokens"))
            .unwrap_or(0),
        completion_tokens: 0,
        reasoning_tokens: None,
    };
    Ok((vectors, usage))
}

fn decode_f32s(b64: &str) -> Option<Vec<f64>> {
    let bytes = base64::engine::general_purpose::STANDARD.decode(b64).ok()?;
    if bytes.len() % 4 != 0 {
        return None;
    }
    Some(
        bytes
            .chunks_exact(4)
            .map(|c| f64::from(f32::from_le_bytes([c[0], c[1], c[2], c[3]])))
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn embeddings_parse_lists_and_base64() {
        let b64 = base64::engine::general_purpose::STANDARD
            .encode([1.5f32.to_le_bytes(), (-2.0f32).to_le_bytes()].concat());
        let body = json!({"data": [{"embedding": [0.25, 1]}, {"embedding": b64}],
            "usage": {"prompt_tokens": 7, "total_tokens": 7}});
        let (v, u) = parse_embeddings(&body, 2).unwrap();
        assert_eq!(v, vec![vec![0.25, 1.0], vec![1.5, -2.0]]);
        assert_eq!(u.prompt_tokens, 7);
        let err = parse_embeddings(&body, 3).unwrap_err();
        assert_eq!(err, "expected 3 embeddings, but received 2");
        assert!(parse_embeddings(&json!({"data": [{}]}), 1).is_err());
        assert!(parse_embeddings(&json!({"data": [{"embedding": "abc"}]}), 1).is_err());
    }
}
