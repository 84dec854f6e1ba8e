//! A Data Designer job's results: `GET /v1/data-designer/jobs/{id}/results/dataset` (the
//! existence probe the client makes before a download) and `.../results/dataset/download`,
//! the tar archive `load_dataset()` extracts: one `dataset/part-0.parquet`, our streamed Parquet
//! export of the completed records.
//!
//! A tar header holds its file's size, so the Parquet export is streamed to a temporary file
//! first (disk, not memory: a job of a million records is not held in memory), then the archive
//! is streamed from it: the header, the file, the padding to 512 bytes, the end-of-archive
//! blocks. The `tar` crate builds the header.

use axum::Json;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use futures::StreamExt as _;
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt as _;

use crate::api::extract::{self, ApiPath};
use crate::auth::Caller;
use crate::domain::JobStatus;
use crate::error::{ApiError, ErrorBody};
use crate::jobs::ExportFormat;
use crate::state::AppState;

/// The archive member the client reads (`dataset/`, as a directory of Parquet files).
const MEMBER: &str = "dataset/part-0.parquet";

/// Whether a job has a dataset to give: it finished, or is stopping.
fn has_results(status: JobStatus) -> bool {
    matches!(
        status,
        JobStatus::Completed | JobStatus::Cancelled | JobStatus::Cancelling | JobStatus::Failed
    )
}

/// A Data Designer job's dataset result
///
/// The client's existence probe before a download: `404` until the job has finished.
#[utoipa::path(get, path = "/v1/data-designer/jobs/{id}/results/dataset", tag = "data-designer",
    params(("id" = uuid::Uuid, Path, description = "Job id")),
    responses(
        (status = 200, description = "The result (`PlatformJobResult`)", body = Object),
        (status = 400, description = "Not a UUID (`invalid_id`)", body = ErrorBody),
        (status = 404, description = "No such job, another key's (`job_not_found`), or no result yet (`output_not_found`)", body = ErrorBody),
    ))]
pub async fn dataset_result(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<Value>, ApiError> {
    let id = extract::job_id(&id)?;
    let job = state.jobs.get(id, caller.owner()).await?;
    if !has_results(job.status) {
        return Err(ApiError::OutputNotFound("dataset".into()));
    }
    Ok(Json(json!({
        "job_id": job.id.to_string(),
        "result_name": "dataset",
        "namespace": "default",
        "artifact_storage_type": "synthgate",
        "artifact_url": format!("/v1/data-designer/jobs/{}/results/dataset/download", job.id),
        "created_at": job.created_at.to_rfc3339(),
        "updated_at": job.updated_at.to_rfc3339(),
    })))
}

/// Download a Data Designer job's dataset
///
/// A tar archive holding `dataset/part-0.parquet`: the completed records, as
/// `GET /v1/jobs/{id}/records?format=parquet` gives them.
#[utoipa::path(get, path = "/v1/data-designer/jobs/{id}/results/dataset/download", tag = "data-designer",
    params(("id" = uuid::Uuid, Path, description = "Job id")),
    responses(
        (status = 200, description = "A tar archive", content_type = "application/x-tar", body = Vec<u8>),
        (status = 400, description = "Not a UUID (`invalid_id`)", body = ErrorBody),
        (status = 404, description = "No such job, another key's (`job_not_found`), or no result yet (`output_not_found`)", body = ErrorBody),
    ))]
pub async fn download_dataset(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath(id): ApiPath<String>,
) -> Result<Response, ApiError> {
    let id = extract::job_id(&id)?;
    let job = state.jobs.get(id, caller.owner()).await?;
    if !has_results(job.status) {
        return Err(ApiError::OutputNotFound("dataset".into()));
    }
    let parquet = state
        .jobs
        .export(id, caller.owner(), ExportFormat::Parquet, false)
        .await?;
    let mut parquet = std::pin::pin!(parquet);
    let io = |e: std::io::Error| ApiError::Internal(format!("spooling the dataset: {e}"));
    let spool = tempfile::NamedTempFile::new().map_err(io)?;
    let (file, path) = spool.into_parts();
    let mut out = tokio::fs::File::from_std(file);
    let mut size = 0u64;
    while let Some(chunk) = parquet.next().await {
        let chunk = chunk.map_err(io)?;
        size += chunk.len() as u64;
        out.write_all(&chunk).await.map_err(io)?;
    }
    out.flush().await.map_err(io)?;
    drop(out);

    let mut head = tar::Header::new_ustar();
    head.set_path(MEMBER).map_err(io)?;
    head.set_size(size);
    head.set_mode(0o644);
    head.set_mtime(job.updated_at.timestamp().max(0) as u64);
    head.set_entry_type(tar::EntryType::Regular);
    head.set_cksum();
    let header = Bytes::copy_from_slice(head.as_bytes());
    // The file's last block padded to 512 bytes, then two zero blocks end the archive.
    let pad = usize::try_from((512 - size % 512) % 512).unwrap_or(0);
    let tail = Bytes::from(vec![0u8; pad + 1024]);
    let file = tokio::fs::File::open(&path).await.map_err(io)?;
    // The path (and so the file) is removed when the body, which owns it, is dropped.
    let body = tokio_util::io::ReaderStream::new(file).map(move |chunk| {
        let _ = &path;
        chunk
    });
    let stream = futures::stream::once(async move { Ok(header) })
        .chain(body)
        .chain(futures::stream::once(async move { Ok(tail) }));
    let mut resp = Body::from_stream(stream).into_response();
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/x-tar"),
    );
    Ok(resp)
}
