//! The Postgres work queue: claims, completions, cancellation and job finalization.
//!
//! Each operation is one read-committed transaction. Claims lock the rows they pick with
//! `for update skip locked`; the other writers re-check their `where` clause on the latest row
//! version after waiting for a lock, which is what makes the fencing and status guards hold
//! under concurrency.

use std::borrow::Cow;
use std::collections::HashMap;
use std::time::Duration;

use serde_json::Value;
use sqlx::{Postgres, Transaction};
use uuid::Uuid;

use super::{Job, PgStore};
use crate::domain::{JobId, RecordId};
use crate::store::expired::{EXPIRED_MARGIN, SortedExpired, abandoned_message, to_count};
use crate::store::fair::{ClaimableJob, shares};
use crate::store::rows::job_columns;
use crate::store::rows::{self, ClaimedDb, Written, dedup_results, dedup_traces};
use crate::store::{
    CancelOutcome, Claim, ClaimPolicy, ClaimedRecord, JobError, RecordErrorCode, RecordResult,
    RecordStage, StoreError, storable, usage,
};

// The picking `select` carries the `limit` and the `skip locked`, so a claimer that meets rows
// locked by another one walks past them to the next free rows instead of coming back empty.
// `materialized` keeps the planner from inlining it into the update and re-running it.

/// In-progress records of live jobs whose lease expired (their worker died), locked. The
/// caller decides per record: fail it (abandoned), hand it out alone, or take it over.
const EXPIRED: &str = "\
    select r.id, r.lease_expiries from records r \
    where r.status = 'in_progress' and r.lease_expires_at <= now() \
      and r.job_id in (select j.id from jobs j where j.status in ('queued', 'running')) \
    order by r.job_id, r.idx \
    limit $1 \
    for update of r skip locked";

/// Takes over the expired records `$3` (locked by `EXPIRED` in the same transaction).
const TAKE_OVER: &str = "\
    update records r \
    set lease_owner = $1, lease_expires_at = now() + $2, attempts = r.attempts + 1, \
        lease_expiries = r.lease_expiries + 1, updated_at = now() \
    where r.id = any($3) \
    returning r.id, r.job_id, r.idx, r.attempts, r.lease_expiries";

/// Fails the expired records `$1` that killed their workers too often.
const ABANDON: &str = "\
    update records r \
    set status = 'failed', \"values\" = null, error_code = $2, error_message = $3, \
        error_column = null, error_stage = $4, lease_owner = null, \
        lease_expires_at = null, lease_expiries = r.lease_expiries + 1, updated_at = now() \
    where r.id = any($1) \
    returning r.id, r.job_id";

/// Live jobs with pending records, oldest first (ids are UUIDv7), with their owner and records
/// in progress, for fair shares. Small: one row per live job. A scalar subquery with `limit 1`
/// rather than `exists`: `exists` may become a semi-join that reads every pending record
/// (220 ms at 1M); the subquery is one probe of `records_pending` per live job (its `order by`
/// steers the planner to that index). The count reads the job's in-progress range of
/// `records_job_status`: at most what the workers hold.
const CLAIMABLE_JOBS: &str = "\
    select j.id, j.owner, \
           (select count(*) from records r \
            where r.job_id = j.id and r.status = 'in_progress') as busy \
    from jobs j \
    where j.status in ('queued', 'running') \
      and (select r.idx from records r \
           where r.job_id = j.id and r.status = 'pending' \
           order by r.idx limit 1) is not null \
    order by j.id";

/// Claims pending records of one job by index. Asked one job at a time, the planner always
/// walks `records_pending` in order and stops at the limit; a single query over all live jobs
/// ordered by `(job_id, idx)` is only planned that way with fresh statistics, and right after
/// a large insert (before autovacuum analyzes) it sorted every pending row on each claim.
const CLAIM_PENDING: &str = "\
    with picked as materialized ( \
        select r.id from records r \
        where r.job_id = $3 and r.status = 'pending' \
        order by r.idx \
        limit $4 \
        for update skip locked) \
    update records r \
    set status = 'in_progress', lease_owner = $1, lease_expires_at = now() + $2, \
        attempts = r.attempts + 1, updated_at = now() \
    from picked where r.id = picked.id \
    returning r.id, r.job_id, r.idx, r.attempts, r.lease_expiries";

/// Writes a batch of results, each only while `$1` still holds its lease (fencing).
const COMPLETE_RECORDS: &str = "\
    update records r \
    set status = v.status, \"values\" = v.vals, error_code = v.error_code, \
        error_message = v.error_message, error_column = v.error_column, \
        error_stage = v.error_stage, lease_owner = null, lease_expires_at = null, \
        updated_at = now() \
    from unnest($2::uuid[], $3::text[], $4::jsonb[], $5::text[], $6::text[], $7::text[], \
                $8::text[]) \
         as v(id, status, vals, error_code, error_message, error_column, error_stage) \
    where r.id = v.id and r.lease_owner = $1 and r.status = 'in_progress' \
    returning r.id, r.job_id";

/// Cancels the pending records of a job that is still `queued` or `running`; shared by cancel
/// and fail.
const CANCEL_PENDING: &str = "\
    update records set status = 'cancelled', updated_at = now() \
    where job_id = $1 and status = 'pending' \
      and exists (select 1 from jobs where id = $1 and status in ('queued', 'running'))";

impl PgStore {
    pub(super) async fn claim(
        &self,
        owner: &str,
        limit: u32,
        lease: Duration,
        policy: ClaimPolicy,
    ) -> Result<Claim, StoreError> {
        let mut out = Claim::default();
        let mut tx = self.pool.begin().await?;
        // Pin the index scans the claim queries are written for; they hold whatever the
        // statistics say. Without statistics (a new table, or a big job inserted before
        // autovacuum analyzes it) the planner guessed a handful of rows and chose a bitmap scan
        // plus a sort of every pending row: 400 ms per claim at 1M records, against 0.3 ms for
        // the ordered index scan. With stale ones it may seq-scan for "any pending record".
        // (`set_config(.., true)` is `set local`, as one statement a prepared query accepts.)
        sqlx::query(
            "select set_config('enable_bitmapscan', 'off', true), \
                    set_config('enable_seqscan', 'off', true)",
        )
        .execute(&mut *tx)
        .await?;
        // Expired leases first: they are older work, and usually few. Separate statements,
        // because `for update` cannot sit under a `union`, and one `or` would defeat the indexes.
        // Abandoned records do not count against the limit, hence the margin.
        let expired: Vec<(Uuid, i64)> = sqlx::query_as(EXPIRED)
            .bind(i64::from(limit) + EXPIRED_MARGIN)
            .fetch_all(&mut *tx)
            .await?;
        let sorted = SortedExpired::new(
            expired.into_iter().map(|(id, n)| (id, to_count(n))),
            limit,
            policy,
        );
        out.alone_waiting = sorted.alone_waiting;
        if !sorted.abandon.is_empty() {
            let code = RecordErrorCode::RecordAbandoned;
            let stage = code.stage();
            let rows: Vec<(Uuid, Uuid)> = sqlx::query_as(ABANDON)
                .bind(&sorted.abandon)
                .bind(code.as_str())
                .bind(abandoned_message(policy.max_lease_expiries))
                .bind(stage.as_ref().map(RecordStage::as_str))
                .fetch_all(&mut *tx)
                .await?;
            out.abandoned = rows
                .into_iter()
                .map(|(r, j)| (RecordId(r), JobId(j)))
                .collect();
        }
        let mut claimed: Vec<ClaimedDb> = Vec::new();
        if !sorted.take.is_empty() {
            claimed = sqlx::query_as(TAKE_OVER)
                .bind(owner)
                .bind(lease)
                .bind(&sorted.take)
                .fetch_all(&mut *tx)
                .await?;
        }
        // Pending records, unless the claim hands out a record that must run alone.
        let mut left = if sorted.alone {
            0
        } else {
            limit as usize - claimed.len()
        };
        if left > 0 {
            let mut jobs: Vec<ClaimableJob> =
                sqlx::query_as(CLAIMABLE_JOBS).fetch_all(&mut *tx).await?;
            // Rounds: a job that yields less than its share (its pending records are locked
            // by other claimers, or fewer than asked) drops out, and the next round shares
            // what is left among the others.
            while left > 0 && !jobs.is_empty() {
                let mut dry = Vec::new();
                for (i, want) in shares(&jobs, left) {
                    let got: Vec<ClaimedDb> = sqlx::query_as(CLAIM_PENDING)
                        .bind(owner)
                        .bind(lease)
                        .bind(jobs[i].id)
                        .bind(want as i64)
                        .fetch_all(&mut *tx)
                        .await?;
                    if got.len() < want {
                        dry.push(i);
                    }
                    jobs[i].busy += got.len() as i64;
                    left -= got.len();
                    claimed.extend(got);
                }
                let mut i = 0;
                jobs.retain(|_| {
                    i += 1;
                    !dry.contains(&(i - 1))
                });
            }
        }
        let mut claimed: Vec<ClaimedRecord> = rows::convert(claimed)?;
        if sorted.alone {
            for c in &mut claimed {
                c.alone = true;
            }
        }
        if !claimed.is_empty() {
            let mut jobs: Vec<Uuid> = claimed.iter().map(|c| c.job_id.0).collect();
            jobs.sort_unstable();
            jobs.dedup();
            // Only the first claim of a job waits on its row lock: later ones find it
            // `running` already and match nothing.
            sqlx::query(
                "update jobs \
                 set status = 'running', started_at = coalesce(started_at, now()), \
                     updated_at = now() \
                 where id = any($1) and status = 'queued'",
            )
            .bind(jobs)
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        // `returning` gives no order.
        claimed.sort_unstable_by_key(|c| (c.job_id, c.index));
        out.records = claimed;
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
        let n = results.len();
        let (mut ids, mut statuses, mut values) = (
            Vec::with_capacity(n),
            Vec::with_capacity(n),
            Vec::with_capacity(n),
        );
        let (mut codes, mut messages, mut columns, mut stages) = (
            Vec::with_capacity(n),
            Vec::with_capacity(n),
            Vec::with_capacity(n),
            Vec::with_capacity(n),
        );
        for result in &results {
            let w = Written::from(&result.outcome);
            ids.push(result.id.0);
            statuses.push(w.status.as_str());
            values.push(w.values);
            codes.push(w.error.map(|e| e.code.as_str()));
            messages.push(w.error.map(|e| e.message.as_str()));
            columns.push(w.error.and_then(|e| e.column.as_deref()));
            stages.push(
                w.error
                    .and_then(|e| e.stage.as_ref())
                    .map(RecordStage::as_str),
            );
        }

        let mut tx = self.pool.begin().await?;
        let written: Vec<(Uuid, Uuid)> = sqlx::query_as(COMPLETE_RECORDS)
            .bind(owner)
            .bind(ids)
            .bind(statuses)
            .bind(values)
            .bind(codes)
            .bind(messages)
            .bind(columns)
            .bind(stages)
            .fetch_all(&mut *tx)
            .await?;

        let written: HashMap<Uuid, JobId> = written
            .into_iter()
            .map(|(id, job)| (id, JobId(job)))
            .collect();
        if !written.is_empty() {
            let written_ids: Vec<Uuid> = written.keys().copied().collect();
            // The traces of the final attempt replace all earlier ones, including columns
            // this attempt did not reach.
            sqlx::query("delete from traces where record_id = any($1)")
                .bind(&written_ids)
                .execute(&mut *tx)
                .await?;
            let (mut record_ids, mut names, mut traces): (Vec<Uuid>, Vec<&str>, Vec<&Value>) =
                Default::default();
            for result in results.iter().filter(|r| written.contains_key(&r.id.0)) {
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
            // Media likewise: the final attempt's images replace all earlier ones.
            sqlx::query("delete from media where record_id = any($1)")
                .bind(written_ids)
                .execute(&mut *tx)
                .await?;
            for result in results.iter().filter(|r| written.contains_key(&r.id.0)) {
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
                results
                    .iter()
                    .filter_map(|r| written.get(&r.id.0).map(|job| (*job, &r.usage))),
            );
            super::usage::add(&mut tx, &deltas).await?;
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
        // Records first, then the job, as everywhere (see the module docs of `postgres`).
        sqlx::query(CANCEL_PENDING)
            .bind(id.0)
            .execute(&mut *tx)
            .await?;
        let live: Option<Uuid> = sqlx::query_scalar(
            "update jobs set status = 'cancelling', updated_at = now() \
             where id = $1 and status in ('queued', 'running') returning id",
        )
        .bind(id.0)
        .fetch_optional(&mut *tx)
        .await?;
        if live.is_some() {
            // Decided here, in the cancel's transaction: `cancelled` at once if nothing is in
            // flight, `completed` if nothing was left to cancel. This locks expired in-progress
            // records after the job row, against the usual order; no cycle can follow: those
            // records' holders never wait for this job's row (a claim of expired records only
            // updates `queued` jobs, and such a job has none; a completion does not touch
            // jobs; a finalize locks them only once the job is `cancelling`, which this
            // transaction has not committed yet).
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
        let mut tx = self.pool.begin().await?;
        sqlx::query(CANCEL_PENDING)
            .bind(id.0)
            .execute(&mut *tx)
            .await?;
        sqlx::query(
            "update jobs set status = 'failed', error_code = $2, error_message = $3, \
             finished_at = now(), updated_at = now() \
             where id = $1 and status in ('queued', 'running')",
        )
        .bind(id.0)
        .bind(&error.code)
        .bind(&error.message)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
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
}

/// Finalizes the jobs `ids` (sorted) in `tx`; returns those that changed. See
/// `Store::finalize_jobs`.
async fn finalize_in(
    tx: &mut Transaction<'_, Postgres>,
    ids: &[Uuid],
) -> Result<Vec<Uuid>, StoreError> {
    // In a cancelling job, records that will never run become cancelled: pending ones, and
    // in-progress ones whose lease expired (their worker died, and claims skip the job).
    sqlx::query(
        "update records \
         set status = 'cancelled', lease_owner = null, lease_expires_at = null, \
             updated_at = now() \
         where (status = 'pending' or (status = 'in_progress' and lease_expires_at <= now())) \
           and job_id in (select id from jobs where id = any($1) and status = 'cancelling')",
    )
    .bind(ids)
    .execute(&mut **tx)
    .await?;
    // A live job with nothing pending or in flight is done. When two replicas race, the
    // second waits for the first's row lock, re-checks `status` on the new row version,
    // matches nothing and returns nothing. A cancelling job none of whose records was
    // cancelled (the cancel came when all were in flight) ran to the end: `completed`.
    let done: Vec<Uuid> = sqlx::query_scalar(
        "update jobs \
         set status = case when status = 'cancelling' \
                             and exists (select 1 from records r where r.job_id = jobs.id \
                                         and r.status = 'cancelled') \
                           then 'cancelled' else 'completed' end, \
             finished_at = now(), updated_at = now() \
         where id = any($1) and status in ('queued', 'running', 'cancelling') \
           and not exists (select 1 from records r where r.job_id = jobs.id \
                           and r.status in ('pending', 'in_progress')) \
         returning id",
    )
    .bind(ids)
    .fetch_all(&mut **tx)
    .await?;
    Ok(done)
}
