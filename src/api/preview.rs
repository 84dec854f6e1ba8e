//! `POST /v1/preview`: a small synchronous run that returns records with their traces and
//! stores nothing, for trying a config before submitting a job.

use axum::Json;
use axum::extract::State;
use axum::http::HeaderMap;
use bytes::Bytes;
use serde::Serialize;
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::dto::{ColumnTrace, CreateJobQuery, CreateJobRequest};
use super::extract::{self, BodyFormat};
use super::jobs::submit_request;
use crate::auth::Caller;
use crate::domain::RecordStatus;
use crate::domain::record::{RecordError, RecordOutcome};
use crate::error::{ApiError, ErrorBody};
use crate::generate::LlmRuntime;
use crate::mcp::CallScope;
use crate::state::AppState;

/// The most records one preview may ask for.
pub const MAX_PREVIEW_RECORDS: u32 = 10;

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
    /// The records, by index.
    pub records: Vec<PreviewRecord>,
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
/// their traces. Nothing is stored. Same body as `POST /v1/jobs` (JSON only).
#[utoipa::path(
    post, path = "/v1/preview", tag = "jobs",
    request_body = CreateJobRequest,
    responses(
        (status = 200, description = "The generated records", body = PreviewResponse),
        (status = 400, description = "Malformed JSON (`invalid_json`)", body = ErrorBody),
        (status = 403, description = "The API key may not use a model or tool alias the config names (`alias_not_allowed`)", body = ErrorBody),
        (status = 413, description = "Body too large (`payload_too_large`)", body = ErrorBody),
        (status = 415, description = "Content-Type is not JSON (`unsupported_media_type`)", body = ErrorBody),
        (status = 422, description = "Invalid request or config (`num_records_out_of_range` above 10, config codes)", body = ErrorBody),
        (status = 503, description = "An MCP provider whose tools the columns use is unreachable (`mcp_unavailable`)", body = ErrorBody),
    )
)]
pub async fn create_preview(
    State(state): State<AppState>,
    caller: Caller,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Json<PreviewResponse>, ApiError> {
    if extract::body_format(&headers)? != BodyFormat::Json {
        return Err(ApiError::UnsupportedMediaType(
            "preview takes a JSON body: {\"config\", \"num_records\", ...}".into(),
        ));
    }
    let cpu = state.jobs.cpu();
    let value = cpu
        .run(|| extract::decode_body(BodyFormat::Json, &body))
        .await?;
    let no_query = CreateJobQuery {
        num_records: None,
        seed: None,
    };
    let req = submit_request(BodyFormat::Json, value, no_query)?;
    let v = cpu
        .run(|| state.jobs.validate(&req, MAX_PREVIEW_RECORDS))
        .await?;
    crate::jobs::check_caller(&v.compiled, &caller)?;
    state.jobs.check_tools(&v.compiled).await?;
    // One scope per preview: its `per_job` MCP sessions live as long as the request.
    let preview_id = uuid::Uuid::new_v4();
    // Cancelled when the client goes away (the handler future is dropped).
    let cancel = CancellationToken::new();
    let _guard = cancel.clone().drop_guard();
    let rc = &v.compiled.run_config;
    let rt = LlmRuntime {
        chat: state.llm.as_ref(),
        models: &v.compiled.models,
        cancel: &cancel,
        save_all_traces: rc.debug_override_save_all_column_traces,
        max_restarts: rc.max_conversation_restarts,
        max_corrections: rc.max_conversation_correction_steps,
        tools: Some(&state.tools),
        max_prompt_chars: state.config.limits.max_prompt_chars,
        tool_configs: &v.compiled.tools,
        scope: None,
        cpu,
    };
    let plan = &v.compiled.plan;
    let pool = state.tools.pool();
    let runs = (0..v.num_records).map(|i| {
        let record = uuid::Uuid::new_v4();
        let rt = LlmRuntime {
            scope: Some(CallScope {
                job: preview_id,
                record,
            }),
            ..rt
        };
        async move {
            let g = plan.generate_with(u64::from(i), &rt).await;
            pool.release_record(record);
            g
        }
    });
    let generated = futures::future::join_all(runs).await;
    pool.release_job(preview_id);
    let records = generated
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
    Ok(Json(PreviewResponse {
        columns: plan.output_columns().to_vec(),
        seed: v.seed,
        records,
    }))
}
