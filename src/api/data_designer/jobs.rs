//! Data Designer jobs: create, retrieve, status, cancel, delete (`/v1/data-designer/jobs...`),
//! and the job as the client's `DataDesignerJob`. The list is in [`super::list`], the logs in
//! [`super::logs`].
//!
//! A Data Designer job is one of our jobs, submitted through the same job service: the same
//! validation, limits, ownership and worker pool. Its `name`, `project` and `description` are
//! kept in the job's metadata (under `data_designer`), so a retrieve gives them back.

use axum::Json;
use axum::extract::State;
use serde::Deserialize;
use serde_json::{Map, Value, json};
use utoipa::ToSchema;

use crate::api::extract::{self, ApiPath, BodyFormat};
use crate::auth::Caller;
use crate::domain::JobStatus;
use crate::domain::job::JobSummary;
use crate::error::{ApiError, ErrorBody};
use crate::jobs::{NumRecords, SubmitRequest};
use crate::state::AppState;

/// The key of the job metadata that holds the Data Designer job's own fields (its name is the
/// job's own, not kept here).
pub(super) const META: &str = "data_designer";
/// Keys under [`META`] that the list filters on.
pub(super) const PROJECT: &str = "project";
pub(super) const NAMESPACE: &str = "namespace";
/// What the client shows for a job without a name, project or namespace (a job submitted at
/// `/v1/jobs`, or one the client sent without them).
pub(super) const DEFAULT_NAME: &str = "nemo-data-designer-job";
pub(super) const DEFAULT_PROJECT: &str = "nemo-data-designer";
pub(super) const DEFAULT_NAMESPACE: &str = "default";

/// The client's `JobCreateParams`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DataDesignerJobRequest {
    /// `{num_records, config}`.
    pub spec: DataDesignerJobSpec,
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
pub struct DataDesignerJobSpec {
    pub num_records: i64,
    /// A Data Designer config.
    #[schema(value_type = Object)]
    pub config: Value,
}

/// Create a Data Designer job
///
/// Submits the config as `POST /v1/jobs` does and answers the client's `DataDesignerJob`.
#[utoipa::path(post, path = "/v1/data-designer/jobs", operation_id = "data_designer_create_job", tag = "data-designer",
    request_body = DataDesignerJobRequest,
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
    let req: DataDesignerJobRequest = extract::from_value(value)?;
    // The client's name is the job's name, so `GET /v1/jobs?name=` finds it too.
    let name = req.name.unwrap_or_else(|| DEFAULT_NAME.into());
    let meta = json!({META: {
        PROJECT: req.project.unwrap_or_else(|| DEFAULT_PROJECT.into()),
        "description": req.description,
        NAMESPACE: req.namespace.unwrap_or_else(|| DEFAULT_NAMESPACE.into()),
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
        name: Some(name),
        cache: None,
        max_cost: None,
    };
    let (summary, _) = state.jobs.submit(submit, &caller).await?;
    Ok(Json(job_view(&summary)))
}

/// Get a Data Designer job
#[utoipa::path(get, path = "/v1/data-designer/jobs/{id}", operation_id = "data_designer_get_job", tag = "data-designer",
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
    let s = state.jobs.summary(id, caller.owner()).await?;
    let mut view = job_view(&s);
    add_providers(&state, &s, &mut view["status_details"]).await;
    Ok(Json(view))
}

/// A Data Designer job's status
#[utoipa::path(get, path = "/v1/data-designer/jobs/{id}/status", tag = "data-designer",
    params(("id" = uuid::Uuid, Path, description = "Job id")),
    responses(
        (status = 200, description = "The status (`PlatformJobStatusResponse`)", body = Object),
        (status = 400, description = "Not a UUID (`invalid_id`)", body = ErrorBody),
        (status = 404, description = "No such job, or another key's (`job_not_found`)", body = ErrorBody),
    ))]
pub async fn job_status(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<Value>, ApiError> {
    let id = extract::job_id(&id)?;
    let s = state.jobs.summary(id, caller.owner()).await?;
    let mut details = status_details(&s);
    add_providers(&state, &s, &mut details).await;
    Ok(Json(json!({
        "job_id": s.job.id.to_string(),
        "status": platform_status(s.job.status),
        "status_details": details,
        "error_details": error_details(&s),
        "steps": [],
    })))
}

/// While the job is active, `status_details.providers`: each model provider its columns call,
/// as this replica's admission controller sees it (as `GET /v1/jobs/{id}` shows it).
async fn add_providers(state: &AppState, s: &JobSummary, details: &mut Value) {
    let providers = state.jobs.provider_states(&s.job).await;
    if !providers.is_empty() {
        details["providers"] = serde_json::to_value(providers).unwrap_or_default();
    }
}

/// Delete a Data Designer job
///
/// Deletes a finished job (completed, failed or cancelled) with its records, traces and
/// usage, as `DELETE /v1/jobs/{id}` does. A job still queued or running must be cancelled
/// first.
#[utoipa::path(delete, path = "/v1/data-designer/jobs/{id}", operation_id = "data_designer_delete_job", tag = "data-designer",
    params(("id" = uuid::Uuid, Path, description = "Job id")),
    responses(
        (status = 200, description = "Deleted: `{\"id\", \"deleted\": true}`", body = Object),
        (status = 400, description = "Not a UUID (`invalid_id`)", body = ErrorBody),
        (status = 404, description = "No such job, or another key's (`job_not_found`)", body = ErrorBody),
        (status = 409, description = "The job has not finished (`job_not_finished`)", body = ErrorBody),
    ))]
pub async fn delete_job(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<Value>, ApiError> {
    let id = extract::job_id(&id)?;
    state.jobs.delete(id, caller.owner()).await?;
    Ok(Json(json!({"id": id.to_string(), "deleted": true})))
}

/// Cancel a Data Designer job
#[utoipa::path(post, path = "/v1/data-designer/jobs/{id}/cancel", operation_id = "data_designer_cancel_job", tag = "data-designer",
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

/// Our status as the platform's `PlatformJobStatus`.
pub(super) fn platform_status(status: JobStatus) -> &'static str {
    match status {
        JobStatus::Queued => "pending",
        JobStatus::Running => "active",
        JobStatus::Cancelling => "cancelling",
        JobStatus::Cancelled => "cancelled",
        JobStatus::Completed => "completed",
        JobStatus::Failed => "error",
    }
}

/// `status_details`: the records' progress, and our own status name; the calls answered by the
/// response cache, the cost and budget (with priced models); for a job with
/// `record_selection`, its five counts, and whether its budget ran out (a `return_partial` job
/// completes short of `num_records`: this says so).
fn status_details(s: &JobSummary) -> Value {
    let mut details = json!({
        "num_records": s.job.num_records,
        "completed": s.counts.completed,
        "failed": s.counts.failed,
        "in_progress": s.counts.in_progress,
        "pending": s.counts.pending,
        "synthgate_status": s.job.status.as_str(),
    });
    let cached: u64 = s.usage.values().map(|u| u.cached_requests).sum();
    if cached > 0 {
        details["cached_requests"] = cached.into();
    }
    if let Some(cost) = crate::api::dto::job_cost(&s.usage) {
        details["cost"] = cost.into();
    }
    if let Some(max) = s.job.max_cost_nanos {
        details["max_cost"] = crate::domain::models::prices::from_nanos(max).into();
    }
    if let Some(sel) = &s.counts.selection {
        let mut v = serde_json::to_value(sel).unwrap_or_default();
        v["candidates"] = sel.candidates().into();
        v["exhausted"] = (s.job.status.is_terminal() && sel.exhausted()).into();
        details["record_selection"] = v;
    }
    details
}

/// `error_details`: the job's error, and the first failed records' errors.
fn error_details(s: &JobSummary) -> Value {
    let job = &s.job;
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
    Value::Object(error_details)
}

/// The Data Designer fields a job was created with (`/v1` jobs have none).
fn meta(s: &JobSummary) -> Option<&Value> {
    s.job.metadata.as_ref().and_then(|m| m.get(META))
}

/// A job's `(name, project, namespace)`, the client's defaults where it has none.
fn names(s: &JobSummary) -> (String, String, String) {
    let field = |k: &str, default: &str| {
        meta(s)
            .and_then(|m| m.get(k))
            .and_then(Value::as_str)
            .unwrap_or(default)
            .to_owned()
    };
    (
        s.job
            .name
            .clone()
            .unwrap_or_else(|| DEFAULT_NAME.to_owned()),
        field(PROJECT, DEFAULT_PROJECT),
        field(NAMESPACE, DEFAULT_NAMESPACE),
    )
}

/// A job as the client's `DataDesignerJob`.
pub(super) fn job_view(s: &JobSummary) -> Value {
    let job = &s.job;
    let (name, project, namespace) = names(s);
    let field = |k: &str| meta(s).and_then(|m| m.get(k)).cloned();
    json!({
        "id": job.id.to_string(),
        "name": name,
        "project": project,
        "namespace": namespace,
        "description": field("description").unwrap_or(Value::Null),
        "spec": {"num_records": job.num_records, "config": job.config},
        "status": platform_status(job.status),
        "status_details": status_details(s),
        "error_details": error_details(s),
        "ownership": {},
        "custom_fields": field("custom_fields").unwrap_or_else(|| json!({})),
        "created_at": job.created_at.to_rfc3339(),
        "updated_at": job.updated_at.to_rfc3339(),
    })
}
