//! Dataset rows as stored, shared by both backends (see `rows.rs` for the conventions), and
//! the decoding of a stored block.

use serde_json::{Map, Value};
use uuid::Uuid;

use super::StoreError;
use super::from_row::row_struct;
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

row_struct! {
    /// A dataset row as stored; see [`dataset_columns!`].
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

/// The rows of a stored block of dataset `id` (`None`: no such block).
pub(crate) fn decode_block(
    id: DatasetId,
    bytes: Option<Vec<u8>>,
) -> Result<Vec<Map<String, Value>>, StoreError> {
    match bytes {
        None => Ok(Vec::new()),
        Some(bytes) => serde_json::from_slice(&bytes).map_err(|e| StoreError::UnreadableDataset {
            dataset: id,
            reason: e.to_string(),
        }),
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

/// `select` of the ready datasets matching `q` (and `owner`, when given), newest first: the
/// same statement on both backends.
fn find_query<'a, DB: sqlx::Database>(
    owner: Option<&'a str>,
    q: &'a crate::domain::stored_dataset::DatasetQuery,
) -> sqlx::QueryBuilder<DB>
where
    Uuid: sqlx::Encode<'a, DB> + sqlx::Type<DB>,
    &'a str: sqlx::Encode<'a, DB> + sqlx::Type<DB>,
    i64: sqlx::Encode<'a, DB> + sqlx::Type<DB>,
{
    let mut qb = sqlx::QueryBuilder::new(concat!(
        "select ",
        dataset_columns!(),
        " from datasets where status = 'ready'"
    ));
    let filters = [
        (" and owner = ", owner),
        (" and name = ", q.name.as_deref()),
        (" and sha256 = ", q.sha256.as_deref()),
        (" and source_ref = ", q.source_ref.as_deref()),
    ];
    for (sql, value) in filters {
        if let Some(value) = value {
            qb.push(sql).push_bind(value);
        }
    }
    if let Some(before) = q.before {
        qb.push(" and id < ").push_bind(before.0);
    }
    qb.push(" order by id desc limit ")
        .push_bind(i64::from(q.limit));
    qb
}

/// The ready datasets matching `q` (and `owner`), newest first, read through `exec` and decoded
/// from `R`, the backend's row type.
pub(crate) async fn find_in<'e, 'a, DB, E, R>(
    exec: E,
    owner: Option<&'a str>,
    q: &'a crate::domain::stored_dataset::DatasetQuery,
) -> Result<Vec<DatasetMeta>, StoreError>
where
    DB: sqlx::Database,
    E: sqlx::Executor<'e, Database = DB>,
    DB::Arguments: sqlx::IntoArguments<DB>,
    Uuid: sqlx::Encode<'a, DB> + sqlx::Type<DB>,
    &'a str: sqlx::Encode<'a, DB> + sqlx::Type<DB>,
    i64: sqlx::Encode<'a, DB> + sqlx::Type<DB>,
    R: for<'r> sqlx::FromRow<'r, DB::Row> + Send + Unpin,
    DatasetMeta: TryFrom<R, Error = StoreError>,
{
    let mut qb = find_query::<DB>(owner, q);
    let rows: Vec<R> = qb.build_query_as().fetch_all(exec).await?;
    rows.into_iter().map(DatasetMeta::try_from).collect()
}

/// A ready dataset `owner` may see (`None`: none), read through `exec` and decoded from `R`.
pub(crate) async fn one_in<'e, 'a, DB, E, R>(
    exec: E,
    id: DatasetId,
    owner: Option<&'a str>,
) -> Result<Option<DatasetMeta>, StoreError>
where
    DB: sqlx::Database,
    E: sqlx::Executor<'e, Database = DB>,
    DB::Arguments: sqlx::IntoArguments<DB>,
    Uuid: sqlx::Encode<'a, DB> + sqlx::Type<DB>,
    &'a str: sqlx::Encode<'a, DB> + sqlx::Type<DB>,
    R: for<'r> sqlx::FromRow<'r, DB::Row> + Send + Unpin,
    DatasetMeta: TryFrom<R, Error = StoreError>,
{
    let mut qb = one_query::<DB>(dataset_columns!(), id, owner);
    let row: Option<R> = qb.build_query_as().fetch_optional(exec).await?;
    row.map(DatasetMeta::try_from).transpose()
}

/// `select <what> from datasets where status = 'ready' and id = <id>`, restricted to `owner`
/// when given: a ready dataset the caller may see.
pub(crate) fn one_query<'a, DB: sqlx::Database>(
    what: &str,
    id: DatasetId,
    owner: Option<&'a str>,
) -> sqlx::QueryBuilder<DB>
where
    Uuid: sqlx::Encode<'a, DB> + sqlx::Type<DB>,
    &'a str: sqlx::Encode<'a, DB> + sqlx::Type<DB>,
{
    let mut qb = sqlx::QueryBuilder::new(format!(
        "select {what} from datasets where status = 'ready' and id = "
    ));
    qb.push_bind(id.0);
    if let Some(owner) = owner {
        qb.push(" and owner = ").push_bind(owner);
    }
    qb
}

/// Block `block` of dataset `id`, decoded (empty when there is none): the same statement on
/// both backends.
pub(crate) async fn read_block<'e, DB, E>(
    exec: E,
    id: DatasetId,
    block: u64,
) -> Result<Vec<Map<String, Value>>, StoreError>
where
    DB: sqlx::Database,
    E: sqlx::Executor<'e, Database = DB>,
    DB::Arguments: sqlx::IntoArguments<DB>,
    for<'q> Uuid: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    for<'q> i64: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    for<'r> (Vec<u8>,): sqlx::FromRow<'r, DB::Row>,
{
    let bytes: Option<Vec<u8>> = sqlx::query_scalar(
        "select rows from dataset_blocks where dataset_id = $1 and block_index = $2",
    )
    .bind(id.0)
    .bind(to_i64(block))
    .fetch_optional(exec)
    .await?;
    decode_block(id, bytes)
}

/// The end of a dataset delete, in the caller's transaction: refused while `users` (live jobs
/// that read it) is not empty, else the dataset goes, its blocks with it (`on delete
/// cascade`). The caller commits on [`DeleteDataset::Deleted`].
pub(crate) async fn delete_unless_used<'c, DB>(
    conn: &'c mut DB::Connection,
    id: DatasetId,
    users: Vec<Uuid>,
) -> Result<crate::domain::stored_dataset::DeleteDataset, StoreError>
where
    DB: sqlx::Database,
    &'c mut DB::Connection: sqlx::Executor<'c, Database = DB>,
    DB::Arguments: sqlx::IntoArguments<DB>,
    for<'q> Uuid: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
{
    use crate::domain::stored_dataset::DeleteDataset;
    if !users.is_empty() {
        return Ok(DeleteDataset::InUse(
            users.into_iter().map(crate::domain::JobId).collect(),
        ));
    }
    sqlx::query("delete from datasets where id = $1")
        .bind(id.0)
        .execute(conn)
        .await?;
    Ok(DeleteDataset::Deleted)
}
