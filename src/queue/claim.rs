//! A claim, written once for both backends: stale chunks first (taken over, cut, left or
//! abandoned, as [`chunks::plan`] decides), then new chunks carved off live jobs in fair
//! shares ([`shares`]), all in one transaction.
//!
//! What differs between the backends is only how each step is said in SQL and what makes it
//! exclusive: SQLite holds its write lock for the whole transaction; Postgres locks the stale
//! chunks it reads (`for update skip locked`) and the cursor of the job it carves from (`for
//! update`, sharing the job row with the batch writes), and takes its timestamps from the
//! database clock. Those are the [`ClaimSteps`] each backend implements on its open
//! transaction; the order of the steps, and so the queue's behaviour, is here.

use sqlx::{Database, Encode, Executor, FromRow, IntoArguments, Type};
use uuid::Uuid;

use super::chunks::{self, ChunkPlan, EXPIRED_SCAN, Rest, Stale, records_of, to_count};
use super::fair::{ClaimableJob, shares};
use super::{ChunkKey, Claim, ClaimPolicy, ClaimedRecord, StoreError};
use crate::domain::{JobId, RecordId};
use crate::store::from_row::row_struct;

row_struct! {
    /// A chunk whose lease expired or that was given back, as a backend reads it.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub(crate) struct StaleRow {
        pub(crate) job_id: Uuid,
        pub(crate) start_idx: i64,
        pub(crate) end_idx: i64,
        pub(crate) released: bool,
        pub(crate) lease_expiries: i64,
        pub(crate) attempts: i64,
    }
}

/// The statements of one claim, on the backend's open transaction. The claimer (lease owner),
/// the lease's length and the clock are the implementation's.
pub(crate) trait ClaimSteps {
    /// The backend's database.
    type Db: Database;

    /// The claim's open transaction, for the statements both backends say alike.
    fn conn(&mut self) -> &mut <Self::Db as Database>::Connection;

    /// Up to `limit` chunks of live jobs whose lease expired or that were given back, by job
    /// and start; on a backend with row locks, locked for this transaction (skipping any that
    /// another claim holds).
    async fn stale_chunks(&mut self, limit: i64) -> Result<Vec<StaleRow>, StoreError>;

    /// Inserts `rest`, the part after a cut, as a chunk given back (no owner) with the cut
    /// chunk's `attempts` and these `lease_expiries`.
    async fn insert_rest(
        &mut self,
        job: Uuid,
        rest: Rest,
        attempts: i64,
        lease_expiries: u32,
    ) -> Result<(), StoreError>;

    /// Fails `indexes` of `job` with `record_abandoned` and `message` (rows that exist stay as
    /// they are) and counts the new failures on the job; returns the new rows' ids.
    async fn abandon(
        &mut self,
        job: Uuid,
        indexes: &[u32],
        attempts: i64,
        message: &str,
    ) -> Result<Vec<Uuid>, StoreError>;

    /// Leases the stale chunk of `job` at `start` to this claimer, cut to end at `end`, with
    /// these counts; marks a queued job running. Returns the chunk's attempts after this one.
    async fn take_over(
        &mut self,
        job: Uuid,
        start: i64,
        end: u32,
        lease_expiries: u32,
        written: u32,
    ) -> Result<i64, StoreError>;

    /// Live jobs with unclaimed indexes, oldest first, with their owners and records in
    /// progress.
    async fn claimable_jobs(&mut self) -> Result<Vec<ClaimableJob>, StoreError>;

    /// Carves up to `want` more indexes off `job` as a new chunk leased to this claimer, and
    /// marks the job running if it is still `queued`; `(start, end)`, or `None` when the job
    /// has none left (or is no longer live).
    async fn carve(
        &mut self,
        job: Uuid,
        queued: bool,
        want: usize,
    ) -> Result<Option<(i64, i64)>, StoreError>;
}

/// Claims up to `limit` records through `steps`. The caller commits.
pub(crate) async fn claim<S>(
    steps: &mut S,
    limit: u32,
    policy: ClaimPolicy,
) -> Result<Claim, StoreError>
where
    S: ClaimSteps,
    for<'c> &'c mut <S::Db as Database>::Connection: Executor<'c, Database = S::Db>,
    <S::Db as Database>::Arguments: IntoArguments<S::Db>,
    for<'q> Uuid: Encode<'q, S::Db> + Type<S::Db>,
    for<'q> i64: Encode<'q, S::Db> + Type<S::Db>,
    for<'r> (i64,): FromRow<'r, <S::Db as Database>::Row>,
{
    let mut out = Claim::default();
    let mut claimed: Vec<ClaimedRecord> = Vec::new();
    let mut left = limit as usize;
    // At most one suspect record per claim, and none unless the claimer has none in flight.
    let mut isolate = policy.isolate;
    // Stale chunks first: they are older work, and usually few.
    for row in steps.stale_chunks(EXPIRED_SCAN).await? {
        let (job, start) = (row.job_id, row.start_idx);
        let chunk = Stale {
            start: to_count(start),
            end: to_count(row.end_idx),
            released: row.released,
            lease_expiries: to_count(row.lease_expiries),
        };
        let written: Vec<i64> = sqlx::query_scalar(
            "select idx from records where job_id = $1 and idx >= $2 and idx < $3 order by idx",
        )
        .bind(job)
        .bind(start)
        .bind(row.end_idx)
        .fetch_all(steps.conn())
        .await?;
        let written: Vec<u32> = written.into_iter().map(to_count).collect();
        match chunks::plan(chunk, &written, left, policy, isolate) {
            ChunkPlan::Done => delete_chunk(steps.conn(), job, start).await?,
            ChunkPlan::Leave => {}
            ChunkPlan::Abandon { indexes, rest } => {
                let after = chunk.lease_expiries.saturating_add(1);
                delete_chunk(steps.conn(), job, start).await?;
                if let Some(rest) = rest {
                    steps.insert_rest(job, rest, row.attempts, after).await?;
                }
                let message = chunks::abandoned_message(policy.max_lease_expiries);
                let failed = steps.abandon(job, &indexes, row.attempts, &message).await?;
                out.abandoned
                    .extend(failed.into_iter().map(|r| (RecordId(r), JobId(job))));
            }
            ChunkPlan::Take {
                end,
                todo,
                written,
                lease_expiries,
                suspect,
                rest,
            } => {
                if let Some(rest) = rest {
                    steps
                        .insert_rest(job, rest, row.attempts, lease_expiries)
                        .await?;
                }
                let attempts = steps
                    .take_over(job, start, end, lease_expiries, written)
                    .await?;
                left = left.saturating_sub(todo.len());
                let key = ChunkKey {
                    job_id: JobId(job),
                    start: chunk.start,
                };
                claimed.extend(records_of(
                    key,
                    &todo,
                    to_count(attempts),
                    lease_expiries,
                    suspect,
                ));
                isolate &= !suspect;
            }
        }
    }
    // New chunks, beside a suspect record too: it runs with the claimer's other work.
    if left > 0 {
        let mut jobs = steps.claimable_jobs().await?;
        // Rounds: a job that yields less than its share (fewer indexes left than asked) drops
        // out, and the next round shares what is left among the others.
        while left > 0 && !jobs.is_empty() {
            let mut dry = Vec::new();
            for (i, want) in shares(&jobs, left) {
                let got = match steps.carve(jobs[i].id, jobs[i].queued, want).await? {
                    Some((lo, hi)) => {
                        jobs[i].queued = false;
                        let (lo, hi) = (to_count(lo), to_count(hi));
                        let key = ChunkKey {
                            job_id: JobId(jobs[i].id),
                            start: lo,
                        };
                        let todo: Vec<u32> = (lo..hi).collect();
                        claimed.extend(records_of(key, &todo, 1, 0, false));
                        todo.len()
                    }
                    None => 0,
                };
                if got < want {
                    dry.push(i);
                }
                jobs[i].busy += got as i64;
                left -= got;
            }
            let mut i = 0;
            jobs.retain(|_| {
                i += 1;
                !dry.contains(&(i - 1))
            });
        }
    }
    claimed.sort_unstable_by_key(|c| (c.job_id, c.index));
    out.records = claimed;
    Ok(out)
}

/// Deletes the chunk of `job` starting at `start`.
async fn delete_chunk<'c, DB>(
    conn: &'c mut DB::Connection,
    job: Uuid,
    start: i64,
) -> Result<(), StoreError>
where
    DB: Database,
    &'c mut DB::Connection: Executor<'c, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
    for<'q> Uuid: Encode<'q, DB> + Type<DB>,
    for<'q> i64: Encode<'q, DB> + Type<DB>,
{
    sqlx::query("delete from chunks where job_id = $1 and start_idx = $2")
        .bind(job)
        .bind(start)
        .execute(conn)
        .await?;
    Ok(())
}
