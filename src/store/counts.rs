//! A job's record counts from what is stored: the `job_record_counts` counters (rows written,
//! by outcome and, for a `record_selection` job, by verdict), the records of its leased chunks
//! that have no result yet, and the job's status for the rest.

use super::rows::{CountDb, record_status};
use super::{JobCounts, JobRow, StoreError};
use crate::domain::selection::SelectionCounts;
use crate::domain::{JobStatus, RecordStatus};

/// A job's counts from its stored rows: `rows` holds `completed` and `failed` (record rows by
/// status), `in_progress` (records of its leased chunks without a result) and, for a
/// selection job, `passed` and `rejected` (completed candidates by verdict); the rest follows
/// from the job (see [`counts`]).
pub(crate) fn job_counts(job: &JobRow, rows: Vec<CountDb>) -> Result<JobCounts, StoreError> {
    let (mut completed, mut failed, mut in_progress) = (0, 0, 0);
    let (mut passed, mut rejected) = (0, 0);
    for row in rows {
        let n = u64::try_from(row.n)
            .map_err(|_| StoreError::Corrupt(format!("records: negative count {}", row.n)))?;
        match row.status.as_str() {
            "passed" => passed = n,
            "rejected" => rejected = n,
            status => match record_status(status)? {
                RecordStatus::Completed => completed = n,
                RecordStatus::Failed => failed = n,
                RecordStatus::InProgress => in_progress = n,
                // Not stored as rows since migration 0007; a row left from before counts
                // nowhere.
                RecordStatus::Pending | RecordStatus::Cancelled => {}
            },
        }
    }
    let Some(spec) = job.selection else {
        return Ok(counts(
            job.status,
            u64::from(job.num_records),
            completed,
            failed,
            in_progress,
        ));
    };
    let selection = SelectionCounts::from_stored(
        job.num_records,
        spec.max_candidates,
        passed,
        rejected,
        completed,
        failed,
    );
    Ok(selection_counts(job.status, selection, in_progress))
}

/// The counts of a job nothing of which has run yet (just inserted): every record pending.
pub fn unstarted_counts(job: &JobRow) -> JobCounts {
    // No stored rows: nothing can be corrupt.
    job_counts(job, Vec::new()).unwrap_or_default()
}

/// A job's record counts from what is stored: `completed` and `failed` rows, `in_progress`
/// (records of leased chunks without a result), and the job's status. The rest of
/// `num_records` is pending while the job can still run them, cancelled once it cannot.
pub(crate) fn counts(
    status: JobStatus,
    num_records: u64,
    completed: u64,
    failed: u64,
    in_progress: u64,
) -> JobCounts {
    let rest = num_records.saturating_sub(completed + failed + in_progress);
    let (pending, cancelled) = match status {
        JobStatus::Queued | JobStatus::Running => (rest, 0),
        JobStatus::Cancelling | JobStatus::Cancelled | JobStatus::Failed => (0, rest),
        // Finished with every record written; a rest here would be records the job lost.
        JobStatus::Completed => (0, rest),
    };
    JobCounts {
        pending,
        in_progress,
        completed,
        failed,
        cancelled,
        waiting_for_model: 0,
        selection: None,
    }
}

/// The counts of a `record_selection` job, whose records are its candidates. How many more
/// candidates it needs is not known in advance: `pending` is the fewest it may still take
/// (one per accepted record missing, beyond those in flight, within the budget left), so the
/// total grows as candidates are rejected and progress (`finished / total`) ends at 1. A job
/// that stopped early (cancelled, failed) counts those as `cancelled`; a completed one has
/// none: the budget it did not spend is not records.
pub(crate) fn selection_counts(
    status: JobStatus,
    selection: SelectionCounts,
    in_progress: u64,
) -> JobCounts {
    let rest = selection
        .missing()
        .saturating_sub(in_progress)
        .min(selection.budget_left(in_progress));
    let (pending, cancelled) = match status {
        JobStatus::Queued | JobStatus::Running => (rest, 0),
        JobStatus::Cancelling | JobStatus::Cancelled | JobStatus::Failed => (0, rest),
        JobStatus::Completed => (0, 0),
    };
    let generated = selection.candidates();
    let failed = selection.failed_generation;
    JobCounts {
        pending,
        in_progress,
        completed: generated - failed,
        failed,
        cancelled,
        waiting_for_model: 0,
        selection: Some(selection),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_split_the_rest_by_status() {
        let c = counts(JobStatus::Running, 100, 10, 5, 20);
        assert_eq!((c.pending, c.cancelled, c.total()), (65, 0, 100));
        let c = counts(JobStatus::Cancelled, 100, 10, 5, 0);
        assert_eq!((c.pending, c.cancelled, c.total()), (0, 85, 100));
        let c = counts(JobStatus::Completed, 3, 2, 1, 0);
        assert_eq!((c.pending, c.cancelled, c.total()), (0, 0, 3));
    }

    #[test]
    fn a_selection_job_pends_what_it_still_needs_within_its_budget() {
        // Target 10, budget 100: 4 accepted, 20 rejected, 1 failed, 3 in flight: at least
        // 3 more candidates.
        let sel = SelectionCounts::from_stored(10, 100, 4, 20, 24, 1);
        let c = selection_counts(JobStatus::Running, sel, 3);
        assert_eq!(
            (c.pending, c.in_progress, c.completed, c.failed),
            (3, 3, 24, 1)
        );
        // Budget 30: 25 generated, 3 in flight: 2 left, though 6 are missing.
        let sel = SelectionCounts::from_stored(10, 30, 4, 20, 24, 1);
        assert_eq!(selection_counts(JobStatus::Running, sel, 3).pending, 2);
        // Completed: nothing pending or cancelled, the rest of the budget unspent.
        let c = selection_counts(JobStatus::Completed, sel, 0);
        assert_eq!((c.pending, c.cancelled, c.total()), (0, 0, 25));
        let c = selection_counts(JobStatus::Cancelled, sel, 0);
        assert_eq!(c.cancelled, 5);
    }
}
