//! A claim's statements on Postgres ([`ClaimSteps`]), in one read-committed transaction. The
//! stale chunks it reads are locked `for update skip locked`, so concurrent claimers (in one
//! process or many) never take the same one; a new chunk is carved under the lock of the job's
//! cursor (`for update`), which re-reads `claimed_upto` after waiting, so no index is carved
//! twice. Every timestamp, lease expiry included, is the database's `now()`: replicas whose
//! clocks disagree still agree on when a lease has expired.

use std::time::Duration;

use serde_json::Value;
use sqlx::{Postgres, Transaction};
use uuid::Uuid;

use crate::domain::record::{RecordErrorCode, RecordStage};
use crate::domain::{JobId, RecordId};
use crate::queue::chunks::Rest;
use crate::queue::claim::{ClaimSteps, StaleRow};
use crate::queue::fair::ClaimableJob;
use crate::store::selection::{carvable, carve_limit, carve_want};
use crate::store::{StoreError, usage};

/// Chunks of live jobs whose lease expired (their worker died) or that were given back,
/// locked. The table holds only chunks in flight, so this scan stays small however large the
/// jobs.
const STALE: &str = "\
    select c.job_id, c.start_idx, c.end_idx, c.lease_owner is null as released, \
           c.lease_expiries, c.attempts \
    from chunks c \
    where (c.lease_owner is null or c.lease_expires_at <= now()) \
      and c.job_id in (select j.id from jobs j where j.status in ('queued', 'running')) \
    order by c.job_id, c.start_idx \
    limit $1 \
    for update of c skip locked";

/// Live jobs with unclaimed indexes, oldest first (ids are UUIDv7), with their owner and
/// records in progress, for fair shares. One row per live job.
const CLAIMABLE_JOBS: &str = concat!(
    "select j.id, j.owner, \
            coalesce((select sum(c.end_idx - c.start_idx - c.written) from chunks c \
                      where c.job_id = j.id and c.lease_owner is not null), 0)::bigint as busy, \
            j.status = 'queued' as queued \
     from jobs j join job_cursors k on k.job_id = j.id \
     where j.status in ('queued', 'running') and ",
    carvable!("j", "k"),
    " order by j.id"
);

/// Marks job `$1` running, on its first carve. A job already running is not locked by it, so
/// this costs carves after the first nothing, and two first carves of one job (two replicas)
/// take the row in turn, never a shared lock each and then the stronger one (a deadlock).
const START: &str = "\
    update jobs set status = 'running', started_at = coalesce(started_at, now()), \
                    updated_at = now() \
    where id = $1 and status = 'queued'";

/// Carves the next chunk of up to `$2` indexes off job `$1` and leases it to `$3` for `$4`.
///
/// Carvers of one job take turns on its cursor (`for update`, which re-reads `claimed_upto`
/// on the latest row version after waiting, so no index is carved twice). The job row is only
/// shared (`for share`): batch writes in progress hold it `for key share` (the foreign key of
/// each record they insert), which a share lock does not wait for, while a cancel or a job's
/// end (updates of the row) waits for the carve to commit, and a carve after them sees the
/// new status and carves nothing. The cursor was a column of the job row, carved `for update`,
/// so every claim waited for the writes under way; carving that column `for no key update`
/// instead made a lock convoy of four replicas (bench/README.md, "Where a tool record waits").
const CARVE: &str = concat!(
    "with picked as ( \
        select k.job_id, k.claimed_upto as lo, \
               least(k.claimed_upto + ",
    carve_want!("j", "k", "$2"),
    ", ",
    carve_limit!("j", "k"),
    ") as hi \
        from job_cursors k join jobs j on j.id = k.job_id \
        where k.job_id = $1 and j.status in ('queued', 'running') and ",
    carvable!("j", "k"),
    " for update of k for share of j), \
    moved as ( \
        update job_cursors k set claimed_upto = p.hi \
        from picked p where k.job_id = p.job_id \
        returning p.lo, p.hi) \
    insert into chunks (job_id, start_idx, end_idx, lease_owner, lease_expires_at) \
    select $1, lo, hi, $3, now() + $4 from moved \
    returning start_idx, end_idx"
);

/// Takes over a stale chunk, cut to `[start, $3)`.
const TAKE_OVER: &str = "\
    update chunks \
    set end_idx = $3, lease_owner = $4, lease_expires_at = now() + $5, \
        attempts = attempts + 1, lease_expiries = $6, written = $7, updated_at = now() \
    where job_id = $1 and start_idx = $2 \
    returning attempts";

/// One claim's transaction, for `owner`, with leases of `lease`.
pub(super) struct PgClaim<'a> {
    pub(super) tx: Transaction<'static, Postgres>,
    pub(super) owner: &'a str,
    pub(super) lease: Duration,
}

impl ClaimSteps for PgClaim<'_> {
    type Db = Postgres;

    fn conn(&mut self) -> &mut <Postgres as sqlx::Database>::Connection {
        &mut self.tx
    }

    async fn stale_chunks(&mut self, limit: i64) -> Result<Vec<StaleRow>, StoreError> {
        Ok(sqlx::query_as(STALE)
            .bind(limit)
            .fetch_all(&mut *self.tx)
            .await?)
    }

    async fn insert_rest(
        &mut self,
        job: Uuid,
        rest: Rest,
        attempts: i64,
        lease_expiries: u32,
    ) -> Result<(), StoreError> {
        super::insert_rest(&mut self.tx, job, rest, attempts, lease_expiries).await
    }

    async fn abandon(
        &mut self,
        job: Uuid,
        indexes: &[u32],
        attempts: i64,
        message: &str,
    ) -> Result<Vec<Uuid>, StoreError> {
        let code = RecordErrorCode::RecordAbandoned;
        let stage = code.stage();
        let n = indexes.len();
        let inserted: Vec<(Uuid, Uuid, i64)> = sqlx::query_as(super::INSERT_RECORDS)
            .bind((0..n).map(|_| RecordId::new().0).collect::<Vec<_>>())
            .bind(vec![job; n])
            .bind(indexes.iter().map(|&i| i64::from(i)).collect::<Vec<_>>())
            .bind(vec!["failed"; n])
            .bind(vec![None::<Value>; n])
            .bind(vec![attempts; n])
            .bind(vec![Some(code.as_str()); n])
            .bind(vec![Some(message); n])
            .bind(vec![None::<&str>; n])
            .bind(vec![stage.as_ref().map(RecordStage::as_str); n])
            .bind(vec![None::<&str>; n])
            .fetch_all(&mut *self.tx)
            .await?;
        let failed = usage::tally(inserted.iter().map(|_| (JobId(job), false, None)));
        crate::store::postgres::usage::add_records(&mut self.tx, &failed).await?;
        Ok(inserted.into_iter().map(|(id, _, _)| id).collect())
    }

    async fn take_over(
        &mut self,
        job: Uuid,
        start: i64,
        end: u32,
        lease_expiries: u32,
        written: u32,
    ) -> Result<i64, StoreError> {
        let attempts: i64 = sqlx::query_scalar(TAKE_OVER)
            .bind(job)
            .bind(start)
            .bind(i64::from(end))
            .bind(self.owner)
            .bind(self.lease)
            .bind(i64::from(lease_expiries))
            .bind(i64::from(written))
            .fetch_one(&mut *self.tx)
            .await?;
        // A job whose chunk is taken over is running already, but for one whose chunk was
        // created by migration 0007.
        sqlx::query(
            "update jobs set status = 'running', \
             started_at = coalesce(started_at, now()), updated_at = now() \
             where id = $1 and status = 'queued'",
        )
        .bind(job)
        .execute(&mut *self.tx)
        .await?;
        Ok(attempts)
    }

    async fn claimable_jobs(&mut self) -> Result<Vec<ClaimableJob>, StoreError> {
        Ok(sqlx::query_as(CLAIMABLE_JOBS)
            .fetch_all(&mut *self.tx)
            .await?)
    }

    async fn carve(
        &mut self,
        job: Uuid,
        queued: bool,
        want: usize,
    ) -> Result<Option<(i64, i64)>, StoreError> {
        if queued {
            sqlx::query(START).bind(job).execute(&mut *self.tx).await?;
        }
        Ok(sqlx::query_as(CARVE)
            .bind(job)
            .bind(i64::try_from(want).unwrap_or(i64::MAX))
            .bind(self.owner)
            .bind(self.lease)
            .fetch_optional(&mut *self.tx)
            .await?)
    }
}
