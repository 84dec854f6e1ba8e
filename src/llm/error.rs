//! `LlmError` (what a failed call records on the record, with a stable code), `LlmConfigError`
//! (a provider that cannot be used), and the redaction that keeps API keys out of both.

use std::time::Duration;

use crate::domain::record::RecordErrorCode;

/// A chat call that failed. Its [`code`](Self::code) is stored on the failed record.
///
/// Messages quote the provider's own error text (truncated, and with the provider's API key
/// and other configured secrets redacted) so a user can act on them.
#[derive(Debug, thiserror::Error)]
pub enum LlmError {
    /// Every attempt ran past the model's `inference_parameters.timeout`.
    #[error("model '{model}' did not answer within {}s ({attempts} attempts)", timeout.as_secs_f64())]
    Timeout {
        /// Model alias.
        model: String,
        /// The per-attempt timeout.
        timeout: Duration,
        /// HTTP attempts made.
        attempts: u32,
    },
    /// HTTP 429 on the last attempt, after retries.
    #[error("model '{model}' is rate limited (HTTP 429, {attempts} attempts): {message}")]
    RateLimited {
        /// Model alias.
        model: String,
        /// HTTP attempts made.
        attempts: u32,
        /// The provider's message.
        message: String,
    },
    /// A 5xx, after retries where the status is transient.
    #[error("model '{model}' failed with HTTP {status} ({attempts} attempts): {message}")]
    Server {
        /// Model alias.
        model: String,
        /// HTTP status.
        status: u16,
        /// HTTP attempts made.
        attempts: u32,
        /// The provider's message.
        message: String,
    },
    /// The provider's circuit stayed open (it kept failing for every caller) for as long as
    /// the call could wait (`llm.admission.patience_secs`).
    #[error(
        "model provider '{provider}' of model '{model}' is unavailable: it kept failing, and its circuit stayed open for the {}s this call waited ({attempts} attempts)",
        waited.as_secs()
    )]
    ProviderUnavailable {
        /// Model alias.
        model: String,
        /// The provider's name.
        provider: String,
        /// How long the call waited.
        waited: Duration,
        /// HTTP attempts made.
        attempts: u32,
    },
    /// Connect failures, resets (also mid-body), after retries.
    #[error("could not reach model '{model}' ({attempts} attempts): {message}")]
    Connection {
        /// Model alias.
        model: String,
        /// HTTP attempts made.
        attempts: u32,
        /// What the transport reported.
        message: String,
    },
    /// 401 or 403: the key is missing, wrong or not allowed to use this model.
    #[error(
        "model provider rejected the credentials for model '{model}' (HTTP {status}): {message}"
    )]
    AuthFailed {
        /// Model alias.
        model: String,
        /// HTTP status.
        status: u16,
        /// The provider's message.
        message: String,
        /// HTTP attempts made.
        attempts: u32,
    },
    /// 400, 404, 422 and other 4xx: the request itself is wrong (unknown model id, bad params).
    #[error("model '{model}' rejected the request (HTTP {status}): {message}")]
    BadRequest {
        /// Model alias.
        model: String,
        /// HTTP status.
        status: u16,
        /// The provider's message.
        message: String,
        /// HTTP attempts made.
        attempts: u32,
    },
    /// 413, or a 400 whose message says the prompt is too long.
    #[error("the prompt does not fit the context window of model '{model}': {message}")]
    ContextWindowExceeded {
        /// Model alias.
        model: String,
        /// The provider's message.
        message: String,
        /// HTTP attempts made.
        attempts: u32,
    },
    /// A 2xx body that is not JSON or lacks the fields the protocol requires, or a request this
    /// adapter cannot express (e.g. tool arguments that are not a JSON object, for Anthropic).
    #[error("invalid exchange with model '{model}': {message}")]
    InvalidResponse {
        /// Model alias.
        model: String,
        /// What was wrong.
        message: String,
        /// HTTP attempts made.
        attempts: u32,
    },
    /// The caller's cancellation token fired (job cancelled, shutdown, record deadline).
    #[error("request to model '{model}' was cancelled")]
    Cancelled {
        /// Model alias.
        model: String,
        /// HTTP attempts made.
        attempts: u32,
    },
    /// The model config names a provider the server config does not define.
    #[error("model '{model}' uses unknown model provider '{provider}'")]
    UnknownModelProvider {
        /// Model alias.
        model: String,
        /// The provider name it asked for.
        provider: String,
    },
}

impl LlmError {
    /// The record error code stored on the failed record.
    pub fn code(&self) -> RecordErrorCode {
        match self {
            Self::Timeout { .. } => RecordErrorCode::LlmTimeout,
            Self::RateLimited { .. } => RecordErrorCode::LlmRateLimited,
            Self::Server { .. } => RecordErrorCode::LlmServerError,
            Self::Connection { .. } => RecordErrorCode::LlmConnectionError,
            Self::ProviderUnavailable { .. } => RecordErrorCode::LlmProviderUnavailable,
            Self::AuthFailed { .. } => RecordErrorCode::LlmAuthFailed,
            Self::BadRequest { .. } => RecordErrorCode::LlmBadRequest,
            Self::ContextWindowExceeded { .. } => RecordErrorCode::LlmContextWindowExceeded,
            Self::InvalidResponse { .. } => RecordErrorCode::LlmInvalidResponse,
            Self::Cancelled { .. } => RecordErrorCode::LlmCancelled,
            Self::UnknownModelProvider { .. } => RecordErrorCode::UnknownModelProvider,
        }
    }

    /// True for failures DataDesigner calls retryable (rate limit, timeout, 5xx, connection):
    /// the call was already retried here, but a worker may still choose to requeue the record.
    pub fn is_transient(&self) -> bool {
        match self {
            Self::Timeout { .. }
            | Self::RateLimited { .. }
            | Self::Server { .. }
            | Self::Connection { .. }
            | Self::ProviderUnavailable { .. } => true,
            Self::AuthFailed { .. }
            | Self::BadRequest { .. }
            | Self::ContextWindowExceeded { .. }
            | Self::InvalidResponse { .. }
            | Self::Cancelled { .. }
            | Self::UnknownModelProvider { .. } => false,
        }
    }

    /// HTTP attempts made before failing (0 when none was sent), for usage accounting.
    pub fn attempts(&self) -> u32 {
        match self {
            Self::Timeout { attempts, .. }
            | Self::RateLimited { attempts, .. }
            | Self::Server { attempts, .. }
            | Self::Connection { attempts, .. }
            | Self::ProviderUnavailable { attempts, .. }
            | Self::AuthFailed { attempts, .. }
            | Self::BadRequest { attempts, .. }
            | Self::ContextWindowExceeded { attempts, .. }
            | Self::InvalidResponse { attempts, .. }
            | Self::Cancelled { attempts, .. } => *attempts,
            Self::UnknownModelProvider { .. } => 0,
        }
    }
}

/// A model provider in the server config that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum LlmConfigError {
    /// Two providers share a name.
    #[error("model provider '{0}' is defined twice")]
    DuplicateProvider(String),
    /// The endpoint is not an http(s) URL.
    #[error("model provider '{provider}': endpoint '{endpoint}' is not an http(s) URL")]
    BadEndpoint {
        /// Provider name.
        provider: String,
        /// The endpoint as configured.
        endpoint: String,
    },
    /// An `extra_headers` entry (or the resolved API key) is not a valid HTTP header.
    #[error("model provider '{provider}': header '{header}' has an invalid name or value")]
    BadHeader {
        /// Provider name.
        provider: String,
        /// Header name (never its value).
        header: String,
    },
    /// The provider's TLS or HTTP client cannot be set up (a CA certificate rustls refuses, no
    /// system roots).
    #[error("model provider '{provider}': {reason}")]
    Tls {
        /// Provider name.
        provider: String,
        /// What failed.
        reason: String,
    },
    /// `tls_ca_file` cannot be read or holds no PEM certificate.
    #[error("model provider '{provider}': tls_ca_file '{path}': {reason}")]
    BadCaFile {
        /// Provider name.
        provider: String,
        /// The file as configured.
        path: String,
        /// What is wrong with it.
        reason: String,
    },
}

/// Longest provider message quoted in an error; bodies can be whole HTML pages.
const MAX_MESSAGE_CHARS: usize = 500;

/// Strings that must never leave the process: a provider's API key and sensitive header values.
#[derive(Clone, Default)]
pub(crate) struct Redactor {
    secrets: Vec<String>,
}

impl std::fmt::Debug for Redactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Redactor({} secrets)", self.secrets.len())
    }
}

impl Redactor {
    /// Registers a secret in every form a provider may echo it in
    /// ([`crate::config::secret_forms`]); very short strings are skipped, as replacing them
    /// would mangle ordinary words without protecting anything real.
    pub(crate) fn add(&mut self, secret: &str) {
        if secret.len() < 4 {
            return;
        }
        let forms = crate::config::secret_forms(secret);
        for form in std::iter::once(secret.to_owned()).chain(forms) {
            if !self.secrets.contains(&form) {
                self.secrets.push(form);
            }
        }
        // Longest first, so a key that contains another secret is replaced whole.
        self.secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
    }

    /// `text` with every secret replaced by `[REDACTED]`, trimmed and truncated.
    pub(crate) fn clean(&self, text: &str) -> String {
        let mut out = text.trim().to_owned();
        for s in &self.secrets {
            if out.contains(s.as_str()) {
                out = out.replace(s.as_str(), "[REDACTED]");
            }
        }
        if out.chars().count() > MAX_MESSAGE_CHARS {
            out = out.chars().take(MAX_MESSAGE_CHARS).collect::<String>() + "…";
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redacts_every_secret_and_truncates() {
        let mut r = Redactor::default();
        r.add("sk-live-123456");
        r.add("sk-live-123456"); // idempotent
        r.add("ab"); // too short to matter
        let msg = r.clean("  Incorrect API key provided: sk-live-123456. Key sk-live-123456 ab ");
        assert_eq!(
            msg,
            "Incorrect API key provided: [REDACTED]. Key [REDACTED] ab"
        );
        assert!(!format!("{r:?}").contains("sk-live"));
        let long = r.clean(&"x".repeat(2000));
        assert_eq!(long.chars().count(), MAX_MESSAGE_CHARS + 1);
    }

    #[test]
    fn codes_are_stable() {
        let e = LlmError::Timeout {
            model: "m".into(),
            timeout: Duration::from_secs(60),
            attempts: 5,
        };
        assert_eq!(e.code(), "llm_timeout");
        assert!(e.is_transient());
        assert_eq!(
            e.to_string(),
            "model 'm' did not answer within 60s (5 attempts)"
        );
        let e = LlmError::UnknownModelProvider {
            model: "m".into(),
            provider: "p".into(),
        };
        assert_eq!(e.code(), "unknown_model_provider");
        assert_eq!(e.attempts(), 0);
    }
}
