//! Dataset endpoints: upload, list, get (with a preview), delete.
//!
//! An upload's body is the file's raw bytes, streamed to a temporary file as it arrives; the
//! route is exempt from `server.max_body_bytes` (it has `datasets.max_upload_bytes`) and from
//! `server.request_timeout_sec` (it has `datasets.upload_idle_timeout_sec` per chunk).

use axum::Json;
use axum::body::Body;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, Method, StatusCode};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::extract::{self, ApiPath, ApiQuery};
use super::jobs::page_limit;
use crate::auth::Caller;
use crate::datasets::rollout::RolloutFormat;
use crate::datasets::rollout::upload::RolloutOptions;
use crate::datasets::{
    DatasetColumn, DatasetFormat, DatasetId, DatasetMeta, DatasetQuery, DatasetSourceKind,
};
use crate::error::{ApiError, ErrorBody};
use crate::state::AppState;

pub(super) fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create_dataset, list_datasets))
        .routes(routes!(get_dataset, delete_dataset))
        // The upload reads its body as a stream with its own limit; nothing here buffers it.
        .layer(DefaultBodyLimit::disable())
}

/// Whether a request is an upload, exempt from `server.request_timeout_sec`.
pub(super) fn is_upload(method: &Method, path: &str) -> bool {
    method == Method::POST && path.trim_end_matches('/') == "/v1/datasets"
}

/// A stored dataset.
#[derive(Debug, Serialize, ToSchema)]
pub struct DatasetResponse {
    /// Dataset id (UUIDv7).
    #[schema(value_type = String, format = Uuid)]
    pub id: DatasetId,
    /// The file name it was uploaded (or imported) as; `seed_type: local` paths are matched
    /// against it.
    pub name: String,
    /// The path the file was read from, as the job configs that read it name it
    /// (`data/seed.csv`, `artifacts/x/batch_00000.parquet`), when the upload said; such a
    /// dataset is matched by this path, one without by its name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    pub format: DatasetFormat,
    /// Columns in order, with the type inferred over every row.
    pub columns: Vec<DatasetColumn>,
    pub num_rows: u64,
    /// Bytes of the source file.
    pub size_bytes: u64,
    /// Hex sha256 of the source file's bytes.
    pub sha256: String,
    pub source: DatasetSourceKind,
    pub created_at: DateTime<Utc>,
}

impl From<DatasetMeta> for DatasetResponse {
    fn from(m: DatasetMeta) -> Self {
        Self {
            path: crate::datasets::upload_path::of(&m).map(str::to_owned),
            id: m.id,
            name: m.name,
            format: m.format,
            columns: m.columns,
            num_rows: m.num_rows,
            size_bytes: m.size_bytes,
            sha256: m.sha256,
            source: m.source,
            created_at: m.created_at,
        }
    }
}

/// A dataset with its first rows.
#[derive(Debug, Serialize, ToSchema)]
pub struct DatasetDetailResponse {
    #[serde(flatten)]
    pub dataset: DatasetResponse,
    /// The first 10 rows, each an object keyed by column name.
    #[schema(value_type = Vec<Object>)]
    pub preview: Vec<Map<String, Value>>,
}

/// A page of datasets, newest first.
#[derive(Debug, Serialize, ToSchema)]
pub struct DatasetListResponse {
    pub datasets: Vec<DatasetResponse>,
    /// Pass as `cursor` for the next page; absent on the last page.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

/// Query of `POST /v1/datasets`.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct CreateDatasetQuery {
    /// The file's name (directories are dropped), e.g. `people.csv`.
    pub name: String,
    /// The path the file was read from, as job configs name it (`data/seed.csv`; for a
    /// glob's match, the glob's folder and the file's name). It must end in `name`.
    /// `seed_type: local` paths are then matched against it, so two folders' files of one
    /// name stay apart; without it the file is matched by its name. `synthgate submit`
    /// always sends it.
    pub path: Option<String>,
    /// `csv`, `jsonl` or `parquet`; by default from the name's extension (`.csv`, `.jsonl`,
    /// `.ndjson`, `.parquet`). `agent_rollout`: the body is a tar archive of a folder of agent
    /// trajectories, stored as the rows DataDesigner's `agent_rollout` seed reader derives from
    /// them (its 16 columns), for `agent_rollout` seeds with the same `rollout_format`, `path`,
    /// `file_pattern` and `recursive` to read; `path` is then the folder as the config names it
    /// (default: the format's, e.g. `~/.claude/projects`; required for `atif`).
    pub format: Option<String>,
    /// With `format=agent_rollout`: `atif`, `claude_code`, `codex`, `hermes_agent` or
    /// `pi_coding_agent`.
    pub rollout_format: Option<String>,
    /// With `format=agent_rollout`: the seed's `file_pattern` (default: the format's).
    pub file_pattern: Option<String>,
    /// With `format=agent_rollout`: the seed's `recursive` (default true).
    pub recursive: Option<bool>,
    /// With `format=agent_rollout`: the folder's absolute path on the client, which the rows'
    /// `source_path` values start with (default: `path`).
    pub root: Option<String>,
}

impl CreateDatasetQuery {
    /// The rollout options of a `format=agent_rollout` upload (`None`: another format).
    fn rollout(&self) -> Result<Option<RolloutOptions>, ApiError> {
        let is_rollout = self
            .format
            .as_deref()
            .is_some_and(|f| f.eq_ignore_ascii_case("agent_rollout"));
        if !is_rollout {
            if self.rollout_format.is_some() {
                return Err(ApiError::InvalidRequest(
                    "query parameter 'rollout_format' is for format=agent_rollout only".into(),
                ));
            }
            return Ok(None);
        }
        let names = || {
            RolloutFormat::ALL
                .iter()
                .map(|f| f.name())
                .collect::<Vec<_>>()
                .join(", ")
        };
        let format = match self.rollout_format.as_deref() {
            Some(name) => RolloutFormat::from_name(name).ok_or_else(|| {
                ApiError::InvalidRequest(format!(
                    "query parameter 'rollout_format': '{name}' is not one of {}",
                    names()
                ))
            })?,
            None => {
                return Err(ApiError::InvalidRequest(format!(
                    "query parameter 'rollout_format' is required with format=agent_rollout: one of {}",
                    names()
                )));
            }
        };
        let root = self
            .root
            .clone()
            .or_else(|| self.path.clone())
            .unwrap_or_default();
        Ok(Some(RolloutOptions {
            format,
            file_pattern: self.file_pattern.clone(),
            recursive: self.recursive.unwrap_or(true),
            root,
        }))
    }
}

/// Query of `GET /v1/datasets` (and the arguments of the MCP tool `list_datasets`).
#[derive(Debug, Deserialize, IntoParams, schemars::JsonSchema)]
#[into_params(parameter_in = Query)]
pub struct ListDatasetsQuery {
    /// Only datasets of this name.
    pub name: Option<String>,
    /// Only datasets whose file has this hex sha256.
    pub sha256: Option<String>,
    /// Only datasets uploaded from this path (normalized as uploads are).
    pub path: Option<String>,
    /// Page size (default 20, at most `limits.max_page_size`).
    #[param(minimum = 1)]
    #[schemars(range(min = 1))]
    pub limit: Option<u32>,
    /// `next_cursor` of the previous page.
    pub cursor: Option<String>,
}

pub(super) fn dataset_id(raw: &str) -> Result<DatasetId, ApiError> {
    raw.parse().map_err(|_| {
        ApiError::InvalidId(format!(
            "'{raw}' is not a valid dataset id (expected a UUID)"
        ))
    })
}

/// Upload a dataset
///
/// The body is the file's raw bytes (`curl --data-binary @people.csv`), CSV (header row),
/// JSONL or Parquet, streamed to disk and parsed; column types are inferred over every row.
/// Uploading a file the caller already has under the same name (same sha256) returns that
/// dataset with `200` and stores nothing.
#[utoipa::path(
    post, path = "/v1/datasets", tag = "datasets",
    params(CreateDatasetQuery),
    request_body(content = Vec<u8>, content_type = "application/octet-stream", description = "The file's bytes"),
    responses(
        (status = 201, description = "Stored", body = DatasetResponse),
        (status = 200, description = "The caller already has this file under this name: that dataset", body = DatasetResponse),
        (status = 403, description = "The key's datasets would hold more than `datasets.max_rows_per_key` rows or `datasets.max_bytes_per_key` bytes (`quota_exceeded`); nothing is stored", body = ErrorBody),
        (status = 408, description = "No byte arrived for `datasets.upload_idle_timeout_sec` (`request_timeout`)", body = ErrorBody),
        (status = 413, description = "Over `datasets.max_upload_bytes` (`dataset_too_large`); nothing is stored", body = ErrorBody),
        (status = 422, description = "A file that cannot be read, naming the row and column (`invalid_dataset`), an unknown format (`unsupported_dataset_format`), or a bad `name` or `path` (`invalid_request`); nothing is stored", body = ErrorBody),
        (status = 429, description = "This key holds `server.max_long_requests_per_key` long requests already (`too_many_long_requests`, with `Retry-After`)", body = ErrorBody),
        (status = 503, description = "`server.max_long_requests` uploads, event streams and exports are in progress (`server_busy`, with `Retry-After`)", body = ErrorBody),
    )
)]
pub async fn create_dataset(
    State(state): State<AppState>,
    caller: Caller,
    ApiQuery(q): ApiQuery<CreateDatasetQuery>,
    headers: HeaderMap,
    body: Body,
) -> Result<(StatusCode, Json<DatasetResponse>), ApiError> {
    let content_length = headers
        .get(axum::http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok());
    let rollout = q.rollout()?;
    let (meta, created) = state
        .datasets
        .upload(
            caller.owner(),
            &q.name,
            q.path.as_deref(),
            q.format.as_deref(),
            rollout,
            content_length,
            body.into_data_stream(),
        )
        .await?;
    let status = if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((status, Json(meta.into())))
}

/// List datasets
///
/// The caller's datasets, newest first.
#[utoipa::path(
    get, path = "/v1/datasets", tag = "datasets",
    params(ListDatasetsQuery),
    responses(
        (status = 200, description = "A page of datasets", body = DatasetListResponse),
        (status = 400, description = "A cursor this endpoint did not issue (`invalid_cursor`)", body = ErrorBody),
        (status = 422, description = "A bad `limit` (`invalid_request`)", body = ErrorBody),
    )
)]
pub async fn list_datasets(
    State(state): State<AppState>,
    caller: Caller,
    ApiQuery(q): ApiQuery<ListDatasetsQuery>,
) -> Result<Json<DatasetListResponse>, ApiError> {
    Ok(Json(datasets_page(&state, &caller, q).await?))
}

/// A page of the caller's datasets (`GET /v1/datasets` and the MCP tool `list_datasets`).
pub(super) async fn datasets_page(
    state: &AppState,
    caller: &Caller,
    q: ListDatasetsQuery,
) -> Result<DatasetListResponse, ApiError> {
    let limit = page_limit(q.limit, 20, state.config.limits.max_page_size)?;
    let before = match &q.cursor {
        Some(c) => Some(extract::decode_cursor("dataset", c)?.parse().map_err(|_| {
            ApiError::InvalidCursor(format!("'{c}' was not issued by this endpoint"))
        })?),
        None => None,
    };
    let query = DatasetQuery {
        name: q.name,
        sha256: q.sha256.map(|s| s.to_ascii_lowercase()),
        source_ref: q.path.map(|p| {
            crate::datasets::upload_path::source_ref(&crate::datasets::upload_path::normalize(&p))
        }),
        before,
        limit,
    };
    let page = state.datasets.list(caller.owner(), query).await?;
    let datasets: Vec<DatasetResponse> = page.items.into_iter().map(Into::into).collect();
    let next_cursor = page
        .more
        .then(|| {
            datasets
                .last()
                .map(|d| extract::encode_cursor("dataset", &d.id.to_string()))
        })
        .flatten();
    Ok(DatasetListResponse {
        datasets,
        next_cursor,
    })
}

/// Get a dataset
///
/// Its columns, size and hash, and a preview of its first 10 rows.
#[utoipa::path(
    get, path = "/v1/datasets/{id}", tag = "datasets",
    params(("id" = uuid::Uuid, Path, description = "Dataset id")),
    responses(
        (status = 200, description = "The dataset", body = DatasetDetailResponse),
        (status = 400, description = "Not a UUID (`invalid_id`)", body = ErrorBody),
        (status = 404, description = "No such dataset (`dataset_not_found`)", body = ErrorBody),
        (status = 422, description = "Its stored rows cannot be read: an earlier version stored values nested deeper than it reads back (`invalid_dataset`); delete it and import its file again", body = ErrorBody),
    )
)]
pub async fn get_dataset(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<DatasetDetailResponse>, ApiError> {
    let id = dataset_id(&id)?;
    Ok(Json(dataset_detail(&state, &caller, id).await?))
}

/// A dataset with its first rows (`GET /v1/datasets/{id}` and the MCP tool `get_dataset`).
pub(super) async fn dataset_detail(
    state: &AppState,
    caller: &Caller,
    id: DatasetId,
) -> Result<DatasetDetailResponse, ApiError> {
    let (meta, preview) = state.datasets.get(caller.owner(), id).await?;
    Ok(DatasetDetailResponse {
        dataset: meta.into(),
        preview,
    })
}

/// Delete a dataset
///
/// Refused while a queued or running job reads it.
#[utoipa::path(
    delete, path = "/v1/datasets/{id}", tag = "datasets",
    params(("id" = uuid::Uuid, Path, description = "Dataset id")),
    responses(
        (status = 204, description = "Deleted, with its rows"),
        (status = 400, description = "Not a UUID (`invalid_id`)", body = ErrorBody),
        (status = 404, description = "No such dataset (`dataset_not_found`)", body = ErrorBody),
        (status = 409, description = "Queued or running jobs read it; the message names them (`dataset_in_use`)", body = ErrorBody),
    )
)]
pub async fn delete_dataset(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath(id): ApiPath<String>,
) -> Result<StatusCode, ApiError> {
    let id = dataset_id(&id)?;
    state.datasets.delete(caller.owner(), id).await?;
    Ok(StatusCode::NO_CONTENT)
}
