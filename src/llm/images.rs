//! Image generation (see [`LlmClient::generate_image`]).
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

use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::client::LlmClient;
use super::error::LlmError;
use super::spans::Operation;
use super::types::{ChatMessage, ContentBlock, Usage};
use crate::domain::models::ModelConfig;

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
        let (span, started) = self.media_span(Operation::GenerateContent, model);
        let (result, waited) = super::spans::counting_slot_waits(
            self.image_inner(model, prompt, context, cancel)
                .instrument(span.clone()),
        )
        .await;
        self.media_ended(
            &span,
            Operation::GenerateContent,
            model,
            started.elapsed().saturating_sub(waited),
            &result,
            |i| (&i.usage, i.attempts),
        );
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
        let provider = self.openai_provider(model, "image generation")?;
        let diffusion = is_diffusion_model(&model.model);
        let mut body = Map::new();
        body.insert("model".into(), model.model.clone().into());
        let path = if diffusion {
            body.insert("prompt".into(), prompt.into());
            "images/generations"
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
            "chat/completions"
        };
        let ((images, usage), attempts) = self
            .post_media(model, provider, path, body, cancel, |v| {
                parse_images(v, diffusion)
            })
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
pub(super) fn parse_images(
    body: &Value,
    diffusion: bool,
) -> Result<(Vec<GeneratedImage>, Usage), String> {
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
    // DataDesigner's `is_base64_image`: longer than 100 characters, the first 100 base64.
    let looks_b64 = s.len() > 100
        && s.bytes()
            .take(100)
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'='));
    Ok(looks_b64.then(|| GeneratedImage {
        b64: s.to_owned(),
        mime_type: None,
    }))
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
        let long = "QUJD".repeat(30);
        let content = json!({"choices": [{"message": {"content": long}}]});
        assert_eq!(parse_images(&content, false).unwrap().0[0].b64, long);
        let short = json!({"choices": [{"message": {"content": "no"}}]});
        assert!(parse_images(&short, false).is_err());
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
}
