//! [`DatasetError`]: what dataset operations fail with, in the service's own terms. The HTTP
//! edge maps each kind to its status and stable code (`From<DatasetError> for ApiError` in
//! [`crate::error`]), so nothing here knows about HTTP.

use super::import::ImportError;
use crate::store::StoreError;

/// Why a dataset operation failed.
#[derive(Debug, thiserror::Error)]
pub enum DatasetError {
    /// No such ready dataset visible to the caller (its id).
    #[error("dataset {0} not found")]
    NotFound(String),
    /// Jobs that are queued or running read it; the message names them.
    #[error("{0}")]
    InUse(String),
    /// The file is over this many bytes.
    #[error("the dataset is larger than {0} bytes")]
    TooLarge(u64),
    /// The file's content cannot be a dataset; the message names the row or column.
    #[error("{0}")]
    Invalid(String),
    /// The format is not one served, or cannot be told from the name.
    #[error("{0}")]
    UnsupportedFormat(String),
    /// A parameter is wrong (a name, a path, a repository id); the message names it.
    #[error("{0}")]
    InvalidRequest(String),
    /// The owner's datasets would pass `datasets.max_rows_per_key` or `max_bytes_per_key`.
    #[error("{0}")]
    QuotaExceeded(String),
    /// The upload stopped sending bytes for longer than the idle timeout.
    #[error("the upload stopped arriving")]
    Stalled,
    /// The database failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A server-side failure (disk, encoding); the message is for the log only.
    #[error("{0}")]
    Internal(String),
}

impl From<ImportError> for DatasetError {
    fn from(e: ImportError) -> Self {
        match e.code {
            "invalid_dataset" => Self::Invalid(e.message),
            "unsupported_dataset_format" => Self::UnsupportedFormat(e.message),
            "quota_exceeded" => Self::QuotaExceeded(e.message),
            _ => Self::Internal(e.message),
        }
    }
}
