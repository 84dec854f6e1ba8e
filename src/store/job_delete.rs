//! Deleting a finished job, written once for both backends: the status read, what it decides,
//! the statements (the same SQL on SQLite and Postgres) and the commit. Each backend opens its
//! own write transaction and says how its status read locks the row.

use sqlx::{Database, Encode, Executor, FromRow, IntoArguments, Transaction, Type};
use uuid::Uuid;

use super::{DeleteJob, StoreError};
use crate::domain::{JobId, JobStatus};

/// The statements that delete a job's rows, each bound to the job's id as `$1`, in order: the
/// tables without `on delete cascade` first, then the job, whose delete takes its records (and
/// their traces and media) and chunks with it. A worker still holding one of its chunks finds
/// the chunk gone at its write's fence, and its results are dropped.
const STATEMENTS: &[&str] = &[
    "delete from job_usage where job_id = $1",
    "delete from job_tool_usage where job_id = $1",
    "delete from job_record_counts where job_id = $1",
    "delete from jobs where id = $1",
];

/// What a job with `status` (`None`: no such job) allows: only a finished job is deleted.
fn decide(status: Option<&str>) -> Result<(), DeleteJob> {
    match status.map(|s| JobStatus::parse(s).ok_or(s)) {
        None => Err(DeleteJob::NotFound),
        Some(Ok(s)) if s.is_terminal() => Ok(()),
        Some(Ok(s)) => Err(DeleteJob::NotFinished(s)),
        // A status this build does not know (a newer replica's): not deleted.
        Some(Err(_)) => Err(DeleteJob::NotFinished(JobStatus::Running)),
    }
}

/// Deletes job `id` in `tx` if its status allows it, and commits; otherwise nothing is
/// written. `status_sql` reads the job's status by `$1`, with the backend's row lock (SQLite's
/// write transaction holds the database already; Postgres says `for update`).
pub(super) async fn delete_in<DB>(
    mut tx: Transaction<'_, DB>,
    id: JobId,
    status_sql: &'static str,
) -> Result<DeleteJob, StoreError>
where
    DB: Database,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
    for<'q> Uuid: Encode<'q, DB> + Type<DB>,
    for<'r> (String,): FromRow<'r, DB::Row>,
{
    let status: Option<String> = sqlx::query_scalar(status_sql)
        .bind(id.0)
        .fetch_optional(&mut *tx)
        .await?;
    if let Err(refused) = decide(status.as_deref()) {
        return Ok(refused);
    }
    for &statement in STATEMENTS {
        sqlx::query(statement).bind(id.0).execute(&mut *tx).await?;
    }
    tx.commit().await?;
    Ok(DeleteJob::Deleted)
}
