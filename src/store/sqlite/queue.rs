//! The SQLite work queue: claims, completions, cancellation and job finalization.
//!
//! Each operation is one transaction begun `immediate`, so its reads and writes see no other
//! writer in between: that is what makes a claim exclusive without `for update skip locked`.

use std::borrow::Cow;
use std::time::Duration;

use sqlx::{QueryBuilder, Sqlite, Transaction};
use uuid::Uuid;

use super::{Job, SqliteStore, expiry_us, now_us, push_ids};
use crate::domain::{JobId, RecordId};
use crate::store::expired::{EXPIRED_MARGIN, SortedExpired, abandoned_message, to_count};
use crate::store::fair::{ClaimableJob, shares};
use crate::store::rows::{self, ClaimedDb, Written, dedup_results, dedup_traces, job_columns};
use crate::store::{
    CancelOutcome, Claim, ClaimPolicy, ClaimedRecord, JobError, RecordErrorCode, RecordResult,
    RecordStage, StoreError, storable, usage,
};

/// In-progress records of live jobs whose lease expired (their worker died). `$1` is now. The
/// caller decides per record: fail it (abandoned), hand it out alone, or take it over.
const EXPIRED: &str = "\
    select r.id, r.lease_expiries from records r \
    where r.status = 'in_progress' and r.lease_expires_at <= $1 \
      and r.job_id in (select j.id from jobs j where j.status in ('queued', 'running')) \
    order by r.job_id, r.idx \
    limit $2";

/// Live jobs with pending records, oldest first (ids are UUIDv7), with their owner and records
/// in progress, for fair shares. Both subqueries are ranges of `records_job_status`.
const CLAIMABLE_JOBS: &str = "\
    select j.id, j.owner, \
           (select count(*) from records r \
            where r.job_id = j.id and r.status = 'in_progress') as busy \
    from jobs j \
    where j.status in ('queued', 'running') \
      and exists (select 1 from records r where r.job_id = j.id and r.status = 'pending') \
    order by j.id";

/// Claims pending records of one job (`$5`) by index: one ordered range of
/// `records_job_status`, stopping at the limit.
const CLAIM_PENDING: &str = "\
    update records \
    set status = 'in_progress', lease_owner = $1, lease_expires_at = $2, \
        attempts = attempts + 1, updated_at = $3 \
    where id in ( \
        select r.id from records r \
        where r.job_id = $5 and r.status = 'pending' \
        order by r.idx \
        limit $4) \
    returning id, job_id, idx, attempts, lease_expiries";

/// Fenced: written only while `owner` still holds the lease.
const COMPLETE_RECORD: &str = "\
    update records \
    set status = $3, \"values\" = $4, error_code = $5, error_message = $6, error_column = $7, \
        error_stage = $8, lease_owner = null, lease_expires_at = null, updated_at = $9 \
    where id = $1 and lease_owner = $2 and status = 'in_progress' \
    returning job_id";

/// Cancels the pending records of a job that is still `queued` or `running`; shared by cancel
/// and fail. `$2` is now.
const CANCEL_PENDING: &str = "\
    update records set status = 'cancelled', updated_at = $2 \
    where job_id = $1 and status = 'pending' \
      and exists (select 1 from jobs where id = $1 and status in ('queued', 'running'))";

impl SqliteStore {
    pub(super) async fn claim(
        &self,
        owner: &str,
        limit: u32,
        lease: Duration,
        policy: ClaimPolicy,
    ) -> Result<Claim, StoreError> {
        let mut out = Claim::default();
        let now = now_us();
        let expires = expiry_us(now, lease);
        let mut tx = self.pool.begin_with("begin immediate").await?;
        // Expired leases first: they are older work, and usually few. Abandoned records do not
        // count against the limit, hence the margin.
        let expired: Vec<(Uuid, i64)> = sqlx::query_as(EXPIRED)
            .bind(now)
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
            let mut qb = QueryBuilder::<Sqlite>::new(
                "update records set status = 'failed', \"values\" = null, error_code = ",
            );
            qb.push_bind(code.as_str())
                .push(", error_message = ")
                .push_bind(abandoned_message(policy.max_lease_expiries))
                .push(", error_column = null, error_stage = ")
                .push_bind(stage.as_ref().map(RecordStage::as_str))
                .push(
                    ", lease_owner = null, \
                     lease_expires_at = null, lease_expiries = lease_expiries + 1, updated_at = ",
                )
                .push_bind(now)
                .push(" where id in ");
            push_ids(&mut qb, sorted.abandon.iter().copied());
            qb.push(" returning id, job_id");
            let rows: Vec<(Uuid, Uuid)> = qb.build_query_as().fetch_all(&mut *tx).await?;
            out.abandoned = rows
                .into_iter()
                .map(|(r, j)| (RecordId(r), JobId(j)))
                .collect();
        }
        let mut claimed: Vec<ClaimedDb> = Vec::new();
        if !sorted.take.is_empty() {
            let mut qb = QueryBuilder::<Sqlite>::new("update records set lease_owner = ");
            qb.push_bind(owner)
                .push(", lease_expires_at = ")
                .push_bind(expires)
                .push(
                    ", attempts = attempts + 1, lease_expiries = lease_expiries + 1, \
                     updated_at = ",
                )
                .push_bind(now)
                .push(" where id in ");
            push_ids(&mut qb, sorted.take.iter().copied());
            qb.push(" returning id, job_id, idx, attempts, lease_expiries");
            claimed = qb.build_query_as().fetch_all(&mut *tx).await?;
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
            // Rounds, as on Postgres: inside this transaction a job yields less than its share
            // only when it has fewer pending records left; it drops out and the next round
            // shares the rest among the others.
            while left > 0 && !jobs.is_empty() {
                let mut dry = Vec::new();
                for (i, want) in shares(&jobs, left) {
                    let got: Vec<ClaimedDb> = sqlx::query_as(CLAIM_PENDING)
                        .bind(owner)
                        .bind(expires)
                        .bind(now)
                        .bind(want as i64)
                        .bind(jobs[i].id)
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
            let mut qb = QueryBuilder::<Sqlite>::new(
                "update jobs set status = 'running', started_at = coalesce(started_at, ",
            );
            qb.push_bind(now)
                .push("), updated_at = ")
                .push_bind(now)
                .push(" where status = 'queued' and id in ");
            push_ids(&mut qb, jobs);
            qb.build().execute(&mut *tx).await?;
        }
        tx.commit().await?;
        // `returning` gives no order.
        claimed.sort_unstable_by_key(|c| (c.job_id, c.index));
        out.records = claimed;
        Ok(out)
    }

    pub(super) async fn renew(
        &self,
        owner: &str,
        ids: &[RecordId],
        lease: Duration,
    ) -> Result<u64, StoreError> {
        if ids.is_empty() {
            return Ok(0);
        }
        let now = now_us();
        let mut qb = QueryBuilder::<Sqlite>::new("update records set lease_expires_at = ");
        qb.push_bind(expiry_us(now, lease))
            .push(", updated_at = ")
            .push_bind(now)
            .push(" where status = 'in_progress' and lease_owner = ")
            .push_bind(owner)
            .push(" and id in ");
        push_ids(&mut qb, ids.iter().map(|id| id.0));
        Ok(qb.build().execute(&self.pool).await?.rows_affected())
    }

    pub(super) async fn release(&self, owner: &str, ids: &[RecordId]) -> Result<u64, StoreError> {
        if ids.is_empty() {
            return Ok(0);
        }
        let mut qb = QueryBuilder::<Sqlite>::new(
            "update records set status = 'pending', lease_owner = null, lease_expires_at = null, \
             updated_at = ",
        );
        qb.push_bind(now_us())
            .push(" where status = 'in_progress' and lease_owner = ")
            .push_bind(owner)
            .push(" and id in ");
        push_ids(&mut qb, ids.iter().map(|id| id.0));
        Ok(qb.build().execute(&self.pool).await?.rows_affected())
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
        let now = now_us();
        let mut written = Vec::with_capacity(results.len());
        let mut written_usage = Vec::new();
        let mut tx = self.pool.begin_with("begin immediate").await?;
        for result in &results {
            let w = Written::from(&result.outcome);
            let job: Option<Uuid> = sqlx::query_scalar(COMPLETE_RECORD)
                .bind(result.id.0)
                .bind(owner)
                .bind(w.status.as_str())
                .bind(w.values.map(|v| v.to_string()))
                .bind(w.error.map(|e| e.code.as_str()))
                .bind(w.error.map(|e| e.message.as_str()))
                .bind(w.error.and_then(|e| e.column.as_deref()))
                .bind(
                    w.error
                        .and_then(|e| e.stage.as_ref())
                        .map(RecordStage::as_str),
                )
                .bind(now)
                .fetch_optional(&mut *tx)
                .await?;
            let Some(job) = job else {
                continue; // taken over by another worker: its run wins
            };
            // The traces of the final attempt replace all earlier ones, including columns
            // this attempt did not reach.
            sqlx::query("delete from traces where record_id = $1")
                .bind(result.id.0)
                .execute(&mut *tx)
                .await?;
            let traces = dedup_traces(&result.traces);
            if !traces.is_empty() {
                let mut qb = QueryBuilder::<Sqlite>::new(
                    "insert into traces (record_id, column_name, messages, created_at, updated_at) ",
                );
                qb.push_values(traces, |mut row, t| {
                    row.push_bind(result.id.0)
                        .push_bind(t.column.as_str())
                        .push_bind(t.messages.to_string())
                        .push_bind(now)
                        .push_bind(now);
                });
                qb.build().execute(&mut *tx).await?;
            }
            // Media likewise: the final attempt's images replace all earlier ones.
            sqlx::query("delete from media where record_id = $1")
                .bind(result.id.0)
                .execute(&mut *tx)
                .await?;
            for m in &result.media {
                sqlx::query(
                    "insert or ignore into media (record_id, column_name, idx, mime_type, data, created_at) \
                     values ($1, $2, $3, $4, $5, $6)",
                )
                .bind(result.id.0)
                .bind(m.column.as_str())
                .bind(i64::from(m.index))
                .bind(m.mime_type.as_str())
                .bind(m.data.as_slice())
                .bind(now)
                .execute(&mut *tx)
                .await?;
            }
            written.push(result.id);
            written_usage.push((JobId(job), &result.usage));
        }
        // Usage of the written results only, in their transaction: exact whatever crashes.
        super::usage::add(&mut tx, &usage::sum(written_usage), now).await?;
        tx.commit().await?;
        Ok(written)
    }

    pub(super) async fn cancel(&self, id: JobId) -> Result<CancelOutcome, StoreError> {
        let now = now_us();
        let mut tx = self.pool.begin_with("begin immediate").await?;
        sqlx::query(CANCEL_PENDING)
            .bind(id.0)
            .bind(now)
            .execute(&mut *tx)
            .await?;
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
        let now = now_us();
        let mut tx = self.pool.begin_with("begin immediate").await?;
        sqlx::query(CANCEL_PENDING)
            .bind(id.0)
            .bind(now)
            .execute(&mut *tx)
            .await?;
        sqlx::query(
            "update jobs set status = 'failed', error_code = $2, error_message = $3, \
             finished_at = $4, updated_at = $4 \
             where id = $1 and status in ('queued', 'running')",
        )
        .bind(id.0)
        .bind(&error.code)
        .bind(&error.message)
        .bind(now)
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
        let now = now_us();
        let mut tx = self.pool.begin_with("begin immediate").await?;
        let mut done = finalize_in(&mut tx, &ids, now).await?;
        tx.commit().await?;
        done.sort_unstable();
        Ok(done.into_iter().map(JobId).collect())
    }
}

/// Finalizes the jobs `ids` (sorted, not empty) in `tx` at `now`; returns those that changed.
/// See `Store::finalize_jobs`.
async fn finalize_in(
    tx: &mut Transaction<'_, Sqlite>,
    ids: &[Uuid],
    now: i64,
) -> Result<Vec<Uuid>, StoreError> {
    // In a cancelling job, records that will never run become cancelled: pending ones, and
    // in-progress ones whose lease expired (their worker died, and claims skip the job).
    let mut qb = QueryBuilder::<Sqlite>::new(
        "update records set status = 'cancelled', lease_owner = null, \
         lease_expires_at = null, updated_at = ",
    );
    qb.push_bind(now)
        .push(" where (status = 'pending' or (status = 'in_progress' and lease_expires_at <= ")
        .push_bind(now)
        .push(")) and job_id in (select id from jobs where status = 'cancelling' and id in ");
    push_ids(&mut qb, ids.iter().copied());
    qb.push(")");
    qb.build().execute(&mut **tx).await?;

    // A live job with nothing pending or in flight is done. The status check in the
    // `where` makes a second caller (another replica) change nothing and return nothing. A
    // cancelling job none of whose records was cancelled (the cancel came when all were in
    // flight) ran to the end: `completed`.
    let mut qb = QueryBuilder::<Sqlite>::new(
        "update jobs \
         set status = case when status = 'cancelling' \
                             and exists (select 1 from records r where r.job_id = jobs.id \
                                         and r.status = 'cancelled') \
                           then 'cancelled' else 'completed' end, \
             finished_at = ",
    );
    qb.push_bind(now)
        .push(", updated_at = ")
        .push_bind(now)
        .push(
            " where status in ('queued', 'running', 'cancelling') \
             and not exists (select 1 from records r where r.job_id = jobs.id \
                             and r.status in ('pending', 'in_progress')) \
             and id in ",
        );
    push_ids(&mut qb, ids.iter().copied());
    qb.push(" returning id");
    Ok(qb.build_query_scalar().fetch_all(&mut **tx).await?)
}
