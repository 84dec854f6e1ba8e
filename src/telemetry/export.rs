//! The OTLP exporter: the SDK's tracer provider with its batch processor on the service's
//! runtime, in front of it a bound on the spans waiting (drops are counted, records never
//! wait for a collector), and an id generator that can be told the ids of one span (a job's,
//! whose ids are chosen at submit and stored).

use std::cell::Cell;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use opentelemetry::trace::{SpanId, TraceId, TracerProvider as _};
use opentelemetry::{Context, KeyValue};
use opentelemetry_otlp::{WithExportConfig, WithHttpConfig, WithTonicConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::runtime::Tokio;
use opentelemetry_sdk::trace::span_processor_with_async_runtime::BatchSpanProcessor;
use opentelemetry_sdk::trace::{
    BatchConfigBuilder, IdGenerator, RandomIdGenerator, Sampler, SdkTracer, SdkTracerProvider,
    Span, SpanData, SpanExporter, SpanProcessor,
};
use secrecy::ExposeSecret;

use crate::config::{OtelConfig, OtlpProtocol};
use crate::metrics as m;

/// How long one export may take before it is given up (its spans are dropped and counted).
const EXPORT_TIMEOUT: Duration = Duration::from_secs(10);

/// How long the exit waits for the last spans.
const SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(5);

/// The running exporter.
pub(super) struct Exporter {
    provider: SdkTracerProvider,
}

impl Exporter {
    pub(super) fn tracer(&self) -> SdkTracer {
        self.provider.tracer("synthgate")
    }

    /// Flushes and stops. The SDK's shutdown blocks its thread until the batch task (on this
    /// runtime) answers, so it runs on a blocking thread.
    pub(super) async fn shutdown(self) {
        let provider = self.provider;
        let done =
            tokio::task::spawn_blocking(move || provider.shutdown_with_timeout(SHUTDOWN_TIMEOUT));
        match tokio::time::timeout(SHUTDOWN_TIMEOUT + Duration::from_secs(1), done).await {
            Ok(Ok(Ok(()))) => {}
            Ok(Ok(Err(e))) => tracing::warn!(error = %e, "flushing spans at exit failed"),
            Ok(Err(_)) | Err(_) => tracing::warn!("flushing spans at exit did not finish"),
        }
    }
}

/// Builds the exporter `cfg` describes and installs its provider as the global one (the job
/// span is emitted through it). Call inside the tokio runtime.
pub(super) fn start(cfg: &OtelConfig) -> Result<Exporter, String> {
    let url = cfg.url().ok_or("no OTLP endpoint")?;
    let exporter = match cfg.protocol {
        OtlpProtocol::HttpProtobuf => {
            crate::install_crypto_provider();
            let client = reqwest::Client::builder()
                .timeout(EXPORT_TIMEOUT)
                .build()
                .map_err(|e| format!("building the OTLP HTTP client failed: {e}"))?;
            let headers: HashMap<String, String> = cfg
                .headers
                .iter()
                .map(|(k, v)| (k.clone(), v.expose_secret().to_owned()))
                .collect();
            opentelemetry_otlp::SpanExporter::builder()
                .with_http()
                .with_http_client(client)
                .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
                .with_endpoint(url.clone())
                .with_timeout(EXPORT_TIMEOUT)
                .with_headers(headers)
                .build()
        }
        OtlpProtocol::Grpc => {
            let mut headers = reqwest::header::HeaderMap::new();
            for (k, v) in &cfg.headers {
                let (Ok(name), Ok(value)) = (
                    reqwest::header::HeaderName::from_bytes(k.as_bytes()),
                    reqwest::header::HeaderValue::from_str(v.expose_secret()),
                ) else {
                    return Err(format!(
                        "config key `otel.headers.{k}`: not valid gRPC metadata"
                    ));
                };
                headers.insert(name, value);
            }
            let metadata =
                opentelemetry_otlp::tonic_types::metadata::MetadataMap::from_headers(headers);
            opentelemetry_otlp::SpanExporter::builder()
                .with_tonic()
                .with_endpoint(url.clone())
                .with_timeout(EXPORT_TIMEOUT)
                .with_metadata(metadata)
                .build()
        }
    }
    .map_err(|e| format!("the OTLP exporter for {url} cannot be built: {e}"))?;

    let queued = Arc::new(AtomicUsize::new(0));
    let counted = Counted {
        inner: exporter,
        queued: queued.clone(),
        failing: AtomicBool::new(false),
    };
    // The SDK's own queue is a little longer than ours, so it never drops on its own (its drops
    // would not be counted); ours refuses first.
    let batch = BatchConfigBuilder::default()
        .with_max_queue_size(cfg.max_queue_spans + 256)
        .build();
    let processor = Bounded {
        inner: BatchSpanProcessor::builder(counted, Tokio)
            .with_batch_config(batch)
            .build(),
        queued,
        cap: cfg.max_queue_spans,
    };
    let resource = Resource::builder()
        .with_service_name(cfg.service_name.clone())
        .with_attribute(KeyValue::new("service.version", env!("CARGO_PKG_VERSION")))
        .build();
    let provider = SdkTracerProvider::builder()
        .with_span_processor(processor)
        .with_sampler(sampler(cfg))
        .with_id_generator(PinnableIds::default())
        .with_resource(resource)
        .build();
    opentelemetry::global::set_tracer_provider(provider.clone());
    Ok(Exporter { provider })
}

/// The sampler `otel.sampler` (or `OTEL_TRACES_SAMPLER`) names; checked when the config loaded.
fn sampler(cfg: &OtelConfig) -> Sampler {
    let ratio = cfg.sampler_arg.unwrap_or(1.0);
    let parent_based = |root: Sampler| Sampler::ParentBased(Box::new(root));
    match cfg.sampler.as_str() {
        "always_on" => Sampler::AlwaysOn,
        "always_off" => Sampler::AlwaysOff,
        "traceidratio" => Sampler::TraceIdRatioBased(ratio),
        "parentbased_always_off" => parent_based(Sampler::AlwaysOff),
        "parentbased_traceidratio" => parent_based(Sampler::TraceIdRatioBased(ratio)),
        _ => parent_based(Sampler::AlwaysOn),
    }
}

/// The SDK's batch processor behind a bound of `cap` spans waiting: past it a span is dropped
/// and counted, at the cost of one atomic add, so a slow or absent collector never holds a
/// record up or grows memory.
#[derive(Debug)]
struct Bounded {
    inner: BatchSpanProcessor<Tokio>,
    /// Spans handed to `inner` and not yet through an export (see [`Counted`]).
    queued: Arc<AtomicUsize>,
    cap: usize,
}

impl SpanProcessor for Bounded {
    fn on_start(&self, span: &mut Span, cx: &Context) {
        self.inner.on_start(span, cx);
    }

    fn on_end(&self, span: SpanData) {
        if !span.span_context.is_sampled() {
            return;
        }
        if self.queued.fetch_add(1, Ordering::AcqRel) >= self.cap {
            self.queued.fetch_sub(1, Ordering::AcqRel);
            metrics::counter!(m::OTEL_SPANS_DROPPED).increment(1);
            return;
        }
        self.inner.on_end(span);
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.inner.set_resource(resource);
    }
}

/// The OTLP exporter, counting what it sent and failed, and giving the spans of each export
/// back to [`Bounded`]'s count, whatever the outcome.
#[derive(Debug)]
struct Counted {
    inner: opentelemetry_otlp::SpanExporter,
    queued: Arc<AtomicUsize>,
    /// The last export failed: the next failure is not logged again, a success is.
    failing: AtomicBool,
}

impl SpanExporter for Counted {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        let n = batch.len();
        let result = self.inner.export(batch).await;
        self.queued.fetch_sub(n, Ordering::AcqRel);
        match &result {
            Ok(()) => {
                metrics::counter!(m::OTEL_SPANS_EXPORTED).increment(n as u64);
                if self.failing.swap(false, Ordering::AcqRel) {
                    tracing::info!("exporting spans works again");
                }
            }
            Err(e) => {
                metrics::counter!(m::OTEL_SPANS_FAILED).increment(n as u64);
                if !self.failing.swap(true, Ordering::AcqRel) {
                    tracing::warn!(error = %e, spans = n,
                        "exporting spans failed; spans are dropped until the collector answers");
                }
            }
        }
        result
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.inner.set_resource(resource);
    }
}

thread_local! {
    /// The ids the next span built on this thread takes (see [`with_ids`]).
    static PINNED: Cell<Option<(TraceId, SpanId)>> = const { Cell::new(None) };
}

/// Random ids, except inside [`with_ids`].
#[derive(Debug, Default)]
struct PinnableIds(RandomIdGenerator);

impl IdGenerator for PinnableIds {
    fn new_trace_id(&self) -> TraceId {
        PINNED
            .get()
            .map_or_else(|| self.0.new_trace_id(), |(t, _)| t)
    }

    fn new_span_id(&self) -> SpanId {
        PINNED
            .get()
            .map_or_else(|| self.0.new_span_id(), |(_, s)| s)
    }
}

/// Runs `build` (which starts one span, and nothing else) with the ids that span must have.
/// The SDK chooses a span's ids itself; a job's span was given its ids at submit, stored with
/// the job, and every replica's records already point at them.
pub(super) fn with_ids<T>(trace: TraceId, span: SpanId, build: impl FnOnce() -> T) -> T {
    PINNED.set(Some((trace, span)));
    let out = build();
    PINNED.set(None);
    out
}
