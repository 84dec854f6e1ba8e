//! Deleting a finished job, written once for both backends: the statements (the same SQL on
//! SQLite and Postgres) and what the job's status decides. Each backend runs them in its own
//! write transaction, after reading the status there.

use sqlx::{Database, Encode, Executor, IntoArguments, Type};
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

/// Deletes job `id`, whose status the caller read in this transaction (`None`: no such job),
/// if that status allows it. The caller commits on [`DeleteJob::Deleted`].
pub(super) async fn delete_in<DB>(
    conn: &mut DB::Connection,
    id: JobId,
    status: Option<&str>,
) -> Result<DeleteJob, StoreError>
where
    DB: Database,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
    for<'q> Uuid: Encode<'q, DB> + Type<DB>,
{
    if let Err(refused) = decide(status) {
        return Ok(refused);
    }
    for &statement in STATEMENTS {
        sqlx::query(statement)
            .bind(id.0)
            .execute(&mut *conn)
            .await?;
    }
    Ok(DeleteJob::Deleted)
}
