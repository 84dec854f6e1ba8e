//! The work queue: how each record of a job is run and written exactly once, whatever dies.
//!
//! **The guarantee.** Every index `0..num_records` of a job ends with exactly one stored result
//! (a `completed` or `failed` record row) or, when the job stopped first, none (it counts as
//! cancelled); the job's usage is exactly the sum over those results; and a job is finished
//! (its terminal status set, by one caller however many replicas race) exactly when no index
//! can get a result any more. That holds across worker crashes, hangs, lost databases, drains
//! and replicas racing on one Postgres, because:
//!
//! * indexes are handed out as **chunks** under a **lease** (owner + expiry, on the database
//!   clock); a job's chunks never overlap, and a chunk is held by at most one live lease
//!   ([`Queue::claim`]; the rules for expired, given-back and suspect chunks are in `chunks`,
//!   the fair shares between keys and jobs in `fair`);
//! * a result is written only while its writer still holds its chunk's lease, only if its index
//!   is still in that chunk and has no result yet, in one transaction with its traces, media and
//!   usage ([`Queue::complete_records`], the **fence**); a chunk is deleted with its last result;
//! * when a job is finished, and how it ends, is one rule written once (`finish`), joined into
//!   each backend's statements.
//!
//! The algorithms (`claim`, `complete`) are written once over each backend's steps; `sqlite`
//! and `postgres` say those steps in SQL and make them exclusive (SQLite's write lock, Postgres's
//! row locks). The worker pool (`crate::worker`) is this trait's one consumer besides the job
//! service, which alone changes a job's status (cancel, fail, finalize).

mod cancel;
mod chunks;
mod claim;
mod complete;
mod fair;
mod finish;
mod open;
mod postgres;
mod sqlite;
pub mod storable;
mod written;

pub use open::open;

use std::time::Duration;

use async_trait::async_trait;

use crate::domain::job::{JobError, JobRow};
use crate::domain::record::{RecordOutcome, Trace};
use crate::domain::usage::UsageCounts;
use crate::domain::{JobId, RecordId};
use crate::store::Store;
pub use crate::store::StoreError;
#[cfg(doc)]
use crate::store::{postgres::PgStore, sqlite::SqliteStore};

/// What opening the database gives: its store and its queue, on one pool. Services take the
/// narrower `Arc<dyn Store>` or `Arc<dyn Queue>`, which an `Arc<dyn Database>` coerces to.
pub trait Database: Store + Queue {}

impl<T: Store + Queue + ?Sized> Database for T {}

/// A chunk of a job's record indexes, `[start, ..)`: the unit of a lease. A job's chunks never
/// overlap, so the job and the first index name one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ChunkKey {
    pub job_id: JobId,
    pub start: u32,
}

/// A record handed to a worker by [`Queue::claim`]: one index of a leased chunk that has no
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

/// The result of [`Queue::claim`].
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

/// The work queue: chunk claims under leases, fenced batch writes of results, cancellation and
/// finalizing. Written once over each backend's steps (`claim.rs`, `complete.rs`), implemented
/// by both stores ([`SqliteStore`], [`PgStore`]) on their pools.
#[async_trait]
pub trait Queue: Send + Sync + 'static {
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

    /// How many [`Queue::complete_records`] calls may usefully run at once. SQLite takes
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

    /// Those of `ids` that a cancel reached (`cancelling` or `cancelled`): the worker pool
    /// stops their records in flight, wherever the cancel was asked.
    async fn cancelled_jobs(&self, ids: &[JobId]) -> Result<Vec<JobId>, StoreError>;

    /// Records of queued and running jobs no claim has handed out yet (the queue's depth, for
    /// `synthgate_queue_records`).
    async fn unclaimed_records(&self) -> Result<u64, StoreError>;
}
