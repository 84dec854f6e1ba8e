//! Retention: finished jobs older than `database.job_retention_days` are deleted, with their
//! records, traces, media and usage, as `DELETE /v1/jobs/{id}` deletes one. Each replica
//! sweeps; two replicas deleting the same job find it gone, which is fine.

use std::time::Duration;

use chrono::Utc;
use tokio_util::sync::CancellationToken;

use super::JobService;
use crate::domain::JobId;
use crate::store::DeleteJob;

/// Jobs read and deleted per round, so one sweep never holds a long list or a long write.
const SWEEP_BATCH: u32 = 100;

/// How often a replica sweeps (and once at start).
pub const RETENTION_SWEEP_EVERY: Duration = Duration::from_secs(3600);

impl JobService {
    /// Deletes finished jobs that finished more than `retention` ago, a batch at a time, until
    /// none is left or `stop` is cancelled. Returns how many it deleted; a store error ends
    /// the sweep (logged) and leaves the rest to the next one.
    pub async fn delete_expired(&self, retention: Duration, stop: &CancellationToken) -> u64 {
        let Ok(age) = chrono::Duration::from_std(retention) else {
            return 0;
        };
        let before = Utc::now() - age;
        let mut deleted = 0;
        while !stop.is_cancelled() {
            let ids = match self.store.expired_jobs(before, SWEEP_BATCH).await {
                Ok(ids) => ids,
                Err(e) => {
                    tracing::warn!(error = %e, "retention sweep stopped: listing expired jobs failed");
                    break;
                }
            };
            let full = ids.len() == SWEEP_BATCH as usize;
            for id in ids {
                match self.delete_expired_job(id).await {
                    Ok(true) => deleted += 1,
                    Ok(false) => {}
                    Err(()) => return deleted,
                }
            }
            if !full {
                break;
            }
        }
        deleted
    }

    async fn delete_expired_job(&self, id: JobId) -> Result<bool, ()> {
        match self.store.delete_job(id).await {
            Ok(DeleteJob::Deleted) => {
                self.forget(id);
                metrics::counter!(crate::metrics::JOBS_EXPIRED).increment(1);
                tracing::info!(job.id = %id, "job deleted: past database.job_retention_days");
                Ok(true)
            }
            // Deleted by another replica or a client meanwhile; a job not finished is never
            // listed, so it cannot be here.
            Ok(DeleteJob::NotFound | DeleteJob::NotFinished(_)) => Ok(false),
            Err(e) => {
                tracing::warn!(job.id = %id, error = %e, "retention sweep stopped: deleting a job failed");
                Err(())
            }
        }
    }

    /// Sweeps every [`RETENTION_SWEEP_EVERY`], from start-up, until `stop`.
    pub async fn sweep_expired(self, retention: Duration, stop: CancellationToken) {
        let mut tick = tokio::time::interval(RETENTION_SWEEP_EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                () = stop.cancelled() => return,
            }
            let deleted = self.delete_expired(retention, &stop).await;
            if deleted > 0 {
                tracing::info!(deleted, "retention sweep done");
            }
        }
    }

    /// Sweeps the response cache every [`RETENTION_SWEEP_EVERY`], from start-up, until `stop`:
    /// entries older than `max_age`, then the oldest past `max_bytes` in all.
    pub async fn sweep_cache(self, max_age: Duration, max_bytes: u64, stop: CancellationToken) {
        let mut tick = tokio::time::interval(RETENTION_SWEEP_EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                () = stop.cancelled() => return,
            }
            let before = Utc::now() - chrono::Duration::from_std(max_age).unwrap_or_default();
            match self.store.cache_sweep(before, max_bytes).await {
                Ok(0) => {}
                Ok(deleted) => tracing::info!(deleted, "response cache sweep done"),
                Err(e) => {
                    tracing::warn!(error = %e, "response cache sweep failed; the next one retries")
                }
            }
        }
    }
}
