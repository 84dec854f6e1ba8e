//! The Postgres work queue ([`Queue`]): leases renewed and released, cancellation and job
//! finalization here; claims and batch writes run the shared algorithms of `queue/claim.rs` and
//! `queue/complete.rs` over this backend's steps (`claim_sql.rs`, `complete_sql.rs` beside this
//! file).
//!
//! Each operation is one read-committed transaction. Claims lock the stale chunks they look at
//! with `for update skip locked`, and carve a new chunk under the job's cursor (`job_cursors`,
//! `for update`) while sharing the job row (`for share`); writers lock their own chunks in key
//! order. Every statement that could wait on a chunk while holding a job row (cancel,
//! finalize) skips locked chunks instead, so the locks these statements take by name form no
//! cycle. The locks Postgres takes on its own (a foreign key's key-share lock on the job row; a
//! unique index's wait on an insert under way) are not in that order, and Postgres may break a
//! cycle among them (a writer's key-share lock against a carve that then takes the job row
//! `for update`, which happens under load); so each operation here that may wait on a lock
//! while holding another (claim, batch write, cancel, finalize, release) is one transaction
//! that [`rerun`] runs again when Postgres ends it to break a deadlock, as Postgres advises. Renewals skip
//! locked chunks and a job's failure locks one row: neither can be part of a cycle.

mod claim_sql;
mod complete_sql;

use std::future::Future;
use std::time::Duration;

use async_trait::async_trait;
use futures::TryFutureExt;
use sqlx::{Postgres, Transaction};
use uuid::Uuid;

use crate::domain::job::JobError;
use crate::domain::{JobId, RecordId};
use crate::queue::chunks::Rest;
use crate::queue::finish::{finish_set, finishable};
use crate::queue::{
    CancelOutcome, ChunkKey, Claim, ClaimPolicy, Queue, RecordResult, StoreError, cancel, claim,
    complete,
};
use crate::store::postgres::{Job, PgStore};
use crate::store::reads;
use crate::store::selection;
use claim_sql::PgClaim;
use complete_sql::PgComplete;

/// Inserts a given-back chunk (the rest of a cut one).
const INSERT_REST: &str = "\
    insert into chunks (job_id, start_idx, end_idx, lease_owner, lease_expires_at, attempts, \
                        lease_expiries, written) \
    values ($1, $2, $3, null, null, $4, $5, $6)";

/// Inserts results (only the new ones: an index written before keeps its first result).
pub(super) const INSERT_RECORDS: &str = "\
    insert into records (id, job_id, idx, status, \"values\", attempts, error_code, \
                         error_message, error_column, error_stage, selection) \
    select * from unnest($1::uuid[], $2::uuid[], $3::bigint[], $4::text[], $5::jsonb[], \
                         $6::bigint[], $7::text[], $8::text[], $9::text[], $10::text[], \
                         $11::text[]) \
    on conflict (job_id, idx) do nothing \
    returning id, job_id, idx";

/// Chunks of the jobs `$1` that will never finish now that the job is `cancelling`: their
/// lease expired, or they were given back. Locked ones (a claim is looking at them) are
/// skipped: the transaction holding this job's row must not wait on a chunk.
const DROP_DEAD_CHUNKS: &str = "\
    delete from chunks where (job_id, start_idx) in ( \
        select c.job_id, c.start_idx from chunks c \
        where c.job_id = any($1) and (c.lease_owner is null or c.lease_expires_at <= now()) \
          and c.job_id in (select id from jobs where id = any($1) and status = 'cancelling') \
        for update of c skip locked)";

/// Finishes those of jobs `$1` that have nothing left to do (see `queue::finish`). When two
/// replicas race, the second waits for the first's row lock, re-checks the `where` on the new
/// row version, matches nothing and returns nothing.
const FINALIZE: &str = concat!(
    "update jobs set ",
    finish_set!(),
    ", finished_at = now(), updated_at = now() where id = any($1) and ",
    finishable!(),
    " returning id"
);

/// How many times [`rerun`] runs a transaction before a deadlock is the caller's error: enough
/// to ride out an unlucky interleaving, few enough that a cycle that keeps forming shows.
const RUNS: u32 = 4;

/// Runs `tx`, one whole transaction, until it ends other than by Postgres breaking a deadlock
/// or a serialization failure ([`StoreError::is_rerunnable`]: nothing of it was applied), at
/// most [`RUNS`] times. The other transaction of the cycle went on once this one let go, so
/// running again at once finds the locks free or waits for them in the usual way.
async fn rerun<T, F, Fut>(operation: &'static str, mut tx: F) -> Result<T, StoreError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, StoreError>>,
{
    let mut run = 1;
    loop {
        match tx().await {
            Err(e) if e.is_rerunnable() && run < RUNS => {
                tracing::warn!(error = %e, operation, run,
                    "the database ended a queue transaction to break a lock cycle; running it again");
                run += 1;
            }
            done => return done,
        }
    }
}

#[async_trait]
impl Queue for PgStore {
    fn parallel_writes(&self) -> usize {
        let pool = usize::try_from(self.pool.options().get_max_connections()).unwrap_or(1);
        (pool / 2).max(1)
    }

    async fn claim(
        &self,
        owner: &str,
        limit: u32,
        lease: Duration,
        policy: ClaimPolicy,
    ) -> Result<Claim, StoreError> {
        rerun("claim", || async {
            let tx = self.pool.begin().await?;
            let mut steps = PgClaim { tx, owner, lease };
            let out = claim::claim(&mut steps, limit, policy).await?;
            steps.tx.commit().await?;
            Ok(out)
        })
        .await
    }

    async fn complete_records(
        &self,
        owner: &str,
        results: &[RecordResult],
    ) -> Result<Vec<RecordId>, StoreError> {
        let (results, keys) = complete::prepare(results);
        if results.is_empty() {
            return Ok(Vec::new());
        }
        rerun("complete_records", || async {
            let tx = self.pool.begin().await?;
            let mut steps = PgComplete { tx, owner };
            let written = complete::complete(&mut steps, &results, &keys).await?;
            steps.tx.commit().await?;
            Ok(written)
        })
        .await
    }

    async fn request_cancel(&self, id: JobId) -> Result<CancelOutcome, StoreError> {
        rerun("request_cancel", || async {
            let mut tx = self.pool.begin().await?;
            let live: Option<Uuid> = sqlx::query_scalar(
                "update jobs set status = 'cancelling', updated_at = now() \
                 where id = $1 and status in ('queued', 'running') returning id",
            )
            .bind(id.0)
            .fetch_optional(&mut *tx)
            .await?;
            if live.is_some() {
                // Decided here, in the cancel's transaction: `cancelled` at once if nothing is in
                // flight, `completed` if nothing was left to cancel.
                finalize_in(&mut tx, &[id.0]).await?;
            }
            let outcome =
                cancel::read_outcome::<Postgres, Job>(&mut tx, id, live.is_some()).await?;
            tx.commit().await?;
            Ok(outcome)
        })
        .await
    }

    async fn fail_job(&self, id: JobId, error: &JobError) -> Result<bool, StoreError> {
        // No chunk is touched: claims skip a failed job, and records in flight may still land.
        let failed = sqlx::query(
            "update jobs set status = 'failed', error_code = $2, error_message = $3, \
             finished_at = now(), updated_at = now() \
             where id = $1 and status in ('queued', 'running')",
        )
        .bind(id.0)
        .bind(&error.code)
        .bind(&error.message)
        .execute(&self.pool)
        .await?;
        Ok(failed.rows_affected() == 1)
    }

    async fn finalize_jobs(&self, ids: &[JobId]) -> Result<Vec<JobId>, StoreError> {
        let mut ids: Vec<Uuid> = ids.iter().map(|id| id.0).collect();
        ids.sort_unstable();
        ids.dedup();
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let mut done = rerun("finalize_jobs", || async {
            let mut tx = self.pool.begin().await?;
            let done = finalize_in(&mut tx, &ids).await?;
            tx.commit().await?;
            Ok(done)
        })
        .await?;
        done.sort_unstable();
        Ok(done.into_iter().map(JobId).collect())
    }

    async fn release_chunks(&self, owner: &str, chunks: &[ChunkKey]) -> Result<u64, StoreError> {
        if chunks.is_empty() {
            return Ok(0);
        }
        let jobs: Vec<Uuid> = chunks.iter().map(|k| k.job_id.0).collect();
        let starts: Vec<i64> = chunks.iter().map(|k| i64::from(k.start)).collect();
        // Waits on chunks a batch write holds, possibly holding others: a cycle is possible.
        let done = rerun("release_chunks", || {
            sqlx::query(
                "update chunks c \
                 set lease_owner = null, lease_expires_at = null, updated_at = now() \
                 from unnest($2::uuid[], $3::bigint[]) as k(job_id, start_idx) \
                 where c.job_id = k.job_id and c.start_idx = k.start_idx and c.lease_owner = $1",
            )
            .bind(owner)
            .bind(&jobs)
            .bind(&starts)
            .execute(&self.pool)
            .map_err(StoreError::from)
        })
        .await?;
        Ok(done.rows_affected())
    }

    async fn renew_leases(
        &self,
        owner: &str,
        chunks: &[ChunkKey],
        lease: Duration,
    ) -> Result<u64, StoreError> {
        if chunks.is_empty() {
            return Ok(0);
        }
        // Skips chunks locked by a write under way: waiting here could deadlock with the
        // writer's locks in another order, and the next renewal (a third of a lease later)
        // gets them.
        let done = sqlx::query(
            "update chunks set lease_expires_at = now() + $2, updated_at = now() \
             where (job_id, start_idx) in ( \
                 select c.job_id, c.start_idx from chunks c \
                 join unnest($3::uuid[], $4::bigint[]) as k(job_id, start_idx) \
                   on c.job_id = k.job_id and c.start_idx = k.start_idx \
                 where c.lease_owner = $1 \
                 for update of c skip locked)",
        )
        .bind(owner)
        .bind(lease)
        .bind(chunks.iter().map(|k| k.job_id.0).collect::<Vec<_>>())
        .bind(
            chunks
                .iter()
                .map(|k| i64::from(k.start))
                .collect::<Vec<_>>(),
        )
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected())
    }

    async fn unclaimed_records(&self) -> Result<u64, StoreError> {
        reads::unclaimed_records(&self.pool).await
    }

    async fn cancelled_jobs(&self, ids: &[JobId]) -> Result<Vec<JobId>, StoreError> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let ids: Vec<Uuid> = ids.iter().map(|id| id.0).collect();
        let found: Vec<Uuid> = sqlx::query_scalar(
            "select id from jobs where status in ('cancelling', 'cancelled') and id = any($1)",
        )
        .bind(&ids)
        .fetch_all(&self.pool)
        .await?;
        Ok(found.into_iter().map(JobId).collect())
    }
}

pub(super) async fn insert_rest(
    tx: &mut Transaction<'_, Postgres>,
    job: Uuid,
    rest: Rest,
    attempts: i64,
    lease_expiries: u32,
) -> Result<(), StoreError> {
    sqlx::query(INSERT_REST)
        .bind(job)
        .bind(i64::from(rest.start))
        .bind(i64::from(rest.end))
        .bind(attempts)
        .bind(i64::from(lease_expiries))
        .bind(i64::from(rest.written))
        .execute(&mut **tx)
        .await?;
    Ok(())
}

/// Finalizes the jobs `ids` (sorted) in `tx`; returns those that changed. See
/// `Queue::finalize_jobs`.
async fn finalize_in(
    tx: &mut Transaction<'_, Postgres>,
    ids: &[Uuid],
) -> Result<Vec<Uuid>, StoreError> {
    sqlx::query(DROP_DEAD_CHUNKS)
        .bind(ids)
        .execute(&mut **tx)
        .await?;
    let done: Vec<Uuid> = sqlx::query_scalar(FINALIZE)
        .bind(ids)
        .fetch_all(&mut **tx)
        .await?;
    for &id in &done {
        selection::trim(&mut **tx, id).await?;
    }
    Ok(done)
}
