//! A record's span, exported when spans are (never logged): which record and attempt, and how
//! it ended. Its LLM (`chat`) and tool (`execute_tool`) spans are its children; it is a trace
//! of its own linked to its job's span, or a child of that span (`otel.record_traces`).

use tracing::field::Empty;

use crate::domain::record::RecordOutcome;
use crate::generate::Generated;
use crate::queue::ClaimedRecord;
use crate::telemetry::{JobTrace, SPANS};

/// The span `rec`'s generation runs in.
pub(super) fn record(rec: &ClaimedRecord, job: Option<&JobTrace>) -> tracing::Span {
    let span = tracing::info_span!(
        target: SPANS,
        parent: None,
        "record",
        synthgate.job.id = %rec.job_id,
        synthgate.record.id = %rec.id,
        // Signed: tracing-opentelemetry writes unsigned integers as strings.
        synthgate.record.index = i64::from(rec.index),
        synthgate.record.attempt = i64::from(rec.attempts),
        synthgate.record.outcome = Empty,
        error.type = Empty,
        otel.status_code = Empty,
    );
    if let Some(job) = job
        && !span.is_disabled()
    {
        job.adopt(&span);
    }
    span
}

/// Records how the record ended on its span.
pub(super) fn ended(span: &tracing::Span, generated: &Generated) {
    if span.is_disabled() {
        return;
    }
    match &generated.outcome {
        RecordOutcome::Completed { .. } => {
            span.record("synthgate.record.outcome", "completed");
        }
        RecordOutcome::Failed { error, .. } => {
            span.record("synthgate.record.outcome", "failed");
            span.record("error.type", error.code.as_str());
            // The code, not the message: a message may quote model output, and no generated
            // or prompt text goes on spans unless content capture is on.
            span.record("otel.status_code", "ERROR");
        }
    }
}
