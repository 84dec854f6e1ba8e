//! Prometheus metrics: the recorder, the `/metrics` text, the names every metric uses, and the
//! rule that keeps label values to server-defined names (provider, server alias, tool of a
//! server-defined provider, stable error codes), never names a job chose.
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
/// Finished jobs deleted by `database.job_retention_days`.
pub const JOBS_EXPIRED: &str = "synthgate_jobs_expired_total";
/// LLM chat requests answered, by `model_alias` (see [`model_alias_label`]).
pub const LLM_REQUESTS: &str = "synthgate_llm_requests_total";
/// LLM tokens, by `model_alias` (see [`model_alias_label`]) and `kind` (`prompt`, `completion`).
pub const LLM_TOKENS: &str = "synthgate_llm_tokens_total";
/// What the stored records' model calls cost at the server's prices, in billionths of the
/// price's unit, by `model_alias` (counted only for priced models).
pub const LLM_COST_NANOS: &str = "synthgate_llm_cost_nanos_total";
/// Chat calls of jobs that use the response cache, by `model_alias` and `result` (`hit`: answered
/// from the cache, no request made; `miss`: sent to the model, its answer cached).
pub const LLM_CACHE: &str = "synthgate_llm_cache_total";
/// Record failures, by `code`.
pub const RECORD_ERRORS: &str = "synthgate_record_errors_total";
/// Claims that handed records to this replica; with [`RECORDS_CLAIMED`], the records per claim
/// (one database round trip each).
pub const CLAIMS: &str = "synthgate_claims_total";
/// How long claims took (the transaction, waiting for a connection or SQLite's write lock
/// included), empty ones too. Against the time between claims it says whether the database or
/// the claim loop sets the pace.
pub const CLAIM_SECONDS: &str = "synthgate_claim_seconds";
/// Records handed to this replica by claims.
pub const RECORDS_CLAIMED: &str = "synthgate_records_claimed_total";
/// Per-record CPU sections (skip gates, prompts, expressions), by `path`: `inline` when the
/// section measured cheap and ran on the runtime thread, `gate` when it was handed to the CPU
/// gate (see `cpu::CpuGate::run_measured`).
pub const CPU_SECTIONS: &str = "synthgate_cpu_sections_total";

/// MCP tool calls, by `provider`, `tool` and `outcome` (`ok`, `tool_error`, or an error code).
pub const MCP_CALLS: &str = "synthgate_mcp_tool_calls_total";
/// MCP tool call latency in seconds, by `provider` and `tool`.
pub const MCP_CALL_SECONDS: &str = "synthgate_mcp_tool_call_seconds";
/// MCP sessions opened, by `provider`.
pub const MCP_SESSIONS_OPENED: &str = "synthgate_mcp_sessions_opened_total";
/// MCP sessions open now, by `provider` (above 1 where a loaded provider opened more).
pub const MCP_SESSIONS: &str = "synthgate_mcp_sessions";
/// Connection lanes open (each an HTTP client with its own pool; see `crate::lanes`), by
/// `kind` (`model_provider`, `mcp_provider`, `inline_tool`) and `name`: above 1 where an
/// HTTP/2 server's cap on a connection's streams made more.
pub const HTTP_LANES: &str = "synthgate_http_lanes";
/// MCP sessions replaced after they died, by `provider`.
pub const MCP_RECONNECTS: &str = "synthgate_mcp_reconnects_total";
/// Failed MCP connects (after the quick retries), by `provider`.
pub const MCP_CONNECT_FAILURES: &str = "synthgate_mcp_connect_failures_total";
/// `tools/list` walks sent, by `provider`.
pub const MCP_TOOLS_LIST: &str = "synthgate_mcp_tools_list_total";
/// Tool-list cache hits, by `provider`.
pub const MCP_CACHE_HITS: &str = "synthgate_mcp_tools_cache_hits_total";
/// Tool-list cache misses (fetches started or joined), by `provider`.
pub const MCP_CACHE_MISSES: &str = "synthgate_mcp_tools_cache_misses_total";
/// `notifications/tools/list_changed` received, by `provider`.
pub const MCP_LIST_CHANGED: &str = "synthgate_mcp_tools_list_changed_total";
/// OAuth access tokens obtained for MCP providers, by `provider`.
pub const MCP_OAUTH_TOKENS: &str = "synthgate_mcp_oauth_tokens_total";
/// Inline (HTTP) tool calls, by `tool` and `outcome`.
pub const INLINE_TOOL_CALLS: &str = "synthgate_inline_tool_calls_total";

/// LLM request latency in seconds (one call, retries included, waits for a
/// `max_parallel_requests` slot left out), by `provider`, `model_alias`
/// (see [`model_alias_label`]) and `outcome` (`ok` or the error code).
pub const LLM_REQUEST_SECONDS: &str = "synthgate_llm_request_seconds";
/// Requests this replica may have in flight to a model provider now, by `provider`: the
/// admission controller's limit (`llm.admission.max_in_flight` until the provider throttles).
pub const LLM_PROVIDER_LIMIT: &str = "synthgate_llm_provider_concurrency_limit";
/// Requests in flight to a model provider now, by `provider`.
pub const LLM_PROVIDER_IN_FLIGHT: &str = "synthgate_llm_provider_in_flight";
/// A model provider's circuit, by `provider`: 0 closed, 1 open, 2 half-open (one probe out).
pub const LLM_PROVIDER_CIRCUIT: &str = "synthgate_llm_provider_circuit";
/// Answers that throttled a model provider (429, 529, 503), by `provider`.
pub const LLM_PROVIDER_THROTTLED: &str = "synthgate_llm_provider_throttled_total";
/// Times a model provider's circuit opened, by `provider`.
pub const LLM_PROVIDER_CIRCUIT_OPENED: &str = "synthgate_llm_provider_circuit_opened_total";
/// Records of queued and running jobs not yet claimed by any replica (each replica reports the
/// same figure, read from the database every few seconds).
pub const QUEUE_RECORDS: &str = "synthgate_queue_records";
/// Records this replica is generating (claimed, result not yet queued for the writer).
pub const RECORDS_IN_FLIGHT: &str = "synthgate_records_in_flight";
/// Long requests (uploads, event streams, exports) holding one of `server.max_long_requests`.
pub const HTTP_LONG_REQUESTS: &str = "synthgate_http_long_requests";
/// Spans dropped because `otel.max_queue_spans` were already waiting for export.
pub const OTEL_SPANS_DROPPED: &str = "synthgate_otel_spans_dropped_total";
/// Spans exported.
pub const OTEL_SPANS_EXPORTED: &str = "synthgate_otel_spans_exported_total";
/// Spans whose export failed (collector away or refusing).
pub const OTEL_SPANS_FAILED: &str = "synthgate_otel_spans_failed_total";
/// Gauge: the allocator's own figures by `state` (allocated, active, resident, metadata,
/// retained), read at each scrape. Only the binary knows its allocator (it sets the reader with
/// [`set_allocator_stats`]); a process without one, e.g. a test, has no such series.
pub const ALLOCATOR_BYTES: &str = "synthgate_allocator_bytes";

/// The `model_alias` label of every alias the server config does not define.
pub const JOB_DEFINED_ALIAS: &str = "job_defined";

/// The `model_alias` label value for `alias`: the alias itself when the server config defines
/// it, else [`JOB_DEFINED_ALIAS`]. Label values are bounded to server-defined names, so jobs
/// cannot grow the series count: a job with 500 aliases of its own adds one `job_defined`
/// series per metric, not 500. (A job that redefines a server alias is counted under that
/// alias; the job's own `usage` keeps the per-alias detail.)
pub fn model_alias_label(alias: &str, server_defined: bool) -> String {
    if server_defined {
        alias.to_owned()
    } else {
        JOB_DEFINED_ALIAS.to_owned()
    }
}

static HANDLE: OnceLock<Option<PrometheusHandle>> = OnceLock::new();

/// The allocator's figures as `(state, bytes)`, for [`ALLOCATOR_BYTES`].
pub type AllocatorStats = fn() -> Vec<(&'static str, u64)>;

static ALLOCATOR: OnceLock<AllocatorStats> = OnceLock::new();

/// Sets how `/metrics` reads the global allocator's figures (the binary's jemalloc): memory per
/// record in flight is what users raise concurrency against, and RSS alone cannot say whether
/// the process holds live data or freed pages the allocator keeps. The first call wins.
pub fn set_allocator_stats(read: AllocatorStats) {
    let _ = ALLOCATOR.set(read);
}

/// Installs the Prometheus recorder once per process. Safe to call again.
pub fn install() {
    HANDLE.get_or_init(|| {
        let recorder = latency_buckets(PrometheusBuilder::new()).build_recorder();
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

/// Bucket bounds, in seconds, of the latency histograms: from a quick tool call to a model
/// answering at length.
const LATENCY_BUCKETS: [f64; 14] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0,
];

/// Bucket bounds, in seconds, of the claim histogram: a claim takes one to a few milliseconds
/// (bench/README.md), below the latency buckets' first bound.
const CLAIM_BUCKETS: [f64; 12] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0,
];

/// The LLM, tool-call and claim latencies as Prometheus histograms (buckets) rather than the
/// exporter's default summaries: buckets add up across replicas (`histogram_quantile` over
/// `sum by (le)`), a summary's quantiles do not.
fn latency_buckets(builder: PrometheusBuilder) -> PrometheusBuilder {
    [
        (LLM_REQUEST_SECONDS, &LATENCY_BUCKETS[..]),
        (MCP_CALL_SECONDS, &LATENCY_BUCKETS[..]),
        (CLAIM_SECONDS, &CLAIM_BUCKETS[..]),
    ]
    .into_iter()
    .fold(builder, |b, (name, buckets)| {
        let matcher = metrics_exporter_prometheus::Matcher::Full(name.to_owned());
        // Fails only for an empty bucket list.
        b.set_buckets_for_metric(matcher, buckets)
            .expect("latency buckets are not empty")
    })
}

/// How often histogram samples are folded into their buckets.
const UPKEEP_EVERY: std::time::Duration = std::time::Duration::from_secs(5);

/// Folds the histogram samples recorded since the last upkeep (or scrape) into their
/// summaries, every [`UPKEEP_EVERY`] until `stop`. The recorder keeps every raw sample until
/// then: a service nobody scrapes held one per MCP tool call for as long as it ran, memory that
/// grew with the records generated.
pub async fn upkeep(stop: tokio_util::sync::CancellationToken) {
    let Some(handle) = HANDLE.get().and_then(Option::as_ref) else {
        return;
    };
    loop {
        tokio::select! {
            () = tokio::time::sleep(UPKEEP_EVERY) => handle.run_upkeep(),
            () = stop.cancelled() => return,
        }
    }
}

fn describe() {
    metrics::describe_counter!(RECORDS_FINISHED, "Records that reached a final state");
    metrics::describe_counter!(JOBS_SUBMITTED, "Jobs accepted");
    metrics::describe_counter!(
        JOBS_EXPIRED,
        "Finished jobs deleted by database.job_retention_days"
    );
    metrics::describe_counter!(LLM_REQUESTS, "LLM chat requests answered");
    metrics::describe_counter!(LLM_TOKENS, "LLM tokens as providers reported them");
    metrics::describe_counter!(
        LLM_CACHE,
        "Chat calls through the response cache, by result"
    );
    metrics::describe_counter!(
        LLM_COST_NANOS,
        "Cost of stored records' model calls at the server's prices, in billionths of the unit"
    );
    metrics::describe_counter!(RECORD_ERRORS, "Failed records by error code");
    metrics::describe_counter!(CLAIMS, "Claims that handed out records");
    metrics::describe_histogram!(CLAIM_SECONDS, "Claim transactions, in seconds");
    metrics::describe_counter!(
        CPU_SECTIONS,
        "Per-record CPU sections, by whether they ran inline or on the CPU gate"
    );
    metrics::describe_counter!(RECORDS_CLAIMED, "Records handed out by claims");
    metrics::describe_counter!(MCP_CALLS, "MCP tool calls by provider, tool and outcome");
    metrics::describe_histogram!(
        MCP_CALL_SECONDS,
        metrics::Unit::Seconds,
        "MCP tool call latency"
    );
    metrics::describe_counter!(MCP_SESSIONS_OPENED, "MCP sessions opened");
    metrics::describe_gauge!(MCP_SESSIONS, "MCP sessions open");
    metrics::describe_gauge!(
        HTTP_LANES,
        "Connection lanes open to an outbound HTTP origin (more than one past an HTTP/2 stream cap)"
    );
    metrics::describe_counter!(
        MCP_OAUTH_TOKENS,
        "OAuth access tokens obtained for MCP providers"
    );
    metrics::describe_counter!(MCP_RECONNECTS, "MCP sessions replaced after they died");
    metrics::describe_counter!(
        MCP_CONNECT_FAILURES,
        "MCP connects that failed after retries"
    );
    metrics::describe_counter!(MCP_TOOLS_LIST, "MCP tools/list walks sent");
    metrics::describe_counter!(MCP_CACHE_HITS, "MCP tool-list cache hits");
    metrics::describe_counter!(MCP_CACHE_MISSES, "MCP tool-list cache misses");
    metrics::describe_counter!(MCP_LIST_CHANGED, "MCP tools/list_changed notifications");
    metrics::describe_histogram!(
        LLM_REQUEST_SECONDS,
        metrics::Unit::Seconds,
        "LLM call latency, retries included"
    );
    metrics::describe_gauge!(
        LLM_PROVIDER_LIMIT,
        "Requests this replica may have in flight to a model provider (adapts to throttling)"
    );
    metrics::describe_gauge!(
        LLM_PROVIDER_IN_FLIGHT,
        "Requests in flight to a model provider"
    );
    metrics::describe_gauge!(
        LLM_PROVIDER_CIRCUIT,
        "A model provider's circuit: 0 closed, 1 open, 2 half-open"
    );
    metrics::describe_counter!(
        LLM_PROVIDER_THROTTLED,
        "Answers that throttled a model provider (429, 529, 503)"
    );
    metrics::describe_counter!(
        LLM_PROVIDER_CIRCUIT_OPENED,
        "Times a model provider's circuit opened"
    );
    metrics::describe_gauge!(
        QUEUE_RECORDS,
        "Records of queued and running jobs not yet claimed by any replica"
    );
    metrics::describe_gauge!(RECORDS_IN_FLIGHT, "Records this replica is generating");
    metrics::describe_gauge!(
        HTTP_LONG_REQUESTS,
        "Long requests (uploads, event streams, exports) holding a permit of server.max_long_requests"
    );
    metrics::describe_gauge!(
        ALLOCATOR_BYTES,
        metrics::Unit::Bytes,
        "Heap memory as the allocator counts it, by state (allocated, active, resident, metadata, retained)"
    );
    metrics::describe_counter!(
        OTEL_SPANS_DROPPED,
        "Spans dropped because otel.max_queue_spans were waiting for export"
    );
    metrics::describe_counter!(OTEL_SPANS_EXPORTED, "Spans exported over OTLP");
    metrics::describe_counter!(OTEL_SPANS_FAILED, "Spans whose OTLP export failed");
    metrics::describe_counter!(
        INLINE_TOOL_CALLS,
        "Inline HTTP tool calls by tool and outcome"
    );
}

/// The exposition text.
pub fn render() -> String {
    if let Some(read) = ALLOCATOR.get() {
        for (state, bytes) in read() {
            #[allow(clippy::cast_precision_loss)] // bytes, exact far past any process's size
            metrics::gauge!(ALLOCATOR_BYTES, "state" => state).set(bytes as f64);
        }
    }
    HANDLE
        .get()
        .and_then(Option::as_ref)
        .map(PrometheusHandle::render)
        .unwrap_or_default()
}
