//! A claim's statements on SQLite ([`ClaimSteps`]). The whole claim runs in one transaction
//! begun `immediate` under the store's write lock, so what it reads cannot change before it
//! commits: no row locks are needed. Timestamps are the application clock's, taken once.

use sqlx::{QueryBuilder, Sqlite, Transaction};
use uuid::Uuid;

use crate::domain::record::{RecordErrorCode, RecordStage};
use crate::domain::{JobId, RecordId};
use crate::queue::chunks::Rest;
use crate::queue::claim::{ClaimSteps, StaleRow};
use crate::queue::fair::ClaimableJob;
use crate::store::selection::{carvable, carve_limit, carve_want};
use crate::store::{StoreError, usage};

/// Chunks of live jobs whose lease expired (their worker died) or that were given back; `$1`
/// is now.
const STALE: &str = "\
    select c.job_id, c.start_idx, c.end_idx, c.lease_owner is null as released, \
           c.lease_expiries, c.attempts \
    from chunks c \
    where (c.lease_owner is null or c.lease_expires_at <= $1) \
      and c.job_id in (select j.id from jobs j where j.status in ('queued', 'running')) \
    order by c.job_id, c.start_idx \
    limit $2";

/// Live jobs with unclaimed indexes, oldest first (ids are UUIDv7), with their owner and
/// records in progress, for fair shares.
const CLAIMABLE_JOBS: &str = concat!(
    "select j.id, j.owner, \
            coalesce((select sum(c.end_idx - c.start_idx - c.written) from chunks c \
                      where c.job_id = j.id and c.lease_owner is not null), 0) as busy, \
            j.status = 'queued' as queued \
     from jobs j join job_cursors k on k.job_id = j.id \
     where j.status in ('queued', 'running') and ",
    carvable!("j", "k"),
    " order by j.id"
);

/// The next chunk of job `$1`, `[lo, hi)`, for a claim that wants `$2` records.
const CARVE: &str = concat!(
    "select k.claimed_upto, \
            min(k.claimed_upto + ",
    carve_want!("j", "k", "$2"),
    ", ",
    carve_limit!("j", "k"),
    ") \
     from job_cursors k join jobs j on j.id = k.job_id \
     where k.job_id = $1 and j.status in ('queued', 'running') and ",
    carvable!("j", "k")
);

/// One claim's transaction, for `owner`, at `now`, with leases until `expires` (microseconds).
pub(super) struct SqliteClaim<'a> {
    pub(super) tx: Transaction<'static, Sqlite>,
    pub(super) owner: &'a str,
    pub(super) now: i64,
    pub(super) expires: i64,
}

impl ClaimSteps for SqliteClaim<'_> {
    type Db = Sqlite;

    fn conn(&mut self) -> &mut <Sqlite as sqlx::Database>::Connection {
        &mut self.tx
    }

    async fn stale_chunks(&mut self, limit: i64) -> Result<Vec<StaleRow>, StoreError> {
        Ok(sqlx::query_as(STALE)
            .bind(self.now)
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
        super::insert_rest(&mut self.tx, job, rest, attempts, lease_expiries, self.now).await
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
        let mut qb = QueryBuilder::<Sqlite>::new(
            "insert into records (id, job_id, idx, status, \"values\", attempts, error_code, \
             error_message, error_column, error_stage, created_at, updated_at) ",
        );
        qb.push_values(indexes, |mut row, &idx| {
            row.push_bind(RecordId::new().0)
                .push_bind(job)
                .push_bind(i64::from(idx))
                .push_bind("failed")
                .push_bind(None::<String>)
                .push_bind(attempts)
                .push_bind(code.as_str())
                .push_bind(message)
                .push_bind(None::<String>)
                .push_bind(stage.as_ref().map(RecordStage::as_str))
                .push_bind(self.now)
                .push_bind(self.now);
        });
        qb.push(" on conflict (job_id, idx) do nothing returning id");
        let ids: Vec<Uuid> = qb
            .build_query_scalar()
            .persistent(false)
            .fetch_all(&mut *self.tx)
            .await?;
        let failed = usage::tally(ids.iter().map(|_| (JobId(job), false, None)));
        crate::store::sqlite::usage::add_records(&mut self.tx, &failed).await?;
        Ok(ids)
    }

    async fn take_over(
        &mut self,
        job: Uuid,
        start: i64,
        end: u32,
        lease_expiries: u32,
        written: u32,
    ) -> Result<i64, StoreError> {
        let attempts: i64 = sqlx::query_scalar(
            "update chunks \
             set end_idx = $3, lease_owner = $4, lease_expires_at = $5, \
                 attempts = attempts + 1, lease_expiries = $6, written = $7, updated_at = $8 \
             where job_id = $1 and start_idx = $2 \
             returning attempts",
        )
        .bind(job)
        .bind(start)
        .bind(i64::from(end))
        .bind(self.owner)
        .bind(self.expires)
        .bind(i64::from(lease_expiries))
        .bind(i64::from(written))
        .bind(self.now)
        .fetch_one(&mut *self.tx)
        .await?;
        // A job whose chunk is taken over is running already, but for one whose chunk was
        // created by migration 0007.
        sqlx::query(
            "update jobs set status = 'running', \
             started_at = coalesce(started_at, $2), updated_at = $2 \
             where id = $1 and status = 'queued'",
        )
        .bind(job)
        .bind(self.now)
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
        // Under the write lock: nothing moves `claimed_upto` between the read and the update.
        let carved: Option<(i64, i64)> = sqlx::query_as(CARVE)
            .bind(job)
            .bind(i64::try_from(want).unwrap_or(i64::MAX))
            .fetch_optional(&mut *self.tx)
            .await?;
        let Some((lo, hi)) = carved else {
            return Ok(None);
        };
        sqlx::query("update job_cursors set claimed_upto = $2 where job_id = $1")
            .bind(job)
            .bind(hi)
            .execute(&mut *self.tx)
            .await?;
        if queued {
            sqlx::query(
                "update jobs set status = 'running', started_at = coalesce(started_at, $2), \
                 updated_at = $2 \
                 where id = $1 and status = 'queued'",
            )
            .bind(job)
            .bind(self.now)
            .execute(&mut *self.tx)
            .await?;
        }
        sqlx::query(
            "insert into chunks (job_id, start_idx, end_idx, lease_owner, lease_expires_at, \
             created_at, updated_at) \
             values ($1, $2, $3, $4, $5, $6, $6)",
        )
        .bind(job)
        .bind(lo)
        .bind(hi)
        .bind(self.owner)
        .bind(self.expires)
        .bind(self.now)
        .execute(&mut *self.tx)
        .await?;
        Ok(Some((lo, hi)))
    }
}
