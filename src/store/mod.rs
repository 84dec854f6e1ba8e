//! The `Store` traits the rest of the code uses for jobs, records, traces, datasets and the
//! response cache, and their two backends: embedded SQLite (the default) and Postgres.
//!
//! The database row is the source of truth for every job and record. The work queue (chunk
//! claims under leases and the fenced writes of results) runs on the same backends and pools but
//! is its own module, `crate::queue`, with its own trait.

mod cache_sql;
mod counts;
mod dataset_rows;
mod error;
pub(crate) mod from_row;
mod job_delete;
pub(crate) mod job_select;
mod migrations;
mod pool;
pub mod postgres;
pub(crate) mod reads;
mod record_select;
mod rows;
pub(crate) mod selection;
pub mod sqlite;
pub(crate) mod usage;

pub use counts::unstarted_counts;
pub use error::StoreError;
pub use pool::DEFAULT_ACQUIRE_TIMEOUT;
pub use record_select::RecordSelect;
pub use usage::{UsageCounts, UsageDelta};

use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde_json::Value;

use crate::domain::DatasetId;
pub use crate::domain::job::{FailedRecord, JobCounts, JobError, JobRow, JobSummary};
pub use crate::domain::record::{
    FinishedRecord, RecordError, RecordErrorCode, RecordOutcome, RecordRow, RecordStage, Trace,
    TraceRow,
};
use crate::domain::stored_dataset::{DatasetColumn, DatasetMeta, DatasetQuery, DeleteDataset};
use crate::domain::{JobId, JobStatus, RecordId};

/// A job to insert; its `num_records` records are claimed in chunks later.
#[derive(Debug, Clone)]
pub struct NewJob {
    /// The new job's id.
    pub id: JobId,
    /// Name of the API key that created it; `None` when auth is off.
    pub owner: Option<String>,
    /// The DataDesigner config (inner `data_designer` object), as submitted.
    pub config: Value,
    /// Records to generate.
    pub num_records: u32,
    /// Job seed; a record's sampled values depend only on it and the record index.
    pub seed: u64,
    /// Client metadata, returned as given.
    pub metadata: Option<Value>,
    /// DataDesigner run config (error-rate shutdown, trace override, ...).
    pub run_config: Value,
    /// `Idempotency-Key` header, unique per owner.
    pub idempotency_key: Option<String>,
    /// Hash of the request body, to tell a retry from a reuse of the key for another request.
    pub request_hash: Option<String>,
    /// The columns of a dataset row, in order, kept so job responses need no compiled plan.
    pub output_columns: Vec<String>,
    /// Refuse the job when its owner would then have more live (queued, running, cancelling)
    /// jobs than this. Checked in the inserting transaction, serialized per owner, so two
    /// concurrent submits cannot both slip under the cap.
    pub max_live_jobs: Option<u32>,
    /// Refuse the job when its owner's live jobs would then hold more records (their
    /// `num_records`, or the candidate budget of a `record_selection` job; this one's included)
    pub max_live_records: Option<u64>,
    /// The stored datasets the job's seed resolved to (empty: none). Each must be `ready`
    /// when the job is inserted (checked in the inserting transaction, which also holds off a
    /// concurrent delete of them until it commits), else nothing is inserted.
    pub seed_datasets: Vec<DatasetId>,
    /// The name the client gave the job, if any (validated at submit).
    pub name: Option<String>,
    /// Where the job sits in an OpenTelemetry trace (`telemetry::JobTrace`'s text), if spans
    /// are exported.
    pub trace_context: Option<String>,
    /// Its `record_selection`: `num_records` then counts accepted records, and claims carve
    /// indexes up to `max_candidates` until that many passed.
    pub selection: Option<crate::domain::selection::SelectionSpec>,
    /// How its model calls use the response cache.
    pub cache_mode: crate::domain::models::CacheMode,
    /// Its budget in billionths of the price's unit (`cost_budget_exceeded` past it).
    pub max_cost_nanos: Option<u64>,
}

impl NewJob {
    /// The records the job may generate: its candidate budget with `record_selection`, else
    /// `num_records`. What `max_live_records` counts.
    pub fn records_held(&self) -> u32 {
        self.selection
            .map_or(self.num_records, |s| s.max_candidates)
    }
}

/// Which jobs [`JobStore::job_summaries`] reads.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum JobSelect<'a> {
    /// One job, if `owner` (when given) owns it.
    One { id: JobId, owner: Option<&'a str> },
    /// Jobs newest first, strictly older than `before` when given, of `owner` when given, that
    /// `filter` keeps.
    Page {
        owner: Option<&'a str>,
        before: Option<JobId>,
        limit: u32,
        filter: &'a crate::domain::job::JobFilter,
    },
    /// Jobs in `order`, of `owner` when given, that `filter` keeps: at most `limit` after
    /// skipping `offset` (the Data Designer door's numbered pages; one statement a page).
    Numbered {
        owner: Option<&'a str>,
        filter: &'a crate::domain::job::JobFilter,
        order: crate::domain::job::JobOrder,
        offset: u64,
        limit: u32,
    },
}

/// Result of `create_job`.
#[derive(Debug, Clone)]
pub enum CreateOutcome {
    /// The job was inserted.
    Created(JobRow),
    /// A job with the same owner and idempotency key already existed; nothing was inserted.
    Existing(JobRow),
    /// The owner already has `live` live jobs, at least `NewJob::max_live_jobs`; nothing was
    /// inserted.
    TooManyJobs {
        /// The owner's live jobs.
        live: u64,
    },
    /// The owner's live jobs hold `live` records already, and this one would pass
    /// `NewJob::max_live_records`; nothing was inserted.
    TooManyRecords {
        /// Records of the owner's live jobs, this one's not included.
        live: u64,
    },
    /// These of `NewJob::seed_datasets` are gone (deleted since the seed was resolved);
    /// nothing was inserted.
    SeedDatasetsMissing(Vec<DatasetId>),
}

/// The result of [`JobStore::delete_job`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeleteJob {
    /// The job and everything of it are gone.
    Deleted,
    /// No such job.
    NotFound,
    /// The job has not finished (it is as it was): cancel it first.
    NotFinished(JobStatus),
}

/// Persistence for jobs, records and traces. Two implementations: [`sqlite::SqliteStore`] and
/// [`postgres::PgStore`]; the same test suite runs against both. Split by concern into the
/// traits it requires; `Arc<dyn Store>` is what the services hold. Both also implement the work
/// queue (`crate::queue::Queue`), which no consumer of the store needs.
#[async_trait]
pub trait Store:
    JobStore + RecordStore + DatasetStore + CacheStore + Send + Sync + 'static
{
    /// For readiness: the database takes a write (one row of `readiness`). A read alone stayed
    /// fine on a full disk or a read-only database while every claim and submit failed.
    async fn probe_write(&self) -> Result<(), StoreError>;

    /// The database's clock, so progress streams compare timestamps on one clock.
    async fn now(&self) -> Result<DateTime<Utc>, StoreError>;

    /// Closes the connection pool.
    async fn close(&self);
}

/// Jobs: submit, read, summarize, delete.
#[async_trait]
pub trait JobStore: Send + Sync {
    /// Inserts the job (one row, whatever `num_records`: its records are carved into chunks by
    /// later claims). If `(owner, idempotency_key)` already exists, inserts nothing and returns
    /// the existing job.
    async fn create_job(&self, job: &NewJob) -> Result<CreateOutcome, StoreError>;

    /// A job by id; `owner: Some(k)` restricts to jobs owned by `k`.
    async fn get_job(&self, id: JobId, owner: Option<&str>) -> Result<Option<JobRow>, StoreError>;

    /// Job summaries (the job, its record counts, its first `first_errors` failed records by
    /// index, its usage), all in one round trip: the job `id` if `owner` may see it, or a page
    /// of jobs. So rendering a job, or a page of them, costs one query.
    async fn job_summaries(
        &self,
        select: JobSelect<'_>,
        first_errors: u32,
    ) -> Result<Vec<JobSummary>, StoreError>;

    /// Record counts by status: completed and failed records are the job's counters (added to
    /// with the rows, in their transaction), records in progress are those of its leased
    /// chunks without a result, and the rest are pending while the job runs, cancelled once it
    /// stopped (cancelled, cancelling or failed).
    async fn job_counts(&self, id: JobId) -> Result<JobCounts, StoreError>;

    /// Deletes a finished job (`completed`, `failed`, `cancelled`) with its records, traces,
    /// media, chunks and usage, in one transaction; a job not finished is left as it is.
    async fn delete_job(&self, id: JobId) -> Result<DeleteJob, StoreError>;

    /// Jobs that are `queued`, `running` or `cancelling`, for finalizing after a restart.
    async fn live_jobs(&self) -> Result<Vec<JobId>, StoreError>;

    /// Up to `limit` finished jobs (completed, failed, cancelled) that finished before
    /// `before`, oldest first: what `database.job_retention_days` deletes.
    async fn expired_jobs(
        &self,
        before: DateTime<Utc>,
        limit: u32,
    ) -> Result<Vec<JobId>, StoreError>;
}

/// Records, their traces and images, and a job's usage, as stored.
#[async_trait]
pub trait RecordStore: Send + Sync {
    /// A record by id; `owner: Some(k)` restricts to records of jobs owned by `k`.
    async fn get_record(
        &self,
        id: RecordId,
        owner: Option<&str>,
    ) -> Result<Option<RecordRow>, StoreError>;

    /// A job's records (those with a result) by index, strictly after `after_index` when
    /// given, optionally one status (only `completed` and `failed` records are rows) and,
    /// for a `record_selection` job, one verdict (`failed_generation`: its failed rows).
    async fn list_records(
        &self,
        job_id: JobId,
        after_index: Option<u32>,
        filter: RecordSelect,
        limit: u32,
    ) -> Result<Vec<RecordRow>, StoreError>;

    /// Records of a job that reached a final state at or after `since` (database clock),
    /// ordered by `updated_at`, then index.
    ///
    /// On Postgres a row's `updated_at` is its transaction's start, and the row only becomes
    /// visible at commit, so a record committed just after a `now()` may carry an earlier
    /// time. Pollers should overlap windows (ask from a little before the previous `now()`)
    /// and skip ids already seen.
    async fn finished_since(
        &self,
        job_id: JobId,
        since: DateTime<Utc>,
    ) -> Result<Vec<FinishedRecord>, StoreError>;

    /// Traces of a record, by column name; one column when `column` is given.
    async fn get_traces(
        &self,
        record_id: RecordId,
        column: Option<&str>,
    ) -> Result<Vec<TraceRow>, StoreError>;

    /// One stored image of a record's column: `(mime type, bytes)`.
    async fn get_media(
        &self,
        record_id: RecordId,
        column: &str,
        index: u32,
    ) -> Result<Option<(String, Vec<u8>)>, StoreError>;

    /// Traces of several records (a page or export chunk), in no particular order.
    async fn traces_for(&self, record_ids: &[RecordId]) -> Result<Vec<TraceRow>, StoreError>;

    /// A job's LLM usage by model alias, sorted by alias.
    async fn job_usage(
        &self,
        job_id: JobId,
    ) -> Result<std::collections::BTreeMap<String, UsageCounts>, StoreError>;
}

/// The response cache: model answers per API key name, content-addressed (see `llm::cache`).
#[async_trait]
pub trait CacheStore: Send + Sync {
    /// The answer cached under `key` for `owner` ('' when auth is off), if any.
    async fn cache_get(&self, owner: &str, key: &[u8]) -> Result<Option<Value>, StoreError>;

    /// Caches `response` under `key` for `owner`, replacing an older answer.
    async fn cache_put(&self, owner: &str, key: &[u8], response: &Value) -> Result<(), StoreError>;

    /// Deletes the entries created before `before`, then the oldest ones until the rest hold
    /// at most `max_bytes`. Returns how many it deleted.
    async fn cache_sweep(&self, before: DateTime<Utc>, max_bytes: u64) -> Result<u64, StoreError>;
}

/// Stored datasets: metadata, blocks of rows, imports and deletes.
#[async_trait]
pub trait DatasetStore: Send + Sync {
    /// `ready` datasets visible to `owner` (all when `None`: auth is off) matching `q`,
    /// newest first.
    async fn find_datasets(
        &self,
        owner: Option<&str>,
        q: &DatasetQuery,
    ) -> Result<Vec<DatasetMeta>, StoreError>;

    /// A `ready` dataset by id; `owner: Some(k)` restricts to datasets owned by `k`.
    async fn get_dataset(
        &self,
        id: DatasetId,
        owner: Option<&str>,
    ) -> Result<Option<DatasetMeta>, StoreError>;

    /// `ready` datasets by id, whoever owns them (workers read the datasets a job was bound
    /// to), in no particular order; missing ids are left out.
    async fn get_datasets(&self, ids: &[DatasetId]) -> Result<Vec<DatasetMeta>, StoreError>;

    /// The rows of block `block` of a dataset (rows `block * BLOCK_ROWS ..`), in order;
    /// empty past the last block. Does not check the dataset's status or owner: callers got
    /// the id from a `ready` dataset.
    async fn read_dataset_block(
        &self,
        id: DatasetId,
        block: u64,
    ) -> Result<Vec<serde_json::Map<String, Value>>, StoreError>;

    /// Deletes a `ready` dataset (`owner` as for [`DatasetStore::get_dataset`]) and its rows,
    /// unless a queued, running or cancelling job lists it in `seed_datasets` (checked in the
    /// deleting transaction).
    async fn delete_dataset(
        &self,
        id: DatasetId,
        owner: Option<&str>,
    ) -> Result<DeleteDataset, StoreError>;

    /// Inserts `meta` as an `importing` dataset with no rows (its `num_rows` and `columns`
    /// are set by [`DatasetStore::finish_dataset_import`]). Invisible to every reader until then.
    async fn begin_dataset_import(&self, meta: &DatasetMeta) -> Result<(), StoreError>;

    /// Writes blocks `first_block..` of an importing dataset (each the UTF-8 bytes of a JSON
    /// array of row objects) in one transaction, and marks the import alive. `false` when the
    /// dataset is no longer importing (removed as stale): nothing was written.
    async fn write_dataset_blocks(
        &self,
        id: DatasetId,
        first_block: u64,
        blocks: &[Vec<u8>],
    ) -> Result<bool, StoreError>;

    /// Flips an importing dataset to `ready` with its final columns and row count. `None`
    /// when it is no longer importing.
    async fn finish_dataset_import(
        &self,
        id: DatasetId,
        columns: &[DatasetColumn],
        num_rows: u64,
    ) -> Result<Option<DatasetMeta>, StoreError>;

    /// Deletes an importing dataset and the blocks written so far (a failed import).
    async fn abort_dataset_import(&self, id: DatasetId) -> Result<(), StoreError>;

    /// Deletes `importing` datasets idle (no block written) for longer than `idle`: imports
    /// whose process died. Returns how many. Live imports of other replicas write blocks far
    /// more often than any sensible `idle`.
    async fn delete_stale_imports(&self, idle: Duration) -> Result<u64, StoreError>;

    /// What `owner`'s datasets hold, imports in progress included: rows (of `ready` ones;
    /// an import's count is only known at its end) and stored bytes (of every block written).
    /// The per-key quotas (`datasets.max_rows_per_key`, `datasets.max_bytes_per_key`).
    async fn dataset_usage(&self, owner: Option<&str>) -> Result<DatasetUsage, StoreError>;
}

/// What one key's datasets hold (see [`DatasetStore::dataset_usage`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DatasetUsage {
    pub rows: u64,
    pub bytes: u64,
}
