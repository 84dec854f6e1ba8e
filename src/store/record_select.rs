//! Which records of a job a listing reads: a status, a `record_selection` verdict, or the
//! records that make the job's dataset.

use crate::domain::RecordStatus;
use crate::domain::job::JobRow;

/// Which records of a job [`super::RecordStore::list_records`] reads.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RecordSelect {
    /// One status.
    pub status: Option<RecordStatus>,
    /// One verdict of a `record_selection` job's candidates.
    pub selection: Option<crate::domain::selection::Selection>,
}

impl RecordSelect {
    /// Records of one status, if given.
    pub fn status(status: Option<RecordStatus>) -> Self {
        Self {
            status,
            selection: None,
        }
    }

    /// The records that make `job`'s dataset: its completed ones, or the accepted candidates
    /// of a `record_selection` job.
    pub fn dataset(job: &JobRow) -> Self {
        match job.selection {
            Some(_) => Self {
                status: None,
                selection: Some(crate::domain::selection::Selection::Accepted),
            },
            None => Self::status(Some(RecordStatus::Completed)),
        }
    }
}
