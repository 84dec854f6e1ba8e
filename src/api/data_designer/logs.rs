//! A Data Designer job's log: `GET /v1/jobs/{id}/logs`, the platform's path that the client's
//! `wait_until_done()` polls, and the same at `GET /v1/data-designer/jobs/{id}/logs`.

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use serde_json::json;
use utoipa::{IntoParams, ToSchema};

use crate::api::extract::{self, ApiPath, ApiQuery};
use crate::auth::Caller;
use crate::domain::JobStatus;
use crate::domain::job::JobSummary;
use crate::error::{ApiError, ErrorBody};
use crate::state::AppState;

/// Query of the platform's job logs.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct LogsQuery {
    /// Not used: every answer holds the whole log (`next_page` is null).
    #[serde(rename = "page_cursor")]
    pub _page_cursor: Option<String>,
    /// Not used, as `page_cursor`.
    #[serde(rename = "limit")]
    pub _limit: Option<u32>,
}

/// A Data Designer job's log
///
/// What the client's `wait_until_done()` shows while it polls: entries that only grow (the
/// client shows the ones past those it has seen), each a `PlatformJobLog` whose `message` is
/// a JSON object with `name`, `levelname` and `message`. Made from the job's state: submitted,
/// each tenth of its records done, and at the end a warning per failed record (the first few)
/// and how it ended.
#[utoipa::path(get, path = "/v1/jobs/{id}/logs", tag = "data-designer",
    params(("id" = uuid::Uuid, Path, description = "Job id"), LogsQuery),
    responses(
        (status = 200, description = "The log", body = PlatformJobLogPage),
        (status = 400, description = "Not a UUID (`invalid_id`)", body = ErrorBody),
        (status = 404, description = "No such job, or another key's (`job_not_found`)", body = ErrorBody),
        (status = 422, description = "A malformed query parameter (`invalid_request`)", body = ErrorBody),
    ))]
pub async fn job_logs(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath(id): ApiPath<String>,
    ApiQuery(_q): ApiQuery<LogsQuery>,
) -> Result<Json<PlatformJobLogPage>, ApiError> {
    logs(&state, &caller, &id).await
}

/// A Data Designer job's log (the Data Designer path)
///
/// The same log as `GET /v1/jobs/{id}/logs`, at the path of the client's low-level
/// `data_designer.jobs.get_logs`.
#[utoipa::path(get, path = "/v1/data-designer/jobs/{id}/logs", tag = "data-designer",
    params(("id" = uuid::Uuid, Path, description = "Job id"), LogsQuery),
    responses(
        (status = 200, description = "The log", body = PlatformJobLogPage),
        (status = 400, description = "Not a UUID (`invalid_id`)", body = ErrorBody),
        (status = 404, description = "No such job, or another key's (`job_not_found`)", body = ErrorBody),
        (status = 422, description = "A malformed query parameter (`invalid_request`)", body = ErrorBody),
    ))]
pub async fn data_designer_job_logs(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath(id): ApiPath<String>,
    ApiQuery(_q): ApiQuery<LogsQuery>,
) -> Result<Json<PlatformJobLogPage>, ApiError> {
    logs(&state, &caller, &id).await
}

/// A page of a job's log: the client's `SyncLogsPagination[PlatformJobLog]`, all of it on one
/// page.
#[derive(Debug, Serialize, ToSchema)]
pub struct PlatformJobLogPage {
    /// Always `list`.
    pub object: &'static str,
    pub data: Vec<PlatformJobLog>,
    /// Always null: the whole log is one page.
    #[schema(value_type = Option<String>)]
    pub next_page: Option<String>,
}

/// One entry of a job's log (`PlatformJobLog`).
#[derive(Debug, Serialize, ToSchema)]
pub struct PlatformJobLog {
    pub job_id: String,
    /// Always `data-designer`.
    pub job_step: &'static str,
    /// Always `generate`.
    pub job_task: &'static str,
    /// A JSON object as text: `{"name", "levelname", "message"}`.
    pub message: String,
    /// RFC 3339: when the job last changed.
    #[schema(format = DateTime)]
    pub timestamp: String,
}

/// The log of job `id`.
async fn logs(
    state: &AppState,
    caller: &Caller,
    id: &str,
) -> Result<Json<PlatformJobLogPage>, ApiError> {
    let id = extract::job_id(id)?;
    let summary = state.jobs.summary(id, caller.owner()).await?;
    let data = log_lines(&summary)
        .into_iter()
        .map(|(level, message)| {
            let inner = json!({"name": "data_designer.synthgate", "levelname": level,
                "message": message});
            PlatformJobLog {
                job_id: summary.job.id.to_string(),
                job_step: "data-designer",
                job_task: "generate",
                message: inner.to_string(),
                timestamp: summary.job.updated_at.to_rfc3339(),
            }
        })
        .collect();
    Ok(Json(PlatformJobLogPage {
        object: "list",
        data,
        next_page: None,
    }))
}

/// The log of a job as `(level, text)` lines, a function of its state that only grows as the
/// job goes on: counts only rise, and what is not monotone comes once, at the end.
pub(in crate::api) fn log_lines(s: &JobSummary) -> Vec<(&'static str, String)> {
    let total = u64::from(s.job.num_records);
    let mut out = vec![("INFO", format!("🚀 Job submitted: {total} records"))];
    let done = s.counts.completed + s.counts.failed;
    let mut last = 0;
    for tenth in 1..=10u64 {
        // Each tenth once (a small job has fewer distinct marks than ten).
        let mark = (total * tenth).div_ceil(10);
        if mark > last && done >= mark {
            out.push(("INFO", format!("⏳ {mark} of {total} records done")));
            last = mark;
        }
    }
    // The client shows the entries past those it has seen, by position: anything that can
    // change order (the first failed records, by index) comes once, with the end.
    if s.job.status.is_terminal() {
        for f in &s.first_errors {
            out.push((
                "WARNING",
                format!(
                    "⚠️ record {} failed: {}: {}",
                    f.index,
                    f.error.code.as_str(),
                    f.error.message
                ),
            ));
        }
    }
    match s.job.status {
        JobStatus::Completed => out.push((
            "INFO",
            format!(
                "🏁 Job completed: {} records generated, {} failed",
                s.counts.completed, s.counts.failed
            ),
        )),
        JobStatus::Failed => {
            let why = s
                .job
                .error
                .as_ref()
                .map(|e| format!("{}: {}", e.code, e.message))
                .unwrap_or_default();
            out.push(("ERROR", format!("🛑 Job failed: {why}")));
        }
        JobStatus::Cancelled => out.push(("WARNING", "🛑 Job cancelled".into())),
        _ => {}
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::job::{JobCounts, JobRow};

    fn summary(status: JobStatus, completed: u64) -> JobSummary {
        JobSummary {
            job: JobRow {
                id: crate::domain::JobId::new(),
                owner: None,
                status,
                config: json!({}),
                num_records: 20,
                seed: 1,
                metadata: None,
                run_config: json!({}),
                idempotency_key: None,
                request_hash: None,
                error: None,
                created_at: chrono::Utc::now(),
                updated_at: chrono::Utc::now(),
                started_at: None,
                finished_at: None,
                output_columns: None,
                seed_datasets: None,
                name: None,
                trace_context: None,
                selection: None,
                cache_mode: Default::default(),
                max_cost_nanos: None,
            },
            counts: JobCounts {
                completed,
                ..JobCounts::default()
            },
            first_errors: Vec::new(),
            usage: Default::default(),
            column_usage: Default::default(),
            tool_usage: Default::default(),
        }
    }

    /// The client shows only the entries past the ones it has seen: each later log must start
    /// with every earlier one.
    #[test]
    fn the_log_only_grows() {
        let mut seen: Vec<(&str, String)> = Vec::new();
        for (status, done) in [
            (JobStatus::Queued, 0),
            (JobStatus::Running, 1),
            (JobStatus::Running, 7),
            (JobStatus::Running, 19),
            (JobStatus::Completed, 20),
        ] {
            let now = log_lines(&summary(status, done));
            assert!(now.starts_with(&seen), "{seen:?} then {now:?}");
            seen = now;
        }
        assert_eq!(seen.len(), 1 + 10 + 1, "{seen:?}");
        // A small job: each mark once.
        let mut small = summary(JobStatus::Completed, 3);
        small.job.num_records = 3;
        let lines = log_lines(&small);
        let marks: Vec<&String> = lines
            .iter()
            .map(|(_, t)| t)
            .filter(|t| t.contains("records done"))
            .collect();
        assert_eq!(marks.len(), 3, "{lines:?}");
        assert!(seen.last().unwrap().1.contains("Job completed"));
    }
}
