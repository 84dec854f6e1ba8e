//! The span of a whole job (exported only): from submit to its end, emitted once, by the
//! replica that finished it, with the ids chosen at submit (see `telemetry::JobTrace`), so
//! the records every replica ran already point at it. It carries the outcome and what the job
//! spent: the token totals a dashboard sums per job.

use opentelemetry::KeyValue;

use crate::domain::job::JobSummary;
use crate::domain::{JobId, JobStatus};
use crate::store::JobSelect;
use crate::telemetry::{self, JobTrace};

use super::JobService;

impl JobService {
    /// Emits the span of job `id`, which has just ended, if spans are exported and the job
    /// has a trace context.
    pub(super) async fn close_job_span(&self, id: JobId) {
        if !telemetry::exporting() {
            return;
        }
        let one = JobSelect::One { id, owner: None };
        let summary = match self.store.job_summaries(one, 1).await {
            Ok(s) => s.into_iter().next(),
            Err(e) => {
                tracing::debug!(job.id = %id, error = %e, "reading the finished job for its span failed");
                None
            }
        };
        let Some(summary) = summary.filter(|s| s.job.status.is_terminal()) else {
            return;
        };
        let Some(trace) = summary
            .job
            .trace_context
            .as_deref()
            .and_then(JobTrace::parse)
        else {
            return;
        };
        let end = summary.job.finished_at.unwrap_or_else(chrono::Utc::now);
        let error = summary
            .job
            .error
            .as_ref()
            .map(|e| e.code.clone())
            .or_else(|| (summary.job.status == JobStatus::Failed).then(|| "failed".to_owned()));
        trace.emit(
            summary.job.created_at.into(),
            end.into(),
            attributes(&summary),
            error,
        );
    }
}

/// The job's attributes: which job, how it ended, and its token totals.
fn attributes(s: &JobSummary) -> Vec<KeyValue> {
    let (input, output) = s.usage.values().fold((0u64, 0u64), |(i, o), u| {
        (i + u.prompt_tokens, o + u.completion_tokens)
    });
    let requests: u64 = s.usage.values().map(|u| u.requests).sum();
    let int = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
    let mut out = vec![
        KeyValue::new("synthgate.job.id", s.job.id.to_string()),
        KeyValue::new("synthgate.job.status", s.job.status.as_str()),
        KeyValue::new("synthgate.job.records", i64::from(s.job.num_records)),
        KeyValue::new("synthgate.job.records.completed", int(s.counts.completed)),
        KeyValue::new("synthgate.job.records.failed", int(s.counts.failed)),
        KeyValue::new("synthgate.job.llm_requests", int(requests)),
        KeyValue::new("gen_ai.usage.input_tokens", int(input)),
        KeyValue::new("gen_ai.usage.output_tokens", int(output)),
    ];
    if let Some(name) = &s.job.name {
        out.push(KeyValue::new("synthgate.job.name", name.clone()));
    }
    out
}
