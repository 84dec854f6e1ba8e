//! `ApiError`: the one error vocabulary at the HTTP edge, with stable codes.
//!
//! `status()` and `code()` are exhaustive matches with no `_` arm, so a new variant does not
//! compile until someone picks its status and code on purpose. Internal causes are logged once,
//! by the middleware in `api`, and never reach a response body.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use utoipa::ToSchema;

use crate::datasets::DatasetError;
use crate::domain::dataset::ConfigIssue;
use crate::store::StoreError;

/// Most problems listed in `details`: a config with thousands of errors gets a readable
/// answer of bounded size, not megabytes.
const MAX_DETAILS: usize = 100;

/// Everything a request can fail with.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// The body is not valid JSON (or not the expected shape).
    #[error("{0}")]
    InvalidJson(String),
    /// The body is not valid YAML.
    #[error("{0}")]
    InvalidYaml(String),
    /// The body (JSON or YAML) has an object with the same key twice; the message names it.
    #[error("{0}")]
    DuplicateKey(String),
    /// The `Content-Type` is not one the endpoint takes.
    #[error("{0}")]
    UnsupportedMediaType(String),
    /// A request field or parameter is wrong; the message names it.
    #[error("{0}")]
    InvalidRequest(String),
    /// The DataDesigner config has problems; the first one's code is the response code.
    #[error("{}", .0.first().map(|i| i.message.as_str()).unwrap_or("invalid config"))]
    InvalidConfig(Vec<ConfigIssue>),
    /// `num_records` is below 1 or above the configured maximum.
    #[error("{0}")]
    NumRecordsOutOfRange(String),
    /// The request holds text the database cannot store (a NUL character); the message names
    /// the field.
    #[error("{0}")]
    UnstorableValue(String),
    /// The job's `metadata` is over `limits.max_metadata_bytes` as JSON.
    #[error("{0}")]
    MetadataTooLarge(String),
    /// A pagination cursor that this server did not issue.
    #[error("invalid cursor: {0}")]
    InvalidCursor(String),
    /// A path id that is not a UUID.
    #[error("{0}")]
    InvalidId(String),
    /// No such job (or not visible to this caller).
    #[error("job {0} not found")]
    JobNotFound(String),
    /// No such record (or not visible to this caller).
    #[error("record {0} not found")]
    RecordNotFound(String),
    /// The record exists but kept no trace for the asked column.
    #[error("{0}")]
    TraceNotFound(String),
    /// The job's config has no `schema_transform` processor of that name.
    #[error("{0}")]
    OutputNotFound(String),
    /// The record exists but holds no stored image at that column and index.
    #[error("{0}")]
    MediaNotFound(String),
    /// The job already finished, so it cannot be cancelled.
    #[error("job {id} is already {status}")]
    JobFinished { id: String, status: &'static str },
    /// The job has not finished, so it cannot be deleted.
    #[error("job {id} is {status}: only a finished job can be deleted; cancel it first")]
    JobNotFinished { id: String, status: &'static str },
    /// A job of this name is in the workspace already (the NeMo Platform door, where jobs are
    /// addressed by name).
    #[error("a job named '{name}' is in workspace '{workspace}' already; choose another name")]
    JobNameTaken { name: String, workspace: String },
    /// The `Idempotency-Key` was used before for a different request.
    #[error("Idempotency-Key '{0}' was already used for a different request")]
    IdempotencyConflict(String),
    /// The body exceeds `server.max_body_bytes`.
    #[error("request body exceeds the limit of {0} bytes")]
    PayloadTooLarge(usize),
    /// No route matches the path.
    #[error("no route for {0}")]
    NotFound(String),
    /// The route exists but not for this method.
    #[error("method not allowed")]
    MethodNotAllowed,
    /// The request did not finish within `server.request_timeout_sec`.
    #[error("request timed out")]
    Timeout,
    /// The database is unreachable; retry later.
    #[error("service unavailable: the database is unreachable")]
    Unavailable(#[source] StoreError),
    /// An MCP provider the job's tools need cannot be reached, so its tool list cannot be
    /// checked; retry later.
    #[error("{0}")]
    McpUnavailable(String),
    /// No or an unknown API key on a `/v1` route while authentication is on.
    #[error("{0}")]
    Unauthorized(String),
    /// The key may not use a model or tool alias the job names.
    #[error("{0}")]
    Forbidden(String),
    /// The `Host` header names no host this server answers to (DNS rebinding protection,
    /// `server.allowed_hosts`).
    #[error("{0}")]
    HostNotAllowed(String),
    /// A browser sent the request from a page of another origin (`server.allowed_origins`).
    #[error("{0}")]
    OriginNotAllowed(String),
    /// The key's stored datasets would pass `datasets.max_rows_per_key` or
    /// `datasets.max_bytes_per_key`.
    #[error("{0}")]
    QuotaExceeded(String),
    /// `server.max_long_requests` uploads, event streams and exports are in progress already.
    #[error(
        "the server is serving its limit of {0} uploads, event streams and exports \
         (server.max_long_requests); retry shortly"
    )]
    ServerBusy(usize),
    /// This key has `server.max_long_requests_per_key` long requests in progress already.
    #[error(
        "this key has {0} uploads, event streams, exports or slowly arriving request bodies in \
         progress (server.max_long_requests_per_key); retry once one has ended"
    )]
    KeyBusy(usize),
    /// The key already has `limits.max_jobs_in_flight_per_key` jobs queued or running.
    #[error("{0}")]
    TooManyJobs(String),
    /// No such dataset (or not visible to this caller).
    #[error("dataset {0} not found")]
    DatasetNotFound(String),
    /// The dataset is read by live jobs, so it cannot be deleted; the message names them.
    #[error("{0}")]
    DatasetInUse(String),
    /// An upload over `datasets.max_upload_bytes`.
    #[error("the dataset file exceeds the limit of {0} bytes (datasets.max_upload_bytes)")]
    DatasetTooLarge(u64),
    /// A dataset file that cannot be read; the message names the row and column.
    #[error("{0}")]
    InvalidDataset(String),
    /// A dataset format that is neither given nor recognised from the file name.
    #[error("{0}")]
    UnsupportedDatasetFormat(String),
    /// A seed names a dataset the caller does not have; the message names the field and says
    /// how to upload it.
    #[error("{0}")]
    SeedDatasetNotFound(String),
    /// The database's disk is full: nothing of the request was stored.
    #[error(
        "the database's disk is full: nothing of this request was stored; retry once space \
         is freed"
    )]
    StorageFull,
    /// A bug or an unexpected failure; details are in the log only.
    #[error("internal error")]
    Internal(String),
}

impl ApiError {
    /// The HTTP status, chosen per variant.
    pub fn status(&self) -> StatusCode {
        match self {
            Self::InvalidJson(_) | Self::InvalidYaml(_) | Self::DuplicateKey(_) => {
                StatusCode::BAD_REQUEST
            }
            Self::UnsupportedMediaType(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            Self::InvalidRequest(_)
            | Self::InvalidConfig(_)
            | Self::NumRecordsOutOfRange(_)
            | Self::UnstorableValue(_)
            | Self::MetadataTooLarge(_)
            | Self::InvalidDataset(_)
            | Self::UnsupportedDatasetFormat(_)
            | Self::SeedDatasetNotFound(_) => StatusCode::UNPROCESSABLE_ENTITY,
            Self::InvalidCursor(_) | Self::InvalidId(_) => StatusCode::BAD_REQUEST,
            Self::JobNotFound(_)
            | Self::RecordNotFound(_)
            | Self::TraceNotFound(_)
            | Self::OutputNotFound(_)
            | Self::MediaNotFound(_)
            | Self::DatasetNotFound(_)
            | Self::NotFound(_) => StatusCode::NOT_FOUND,
            Self::JobFinished { .. }
            | Self::JobNotFinished { .. }
            | Self::JobNameTaken { .. }
            | Self::IdempotencyConflict(_)
            | Self::DatasetInUse(_) => StatusCode::CONFLICT,
            Self::PayloadTooLarge(_) | Self::DatasetTooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            Self::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            Self::Timeout => StatusCode::REQUEST_TIMEOUT,
            Self::Unavailable(_) | Self::McpUnavailable(_) | Self::ServerBusy(_) => {
                StatusCode::SERVICE_UNAVAILABLE
            }
            Self::Unauthorized(_) => StatusCode::UNAUTHORIZED,
            Self::Forbidden(_)
            | Self::HostNotAllowed(_)
            | Self::OriginNotAllowed(_)
            | Self::QuotaExceeded(_) => StatusCode::FORBIDDEN,
            Self::TooManyJobs(_) | Self::KeyBusy(_) => StatusCode::TOO_MANY_REQUESTS,
            Self::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
            Self::StorageFull => StatusCode::INSUFFICIENT_STORAGE,
        }
    }

    /// The stable snake_case code clients match on.
    pub fn code(&self) -> &'static str {
        match self {
            Self::InvalidJson(_) => "invalid_json",
            Self::InvalidYaml(_) => "invalid_yaml",
            Self::DuplicateKey(_) => "duplicate_key",
            Self::UnsupportedMediaType(_) => "unsupported_media_type",
            Self::InvalidRequest(_) => "invalid_request",
            Self::InvalidConfig(issues) => issues.first().map_or("invalid_config", |i| i.code),
            Self::NumRecordsOutOfRange(_) => "num_records_out_of_range",
            Self::UnstorableValue(_) => "unstorable_value",
            Self::MetadataTooLarge(_) => "metadata_too_large",
            Self::InvalidCursor(_) => "invalid_cursor",
            Self::InvalidId(_) => "invalid_id",
            Self::JobNotFound(_) => "job_not_found",
            Self::RecordNotFound(_) => "record_not_found",
            Self::TraceNotFound(_) => "trace_not_found",
            Self::OutputNotFound(_) => "output_not_found",
            Self::MediaNotFound(_) => "media_not_found",
            Self::JobFinished { .. } => "job_finished",
            Self::JobNotFinished { .. } => "job_not_finished",
            Self::JobNameTaken { .. } => "job_name_taken",
            Self::IdempotencyConflict(_) => "idempotency_key_reused",
            Self::PayloadTooLarge(_) => "payload_too_large",
            Self::NotFound(_) => "not_found",
            Self::MethodNotAllowed => "method_not_allowed",
            Self::Timeout => "request_timeout",
            Self::Unavailable(_) => "service_unavailable",
            Self::McpUnavailable(_) => "mcp_unavailable",
            Self::ServerBusy(_) => "server_busy",
            Self::KeyBusy(_) => "too_many_long_requests",
            Self::QuotaExceeded(_) => "quota_exceeded",
            Self::Unauthorized(_) => "unauthorized",
            Self::Forbidden(_) => "alias_not_allowed",
            Self::HostNotAllowed(_) => "host_not_allowed",
            Self::OriginNotAllowed(_) => "origin_not_allowed",
            Self::TooManyJobs(_) => "too_many_jobs",
            Self::DatasetNotFound(_) => "dataset_not_found",
            Self::DatasetInUse(_) => "dataset_in_use",
            Self::DatasetTooLarge(_) => "dataset_too_large",
            Self::InvalidDataset(_) => "invalid_dataset",
            Self::UnsupportedDatasetFormat(_) => "unsupported_dataset_format",
            Self::SeedDatasetNotFound(_) => "seed_dataset_not_found",
            Self::Internal(_) => "internal",
            Self::StorageFull => "storage_full",
        }
    }

    /// The envelope clients get: over HTTP as the response body, over MCP as a tool error's
    /// structured content.
    pub fn body(&self) -> ErrorBody {
        ErrorBody {
            error: ErrorObject {
                code: self.code().to_owned(),
                message: self.public_message(),
                details: self.details(),
            },
        }
    }

    /// The internal cause, for the log only (may include details not shown to clients).
    pub fn cause(&self) -> String {
        match self {
            Self::Unavailable(e) => e.to_string(),
            Self::Internal(c) => c.clone(),
            other => other.to_string(),
        }
    }

    /// The message for the body: the display text, except for 5xx where causes stay in the log.
    fn public_message(&self) -> String {
        self.to_string()
    }

    fn details(&self) -> Option<Vec<ErrorDetail>> {
        match self {
            Self::InvalidConfig(issues) => {
                let mut out: Vec<ErrorDetail> = issues
                    .iter()
                    .take(MAX_DETAILS)
                    .map(|i| ErrorDetail {
                        code: i.code.to_owned(),
                        column: i.column.clone(),
                        field: i.field.clone(),
                        message: i.message.clone(),
                    })
                    .collect();
                if issues.len() > MAX_DETAILS {
                    out.push(ErrorDetail {
                        code: "more_issues".into(),
                        column: None,
                        field: None,
                        message: format!(
                            "{} more problems are not listed; fix these first",
                            issues.len() - MAX_DETAILS
                        ),
                    });
                }
                Some(out)
            }
            _ => None,
        }
    }
}

impl From<DatasetError> for ApiError {
    fn from(e: DatasetError) -> Self {
        match e {
            DatasetError::NotFound(id) => Self::DatasetNotFound(id),
            DatasetError::InUse(msg) => Self::DatasetInUse(msg),
            DatasetError::TooLarge(max) => Self::DatasetTooLarge(max),
            DatasetError::Invalid(msg) => Self::InvalidDataset(msg),
            DatasetError::UnsupportedFormat(msg) => Self::UnsupportedDatasetFormat(msg),
            DatasetError::InvalidRequest(msg) => Self::InvalidRequest(msg),
            DatasetError::QuotaExceeded(msg) => Self::QuotaExceeded(msg),
            DatasetError::Stalled => Self::Timeout,
            DatasetError::Store(e) => e.into(),
            DatasetError::Internal(msg) => Self::Internal(msg),
        }
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::Db(
                sqlx::Error::PoolTimedOut | sqlx::Error::Io(_) | sqlx::Error::PoolClosed,
            ) => Self::Unavailable(e),
            e @ StoreError::UnreadableDataset { .. } => Self::InvalidDataset(e.to_string()),
            e if e.is_disk_full() => {
                tracing::error!(error = %e, "the database's disk is full");
                Self::StorageFull
            }
            other => Self::Internal(other.to_string()),
        }
    }
}

/// The error envelope every endpoint returns: `{"error": {...}}`.
#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorBody {
    /// The error.
    pub error: ErrorObject,
}

/// A stable code and a readable message.
#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorObject {
    /// Stable snake_case code, e.g. `job_not_found`, `dependency_cycle`.
    pub code: String,
    /// Readable on its own; names the field or column concerned.
    pub message: String,
    /// For config errors: every problem found, in column order.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub details: Option<Vec<ErrorDetail>>,
}

/// One problem of an invalid config.
#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorDetail {
    /// Stable code of this problem.
    pub code: String,
    /// The column, when the problem is in one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub column: Option<String>,
    /// The field path inside the column or config.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
    /// Readable on its own.
    pub message: String,
}

/// Marker put in response extensions so the logging middleware can log the cause once.
#[derive(Debug, Clone)]
pub struct LoggedError {
    /// Stable code.
    pub code: &'static str,
    /// The internal cause (may include details that are not shown to clients).
    pub cause: String,
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = self.status();
        let cause = self.cause();
        let mut resp = (status, Json(self.body())).into_response();
        if status == StatusCode::UNAUTHORIZED {
            resp.headers_mut().insert(
                axum::http::header::WWW_AUTHENTICATE,
                axum::http::HeaderValue::from_static("Bearer"),
            );
        }
        if matches!(self, Self::ServerBusy(_) | Self::KeyBusy(_)) {
            resp.headers_mut().insert(
                axum::http::header::RETRY_AFTER,
                axum::http::HeaderValue::from_static("1"),
            );
        }
        resp.extensions_mut().insert(LoggedError {
            code: self.code(),
            cause,
        });
        resp
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn internal_detail_never_reaches_the_body() {
        let e = ApiError::Internal("password=hunter2 in a stack".into());
        assert_eq!(e.status(), StatusCode::INTERNAL_SERVER_ERROR);
        assert_eq!(e.public_message(), "internal error");
    }

    #[test]
    fn config_error_takes_the_first_issue_code() {
        let e = ApiError::InvalidConfig(vec![ConfigIssue {
            code: "dependency_cycle",
            column: Some("a".into()),
            field: Some("expr".into()),
            message: "column 'a': cycle a -> b -> a".into(),
        }]);
        assert_eq!(e.code(), "dependency_cycle");
        assert_eq!(e.status(), StatusCode::UNPROCESSABLE_ENTITY);
        assert_eq!(e.details().unwrap().len(), 1);
    }

    /// Issue 49: a full SQLite disk answered `500 internal`. A real `SQLITE_FULL` (a database
    /// capped at a few pages) is `507 storage_full`, saying nothing was stored.
    #[tokio::test]
    async fn a_full_database_disk_is_storage_full() {
        use sqlx::Connection as _;
        let mut db = sqlx::SqliteConnection::connect("sqlite::memory:")
            .await
            .unwrap();
        sqlx::query("create table t (b blob)")
            .execute(&mut db)
            .await
            .unwrap();
        sqlx::query("pragma max_page_count = 4")
            .execute(&mut db)
            .await
            .unwrap();
        let full = sqlx::query("insert into t values (zeroblob(100000))")
            .execute(&mut db)
            .await
            .unwrap_err();
        let e = StoreError::from(full);
        assert!(e.is_disk_full(), "{e}");
        let api = ApiError::from(e);
        assert_eq!(api.status(), StatusCode::INSUFFICIENT_STORAGE);
        assert_eq!(api.code(), "storage_full");
        assert!(
            api.public_message()
                .contains("nothing of this request was stored")
        );
    }
}
