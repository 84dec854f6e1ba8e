//! Data Designer jobs: create, retrieve, status, cancel, delete (`/v1/data-designer/jobs...`),
//! and the job as the client's `DataDesignerJob`. The list is in [`super::list`], the logs in
//! [`super::logs`].
//!
//! A Data Designer job is one of our jobs, submitted through the same job service: the same
//! validation, limits, ownership and worker pool. Its `name`, `project` and `description` are
//! kept in the job's metadata (under `data_designer`), so a retrieve gives them back.

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use utoipa::ToSchema;

use super::views::{
    DEFAULT_NAME, DEFAULT_NAMESPACE, DEFAULT_PROJECT, DataDesignerJob, DataDesignerJobStatus, META,
    NAMESPACE, PROJECT, error_details, job_view, platform_status, status_details,
};
use crate::api::extract::{self, ApiPath, BodyFormat};
use crate::auth::Caller;
use crate::domain::job::JobSummary;
use crate::error::{ApiError, ErrorBody};
use crate::jobs::SubmitRequest;
use crate::state::AppState;

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
#[derive(Debug, Deserialize, Serialize, ToSchema)]
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
        (status = 200, description = "The job", body = DataDesignerJob),
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
) -> Result<Json<DataDesignerJob>, ApiError> {
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
        metadata: Some(meta),
        name: Some(name),
        ..SubmitRequest::of(super::client_config(req.spec.config), req.spec.num_records)
    };
    let (summary, _) = state.jobs.submit(submit, &caller).await?;
    Ok(Json(job_view(&summary)))
}

/// Get a Data Designer job
#[utoipa::path(get, path = "/v1/data-designer/jobs/{id}", operation_id = "data_designer_get_job", tag = "data-designer",
    params(("id" = uuid::Uuid, Path, description = "Job id")),
    responses(
        (status = 200, description = "The job", body = DataDesignerJob),
        (status = 400, description = "Not a UUID (`invalid_id`)", body = ErrorBody),
        (status = 404, description = "No such job, or another key's (`job_not_found`)", body = ErrorBody),
    ))]
pub async fn get_job(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<DataDesignerJob>, ApiError> {
    let id = extract::job_id(&id)?;
    let s = state.jobs.summary(id, caller.owner()).await?;
    let mut view = job_view(&s);
    add_providers(&state, &s, &mut view.status_details).await;
    Ok(Json(view))
}

/// A Data Designer job's status
#[utoipa::path(get, path = "/v1/data-designer/jobs/{id}/status", tag = "data-designer",
    params(("id" = uuid::Uuid, Path, description = "Job id")),
    responses(
        (status = 200, description = "The status", body = DataDesignerJobStatus),
        (status = 400, description = "Not a UUID (`invalid_id`)", body = ErrorBody),
        (status = 404, description = "No such job, or another key's (`job_not_found`)", body = ErrorBody),
    ))]
pub async fn job_status(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<DataDesignerJobStatus>, ApiError> {
    let id = extract::job_id(&id)?;
    let s = state.jobs.summary(id, caller.owner()).await?;
    let mut details = status_details(&s);
    add_providers(&state, &s, &mut details).await;
    Ok(Json(DataDesignerJobStatus {
        job_id: s.job.id.to_string(),
        status: platform_status(s.job.status),
        status_details: details,
        error_details: error_details(&s),
        steps: Vec::new(),
    }))
}

/// While the job is active, `status_details.providers`: each model provider its columns call,
/// as this replica's admission controller sees it (as `GET /v1/jobs/{id}` shows it).
pub(in crate::api) async fn add_providers(state: &AppState, s: &JobSummary, details: &mut Value) {
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
        (status = 200, description = "Deleted", body = DeletedJob),
        (status = 400, description = "Not a UUID (`invalid_id`)", body = ErrorBody),
        (status = 404, description = "No such job, or another key's (`job_not_found`)", body = ErrorBody),
        (status = 409, description = "The job has not finished (`job_not_finished`)", body = ErrorBody),
    ))]
pub async fn delete_job(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<DeletedJob>, ApiError> {
    let id = extract::job_id(&id)?;
    state.jobs.delete(id, caller.owner()).await?;
    Ok(Json(DeletedJob {
        id: id.to_string(),
        deleted: true,
    }))
}

/// What deleting a Data Designer job answers.
#[derive(Debug, Serialize, ToSchema)]
pub struct DeletedJob {
    pub id: String,
    /// Always true.
    pub deleted: bool,
}

/// Cancel a Data Designer job
#[utoipa::path(post, path = "/v1/data-designer/jobs/{id}/cancel", operation_id = "data_designer_cancel_job", tag = "data-designer",
    params(("id" = uuid::Uuid, Path, description = "Job id")),
    responses(
        (status = 200, description = "The job after the request", body = DataDesignerJob),
        (status = 400, description = "Not a UUID (`invalid_id`)", body = ErrorBody),
        (status = 404, description = "No such job, or another key's (`job_not_found`)", body = ErrorBody),
        (status = 409, description = "The job has finished (`job_finished`)", body = ErrorBody),
    ))]
pub async fn cancel_job(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<DataDesignerJob>, ApiError> {
    let id = extract::job_id(&id)?;
    Ok(Json(job_view(
        &state.jobs.cancel(id, caller.owner()).await?,
    )))
}
