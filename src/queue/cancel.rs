//! What a cancel amounts to, read in the cancelling transaction: both backends' cancels end
//! here, so a second cancel, a cancel that came too late and a cancel of a finished job answer
//! alike on each.

use sqlx::{Database, Encode, Executor, FromRow, IntoArguments, Type};
use uuid::Uuid;

use super::{CancelOutcome, StoreError};
use crate::domain::job::JobRow;
use crate::domain::{JobId, JobStatus};
use crate::store::reads;

/// What a cancel did to job `id`, read in the cancel's transaction after it: `live` when the
/// job was queued or running and is now cancelling (or already finished by it).
pub(crate) async fn read_outcome<'c, DB, R>(
    conn: &'c mut DB::Connection,
    id: JobId,
    live: bool,
) -> Result<CancelOutcome, StoreError>
where
    DB: Database,
    &'c mut DB::Connection: Executor<'c, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
    for<'q> Uuid: Encode<'q, DB> + Type<DB>,
    for<'q> &'q str: Encode<'q, DB> + Type<DB>,
    R: for<'r> FromRow<'r, DB::Row> + Send + Unpin + TryInto<JobRow, Error = StoreError>,
{
    let job: Option<R> = reads::job_query::<DB>(id, None)
        .build_query_as()
        .fetch_optional(conn)
        .await?;
    match job {
        None => Ok(CancelOutcome::NotFound),
        Some(job) => Ok(outcome(job.try_into()?, live)),
    }
}

/// What a cancel amounts to, from the job as the cancel's transaction left it; `moved`: the
/// cancel found the job `queued` or `running` (and made it `cancelling`, then finalized it).
/// Repeating a cancel under way (`cancelling`) is not an error; a job that is `completed` or
/// `failed` (before, or because every record was done), or was `cancelled` by an earlier
/// cancel, is finished.
fn outcome(job: JobRow, moved: bool) -> CancelOutcome {
    let accepted = match job.status {
        JobStatus::Queued | JobStatus::Running | JobStatus::Cancelling => true,
        JobStatus::Cancelled => moved,
        JobStatus::Completed | JobStatus::Failed => false,
    };
    if accepted {
        CancelOutcome::Accepted(job)
    } else {
        CancelOutcome::Finished(job)
    }
}
