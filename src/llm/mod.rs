//! The LLM client layer: one chat completion against an OpenAI-compatible or Anthropic
//! provider, with DataDesigner's message shapes, concurrency limits and a retry policy.
//!
//! ```text
//! LlmClient::chat(model config, ChatRequest, cancel)
//!   ├─ provider lookup (server config)            → unknown_model_provider
//!   ├─ params: temperature/top_p drawn, extra_body merged (model, then provider)
//!   ├─ adapter: body for openai | anthropic
//!   └─ retry loop (backon schedule, full jitter or Retry-After)
//!        └─ attempt: slot of the (provider, model) limiter → POST → status / JSON → Parsed
//! ```
//!
//! What the caller (the tool loop) owns: the conversation, whitespace stripping of assistant
//! text (DataDesigner strips intermediate and final messages differently), tool execution,
//! turn budgets and traces. The chat types here are the trace format.
//!
//! Retried: 408, 429, 500, 502, 503, 504, 529, timeouts and connection errors (a reset mid-body
//! included), up to [`RetryPolicy::max_attempts`]. Never retried: other 4xx, quota-exhausted
//! 429s, malformed 2xx bodies. API keys never appear in errors, logs or `Debug` output.

mod adapter;
mod admission;
mod anthropic;
mod cache;
mod client;
mod error;
mod exchange;
mod images;
mod limits;
mod media;
mod openai;
mod params;
mod retry;
mod spans;
mod types;
mod usage;

pub use admission::{AdmissionPolicy, ProviderAdmission};
pub use cache::{CacheUse, CachedChat, cache_key};
pub use client::{LlmClient, MIN_ANSWER_BYTES, answer_bound};
pub use error::{LlmConfigError, LlmError};
pub use images::{GeneratedImage, Images, is_diffusion_model};
pub use media::Embeddings;
pub use openai::ToolJson;
pub use params::DEFAULT_TIMEOUT;
pub use retry::RetryPolicy;
pub use types::{
    ChatMessage, ChatRequest, ChatResponse, ContentBlock, FunctionCall, ImageUrl, Role, ToolCall,
    ToolSpec, Usage,
};
pub use usage::ModelUsage;

use tokio_util::sync::CancellationToken;

use crate::domain::models::ModelConfig;

/// Something that answers chat requests: the real [`LlmClient`], or a stub in a unit test of
/// code that should not need HTTP.
#[async_trait::async_trait]
pub trait ChatModel: Send + Sync {
    /// See [`LlmClient::chat`].
    async fn chat(
        &self,
        model: &ModelConfig,
        req: &ChatRequest,
        cancel: &CancellationToken,
    ) -> Result<ChatResponse, LlmError>;

    /// See [`LlmClient::generate_image`]. Stubs that never draw need not implement it.
    async fn generate_image(
        &self,
        model: &ModelConfig,
        _prompt: &str,
        _context: Vec<ContentBlock>,
        _cancel: &CancellationToken,
    ) -> Result<Images, LlmError> {
        Err(LlmError::InvalidResponse {
            model: model.alias.clone(),
            attempts: 0,
            message: "this model client cannot generate images".into(),
        })
    }

    /// What identifies the provider `model` is served by, for the response cache's key: its
    /// type, endpoint and `extra_body` (never a credential). `None` for stubs.
    fn provider_identity(&self, _model: &ModelConfig) -> Option<serde_json::Value> {
        None
    }

    /// The admission state of the server's model provider `name` (see
    /// [`LlmClient::provider_state`]). `None` for stubs and unknown names.
    fn provider_state(&self, _name: &str) -> Option<ProviderAdmission> {
        None
    }

    /// See [`LlmClient::embed`]. Stubs that never embed need not implement it.
    async fn embed(
        &self,
        model: &ModelConfig,
        _inputs: &[String],
        _cancel: &CancellationToken,
    ) -> Result<Embeddings, LlmError> {
        Err(LlmError::InvalidResponse {
            model: model.alias.clone(),
            attempts: 0,
            message: "this model client cannot embed".into(),
        })
    }
}

#[async_trait::async_trait]
impl ChatModel for LlmClient {
    async fn chat(
        &self,
        model: &ModelConfig,
        req: &ChatRequest,
        cancel: &CancellationToken,
    ) -> Result<ChatResponse, LlmError> {
        LlmClient::chat(self, model, req, cancel).await
    }

    async fn embed(
        &self,
        model: &ModelConfig,
        inputs: &[String],
        cancel: &CancellationToken,
    ) -> Result<Embeddings, LlmError> {
        LlmClient::embed(self, model, inputs, cancel).await
    }

    fn provider_identity(&self, model: &ModelConfig) -> Option<serde_json::Value> {
        LlmClient::provider_identity(self, model)
    }

    fn provider_state(&self, name: &str) -> Option<ProviderAdmission> {
        LlmClient::provider_state(self, name)
    }

    async fn generate_image(
        &self,
        model: &ModelConfig,
        prompt: &str,
        context: Vec<ContentBlock>,
        cancel: &CancellationToken,
    ) -> Result<Images, LlmError> {
        LlmClient::generate_image(self, model, prompt, context, cancel).await
    }
}

/// Every reader of a provider's answer body, for the fuzz target `llm_answer`
/// (`crate::fuzzing`): the error body's message, the chat answer in both protocols, embeddings
/// and images. Returns the chat messages read, for the readers of their text.
#[doc(hidden)]
pub(crate) fn read_answer_for_fuzzing(body: &[u8]) -> Vec<ChatMessage> {
    let _ = adapter::error_message(body);
    let Ok(value) = serde_json::from_slice::<serde_json::Value>(body) else {
        return Vec::new();
    };
    let _ = media::parse_embeddings(&value, 2);
    let _ = images::parse_images(&value, false);
    let _ = images::parse_images(&value, true);
    [
        crate::config::ProviderType::Openai,
        crate::config::ProviderType::Anthropic,
    ]
    .into_iter()
    .filter_map(|kind| adapter::parse_response(kind, &value).ok())
    .map(|parsed| parsed.message)
    .collect()
}
