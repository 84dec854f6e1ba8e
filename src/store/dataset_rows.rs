//! Dataset rows as stored, shared by both backends (see `rows.rs` for the conventions), and
//! the decoding of a stored block.

use serde_json::{Map, Value};
use uuid::Uuid;

use super::StoreError;
use super::rows::{DbJson, DbTime};
use crate::domain::DatasetId;
use crate::domain::stored_dataset::{DatasetColumn, DatasetFormat, DatasetMeta, DatasetSourceKind};

/// Columns of a dataset, in [`DatasetDb`] order.
macro_rules! dataset_columns {
    () => {
        "id, owner, name, format, columns, num_rows, size_bytes, sha256, source, source_ref, \
         created_at"
    };
}
pub(crate) use dataset_columns;

/// A dataset row as stored; see [`dataset_columns!`].
#[derive(sqlx::FromRow)]
pub(crate) struct DatasetDb<J, T> {
    id: Uuid,
    owner: Option<String>,
    name: String,
    format: String,
    columns: J,
    num_rows: i64,
    size_bytes: i64,
    sha256: String,
    source: String,
    source_ref: Option<String>,
    created_at: T,
}

fn to_u64(v: i64, column: &'static str) -> Result<u64, StoreError> {
    u64::try_from(v).map_err(|_| StoreError::Corrupt(format!("{column}: {v} is negative")))
}

impl<J: DbJson, T: DbTime> TryFrom<DatasetDb<J, T>> for DatasetMeta {
    type Error = StoreError;

    fn try_from(r: DatasetDb<J, T>) -> Result<Self, StoreError> {
        let columns: Vec<DatasetColumn> =
            serde_json::from_value(r.columns.into_json("datasets.columns")?)
                .map_err(|e| StoreError::Corrupt(format!("datasets.columns: {e}")))?;
        Ok(DatasetMeta {
            id: DatasetId(r.id),
            owner: r.owner,
            name: r.name,
            format: DatasetFormat::parse(&r.format).ok_or_else(|| {
                StoreError::Corrupt(format!("datasets.format: unknown format {:?}", r.format))
            })?,
            columns,
            num_rows: to_u64(r.num_rows, "datasets.num_rows")?,
            size_bytes: to_u64(r.size_bytes, "datasets.size_bytes")?,
            sha256: r.sha256,
            source: DatasetSourceKind::parse(&r.source).ok_or_else(|| {
                StoreError::Corrupt(format!("datasets.source: unknown source {:?}", r.source))
            })?,
            source_ref: r.source_ref,
            created_at: r.created_at.into_utc("datasets.created_at")?,
        })
    }
}

/// The rows of a stored block (`None`: no such block).
pub(crate) fn decode_block(bytes: Option<Vec<u8>>) -> Result<Vec<Map<String, Value>>, StoreError> {
    match bytes {
        None => Ok(Vec::new()),
        Some(bytes) => serde_json::from_slice(&bytes)
            .map_err(|e| StoreError::Corrupt(format!("dataset_blocks.rows: {e}"))),
    }
}

/// The columns as stored in `datasets.columns`.
pub(crate) fn columns_json(columns: &[DatasetColumn]) -> Value {
    serde_json::to_value(columns).unwrap_or(Value::Null)
}

/// `i64` for a count bound into SQL; counts beyond `i64::MAX` cannot occur.
pub(crate) fn to_i64(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// `NewJob::seed_datasets` as stored: a JSON array of text ids, or null when empty.
pub(crate) fn seed_datasets_json(ids: &[DatasetId]) -> Option<serde_json::Value> {
    (!ids.is_empty()).then(|| ids.iter().map(|id| id.to_string()).collect())
}

/// The ids of `wanted` not in `found`, in `wanted`'s order.
pub(crate) fn missing_datasets(wanted: &[DatasetId], found: &[uuid::Uuid]) -> Vec<DatasetId> {
    wanted
        .iter()
        .filter(|id| !found.contains(&id.0))
        .copied()
        .collect()
}
