//! Logs and spans.
//!
//! Logs: pretty or JSON lines, filtered by `RUST_LOG` or the config level, written through a
//! redactor ([`Redactor`]) that blanks every configured secret whatever code wrote the line.
//!
//! Spans: when an OTLP endpoint is configured (`OTEL_EXPORTER_OTLP_ENDPOINT` or `otel.endpoint`),
//! the `tracing` spans of requests, jobs, records, LLM calls (GenAI `chat`) and tool calls
//! (`execute_tool`) are exported through tracing-opentelemetry. The spans made for export alone
//! use the target [`SPANS`], which the log leaves out: with export off nothing subscribes to
//! them, so `info_span!` answers from its callsite's cached interest and they cost nothing.

mod context;
mod export;
mod redact;

pub(crate) use context::read_parent;
pub use context::{
    JobTrace, capture_content, current_traceparent, exporting, extract_parent, inject,
};
pub use redact::{RedactingLine, Redactor};

use tracing::Level;
use tracing_subscriber::filter::{FilterExt, Targets, dynamic_filter_fn, filter_fn};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

use crate::config::{Config, LogFormat, LoggingConfig};

/// Target of the spans made for OpenTelemetry only (jobs, records, `chat`, `execute_tool`, MCP
/// requests): never logged, and never created unless spans are exported.
pub const SPANS: &str = "synthgate::spans";

/// What `init` started: the span exporter, if any, to flush at exit.
#[must_use = "call `shutdown` at exit, or spans waiting for export are lost"]
pub struct Telemetry {
    exporter: Option<export::Exporter>,
}

impl Telemetry {
    /// Exports the spans still queued (for at most a few seconds) and stops the exporter.
    pub async fn shutdown(self) {
        if let Some(e) = self.exporter {
            e.shutdown().await;
        }
    }
}

/// Installs the global subscriber, redacting the secrets of `config`, and starts the span
/// exporter when `otel` has an endpoint. Call once, early in `main`, inside the runtime (the
/// exporter runs on it). An exporter that cannot be built (a bad endpoint) is an error.
pub fn init(config: &Config) -> Result<Telemetry, String> {
    let redactor = Redactor::new(&config.secret_values(), &oauth_ids(config));
    let exporter = if config.otel.exporting() {
        Some(export::start(&config.otel)?)
    } else {
        None
    };
    match &exporter {
        None => init_logs_only(&config.logging, redactor),
        Some(e) => init_with_spans(&config.logging, redactor, e),
    }
    if exporter.is_some() {
        context::enable(&config.otel);
        tracing::info!(
            endpoint = config.otel.url().unwrap_or_default(),
            protocol = ?config.otel.protocol,
            record_traces = ?config.otel.record_traces,
            capture_content = config.otel.capture_content,
            "exporting spans over OTLP"
        );
    }
    Ok(Telemetry { exporter })
}

/// The log alone, filtered globally: the span-only callsites are disabled once, at their first
/// use, and cost nothing after (no per-layer filter runs per span or event).
fn init_logs_only(cfg: &LoggingConfig, redactor: Redactor) {
    // A second init (tests start many apps in one process) is not an error worth failing on.
    let _ = tracing_subscriber::registry()
        .with(log_filter(cfg))
        .with(filter_fn(|m| m.target() != SPANS))
        .with(log_layer(cfg, redactor))
        .try_init();
}

/// The log and the span exporter, each with its own filter: the log leaves the span-only
/// callsites out, the exporter takes synthgate's spans whatever the log level.
fn init_with_spans(cfg: &LoggingConfig, redactor: Redactor, exporter: &export::Exporter) {
    // A *dynamic* filter on purpose: it makes every callsite's interest "sometimes", so each
    // span and event asks every per-layer filter afresh. With an "always" callsite the filters
    // are skipped and the per-layer decision read back is whatever an unrelated check on the
    // thread left (sqlx's query logger checks levels after each query): spans vanished from the
    // export at random (tokio-rs/tracing#2519).
    let not_spans = dynamic_filter_fn(|m, _| m.target() != SPANS);
    let logs = log_layer(cfg, redactor).with_filter(log_filter(cfg).and(not_spans));
    // Only what the spans say: no source locations, thread names or busy/idle times on every
    // span (their cost would be paid per record, and nobody reads them there).
    let spans = tracing_opentelemetry::layer()
        .with_tracer(exporter.tracer())
        .with_location(false)
        .with_threads(false)
        .with_target(false)
        .with_tracked_inactivity(false)
        .with_filter(span_filter());
    let _ = tracing_subscriber::registry()
        .with(logs)
        .with(spans)
        .try_init();
}

fn log_filter(cfg: &LoggingConfig) -> EnvFilter {
    EnvFilter::try_from_default_env()
        .or_else(|_| EnvFilter::try_new(&cfg.level))
        .unwrap_or_else(|_| EnvFilter::new("info"))
}

/// What becomes spans and span events: synthgate's own spans and events from `info`, and
/// warnings and errors from anywhere (a retry's cause is an event on its `chat` span). Fixed,
/// not the log level: what an operator sees in a trace backend should not change with how
/// verbose the log is.
fn span_filter() -> Targets {
    Targets::new()
        .with_target("synthgate", Level::INFO)
        .with_default(Level::WARN)
}

fn log_layer<S>(cfg: &LoggingConfig, redactor: Redactor) -> Box<dyn Layer<S> + Send + Sync>
where
    S: tracing::Subscriber + for<'a> LookupSpan<'a>,
{
    let layer = tracing_subscriber::fmt::layer()
        .with_target(true)
        .with_writer(redactor);
    match cfg.format {
        LogFormat::Pretty => layer.boxed(),
        LogFormat::Json => layer.json().flatten_event(true).boxed(),
    }
}

/// The OAuth client ids of the MCP providers: a Basic credential pairs one with its secret.
fn oauth_ids(config: &Config) -> Vec<String> {
    config
        .mcp_providers
        .iter()
        .filter_map(|p| p.oauth.as_ref().map(|o| o.client_id.clone()))
        .collect()
}

/// For tests: logs at `warn` (or `RUST_LOG`) to the test writer, once per process.
pub fn init_for_tests() {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_test_writer()
        .try_init();
}
