//! A store that wraps a real one: it notes every call (to count a service's round trips) and
//! can refuse writes the way a database refuses a value; and a job service to put over it.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde_json::Value;
use synthgate::datasets::{DatasetColumn, DatasetId, DatasetMeta, DatasetQuery, DeleteDataset};
use synthgate::domain::{JobId, RecordId};
use synthgate::queue::{
    CancelOutcome, ChunkKey, Claim, ClaimPolicy, Database, Queue, RecordResult,
};
use synthgate::store::{
    CreateOutcome, DatasetStore, DeleteJob, FinishedRecord, JobCounts, JobError, JobRow, JobSelect,
    JobStore, JobSummary, NewJob, RecordOutcome, RecordRow, RecordStore, Store, StoreError,
    TraceRow, UsageCounts,
};

use synthgate::config::LimitsConfig;
use synthgate::jobs::{Catalog, JobService};
use synthgate::llm::{LlmClient, RetryPolicy};
use synthgate::tools::ToolHub;

use crate::db::{Backend, TestDb};

/// A job service over `store` with an empty catalog, no LLM provider and no tools: enough for
/// jobs of samplers and expressions.
pub(super) fn job_service(store: Arc<dyn Database>) -> JobService {
    let llm = LlmClient::new(&[], RetryPolicy::default()).expect("an LLM client with no provider");
    JobService::new(
        store,
        Catalog::default(),
        LimitsConfig::default(),
        Arc::new(llm),
        ToolHub::empty(),
    )
}

/// What [`Spy`]'s `complete_records` does with a write carrying a poisoned result (one whose
/// values hold the string `"poison"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Poison {
    /// Writes it like any other.
    Pass,
    /// Fails with the database's own data error, as a database refusing a value does.
    Refuse,
    /// Panics, as a bug under the store's write would.
    Panic,
    /// Panics, and panics again at every later write of the same index, even as a failure
    /// without values: a bug that breaks the record's every write.
    PanicAlways,
}

/// Delegates to a real store, noting the name of every call; `complete_records` treats
/// poisoned results as `poison` says.
pub(super) struct Spy {
    inner: Arc<dyn Database>,
    backend: Backend,
    url: String,
    poison: Poison,
    /// Refused (or panicked) writes of more than one result.
    pub(super) refused_batches: AtomicUsize,
    /// The indexes `PanicAlways` panicked on.
    broken: Mutex<std::collections::HashSet<(JobId, u32)>>,
    /// Names of the calls made, in order.
    calls: Mutex<Vec<&'static str>>,
}

impl Spy {
    pub(super) fn new(db: &TestDb, poison: Poison) -> Self {
        Self {
            inner: db.store.clone(),
            backend: db.backend,
            url: db.url.clone(),
            poison,
            refused_batches: AtomicUsize::new(0),
            broken: Mutex::default(),
            calls: Mutex::new(Vec::new()),
        }
    }

    /// The calls made since the last look, and forgets them.
    pub(super) fn take_calls(&self) -> Vec<&'static str> {
        std::mem::take(&mut *self.calls.lock().unwrap())
    }

    fn note(&self, call: &'static str) {
        self.calls.lock().unwrap().push(call);
    }

    /// A genuine data error from the backend: a statement the database refuses for its value.
    pub(super) async fn data_error(&self) -> StoreError {
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
impl synthgate::store::CacheStore for Spy {
    async fn cache_get(&self, owner: &str, key: &[u8]) -> Result<Option<Value>, StoreError> {
        self.note("cache_get");
        self.inner.cache_get(owner, key).await
    }
    async fn cache_put(&self, owner: &str, key: &[u8], response: &Value) -> Result<(), StoreError> {
        self.note("cache_put");
        self.inner.cache_put(owner, key, response).await
    }
    async fn cache_sweep(&self, before: DateTime<Utc>, max_bytes: u64) -> Result<u64, StoreError> {
        self.note("cache_sweep");
        self.inner.cache_sweep(before, max_bytes).await
    }
}

#[async_trait]
impl Store for Spy {
    async fn probe_write(&self) -> Result<(), StoreError> {
        self.note("probe_write");
        self.inner.probe_write().await
    }
    async fn now(&self) -> Result<DateTime<Utc>, StoreError> {
        self.note("now");
        self.inner.now().await
    }
    async fn close(&self) {
        self.note("close");
        self.inner.close().await
    }
}

#[async_trait]
impl JobStore for Spy {
    async fn create_job(&self, job: &NewJob) -> Result<CreateOutcome, StoreError> {
        self.note("create_job");
        self.inner.create_job(job).await
    }
    async fn get_job(&self, id: JobId, owner: Option<&str>) -> Result<Option<JobRow>, StoreError> {
        self.note("get_job");
        self.inner.get_job(id, owner).await
    }
    async fn job_summaries(
        &self,
        select: JobSelect<'_>,
        first_errors: u32,
    ) -> Result<Vec<JobSummary>, StoreError> {
        self.note("job_summaries");
        self.inner.job_summaries(select, first_errors).await
    }
    async fn job_counts(&self, id: JobId) -> Result<JobCounts, StoreError> {
        self.note("job_counts");
        self.inner.job_counts(id).await
    }
    async fn delete_job(&self, id: JobId) -> Result<DeleteJob, StoreError> {
        self.note("delete_job");
        self.inner.delete_job(id).await
    }
    async fn live_jobs(&self) -> Result<Vec<JobId>, StoreError> {
        self.note("live_jobs");
        self.inner.live_jobs().await
    }
    async fn expired_jobs(
        &self,
        before: chrono::DateTime<chrono::Utc>,
        limit: u32,
    ) -> Result<Vec<JobId>, StoreError> {
        self.note("expired_jobs");
        self.inner.expired_jobs(before, limit).await
    }
}

#[async_trait]
impl Queue for Spy {
    async fn request_cancel(&self, id: JobId) -> Result<CancelOutcome, StoreError> {
        self.note("request_cancel");
        self.inner.request_cancel(id).await
    }
    async fn claim(
        &self,
        owner: &str,
        limit: u32,
        lease: Duration,
        policy: ClaimPolicy,
    ) -> Result<Claim, StoreError> {
        self.note("claim");
        self.inner.claim(owner, limit, lease, policy).await
    }
    async fn renew_leases(
        &self,
        owner: &str,
        chunks: &[ChunkKey],
        lease: Duration,
    ) -> Result<u64, StoreError> {
        self.note("renew_leases");
        self.inner.renew_leases(owner, chunks, lease).await
    }
    async fn complete_records(
        &self,
        owner: &str,
        results: &[RecordResult],
    ) -> Result<Vec<RecordId>, StoreError> {
        self.note("complete_records");
        if self.poison == Poison::PanicAlways {
            let mut broken = self.broken.lock().unwrap();
            broken.extend(
                results
                    .iter()
                    .filter(|r| poisoned(r))
                    .map(|r| (r.job_id, r.index)),
            );
            if results
                .iter()
                .any(|r| broken.contains(&(r.job_id, r.index)))
            {
                drop(broken);
                panic!("the test store's write panics on a broken index");
            }
        }
        if self.poison != Poison::Pass && results.iter().any(poisoned) {
            if results.len() > 1 {
                self.refused_batches.fetch_add(1, Ordering::Relaxed);
            }
            if self.poison == Poison::Panic {
                panic!("the test store's write panics on a poisoned result");
            }
            return Err(self.data_error().await);
        }
        self.inner.complete_records(owner, results).await
    }
    async fn release_chunks(&self, owner: &str, chunks: &[ChunkKey]) -> Result<u64, StoreError> {
        self.note("release_chunks");
        self.inner.release_chunks(owner, chunks).await
    }
    async fn finalize_jobs(&self, ids: &[JobId]) -> Result<Vec<JobId>, StoreError> {
        self.note("finalize_jobs");
        self.inner.finalize_jobs(ids).await
    }
    async fn fail_job(&self, id: JobId, error: &JobError) -> Result<bool, StoreError> {
        self.note("fail_job");
        self.inner.fail_job(id, error).await
    }
    async fn unclaimed_records(&self) -> Result<u64, StoreError> {
        self.note("unclaimed_records");
        self.inner.unclaimed_records().await
    }
    async fn cancelled_jobs(&self, ids: &[JobId]) -> Result<Vec<JobId>, StoreError> {
        self.note("cancelled_jobs");
        self.inner.cancelled_jobs(ids).await
    }
}

#[async_trait]
impl RecordStore for Spy {
    async fn get_record(
        &self,
        id: RecordId,
        owner: Option<&str>,
    ) -> Result<Option<RecordRow>, StoreError> {
        self.note("get_record");
        self.inner.get_record(id, owner).await
    }
    async fn list_records(
        &self,
        job_id: JobId,
        after_index: Option<u32>,
        filter: synthgate::store::RecordSelect,
        limit: u32,
    ) -> Result<Vec<RecordRow>, StoreError> {
        self.note("list_records");
        self.inner
            .list_records(job_id, after_index, filter, limit)
            .await
    }
    async fn finished_since(
        &self,
        job_id: JobId,
        since: DateTime<Utc>,
    ) -> Result<Vec<FinishedRecord>, StoreError> {
        self.note("finished_since");
        self.inner.finished_since(job_id, since).await
    }
    async fn get_traces(
        &self,
        record_id: RecordId,
        column: Option<&str>,
    ) -> Result<Vec<TraceRow>, StoreError> {
        self.note("get_traces");
        self.inner.get_traces(record_id, column).await
    }
    async fn get_media(
        &self,
        record_id: RecordId,
        column: &str,
        index: u32,
    ) -> Result<Option<(String, Vec<u8>)>, StoreError> {
        self.inner.get_media(record_id, column, index).await
    }
    async fn traces_for(&self, record_ids: &[RecordId]) -> Result<Vec<TraceRow>, StoreError> {
        self.note("traces_for");
        self.inner.traces_for(record_ids).await
    }
    async fn job_usage(&self, job_id: JobId) -> Result<BTreeMap<String, UsageCounts>, StoreError> {
        self.note("job_usage");
        self.inner.job_usage(job_id).await
    }
}

#[async_trait]
impl DatasetStore for Spy {
    async fn find_datasets(
        &self,
        owner: Option<&str>,
        q: &DatasetQuery,
    ) -> Result<Vec<DatasetMeta>, StoreError> {
        self.note("find_datasets");
        self.inner.find_datasets(owner, q).await
    }
    async fn get_dataset(
        &self,
        id: DatasetId,
        owner: Option<&str>,
    ) -> Result<Option<DatasetMeta>, StoreError> {
        self.note("get_dataset");
        self.inner.get_dataset(id, owner).await
    }
    async fn get_datasets(&self, ids: &[DatasetId]) -> Result<Vec<DatasetMeta>, StoreError> {
        self.note("get_datasets");
        self.inner.get_datasets(ids).await
    }
    async fn read_dataset_block(
        &self,
        id: DatasetId,
        block: u64,
    ) -> Result<Vec<serde_json::Map<String, serde_json::Value>>, StoreError> {
        self.note("read_dataset_block");
        self.inner.read_dataset_block(id, block).await
    }
    async fn delete_dataset(
        &self,
        id: DatasetId,
        owner: Option<&str>,
    ) -> Result<DeleteDataset, StoreError> {
        self.note("delete_dataset");
        self.inner.delete_dataset(id, owner).await
    }
    async fn begin_dataset_import(&self, meta: &DatasetMeta) -> Result<(), StoreError> {
        self.note("begin_dataset_import");
        self.inner.begin_dataset_import(meta).await
    }
    async fn write_dataset_blocks(
        &self,
        id: DatasetId,
        first_block: u64,
        blocks: &[Vec<u8>],
    ) -> Result<bool, StoreError> {
        self.note("write_dataset_blocks");
        self.inner
            .write_dataset_blocks(id, first_block, blocks)
            .await
    }
    async fn finish_dataset_import(
        &self,
        id: DatasetId,
        columns: &[DatasetColumn],
        num_rows: u64,
    ) -> Result<Option<DatasetMeta>, StoreError> {
        self.note("finish_dataset_import");
        self.inner
            .finish_dataset_import(id, columns, num_rows)
            .await
    }
    async fn abort_dataset_import(&self, id: DatasetId) -> Result<(), StoreError> {
        self.note("abort_dataset_import");
        self.inner.abort_dataset_import(id).await
    }
    async fn delete_stale_imports(&self, idle: Duration) -> Result<u64, StoreError> {
        self.note("delete_stale_imports");
        self.inner.delete_stale_imports(idle).await
    }
    async fn dataset_usage(
        &self,
        owner: Option<&str>,
    ) -> Result<synthgate::store::DatasetUsage, StoreError> {
        self.note("dataset_usage");
        self.inner.dataset_usage(owner).await
    }
}
