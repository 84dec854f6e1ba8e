//! Statements that read the same on both backends, written once over sqlx's `Database`: the
//! backends call these with their pool or transaction and decode the rows into their own row
//! types (`rows.rs`). What differs (JSON functions, array binds, locks) stays in each backend.
//!
//! The bounds name what each statement binds and reads; both SQLite and Postgres meet them.

use sqlx::{Database, Encode, Executor, FromRow, IntoArguments, QueryBuilder, Type};
use uuid::Uuid;

use super::StoreError;
use super::rows::{CountDb, job_columns, record_columns};
use crate::domain::selection::Selection;
use crate::domain::{JobId, RecordId, RecordStatus};

/// `select <job columns> from jobs where id = <id>`, restricted to `owner` when given.
pub(crate) fn job_query<'a, DB: Database>(id: JobId, owner: Option<&'a str>) -> QueryBuilder<DB>
where
    Uuid: Encode<'a, DB> + Type<DB>,
    &'a str: Encode<'a, DB> + Type<DB>,
{
    let mut qb = QueryBuilder::new(concat!("select ", job_columns!(), " from jobs where id = "));
    qb.push_bind(id.0);
    if let Some(owner) = owner {
        qb.push(" and owner = ").push_bind(owner);
    }
    qb
}

/// A record by id, restricted to jobs of `owner` when given.
pub(crate) fn record_query<'a, DB: Database>(
    id: RecordId,
    owner: Option<&'a str>,
) -> QueryBuilder<DB>
where
    Uuid: Encode<'a, DB> + Type<DB>,
    &'a str: Encode<'a, DB> + Type<DB>,
{
    let mut qb = QueryBuilder::new(concat!(
        "select ",
        record_columns!(),
        " from records r join jobs j on j.id = r.job_id where r.id = "
    ));
    qb.push_bind(id.0);
    if let Some(owner) = owner {
        qb.push(" and j.owner = ").push_bind(owner);
    }
    qb
}

/// A page of a job's records by index, after `after_index`, as `filter` says.
pub(crate) fn records_page_query<'a, DB: Database>(
    job_id: JobId,
    after_index: Option<u32>,
    filter: super::RecordSelect,
    limit: u32,
) -> QueryBuilder<DB>
where
    Uuid: Encode<'a, DB> + Type<DB>,
    i64: Encode<'a, DB> + Type<DB>,
{
    let mut qb = QueryBuilder::new(concat!(
        "select ",
        record_columns!(),
        " from records r where r.job_id = "
    ));
    qb.push_bind(job_id.0);
    if let Some(after) = after_index {
        qb.push(" and r.idx > ").push_bind(i64::from(after));
    }
    // Literals, not binds: only a query that names `status = 'failed'` (or `selection is not
    // null`) itself can use the partial index on failed records (on verdicts); both come from
    // enums, never from user text.
    let status = match filter.selection {
        Some(Selection::FailedGeneration) => Some(RecordStatus::Failed),
        _ => filter.status,
    };
    if let Some(status) = status {
        qb.push(format_args!(" and r.status = '{}'", status.as_str()));
    }
    if let Some(s) = filter
        .selection
        .filter(|s| *s != Selection::FailedGeneration)
    {
        qb.push(format_args!(
            " and r.selection is not null and r.selection = '{}'",
            s.as_str()
        ));
    }
    qb.push(" order by r.idx limit ")
        .push_bind(i64::from(limit));
    qb
}

/// A record's traces, of one column when given; the caller adds the order (by column, in the
/// backend's byte-wise collation).
pub(crate) fn traces_query<'a, DB: Database>(
    record_id: RecordId,
    column: Option<&'a str>,
) -> QueryBuilder<DB>
where
    Uuid: Encode<'a, DB> + Type<DB>,
    &'a str: Encode<'a, DB> + Type<DB>,
{
    let mut qb = QueryBuilder::new(
        "select record_id, column_name, messages, created_at from traces where record_id = ",
    );
    qb.push_bind(record_id.0);
    if let Some(column) = column {
        qb.push(" and column_name = ").push_bind(column);
    }
    qb
}

/// A job's record counts by status (see `JobStore::job_counts`). `cast(... as bigint)`: Postgres
/// sums bigints to `numeric`; SQLite reads the cast as integer affinity.
pub(crate) async fn count_rows<'e, DB, E>(exec: E, id: JobId) -> Result<Vec<CountDb>, StoreError>
where
    DB: Database,
    E: Executor<'e, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
    for<'q> Uuid: Encode<'q, DB> + Type<DB>,
    for<'r> CountDb: FromRow<'r, DB::Row>,
{
    Ok(sqlx::query_as(
        "select 'completed' as status, completed as n from job_record_counts \
         where job_id = $1 \
         union all \
         select 'failed', failed from job_record_counts where job_id = $1 \
         union all \
         select 'passed', passed from job_record_counts where job_id = $1 \
         union all \
         select 'rejected', rejected from job_record_counts where job_id = $1 \
         union all \
         select 'in_progress', cast(coalesce(sum(end_idx - start_idx - written), 0) as bigint) \
         from chunks where job_id = $1 and lease_owner is not null",
    )
    .bind(id.0)
    .fetch_all(exec)
    .await?)
}

/// Live jobs (queued, running, cancelling), by id.
pub(crate) async fn live_jobs<'e, DB, E>(exec: E) -> Result<Vec<JobId>, StoreError>
where
    DB: Database,
    E: Executor<'e, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
    for<'r> (Uuid,): FromRow<'r, DB::Row>,
{
    let ids: Vec<Uuid> = sqlx::query_scalar(
        "select id from jobs where status in ('queued', 'running', 'cancelling') order by id",
    )
    .fetch_all(exec)
    .await?;
    Ok(ids.into_iter().map(JobId).collect())
}

/// Records of queued and running jobs that no claim has handed out yet: the queue's depth.
pub(crate) async fn unclaimed_records<'e, DB, E>(exec: E) -> Result<u64, StoreError>
where
    DB: Database,
    E: Executor<'e, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
    for<'r> (i64,): FromRow<'r, DB::Row>,
{
    // `cast`: Postgres sums a bigint column into a numeric. A `record_selection` job counts
    // the budget it has not handed out: what it may still claim.
    let n: i64 = sqlx::query_scalar(
        "select cast(coalesce(sum(coalesce(j.max_candidates, j.num_records) - k.claimed_upto), 0) \
                     as bigint) \
         from jobs j join job_cursors k on k.job_id = j.id \
         where j.status in ('queued', 'running')",
    )
    .fetch_one(exec)
    .await?;
    Ok(u64::try_from(n).unwrap_or(0))
}

/// Finished jobs that finished before `before` (as the backend stores times: `T`), oldest
/// first, at most `limit`.
pub(crate) async fn expired_jobs<'e, DB, E, T>(
    exec: E,
    before: T,
    limit: u32,
) -> Result<Vec<JobId>, StoreError>
where
    DB: Database,
    E: Executor<'e, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
    for<'q> T: Encode<'q, DB> + Type<DB> + Send + 'q,
    for<'q> i64: Encode<'q, DB> + Type<DB>,
    for<'r> (Uuid,): FromRow<'r, DB::Row>,
{
    let ids: Vec<Uuid> = sqlx::query_scalar(
        "select id from jobs where status in ('completed', 'failed', 'cancelled') \
         and finished_at < $1 order by finished_at, id limit $2",
    )
    .bind(before)
    .bind(i64::from(limit))
    .fetch_all(exec)
    .await?;
    Ok(ids.into_iter().map(JobId).collect())
}

/// The image `index` of `column` of a record: its MIME type and bytes.
pub(crate) async fn media<'e, DB, E>(
    exec: E,
    record_id: RecordId,
    column: &str,
    index: u32,
) -> Result<Option<(String, Vec<u8>)>, StoreError>
where
    DB: Database,
    E: Executor<'e, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
    for<'q> Uuid: Encode<'q, DB> + Type<DB>,
    for<'q> &'q str: Encode<'q, DB> + Type<DB>,
    for<'q> i64: Encode<'q, DB> + Type<DB>,
    for<'r> (String, Vec<u8>): FromRow<'r, DB::Row>,
{
    Ok(sqlx::query_as(
        "select mime_type, data from media where record_id = $1 and column_name = $2 and idx = $3",
    )
    .bind(record_id.0)
    .bind(column)
    .bind(i64::from(index))
    .fetch_optional(exec)
    .await?)
}

/// Why a job just inserted, in the caller's transaction, must be refused (dropping the
/// transaction rolls the insert back): a seed dataset that is not among `found` (the ready
/// ones of its `seed_datasets`), or more live jobs for its owner than `max_live_jobs`.
pub(crate) async fn refusal<DB>(
    conn: &mut DB::Connection,
    job: &super::NewJob,
    found: &[Uuid],
) -> Result<Option<super::CreateOutcome>, StoreError>
where
    DB: Database,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
    for<'q> Option<&'q str>: Encode<'q, DB> + Type<DB>,
    for<'r> (i64,): FromRow<'r, DB::Row>,
{
    let missing = super::dataset_rows::missing_datasets(&job.seed_datasets, found);
    if !missing.is_empty() {
        return Ok(Some(super::CreateOutcome::SeedDatasetsMissing(missing)));
    }
    if let Some(max) = job.max_live_jobs {
        // The new job counts itself; its records are not inserted yet, so a refusal is cheap.
        let live = live_jobs_of(&mut *conn, job.owner.as_deref()).await?;
        if live > i64::from(max) {
            return Ok(Some(super::CreateOutcome::TooManyJobs {
                live: u64::try_from(live - 1).unwrap_or(0),
            }));
        }
    }
    if let Some(max) = job.max_live_records {
        let live: i64 = sqlx::query_scalar(
            "select cast(coalesce(sum(coalesce(max_candidates, num_records)), 0) as bigint) \
             from jobs \
             where status in ('queued', 'running', 'cancelling') \
             and owner is not distinct from $1",
        )
        .bind(job.owner.as_deref())
        .fetch_one(&mut *conn)
        .await?;
        let live = u64::try_from(live).unwrap_or(0);
        if live > max {
            return Ok(Some(super::CreateOutcome::TooManyRecords {
                live: live.saturating_sub(u64::from(job.records_held())),
            }));
        }
    }
    Ok(None)
}

/// How many live jobs `owner` has (the one being created included).
pub(crate) async fn live_jobs_of<'e, DB, E>(exec: E, owner: Option<&str>) -> Result<i64, StoreError>
where
    DB: Database,
    E: Executor<'e, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
    for<'q> Option<&'q str>: Encode<'q, DB> + Type<DB>,
    for<'r> (i64,): FromRow<'r, DB::Row>,
{
    Ok(sqlx::query_scalar(
        "select count(*) from jobs where status in ('queued', 'running', 'cancelling') \
         and owner is not distinct from $1",
    )
    .bind(owner)
    .fetch_one(exec)
    .await?)
}

/// The job `owner` created with `idempotency_key` (see `JobStore::create_job`), as `R`.
pub(crate) async fn job_by_key<'e, DB, E, R>(
    exec: E,
    owner: Option<&str>,
    key: Option<&str>,
) -> Result<R, StoreError>
where
    DB: Database,
    E: Executor<'e, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
    for<'q> Option<&'q str>: Encode<'q, DB> + Type<DB>,
    R: for<'r> FromRow<'r, DB::Row> + Send + Unpin,
{
    Ok(sqlx::query_as(concat!(
        "select ",
        job_columns!(),
        " from jobs where coalesce(owner, '') = coalesce($1, '') and idempotency_key = $2"
    ))
    .bind(owner)
    .bind(key)
    .fetch_one(exec)
    .await?)
}
