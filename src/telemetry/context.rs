//! W3C trace context: read from a request's `traceparent`, passed on in outgoing requests'
//! headers and MCP requests' `_meta`, and a job's place in a trace, kept with the job so that
//! every replica's records join it.

use std::collections::HashMap;
use std::sync::OnceLock;
use std::time::SystemTime;

use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::trace::{
    Span as _, SpanContext, SpanId, SpanKind, Status, TraceContextExt, TraceFlags, TraceId,
    TraceState, Tracer as _,
};
use opentelemetry::{Context, KeyValue};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{IdGenerator, RandomIdGenerator};
use tracing_opentelemetry::OpenTelemetrySpanExt;

use crate::config::{OtelConfig, RecordTraces};

/// What `init` decided, for the code that makes spans.
#[derive(Debug)]
struct Exporting {
    capture_content: bool,
    records_in_job_trace: bool,
}

static EXPORTING: OnceLock<Exporting> = OnceLock::new();

pub(super) fn enable(cfg: &OtelConfig) {
    let _ = EXPORTING.set(Exporting {
        capture_content: cfg.capture_content,
        records_in_job_trace: cfg.record_traces == RecordTraces::Job,
    });
}

/// Whether spans are exported: work done only for spans (a job's trace context, reading a
/// summary to close its span) is skipped when not.
pub fn exporting() -> bool {
    EXPORTING.get().is_some()
}

/// Whether prompts, completions and tool arguments and results go on spans
/// (`otel.capture_content`).
pub fn capture_content() -> bool {
    EXPORTING.get().is_some_and(|e| e.capture_content)
}

/// The caller's trace context from `traceparent` (and `tracestate`), when it sent a valid one
/// and spans are exported.
pub fn extract_parent(headers: &reqwest::header::HeaderMap) -> Option<Context> {
    if !exporting() {
        return None;
    }
    read_parent(headers)
}

/// A request's `traceparent` and `tracestate` read as W3C trace context (what
/// [`extract_parent`] does once export is on; the `trace_context` fuzz target drives it).
pub(crate) fn read_parent(headers: &reqwest::header::HeaderMap) -> Option<Context> {
    let cx = TraceContextPropagator::new().extract(&opentelemetry_http::HeaderExtractor(headers));
    cx.span().span_context().is_valid().then_some(cx)
}

/// Adds the current span's `traceparent` to `headers` (an outgoing LLM or MCP request), when
/// spans are exported.
pub fn inject(headers: &mut reqwest::header::HeaderMap) {
    if !exporting() {
        return;
    }
    let cx = tracing::Span::current().context();
    TraceContextPropagator::new()
        .inject_context(&cx, &mut opentelemetry_http::HeaderInjector(headers));
}

/// The current span's `traceparent`, for an MCP request's `_meta` (SEP-414), when spans are
/// exported.
pub fn current_traceparent() -> Option<String> {
    if !exporting() {
        return None;
    }
    let cx = tracing::Span::current().context();
    if !cx.span().span_context().is_valid() {
        return None;
    }
    let mut carrier = HashMap::new();
    TraceContextPropagator::new().inject_context(&cx, &mut carrier);
    carrier.remove("traceparent")
}

/// A job's place in a trace: the context of its `job` span, chosen at submit, and the span it
/// is a child of (the submitting request's). Stored with the job as text
/// (`<traceparent>;<parent span id>`), so the records any replica runs, and the span the
/// replica that finishes the job emits, all agree on it.
#[derive(Debug, Clone, PartialEq)]
pub struct JobTrace {
    job: SpanContext,
    parent: Option<SpanId>,
}

impl JobTrace {
    /// The trace context of a job submitted now: its span a child of the current span (the
    /// request's, itself a child of the caller's `traceparent`), or a new trace. `None` when
    /// spans are not exported.
    pub fn begin() -> Option<Self> {
        if !exporting() {
            return None;
        }
        let cx = tracing::Span::current().context();
        Some(Self::child_of(cx.span().span_context()))
    }

    /// A job span that is a child of `current`, or the root of a new trace when `current` is
    /// not a valid context.
    pub(crate) fn child_of(current: &SpanContext) -> Self {
        let ids = RandomIdGenerator::default();
        let (trace, flags, parent) = if current.is_valid() {
            (
                current.trace_id(),
                current.trace_flags(),
                Some(current.span_id()),
            )
        } else {
            (ids.new_trace_id(), TraceFlags::SAMPLED, None)
        };
        let job = SpanContext::new(trace, ids.new_span_id(), flags, true, TraceState::default());
        Self { job, parent }
    }

    /// The stored form.
    pub fn to_text(&self) -> String {
        let tp = format!(
            "00-{}-{}-{:02x}",
            self.job.trace_id(),
            self.job.span_id(),
            self.job.trace_flags().to_u8()
        );
        match self.parent {
            Some(p) => format!("{tp};{p}"),
            None => tp,
        }
    }

    /// Reads the stored form; anything else is `None` (the job's records then start traces
    /// of their own).
    pub fn parse(text: &str) -> Option<Self> {
        let (tp, parent) = match text.split_once(';') {
            Some((tp, p)) => (tp, Some(SpanId::from_hex(p).ok()?)),
            None => (text, None),
        };
        let carrier = HashMap::from([("traceparent".to_owned(), tp.to_owned())]);
        let cx = TraceContextPropagator::new().extract(&carrier);
        let job = cx.span().span_context().clone();
        job.is_valid().then_some(Self { job, parent })
    }

    /// The job span's trace id (tests and logs).
    pub fn trace_id(&self) -> TraceId {
        self.job.trace_id()
    }

    /// Places a record's span: a child of the job's span (`otel.record_traces: job`), or the
    /// root of a trace of its own with a link to it (the default).
    pub fn adopt(&self, record: &tracing::Span) {
        let records_in_job = EXPORTING.get().is_some_and(|e| e.records_in_job_trace);
        if records_in_job {
            let _ = record.set_parent(Context::new().with_remote_span_context(self.job.clone()));
        } else {
            record.add_link(self.job.clone());
        }
    }

    /// Emits the job's span, from `start` (submit) to `end`, with the ids chosen at submit.
    /// Called once, by the replica that finished the job.
    pub fn emit(
        &self,
        start: SystemTime,
        end: SystemTime,
        attributes: Vec<KeyValue>,
        error: Option<String>,
    ) {
        if !exporting() {
            return;
        }
        let tracer = opentelemetry::global::tracer("synthgate");
        let parent = match self.parent {
            Some(p) => Context::new().with_remote_span_context(SpanContext::new(
                self.job.trace_id(),
                p,
                self.job.trace_flags(),
                true,
                TraceState::default(),
            )),
            None => Context::new(),
        };
        let mut span = super::export::with_ids(self.job.trace_id(), self.job.span_id(), || {
            tracer
                .span_builder("job")
                .with_kind(SpanKind::Internal)
                .with_start_time(start)
                .with_attributes(attributes)
                .start_with_context(&tracer, &parent)
        });
        if let Some(message) = error {
            span.set_status(Status::error(message));
        }
        span.end_with_timestamp(end);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stored_form_reads_back() {
        let text = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01;b7ad6b7169203331";
        let t = JobTrace::parse(text).expect("valid");
        assert_eq!(t.to_text(), text);
        assert_eq!(t.trace_id().to_string(), "4bf92f3577b34da6a3ce929d0e0e4736");
        let root = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00";
        assert_eq!(JobTrace::parse(root).expect("valid").to_text(), root);
        for bad in [
            "",
            "garbage",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01;xyz",
        ] {
            assert!(JobTrace::parse(bad).is_none(), "{bad}");
        }
    }
}
