//! The batch writer: collects finished records and writes them in one transaction per batch,
//! then reports the batch to the job service (early shutdown on the error rate, finalizing).

use std::collections::{BTreeSet, HashSet};
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use tokio::sync::mpsc;
use tokio::task::JoinSet;

use super::{Inner, Settled, faults};
use crate::domain::record::{RecordError, RecordErrorCode, RecordOutcome};
use crate::domain::usage::UsageCounts;
use crate::domain::{JobId, RecordId};
use crate::queue::storable::make_storable;
use crate::queue::{ChunkKey, RecordResult, StoreError};

/// A generated record on its way to the database.
#[derive(Debug)]
pub struct Finished {
    /// The record's job.
    pub job_id: JobId,
    /// Values or error, traces, and LLM usage (written with the record, in its transaction).
    pub result: RecordResult,
    /// A suspect record's hold on the claimer's suspect token, let go once the write is
    /// settled: no other suspect record starts on this replica while this one's lease could
    /// still expire with it (see [`crate::queue::ClaimedRecord::suspect`]).
    pub suspect: Option<tokio::sync::OwnedSemaphorePermit>,
}

/// Runs until every sender is dropped and the last batch is written, with up to `writers`
/// batch writes at once ([`crate::config::WorkersConfig::writers`]).
///
/// With one writer (SQLite) each batch is written before the next is gathered. With several
/// (Postgres), up to that many batches are written at once, each in its own transaction,
/// while the next gathers: each batch settles its own leases and reports its own jobs, as
/// replicas writing the same job side by side already do, so nothing orders them.
pub(super) async fn run(inner: Arc<Inner>, mut rx: mpsc::Receiver<Finished>, writers: usize) {
    let max = inner.cfg.write_batch_size.max(1);
    let interval = Duration::from_millis(inner.cfg.write_interval_ms);
    let mut writing = JoinSet::new();
    while let Some(first) = rx.recv().await {
        let mut batch = vec![first];
        let deadline = tokio::time::Instant::now() + interval;
        while batch.len() < max {
            // Nothing queued, nothing on its way, and the last claim found nothing more:
            // waiting longer adds only latency (a job's last batch, a one-record job).
            if rx.is_empty() && inner.unsent.is_empty() {
                break;
            }
            tokio::select! {
                f = rx.recv() => match f {
                    Some(f) => batch.push(f),
                    None => break,
                },
                () = inner.unsent.drained() => {}
                () = tokio::time::sleep_until(deadline) => break,
            }
        }
        if writers == 1 {
            write(&inner, batch).await;
            continue;
        }
        while writing.len() >= writers {
            joined(writing.join_next().await);
        }
        let inner = inner.clone();
        writing.spawn(async move { write(&inner, batch).await });
    }
    while let Some(done) = writing.join_next().await {
        joined(Some(done));
    }
}

/// Logs a batch write task that panicked outside its store call (which [`complete`] catches).
fn joined(done: Option<Result<(), tokio::task::JoinError>>) {
    if let Some(Err(e)) = done {
        tracing::error!(error = %e, "a batch write panicked; its records were not written");
    }
}

/// Why one store write of results did not land.
enum WriteError {
    /// The store's answer: the database away, a conflict, or a value it refused.
    Store(StoreError),
    /// The write panicked (a bug under the store call; its transaction was dropped, so
    /// nothing is half-written). The panic's text, for the log.
    Panicked(String),
}

/// One store write of `results`, a panic in it caught. Uncaught, it would end the writer
/// task (with one writer, every later batch would wait forever) or, with several, leave the
/// batch's records counted in flight with their leases renewed until a restart. Caught, the
/// batch is written record by record like one the database refused, so a panic that follows
/// one record fails that record and the rest are written.
async fn complete(inner: &Inner, results: &[RecordResult]) -> Result<Vec<RecordId>, WriteError> {
    match AssertUnwindSafe(inner.queue.complete_records(&inner.owner, results))
        .catch_unwind()
        .await
    {
        Ok(written) => written.map_err(WriteError::Store),
        Err(payload) => Err(WriteError::Panicked(
            faults::panic_message(&*payload).to_owned(),
        )),
    }
}

/// Writes one batch, retrying while the database is away for up to one lease time: past that
/// the leases have expired and a claim (by any replica, this one included) re-runs the
/// records, so giving up loses nothing. Forgetting them below is what lets their leases lapse:
/// the renewer extends only records in flight.
async fn write(inner: &Inner, batch: Vec<Finished>) {
    // Results move into their own vector (the store takes a slice of them); what the
    // bookkeeping after the write needs is kept beside them, so values and traces are not copied.
    let mut results = Vec::with_capacity(batch.len());
    let mut batch_meta = Vec::with_capacity(batch.len());
    let mut suspects = Vec::new();
    for f in batch {
        suspects.extend(f.suspect);
        let mut result = f.result;
        // The store would do the same; doing it here lets the bookkeeping below (metrics, the
        // error rate) see the record as the store writes it.
        make_storable(&mut result);
        batch_meta.push(Meta {
            id: result.id,
            job_id: f.job_id,
            error_code: match &result.outcome {
                RecordOutcome::Completed { .. } => None,
                RecordOutcome::Failed { error, .. } => Some(error.code.clone()),
            },
            usage: result.usage.clone(),
        });
        results.push(result);
    }
    let mut batch = batch_meta;
    let settle: Vec<(RecordId, ChunkKey)> = results.iter().map(|r| (r.id, r.chunk)).collect();
    let mut written: HashSet<RecordId> = HashSet::new();
    let mut lapse: HashSet<RecordId> = HashSet::new();
    let give_up = tokio::time::Instant::now() + inner.cfg.lease_ttl();
    let mut backoff = Duration::from_millis(100);
    loop {
        match complete(inner, &results).await {
            Ok(ids) => {
                if ids.len() < results.len() {
                    tracing::warn!(
                        lost = results.len() - ids.len(),
                        "some records were taken over by another worker; their results were discarded"
                    );
                }
                written.extend(ids);
                break;
            }
            // The database refused a value the checks above did not foresee, or the write
            // panicked: retrying the batch would fail the same way forever, and hold every
            // record in it.
            Err(WriteError::Store(e)) if e.is_data_error() => {
                tracing::warn!(error = %e, records = results.len(),
                    "the database refused a value in the batch; writing its records one by one");
                written = write_each(inner, results, &mut batch, &mut lapse).await;
                break;
            }
            Err(WriteError::Panicked(panic)) => {
                tracing::error!(
                    panic,
                    records = results.len(),
                    "a batch write panicked; writing its records one by one"
                );
                written = write_each(inner, results, &mut batch, &mut lapse).await;
                break;
            }
            Err(WriteError::Store(e)) if tokio::time::Instant::now() < give_up => {
                tracing::warn!(error = %e, records = results.len(), "writing records failed; retrying");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(5));
            }
            Err(WriteError::Store(e)) => {
                tracing::error!(error = %e, records = results.len(),
                    "writing records failed past the lease time; they will be re-run");
                break;
            }
        }
    }
    let release = inner.settle(settle.into_iter().map(|(id, chunk)| {
        let how = if written.contains(&id) {
            Settled::Written
        } else if lapse.contains(&id) {
            Settled::Lapse
        } else {
            Settled::GiveBack
        };
        (chunk, how)
    }));
    inner.release(&release).await;
    drop(suspects);
    // Only what was written counts: a result fenced out or given up on is run again.
    let batch: Vec<Meta> = batch
        .into_iter()
        .filter(|m| written.contains(&m.id))
        .collect();
    count_metrics(inner, &batch);

    let jobs: BTreeSet<JobId> = batch.iter().map(|f| f.job_id).collect();
    let with_failures: BTreeSet<JobId> = batch
        .iter()
        .filter(|f| f.error_code.is_some())
        .map(|f| f.job_id)
        .collect();
    let jobs: Vec<JobId> = jobs.into_iter().collect();
    let with_failures: Vec<JobId> = with_failures.into_iter().collect();
    inner.jobs.records_written(&jobs, &with_failures).await;
}

/// What the bookkeeping after a write needs of one finished record.
struct Meta {
    id: RecordId,
    job_id: JobId,
    /// The record error code, when it failed.
    error_code: Option<RecordErrorCode>,
    usage: std::collections::BTreeMap<String, UsageCounts>,
}

fn count_metrics(inner: &Inner, batch: &[Meta]) {
    use crate::metrics as m;
    for f in batch {
        match &f.error_code {
            None => {
                metrics::counter!(m::RECORDS_FINISHED, "status" => "completed").increment(1);
            }
            Some(code) => {
                metrics::counter!(m::RECORDS_FINISHED, "status" => "failed").increment(1);
                metrics::counter!(m::RECORD_ERRORS, "code" => code.as_str().to_owned())
                    .increment(1);
            }
        }
        for (alias, u) in &f.usage {
            let alias = m::model_alias_label(alias, inner.jobs.is_server_model_alias(alias));
            metrics::counter!(m::LLM_REQUESTS, "model_alias" => alias.clone())
                .increment(u.requests);
            metrics::counter!(m::LLM_TOKENS, "model_alias" => alias.clone(), "kind" => "prompt")
                .increment(u.prompt_tokens);
            metrics::counter!(m::LLM_TOKENS, "model_alias" => alias.clone(), "kind" => "completion")
                .increment(u.completion_tokens);
            if u.cost_nanos > 0 {
                metrics::counter!(m::LLM_COST_NANOS, "model_alias" => alias.clone())
                    .increment(u.cost_nanos);
            }
        }
    }
}

/// Writes `results` one at a time, after a batch failed on a value the database refused or
/// panicked. A record the database refuses alone fails with `unstorable_value`, one whose write
/// panics alone with `internal_error` (values and traces dropped, usage kept: the requests were
/// made), so the others are written and no record is retried forever. A record whose failure
/// cannot be written either because that write panics too goes into `lapse` (see
/// [`Settled::Lapse`]); any other error leaves that record to be re-run. Returns the ids written.
async fn write_each(
    inner: &Inner,
    results: Vec<RecordResult>,
    batch: &mut [Meta],
    lapse: &mut HashSet<RecordId>,
) -> HashSet<RecordId> {
    let mut written = HashSet::new();
    for (result, meta) in results.into_iter().zip(batch.iter_mut()) {
        let error = match complete(inner, std::slice::from_ref(&result)).await {
            Ok(ids) => {
                written.extend(ids);
                continue;
            }
            Err(WriteError::Store(e)) if e.is_data_error() => {
                tracing::warn!(record.id = %result.id, error = %e,
                    "the database refused the record's result; failing it with unstorable_value");
                RecordError::new(
                    RecordErrorCode::UnstorableValue,
                    None,
                    "the database refused to store the record's values or traces",
                )
            }
            Err(WriteError::Panicked(panic)) => {
                tracing::error!(record.id = %result.id, panic,
                    "writing the record's result panicked; failing it with internal_error");
                RecordError::new(
                    RecordErrorCode::InternalError,
                    None,
                    "storing this record's result failed on an internal error (a bug in the \
                     service, logged on the server); its values and traces were dropped and \
                     the record is not retried",
                )
            }
            Err(WriteError::Store(e)) => {
                tracing::warn!(record.id = %result.id, error = %e,
                    "writing a record failed; it will be re-run");
                continue;
            }
        };
        let failed = RecordResult {
            id: result.id,
            job_id: result.job_id,
            index: result.index,
            chunk: result.chunk,
            attempts: result.attempts,
            outcome: RecordOutcome::Failed {
                values: None,
                error: error.clone(),
            },
            selection: None,
            traces: Vec::new(),
            usage: result.usage,
            column_usage: result.column_usage,
            tool_usage: result.tool_usage,
            media: Vec::new(),
        };
        match complete(inner, std::slice::from_ref(&failed)).await {
            Ok(ids) => {
                meta.error_code = Some(error.code);
                written.extend(ids);
            }
            Err(WriteError::Store(e)) => tracing::warn!(record.id = %failed.id, error = %e,
                "writing a record's failure failed; it will be re-run"),
            Err(WriteError::Panicked(panic)) => {
                tracing::error!(record.id = %failed.id, panic,
                    "writing a record's failure panicked too; its lease is left to expire, so \
                     workers.max_lease_expiries ends it with record_abandoned");
                lapse.insert(failed.id);
            }
        }
    }
    written
}
