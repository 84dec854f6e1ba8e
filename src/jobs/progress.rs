//! What a progress stream sends, read from the database so a stream served by any replica
//! shows the work of all of them: the counts whenever they change, each record reaching a
//! final state while the stream is open, and the finished job, after which nothing follows.

use chrono::{DateTime, Utc};

use crate::domain::job::{JobCounts, JobSummary};
use crate::domain::record::FinishedRecord;
use crate::domain::{JobId, JobStatus};
use crate::error::ApiError;

use super::JobService;

/// Records finishing inside a transaction that commits after our read carry a timestamp a
/// little in the past; re-reading this margin catches them (duplicates are filtered).
const MARGIN: chrono::Duration = chrono::Duration::seconds(3);

/// One step of a job's progress.
#[derive(Debug)]
pub enum Progress {
    /// The job's status and counts: first, then whenever the counts change.
    Counts {
        /// The job's status.
        status: JobStatus,
        /// Its records by status.
        counts: JobCounts,
    },
    /// A record reached a final state.
    Record(FinishedRecord),
    /// The job finished; nothing follows.
    Done(Box<JobSummary>),
}

/// Follows one job; see [`JobService::follow`].
pub struct Follower {
    jobs: JobService,
    job: JobId,
    num_records: u32,
    /// Bit per record index: its `Record` step was sent.
    seen: Vec<u64>,
    since: DateTime<Utc>,
    last_counts: Option<JobCounts>,
}

impl JobService {
    /// Starts following a job visible to `owner`.
    pub async fn follow(&self, id: JobId, owner: Option<&str>) -> Result<Follower, ApiError> {
        let job = self.get(id, owner).await?;
        let since = self.store.now().await? - MARGIN;
        Ok(Follower {
            jobs: self.clone(),
            job: id,
            num_records: job.num_records,
            seen: vec![0u64; (job.num_records as usize).div_ceil(64)],
            since,
            last_counts: None,
        })
    }
}

impl Follower {
    /// How many records the job followed has.
    pub fn num_records(&self) -> u64 {
        u64::from(self.num_records)
    }

    /// The job followed.
    pub fn job(&self) -> JobId {
        self.job
    }

    /// One look at the database: the steps since the last look, in order. `Counts` comes
    /// before the records of the same look, so a stream always opens with the counts, even
    /// when records finished just before it started.
    pub async fn poll(&mut self) -> Result<Vec<Progress>, ApiError> {
        let store = &self.jobs.store;
        let now = store.now().await?;
        let mut records = Vec::new();
        for r in store.finished_since(self.job, self.since).await? {
            let (word, bit) = ((r.index / 64) as usize, r.index % 64);
            let Some(w) = self.seen.get_mut(word) else {
                continue;
            };
            if *w & (1 << bit) != 0 {
                continue;
            }
            *w |= 1 << bit;
            records.push(Progress::Record(r));
        }
        self.since = now - MARGIN;
        let summary = self.jobs.summary(self.job, None).await?;
        let mut steps = Vec::with_capacity(records.len() + 2);
        if self.last_counts != Some(summary.counts) {
            self.last_counts = Some(summary.counts);
            steps.push(Progress::Counts {
                status: summary.job.status,
                counts: summary.counts,
            });
        }
        steps.extend(records);
        if summary.job.status.is_terminal() {
            steps.push(Progress::Done(Box::new(summary)));
        }
        Ok(steps)
    }
}
