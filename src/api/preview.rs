//! `POST /v1/preview`: a small synchronous run that returns records with their traces and
//! stores nothing, for trying a config before submitting a job.

use axum::Json;
use axum::extract::State;
use axum::http::HeaderMap;
use bytes::Bytes;
use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::dto::{ColumnTrace, CreateJobQuery, CreateJobRequest};
use super::extract::{self, ApiQuery};
use super::jobs::submit_request;
use crate::auth::Caller;
use crate::domain::RecordStatus;
use crate::domain::record::{RecordError, RecordOutcome};
use crate::error::{ApiError, ErrorBody};
use crate::jobs::Preview;
use crate::state::AppState;

pub(super) fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(create_preview))
}

/// A preview's records.
#[derive(Debug, Serialize, ToSchema)]
pub struct PreviewResponse {
    /// Columns of a dataset row, in order.
    pub columns: Vec<String>,
    /// The seed used (given or drawn), to reproduce the preview as a job.
    pub seed: u64,
    /// The records, by index: with `record_selection`, the accepted candidates.
    pub records: Vec<PreviewRecord>,
    /// With `record_selection`: the five counts of the candidates the preview generated (at
    /// most 100, or the config's smaller budget). A preview whose budget ran out returns the
    /// records it accepted, whatever `on_exhausted` says.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub selection: Option<crate::domain::selection::SelectionCounts>,
}

/// One previewed record.
#[derive(Debug, Serialize, ToSchema)]
pub struct PreviewRecord {
    /// Position, from 0.
    pub index: u32,
    /// `completed` or `failed`.
    pub status: RecordStatus,
    /// Column values; on failure those generated before the error.
    #[schema(value_type = Option<Object>)]
    pub values: Option<Value>,
    /// Why it failed.
    pub error: Option<RecordError>,
    /// Traces of LLM columns that keep one.
    pub traces: Vec<ColumnTrace>,
}

/// Preview a config
///
/// Generates up to 10 records synchronously, LLM columns included, and returns them with
/// their traces. Nothing is stored. Same body as `POST /v1/jobs`: JSON, or a DataDesigner YAML
/// config file (`Content-Type: application/yaml`) with `?num_records=`.
#[utoipa::path(
    post, path = "/v1/preview", tag = "jobs",
    params(CreateJobQuery),
    request_body(content(
        (CreateJobRequest = "application/json"),
        (Object = "application/yaml"),
    )),
    responses(
        (status = 200, description = "The generated records", body = PreviewResponse),
        (status = 400, description = "Malformed JSON or YAML (`invalid_json`, `invalid_yaml`)", body = ErrorBody),
        (status = 403, description = "The API key may not use a model or tool alias the config names (`alias_not_allowed`)", body = ErrorBody),
        (status = 413, description = "Body too large (`payload_too_large`)", body = ErrorBody),
        (status = 415, description = "Content-Type is neither JSON nor YAML (`unsupported_media_type`)", body = ErrorBody),
        (status = 422, description = "Invalid request or config (`num_records_out_of_range` above 10, config codes)", body = ErrorBody),
        (status = 503, description = "An MCP provider whose tools the columns use is unreachable (`mcp_unavailable`)", body = ErrorBody),
    )
)]
pub async fn create_preview(
    State(state): State<AppState>,
    caller: Caller,
    ApiQuery(query): ApiQuery<CreateJobQuery>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Json<PreviewResponse>, ApiError> {
    // A pasted or uploaded DataDesigner file is YAML more often than not (the web UI sends it
    // as it is), so preview reads what submit reads.
    let format = extract::body_format(&headers)?;
    let value = state
        .jobs
        .cpu()
        .run(|| extract::decode_body(format, &body))
        .await?;
    let req = submit_request(format, value, query)?;
    let preview = state.jobs.preview(req, &caller).await?;
    Ok(Json(preview_response(preview)))
}

/// A preview as the API shows it (`POST /v1/preview` and the MCP tool `preview_dataset`).
pub(super) fn preview_response(preview: Preview) -> PreviewResponse {
    let records = preview
        .records
        .into_iter()
        .enumerate()
        .map(|(i, g)| {
            let (status, values, error) = match g.outcome {
                RecordOutcome::Completed { values } => {
                    (RecordStatus::Completed, Some(values), None)
                }
                RecordOutcome::Failed { values, error } => {
                    (RecordStatus::Failed, values, Some(error))
                }
            };
            PreviewRecord {
                index: i as u32,
                status,
                values,
                error,
                traces: g
                    .traces
                    .into_iter()
                    .map(|t| ColumnTrace {
                        column: t.column,
                        messages: t.messages,
                    })
                    .collect(),
            }
        })
        .collect();
    PreviewResponse {
        columns: preview.columns,
        seed: preview.seed,
        records,
        selection: preview.selection,
    }
}
