//! Per-job derived views: the datasets of a job's `schema_transform` processors, and the
//! analysis of its dataset (column statistics and judge-score profiles).

use axum::Json;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::Response;
use serde::Deserialize;
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::downloads::{Download, export_response};
use super::extract::{self, ApiPath, ApiQuery};
use super::records::{content_type, extension};
use crate::auth::Caller;
use crate::error::{ApiError, ErrorBody};
use crate::jobs::{DatasetAnalysis, ExportFormat};
use crate::state::AppState;

pub(super) fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(get_job_output))
        .routes(routes!(get_job_analysis))
}

/// The streaming route, kept apart so the request timeout does not cut long downloads.
pub(super) fn is_streaming(path: &str) -> bool {
    path.starts_with("/v1/jobs/") && path.contains("/outputs/")
}

/// Format of a processor dataset.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum OutputFormat {
    /// One JSON object per line (default).
    #[default]
    Jsonl,
    /// CSV with the template's keys as header; nested values as JSON text.
    Csv,
    /// Parquet with the template's keys as text columns; nested values as JSON text.
    Parquet,
}

/// Query of `GET /v1/jobs/{id}/outputs/{name}`.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct OutputQuery {
    /// `jsonl` (default), `csv` or `parquet`.
    pub format: Option<OutputFormat>,
}

/// Export a processor's dataset
///
/// The second dataset a `schema_transform` processor writes (DataDesigner's
/// `processors-files/{name}/`): one row per completed record, by index, each string of the
/// processor's template rendered with Jinja over that record's row. Streamed like the
/// records export; rendered from the stored rows as it streams.
#[utoipa::path(
    get, path = "/v1/jobs/{id}/outputs/{name}", tag = "records",
    params(
        ("id" = uuid::Uuid, Path, description = "Job id"),
        ("name" = String, Path, description = "The schema_transform processor's name"),
        OutputQuery,
    ),
    responses(
        (status = 200, description = "The processor's dataset",
            content(
                (String = "application/x-ndjson"),
                (String = "text/csv"),
                (Vec<u8> = "application/vnd.apache.parquet"),
            )),
        (status = 400, description = "Bad id (`invalid_id`)", body = ErrorBody),
        (status = 404, description = "No such job (`job_not_found`), or no schema_transform processor of that name (`output_not_found`)", body = ErrorBody),
        (status = 422, description = "Bad query parameter (`invalid_request`)", body = ErrorBody),
    )
)]
pub async fn get_job_output(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath((id, name)): ApiPath<(String, String)>,
    ApiQuery(q): ApiQuery<OutputQuery>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let id = extract::job_id(&id)?;
    let format = match q.format.unwrap_or_default() {
        OutputFormat::Jsonl => ExportFormat::Jsonl,
        OutputFormat::Csv => ExportFormat::Csv,
        OutputFormat::Parquet => ExportFormat::Parquet,
    };
    let body = state
        .jobs
        .export_output(id, caller.owner(), &name, format)
        .await?;
    let filename = format!("{id}-{name}.{}", extension(format));
    let download = Download {
        content_type: content_type(format),
        filename: &filename,
    };
    export_response(&state, body, download, &headers).await
}

/// Analyse a job's dataset
///
/// DataDesigner's dataset profile of the completed records as stored now: per-column
/// statistics (nulls, distinct values, dtype, numerical or categorical distribution), and per
/// judge-score profiler the score distributions of each `llm-judge` column. The profiler's
/// LLM-written summaries are not produced (`summaries` is `null`).
#[utoipa::path(
    get, path = "/v1/jobs/{id}/analysis", tag = "jobs",
    params(("id" = uuid::Uuid, Path, description = "Job id")),
    responses(
        (status = 200, description = "The analysis", body = DatasetAnalysis),
        (status = 400, description = "Bad id (`invalid_id`)", body = ErrorBody),
        (status = 404, description = "No such job (`job_not_found`)", body = ErrorBody),
    )
)]
pub async fn get_job_analysis(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<DatasetAnalysis>, ApiError> {
    let id = extract::job_id(&id)?;
    Ok(Json(state.jobs.analysis(id, caller.owner()).await?))
}
