//! The writer's fallback when the database refuses a value that the checks before the write
//! did not foresee: a store that answers like a database refusing a value (a real data error,
//! from a real failing statement) for every write carrying a poisoned result.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde_json::json;
use synthgate::config::{LimitsConfig, WorkersConfig};
use synthgate::domain::{JobId, JobStatus, RecordId, RecordStatus};
use synthgate::generate::PlanContext;
use synthgate::jobs::{JobService, ServerModels};
use synthgate::llm::{LlmClient, RetryPolicy};
use synthgate::store::{
    CancelOutcome, Claim, ClaimPolicy, CreateOutcome, FinishedRecord, JobCounts, JobError, JobRow,
    NewJob, RecordOutcome, RecordResult, RecordRow, Store, StoreError, TraceRow, UsageCounts,
};
use synthgate::worker::WorkerPool;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::{create, new_job};
use crate::db::{Backend, TestDb, both_backends};

both_backends!(a_refused_batch_is_written_record_by_record);

/// Delegates to a real store, except that `complete_records` fails with the database's own
/// data error whenever a result's values hold the string `"poison"`.
struct Refusing {
    inner: Arc<dyn Store>,
    backend: Backend,
    url: String,
    /// Refused writes of more than one result.
    refused_batches: AtomicUsize,
}

impl Refusing {
    /// A genuine data error from the backend: a statement the database refuses for its value.
    async fn data_error(&self) -> StoreError {
        let e = match self.backend {
            Backend::Postgres => {
                let pool = sqlx::PgPool::connect(&self.url).await.unwrap();
                let e = sqlx::query("select 'poison'::int").execute(&pool).await;
                pool.close().await;
                e.unwrap_err()
            }
            Backend::Sqlite => {
                let pool = sqlx::SqlitePool::connect(&self.url).await.unwrap();
                // Past SQLite's length limit (1e9 bytes): SQLITE_TOOBIG, nothing allocated.
                let e = sqlx::query("select zeroblob(2000000000)")
                    .execute(&pool)
                    .await;
                pool.close().await;
                e.unwrap_err()
            }
        };
        StoreError::Db(e)
    }
}

fn poisoned(r: &RecordResult) -> bool {
    let values = match &r.outcome {
        RecordOutcome::Completed { values } => Some(values),
        RecordOutcome::Failed { values, .. } => values.as_ref(),
    };
    values.is_some_and(|v| v.to_string().contains("poison"))
}

#[async_trait]
impl Store for Refusing {
    async fn ping(&self) -> Result<(), StoreError> {
        self.inner.ping().await
    }
    async fn now(&self) -> Result<DateTime<Utc>, StoreError> {
        self.inner.now().await
    }
    async fn create_job(&self, job: &NewJob) -> Result<CreateOutcome, StoreError> {
        self.inner.create_job(job).await
    }
    async fn get_job(&self, id: JobId, owner: Option<&str>) -> Result<Option<JobRow>, StoreError> {
        self.inner.get_job(id, owner).await
    }
    async fn list_jobs(
        &self,
        owner: Option<&str>,
        before: Option<JobId>,
        limit: u32,
    ) -> Result<Vec<JobRow>, StoreError> {
        self.inner.list_jobs(owner, before, limit).await
    }
    async fn job_counts(&self, id: JobId) -> Result<JobCounts, StoreError> {
        self.inner.job_counts(id).await
    }
    async fn first_errors(&self, id: JobId, limit: u32) -> Result<Vec<RecordRow>, StoreError> {
        self.inner.first_errors(id, limit).await
    }
    async fn request_cancel(&self, id: JobId) -> Result<CancelOutcome, StoreError> {
        self.inner.request_cancel(id).await
    }
    async fn claim(
        &self,
        owner: &str,
        limit: u32,
        lease: Duration,
        policy: ClaimPolicy,
    ) -> Result<Claim, StoreError> {
        self.inner.claim(owner, limit, lease, policy).await
    }
    async fn renew_leases(
        &self,
        owner: &str,
        ids: &[RecordId],
        lease: Duration,
    ) -> Result<u64, StoreError> {
        self.inner.renew_leases(owner, ids, lease).await
    }
    async fn complete_records(
        &self,
        owner: &str,
        results: &[RecordResult],
    ) -> Result<Vec<RecordId>, StoreError> {
        if results.iter().any(poisoned) {
            if results.len() > 1 {
                self.refused_batches.fetch_add(1, Ordering::Relaxed);
            }
            return Err(self.data_error().await);
        }
        self.inner.complete_records(owner, results).await
    }
    async fn release_records(&self, owner: &str, ids: &[RecordId]) -> Result<u64, StoreError> {
        self.inner.release_records(owner, ids).await
    }
    async fn finalize_jobs(&self, ids: &[JobId]) -> Result<Vec<JobId>, StoreError> {
        self.inner.finalize_jobs(ids).await
    }
    async fn fail_job(&self, id: JobId, error: &JobError) -> Result<(), StoreError> {
        self.inner.fail_job(id, error).await
    }
    async fn get_record(
        &self,
        id: RecordId,
        owner: Option<&str>,
    ) -> Result<Option<RecordRow>, StoreError> {
        self.inner.get_record(id, owner).await
    }
    async fn list_records(
        &self,
        job_id: JobId,
        after_index: Option<u32>,
        status: Option<RecordStatus>,
        limit: u32,
    ) -> Result<Vec<RecordRow>, StoreError> {
        self.inner
            .list_records(job_id, after_index, status, limit)
            .await
    }
    async fn finished_since(
        &self,
        job_id: JobId,
        since: DateTime<Utc>,
    ) -> Result<Vec<FinishedRecord>, StoreError> {
        self.inner.finished_since(job_id, since).await
    }
    async fn get_traces(
        &self,
        record_id: RecordId,
        column: Option<&str>,
    ) -> Result<Vec<TraceRow>, StoreError> {
        self.inner.get_traces(record_id, column).await
    }
    async fn traces_for(&self, record_ids: &[RecordId]) -> Result<Vec<TraceRow>, StoreError> {
        self.inner.traces_for(record_ids).await
    }
    async fn job_usage(&self, job_id: JobId) -> Result<BTreeMap<String, UsageCounts>, StoreError> {
        self.inner.job_usage(job_id).await
    }
    async fn live_jobs(&self) -> Result<Vec<JobId>, StoreError> {
        self.inner.live_jobs().await
    }
    async fn close(&self) {
        self.inner.close().await
    }
}

/// The database refuses every batch holding a poisoned record, for its value. The writer does
/// not retry such a batch as if the database were away (before, it did so for a lease time,
/// then gave up, and the records were re-claimed and refused again, forever): it writes the
/// records one by one, the poisoned ones fail with `unstorable_value` and the rest complete.
async fn a_refused_batch_is_written_record_by_record(db: TestDb) {
    let refusing = Arc::new(Refusing {
        inner: db.store.clone(),
        backend: db.backend,
        url: db.url.clone(),
        refused_batches: AtomicUsize::new(0),
    });
    assert!(refusing.data_error().await.is_data_error());
    let store: Arc<dyn Store> = refusing.clone();

    let mut job = new_job(None, 40);
    job.config = json!({"columns": [
        {"name": "x", "column_type": "sampler", "sampler_type": "category",
         "params": {"values": ["a", "b"]}},
        {"name": "y", "column_type": "expression", "expr": "{{ 'poison' if x == 'b' else x }}"}
    ]});
    job.run_config = json!({"disable_early_shutdown": true});
    let job = create(&*store, &job).await;

    let wake = Arc::new(Notify::new());
    let jobs = JobService::new(
        store.clone(),
        PlanContext::default(),
        ServerModels::default(),
        LimitsConfig::default(),
        wake.clone(),
        None,
    );
    let llm = LlmClient::new(&[], RetryPolicy::default()).unwrap();
    // A long write interval, so the writer's batches hold records of both kinds.
    let workers = WorkersConfig {
        write_interval_ms: 200,
        ..WorkersConfig::default()
    };
    let pool = WorkerPool::new(
        store.clone(),
        jobs,
        Arc::new(llm),
        None,
        workers,
        "refused-writer".to_owned(),
        wake,
    );
    let stop = CancellationToken::new();
    let watch = async {
        let deadline = Instant::now() + Duration::from_secs(30);
        let end = loop {
            let j = store.get_job(job.id, None).await.unwrap().unwrap();
            if j.status.is_terminal() {
                break j;
            }
            assert!(Instant::now() < deadline, "the job never finished: {j:?}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        stop.cancel();
        end
    };
    let ((), end) = tokio::join!(pool.run(stop.clone(), Duration::from_secs(5)), watch);

    assert_eq!(end.status, JobStatus::Completed);
    assert!(refusing.refused_batches.load(Ordering::Relaxed) > 0);
    let records = store.list_records(job.id, None, None, 100).await.unwrap();
    assert_eq!(records.len(), 40);
    let mut failed = 0;
    for r in records {
        let values = r.values.clone().unwrap_or_default();
        if r.status == RecordStatus::Failed {
            failed += 1;
            let e = r.error.expect("error");
            assert_eq!(e.code, "unstorable_value", "{e:?}");
            assert_eq!(e.stage.as_deref(), Some("store"));
            assert_eq!(r.values, None);
        } else {
            assert_eq!(r.status, RecordStatus::Completed, "{r:?}");
            assert_ne!(values["x"], "b", "{r:?}");
            assert_eq!(values["y"], values["x"]);
        }
    }
    assert!(failed > 0);
}
