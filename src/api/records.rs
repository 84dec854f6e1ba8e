//! Record endpoints: a job's records (paged JSON, or the whole dataset streamed as
//! JSONL/CSV/Parquet)
//! and one record by id.

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, header};
use axum::response::{IntoResponse, Response};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::downloads::{Download, export_response};
use super::dto::{
    ColumnTrace, ListRecordsQuery, RecordListResponse, RecordResponse, RecordsFormat, TraceQuery,
    TraceResponse,
};
use super::extract::{self, ApiPath, ApiQuery};
use super::jobs::page_limit;
use crate::auth::Caller;
use crate::domain::{JobId, RecordId, RecordStatus};
use crate::error::{ApiError, ErrorBody};
use crate::jobs::{ExportFormat, ExportRecords, RecordsOf};
use crate::state::AppState;

pub(super) fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_job_records))
        .routes(routes!(get_record))
        .routes(routes!(get_record_trace))
        .routes(routes!(get_record_media))
}

/// The streaming routes, kept apart so the request timeout does not cut long downloads.
pub(super) fn is_streaming(path: &str, query: Option<&str>) -> bool {
    path.ends_with("/events")
        || (path.ends_with("/records")
            && query.is_some_and(|q| {
                q.contains("format=jsonl")
                    || q.contains("format=csv")
                    || q.contains("format=parquet")
            }))
}

/// List a job's records, or export its dataset
///
/// `format=json` (default) returns a page of records with status, values and errors, ordered by
/// index. A record is listed once it has a result: `completed` or `failed` (records pending, in
/// progress or cancelled are counts on the job; `status` takes `completed` or `failed`). `format=jsonl`, `format=csv` and `format=parquet` stream the whole dataset (the
/// values of completed records, by index) without buffering it. Parquet is written one row
/// group per chunk of records, its columns typed from the config: `INT64`, `DOUBLE`,
/// `BOOLEAN`, or UTF8 text (nested values as JSON text).
#[utoipa::path(
    get, path = "/v1/jobs/{id}/records", tag = "records",
    params(("id" = uuid::Uuid, Path, description = "Job id"), ListRecordsQuery),
    responses(
        (status = 200, description = "A page of records (json), or the dataset (jsonl, csv, parquet)",
            content(
                (RecordListResponse = "application/json"),
                (String = "application/x-ndjson"),
                (String = "text/csv"),
                (Vec<u8> = "application/vnd.apache.parquet"),
            )),
        (status = 400, description = "Bad id or cursor (`invalid_id`, `invalid_cursor`)", body = ErrorBody),
        (status = 404, description = "No such job (`job_not_found`)", body = ErrorBody),
        (status = 422, description = "Bad query parameter (`invalid_request`)", body = ErrorBody),
    )
)]
pub async fn list_job_records(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath(id): ApiPath<String>,
    ApiQuery(q): ApiQuery<ListRecordsQuery>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let id = extract::job_id(&id)?;
    let format = q.format.unwrap_or_default();
    let traces = q.include_traces == Some(true);
    if format != RecordsFormat::Json && (q.cursor.is_some() || q.limit.is_some()) {
        return Err(ApiError::InvalidRequest(
            "'cursor' and 'limit' apply to format=json only; exports stream every record".into(),
        ));
    }
    if format != RecordsFormat::Json && q.selection.is_some() {
        return Err(ApiError::InvalidRequest(
            "'selection' applies to format=json only; an export holds the dataset (a \
             record_selection job's accepted records) or, with status=failed, its error file"
                .into(),
        ));
    }
    let records = match (format, q.status) {
        (RecordsFormat::Json, _) | (_, None | Some(RecordStatus::Completed)) => {
            ExportRecords::Completed
        }
        (_, Some(RecordStatus::Failed)) => ExportRecords::Failed,
        (_, Some(other)) => {
            return Err(ApiError::InvalidRequest(format!(
                "status: an export holds completed records (the dataset) or failed ones (the \
                 error file), not {}",
                other.as_str()
            )));
        }
    };
    let export = match format {
        RecordsFormat::Json => {
            let which = RecordsOf {
                status: q.status,
                selection: q.selection,
            };
            let page = records_page(&state, &caller, id, q.cursor, q.limit, which, traces);
            return Ok(Json(page.await?).into_response());
        }
        RecordsFormat::Jsonl => ExportFormat::Jsonl,
        RecordsFormat::Csv => ExportFormat::Csv,
        RecordsFormat::Parquet => ExportFormat::Parquet,
    };
    let body = state
        .jobs
        .export(id, caller.owner(), export, traces, records)
        .await?;
    let stem = match records {
        ExportRecords::Completed => id.to_string(),
        ExportRecords::Failed => format!("{id}-errors"),
    };
    let filename = format!("{stem}.{}", extension(export));
    let download = Download {
        content_type: content_type(export),
        filename: &filename,
    };
    export_response(&state, body, download, &headers).await
}

/// The media type of an export format.
pub(super) fn content_type(format: ExportFormat) -> &'static str {
    match format {
        ExportFormat::Jsonl => "application/x-ndjson",
        ExportFormat::Csv => "text/csv; charset=utf-8",
        ExportFormat::Parquet => PARQUET_MIME,
    }
}

/// The file extension of an export format.
pub(super) fn extension(format: ExportFormat) -> &'static str {
    match format {
        ExportFormat::Jsonl => "jsonl",
        ExportFormat::Csv => "csv",
        ExportFormat::Parquet => "parquet",
    }
}

/// A page of a job's records by index (`GET /v1/jobs/{id}/records` as JSON, and the MCP tool
/// `get_records`).
pub(super) async fn records_page(
    state: &AppState,
    caller: &Caller,
    id: JobId,
    cursor: Option<String>,
    limit: Option<u32>,
    which: RecordsOf,
    traces: bool,
) -> Result<RecordListResponse, ApiError> {
    if let Some(status) = which.status
        && !matches!(status, RecordStatus::Completed | RecordStatus::Failed)
    {
        return Err(ApiError::InvalidRequest(format!(
            "status: a record is listed once it has a result (completed or failed); {} \
             records have none yet, and are counted in the job's `counts`",
            status.as_str()
        )));
    }
    let limit = page_limit(limit, 100, state.config.limits.max_page_size)?;
    let after = match &cursor {
        Some(c) => Some(
            extract::decode_cursor("rec", c)?
                .parse::<u32>()
                .map_err(|_| {
                    ApiError::InvalidCursor(format!("'{c}' was not issued by this endpoint"))
                })?,
        ),
        None => None,
    };
    let page = state
        .jobs
        .records(id, caller.owner(), after, which, limit, traces)
        .await?;
    let next_cursor = page
        .more
        .then(|| {
            page.items
                .last()
                .map(|r| extract::encode_cursor("rec", &r.index.to_string()))
        })
        .flatten();
    let records = page.items.into_iter().map(RecordResponse::from).collect();
    Ok(RecordListResponse {
        records,
        next_cursor,
    })
}

/// Get a record
///
/// Its values, status, attempts, and error if it failed.
#[utoipa::path(
    get, path = "/v1/records/{id}", tag = "records",
    params(("id" = uuid::Uuid, Path, description = "Record id")),
    responses(
        (status = 200, description = "The record", body = RecordResponse),
        (status = 400, description = "Not a UUID (`invalid_id`)", body = ErrorBody),
        (status = 404, description = "No such record (`record_not_found`)", body = ErrorBody),
    )
)]
pub async fn get_record(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<RecordResponse>, ApiError> {
    let id = extract::record_id(&id)?;
    Ok(Json(state.jobs.record(id, caller.owner()).await?.into()))
}

/// Get a record's message traces
///
/// The ordered messages of each LLM column's final attempt (`system`, `user`, `assistant` with
/// `tool_calls`/`reasoning_content`, `tool` with `tool_call_id`), for columns with `with_trace`
/// or jobs with `run_config.debug_override_save_all_column_traces`. `?column=` selects one.
#[utoipa::path(
    get, path = "/v1/records/{id}/trace", tag = "records",
    params(("id" = uuid::Uuid, Path, description = "Record id"), TraceQuery),
    responses(
        (status = 200, description = "The traces, by column", body = TraceResponse),
        (status = 400, description = "Not a UUID (`invalid_id`)", body = ErrorBody),
        (status = 404, description = "No such record (`record_not_found`), or no trace for that column (`trace_not_found`)", body = ErrorBody),
        (status = 422, description = "Bad query parameter (`invalid_request`)", body = ErrorBody),
    )
)]
pub async fn get_record_trace(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath(id): ApiPath<String>,
    ApiQuery(q): ApiQuery<TraceQuery>,
) -> Result<Json<TraceResponse>, ApiError> {
    let id = extract::record_id(&id)?;
    Ok(Json(
        record_traces(&state, &caller, id, q.column.as_deref()).await?,
    ))
}

/// A record's traces (`GET /v1/records/{id}/trace` and the MCP tool `get_record_trace`).
pub(super) async fn record_traces(
    state: &AppState,
    caller: &Caller,
    id: RecordId,
    column: Option<&str>,
) -> Result<TraceResponse, ApiError> {
    let rows = state.jobs.traces(id, caller.owner(), column).await?;
    Ok(TraceResponse {
        record_id: id,
        traces: rows
            .into_iter()
            .map(|t| ColumnTrace {
                column: t.column,
                messages: t.messages,
            })
            .collect(),
    })
}

/// Get an image a record's `image` column generated
///
/// The bytes, with their content type. A record's value holds a reference to each image
/// (`{"media_id", "mime_type", "url"}`) instead of the image itself.
#[utoipa::path(
    get, path = "/v1/records/{id}/media/{column}/{index}", tag = "records",
    params(
        ("id" = uuid::Uuid, Path, description = "Record id"),
        ("column" = String, Path, description = "The image column"),
        ("index" = u32, Path, description = "Position in the column's list of images"),
    ),
    responses(
        (status = 200, description = "The image", content_type = "image/*", body = Vec<u8>),
        (status = 400, description = "Not a UUID (`invalid_id`)", body = ErrorBody),
        (status = 404, description = "No such record (`record_not_found`) or image (`media_not_found`)", body = ErrorBody),
    )
)]
pub async fn get_record_media(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath((id, column, index)): ApiPath<(String, String, u32)>,
) -> Result<Response, ApiError> {
    let id = extract::record_id(&id)?;
    let (mime, data) = state.jobs.media(id, caller.owner(), &column, index).await?;
    // The bytes and their type come from a model, which a prompt can steer: an SVG or a type
    // a browser would sniff as HTML must not run script in this origin when opened directly.
    Ok((
        [
            (header::CONTENT_TYPE, mime),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff".to_owned()),
            (
                header::CONTENT_SECURITY_POLICY,
                "default-src 'none'; style-src 'unsafe-inline'; sandbox".to_owned(),
            ),
        ],
        data,
    )
        .into_response())
}

/// Parquet's media type (registered with IANA in 2024).
pub(super) const PARQUET_MIME: &str = "application/vnd.apache.parquet";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streaming_routes_are_recognized() {
        assert!(is_streaming("/v1/jobs/x/events", None));
        assert!(is_streaming("/v1/jobs/x/records", Some("format=csv")));
        assert!(is_streaming("/v1/jobs/x/records", Some("format=parquet")));
        assert!(!is_streaming("/v1/jobs/x/records", Some("limit=5")));
    }
}
