//! Retry policy for LLM calls: which failures are transient, exponential backoff with full
//! jitter (backon supplies the schedule), `Retry-After` parsing, and turning the last failure
//! into an [`LlmError`].
//!
//! DataDesigner retries only 502/503/504 and connection errors at the request layer and leaves
//! 429, 500 and timeouts to its scheduler; synthgate has no such second layer, so all of them
//! are retried here.

use std::time::{Duration, SystemTime};

use backon::ExponentialBuilder;
use rand::RngExt;
use reqwest::header::HeaderMap;

use super::admission::Signal;
use super::error::LlmError;
use crate::config::LlmConfig;

/// How failed HTTP attempts are retried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts in total, the first included (1 = never retry).
    pub max_attempts: u32,
    /// Backoff ceiling before the first retry; doubles on each later one.
    pub base_delay: Duration,
    /// Cap on one backoff, and on an honoured `Retry-After`.
    pub max_delay: Duration,
}

/// The policy of the `llm` config section.
impl From<&LlmConfig> for RetryPolicy {
    fn from(cfg: &LlmConfig) -> Self {
        Self {
            max_attempts: cfg.max_attempts,
            base_delay: Duration::from_millis(cfg.retry_base_delay_ms),
            max_delay: Duration::from_millis(cfg.retry_max_delay_ms),
        }
    }
}

/// The policy of the `llm` section's defaults.
impl Default for RetryPolicy {
    fn default() -> Self {
        Self::from(&LlmConfig::default())
    }
}

impl RetryPolicy {
    /// The backoff schedule before jitter: `base, 2·base, 4·base, …` capped at `max_delay`,
    /// `max_attempts - 1` entries.
    pub(crate) fn schedule(&self) -> ExponentialBuilder {
        ExponentialBuilder::new()
            .with_min_delay(self.base_delay.min(self.max_delay))
            .with_max_delay(self.max_delay)
            .with_factor(2.0)
            .with_max_times(self.max_attempts.saturating_sub(1) as usize)
    }

    /// The backoff schedule of throttled attempts (429, 529) when the provider sends no
    /// `Retry-After`: as [`schedule`](Self::schedule), without an end (the admission's
    /// patience bounds them instead).
    pub(crate) fn throttle_schedule(&self) -> ExponentialBuilder {
        ExponentialBuilder::new()
            .with_min_delay(self.base_delay.min(self.max_delay))
            .with_max_delay(self.max_delay)
            .with_factor(2.0)
            .without_max_times()
    }

    /// The actual wait before the next attempt: the provider's `Retry-After` when it sent one
    /// (capped at `max_delay`), otherwise a full-jitter draw in `[0, scheduled]`, which spreads
    /// the retries of many concurrent callers instead of synchronising them.
    ///
    /// A `Retry-After` of zero is no request to wait at all; it gets the backoff too, or a
    /// 429 retried without counting attempts would go round as fast as the provider answers.
    pub(crate) fn wait(&self, failure: &Failure, scheduled: Duration) -> Duration {
        match failure {
            Failure::Status {
                retry_after: Some(ra),
                ..
            } if !ra.is_zero() => (*ra).min(self.max_delay),
            _ => full_jitter(scheduled),
        }
    }
}

/// A uniform draw in `[0, d]`.
pub(crate) fn full_jitter(d: Duration) -> Duration {
    let nanos = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
    Duration::from_nanos(rand::rng().random_range(0..=nanos))
}

/// How one HTTP attempt failed (before retries are decided).
#[derive(Debug)]
pub(crate) enum Failure {
    /// A non-2xx status; `message` is already redacted.
    Status {
        status: u16,
        message: String,
        retry_after: Option<Duration>,
    },
    /// The attempt ran past the model's timeout.
    Timeout,
    /// Connect error, reset, or a body cut short; already redacted.
    Connection(String),
    /// A 2xx body that could not be read, or a request the adapter could not build.
    Invalid(String),
}

/// 429 bodies that mean "out of money", which no wait fixes (DataDesigner's quota check).
const QUOTA_MARKERS: [&str; 3] = [
    "insufficient_quota",
    "credit balance is too low",
    "exceeded your current quota",
];

/// 4xx bodies that mean the prompt is too long. `context size`: llama.cpp's `llama-server`
/// ("request (3035 tokens) exceeds the available context size (2048 tokens)").
const CONTEXT_MARKERS: [&str; 7] = [
    "context length",
    "context_length",
    "context window",
    "context size",
    "maximum context",
    "prompt is too long",
    "too many tokens",
];

impl Failure {
    /// True when another attempt may succeed.
    pub(crate) fn is_retryable(&self) -> bool {
        match self {
            // 408: the server gave up waiting; 529: Anthropic's "overloaded".
            Self::Status {
                status, message, ..
            } => match status {
                429 => !contains_any(message, &QUOTA_MARKERS),
                408 | 500 | 502 | 503 | 504 | 529 => true,
                _ => false,
            },
            Self::Timeout | Self::Connection(_) => true,
            Self::Invalid(_) => false,
        }
    }

    /// A 429 that no quota message makes final, or Anthropic's 529: the provider asks for
    /// less, so the call waits and tries again within the admission's patience, without
    /// spending one of its `max_attempts`.
    pub(crate) fn is_throttle(&self) -> bool {
        matches!(
            self,
            Self::Status {
                status: 429 | 529,
                ..
            }
        ) && self.is_retryable()
    }

    /// What this failure says about the provider, for its admission controller.
    pub(crate) fn signal(&self) -> Signal {
        match self {
            Self::Status {
                status: 503,
                retry_after,
                ..
            } => Signal::Unavailable {
                retry_after: *retry_after,
            },
            Self::Status { retry_after, .. } if self.is_throttle() => Signal::Throttled {
                retry_after: *retry_after,
            },
            Self::Status {
                status: 500 | 502 | 504,
                ..
            }
            | Self::Timeout
            | Self::Connection(_) => Signal::Down,
            Self::Status { .. } | Self::Invalid(_) => Signal::Refused,
        }
    }

    /// A short label for logs (no provider text, which may be long).
    pub(crate) fn label(&self) -> String {
        match self {
            Self::Status { status, .. } => format!("HTTP {status}"),
            Self::Timeout => "timeout".into(),
            Self::Connection(_) => "connection error".into(),
            Self::Invalid(_) => "invalid response".into(),
        }
    }

    /// The final error for the caller.
    pub(crate) fn into_error(self, model: &str, timeout: Duration, attempts: u32) -> LlmError {
        let model = model.to_owned();
        match self {
            Self::Timeout => LlmError::Timeout {
                model,
                timeout,
                attempts,
            },
            Self::Connection(message) => LlmError::Connection {
                model,
                attempts,
                message,
            },
            Self::Invalid(message) => LlmError::InvalidResponse {
                model,
                attempts,
                message,
            },
            Self::Status {
                status, message, ..
            } => match status {
                401 | 403 => LlmError::AuthFailed {
                    model,
                    status,
                    attempts,
                    message,
                },
                429 => LlmError::RateLimited {
                    model,
                    attempts,
                    message,
                },
                408 => LlmError::Timeout {
                    model,
                    timeout,
                    attempts,
                },
                413 => LlmError::ContextWindowExceeded {
                    model,
                    attempts,
                    message,
                },
                400..=499 if contains_any(&message, &CONTEXT_MARKERS) => {
                    LlmError::ContextWindowExceeded {
                        model,
                        attempts,
                        message,
                    }
                }
                400..=499 => LlmError::BadRequest {
                    model,
                    status,
                    attempts,
                    message,
                },
                500..=599 => LlmError::Server {
                    model,
                    status,
                    attempts,
                    message,
                },
                // Redirects are not followed, and 1xx never reaches us: a misconfigured endpoint.
                _ => LlmError::InvalidResponse {
                    model,
                    attempts,
                    message: format!("unexpected HTTP status {status}: {message}"),
                },
            },
        }
    }
}

fn contains_any(text: &str, needles: &[&str]) -> bool {
    let lower = text.to_lowercase();
    needles.iter().any(|n| lower.contains(n))
}

/// The wait a provider asked for: `retry-after-ms` (OpenAI's extension) first, then
/// `Retry-After` as delay-seconds (fractions tolerated) or an HTTP date. Any value parses
/// without panicking: one too large for a `Duration` saturates, and [`RetryPolicy::wait`]
/// caps every wait at `max_delay` anyway.
pub(crate) fn retry_after(headers: &HeaderMap, now: SystemTime) -> Option<Duration> {
    if let Some(ms) = headers
        .get("retry-after-ms")
        .and_then(|v| v.to_str().ok())
        .and_then(|s| s.trim().parse::<f64>().ok())
        .filter(|ms| ms.is_finite() && *ms >= 0.0)
    {
        return Some(saturating_secs(ms / 1000.0));
    }
    let value = headers.get(reqwest::header::RETRY_AFTER)?.to_str().ok()?;
    parse_retry_after(value, now)
}

/// `Retry-After` per RFC 9110: delay-seconds or an HTTP date (a past date means "now").
pub(crate) fn parse_retry_after(value: &str, now: SystemTime) -> Option<Duration> {
    let value = value.trim();
    if let Ok(secs) = value.parse::<f64>() {
        return (secs.is_finite() && secs >= 0.0).then(|| saturating_secs(secs));
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(at.duration_since(now).unwrap_or(Duration::ZERO))
}

/// A finite, non-negative number of seconds as a `Duration`, `Duration::MAX` when too large
/// (`Duration::from_secs_f64` would panic).
fn saturating_secs(secs: f64) -> Duration {
    Duration::try_from_secs_f64(secs).unwrap_or(Duration::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use backon::BackoffBuilder;

    #[test]
    fn policy_comes_from_the_llm_config_keys() {
        let cfg = LlmConfig {
            max_attempts: 2,
            retry_base_delay_ms: 70,
            retry_max_delay_ms: 900,
            cache: Default::default(),
            admission: Default::default(),
        };
        let p = RetryPolicy::from(&cfg);
        assert_eq!(p.max_attempts, 2);
        assert_eq!(p.base_delay, Duration::from_millis(70));
        assert_eq!(p.max_delay, Duration::from_millis(900));
    }

    #[test]
    fn retry_after_seconds_and_dates() {
        let now = httpdate::parse_http_date("Sun, 06 Nov 1994 08:49:37 GMT").unwrap();
        let p = |s| parse_retry_after(s, now);
        assert_eq!(p("2"), Some(Duration::from_secs(2)));
        assert_eq!(p(" 0.25 "), Some(Duration::from_millis(250)));
        assert_eq!(
            p("Sun, 06 Nov 1994 08:49:47 GMT"),
            Some(Duration::from_secs(10))
        );
        // The two obsolete formats RFC 9110 still requires recipients to accept.
        assert_eq!(
            p("Sunday, 06-Nov-94 08:49:40 GMT"),
            Some(Duration::from_secs(3))
        );
        assert_eq!(p("Sun Nov  6 08:49:38 1994"), Some(Duration::from_secs(1)));
        assert_eq!(p("Sun, 06 Nov 1994 08:00:00 GMT"), Some(Duration::ZERO));
        assert_eq!(p("-1"), None);
        assert_eq!(p("soon"), None);

        let mut h = HeaderMap::new();
        h.insert("retry-after", "3".parse().unwrap());
        assert_eq!(retry_after(&h, now), Some(Duration::from_secs(3)));
        h.insert("retry-after-ms", "1500".parse().unwrap());
        assert_eq!(retry_after(&h, now), Some(Duration::from_millis(1500)));
    }

    #[test]
    fn no_retry_after_value_panics_and_every_wait_is_capped() {
        let now = SystemTime::UNIX_EPOCH;
        let policy = RetryPolicy::default();
        for v in [
            "1e20",
            "1e300",
            "1e309",
            "18446744073709551616",
            "NaN",
            "inf",
            "-0",
            "0x10",
            "",
        ] {
            let ra = parse_retry_after(v, now);
            let mut h = HeaderMap::new();
            h.insert("retry-after-ms", v.parse().unwrap());
            let ms = retry_after(&h, now);
            for ra in [ra, ms] {
                let f = Failure::Status {
                    status: 503,
                    message: String::new(),
                    retry_after: ra,
                };
                assert!(policy.wait(&f, Duration::ZERO) <= policy.max_delay, "{v}");
            }
        }
        assert_eq!(parse_retry_after("1e20", now), Some(Duration::MAX));
        assert_eq!(
            parse_retry_after("Fri, 31 Dec 9999 23:59:59 GMT", now).map(|d| d > Duration::ZERO),
            Some(true)
        );
    }

    #[test]
    fn schedule_doubles_caps_and_stops() {
        let policy = RetryPolicy {
            max_attempts: 6,
            base_delay: Duration::from_millis(100),
            max_delay: Duration::from_millis(500),
        };
        let got: Vec<u128> = policy.schedule().build().map(|d| d.as_millis()).collect();
        assert_eq!(got, vec![100, 200, 400, 500, 500]);
        let once = RetryPolicy {
            max_attempts: 1,
            ..policy
        };
        assert_eq!(once.schedule().build().count(), 0);
    }

    #[test]
    fn wait_uses_retry_after_or_full_jitter() {
        let policy = RetryPolicy::default();
        let limited = Failure::Status {
            status: 429,
            message: String::new(),
            retry_after: Some(Duration::from_secs(2)),
        };
        assert_eq!(
            policy.wait(&limited, Duration::from_secs(9)),
            Duration::from_secs(2)
        );
        let huge = Failure::Status {
            status: 503,
            message: String::new(),
            retry_after: Some(Duration::from_secs(3600)),
        };
        assert_eq!(policy.wait(&huge, Duration::ZERO), policy.max_delay);
        let draws: Vec<Duration> = (0..200)
            .map(|_| policy.wait(&Failure::Timeout, Duration::from_millis(100)))
            .collect();
        assert!(draws.iter().all(|d| *d <= Duration::from_millis(100)));
        assert!(draws.iter().any(|d| *d < Duration::from_millis(30)));
        assert!(draws.iter().any(|d| *d > Duration::from_millis(70)));
    }

    #[test]
    fn classification() {
        let status = |status, message: &str| Failure::Status {
            status,
            message: message.into(),
            retry_after: None,
        };
        for s in [408, 429, 500, 502, 503, 504, 529] {
            assert!(status(s, "").is_retryable(), "{s}");
        }
        for s in [400, 401, 403, 404, 422, 501] {
            assert!(!status(s, "").is_retryable(), "{s}");
        }
        assert!(!status(429, "You exceeded your current quota").is_retryable());
        // What each says about the provider.
        assert!(status(429, "").is_throttle() && status(529, "").is_throttle());
        assert!(!status(429, "insufficient_quota").is_throttle());
        assert!(!status(503, "").is_throttle());
        assert_eq!(
            status(503, "").signal(),
            Signal::Unavailable { retry_after: None }
        );
        assert_eq!(
            status(429, "").signal(),
            Signal::Throttled { retry_after: None }
        );
        for down in [
            status(500, ""),
            status(502, ""),
            status(504, ""),
            Failure::Timeout,
        ] {
            assert_eq!(down.signal(), Signal::Down);
        }
        for up in [
            status(400, ""),
            status(408, ""),
            status(429, "insufficient_quota"),
        ] {
            assert_eq!(up.signal(), Signal::Refused);
        }
        assert!(Failure::Connection("reset".into()).is_retryable());
        assert!(!Failure::Invalid("x".into()).is_retryable());

        let t = Duration::from_secs(1);
        let code = |f: Failure| f.into_error("m", t, 1).code();
        assert_eq!(code(status(401, "")), "llm_auth_failed");
        assert_eq!(code(status(403, "")), "llm_auth_failed");
        assert_eq!(code(status(404, "no such model")), "llm_bad_request");
        assert_eq!(code(status(422, "")), "llm_bad_request");
        assert_eq!(
            code(status(
                400,
                "This model's maximum context length is 8192 tokens"
            )),
            "llm_context_window_exceeded"
        );
        assert_eq!(
            code(status(
                400,
                "request (3035 tokens) exceeds the available context size (2048 tokens), \
                 try increasing it"
            )),
            "llm_context_window_exceeded"
        );
        assert_eq!(code(status(413, "")), "llm_context_window_exceeded");
        assert_eq!(code(status(429, "")), "llm_rate_limited");
        assert_eq!(code(status(503, "")), "llm_server_error");
        assert_eq!(code(status(302, "")), "llm_invalid_response");
        assert_eq!(code(Failure::Timeout), "llm_timeout");
        assert_eq!(
            code(Failure::Connection("x".into())),
            "llm_connection_error"
        );
    }
}
