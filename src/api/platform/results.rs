//! A job's results, `artifacts` and `analysis`: the list, each one's metadata (the client's
//! availability probe before a download) and its download. `artifacts` is the tar archive
//! `download_artifacts()` unpacks, holding `artifacts/dataset/parquet-files/batch_00000.parquet`
//! (our Parquet export of the completed records, written out once through the export cache);
//! `analysis` is the JSON `load_analysis()` validates, the first door's
//! (`DatasetProfilerResults`). Both exist once the job has finished or is stopping.

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use utoipa::ToSchema;

use super::errors::PlatformErrorBody;
use super::views::job_named;
use crate::api::data_designer::analysis::profiler_results;
use crate::api::data_designer::results::{dataset_archive, has_results};
use crate::api::extract::ApiPath;
use crate::auth::Caller;
use crate::domain::job::JobSummary;
use crate::error::ApiError;
use crate::state::AppState;

/// The results a job has once it has finished or is stopping.
const RESULTS: [&str; 2] = ["artifacts", "analysis"];

/// A result (the platform's `PlatformJobResultResponse`).
#[derive(Debug, Serialize, ToSchema)]
pub struct PlatformResult {
    /// `artifacts` or `analysis`.
    pub name: String,
    /// The job's name.
    pub job: String,
    pub workspace: String,
    /// Always `synthgate`: the result is served here, at `download_url`.
    pub artifact_storage_type: &'static str,
    /// Where it is downloaded, relative to the server.
    pub download_url: String,
    /// The same.
    pub artifact_url: String,
    /// RFC 3339.
    #[schema(format = DateTime)]
    pub created_at: String,
    /// RFC 3339.
    #[schema(format = DateTime)]
    pub updated_at: String,
}

/// The list of a job's results.
#[derive(Debug, Serialize, ToSchema)]
pub struct PlatformResultList {
    pub data: Vec<PlatformResult>,
}

fn result_view(workspace: &str, s: &JobSummary, result: &str) -> PlatformResult {
    let name = s.job.name.clone().unwrap_or_default();
    let url = format!(
        "/apis/data-designer/v2/workspaces/{workspace}/jobs/create/{name}/results/{result}/download"
    );
    PlatformResult {
        name: result.to_owned(),
        job: name,
        workspace: workspace.to_owned(),
        artifact_storage_type: "synthgate",
        download_url: url.clone(),
        artifact_url: url,
        created_at: s.job.created_at.to_rfc3339(),
        updated_at: s.job.updated_at.to_rfc3339(),
    }
}

/// The job, if `result` is one of its results now; `output_not_found` otherwise.
async fn job_with_result(
    state: &AppState,
    caller: &Caller,
    workspace: &str,
    name: &str,
    result: &str,
) -> Result<JobSummary, ApiError> {
    let s = job_named(state, caller, workspace, name).await?;
    if !RESULTS.contains(&result) || !has_results(s.job.status) {
        return Err(ApiError::OutputNotFound(format!(
            "job '{name}' has no result '{result}' (yet): `artifacts` and `analysis` exist once \
             it has finished"
        )));
    }
    Ok(s)
}

/// List a job's results
///
/// `artifacts` and `analysis` once the job has finished or is stopping; none before.
#[utoipa::path(get, path = "/apis/data-designer/v2/workspaces/{workspace}/jobs/create/{name}/results",
    operation_id = "platform_list_results", tag = "nemo-platform",
    params(("workspace" = String, Path, description = "Workspace"),
        ("name" = String, Path, description = "Job name")),
    responses(
        (status = 200, description = "The results", body = PlatformResultList),
        (status = 404, description = "No such job in the workspace, or another key's (`job_not_found`)", body = PlatformErrorBody),
        (status = 422, description = "A malformed workspace (`invalid_request`)", body = PlatformErrorBody),
    ))]
pub async fn list_results(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath((workspace, name)): ApiPath<(String, String)>,
) -> Result<Json<PlatformResultList>, ApiError> {
    let s = job_named(&state, &caller, &workspace, &name).await?;
    let data = if has_results(s.job.status) {
        RESULTS
            .iter()
            .map(|r| result_view(&workspace, &s, r))
            .collect()
    } else {
        Vec::new()
    };
    Ok(Json(PlatformResultList { data }))
}

/// A job's result
///
/// The client's probe before a download: `404` until the job has finished.
#[utoipa::path(get, path = "/apis/data-designer/v2/workspaces/{workspace}/jobs/create/{name}/results/{result}",
    operation_id = "platform_get_result", tag = "nemo-platform",
    params(("workspace" = String, Path, description = "Workspace"),
        ("name" = String, Path, description = "Job name"),
        ("result" = String, Path, description = "`artifacts` or `analysis`")),
    responses(
        (status = 200, description = "The result", body = PlatformResult),
        (status = 404, description = "No such job (`job_not_found`), or no such result yet (`output_not_found`)", body = PlatformErrorBody),
        (status = 422, description = "A malformed workspace (`invalid_request`)", body = PlatformErrorBody),
    ))]
pub async fn get_result(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath((workspace, name, result)): ApiPath<(String, String, String)>,
) -> Result<Json<PlatformResult>, ApiError> {
    let s = job_with_result(&state, &caller, &workspace, &name, &result).await?;
    Ok(Json(result_view(&workspace, &s, &result)))
}

/// Download a job's result
///
/// `artifacts`: a tar archive holding `artifacts/dataset/parquet-files/batch_00000.parquet`,
/// the completed records as `GET /v1/jobs/{id}/records?format=parquet` gives them.
/// `analysis`: the records' statistics as the client's `DatasetProfilerResults` (JSON).
#[utoipa::path(get, path = "/apis/data-designer/v2/workspaces/{workspace}/jobs/create/{name}/results/{result}/download",
    operation_id = "platform_download_result", tag = "nemo-platform",
    params(("workspace" = String, Path, description = "Workspace"),
        ("name" = String, Path, description = "Job name"),
        ("result" = String, Path, description = "`artifacts` or `analysis`")),
    responses(
        (status = 200, description = "A tar archive (`artifacts`) or a JSON object (`analysis`)", content_type = "application/x-tar", body = Vec<u8>),
        (status = 404, description = "No such job (`job_not_found`), or no such result yet (`output_not_found`)", body = PlatformErrorBody),
        (status = 422, description = "A malformed workspace (`invalid_request`)", body = PlatformErrorBody),
    ))]
pub async fn download_result(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath((workspace, name, result)): ApiPath<(String, String, String)>,
) -> Result<Response, ApiError> {
    let s = job_with_result(&state, &caller, &workspace, &name, &result).await?;
    if result == "analysis" {
        let analysis = state.jobs.analysis(s.job.id, caller.owner()).await?;
        return Ok(Json(profiler_results(&analysis.profile)).into_response());
    }
    let mut resp = dataset_archive(&state, &caller, &s.job, crate::jobs::ARTIFACTS_MEMBER).await?;
    resp.headers_mut().insert(
        header::CONTENT_DISPOSITION,
        HeaderValue::from_static("attachment; filename=\"artifacts.tar\""),
    );
    Ok(resp)
}
