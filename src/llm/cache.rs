//! The response cache (issue 51, DataDesigner #360): a [`ChatModel`] that answers a chat call
//! from the answers its API key's earlier calls got, and caches the new ones.
//!
//! Content-addressed: the key is the SHA-256 of everything that makes an answer (the
//! provider's type, endpoint and `extra_body`, the model, its inference parameters, the full
//! messages, the tools offered and how, the response format), never the API key itself.
//! Entries are kept per API key name, so one key never reads another's answers. A hit makes
//! no request, costs nothing (no tokens), is counted apart (`cached_requests`, the
//! `synthgate_llm_cache_total` metric) and is marked `cached` on its trace message. A cache
//! the database cannot read or write is passed by: the call goes to the model, and the failure
//! is logged.

use serde::Serialize;
use serde_json::Value;
use sha2::{Digest, Sha256};
use tokio_util::sync::CancellationToken;

use super::{ChatModel, ChatRequest, ChatResponse, ContentBlock, Embeddings, Images, LlmError};
use crate::domain::models::{CacheMode, ModelConfig};
use crate::metrics as m;
use crate::store::CacheStore;

/// Bumped when what the key covers, or how an answer is stored, changes: old entries then
/// stop matching instead of being misread.
const KEY_VERSION: u32 = 1;

/// Whose cache a job's calls use, and how.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CacheUse {
    /// The API key's name ('' when auth is off).
    pub owner: String,
    pub mode: CacheMode,
}

/// `inner` behind the response cache of `cache.owner`, in `cache.mode`.
pub struct CachedChat<'a> {
    pub inner: &'a dyn ChatModel,
    pub store: &'a dyn CacheStore,
    pub cache: &'a CacheUse,
}

#[derive(Serialize)]
struct KeyMaterial<'a> {
    version: u32,
    provider: Option<Value>,
    model: &'a str,
    inference_parameters: Value,
    request: Value,
    response_schema: Option<&'a Value>,
}

/// The cache key of `req` to `model` (see the module docs). `provider`: the provider's
/// identity as the client knows it.
pub fn cache_key(model: &ModelConfig, provider: Option<Value>, req: &ChatRequest) -> [u8; 32] {
    let mut request = serde_json::to_value(req).unwrap_or(Value::Null);
    // Whether an earlier answer of the conversation came from the cache does not change what
    // the model is asked.
    if let Some(messages) = request.get_mut("messages").and_then(Value::as_array_mut) {
        for msg in messages.iter_mut().filter_map(Value::as_object_mut) {
            msg.remove("cached");
        }
    }
    let material = KeyMaterial {
        version: KEY_VERSION,
        provider: provider.map(canonical),
        model: &model.model,
        inference_parameters: canonical(
            serde_json::to_value(&model.inference_parameters).unwrap_or(Value::Null),
        ),
        request: canonical(request),
        response_schema: req.response_schema.as_deref(),
    };
    let bytes = serde_json::to_vec(&material).unwrap_or_default();
    Sha256::digest(bytes).into()
}

/// `v` with every object's keys sorted, so equal values hash alike whatever order their maps
/// were built in (serde_json keeps insertion order here).
fn canonical(v: Value) -> Value {
    match v {
        Value::Object(map) => {
            let mut entries: Vec<(String, Value)> = map.into_iter().collect();
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            Value::Object(
                entries
                    .into_iter()
                    .map(|(k, v)| (k, canonical(v)))
                    .collect(),
            )
        }
        Value::Array(items) => Value::Array(items.into_iter().map(canonical).collect()),
        other => other,
    }
}

impl CachedChat<'_> {
    fn count(&self, model: &ModelConfig, result: &'static str) {
        let alias = m::model_alias_label(&model.alias, model.job_limit.is_none());
        metrics::counter!(m::LLM_CACHE, "model_alias" => alias, "result" => result).increment(1);
    }
}

#[async_trait::async_trait]
impl ChatModel for CachedChat<'_> {
    async fn chat(
        &self,
        model: &ModelConfig,
        req: &ChatRequest,
        cancel: &CancellationToken,
    ) -> Result<ChatResponse, LlmError> {
        let mode = self.cache.mode;
        if mode == CacheMode::Off {
            return self.inner.chat(model, req, cancel).await;
        }
        let key = cache_key(model, self.inner.provider_identity(model), req);
        let owner = self.cache.owner.as_str();
        if mode.reads() {
            match self.store.cache_get(owner, &key).await {
                Ok(Some(stored)) => match serde_json::from_value::<ChatResponse>(stored) {
                    Ok(mut hit) => {
                        hit.cached = true;
                        hit.attempts = 0;
                        self.count(model, "hit");
                        return Ok(hit);
                    }
                    Err(e) => tracing::warn!(model.alias = %model.alias, error = %e,
                        "a cached answer does not read back; asking the model"),
                },
                Ok(None) => {}
                Err(e) => tracing::warn!(model.alias = %model.alias, error = %e,
                    "reading the response cache failed; asking the model"),
            }
        }
        let resp = self.inner.chat(model, req, cancel).await?;
        self.count(model, "miss");
        match serde_json::to_value(&resp) {
            Ok(stored) => {
                if let Err(e) = self.store.cache_put(owner, &key, &stored).await {
                    tracing::warn!(model.alias = %model.alias, error = %e,
                        "writing the response cache failed; the answer is used uncached");
                }
            }
            Err(e) => tracing::warn!(error = %e, "an answer could not be cached"),
        }
        Ok(resp)
    }

    async fn generate_image(
        &self,
        model: &ModelConfig,
        prompt: &str,
        context: Vec<ContentBlock>,
        cancel: &CancellationToken,
    ) -> Result<Images, LlmError> {
        self.inner
            .generate_image(model, prompt, context, cancel)
            .await
    }

    async fn embed(
        &self,
        model: &ModelConfig,
        inputs: &[String],
        cancel: &CancellationToken,
    ) -> Result<Embeddings, LlmError> {
        self.inner.embed(model, inputs, cancel).await
    }

    fn provider_identity(&self, model: &ModelConfig) -> Option<Value> {
        self.inner.provider_identity(model)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::llm::ChatMessage;

    fn model(v: Value) -> ModelConfig {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn the_key_covers_what_makes_an_answer_and_nothing_else() {
        let m = model(json!({"alias": "a", "model": "m", "provider": "p"}));
        let req = ChatRequest::new(vec![ChatMessage::user("hi")]);
        let base = cache_key(&m, Some(json!({"endpoint": "http://x"})), &req);
        assert_eq!(
            base,
            cache_key(&m, Some(json!({"endpoint": "http://x"})), &req)
        );
        // Another endpoint, model, parameter or message is another key.
        assert_ne!(
            base,
            cache_key(&m, Some(json!({"endpoint": "http://y"})), &req)
        );
        let other = model(json!({"alias": "a", "model": "m2", "provider": "p"}));
        assert_ne!(
            base,
            cache_key(&other, Some(json!({"endpoint": "http://x"})), &req)
        );
        let hot = model(json!({"alias": "a", "model": "m", "provider": "p",
                               "inference_parameters": {"temperature": 0.9}}));
        assert_ne!(
            base,
            cache_key(&hot, Some(json!({"endpoint": "http://x"})), &req)
        );
        let longer = ChatRequest::new(vec![ChatMessage::user("hi!")]);
        assert_ne!(
            base,
            cache_key(&m, Some(json!({"endpoint": "http://x"})), &longer)
        );
        let mut schema = req.clone();
        schema.response_schema = Some(std::sync::Arc::new(json!({"type": "object"})));
        assert_ne!(
            base,
            cache_key(&m, Some(json!({"endpoint": "http://x"})), &schema)
        );
        // The alias is a name for the same model: not in the key.
        let renamed = model(json!({"alias": "b", "model": "m", "provider": "p"}));
        assert_eq!(
            base,
            cache_key(&renamed, Some(json!({"endpoint": "http://x"})), &req)
        );
        // Map order does not matter; a cached earlier answer does not either.
        let a = cache_key(&m, Some(json!({"a": 1, "b": 2})), &req);
        assert_eq!(a, cache_key(&m, Some(json!({"b": 2, "a": 1})), &req));
        let turn = |cached| {
            let mut answered = ChatMessage::assistant("yes");
            answered.cached = cached;
            ChatRequest::new(vec![ChatMessage::user("hi"), answered])
        };
        let fresh = turn(false);
        let from_cache = turn(true);
        assert_eq!(
            cache_key(&m, None, &fresh),
            cache_key(&m, None, &from_cache)
        );
    }
}
