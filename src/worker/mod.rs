//! The worker pool of one replica: claims chunks of records under a lease, generates their
//! records, and hands results to the batch writer. Several replicas share one queue through the
//! store. The pool tracks each leased chunk's records until they are settled (written, or given
//! up), renews the leases of those chunks only, and gives a chunk back when its last record here
//! is settled without all of them written (see [`Inner::settle`]).
//!
//! Each resource is bounded in one place:
//!
//! * **work**: `workers.count` slots, one per record working (sampling, rendering, parsing).
//!   A record waiting (for an LLM, an MCP tool, a remote validator or its backoff) gives its
//!   slot back for the wait (see [`slot`]): requests to a model are bounded by that model's
//!   `max_parallel_requests` limiter, not by worker slots, so records that only wait do not
//!   block other work.
//! * **records started**: `workers.max_in_flight` (default 4 × count), one per record this
//!   replica has started and not yet handed to the writer, working or waiting.
//! * **leases**: one per record claimed and not yet handed to the writer: the records started,
//!   and up to a sixteenth of `max_in_flight` more claimed ahead (see
//!   [`WorkersConfig::claim_ahead`]). A record that ends is replaced at once by one claimed
//!   ahead, rather than after the claim loop's next round trip to the database; records
//!   claimed ahead hold no slot while they wait, and a shutdown gives them back unstarted. A
//!   claim asks for at most as many records as there are free leases and free slots (up to
//!   the batch size), so a replica holds few leases on records it cannot start now. The
//!   exception is CPU work: after a claim of CPU-only chunks (no LLM column), the next claim
//!   asks for every free lease with one slot (having waited up to `write_interval_ms` for half
//!   of them to be free), because each such chunk is one task in one slot (see [`chunk`]),
//!   and for several records per lease
//!   ([`WorkersConfig::cpu_records_per_lease`]): a CPU-only chunk holds one lease and one
//!   place among the records started for that many of its records. If it meets other work
//!   instead, those records get a lease each as far as the claim's leases go and wait for a
//!   slot; the rest are given back unstarted, and the claims after it go back to the
//!   slot-sized rule.
//!
//! Claims are fair across keys and jobs (see
//! [`Queue::claim`](crate::queue::Queue::claim)): one key's large job cannot hold
//! every lease while another key's job waits for it to finish.
//!
//! No record can take the pool down. A panic in a record's task fails that record with
//! `internal_error` (stage `worker`) and frees its lease and slot; a batch write that panics is
//! written again one record at a time, and a record whose own write panics fails the same way
//! (see `writer.rs`; one whose failure cannot be written either is left to the lease-expiry
//! count below, see [`Settled::Lapse`]). A record that kills the whole process (an abort)
//! loses its lease at every crash; past `workers.max_lease_expiries` the next claim fails it
//! with `record_abandoned` instead of running it again. Once its chunk is suspect (its lease
//! expired twice) the chunk is handed out one record at a time, and a replica runs at most one
//! suspect record at once, holding the claimer's suspect token until its result is written
//! (see `claimer`). Everything else keeps being claimed beside it, and nothing ever waits for
//! the token: a claim that cannot have it leaves suspect chunks for later. When the culprit
//! kills the process as the one suspect in flight, the others in flight had died at most once
//! before, so they stay under the limit while the culprit reaches it alone; the records that
//! ran next to it are not failed with it (the full argument is in `queue::chunks`).
//!
//! A cancel stops the job's records in flight on every replica within about a second (see
//! [`watch_cancels`]): what they wait for is dropped and their chunks go back, to be deleted.

mod chunk;
mod claimer;
mod faults;
mod gauges;
mod slot;
mod spans;
mod unsent;
mod writer;

use std::collections::HashMap;
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::FutureExt;
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore, mpsc};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::Instrument;

use crate::config::WorkersConfig;
use crate::datasets::seed_cache::SeedReadError;
use crate::domain::JobId;
use crate::domain::record::{RecordError, RecordErrorCode};
use crate::generate::Generated;
use crate::jobs::{JobService, PlanLookup};
use crate::mcp::CallScope;
use crate::queue::{ChunkKey, ClaimedRecord, Queue, RecordResult};

pub use writer::Finished;

/// How often an idle replica finalizes live jobs, covering a replica that died between writing
/// a job's last record and marking the job finished.
const FINALIZE_SWEEP_EVERY: Duration = Duration::from_secs(10);

/// Shared by the claim loop, record tasks, the writer and the lease renewer.
pub(crate) struct Inner {
    pub(crate) queue: Arc<dyn Queue>,
    /// Runs records (through its [`crate::jobs::RecordRunner`]) and hears what the pool did.
    pub(crate) jobs: JobService,
    pub(crate) cfg: WorkersConfig,
    /// Lease owner name of this replica.
    pub(crate) owner: String,
    /// Chunks leased by this replica with records not yet settled (written, or given up).
    pub(crate) in_flight: Mutex<HashMap<ChunkKey, InFlight>>,
    /// Per job with records in flight: cancelled when a cancel of the job is seen (see
    /// [`watch_cancels`]).
    cancels: Mutex<HashMap<JobId, CancellationToken>>,
    /// Records started and not yet queued for the writer: none, and the writer need not wait.
    unsent: Arc<unsent::Unsent>,
}

/// A leased chunk's records on this replica.
#[derive(Debug, Default)]
pub(crate) struct InFlight {
    /// Handed out by the claim and not yet settled.
    outstanding: u32,
    /// Some settled record was not written (not generated, or its write was given up).
    unwritten: bool,
    /// Some settled record could not be written even as a failure: the chunk is left to lapse.
    lapse: bool,
}

/// How a record left this replica's hands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Settled {
    /// Its result is stored.
    Written,
    /// Not stored, for a reason that says nothing about the record (not started, the database
    /// away): its chunk is given back, to be claimed and run again.
    GiveBack,
    /// Not stored because writing it broke even as a failure (a panic under the store's
    /// write). Given back, a deterministic bug would re-run it forever; its chunk's lease is
    /// left to expire instead, so the expiry count fails it with `record_abandoned` in the end.
    Lapse,
}

impl Inner {
    fn in_flight(&self) -> std::sync::MutexGuard<'_, HashMap<ChunkKey, InFlight>> {
        self.in_flight.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The token that stops `job`'s records here when the job is cancelled.
    fn job_cancel(&self, job: JobId) -> CancellationToken {
        let mut map = self.cancels.lock().unwrap_or_else(|p| p.into_inner());
        map.entry(job).or_default().clone()
    }

    /// Notes claimed records as in flight.
    fn hold(&self, records: &[ClaimedRecord]) {
        let mut map = self.in_flight();
        for r in records {
            map.entry(r.chunk).or_default().outstanding += 1;
        }
    }

    /// Settles records: `(chunk, how)` each. Returns the chunks whose last record here was
    /// settled with one of them unwritten: they must be given back, so that a claim runs the
    /// rest (a chunk all of whose records were written is gone from the store already), unless
    /// one was settled [`Settled::Lapse`]. Settled chunks are no longer renewed.
    pub(crate) fn settle(
        &self,
        records: impl IntoIterator<Item = (ChunkKey, Settled)>,
    ) -> Vec<ChunkKey> {
        let mut map = self.in_flight();
        let mut release = Vec::new();
        for (chunk, how) in records {
            let Some(f) = map.get_mut(&chunk) else {
                continue;
            };
            f.outstanding = f.outstanding.saturating_sub(1);
            f.unwritten |= how != Settled::Written;
            f.lapse |= how == Settled::Lapse;
            if f.outstanding == 0 {
                if f.unwritten && !f.lapse {
                    release.push(chunk);
                }
                map.remove(&chunk);
            }
        }
        release
    }

    /// `job`'s compiled plan if it is CPU work only, so a chunk of it is generated together.
    /// `None` also when the plan cannot be had now: the records then take the path that
    /// reports why.
    async fn cpu_only(&self, job: crate::domain::JobId) -> Option<Arc<crate::jobs::CompiledJob>> {
        match self.jobs.compiled_by_id(job).await {
            Ok(PlanLookup::Ready(c)) if c.plan.is_cpu_only() => Some(c),
            _ => None,
        }
    }

    /// Gives `chunks` back to the queue, best effort: one that stays leased is taken over once
    /// its lease lapses (settled chunks are not renewed).
    pub(crate) async fn release(&self, chunks: &[ChunkKey]) {
        if chunks.is_empty() {
            return;
        }
        if let Err(e) = self.queue.release_chunks(&self.owner, chunks).await {
            tracing::warn!(error = %e, chunks = chunks.len(),
                "giving chunks back to the queue failed; they are re-claimed when their lease expires");
        }
    }
}

/// Handle to a running pool; `run` returns when the pool has drained.
pub struct WorkerPool {
    inner: Arc<Inner>,
    /// Notified by local submits.
    wake: Arc<Notify>,
}

impl WorkerPool {
    /// A pool for `owner` over `queue`, running the records of `jobs`' jobs.
    pub fn new(queue: Arc<dyn Queue>, jobs: JobService, cfg: WorkersConfig, owner: String) -> Self {
        let wake = jobs.submitted().clone();
        Self {
            inner: Arc::new(Inner {
                queue,
                jobs,
                cfg,
                owner,
                in_flight: Mutex::new(HashMap::new()),
                cancels: Mutex::new(HashMap::new()),
                unsent: Arc::default(),
            }),
            wake,
        }
    }

    /// The lease owner name of this replica.
    pub fn owner(&self) -> &str {
        &self.inner.owner
    }

    /// Claims and generates records until `shutdown` fires, then drains: records in flight get
    /// `drain` to finish, the rest are cut and given back to the queue.
    pub async fn run(self, shutdown: CancellationToken, drain: Duration) {
        let inner = self.inner;
        let cfg = inner.cfg.clone();
        let writers = cfg.writers(inner.queue.parallel_writes());
        tracing::info!(worker.owner = %inner.owner, workers = cfg.count, writers,
            "worker pool started");
        // One batch queued while the writer gathers or writes (up to `writers` batches at
        // once): results past that wait in their tasks, holding their leases, so the writer's
        // backlog bounds claiming.
        let (tx, rx) = mpsc::channel::<Finished>(cfg.write_batch_size.max(1));
        let tasks = TaskTracker::new();
        let writer = tasks.spawn(writer::run(inner.clone(), rx, writers));
        let stop_renew = CancellationToken::new();
        let renewer = tasks.spawn(renew_leases(inner.clone(), stop_renew.clone()));
        let gauges = tasks.spawn(gauges::report_queue(inner.clone(), stop_renew.clone()));
        let canceller = tasks.spawn(watch_cancels(inner.clone(), stop_renew.clone()));
        inner.jobs.finalize_live().await;

        let mut claimer = claimer::Claimer::new(inner.clone(), self.wake, tx, shutdown.clone());
        while claimer.step(&shutdown).await.is_continue() {}

        let (records, cut) = (claimer.records.clone(), claimer.cut.clone());
        tracing::info!(in_flight = records.len(), "worker pool draining");
        records.close();
        if tokio::time::timeout(drain, records.wait()).await.is_err() {
            tracing::warn!(
                in_flight = records.len(),
                "drain deadline passed; cutting records in flight"
            );
            cut.cancel();
            records.wait().await;
        }
        // The claimer holds the writer's last sender.
        drop(claimer);
        let _ = writer.await;
        let left: Vec<ChunkKey> = inner.in_flight().keys().copied().collect();
        if !left.is_empty() {
            match inner.queue.release_chunks(&inner.owner, &left).await {
                Ok(n) => tracing::info!(released = n, "unfinished chunks returned to the queue"),
                Err(e) => tracing::warn!(error = %e, chunks = left.len(),
                    "could not return chunks to the queue; they are re-claimed when their lease expires"),
            }
        }
        stop_renew.cancel();
        let _ = renewer.await;
        let _ = gauges.await;
        let _ = canceller.await;
        tasks.close();
        tasks.wait().await;
        tracing::info!("worker pool stopped");
    }
}

/// The leases for a claim after CPU-only chunks: half of `limit` if they free within
/// `patience_ms`, else the first one that frees. Without the wait, each claim took whatever
/// the last chunk had just given back, and the leases stayed split into the sizes of the first
/// chunks (claims of a few records each, alternating with large ones); the bound keeps records
/// that hold leases for long (LLM work) from stalling CPU claims.
async fn cpu_leases(
    leases: Arc<Semaphore>,
    limit: u32,
    patience_ms: u64,
) -> Result<OwnedSemaphorePermit, tokio::sync::AcquireError> {
    let half = leases.clone().acquire_many_owned((limit / 2).max(1));
    match tokio::time::timeout(Duration::from_millis(patience_ms.max(1)), half).await {
        Ok(got) => got,
        Err(_) => leases.acquire_owned().await,
    }
}

/// What a record task holds from the pool until its result is queued for the writer.
struct Held {
    /// Its lease allowance.
    _lease: OwnedSemaphorePermit,
    /// Its place among the records started (`workers.max_in_flight`).
    _start: OwnedSemaphorePermit,
    /// Its worker slot, given back while it waits.
    slot: slot::Slot,
    /// Counts it among the records the writer may still expect, until it is sent.
    unsent: unsent::Sending,
    /// A suspect record's hold on the claimer's suspect token: passed on with its result, so
    /// the next suspect record starts only once this one is written (a death before the write
    /// would count against both).
    suspect: Option<OwnedSemaphorePermit>,
}

/// Generates one record and sends the result to the writer. Holds its lease allowance and slot
/// until then.
async fn run_record(
    inner: Arc<Inner>,
    rec: ClaimedRecord,
    mut held: Held,
    tx: mpsc::Sender<Finished>,
    cut: CancellationToken,
) {
    let _counted = gauges::CountedRecord::start();
    let runner = inner.jobs.runner();
    let chat = slot::SlotChat {
        chat: runner.llm(),
        slot: &held.slot,
        waits: crate::jobs::ModelWaits::new(inner.jobs.activity(), rec.job_id),
    };
    let generate = async {
        let outcome = match inner.jobs.compiled_by_id(rec.job_id).await {
            Ok(PlanLookup::Ready(compiled)) => {
                let scope = CallScope {
                    job: rec.job_id.0,
                    record: rec.id.0,
                };
                let span = spans::record(&rec, compiled.trace.as_ref());
                let chat = inner.jobs.cached_chat(&chat, &compiled);
                match runner
                    .run(&compiled, rec.index, scope, &chat, &held.slot, &cut)
                    .instrument(span.clone())
                    .await
                {
                    Ok(generated) => {
                        spans::ended(&span, &generated);
                        generated
                    }
                    Err(e) => return seed_read_failed(&rec, &e),
                }
            }
            Ok(PlanLookup::Invalid(issues)) => Generated::failed(RecordError::new(
                RecordErrorCode::InvalidConfig,
                issues.first().and_then(|i| i.column.clone()),
                issues
                    .first()
                    .map(|i| i.message.clone())
                    .unwrap_or_else(|| "the job config no longer validates".into()),
            )),
            Ok(PlanLookup::Missing) => return None,
            Err(e) => {
                tracing::warn!(record.id = %rec.id, error = %e, "loading the job failed; the record will be re-claimed");
                return None;
            }
        };
        Some(outcome)
    };
    // A panic anywhere in generation (a bug in a sampler, a template filter, a provider
    // adapter) fails this record instead of killing its task with the lease and slot held,
    // which left the record in progress and its job running until the process restarted.
    // `AssertUnwindSafe`: nothing the future borrows is used after a panic except `rec` and
    // the pool handles, whose state a panic in generation cannot leave half-changed.
    let generate = AssertUnwindSafe(generate).catch_unwind();
    let job_cancelled = inner.job_cancel(rec.job_id);
    let outcome = tokio::select! {
        // The cut first: the LLM client watches the same token and ends its call with
        // `llm_cancelled`, so both branches become ready together. Polled in random order,
        // about half the cut records were written as failed instead of going back to the queue.
        biased;
        // Cut at the drain deadline: the record stays in flight and is released with the rest.
        () = cut.cancelled() => return,
        // Its job was cancelled: whatever it waits for (a model, a tool, a validator's
        // backoff) is dropped, and its chunk goes back, to be deleted by the cancel.
        () = job_cancelled.cancelled() => {
            tracing::info!(record.id = %rec.id, job.id = %rec.job_id,
                "record stopped: its job was cancelled");
            not_generated(&inner, &rec).await;
            inner.jobs.finalize(&[rec.job_id]).await;
            return;
        }
        o = generate => o,
    };
    let outcome = match outcome {
        Ok(o) => o,
        Err(panic) => {
            tracing::error!(record.id = %rec.id, job.id = %rec.job_id,
                panic = faults::panic_message(panic.as_ref()),
                "generating a record panicked; the record fails with internal_error");
            Some(faults::panicked())
        }
    };
    let Some(generated) = outcome else {
        not_generated(&inner, &rec).await;
        return;
    };
    held.unsent.one_sent();
    let mut done = finished(rec, generated);
    done.suspect = held.suspect.take();
    // The writer outlives every record task, so a closed channel means shutdown raced us; the
    // record stays in flight and is released.
    let _ = tx.send(done).await;
    // The lease and slot free only once the result is queued, so the writer's backlog bounds
    // claiming.
    drop(held);
}

/// A record whose seed row could not be read: `None` when the database was away (the record
/// goes back to the queue, to be read again by a later claim), else failed with
/// `seed_read_failed` (the dataset is gone or damaged: reading again cannot help).
fn seed_read_failed(rec: &ClaimedRecord, e: &SeedReadError) -> Option<Generated> {
    if e.is_transient() {
        tracing::warn!(record.id = %rec.id, job.id = %rec.job_id, error = %e,
            "reading the record's seed row failed; the record will be re-claimed");
        return None;
    }
    tracing::warn!(record.id = %rec.id, job.id = %rec.job_id, error = %e,
        "the record's seed row cannot be read; the record fails");
    Some(Generated::failed(RecordError::new(
        RecordErrorCode::SeedReadFailed,
        None,
        e.to_string(),
    )))
}

/// Settles a record that was not generated (its job could not be loaded, its seed row not
/// read, or it was claimed ahead and shutdown came before it started). Its chunk goes back
/// once its other records here are settled: otherwise lease renewal would keep it claimed, and
/// this record unworked, for as long as this replica runs.
async fn not_generated(inner: &Inner, rec: &ClaimedRecord) {
    let release = inner.settle([(rec.chunk, Settled::GiveBack)]);
    inner.release(&release).await;
}

/// A generated record, on its way to the writer.
fn finished(rec: ClaimedRecord, generated: Generated) -> Finished {
    Finished {
        job_id: rec.job_id,
        result: RecordResult {
            id: rec.id,
            job_id: rec.job_id,
            index: rec.index,
            chunk: rec.chunk,
            attempts: rec.attempts,
            outcome: generated.outcome,
            selection: generated.selection,
            traces: generated.traces,
            usage: generated.usage,
            column_usage: generated.column_usage,
            tool_usage: generated.tool_usage,
            media: generated.media,
        },
        suspect: None,
    }
}

/// How often the pool looks for cancels of the jobs it has records of in flight.
const CANCEL_POLL: Duration = Duration::from_secs(1);

/// Stops the records in flight of jobs that were cancelled, on any replica: every
/// [`CANCEL_POLL`] it asks the store which of their jobs a cancel reached and fires those
/// jobs' tokens. Without it a cancelled job's records ran to their end, however long they
/// waited on a model, a tool or a validator's backoff.
async fn watch_cancels(inner: Arc<Inner>, stop: CancellationToken) {
    loop {
        tokio::select! {
            () = tokio::time::sleep(CANCEL_POLL) => {}
            () = stop.cancelled() => return,
        }
        let mut jobs: Vec<JobId> = inner.in_flight().keys().map(|c| c.job_id).collect();
        jobs.sort_unstable_by_key(|j| j.0);
        jobs.dedup();
        // Tokens of jobs with nothing in flight go (a record takes its token after the claim
        // noted it in flight, so none is dropped under a running record).
        inner
            .cancels
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|job, _| jobs.binary_search_by_key(&job.0, |j| j.0).is_ok());
        if jobs.is_empty() {
            continue;
        }
        match inner.queue.cancelled_jobs(&jobs).await {
            Ok(cancelled) => {
                for job in cancelled {
                    inner.job_cancel(job).cancel();
                }
            }
            Err(e) => tracing::warn!(error = %e, "looking for cancelled jobs failed"),
        }
    }
}

/// Extends the leases of the chunks in flight every third of the lease time.
///
/// Only those: a chunk this replica still holds in the database but no longer works on (the
/// writer gave up on its results while the database was away) must be left to expire, so a
/// claim takes it over. Renewing every lease of the owner kept such records `in_progress` for
/// as long as the replica lived, and their job never finished.
async fn renew_leases(inner: Arc<Inner>, stop: CancellationToken) {
    let ttl = inner.cfg.lease_ttl();
    let every = ttl / 3;
    loop {
        tokio::select! {
            () = tokio::time::sleep(every) => {}
            () = stop.cancelled() => return,
        }
        let chunks: Vec<ChunkKey> = inner.in_flight().keys().copied().collect();
        if let Err(e) = inner.queue.renew_leases(&inner.owner, &chunks, ttl).await {
            tracing::warn!(error = %e, "renewing leases failed");
        }
    }
}
