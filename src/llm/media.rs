//! The non-chat calls of the client: text embeddings (`POST {endpoint}/embeddings`) and image
//! generation, in DataDesigner's wire shape, through the same limits, timeout and retries as
//! chat.
//!
//! Images follow DataDesigner's `generate_image`: a diffusion model (its id contains `dall-e-`,
//! `dalle`, `stable-diffusion`, `sd-`, `sd_`, `imagen` or `gpt-image-`) is called on
//! `POST {endpoint}/images/generations` with `{"model", "prompt"}`; any other model on chat
//! completions with the prompt (after its `multi_modal_context` parts) as the user message,
//! its images read from `choices[0].message.images` (else a base64 or data-URI `content`).
//! Unlike DataDesigner, an image given only as an http(s) URL is **not fetched**: the model's
//! text can be steered by a job's prompt, so fetching would let a job make the service reach
//! any host (SSRF). Such an answer fails with `llm_invalid_response`; ask the provider for
//! base64 (`extra_body: {response_format: b64_json}` on OpenAI's images API).
//!
//! Only OpenAI-compatible providers have these APIs; an Anthropic provider's model fails the
//! call before anything is sent (submit refuses such a column first).

use base64::Engine as _;
use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;

use super::client::LlmClient;
use super::error::LlmError;
use super::params::{self, apply_extra_body};
use super::types::{ChatMessage, ContentBlock, Usage};
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
        let result = self.embed_inner(model, inputs, cancel).await;
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
        let provider = self.provider(model)?;
        if provider.kind == ProviderType::Anthropic {
            return Err(no_api(model, &provider.name, "embeddings"));
        }
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
        let extra = params::merge_extra_body(ip.extra_body.as_ref(), provider.extra_body());
        apply_extra_body(&mut body, &extra);
        let url = format!("{}/embeddings", provider.base);
        let expected = inputs.len();
        let ((vectors, usage), attempts) = self
            .exchange(
                model,
                provider,
                &url,
                Ok(Value::Object(body)),
                cancel,
                |v| parse_embeddings(v, expected),
            )
            .await?;
        Ok(Embeddings {
            vectors,
            usage,
            attempts,
        })
    }
}

/// One generated image: base64 data and its MIME type when the answer said it.
#[derive(Debug, Clone, PartialEq)]
pub struct GeneratedImage {
    /// Base64 (no data-URI prefix).
    pub b64: String,
    /// From a data URI's media type; `None` when the answer gave bare base64.
    pub mime_type: Option<String>,
}

/// The images of one image-generation call.
#[derive(Debug, Clone, PartialEq)]
pub struct Images {
    /// At least one image.
    pub images: Vec<GeneratedImage>,
    /// Tokens the provider reports (chat route), else zero.
    pub usage: Usage,
    /// HTTP attempts made (1 = no retry).
    pub attempts: u32,
}

/// DataDesigner's `_IMAGE_DIFFUSION_MODEL_PATTERNS`.
const DIFFUSION_PATTERNS: &[&str] = &[
    "dall-e-",
    "dalle",
    "stable-diffusion",
    "sd-",
    "sd_",
    "imagen",
    "gpt-image-",
];

/// Whether DataDesigner calls `model_id` on the images API rather than chat completions.
pub fn is_diffusion_model(model_id: &str) -> bool {
    let id = model_id.to_lowercase();
    DIFFUSION_PATTERNS.iter().any(|p| id.contains(p))
}

impl LlmClient {
    /// Generates images for `prompt` with `model` (an image model config); `context` is the
    /// `multi_modal_context` parts, sent on the chat route only (the images API takes none,
    /// as in DataDesigner). Fails when the answer holds no usable image.
    pub async fn generate_image(
        &self,
        model: &ModelConfig,
        prompt: &str,
        context: Vec<ContentBlock>,
        cancel: &CancellationToken,
    ) -> Result<Images, LlmError> {
        let result = self.image_inner(model, prompt, context, cancel).await;
        self.usage_book().record_usage(
            &model.alias,
            result.as_ref().map(|e| (e.attempts, &e.usage)),
        );
        result
    }

    async fn image_inner(
        &self,
        model: &ModelConfig,
        prompt: &str,
        context: Vec<ContentBlock>,
        cancel: &CancellationToken,
    ) -> Result<Images, LlmError> {
        let provider = self.provider(model)?;
        if provider.kind == ProviderType::Anthropic {
            return Err(no_api(model, &provider.name, "image generation"));
        }
        let ip = &model.inference_parameters;
        let diffusion = is_diffusion_model(&model.model);
        let mut body = Map::new();
        body.insert("model".into(), model.model.clone().into());
        let url = if diffusion {
            body.insert("prompt".into(), prompt.into());
            format!("{}/images/generations", provider.base)
        } else {
            let mut content = context;
            content.push(ContentBlock::text(prompt));
            let messages = vec![ChatMessage::user_blocks(content)];
            let messages =
                serde_json::to_value(&messages).map_err(|e| LlmError::InvalidResponse {
                    model: model.alias.clone(),
                    attempts: 0,
                    message: e.to_string(),
                })?;
            body.insert("messages".into(), messages);
            format!("{}/chat/completions", provider.base)
        };
        let extra = params::merge_extra_body(ip.extra_body.as_ref(), provider.extra_body());
        apply_extra_body(&mut body, &extra);
        let ((images, usage), attempts) = self
            .exchange(
                model,
                provider,
                &url,
                Ok(Value::Object(body)),
                cancel,
                |v| parse_images(v, diffusion),
            )
            .await?;
        Ok(Images {
            images,
            usage,
            attempts,
        })
    }
}

/// The images of an answer: `data[*]` (images API) or `choices[0].message.images`, falling
/// back to a string `content` (chat route). Each item may be `{"b64_json"}`, `{"image_url":
/// {"url"}}`, `{"url"}` or a string: a data URI or bare base64. An http(s) URL is refused.
fn parse_images(body: &Value, diffusion: bool) -> Result<(Vec<GeneratedImage>, Usage), String> {
    let (primary, fallback): (Vec<&Value>, Vec<&Value>) = if diffusion {
        let data = body.get("data").and_then(Value::as_array);
        (
            data.map(|d| d.iter().collect()).unwrap_or_default(),
            Vec::new(),
        )
    } else {
        let msg = body.pointer("/choices/0/message");
        let images = msg.and_then(|m| m.get("images")).and_then(Value::as_array);
        let content = msg.and_then(|m| m.get("content")).filter(|c| c.is_string());
        (
            images.map(|i| i.iter().collect()).unwrap_or_default(),
            content.into_iter().collect(),
        )
    };
    let parse = |items: Vec<&Value>| -> Result<Vec<GeneratedImage>, String> {
        let mut out = Vec::new();
        for item in items {
            if let Some(img) = image_item(item)? {
                out.push(img);
            }
        }
        Ok(out)
    };
    let mut images = parse(primary)?;
    if images.is_empty() {
        images = parse(fallback)?;
    }
    if images.is_empty() {
        return Err("No image data found in image generation response".into());
    }
    let tokens = |k: &str| body.pointer(&format!("/usage/{k}")).and_then(Value::as_u64);
    let usage = Usage {
        prompt_tokens: tokens("prompt_tokens")
            .or(tokens("input_tokens"))
            .unwrap_or(0),
        completion_tokens: tokens("completion_tokens")
            .or(tokens("output_tokens"))
            .unwrap_or(0),
        reasoning_tokens: None,
    };
    Ok((images, usage))
}

fn image_item(item: &Value) -> Result<Option<GeneratedImage>, String> {
    match item {
        Value::String(s) => image_string(s),
        Value::Object(o) => {
            if let Some(b64) = o.get("b64_json").and_then(Value::as_str) {
                return Ok(Some(GeneratedImage {
                    b64: b64.to_owned(),
                    mime_type: None,
                }));
            }
            match o.get("image_url").or_else(|| o.get("url")) {
                Some(Value::Object(u)) => u
                    .get("url")
                    .and_then(Value::as_str)
                    .map_or(Ok(None), image_string),
                Some(Value::String(s)) => image_string(s),
                _ => Ok(None),
            }
        }
        _ => Ok(None),
    }
}

fn image_string(s: &str) -> Result<Option<GeneratedImage>, String> {
    if let Some(rest) = s.strip_prefix("data:image/") {
        let (head, data) = rest.split_once(',').ok_or("an image data URI has no ','")?;
        let subtype = head.split(';').next().unwrap_or(head);
        return Ok(Some(GeneratedImage {
            b64: data.to_owned(),
            mime_type: Some(format!("image/{subtype}")),
        }));
    }
    if s.starts_with("http://") || s.starts_with("https://") {
        return Err(
            "the answer gives the image only as a URL, which synthgate does not fetch; ask the provider for base64 (e.g. extra_body response_format: b64_json)"
                .into(),
        );
    }
    let looks_b64 = !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'='));
    Ok(looks_b64.then(|| GeneratedImage {
        b64: s.to_owned(),
        mime_type: None,
    }))
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
fn parse_embeddings(body: &Value, expected: usize) -> Result<(Vec<Vec<f64>>, Usage), String> {
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
    fn images_parse_as_datadesigner_reads_them() {
        assert!(is_diffusion_model("dall-e-3") && is_diffusion_model("GPT-IMAGE-1"));
        assert!(!is_diffusion_model("gemini-2.5-flash-image"));
        let (imgs, _) = parse_images(&json!({"data": [{"b64_json": "QUJD"}]}), true).unwrap();
        assert_eq!(imgs[0].b64, "QUJD");
        let chat = json!({"choices": [{"message": {"content": "here", "images": [
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,QUJD"}}]}}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 5}});
        let (imgs, usage) = parse_images(&chat, false).unwrap();
        assert_eq!(imgs[0].mime_type.as_deref(), Some("image/png"));
        assert_eq!(usage.completion_tokens, 5);
        let content = json!({"choices": [{"message": {"content": "QUJD"}}]});
        assert_eq!(parse_images(&content, false).unwrap().0[0].b64, "QUJD");
        let none = json!({"choices": [{"message": {"content": "I cannot draw."}}]});
        assert_eq!(
            parse_images(&none, false).unwrap_err(),
            "No image data found in image generation response"
        );
        let url = json!({"data": [{"url": "https://cdn/x.png"}]});
        assert!(
            parse_images(&url, true)
                .unwrap_err()
                .contains("does not fetch")
        );
    }

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
