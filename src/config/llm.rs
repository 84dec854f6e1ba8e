//! The `llm` section: retries, the response cache and the per-provider admission control.

use serde::Deserialize;

/// How LLM requests are retried (429, 5xx, timeouts, connection errors).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LlmConfig {
    /// Attempts per request, the first included.
    pub max_attempts: u32,
    /// First backoff; doubles per attempt, with full jitter. `Retry-After` wins when sent.
    pub retry_base_delay_ms: u64,
    /// Longest backoff between two attempts.
    pub retry_max_delay_ms: u64,
    /// The response cache of model answers (opt-in per job, or by this default).
    pub cache: CacheConfig,
    /// How each model provider's requests in flight adapt to its answers.
    pub admission: AdmissionConfig,
}

impl Default for LlmConfig {
    fn default() -> Self {
        Self {
            max_attempts: 5,
            retry_base_delay_ms: 500,
            retry_max_delay_ms: 30_000,
            cache: CacheConfig::default(),
            admission: AdmissionConfig::default(),
        }
    }
}

/// The response cache (`llm.cache`): answers of chat calls kept in the database per API key,
/// so a job re-run with the same seed, or a preview run again, does not pay for them twice.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CacheConfig {
    /// The mode of a job that names none: `off` (the default: a job opts in with `cache`),
    /// `read_write` or `refresh`.
    pub default_mode: crate::domain::models::CacheMode,
    /// Entries older than this are swept (with the retention sweep, hourly, and at start).
    pub max_age_days: u32,
    /// Entries past this many MiB in all (the oldest first) are swept.
    pub max_mib: u64,
}

impl Default for CacheConfig {
    fn default() -> Self {
        Self {
            default_mode: crate::domain::models::CacheMode::Off,
            max_age_days: 30,
            max_mib: 1024,
        }
    }
}

impl LlmConfig {
    pub(super) fn problems(&self, out: &mut Vec<String>) {
        if self.max_attempts == 0 {
            out.push("config key `llm.max_attempts`: must be at least 1".into());
        }
        if self.cache.max_age_days == 0 {
            out.push("config key `llm.cache.max_age_days`: must be at least 1".into());
        }
        let a = &self.admission;
        if a.max_in_flight == 0 {
            out.push("config key `llm.admission.max_in_flight`: must be at least 1".into());
        }
        if a.failures_to_open == 0 {
            out.push("config key `llm.admission.failures_to_open`: must be at least 1".into());
        }
        if a.probe_interval_ms == 0 {
            out.push("config key `llm.admission.probe_interval_ms`: must be at least 1".into());
        }
        if self.retry_max_delay_ms < self.retry_base_delay_ms {
            out.push(
                "config key `llm.retry_max_delay_ms`: must be at least `llm.retry_base_delay_ms`"
                    .into(),
            );
        }
    }
}

/// Adaptive concurrency per model provider (`llm.admission`): one controller per provider,
/// shared by every job and key, lowers the requests in flight when the provider throttles,
/// raises them as it answers, and stops sending to a provider that keeps failing but for one
/// probe per interval.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AdmissionConfig {
    /// The most requests one provider may have in flight from this replica: where the limit
    /// starts and the most it grows back to. Each model's `max_parallel_requests` still
    /// applies under it.
    pub max_in_flight: u32,
    /// Failures in a row (connection errors, timeouts, HTTP 500/502/503/504) that open the
    /// provider's circuit.
    pub failures_to_open: u32,
    /// While the circuit is open, one request probes the provider this often; nothing else is
    /// sent.
    pub probe_interval_ms: u64,
    /// How long one model call may keep going through 429s (retried past `llm.max_attempts`,
    /// honouring `Retry-After`) and wait for an open circuit before its record fails. 0: a
    /// 429 fails at once.
    pub patience_secs: u64,
}

impl Default for AdmissionConfig {
    fn default() -> Self {
        Self {
            max_in_flight: 256,
            failures_to_open: 5,
            probe_interval_ms: 5_000,
            patience_secs: 600,
        }
    }
}
