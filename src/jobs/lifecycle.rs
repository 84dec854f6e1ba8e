//! A job's status after submit: cancel (the client's), early shutdown on the error rate and
//! finalizing (what the worker pool reports), and forgetting a finished job's plan and
//! sessions.

use crate::domain::job::{JobError, JobSummary};
use crate::domain::{JobId, JobStatus};
use crate::error::ApiError;
use crate::queue::CancelOutcome;
use crate::store::{DeleteJob, JobSelect};

use super::JobService;

/// Code of a job stopped by DataDesigner's early shutdown.
pub const ERROR_RATE_EXCEEDED: &str = "error_rate_exceeded";

/// Code of a job stopped because its cost passed its `max_cost`.
pub const COST_BUDGET_EXCEEDED: &str = "cost_budget_exceeded";

impl JobService {
    /// Requests cancellation: no new record of the job is claimed; records in flight finish.
    /// Whether the job had already finished is decided by the store in the cancel's own
    /// transaction, so a cancel racing the last record's write gets `job_finished`, never a
    /// `200` with a job that had finished before it. Returns the job as read just after the
    /// cancel: its records in flight may have finished it in between (`completed` when they
    /// were all it had left, `cancelled` otherwise).
    pub async fn cancel(&self, id: JobId, owner: Option<&str>) -> Result<JobSummary, ApiError> {
        // Visibility first: another key's job is not found, whatever its status.
        self.get(id, owner).await?;
        match self.queue.request_cancel(id).await? {
            CancelOutcome::Accepted(job) => {
                tracing::info!(job.id = %id, status = job.status.as_str(), "job cancel requested");
                if job.status.is_terminal() {
                    self.forget(id);
                    self.close_job_span(id).await;
                }
                self.summary(id, owner).await
            }
            CancelOutcome::Finished(job) => Err(ApiError::JobFinished {
                id: id.to_string(),
                status: job.status.as_str(),
            }),
            CancelOutcome::NotFound => Err(ApiError::JobNotFound(id.to_string())),
        }
    }

    /// Deletes a finished job and everything of it (records, traces, media, usage). A job
    /// still queued, running or cancelling is `job_not_finished`: cancel it first.
    pub async fn delete(&self, id: JobId, owner: Option<&str>) -> Result<(), ApiError> {
        // Visibility first: another key's job is not found, whatever its status.
        self.get(id, owner).await?;
        match self.store.delete_job(id).await? {
            DeleteJob::Deleted => {
                tracing::info!(job.id = %id, "job deleted");
                self.forget(id);
                Ok(())
            }
            DeleteJob::NotFound => Err(ApiError::JobNotFound(id.to_string())),
            DeleteJob::NotFinished(status) => Err(ApiError::JobNotFinished {
                id: id.to_string(),
                status: status.as_str(),
            }),
        }
    }

    /// What the worker pool reports after writing a batch: the jobs its records belong to,
    /// and those of them with a failed record. Applies the early shutdown to the latter, then
    /// finishes the jobs with nothing left to run.
    pub async fn records_written(&self, jobs: &[JobId], with_failures: &[JobId]) {
        for job in with_failures {
            self.check_error_rate(*job).await;
        }
        for job in jobs {
            if let Some(budget) = self.plans.get(*job).and_then(|c| c.max_cost_nanos) {
                self.check_budget(*job, budget).await;
            }
        }
        self.finalize(jobs).await;
    }

    /// A job's cost budget: once what its stored records cost passes `budget`, the job stops
    /// (`cost_budget_exceeded`): no more of its records start, those in flight land.
    async fn check_budget(&self, id: JobId, budget: u64) {
        let Ok(usage) = self.store.job_usage(id).await else {
            return;
        };
        let spent: u64 = usage.values().map(|u| u.cost_nanos).sum();
        if spent <= budget {
            return;
        }
        let from_nanos = crate::domain::models::prices::from_nanos;
        let error = JobError {
            code: COST_BUDGET_EXCEEDED.into(),
            message: format!(
                "stopped: the job's cost {} passed its budget (max_cost {}); records already \
                 generated are kept",
                from_nanos(spent),
                from_nanos(budget)
            ),
        };
        match self.queue.fail_job(id, &error).await {
            Ok(true) => {
                tracing::warn!(job.id = %id, spent, budget, "job stopped: cost budget");
                self.close_job_span(id).await;
            }
            Ok(false) => {}
            Err(e) => tracing::warn!(job.id = %id, error = %e, "failing the job failed"),
        }
    }

    /// Finishes those of `jobs` that have no record left to run, and forgets their plans and
    /// sessions. A failure is logged and left to the next sweep.
    pub async fn finalize(&self, jobs: &[JobId]) {
        match self.queue.finalize_jobs(jobs).await {
            Ok(done) => {
                for id in done {
                    tracing::info!(job.id = %id, "job finished");
                    self.forget(id);
                    self.close_job_span(id).await;
                }
            }
            Err(e) => tracing::warn!(error = %e, "finalizing jobs failed; the next sweep retries"),
        }
    }

    /// Finishes every live job with nothing left to run: covers a replica that died between
    /// writing a job's last record and finishing the job.
    pub async fn finalize_live(&self) {
        match self.store.live_jobs().await {
            Ok(ids) if !ids.is_empty() => self.finalize(&ids).await,
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "listing live jobs failed"),
        }
    }

    /// DataDesigner's early shutdown: once at least `shutdown_error_window` records of a job
    /// have finished, the job stops if the share of failed ones reaches `shutdown_error_rate`.
    async fn check_error_rate(&self, id: JobId) {
        let one = JobSelect::One { id, owner: None };
        let Ok(Some(summary)) = self
            .store
            .job_summaries(one, 1)
            .await
            .map(|s| s.into_iter().next())
        else {
            return;
        };
        if !matches!(summary.job.status, JobStatus::Running | JobStatus::Queued) {
            return;
        }
        let Ok(compiled) = self.compiled(&summary.job).await else {
            return;
        };
        let rc = &compiled.run_config;
        if rc.disable_early_shutdown {
            return;
        }
        let counts = summary.counts;
        let finished = counts.completed + counts.failed;
        let window = u64::from(rc.shutdown_error_window.max(1));
        if finished < window {
            return;
        }
        let rate = counts.failed as f64 / finished as f64;
        if rate < rc.effective_shutdown_error_rate() {
            return;
        }
        let first = summary
            .first_errors
            .first()
            .map(|f| format!("; first error: [{}] {}", f.error.code, f.error.message))
            .unwrap_or_default();
        let error = JobError {
            code: ERROR_RATE_EXCEEDED.into(),
            message: format!(
                "stopped early: {} of {} finished records failed, at or above shutdown_error_rate {}{}",
                counts.failed,
                finished,
                rc.effective_shutdown_error_rate(),
                first
            ),
        };
        match self.queue.fail_job(id, &error).await {
            Ok(true) => {
                tracing::warn!(job.id = %id, failed = counts.failed, finished, "job stopped early: error rate");
                self.close_job_span(id).await;
            }
            // Another replica, a cancel or the last record got there first.
            Ok(false) => {}
            Err(e) => tracing::warn!(job.id = %id, error = %e, "failing the job failed"),
        }
    }

    /// Drops a finished job's plan from the cache, and closes its `per_job` MCP sessions.
    pub(super) fn forget(&self, id: JobId) {
        self.plans.remove(id);
        self.tools.pool().release_job(id.0);
    }
}
