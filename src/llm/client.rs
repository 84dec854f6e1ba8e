//! `LlmClient`: each provider's pooled connections (in lanes, see `crate::lanes`), the
//! per-(provider, model) concurrency limits, retries, and usage accounting around one chat
//! call.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use reqwest::header::{CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use secrecy::ExposeSecret;
use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::adapter;
use super::admission::{Admission, AdmissionPolicy, ProviderAdmission};
use super::error::{LlmConfigError, LlmError, Redactor};
use super::limits::Limits;
use super::params::{self, Sampled};
use super::retry::RetryPolicy;
use super::spans::{self, Operation};
use super::types::{ChatRequest, ChatResponse};
use super::usage::{ModelUsage, UsageBook};
use crate::config::{ModelProviderConfig, ProviderType, resolve_api_key};
use crate::domain::models::ModelConfig;
use crate::lanes::{Lanes, Origin, TlsError};

/// Calls LLM providers. Build one per process and share it (`Arc`): the connection pool, the
/// concurrency limits and the usage book are only meaningful when shared.
pub struct LlmClient {
    providers: HashMap<String, Provider>,
    pub(super) retry: RetryPolicy,
    pub(super) limits: Limits,
    usage: UsageBook,
    /// Most bytes of one answer read into memory ([`answer_bound`]).
    pub(super) max_answer_bytes: usize,
}

/// The least bound on a provider's answer: far past any chat completion or embedding, and still
/// a bound on a provider (or a proxy in front of one) whose body does not end, which would
/// otherwise grow in memory until the call's timeout, once per record in flight.
pub const MIN_ANSWER_BYTES: usize = 64 * 1024 * 1024;

/// The bound on one provider answer for `limits.max_image_bytes`: room for an image of that
/// size in base64 (an image model's `b64_json`) and 1 MiB of JSON around it, never under
/// [`MIN_ANSWER_BYTES`].
pub fn answer_bound(max_image_bytes: usize) -> usize {
    max_image_bytes
        .div_ceil(3)
        .saturating_mul(4)
        .saturating_add(1024 * 1024)
        .max(MIN_ANSWER_BYTES)
}

impl std::fmt::Debug for LlmClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LlmClient")
            .field("providers", &self.providers.values().collect::<Vec<_>>())
            .field("retry", &self.retry)
            .finish_non_exhaustive()
    }
}

/// A provider, ready to call: URL, headers with the resolved key, and what to redact.
pub(super) struct Provider {
    pub(super) name: String,
    pub(super) kind: ProviderType,
    /// Parsed once: a URL given to reqwest as a string is parsed again on every request.
    pub(super) url: reqwest::Url,
    /// The configured endpoint without a trailing `/` (embeddings and images hang off it).
    pub(super) base: String,
    /// Protocol, auth and extra headers; key-bearing values are marked sensitive.
    pub(super) headers: HeaderMap,
    extra_body: Option<Map<String, Value>>,
    /// Whether structured and judge columns send their schema as `response_format`.
    structured_output: crate::config::StructuredOutput,
    pub(super) redactor: Redactor,
    /// Its connections (see `crate::lanes`).
    pub(super) lanes: Lanes,
    /// Its admission controller: the requests in flight it allows now, and its circuit.
    pub(super) admission: Arc<Admission>,
}

impl std::fmt::Debug for Provider {
    // Hand-written so that no header value can ever be printed.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Provider")
            .field("name", &self.name)
            .field("kind", &self.kind)
            .field("url", &self.url.as_str())
            .finish_non_exhaustive()
    }
}

/// Header names whose values are treated as secrets (marked sensitive, redacted from errors).
fn is_sensitive_header(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    ["auth", "key", "token", "secret", "cookie", "signature"]
        .iter()
        .any(|s| n.contains(s))
}

impl Provider {
    fn new(
        cfg: &ModelProviderConfig,
        env: &impl Fn(&str) -> Option<String>,
    ) -> Result<Self, LlmConfigError> {
        let bad_endpoint = || LlmConfigError::BadEndpoint {
            provider: cfg.name.clone(),
            endpoint: cfg.endpoint.clone(),
        };
        crate::config::http_url(&cfg.endpoint).ok_or_else(bad_endpoint)?;
        let url = crate::config::http_url(&adapter::url(cfg.provider_type, &cfg.endpoint))
            .ok_or_else(bad_endpoint)?;
        let bad_header = |header: &str| LlmConfigError::BadHeader {
            provider: cfg.name.clone(),
            header: header.to_owned(),
        };
        let key = cfg.api_key.as_ref().map(|k| resolve_api_key(k, env));
        let mut redactor = Redactor::default();
        if let Some(k) = &key {
            redactor.add(k.expose_secret());
        }
        let mut headers =
            adapter::protocol_headers(cfg.provider_type, key.as_ref().map(|k| k.expose_secret()))
                .map_err(bad_header)?;
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        for (name, value) in cfg.extra_headers.iter().flatten() {
            let hn = HeaderName::try_from(name.as_str()).map_err(|_| bad_header(name))?;
            let mut hv = HeaderValue::try_from(value.as_str()).map_err(|_| bad_header(name))?;
            if is_sensitive_header(name) {
                hv.set_sensitive(true);
            }
            // Every extra header's value is the operator's, whatever its name: an
            // `OpenAI-Organization` or `X-Tenant` that a provider echoes in an error body
            // would otherwise reach a tenant's record errors.
            redactor.add(value);
            // Extra headers win, so a provider can pin e.g. another `anthropic-version`.
            headers.insert(hn, hv);
        }
        let origin = Origin {
            kind: "model_provider",
            name: cfg.name.clone(),
        };
        let lanes = crate::lanes::lanes_for(origin, cfg.tls_ca_file.as_deref(), url.as_str())
            .map_err(|e| match e {
                TlsError::CaFile { path, reason } => LlmConfigError::BadCaFile {
                    provider: cfg.name.clone(),
                    path,
                    reason,
                },
                TlsError::Config(reason) => LlmConfigError::Tls {
                    provider: cfg.name.clone(),
                    reason,
                },
            })?;
        Ok(Self {
            name: cfg.name.clone(),
            kind: cfg.provider_type,
            url,
            base: cfg.endpoint.trim_end_matches('/').to_owned(),
            headers,
            extra_body: cfg.extra_body.clone(),
            structured_output: cfg.structured_output,
            redactor,
            lanes,
            admission: Arc::new(Admission::new(&cfg.name, AdmissionPolicy::default())),
        })
    }

    /// The provider's `extra_body`.
    pub(super) fn extra_body(&self) -> Option<&Map<String, Value>> {
        self.extra_body.as_ref()
    }

    /// A transport error as text: the whole source chain (reqwest's top line alone says only
    /// "error sending request"), redacted.
    pub(super) fn transport_message(&self, e: &reqwest::Error) -> String {
        let mut msg = e.to_string();
        let mut src = std::error::Error::source(e);
        while let Some(s) = src {
            msg.push_str(": ");
            msg.push_str(&s.to_string());
            src = s.source();
        }
        self.redactor.clean(&msg)
    }
}

impl LlmClient {
    /// Builds the client for the server's model providers. API keys are resolved now
    /// (environment variable name first, then the literal), so a changed environment needs a
    /// new client. Call [`crate::install_crypto_provider`] first (done here too, harmlessly).
    pub fn new(
        providers: &[ModelProviderConfig],
        retry: RetryPolicy,
    ) -> Result<Self, LlmConfigError> {
        Self::with_env(providers, retry, |name| std::env::var(name).ok())
    }

    /// [`new`](Self::new) with an explicit environment lookup (tests, embedding).
    pub fn with_env(
        providers: &[ModelProviderConfig],
        retry: RetryPolicy,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, LlmConfigError> {
        crate::install_crypto_provider();
        let mut map = HashMap::new();
        for cfg in providers {
            let p = Provider::new(cfg, &env)?;
            if map.insert(cfg.name.clone(), p).is_some() {
                return Err(LlmConfigError::DuplicateProvider(cfg.name.clone()));
            }
        }
        Ok(Self {
            providers: map,
            retry: RetryPolicy {
                max_attempts: retry.max_attempts.max(1),
                ..retry
            },
            limits: Limits::default(),
            usage: UsageBook::default(),
            max_answer_bytes: MIN_ANSWER_BYTES,
        })
    }

    /// Reads at most `bytes` of a provider's answer (default [`MIN_ANSWER_BYTES`]; the service
    /// sets [`answer_bound`] of its image limit). A longer answer fails the attempt, as an
    /// invalid response (an error status keeps its status), without reading the rest.
    #[must_use]
    pub fn with_max_answer_bytes(mut self, bytes: usize) -> Self {
        self.max_answer_bytes = bytes;
        self
    }

    /// Sets how each provider's admission controller behaves (default: `llm.admission`'s
    /// defaults). Call it before the first request: it starts every controller afresh.
    #[must_use]
    pub fn with_admission(mut self, policy: AdmissionPolicy) -> Self {
        for p in self.providers.values_mut() {
            p.admission = Arc::new(Admission::new(&p.name, policy));
        }
        self
    }

    /// The admission state of the server's provider `name` (`None` for an unknown name).
    pub fn provider_state(&self, name: &str) -> Option<ProviderAdmission> {
        self.providers.get(name).map(|p| p.admission.state())
    }

    /// Registers model aliases ahead of use, so the shared per-(provider, model) limit is the
    /// minimum over all of them from the first request on. Call it with the server's model
    /// configs: a model config without a [`JobLimit`](crate::domain::models::JobLimit)
    /// registers itself on first use too, but one that came with a job never touches the
    /// shared limit.
    pub fn register_models(&self, models: &[ModelConfig]) {
        for m in models {
            self.limits.get(
                &m.provider,
                &m.model,
                m.inference_parameters.max_parallel_requests,
            );
        }
    }

    /// The shared concurrency limit currently applied to `model`'s (provider, model id) pair
    /// (registering `model` if it is not yet).
    pub fn concurrency_limit(&self, model: &ModelConfig) -> u32 {
        self.limits
            .get(
                &model.provider,
                &model.model,
                model.inference_parameters.max_parallel_requests,
            )
            .cap()
    }

    pub(super) fn usage_book(&self) -> &UsageBook {
        &self.usage
    }

    /// Running totals per model alias since the client was built.
    pub fn usage_snapshot(&self) -> BTreeMap<String, ModelUsage> {
        self.usage.snapshot()
    }

    /// Runs one chat completion for `model`, retrying transient failures.
    ///
    /// * `temperature`/`top_p` are drawn once per call (DataDesigner draws per request, and a
    ///   tool loop makes one call per turn).
    /// * A slot of the (provider, model) limit is held for each HTTP attempt only, never
    ///   during a backoff sleep. A model config that came with a job takes a slot of that
    ///   job's own limit first, then one of the server's shared limit if the server names the
    ///   pair.
    /// * Each attempt has the model's `inference_parameters.timeout` (default 60 s); waiting
    ///   for a slot is not part of it.
    /// * `cancel` aborts at once, whether waiting for a slot, in flight or sleeping.
    pub async fn chat(
        &self,
        model: &ModelConfig,
        req: &ChatRequest,
        cancel: &CancellationToken,
    ) -> Result<ChatResponse, LlmError> {
        let kind = self.providers.get(&model.provider).map(|p| p.kind);
        let span = spans::call(Operation::Chat, model, kind);
        let started = std::time::Instant::now();
        let (result, waited) = spans::counting_slot_waits(
            self.chat_inner(model, req, cancel, &span)
                .instrument(span.clone()),
        )
        .await;
        let answer = result.as_ref().map(|r| spans::Answer {
            usage: &r.usage,
            attempts: r.attempts,
            finish_reason: r.finish_reason.as_deref(),
            message: Some(&r.message),
        });
        let elapsed = started.elapsed().saturating_sub(waited);
        spans::ended(
            &span,
            Operation::Chat,
            model,
            kind.is_some(),
            elapsed,
            answer,
        );
        self.usage.record(&model.alias, &result);
        result
    }

    async fn chat_inner(
        &self,
        model: &ModelConfig,
        req: &ChatRequest,
        cancel: &CancellationToken,
        span: &tracing::Span,
    ) -> Result<ChatResponse, LlmError> {
        let provider = self.provider(model)?;
        let ip = &model.inference_parameters;
        let sampled = Sampled::draw(ip, &mut rand::rng());
        spans::server(span, &provider.base);
        spans::chat_request(span, &sampled, req);
        let extra = params::merge_extra_body(ip.extra_body.as_ref(), provider.extra_body.as_ref());
        let response_format = req
            .response_schema
            .as_deref()
            .and_then(|schema| provider.structured_output.response_format(schema));
        let body = adapter::build_body(
            provider.kind,
            &model.model,
            req,
            &sampled,
            &extra,
            response_format,
        );
        let kind = provider.kind;
        let (p, attempts) = self
            .exchange(model, provider, &provider.url, body, cancel, |v| {
                adapter::parse_response(kind, v)
            })
            .await?;
        Ok(ChatResponse {
            message: p.message,
            finish_reason: p.finish_reason,
            usage: p.usage,
            attempts,
            cached: false,
        })
    }

    /// What identifies the provider of `model` for the response cache's key: its type,
    /// endpoint and `extra_body`. Hashed, never stored as it is; no header or key.
    pub fn provider_identity(&self, model: &ModelConfig) -> Option<Value> {
        let p = self.providers.get(&model.provider)?;
        Some(serde_json::json!({
            "type": format!("{:?}", p.kind),
            "endpoint": p.base,
            "extra_body": p.extra_body,
        }))
    }

    /// The server's provider of `model`.
    pub(super) fn provider(&self, model: &ModelConfig) -> Result<&Provider, LlmError> {
        self.providers
            .get(&model.provider)
            .ok_or_else(|| LlmError::UnknownModelProvider {
                model: model.alias.clone(),
                provider: model.provider.clone(),
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn provider(key: &str, headers: &[(&str, &str)]) -> ModelProviderConfig {
        serde_json::from_value(serde_json::json!({
            "name": "p", "endpoint": "http://127.0.0.1:9/v1", "api_key": key,
            "extra_headers": headers.iter().cloned().collect::<BTreeMap<_, _>>()
        }))
        .unwrap()
    }

    #[test]
    fn the_answer_bound_makes_room_for_the_largest_image() {
        assert_eq!(answer_bound(0), MIN_ANSWER_BYTES);
        assert_eq!(answer_bound(20 << 20), MIN_ANSWER_BYTES);
        // 60 MiB in base64 is 80 MiB, and 1 MiB of JSON around it.
        assert_eq!(answer_bound(60 << 20), 81 << 20);
        assert_eq!(answer_bound(usize::MAX), usize::MAX);
    }

    #[test]
    fn debug_never_shows_secrets() {
        let cfg = provider(
            "sk-top-secret",
            &[("X-Custom-Token", "tok-hidden-1"), ("X-Trace", "t")],
        );
        let client = LlmClient::with_env(&[cfg], RetryPolicy::default(), |_| None).unwrap();
        let dbg = format!("{client:?}");
        assert!(
            !dbg.contains("sk-top-secret") && !dbg.contains("tok-hidden-1"),
            "{dbg}"
        );
        let p = &client.providers["p"];
        assert!(p.headers["x-custom-token"].is_sensitive());
        assert!(!p.headers["x-trace"].is_sensitive());
        assert_eq!(p.redactor.clean("a tok-hidden-1 b"), "a [REDACTED] b");
        // A header not named like a secret is the operator's too.
        let cfg = provider(
            "sk-top-secret",
            &[("OpenAI-Organization", "org-internal-42")],
        );
        let client = LlmClient::with_env(&[cfg], RetryPolicy::default(), |_| None).unwrap();
        let p = &client.providers["p"];
        assert_eq!(
            p.redactor.clean("unknown organization org-internal-42"),
            "unknown organization [REDACTED]"
        );
    }

    #[test]
    fn bad_config_is_reported_by_name() {
        let dup = [provider("k", &[]), provider("k", &[])];
        let err = LlmClient::with_env(&dup, RetryPolicy::default(), |_| None).unwrap_err();
        assert_eq!(err.to_string(), "model provider 'p' is defined twice");
        let bad = provider("k", &[("bad header", "v")]);
        let err = LlmClient::with_env(&[bad], RetryPolicy::default(), |_| None).unwrap_err();
        assert!(err.to_string().contains("'bad header'"));
    }
}
