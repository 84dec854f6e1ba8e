//! The SQLite work queue ([`Queue`]): leases renewed and released, cancellation and job
//! finalization here; claims and batch writes run the shared algorithms of `queue/claim.rs` and
//! `queue/complete.rs` over this backend's steps (`claim_sql.rs`, `complete_sql.rs` beside this
//! file).
//!
//! Each operation is one transaction begun `immediate`, so its reads and writes see no other
//! writer in between: that is what makes a claim exclusive without `for update skip locked`,
//! and a completion's lease check (the fence) hold until its commit.
//!
//! Statements whose text depends on a count (multi-row inserts, `in` lists) are not kept in
//! the connection's statement cache (`persistent(false)`): each distinct batch size was a
//! prepared statement of its own, up to 100 per connection, some of them a thousand rows wide,
//! and the cache filled as a long job met more sizes (memory that grew with the records
//! written).

mod claim_sql;
mod complete_sql;

use std::time::Duration;

use async_trait::async_trait;
use sqlx::{QueryBuilder, Sqlite, Transaction};
use uuid::Uuid;

use crate::domain::job::JobError;
use crate::domain::{JobId, RecordId};
use crate::queue::chunks::Rest;
use crate::queue::finish::{finish_set, finishable};
use crate::queue::{
    CancelOutcome, ChunkKey, Claim, ClaimPolicy, Queue, RecordResult, StoreError, cancel, claim,
    complete,
};
use crate::store::reads;
use crate::store::selection;
use crate::store::sqlite::{Job, SqliteStore, expiry_us, now_us, push_ids};
use claim_sql::SqliteClaim;
use complete_sql::SqliteComplete;

#[async_trait]
impl Queue for SqliteStore {
    async fn claim(
        &self,
        owner: &str,
        limit: u32,
        lease: Duration,
        policy: ClaimPolicy,
    ) -> Result<Claim, StoreError> {
        let now = now_us();
        let (_write, tx) = self.begin_write().await?;
        let mut steps = SqliteClaim {
            tx,
            owner,
            now,
            expires: expiry_us(now, lease),
        };
        let out = claim::claim(&mut steps, limit, policy).await?;
        steps.tx.commit().await?;
        Ok(out)
    }

    async fn renew_leases(
        &self,
        owner: &str,
        chunks: &[ChunkKey],
        lease: Duration,
    ) -> Result<u64, StoreError> {
        let now = now_us();
        self.update_owned(owner, chunks, |qb| {
            qb.push("lease_expires_at = ")
                .push_bind(expiry_us(now, lease))
                .push(", updated_at = ")
                .push_bind(now);
        })
        .await
    }

    async fn release_chunks(&self, owner: &str, chunks: &[ChunkKey]) -> Result<u64, StoreError> {
        self.update_owned(owner, chunks, |qb| {
            qb.push("lease_owner = null, lease_expires_at = null, updated_at = ")
                .push_bind(now_us());
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
        let now = now_us();
        let (_write, tx) = self.begin_write().await?;
        let mut steps = SqliteComplete { tx, owner, now };
        let written = complete::complete(&mut steps, &results, &keys).await?;
        steps.tx.commit().await?;
        Ok(written)
    }

    async fn request_cancel(&self, id: JobId) -> Result<CancelOutcome, StoreError> {
        let now = now_us();
        let (_write, mut tx) = self.begin_write().await?;
        let live: Option<Uuid> = sqlx::query_scalar(
            "update jobs set status = 'cancelling', updated_at = $2 \
             where id = $1 and status in ('queued', 'running') returning id",
        )
        .bind(id.0)
        .bind(now)
        .fetch_optional(&mut *tx)
        .await?;
        if live.is_some() {
            // Decided here, in the cancel's transaction: `cancelled` at once if nothing is in
            // flight, `completed` if nothing was left to cancel.
            finalize_in(&mut tx, &[id.0], now).await?;
        }
        let outcome = cancel::read_outcome::<Sqlite, Job>(&mut tx, id, live.is_some()).await?;
        tx.commit().await?;
        Ok(outcome)
    }

    async fn fail_job(&self, id: JobId, error: &JobError) -> Result<bool, StoreError> {
        // No chunk is touched: claims skip a failed job, and records in flight may still land.
        let _write = self.write_lock().await;
        let failed = sqlx::query(
            "update jobs set status = 'failed', error_code = $2, error_message = $3, \
             finished_at = $4, updated_at = $4 \
             where id = $1 and status in ('queued', 'running')",
        )
        .bind(id.0)
        .bind(&error.code)
        .bind(&error.message)
        .bind(now_us())
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
        let now = now_us();
        let (_write, mut tx) = self.begin_write().await?;
        let mut done = finalize_in(&mut tx, &ids, now).await?;
        tx.commit().await?;
        done.sort_unstable();
        Ok(done.into_iter().map(JobId).collect())
    }

    async fn unclaimed_records(&self) -> Result<u64, StoreError> {
        reads::unclaimed_records(&self.pool).await
    }

    async fn cancelled_jobs(&self, ids: &[JobId]) -> Result<Vec<JobId>, StoreError> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let mut qb = QueryBuilder::<Sqlite>::new(
            "select id from jobs where status in ('cancelling', 'cancelled') and id in ",
        );
        push_ids(&mut qb, ids.iter().map(|id| id.0));
        let found: Vec<uuid::Uuid> = qb
            .build_query_scalar()
            .persistent(false)
            .fetch_all(&self.pool)
            .await?;
        Ok(found.into_iter().map(JobId).collect())
    }
}

impl SqliteStore {
    /// `update chunks set <set>` on those of `chunks` that `owner` still holds; how many.
    async fn update_owned(
        &self,
        owner: &str,
        chunks: &[ChunkKey],
        set: impl FnOnce(&mut QueryBuilder<Sqlite>),
    ) -> Result<u64, StoreError> {
        if chunks.is_empty() {
            return Ok(0);
        }
        let mut qb = QueryBuilder::<Sqlite>::new("update chunks set ");
        set(&mut qb);
        let _write = self.write_lock().await;
        qb.push(" where lease_owner = ")
            .push_bind(owner)
            .push(" and (job_id, start_idx) in ");
        push_keys(&mut qb, chunks);
        Ok(qb
            .build()
            .persistent(false)
            .execute(&self.pool)
            .await?
            .rows_affected())
    }
}

/// Appends `((?, ?), ...)`: one `(job_id, start_idx)` row value per chunk. Callers never pass
/// an empty list.
pub(super) fn push_keys(qb: &mut QueryBuilder<Sqlite>, keys: &[ChunkKey]) {
    qb.push("(");
    let mut list = qb.separated(", ");
    for k in keys {
        list.push("(")
            .push_bind_unseparated(k.job_id.0)
            .push_unseparated(", ")
            .push_bind_unseparated(i64::from(k.start))
            .push_unseparated(")");
    }
    list.push_unseparated(")");
}

pub(super) async fn insert_rest(
    tx: &mut Transaction<'_, Sqlite>,
    job: Uuid,
    rest: Rest,
    attempts: i64,
    lease_expiries: u32,
    now: i64,
) -> Result<(), StoreError> {
    sqlx::query(
        "insert into chunks (job_id, start_idx, end_idx, lease_owner, lease_expires_at, \
         attempts, lease_expiries, written, created_at, updated_at) \
         values ($1, $2, $3, null, null, $4, $5, $6, $7, $7)",
    )
    .bind(job)
    .bind(i64::from(rest.start))
    .bind(i64::from(rest.end))
    .bind(attempts)
    .bind(i64::from(lease_expiries))
    .bind(i64::from(rest.written))
    .bind(now)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// Finalizes the jobs `ids` (sorted, not empty) in `tx` at `now`; returns those that changed.
/// See `Queue::finalize_jobs`.
async fn finalize_in(
    tx: &mut Transaction<'_, Sqlite>,
    ids: &[Uuid],
    now: i64,
) -> Result<Vec<Uuid>, StoreError> {
    // In a cancelling job, chunks that will never finish go: those whose lease expired (their
    // worker died, and claims skip the job) and those given back.
    let mut qb = QueryBuilder::<Sqlite>::new(
        "delete from chunks where (lease_owner is null or lease_expires_at <= ",
    );
    qb.push_bind(now)
        .push(") and job_id in (select id from jobs where status = 'cancelling' and id in ");
    push_ids(&mut qb, ids.iter().copied());
    qb.push(")");
    qb.build().persistent(false).execute(&mut **tx).await?;

    // Finished jobs (see `queue::finish`).
    let mut qb = QueryBuilder::<Sqlite>::new(concat!(
        "update jobs set ",
        finish_set!(),
        ", finished_at = "
    ));
    qb.push_bind(now)
        .push(", updated_at = ")
        .push_bind(now)
        .push(concat!(" where ", finishable!(), " and id in "));
    push_ids(&mut qb, ids.iter().copied());
    qb.push(" returning id");
    let done: Vec<Uuid> = qb
        .build_query_scalar()
        .persistent(false)
        .fetch_all(&mut **tx)
        .await?;
    for &id in &done {
        selection::trim(&mut **tx, id).await?;
    }
    Ok(done)
}
