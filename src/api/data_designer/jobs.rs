//! Data Designer jobs: create, retrieve, list, cancel (`/v1/data-designer/jobs...`), and the
//! platform's `GET /v1/jobs/{id}/logs`, which the client's `wait_until_done()` polls.
//!
//! A Data Designer job is one of our jobs, submitted through the same job service: the same
//! validation, limits, ownership and worker pool. Its `name`, `project` and `description` are
//! kept in the job's metadata (under `data_designer`), so a retrieve gives them back.

use axum::Json;
use axum::extract::State;
use serde::Deserialize;
use serde_json::{Map, Value, json};
use utoipa::{IntoParams, ToSchema};

use crate::api::extract::{self, ApiPath, ApiQuery, BodyFormat};
use crate::auth::Caller;
use crate::domain::JobStatus;
use crate::domain::job::JobSummary;
use crate::error::{ApiError, ErrorBody};
use crate::jobs::{NumRecords, SubmitRequest};
use crate::state::AppState;

/// The key of the job metadata that holds the Data Designer job's own fields.
const META: &str = "data_designer";

/// The client's `JobCreateParams`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateJobRequest {
    /// `{num_records, config}`.
    pub spec: JobSpec,
    /// Default `nemo-data-designer-job` (the client's).
    pub name: Option<String>,
    /// Default `nemo-data-designer`.
    pub project: Option<String>,
    pub description: Option<String>,
    /// Accepted and echoed; synthgate has one namespace.
    pub namespace: Option<String>,
    #[schema(value_type = Option<Object>)]
    pub custom_fields: Option<Value>,
    /// Ignored: a job belongs to the key that submits it.
    #[schema(value_type = Option<Object>)]
    #[serde(rename = "ownership")]
    pub _ownership: Option<Value>,
}

/// The client's `DataDesignerJobConfig`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct JobSpec {
    pub num_records: i64,
    /// A Data Designer config.
    #[schema(value_type = Object)]
    pub config: Value,
}

/// Create a Data Designer job
///
/// Submits the config as `POST /v1/jobs` does and answers the client's `DataDesignerJob`.
#[utoipa::path(post, path = "/v1/data-designer/jobs", tag = "data-designer",
    request_body = CreateJobRequest,
    responses(
        (status = 200, description = "The job (`DataDesignerJob`)", body = Object),
        (status = 400, description = "Malformed JSON (`invalid_json`, `duplicate_key`)", body = ErrorBody),
        (status = 403, description = "The key may not use a model or tool alias the config names (`alias_not_allowed`)", body = ErrorBody),
        (status = 413, description = "Body too large (`payload_too_large`)", body = ErrorBody),
        (status = 422, description = "Invalid request or config (`num_records_out_of_range`, config codes)", body = ErrorBody),
        (status = 429, description = "The key has `limits.max_jobs_in_flight_per_key` jobs queued or running (`too_many_jobs`)", body = ErrorBody),
        (status = 503, description = "An MCP provider the tools need is unreachable (`mcp_unavailable`)", body = ErrorBody),
    ))]
pub async fn create_job(
    State(state): State<AppState>,
    caller: Caller,
    body: bytes::Bytes,
) -> Result<Json<Value>, ApiError> {
    let value = state
        .jobs
        .cpu()
        .run(|| extract::decode_body(BodyFormat::Json, &body))
        .await?;
    let req: CreateJobRequest = extract::from_value(value)?;
    let meta = json!({META: {
        "name": req.name.unwrap_or_else(|| "nemo-data-designer-job".into()),
        "project": req.project.unwrap_or_else(|| "nemo-data-designer".into()),
        "description": req.description,
        "namespace": req.namespace.unwrap_or_else(|| "default".into()),
        "custom_fields": req.custom_fields.unwrap_or_else(|| json!({})),
    }});
    let submit = SubmitRequest {
        config: super::client_config(req.spec.config),
        num_records: NumRecords::Count(req.spec.num_records),
        seed: None,
        metadata: Some(meta),
        run_config: None,
        idempotency_key: None,
        owner: None,
    };
    let (summary, _) = state.jobs.submit(submit, &caller).await?;
    Ok(Json(job_view(&summary)))
}

/// Get a Data Designer job
#[utoipa::path(get, path = "/v1/data-designer/jobs/{id}", tag = "data-designer",
    params(("id" = uuid::Uuid, Path, description = "Job id")),
    responses(
        (status = 200, description = "The job (`DataDesignerJob`)", body = Object),
        (status = 400, description = "Not a UUID (`invalid_id`)", body = ErrorBody),
        (status = 404, description = "No such job, or another key's (`job_not_found`)", body = ErrorBody),
    ))]
pub async fn get_job(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<Value>, ApiError> {
    let id = extract::job_id(&id)?;
    Ok(Json(job_view(
        &state.jobs.summary(id, caller.owner()).await?,
    )))
}

/// Cancel a Data Designer job
#[utoipa::path(post, path = "/v1/data-designer/jobs/{id}/cancel", tag = "data-designer",
    params(("id" = uuid::Uuid, Path, description = "Job id")),
    responses(
        (status = 200, description = "The job after the request (`DataDesignerJob`)", body = Object),
        (status = 400, description = "Not a UUID (`invalid_id`)", body = ErrorBody),
        (status = 404, description = "No such job, or another key's (`job_not_found`)", body = ErrorBody),
        (status = 409, description = "The job has finished (`job_finished`)", body = ErrorBody),
    ))]
pub async fn cancel_job(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<Value>, ApiError> {
    let id = extract::job_id(&id)?;
    Ok(Json(job_view(
        &state.jobs.cancel(id, caller.owner()).await?,
    )))
}

/// Query of the job list (the client's `JobListParams`; filters and search are not served).
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ListJobsQuery {
    /// From 1.
    pub page: Option<u32>,
    /// Default and most: `limits.max_page_size`.
    pub page_size: Option<u32>,
}

/// List Data Designer jobs
///
/// The key's jobs, newest first, a page at a time. `pagination.page` is the one asked for and
/// `total_pages` is `page + 1` while more follow, else `page` (the client's `list_jobs()` stops
/// on their equality); the total is not counted.
#[utoipa::path(get, path = "/v1/data-designer/jobs", tag = "data-designer",
    params(ListJobsQuery),
    responses(
        (status = 200, description = "A page of jobs", body = Object),
        (status = 422, description = "A page or page size of 0 (`invalid_request`)", body = ErrorBody),
    ))]
pub async fn list_jobs(
    State(state): State<AppState>,
    caller: Caller,
    ApiQuery(q): ApiQuery<ListJobsQuery>,
) -> Result<Json<Value>, ApiError> {
    let max = state.config.limits.max_page_size;
    let page = q.page.unwrap_or(1);
    let size = q.page_size.unwrap_or(max).min(max);
    if page == 0 || size == 0 {
        return Err(ApiError::InvalidRequest(
            "query parameters 'page' and 'page_size' start at 1".into(),
        ));
    }
    // Pages over our cursor pages: those before the one asked for are walked, none after. The
    // total is not counted (that would read every job on every page); `total_pages` says
    // whether one more page follows, which is all `list_jobs()` needs to stop.
    let mut before = None;
    let mut current = 1u32;
    let (data, more) = loop {
        let chunk = state.jobs.jobs(caller.owner(), before, size).await?;
        if current == page || !chunk.more {
            let data: Vec<Value> = if current == page {
                chunk.items.iter().map(job_view).collect()
            } else {
                Vec::new()
            };
            break (data, chunk.more && current == page);
        }
        before = chunk.items.last().map(|last| last.job.id);
        current += 1;
    };
    Ok(Json(json!({
        "object": "list",
        "data": data,
        "sort": "-created_at",
        "pagination": {
            "page": page,
            "page_size": size,
            "current_page_size": data.len(),
            "total_pages": if more { page + 1 } else { page },
        },
    })))
}

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
        (status = 200, description = "The log (`SyncLogsPagination[PlatformJobLog]`)", body = Object),
        (status = 400, description = "Not a UUID (`invalid_id`)", body = ErrorBody),
        (status = 404, description = "No such job, or another key's (`job_not_found`)", body = ErrorBody),
        (status = 422, description = "A malformed query parameter (`invalid_request`)", body = ErrorBody),
    ))]
pub async fn job_logs(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath(id): ApiPath<String>,
    ApiQuery(_q): ApiQuery<LogsQuery>,
) -> Result<Json<Value>, ApiError> {
    let id = extract::job_id(&id)?;
    let summary = state.jobs.summary(id, caller.owner()).await?;
    let data: Vec<Value> = log_lines(&summary)
        .into_iter()
        .map(|(level, message)| {
            let inner = json!({"name": "data_designer.synthgate", "levelname": level,
                "message": message});
            json!({
                "job_id": summary.job.id.to_string(),
                "job_step": "data-designer",
                "job_task": "generate",
                "message": inner.to_string(),
                "timestamp": summary.job.updated_at.to_rfc3339(),
            })
        })
        .collect();
    Ok(Json(
        json!({"object": "list", "data": data, "next_page": null}),
    ))
}

/// The log of a job as `(level, text)` lines, a function of its state that only grows as the
/// job goes on: counts only rise, and what is not monotone comes once, at the end.
fn log_lines(s: &JobSummary) -> Vec<(&'static str, String)> {
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

/// Our status as the platform's `PlatformJobStatus`.
fn platform_status(status: JobStatus) -> &'static str {
    match status {
        JobStatus::Queued => "pending",
        JobStatus::Running => "active",
        JobStatus::Cancelling => "cancelling",
        JobStatus::Cancelled => "cancelled",
        JobStatus::Completed => "completed",
        JobStatus::Failed => "error",
    }
}

/// A job as the client's `DataDesignerJob`.
fn job_view(s: &JobSummary) -> Value {
    let job = &s.job;
    let meta = job
        .metadata
        .as_ref()
        .and_then(|m| m.get(META))
        .cloned()
        .unwrap_or_else(|| json!({}));
    let field = |k: &str, default: &str| {
        meta.get(k)
            .and_then(Value::as_str)
            .unwrap_or(default)
            .to_owned()
    };
    let mut error_details = Map::new();
    if let Some(e) = &job.error {
        error_details.insert("code".into(), e.code.clone().into());
        error_details.insert("message".into(), e.message.clone().into());
    }
    if !s.first_errors.is_empty() {
        let records: Vec<Value> = s
            .first_errors
            .iter()
            .map(|f| {
                json!({"record_id": f.id.to_string(), "index": f.index,
                    "code": f.error.code.as_str(), "column": f.error.column,
                    "message": f.error.message})
            })
            .collect();
        error_details.insert("failed_records".into(), records.into());
    }
    json!({
        "id": job.id.to_string(),
        "name": field("name", "nemo-data-designer-job"),
        "project": field("project", "nemo-data-designer"),
        "namespace": field("namespace", "default"),
        "description": meta.get("description").cloned().unwrap_or(Value::Null),
        "spec": {"num_records": job.num_records, "config": job.config},
        "status": platform_status(job.status),
        "status_details": {
            "num_records": job.num_records,
            "completed": s.counts.completed,
            "failed": s.counts.failed,
            "in_progress": s.counts.in_progress,
            "pending": s.counts.pending,
            "synthgate_status": job.status.as_str(),
        },
        "error_details": error_details,
        "ownership": {},
        "custom_fields": meta.get("custom_fields").cloned().unwrap_or_else(|| json!({})),
        "created_at": job.created_at.to_rfc3339(),
        "updated_at": job.updated_at.to_rfc3339(),
    })
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
            },
            counts: JobCounts {
                completed,
                ..JobCounts::default()
            },
            first_errors: Vec::new(),
            usage: Default::default(),
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
