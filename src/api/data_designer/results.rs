//! A Data Designer job's results, `dataset` and `analysis`: the list, each one's metadata
//! (`GET .../results/{name}`, the existence probe the client makes before a download) and its
//! download. The dataset is the tar archive `load_dataset()` extracts, one
//! `dataset/part-0.parquet` (our streamed Parquet export of the completed records); the
//! analysis is the JSON `load_analysis()` validates (see [`super::analysis`]). The archive is
//! the job service's (`jobs::archive`), written out through its export cache.

use axum::Json;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use utoipa::ToSchema;

use crate::api::extract::{self, ApiPath};
use crate::auth::Caller;
use crate::domain::JobStatus;
use crate::domain::job::JobRow;
use crate::error::{ApiError, ErrorBody};
use crate::state::AppState;

/// Whether a job has a dataset to give: it finished, or is stopping.
pub(in crate::api) fn has_results(status: JobStatus) -> bool {
    matches!(
        status,
        JobStatus::Completed | JobStatus::Cancelled | JobStatus::Cancelling | JobStatus::Failed
    )
}

/// The results a job has: both once it has finished or is stopping, else none.
const RESULTS: [&str; 2] = ["dataset", "analysis"];

/// The job, if `name` is one of its results now; `output_not_found` otherwise.
async fn job_with_result(
    state: &AppState,
    caller: &Caller,
    id: &str,
    name: &str,
) -> Result<JobRow, ApiError> {
    let id = extract::job_id(id)?;
    let job = state.jobs.get(id, caller.owner()).await?;
    if !RESULTS.contains(&name) || !has_results(job.status) {
        return Err(ApiError::OutputNotFound(name.into()));
    }
    Ok(job)
}

/// A result as the client's `PlatformJobResult`.
#[derive(Debug, Serialize, ToSchema)]
pub struct PlatformJobResult {
    pub job_id: String,
    /// `dataset` or `analysis`.
    pub result_name: String,
    /// Always `default`.
    pub namespace: &'static str,
    /// Always `synthgate`: the artifact is served here, at `artifact_url`.
    pub artifact_storage_type: &'static str,
    /// Its download, relative to the server.
    pub artifact_url: String,
    /// RFC 3339.
    #[schema(format = DateTime)]
    pub created_at: String,
    /// RFC 3339.
    #[schema(format = DateTime)]
    pub updated_at: String,
}

/// The client's `PlatformJobListResultResponse`.
#[derive(Debug, Serialize, ToSchema)]
pub struct PlatformJobResultList {
    /// Always `list`.
    pub object: &'static str,
    pub data: Vec<PlatformJobResult>,
}

fn result_view(job: &JobRow, name: &str) -> PlatformJobResult {
    PlatformJobResult {
        job_id: job.id.to_string(),
        result_name: name.to_owned(),
        namespace: "default",
        artifact_storage_type: "synthgate",
        artifact_url: format!("/v1/data-designer/jobs/{}/results/{name}/download", job.id),
        created_at: job.created_at.to_rfc3339(),
        updated_at: job.updated_at.to_rfc3339(),
    }
}

/// List a Data Designer job's results
///
/// `dataset` and `analysis` once the job has finished or is stopping; none before.
#[utoipa::path(get, path = "/v1/data-designer/jobs/{id}/results", tag = "data-designer",
    params(("id" = uuid::Uuid, Path, description = "Job id")),
    responses(
        (status = 200, description = "The results", body = PlatformJobResultList),
        (status = 400, description = "Not a UUID (`invalid_id`)", body = ErrorBody),
        (status = 404, description = "No such job, or another key's (`job_not_found`)", body = ErrorBody),
    ))]
pub async fn list_results(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<PlatformJobResultList>, ApiError> {
    let id = extract::job_id(&id)?;
    let job = state.jobs.get(id, caller.owner()).await?;
    let data = if has_results(job.status) {
        RESULTS.iter().map(|name| result_view(&job, name)).collect()
    } else {
        Vec::new()
    };
    Ok(Json(PlatformJobResultList {
        object: "list",
        data,
    }))
}

/// A Data Designer job's result
///
/// The client's existence probe before a download (`dataset` or `analysis`): `404` until
/// the job has finished.
#[utoipa::path(get, path = "/v1/data-designer/jobs/{id}/results/{name}", tag = "data-designer",
    params(("id" = uuid::Uuid, Path, description = "Job id"),
        ("name" = String, Path, description = "`dataset` or `analysis`")),
    responses(
        (status = 200, description = "The result", body = PlatformJobResult),
        (status = 400, description = "Not a UUID (`invalid_id`)", body = ErrorBody),
        (status = 404, description = "No such job, another key's (`job_not_found`), or no such result yet (`output_not_found`)", body = ErrorBody),
    ))]
pub async fn get_result(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath((id, name)): ApiPath<(String, String)>,
) -> Result<Json<PlatformJobResult>, ApiError> {
    let job = job_with_result(&state, &caller, &id, &name).await?;
    Ok(Json(result_view(&job, &name)))
}

/// Download a Data Designer job's result
///
/// `dataset`: a tar archive holding `dataset/part-0.parquet`, the completed records as
/// `GET /v1/jobs/{id}/records?format=parquet` gives them. `analysis`: the records' statistics
/// as the client's `DatasetProfilerResults` (JSON).
#[utoipa::path(get, path = "/v1/data-designer/jobs/{id}/results/{name}/download", tag = "data-designer",
    params(("id" = uuid::Uuid, Path, description = "Job id"),
        ("name" = String, Path, description = "`dataset` or `analysis`")),
    responses(
        (status = 200, description = "A tar archive (`dataset`) or a JSON object (`analysis`)", content_type = "application/x-tar", body = Vec<u8>),
        (status = 400, description = "Not a UUID (`invalid_id`)", body = ErrorBody),
        (status = 404, description = "No such job, another key's (`job_not_found`), or no such result yet (`output_not_found`)", body = ErrorBody),
    ))]
pub async fn download_result(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath((id, name)): ApiPath<(String, String)>,
) -> Result<Response, ApiError> {
    let job = job_with_result(&state, &caller, &id, &name).await?;
    if name == "analysis" {
        let analysis = state.jobs.analysis(job.id, caller.owner()).await?;
        return Ok(Json(super::analysis::profiler_results(&analysis.profile)).into_response());
    }
    dataset_archive(&state, &caller, &job, crate::jobs::DATASET_MEMBER).await
}

/// The tar archive of a job's dataset (`JobService::dataset_archive`).
pub(in crate::api) async fn dataset_archive(
    state: &AppState,
    caller: &Caller,
    job: &JobRow,
    member: &str,
) -> Result<Response, ApiError> {
    let archive = state
        .jobs
        .dataset_archive(job, caller.owner(), member)
        .await?;
    let mut resp = Body::from_stream(archive).into_response();
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/x-tar"),
    );
    Ok(resp)
}
