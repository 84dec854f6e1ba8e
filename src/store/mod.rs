//! The `Store` trait the rest of the code uses for jobs, records and traces, and its two
//! backends: embedded SQLite (the default) and Postgres.
//!
//! The database row is the source of truth for every job and record. Workers claim chunks of
//! a job's record indexes under a lease (owner + expiry); a record becomes a row when it has a
//! result, in a write fenced by its chunk's lease owner, so a worker whose lease was taken
//! over can never write over the newer run's result. See `chunks` for the rules shared by both
//! backends.

mod cache_sql;
mod chunks;
mod claim;
mod complete;
mod counts;
mod dataset_rows;
mod error;
mod fair;
mod finish;
mod from_row;
mod job_delete;
mod migrations;
mod open;
pub mod postgres;
mod reads;
mod record_select;
mod rows;
pub(crate) mod selection;
pub mod sqlite;
pub mod storable;
pub(crate) mod usage;
mod written;

pub use counts::unstarted_counts;
pub use error::StoreError;
pub use open::{DEFAULT_ACQUIRE_TIMEOUT, open};
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

/// A chunk of a job's record indexes, `[start, ..)`: the unit of a lease. A job's chunks never
/// overlap, so the job and the first index name one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ChunkKey {
    pub job_id: JobId,
    pub start: u32,
}

/// A record handed to a worker by [`QueueStore::claim`]: one index of a leased chunk that has no
/// result yet.
#[derive(Debug, Clone, PartialEq)]
pub struct ClaimedRecord {
    /// A fresh id for this attempt; the record keeps the id of the attempt whose result is
    /// written (only one can be: writes are fenced by the chunk's lease).
    pub id: RecordId,
    pub job_id: JobId,
    pub index: u32,
    /// The leased chunk it belongs to.
    pub chunk: ChunkKey,
    /// How many records of that chunk this claim handed out: every index of the chunk without
    /// a result (the claim cuts chunks so that this holds). The chunk is done, and deleted by
    /// the store, once that many of its records are written.
    pub chunk_todo: u32,
    /// Claims of the chunk, including this one.
    pub attempts: u32,
    /// How many times a lease on the chunk expired (its worker died, hung or lost the
    /// database while running it), including the one this claim took over. Releases at drain
    /// do not count.
    pub lease_expiries: u32,
    /// The chunk's lease expired at least [`ISOLATE_AFTER_EXPIRIES`] times: one of its
    /// records may be what kills its workers. It comes one record at a time (its chunk cut
    /// right after it), and a replica runs at most one such record at once
    /// ([`ClaimPolicy::isolate`]), beside its other work. That isolates a culprit without a
    /// lock on the pool: no record has died more often than the culprit (it is in flight at
    /// every death), so an innocent suspect never runs beside it and an innocent non-suspect
    /// stays under the limit one death later, while the culprit reaches it holding just itself
    /// (see the `chunks` module).
    pub suspect: bool,
}

/// A chunk whose lease expired this many times is suspect: it is run one record at a time,
/// never beside another suspect record of the same replica (see [`ClaimedRecord::suspect`]).
///
/// Two, not one: the first expiry is usually an ordinary crash, deploy or SIGKILL that cut every
/// chunk in flight, and running all of those one record at a time would make every restart
/// slow. A chunk that dies a second time is suspect.
pub const ISOLATE_AFTER_EXPIRIES: u32 = 2;

/// How a claim treats records whose worker died.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClaimPolicy {
    /// A chunk whose lease has expired this many times is not run again as it is: the claim
    /// that finds its lease expired once more fails the records it was running with
    /// `record_abandoned` (stage `worker`): the one record it held when it was suspect, else
    /// every record of it without a result. At least 1.
    pub max_lease_expiries: u32,
    /// No suspect record of this claimer is in flight, so the claim may hand out one (at most
    /// one, beside any other work). Otherwise suspect chunks are left for a later claim or
    /// another replica; nothing waits for them.
    pub isolate: bool,
}

/// The result of [`QueueStore::claim`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Claim {
    /// The records claimed, sorted by job, then index.
    pub records: Vec<ClaimedRecord>,
    /// Records this claim failed with `record_abandoned` (written as failed rows) instead of
    /// running them again, with their jobs, so the caller can finalize those jobs.
    pub abandoned: Vec<(RecordId, JobId)>,
}

/// A finished record, written by `complete_records`.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordResult {
    /// The id the claim gave this attempt.
    pub id: RecordId,
    /// Its job and index.
    pub job_id: JobId,
    pub index: u32,
    /// The leased chunk it belongs to: the write is fenced by that chunk's lease.
    pub chunk: ChunkKey,
    /// Claims of the chunk, including the one that ran this attempt.
    pub attempts: u32,
    pub outcome: RecordOutcome,
    /// The verdict of a completed candidate of a `record_selection` job (accepted, rejected or
    /// null_predicate); `None` for other jobs. Ignored when the record is written as failed.
    pub selection: Option<crate::domain::selection::Selection>,
    /// Replaces any trace stored for the same record and column.
    pub traces: Vec<Trace>,
    /// The LLM usage of this attempt by model alias, added to the job's usage in the
    /// transaction that writes the result (and only if it is written).
    pub usage: std::collections::BTreeMap<String, UsageCounts>,
    /// The same usage by column, added like `usage`.
    pub column_usage: std::collections::BTreeMap<String, UsageCounts>,
    /// The tool use of this attempt by LLM column, added like `usage`.
    pub tool_usage: std::collections::BTreeMap<String, crate::domain::usage::ToolUsage>,
    /// Replaces any media stored for the record (the images of its `image` columns).
    pub media: Vec<crate::domain::media::Media>,
}

/// Result of `request_cancel`.
#[derive(Debug, Clone, PartialEq)]
pub enum CancelOutcome {
    /// No such job.
    NotFound,
    /// The cancel stands: the job is `cancelling` (records in flight finish) or, with nothing
    /// in flight, already `cancelled`. Also the answer to a second cancel of a `cancelling` job.
    Accepted(JobRow),
    /// The job had finished, or every one of its records had (it is now finalized as
    /// `completed`): nothing was cancelled and the job is as it ended.
    Finished(JobRow),
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
/// traits it requires; `Arc<dyn Store>` is what the services hold.
#[async_trait]
pub trait Store:
    JobStore + QueueStore + RecordStore + DatasetStore + CacheStore + Send + Sync + 'static
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

    /// Records of queued and running jobs no claim has handed out yet (the queue's depth, for
    /// `synthgate_queue_records`).
    async fn unclaimed_records(&self) -> Result<u64, StoreError>;

    /// Up to `limit` finished jobs (completed, failed, cancelled) that finished before
    /// `before`, oldest first: what `database.job_retention_days` deletes.
    async fn expired_jobs(
        &self,
        before: DateTime<Utc>,
        limit: u32,
    ) -> Result<Vec<JobId>, StoreError>;

    /// Those of `ids` that a cancel reached (`cancelling` or `cancelled`): the worker pool
    /// stops their records in flight, wherever the cancel was asked.
    async fn cancelled_jobs(&self, ids: &[JobId]) -> Result<Vec<JobId>, StoreError>;
}

/// The work queue: chunk claims under leases, fenced batch writes of results, cancellation and
/// finalizing. Written once over each backend's steps (`claim.rs`, `complete.rs`).
#[async_trait]
pub trait QueueStore: Send + Sync {
    /// Cancels a `queued`/`running` job, deciding in one transaction against its chunks: the
    /// job becomes `cancelling` (no claim carves or takes over its chunks any more, so its
    /// pending records count as cancelled), then it is finalized like `finalize_jobs` would
    /// (`cancelled` at once when nothing is in flight). A job with no pending record and
    /// nothing in flight has finished already: it becomes `completed` and the answer is
    /// [`CancelOutcome::Finished`], as for a job already terminal.
    async fn request_cancel(&self, id: JobId) -> Result<CancelOutcome, StoreError>;

    /// Claims up to `limit` records for `owner` with a lease of `lease`, as chunks: chunks of
    /// `queued`/`running` jobs whose lease expired (a dead worker's) or that were given back,
    /// then new chunks carved off the jobs' unclaimed indexes.
    ///
    /// Expired and given-back chunks come first (oldest job first, then by index), cut to the
    /// limit (the rest stays a chunk of its own, given back), within `policy`: a chunk whose
    /// lease expired `policy.max_lease_expiries` times has the records it was running failed
    /// with `record_abandoned` instead (a poison pill: it killed every worker that ran it), and
    /// a suspect one is handed out only when `policy.isolate`, one record of one such chunk
    /// per claim.
    ///
    /// New chunks are shared fairly: the claim goes round the jobs with unclaimed records,
    /// each time to the job whose owner (API key), then the job itself, has the fewest records
    /// in progress (across every replica), oldest job first on ties; each job's share is one
    /// new chunk. So a key with one small job is served next to a key with a large one,
    /// instead of after it.
    ///
    /// Marks the jobs `running` (setting `started_at` the first time). Lease expiry is judged
    /// on the database clock. Safe to call concurrently from many workers and replicas: a
    /// chunk is never held by two live leases, and no index is in two chunks.
    async fn claim(
        &self,
        owner: &str,
        limit: u32,
        lease: Duration,
        policy: ClaimPolicy,
    ) -> Result<Claim, StoreError>;

    /// Extends `owner`'s leases on `chunks`, the chunks it is still working on. Returns how
    /// many of them it still holds. Chunks `owner` holds but no longer works on (a result the
    /// writer gave up on) are left to expire, so a claim takes them over.
    async fn renew_leases(
        &self,
        owner: &str,
        chunks: &[ChunkKey],
        lease: Duration,
    ) -> Result<u64, StoreError>;

    /// Inserts finished records, their traces, media and LLM usage in one transaction, each
    /// only if `owner` still holds the lease on its chunk, its index is still in that chunk
    /// (a take-over may have cut it short) and has no result yet.
    /// Returns the ids written, in the order of `results` (the others were taken over or
    /// already written, and are ignored, their usage with them). A chunk whose every record is
    /// written is deleted in the same transaction. If `results` names an index twice, the
    /// first result wins. So a job's usage is exactly the sum over its written results,
    /// whatever crashes in between.
    ///
    /// Values no backend can store (a NUL character) fail their own record with
    /// `unstorable_value`; see [`storable`]. The rest of the batch is written as it is.
    async fn complete_records(
        &self,
        owner: &str,
        results: &[RecordResult],
    ) -> Result<Vec<RecordId>, StoreError>;

    /// How many [`QueueStore::complete_records`] calls may usefully run at once. SQLite takes
    /// one writer at a time, so one (the default). Postgres writes transactions side by side:
    /// half of its pool, so the claims, lease renewals and the API keep the other half. One
    /// writer kept one Postgres backend busy and held the quickstart job to one core's worth
    /// of writing however many cores the service had (bench/README.md, "Cores").
    fn parallel_writes(&self) -> usize {
        1
    }

    /// Gives chunks back to the queue (lease cleared, claimable at once, not counted as an
    /// expiry) if `owner` holds them; used on shutdown for records that did not finish in
    /// time, and for records that could not be run now.
    async fn release_chunks(&self, owner: &str, chunks: &[ChunkKey]) -> Result<u64, StoreError>;

    /// Moves jobs with nothing left to do to their terminal status: `queued`/`running` →
    /// `completed` once every index was claimed and no chunk is left, `cancelling` →
    /// `cancelled` once no chunk is left if any of its records never got a result, else
    /// `completed` (a cancel that came too late to stop anything), setting `finished_at`. In a
    /// `cancelling` job, chunks whose lease expired or that were given back (they would never
    /// finish) are dropped first: their records without a result count as cancelled. Returns
    /// the jobs that changed, sorted; when replicas race, each job is reported by exactly one
    /// caller, so the caller that gets it can announce it.
    async fn finalize_jobs(&self, ids: &[JobId]) -> Result<Vec<JobId>, StoreError>;

    /// Fails a `queued` or `running` job (`error_rate_exceeded`, ...): status `failed` with the
    /// error and `finished_at`; its unclaimed records count as cancelled, and records in
    /// flight may still land.
    /// A job in any other status (including `cancelling`: the user's cancel stands) is left as
    /// it is. True when this call failed the job.
    async fn fail_job(&self, id: JobId, error: &JobError) -> Result<bool, StoreError>;
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
