//! Row decoding shared by both backends: the column lists every query selects, the raw
//! `FromRow` structs, and their conversion into the store's domain rows.
//!
//! The raw structs are generic over how a backend stores JSON (`J`: Postgres `jsonb` decodes
//! to a `Value`, SQLite keeps text) and timestamps (`T`: Postgres `timestamptz`, SQLite integer
//! microseconds). Everything that can be wrong with a stored value (an unknown status, a
//! negative count, text that is not JSON) becomes [`StoreError::Corrupt`] naming the column.

use chrono::{DateTime, Utc};
use serde_json::Value;
use uuid::Uuid;

use super::from_row::row_struct;
use super::{
    FailedRecord, FinishedRecord, JobError, JobRow, JobSummary, RecordError, RecordErrorCode,
    RecordRow, RecordStage, StoreError, TraceRow,
};
use crate::domain::models::CacheMode;
use crate::domain::selection::{OnExhausted, Selection, SelectionSpec};
use crate::domain::{DatasetId, JobId, JobStatus, RecordId, RecordStatus};

/// Columns of a job, in [`JobDb`] order. A macro so that `concat!` can build `&'static str`
/// queries from it.
macro_rules! job_columns {
    () => {
        "id, owner, status, config, num_records, seed, metadata, run_config, idempotency_key, \
         request_hash, error_code, error_message, created_at, updated_at, started_at, finished_at, \
         output_columns, seed_datasets, name, trace_context, max_candidates, on_exhausted, \
         cache_mode, max_cost_nanos"
    };
}
pub(crate) use job_columns;

/// Columns of a record, in [`RecordDb`] order, each qualified by `r.` so they work in joins.
/// A failed candidate of a `record_selection` job has no stored verdict: it reads as
/// `failed_generation` (looked up for failed rows only, which are few).
macro_rules! record_columns {
    () => {
        "r.id, r.job_id, r.idx, r.status, r.\"values\", r.attempts, r.error_code, \
         r.error_message, r.error_column, r.error_stage, r.created_at, r.updated_at, \
         coalesce(r.selection, case when r.status = 'failed' and exists \
           (select 1 from jobs sj where sj.id = r.job_id and sj.max_candidates is not null) \
           then 'failed_generation' end) as selection"
    };
}
pub(crate) use record_columns;

/// How a backend stores a JSON column.
pub(crate) trait DbJson {
    fn into_json(self, column: &'static str) -> Result<Value, StoreError>;
}

/// Postgres `jsonb`: the server has already checked it.
impl DbJson for Value {
    fn into_json(self, _column: &'static str) -> Result<Value, StoreError> {
        Ok(self)
    }
}

/// SQLite text.
impl DbJson for String {
    fn into_json(self, column: &'static str) -> Result<Value, StoreError> {
        serde_json::from_str(&self)
            .map_err(|e| StoreError::Corrupt(format!("{column}: invalid JSON: {e}")))
    }
}

/// How a backend stores a timestamp.
pub(crate) trait DbTime {
    fn into_utc(self, column: &'static str) -> Result<DateTime<Utc>, StoreError>;
}

/// Postgres `timestamptz`.
impl DbTime for DateTime<Utc> {
    fn into_utc(self, _column: &'static str) -> Result<DateTime<Utc>, StoreError> {
        Ok(self)
    }
}

/// SQLite integer microseconds since the Unix epoch.
impl DbTime for i64 {
    fn into_utc(self, column: &'static str) -> Result<DateTime<Utc>, StoreError> {
        DateTime::from_timestamp_micros(self)
            .ok_or_else(|| StoreError::Corrupt(format!("{column}: timestamp {self} out of range")))
    }
}

fn opt_json<J: DbJson>(v: Option<J>, column: &'static str) -> Result<Option<Value>, StoreError> {
    v.map(|v| v.into_json(column)).transpose()
}

fn opt_time<T: DbTime>(
    v: Option<T>,
    column: &'static str,
) -> Result<Option<DateTime<Utc>>, StoreError> {
    v.map(|v| v.into_utc(column)).transpose()
}

pub(crate) fn to_u32(v: i64, column: &'static str) -> Result<u32, StoreError> {
    u32::try_from(v).map_err(|_| StoreError::Corrupt(format!("{column}: {v} is not a u32")))
}

fn job_status(s: &str) -> Result<JobStatus, StoreError> {
    JobStatus::parse(s)
        .ok_or_else(|| StoreError::Corrupt(format!("jobs.status: unknown status {s:?}")))
}

pub(crate) fn record_status(s: &str) -> Result<RecordStatus, StoreError> {
    RecordStatus::parse(s)
        .ok_or_else(|| StoreError::Corrupt(format!("records.status: unknown status {s:?}")))
}

row_struct! {
    /// A job row as stored; see [`job_columns!`].
    pub(crate) struct JobDb<J, T> {
        id: Uuid,
        owner: Option<String>,
        status: String,
        config: J,
        num_records: i64,
        seed: i64,
        metadata: Option<J>,
        run_config: J,
        idempotency_key: Option<String>,
        request_hash: Option<String>,
        error_code: Option<String>,
        error_message: Option<String>,
        created_at: T,
        updated_at: T,
        started_at: Option<T>,
        finished_at: Option<T>,
        output_columns: Option<J>,
        seed_datasets: Option<J>,
        name: Option<String>,
        trace_context: Option<String>,
        max_candidates: Option<i64>,
        on_exhausted: Option<String>,
        cache_mode: Option<String>,
        max_cost_nanos: Option<i64>,
    }
}

impl<J: DbJson, T: DbTime> TryFrom<JobDb<J, T>> for JobRow {
    type Error = StoreError;

    fn try_from(r: JobDb<J, T>) -> Result<Self, StoreError> {
        Ok(JobRow {
            id: JobId(r.id),
            owner: r.owner,
            status: job_status(&r.status)?,
            config: r.config.into_json("jobs.config")?,
            num_records: to_u32(r.num_records, "jobs.num_records")?,
            // Bit-cast back; see the migration.
            seed: r.seed as u64,
            metadata: opt_json(r.metadata, "jobs.metadata")?,
            run_config: r.run_config.into_json("jobs.run_config")?,
            idempotency_key: r.idempotency_key,
            request_hash: r.request_hash,
            // The message is written with the code; a code alone still reports the failure.
            error: r.error_code.map(|code| JobError {
                code,
                message: r.error_message.unwrap_or_default(),
            }),
            created_at: r.created_at.into_utc("jobs.created_at")?,
            updated_at: r.updated_at.into_utc("jobs.updated_at")?,
            started_at: opt_time(r.started_at, "jobs.started_at")?,
            finished_at: opt_time(r.finished_at, "jobs.finished_at")?,
            output_columns: opt_json(r.output_columns, "jobs.output_columns")?
                .map(serde_json::from_value)
                .transpose()
                .map_err(|e| StoreError::Corrupt(format!("jobs.output_columns: {e}")))?,
            seed_datasets: opt_json(r.seed_datasets, "jobs.seed_datasets")?
                .map(serde_json::from_value::<Vec<String>>)
                .transpose()
                .map_err(|e| StoreError::Corrupt(format!("jobs.seed_datasets: {e}")))?
                .map(|ids| {
                    ids.iter()
                        .map(|id| id.parse::<DatasetId>())
                        .collect::<Result<Vec<_>, _>>()
                })
                .transpose()
                .map_err(|e| StoreError::Corrupt(format!("jobs.seed_datasets: {e}")))?,
            name: r.name,
            trace_context: r.trace_context,
            selection: selection_spec(r.max_candidates, r.on_exhausted.as_deref())?,
            cache_mode: match r.cache_mode.as_deref() {
                None => CacheMode::Off,
                Some(m) => CacheMode::parse(m).ok_or_else(|| {
                    StoreError::Corrupt(format!("jobs.cache_mode: unknown mode {m:?}"))
                })?,
            },
            max_cost_nanos: r.max_cost_nanos.map(|n| u64::try_from(n).unwrap_or(0)),
        })
    }
}

row_struct! {
    /// A record row as stored; see [`record_columns!`].
    pub(crate) struct RecordDb<J, T> {
        id: Uuid,
        job_id: Uuid,
        idx: i64,
        status: String,
        values: Option<J>,
        attempts: i64,
        error_code: Option<String>,
        error_message: Option<String>,
        error_column: Option<String>,
        error_stage: Option<String>,
        created_at: T,
        updated_at: T,
        selection: Option<String>,
    }
}

impl<J: DbJson, T: DbTime> TryFrom<RecordDb<J, T>> for RecordRow {
    type Error = StoreError;

    fn try_from(r: RecordDb<J, T>) -> Result<Self, StoreError> {
        Ok(RecordRow {
            id: RecordId(r.id),
            job_id: JobId(r.job_id),
            index: to_u32(r.idx, "records.idx")?,
            status: record_status(&r.status)?,
            values: opt_json(r.values, "records.values")?,
            attempts: to_u32(r.attempts, "records.attempts")?,
            // Another version of the service may have written a code or stage this one does
            // not know: kept as read, never a corrupt row.
            error: r.error_code.map(|code| RecordError {
                code: RecordErrorCode::parse(&code),
                message: r.error_message.unwrap_or_default(),
                column: r.error_column,
                stage: r.error_stage.as_deref().map(RecordStage::parse),
            }),
            created_at: r.created_at.into_utc("records.created_at")?,
            updated_at: r.updated_at.into_utc("records.updated_at")?,
            selection: r
                .selection
                .map(|s| {
                    Selection::parse(&s).ok_or_else(|| {
                        StoreError::Corrupt(format!("records.selection: unknown verdict {s:?}"))
                    })
                })
                .transpose()?,
        })
    }
}

/// A job's record selection from its two columns: both set, or neither.
fn selection_spec(
    max_candidates: Option<i64>,
    on_exhausted: Option<&str>,
) -> Result<Option<SelectionSpec>, StoreError> {
    match (max_candidates, on_exhausted) {
        (None, None) => Ok(None),
        (Some(n), Some(mode)) => Ok(Some(SelectionSpec {
            max_candidates: to_u32(n, "jobs.max_candidates")?,
            on_exhausted: OnExhausted::parse(mode).ok_or_else(|| {
                StoreError::Corrupt(format!("jobs.on_exhausted: unknown mode {mode:?}"))
            })?,
        })),
        _ => Err(StoreError::Corrupt(
            "jobs.max_candidates and jobs.on_exhausted: one set without the other".to_owned(),
        )),
    }
}

row_struct! {
    /// A finished record: `select id, idx, status, error_code, updated_at`.
    pub(crate) struct FinishedDb<T> {
        id: Uuid,
        idx: i64,
        status: String,
        error_code: Option<String>,
        updated_at: T,
    }
}

impl<T: DbTime> TryFrom<FinishedDb<T>> for FinishedRecord {
    type Error = StoreError;

    fn try_from(r: FinishedDb<T>) -> Result<Self, StoreError> {
        Ok(FinishedRecord {
            id: RecordId(r.id),
            index: to_u32(r.idx, "records.idx")?,
            status: record_status(&r.status)?,
            error_code: r.error_code,
            updated_at: r.updated_at.into_utc("records.updated_at")?,
        })
    }
}

row_struct! {
    /// A trace: `select record_id, column_name, messages, created_at`.
    pub(crate) struct TraceDb<J, T> {
        record_id: Uuid,
        column_name: String,
        messages: J,
        created_at: T,
    }
}

impl<J: DbJson, T: DbTime> TryFrom<TraceDb<J, T>> for TraceRow {
    type Error = StoreError;

    fn try_from(r: TraceDb<J, T>) -> Result<Self, StoreError> {
        Ok(TraceRow {
            record_id: RecordId(r.record_id),
            column: r.column_name,
            messages: r.messages.into_json("traces.messages")?,
            created_at: r.created_at.into_utc("traces.created_at")?,
        })
    }
}

row_struct! {
    /// Record counts by status: the `job_record_counts` row's `completed` and `failed`, and
    /// `in_progress` from the job's leased chunks.
    pub(crate) struct CountDb {
        pub status: String,
        pub n: i64,
    }
}

/// A job with the parts of its summary, each aggregated as JSON by the query: `counts`
/// (`{status: n}`), `first_errors` (`[[id, idx, code, message, column, stage], ...]`) and
/// `usage` (`{alias: [requests, prompt, completion]}`) and `tool_usage` (`[[column, tool,
/// outcome, n], ...]`). See [`JobStore::job_summaries`](crate::store::JobStore::job_summaries).
pub(crate) struct SummaryDb<J, T> {
    job: JobDb<J, T>,
    counts: J,
    first_errors: J,
    usage: J,
    column_usage: J,
    tool_usage: J,
}

/// The job's own columns are read as [`JobDb`] reads them (what the derive's `flatten` did),
/// the summary's parts by name; see [`row_struct!`] for why there is no derive.
impl<'r, R: sqlx::Row, J, T> sqlx::FromRow<'r, R> for SummaryDb<J, T>
where
    &'r str: sqlx::ColumnIndex<R>,
    JobDb<J, T>: sqlx::FromRow<'r, R>,
    J: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
{
    fn from_row(row: &'r R) -> Result<Self, sqlx::Error> {
        Ok(Self {
            job: JobDb::from_row(row)?,
            counts: row.try_get("counts")?,
            first_errors: row.try_get("first_errors")?,
            usage: row.try_get("usage")?,
            column_usage: row.try_get("column_usage")?,
            tool_usage: row.try_get("tool_usage")?,
        })
    }
}

impl<J: DbJson, T: DbTime> TryFrom<SummaryDb<J, T>> for JobSummary {
    type Error = StoreError;

    fn try_from(r: SummaryDb<J, T>) -> Result<Self, StoreError> {
        let corrupt = |what: &str| StoreError::Corrupt(format!("job summary: bad {what}"));
        let counts = match r.counts.into_json("counts")? {
            Value::Object(m) => m
                .into_iter()
                .map(|(status, n)| {
                    let n = n.as_i64().ok_or_else(|| corrupt("count"))?;
                    Ok(CountDb { status, n })
                })
                .collect::<Result<Vec<_>, StoreError>>()?,
            _ => return Err(corrupt("counts")),
        };
        let Value::Array(errors) = r.first_errors.into_json("first_errors")? else {
            return Err(corrupt("first_errors"));
        };
        let mut first_errors = errors
            .into_iter()
            .map(|e| {
                let text = |i: usize| e.get(i).and_then(Value::as_str).map(str::to_owned);
                let id = text(0)
                    .and_then(|t| Uuid::parse_str(&t).ok())
                    .ok_or_else(|| corrupt("record id"))?;
                let index = e
                    .get(1)
                    .and_then(Value::as_i64)
                    .ok_or_else(|| corrupt("idx"))?;
                Ok(FailedRecord {
                    id: RecordId(id),
                    index: to_u32(index, "records.idx")?,
                    error: RecordError {
                        code: RecordErrorCode::parse(
                            &text(2).ok_or_else(|| corrupt("error_code"))?,
                        ),
                        message: text(3).unwrap_or_default(),
                        column: text(4),
                        stage: text(5).as_deref().map(RecordStage::parse),
                    },
                })
            })
            .collect::<Result<Vec<_>, StoreError>>()?;
        first_errors.sort_by_key(|f| f.index);
        let per_key = |v: Value, what: &str| -> Result<_, StoreError> {
            let Value::Object(m) = v else {
                return Err(corrupt(what));
            };
            let rows = m
                .into_iter()
                .map(|(key, v)| {
                    let n = |i: usize| v.get(i).and_then(Value::as_i64).unwrap_or(0);
                    (key, n(0), n(1), n(2), n(3), n(4))
                })
                .collect();
            Ok(super::usage::from_rows(rows))
        };
        let usage = per_key(r.usage.into_json("usage")?, "usage")?;
        let column_usage = per_key(r.column_usage.into_json("column_usage")?, "column_usage")?;
        let Value::Array(tool_rows) = r.tool_usage.into_json("tool_usage")? else {
            return Err(corrupt("tool_usage"));
        };
        let tool_rows = tool_rows
            .into_iter()
            .map(|v| {
                let text = |i: usize| v.get(i).and_then(Value::as_str).map(str::to_owned);
                match (text(0), text(1), text(2), v.get(3).and_then(Value::as_i64)) {
                    (Some(c), Some(t), Some(o), Some(n)) => Ok((c, t, o, n)),
                    _ => Err(corrupt("tool_usage row")),
                }
            })
            .collect::<Result<Vec<_>, StoreError>>()?;
        let job: JobRow = r.job.try_into()?;
        let counts = super::counts::job_counts(&job, counts)?;
        Ok(JobSummary {
            job,
            counts,
            first_errors,
            usage,
            column_usage,
            tool_usage: super::usage::tools_from_rows(tool_rows),
        })
    }
}

/// Converts every raw row, stopping at the first corrupt one.
pub(crate) fn convert<R, D>(rows: Vec<D>) -> Result<Vec<R>, StoreError>
where
    R: TryFrom<D, Error = StoreError>,
{
    rows.into_iter().map(R::try_from).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn corrupt_values_name_their_column() {
        let err = DbJson::into_json("{not json".to_owned(), "jobs.config").unwrap_err();
        assert!(
            matches!(&err, StoreError::Corrupt(m) if m.starts_with("jobs.config: invalid JSON"))
        );
        let err = DbTime::into_utc(i64::MAX, "records.updated_at").unwrap_err();
        assert!(matches!(&err, StoreError::Corrupt(m) if m.starts_with("records.updated_at:")));
        let err = to_u32(-1, "records.idx").unwrap_err();
        assert!(matches!(&err, StoreError::Corrupt(m) if m == "records.idx: -1 is not a u32"));
        let err = job_status("paused").unwrap_err();
        assert!(matches!(&err, StoreError::Corrupt(m) if m.contains("jobs.status")));
    }

    #[test]
    fn stored_micros_round_trip() {
        let t = DateTime::from_timestamp_micros(1_750_000_000_123_456).unwrap();
        assert_eq!(DbTime::into_utc(t.timestamp_micros(), "t").unwrap(), t);
    }
}
