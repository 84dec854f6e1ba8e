//! A workspace's Data Designer jobs by name: create, get, status, cancel, delete
//! (`/apis/data-designer/v2/workspaces/{workspace}/jobs/create...`). The list is in
//! [`super::list`], the logs in [`super::logs`], the results in [`super::results`].
//!
//! A job is one of our jobs, submitted through the same job service as at `/v1/jobs`. The
//! client never sends a name, so the server gives one (`data-designer-` and eight hex digits,
//! as NVIDIA's service names its jobs); a name the request does give must be free in the
//! workspace.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::Deserialize;
use serde_json::{Value, json};
use utoipa::ToSchema;

use super::errors::PlatformErrorBody;
use super::views::{
    PlatformJob, PlatformJobStatus, check_name, job_named, platform_job, platform_status_view,
};
use crate::api::data_designer::jobs::{DataDesignerJobSpec, add_providers};
use crate::api::data_designer::views::{DEFAULT_PROJECT, META, NAMESPACE, PROJECT};
use crate::api::extract::{self, ApiPath, BodyFormat};
use crate::auth::Caller;
use crate::error::ApiError;
use crate::jobs::SubmitRequest;
use crate::state::AppState;

/// The prefix of the names the server gives.
const NAME_PREFIX: &str = "data-designer-";

/// Tries at a free generated name before giving up (a clash of eight random hex digits in one
/// workspace is one in four billion a pair).
const NAME_TRIES: usize = 3;

/// The platform's job request (`BaseJobRequest`); the client sends only `spec`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PlatformJobRequest {
    /// `{num_records, config}`.
    pub spec: DataDesignerJobSpec,
    /// Default: one the server makes (`data-designer-` and eight hex digits).
    pub name: Option<String>,
    /// Default `nemo-data-designer`.
    pub project: Option<String>,
    pub description: Option<String>,
    #[schema(value_type = Option<Object>)]
    pub custom_fields: Option<Value>,
    /// Ignored: a job belongs to the key that submits it.
    #[schema(value_type = Option<Object>)]
    #[serde(rename = "ownership")]
    pub _ownership: Option<Value>,
    /// Ignored: results are kept by this server and downloaded from it.
    #[schema(value_type = Option<Object>)]
    #[serde(rename = "output_location")]
    pub _output_location: Option<Value>,
    /// Ignored: a job runs with the server's workers.
    #[schema(value_type = Option<Object>)]
    #[serde(rename = "profile")]
    pub _profile: Option<Value>,
    /// Ignored, as `profile`.
    #[schema(value_type = Option<Object>)]
    #[serde(rename = "options")]
    pub _options: Option<Value>,
}

/// Create a job
///
/// Submits the config as `POST /v1/jobs` does, under a name free in the workspace, and
/// answers the job (`201`).
#[utoipa::path(post, path = "/apis/data-designer/v2/workspaces/{workspace}/jobs/create",
    operation_id = "platform_create_job", tag = "nemo-platform",
    params(("workspace" = String, Path, description = "Workspace")),
    request_body = PlatformJobRequest,
    responses(
        (status = 201, description = "The job", body = PlatformJob),
        (status = 400, description = "Malformed JSON (`invalid_json`, `duplicate_key`)", body = PlatformErrorBody),
        (status = 403, description = "The key may not use a model or tool alias the config names (`alias_not_allowed`)", body = PlatformErrorBody),
        (status = 409, description = "The name given is taken in the workspace (`job_name_taken`)", body = PlatformErrorBody),
        (status = 413, description = "Body too large (`payload_too_large`)", body = PlatformErrorBody),
        (status = 422, description = "Invalid request, workspace, name or config (`invalid_request`, `num_records_out_of_range`, config codes)", body = PlatformErrorBody),
        (status = 429, description = "The key has `limits.max_jobs_in_flight_per_key` jobs queued or running (`too_many_jobs`)", body = PlatformErrorBody),
        (status = 503, description = "An MCP provider the tools need is unreachable (`mcp_unavailable`)", body = PlatformErrorBody),
    ))]
pub async fn create_job(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath(workspace): ApiPath<String>,
    body: bytes::Bytes,
) -> Result<(StatusCode, Json<PlatformJob>), ApiError> {
    check_name("workspace", &workspace)?;
    let value = state
        .jobs
        .cpu()
        .run(|| extract::decode_body(BodyFormat::Json, &body))
        .await?;
    let req: PlatformJobRequest = extract::from_value(value)?;
    let name = match req.name {
        Some(name) => {
            check_name("name", &name)?;
            if is_taken(&state, &caller, &workspace, &name).await? {
                return Err(ApiError::JobNameTaken { name, workspace });
            }
            name
        }
        None => free_name(&state, &caller, &workspace).await?,
    };
    let meta = json!({META: {
        PROJECT: req.project.unwrap_or_else(|| DEFAULT_PROJECT.into()),
        "description": req.description,
        NAMESPACE: workspace,
        "custom_fields": req.custom_fields.unwrap_or_else(|| json!({})),
    }});
    let submit = SubmitRequest {
        metadata: Some(meta),
        name: Some(name),
        ..SubmitRequest::of(
            super::platform_config(req.spec.config, &workspace),
            req.spec.num_records,
        )
    };
    let (summary, _) = state.jobs.submit(submit, &caller).await?;
    Ok((StatusCode::CREATED, Json(platform_job(&summary))))
}

/// Whether the caller has a job named `name` in `workspace`.
async fn is_taken(
    state: &AppState,
    caller: &Caller,
    workspace: &str,
    name: &str,
) -> Result<bool, ApiError> {
    match job_named(state, caller, workspace, name).await {
        Ok(_) => Ok(true),
        Err(ApiError::JobNotFound(_)) => Ok(false),
        Err(e) => Err(e),
    }
}

/// A generated name free in the workspace.
async fn free_name(state: &AppState, caller: &Caller, workspace: &str) -> Result<String, ApiError> {
    for _ in 0..NAME_TRIES {
        let id = uuid::Uuid::new_v4().simple().to_string();
        let name = format!("{NAME_PREFIX}{}", &id[..8]);
        if !is_taken(state, caller, workspace, &name).await? {
            return Ok(name);
        }
    }
    Err(ApiError::Internal(format!(
        "no free job name in workspace '{workspace}' after {NAME_TRIES} tries"
    )))
}

/// Get a job
#[utoipa::path(get, path = "/apis/data-designer/v2/workspaces/{workspace}/jobs/create/{name}",
    operation_id = "platform_get_job", tag = "nemo-platform",
    params(("workspace" = String, Path, description = "Workspace"),
        ("name" = String, Path, description = "Job name")),
    responses(
        (status = 200, description = "The job", body = PlatformJob),
        (status = 404, description = "No such job in the workspace, or another key's (`job_not_found`)", body = PlatformErrorBody),
        (status = 422, description = "A malformed workspace (`invalid_request`)", body = PlatformErrorBody),
    ))]
pub async fn get_job(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath((workspace, name)): ApiPath<(String, String)>,
) -> Result<Json<PlatformJob>, ApiError> {
    let s = job_named(&state, &caller, &workspace, &name).await?;
    let mut view = platform_job(&s);
    add_providers(&state, &s, &mut view.status_details).await;
    Ok(Json(view))
}

/// A job's status
///
/// What the client's `wait_until_done()` polls, once a second: it returns on `completed`,
/// `error`, `cancelled` and `cancelling`.
#[utoipa::path(get, path = "/apis/data-designer/v2/workspaces/{workspace}/jobs/create/{name}/status",
    operation_id = "platform_job_status", tag = "nemo-platform",
    params(("workspace" = String, Path, description = "Workspace"),
        ("name" = String, Path, description = "Job name")),
    responses(
        (status = 200, description = "The status", body = PlatformJobStatus),
        (status = 404, description = "No such job in the workspace, or another key's (`job_not_found`)", body = PlatformErrorBody),
        (status = 422, description = "A malformed workspace (`invalid_request`)", body = PlatformErrorBody),
    ))]
pub async fn job_status(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath((workspace, name)): ApiPath<(String, String)>,
) -> Result<Json<PlatformJobStatus>, ApiError> {
    let s = job_named(&state, &caller, &workspace, &name).await?;
    let mut view = platform_status_view(&s);
    add_providers(&state, &s, &mut view.status_details).await;
    Ok(Json(view))
}

/// Cancel a job
#[utoipa::path(post, path = "/apis/data-designer/v2/workspaces/{workspace}/jobs/create/{name}/cancel",
    operation_id = "platform_cancel_job", tag = "nemo-platform",
    params(("workspace" = String, Path, description = "Workspace"),
        ("name" = String, Path, description = "Job name")),
    responses(
        (status = 200, description = "The job after the request", body = PlatformJob),
        (status = 404, description = "No such job in the workspace, or another key's (`job_not_found`)", body = PlatformErrorBody),
        (status = 409, description = "The job has finished (`job_finished`)", body = PlatformErrorBody),
        (status = 422, description = "A malformed workspace (`invalid_request`)", body = PlatformErrorBody),
    ))]
pub async fn cancel_job(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath((workspace, name)): ApiPath<(String, String)>,
) -> Result<Json<PlatformJob>, ApiError> {
    let s = job_named(&state, &caller, &workspace, &name).await?;
    let after = state.jobs.cancel(s.job.id, caller.owner()).await?;
    Ok(Json(platform_job(&after)))
}

/// Delete a job
///
/// Deletes a finished job (completed, error or cancelled) with its records, traces and usage,
/// as `DELETE /v1/jobs/{id}` does (`204`). A job still pending or active must be cancelled
/// first.
#[utoipa::path(delete, path = "/apis/data-designer/v2/workspaces/{workspace}/jobs/create/{name}",
    operation_id = "platform_delete_job", tag = "nemo-platform",
    params(("workspace" = String, Path, description = "Workspace"),
        ("name" = String, Path, description = "Job name")),
    responses(
        (status = 204, description = "Deleted"),
        (status = 404, description = "No such job in the workspace, or another key's (`job_not_found`)", body = PlatformErrorBody),
        (status = 409, description = "The job has not finished (`job_not_finished`)", body = PlatformErrorBody),
        (status = 422, description = "A malformed workspace (`invalid_request`)", body = PlatformErrorBody),
    ))]
pub async fn delete_job(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath((workspace, name)): ApiPath<(String, String)>,
) -> Result<StatusCode, ApiError> {
    let s = job_named(&state, &caller, &workspace, &name).await?;
    state.jobs.delete(s.job.id, caller.owner()).await?;
    Ok(StatusCode::NO_CONTENT)
}
