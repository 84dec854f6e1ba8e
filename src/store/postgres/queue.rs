//! The Postgres work queue: chunk claims, completions, cancellation and job finalization.
//!
//! Each operation is one read-committed transaction. Claims lock the stale chunks they look at
//! with `for update skip locked` and the job row they carve a new chunk from with `for update`;
//! writers lock their own chunks in key order. Every statement that could wait on a chunk
//! while holding a job row (cancel, finalize) skips locked chunks instead, so no two of these
//! transactions can wait on each other in a cycle.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use serde_json::Value;
use sqlx::{Postgres, Transaction};
use uuid::Uuid;

use super::claim::PgClaim;
use super::{Job, PgStore};
use crate::domain::{JobId, RecordId};
use crate::store::chunks::{Rest, to_count};
use crate::store::claim;
use crate::store::rows::job_columns;
use crate::store::rows::{self, Written, dedup_results, dedup_traces};
use crate::store::{
    CancelOutcome, ChunkKey, Claim, ClaimPolicy, JobError, RecordResult, RecordStage, StoreError,
    storable, usage,
};

/// Inserts a given-back chunk (the rest of a cut one).
const INSERT_REST: &str = "\
    insert into chunks (job_id, start_idx, end_idx, lease_owner, lease_expires_at, attempts, \
                        lease_expiries, written) \
    values ($1, $2, $3, null, null, $4, $5, $6)";

/// Inserts results (only the new ones: an index written before keeps its first result).
pub(super) const INSERT_RECORDS: &str = "\
    insert into records (id, job_id, idx, status, \"values\", attempts, error_code, \
                         error_message, error_column, error_stage) \
    select * from unnest($1::uuid[], $2::uuid[], $3::bigint[], $4::text[], $5::jsonb[], \
                         $6::bigint[], $7::text[], $8::text[], $9::text[], $10::text[]) \
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

impl PgStore {
    pub(super) async fn claim(
        &self,
        owner: &str,
        limit: u32,
        lease: Duration,
        policy: ClaimPolicy,
    ) -> Result<Claim, StoreError> {
        let tx = self.pool.begin().await?;
        let mut steps = PgClaim { tx, owner, lease };
        let out = claim::claim(&mut steps, limit, policy).await?;
        steps.tx.commit().await?;
        Ok(out)
    }

    pub(super) async fn complete(
        &self,
        owner: &str,
        results: &[RecordResult],
    ) -> Result<Vec<RecordId>, StoreError> {
        let results: Vec<Cow<'_, RecordResult>> = dedup_results(results)
            .into_iter()
            .map(storable::storable)
            .collect();
        if results.is_empty() {
            return Ok(Vec::new());
        }
        let mut keys: Vec<ChunkKey> = results.iter().map(|r| r.chunk).collect();
        keys.sort_unstable();
        keys.dedup();

        let mut tx = self.pool.begin().await?;
        // The fence: the chunks `owner` still holds, locked in key order (the only statement
        // that locks several chunks and waits), so a claim cannot take one over mid-write.
        let held: Vec<(Uuid, i64)> = sqlx::query_as(
            "select c.job_id, c.start_idx from chunks c \
             join unnest($2::uuid[], $3::bigint[]) as k(job_id, start_idx) \
               on c.job_id = k.job_id and c.start_idx = k.start_idx \
             where c.lease_owner = $1 \
             order by c.job_id, c.start_idx \
             for update of c",
        )
        .bind(owner)
        .bind(keys.iter().map(|k| k.job_id.0).collect::<Vec<_>>())
        .bind(keys.iter().map(|k| i64::from(k.start)).collect::<Vec<_>>())
        .fetch_all(&mut *tx)
        .await?;
        let held: std::collections::HashSet<ChunkKey> = held
            .into_iter()
            .map(|(j, s)| ChunkKey {
                job_id: JobId(j),
                start: to_count(s),
            })
            .collect();
        let fenced: Vec<&RecordResult> = results
            .iter()
            .map(|r| r.as_ref())
            .filter(|r| held.contains(&r.chunk))
            .collect();
        let mut written: HashMap<Uuid, JobId> = HashMap::new();
        if !fenced.is_empty() {
            let n = fenced.len();
            let mut ids = Vec::with_capacity(n);
            let mut jobs = Vec::with_capacity(n);
            let mut idxs = Vec::with_capacity(n);
            let mut statuses = Vec::with_capacity(n);
            let mut values = Vec::with_capacity(n);
            let mut attempts = Vec::with_capacity(n);
            let (mut codes, mut messages, mut columns, mut stages) = (
                Vec::with_capacity(n),
                Vec::with_capacity(n),
                Vec::with_capacity(n),
                Vec::with_capacity(n),
            );
            for result in &fenced {
                let w = Written::from(&result.outcome);
                ids.push(result.id.0);
                jobs.push(result.job_id.0);
                idxs.push(i64::from(result.index));
                statuses.push(w.status.as_str());
                values.push(w.values);
                attempts.push(i64::from(result.attempts));
                codes.push(w.error.map(|e| e.code.as_str()));
                messages.push(w.error.map(|e| e.message.as_str()));
                columns.push(w.error.and_then(|e| e.column.as_deref()));
                stages.push(
                    w.error
                        .and_then(|e| e.stage.as_ref())
                        .map(RecordStage::as_str),
                );
            }
            let inserted: Vec<(Uuid, Uuid, i64)> = sqlx::query_as(INSERT_RECORDS)
                .bind(ids)
                .bind(jobs)
                .bind(idxs)
                .bind(statuses)
                .bind(values)
                .bind(attempts)
                .bind(codes)
                .bind(messages)
                .bind(columns)
                .bind(stages)
                .fetch_all(&mut *tx)
                .await?;
            written = inserted
                .iter()
                .map(|(id, job, _)| (*id, JobId(*job)))
                .collect();
            // Count the new rows on their chunks; a chunk with all of its records written is
            // done and goes.
            let mut per_chunk: BTreeMap<ChunkKey, i64> = BTreeMap::new();
            for r in fenced.iter().filter(|r| written.contains_key(&r.id.0)) {
                *per_chunk.entry(r.chunk).or_default() += 1;
            }
            if !per_chunk.is_empty() {
                let (cj, cs, cn): (Vec<Uuid>, Vec<i64>, Vec<i64>) = per_chunk
                    .iter()
                    .map(|(k, n)| (k.job_id.0, i64::from(k.start), *n))
                    .collect();
                sqlx::query(
                    "update chunks c set written = c.written + k.n, updated_at = now() \
                     from unnest($1::uuid[], $2::bigint[], $3::bigint[]) as k(job_id, start_idx, n) \
                     where c.job_id = k.job_id and c.start_idx = k.start_idx",
                )
                .bind(&cj)
                .bind(&cs)
                .bind(cn)
                .execute(&mut *tx)
                .await?;
                sqlx::query(
                    "delete from chunks c \
                     using unnest($1::uuid[], $2::bigint[]) as k(job_id, start_idx) \
                     where c.job_id = k.job_id and c.start_idx = k.start_idx \
                       and c.written >= c.end_idx - c.start_idx",
                )
                .bind(cj)
                .bind(cs)
                .execute(&mut *tx)
                .await?;
            }
            // Traces and media of the new rows (a new row has none yet).
            let (mut record_ids, mut names, mut traces): (Vec<Uuid>, Vec<&str>, Vec<&Value>) =
                Default::default();
            for result in fenced.iter().filter(|r| written.contains_key(&r.id.0)) {
                for t in dedup_traces(&result.traces) {
                    record_ids.push(result.id.0);
                    names.push(t.column.as_str());
                    traces.push(&t.messages);
                }
            }
            if !record_ids.is_empty() {
                sqlx::query(
                    "insert into traces (record_id, column_name, messages) \
                     select * from unnest($1::uuid[], $2::text[], $3::jsonb[])",
                )
                .bind(record_ids)
                .bind(names)
                .bind(traces)
                .execute(&mut *tx)
                .await?;
            }
            for result in fenced.iter().filter(|r| written.contains_key(&r.id.0)) {
                for m in &result.media {
                    sqlx::query(
                        "insert into media (record_id, column_name, idx, mime_type, data) \
                         values ($1, $2, $3, $4, $5) on conflict do nothing",
                    )
                    .bind(result.id.0)
                    .bind(m.column.as_str())
                    .bind(i64::from(m.index))
                    .bind(m.mime_type.as_str())
                    .bind(m.data.as_slice())
                    .execute(&mut *tx)
                    .await?;
                }
            }
            // Usage of the written results only, in their transaction: exact whatever crashes,
            // and a retried batch whose first commit did land counts nothing twice.
            let deltas = usage::sum(
                fenced
                    .iter()
                    .filter_map(|r| written.get(&r.id.0).map(|job| (*job, &r.usage))),
            );
            super::usage::add(&mut tx, &deltas).await?;
            let tools = usage::sum_tools(
                fenced
                    .iter()
                    .filter_map(|r| written.get(&r.id.0).map(|job| (*job, &r.tool_usage))),
            );
            super::usage::add_tools(&mut tx, &tools).await?;
            let tally = usage::tally(fenced.iter().filter_map(|r| {
                written
                    .get(&r.id.0)
                    .map(|job| (*job, r.outcome.is_completed()))
            }));
            super::usage::add_records(&mut tx, &tally).await?;
        }
        tx.commit().await?;
        // In the order of `results`, like the SQLite store.
        Ok(results
            .iter()
            .filter(|r| written.contains_key(&r.id.0))
            .map(|r| r.id)
            .collect())
    }

    pub(super) async fn cancel(&self, id: JobId) -> Result<CancelOutcome, StoreError> {
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
        let job: Option<Job> = sqlx::query_as(concat!(
            "select ",
            job_columns!(),
            " from jobs where id = $1"
        ))
        .bind(id.0)
        .fetch_optional(&mut *tx)
        .await?;
        tx.commit().await?;
        let Some(job) = job else {
            return Ok(CancelOutcome::NotFound);
        };
        Ok(rows::cancel_outcome(job.try_into()?, live.is_some()))
    }

    pub(super) async fn fail(&self, id: JobId, error: &JobError) -> Result<(), StoreError> {
        // No chunk is touched: claims skip a failed job, and records in flight may still land.
        sqlx::query(
            "update jobs set status = 'failed', error_code = $2, error_message = $3, \
             finished_at = now(), updated_at = now() \
             where id = $1 and status in ('queued', 'running')",
        )
        .bind(id.0)
        .bind(&error.code)
        .bind(&error.message)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    pub(super) async fn finalize(&self, ids: &[JobId]) -> Result<Vec<JobId>, StoreError> {
        let mut ids: Vec<Uuid> = ids.iter().map(|id| id.0).collect();
        ids.sort_unstable();
        ids.dedup();
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let mut tx = self.pool.begin().await?;
        let mut done = finalize_in(&mut tx, &ids).await?;
        tx.commit().await?;
        done.sort_unstable();
        Ok(done.into_iter().map(JobId).collect())
    }

    pub(super) async fn release(
        &self,
        owner: &str,
        chunks: &[ChunkKey],
    ) -> Result<u64, StoreError> {
        if chunks.is_empty() {
            return Ok(0);
        }
        let done = sqlx::query(
            "update chunks c \
             set lease_owner = null, lease_expires_at = null, updated_at = now() \
             from unnest($2::uuid[], $3::bigint[]) as k(job_id, start_idx) \
             where c.job_id = k.job_id and c.start_idx = k.start_idx and c.lease_owner = $1",
        )
        .bind(owner)
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

    pub(super) async fn renew(
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
}

pub(super) async fn delete_chunk(
    tx: &mut Transaction<'_, Postgres>,
    job: Uuid,
    start: i64,
) -> Result<(), StoreError> {
    sqlx::query("delete from chunks where job_id = $1 and start_idx = $2")
        .bind(job)
        .bind(start)
        .execute(&mut **tx)
        .await?;
    Ok(())
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
/// `Store::finalize_jobs`.
async fn finalize_in(
    tx: &mut Transaction<'_, Postgres>,
    ids: &[Uuid],
) -> Result<Vec<Uuid>, StoreError> {
    sqlx::query(DROP_DEAD_CHUNKS)
        .bind(ids)
        .execute(&mut **tx)
        .await?;
    // A live job with every index claimed and no chunk left, or a cancelling one with no
    // chunk left, is done. When two replicas race, the second waits for the first's row lock,
    // re-checks the `where` on the new row version, matches nothing and returns nothing. A
    // cancelling job all of whose records got a result (the cancel came when all were in
    // flight) ran to the end: `completed`.
    let done: Vec<Uuid> = sqlx::query_scalar(
        "update jobs \
         set status = case when status = 'cancelling' \
                             and (claimed_upto < num_records \
                                  or coalesce((select c.completed + c.failed \
                                               from job_record_counts c \
                                               where c.job_id = jobs.id), 0) < num_records) \
                           then 'cancelled' else 'completed' end, \
             finished_at = now(), updated_at = now() \
         where id = any($1) and status in ('queued', 'running', 'cancelling') \
           and (status = 'cancelling' or claimed_upto >= num_records) \
           and not exists (select 1 from chunks c where c.job_id = jobs.id) \
         returning id",
    )
    .bind(ids)
    .fetch_all(&mut **tx)
    .await?;
    Ok(done)
}
