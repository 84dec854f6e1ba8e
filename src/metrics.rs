//! Prometheus metrics: the recorder, the `/metrics` text, and the names every metric uses.
//!
//! The `metrics` facade keeps its recorder in a process global, so the handle that renders it
//! lives in a `OnceLock` too: every app started in one process (tests start many) shares one
//! registry. That is the facade's design, not runtime state of ours.

use std::sync::OnceLock;

use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};

/// Records finished, by `status` (`completed`, `failed`).
pub const RECORDS_FINISHED: &str = "synthgate_records_finished_total";
/// Jobs accepted.
pub const JOBS_SUBMITTED: &str = "synthgate_jobs_submitted_total";
/// LLM chat requests answered, by `model_alias`.
pub const LLM_REQUESTS: &str = "synthgate_llm_requests_total";
/// LLM tokens, by `model_alias` and `kind` (`prompt`, `completion`).
pub const LLM_TOKENS: &str = "synthgate_llm_tokens_total";
/// Record failures, by `code`.
pub const RECORD_ERRORS: &str = "synthgate_record_errors_total";

static HANDLE: OnceLock<Option<PrometheusHandle>> = OnceLock::new();

/// Installs the Prometheus recorder once per process. Safe to call again.
pub fn install() {
    HANDLE.get_or_init(|| {
        let recorder = PrometheusBuilder::new().build_recorder();
        let handle = recorder.handle();
        match metrics::set_global_recorder(recorder) {
            Ok(()) => {
                describe();
                Some(handle)
            }
            Err(e) => {
                tracing::warn!(error = %e, "a metrics recorder is already installed; /metrics is empty");
                None
            }
        }
    });
}

fn describe() {
    metrics::describe_counter!(RECORDS_FINISHED, "Records that reached a final state");
    metrics::describe_counter!(JOBS_SUBMITTED, "Jobs accepted");
    metrics::describe_counter!(LLM_REQUESTS, "LLM chat requests answered");
    metrics::describe_counter!(LLM_TOKENS, "LLM tokens as providers reported them");
    metrics::describe_counter!(RECORD_ERRORS, "Failed records by error code");
}

/// The exposition text.
pub fn render() -> String {
    HANDLE
        .get()
        .and_then(Option::as_ref)
        .map(PrometheusHandle::render)
        .unwrap_or_default()
}
