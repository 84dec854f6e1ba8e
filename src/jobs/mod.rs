//! The job service: the one door to jobs.
//!
//! The HTTP layer asks it for everything about a job: submit and preview, cancel, the job
//! with its counts, its records and traces, dataset exports and progress. It is the only code
//! that creates a job or changes a job's status: submit and cancel here, and what the worker
//! pool reports ([`JobService::records_written`], [`JobService::finalize`]): early shutdown on
//! the error rate and finishing jobs with nothing left to run. (A claim also moves a job from
//! `queued` to `running`, inside the claim's own transaction.) The worker pool moves records
//! through the queue (claim, renew, complete, release) and runs each through the same
//! [`RecordRunner`] as a preview.
//!
//! * `submit`: the request, its validation, the insert;
//! * `catalog`: the server's model and tool configs, and what a job or a caller
//!   may do with them;
//! * `plans`: compiled plans, cached by job;
//! * `lifecycle`: cancel, early shutdown, finalizing;
//! * `retention`: deleting finished jobs past `database.job_retention_days`;
//! * `views`: job summaries, records, traces (one store round trip a job);
//! * `exports`: the dataset as JSONL, CSV or Parquet, streamed (Parquet with
//!   `crate::datasets::formats::parquet_writer`, a row group per chunk);
//! * `progress`: what a progress stream sends;
//! * `activity`: how many of a job's records in progress wait on a model, on this replica;
//! * `runner` and `preview`: generating records.

mod activity;
mod analysis;
mod archive;
pub use archive::{ARTIFACTS_MEMBER, DATASET_MEMBER};
mod budgets;
mod catalog;
mod exports;
mod job_span;
mod lifecycle;
mod plans;
mod preview;
mod progress;
mod retention;
mod runner;
mod submit;
mod views;

use std::sync::Arc;

use tokio::sync::Notify;

use crate::config::LimitsConfig;
use crate::cpu::CpuGate;
use crate::datasets::seed_cache::SeedBlocks;
use crate::datasets::sources::SeedSources;
use crate::llm::ChatModel;
use crate::queue::{Database, Queue};
use crate::store::{Store, StoreError};
use crate::tools::ToolHub;

pub use activity::{Activity, ModelWaits};
pub use analysis::{
    ColumnStatistics, DatasetAnalysis, DatasetProfile, JudgeScoreProfile, MAX_DISTINCT, Profiler,
};
pub use catalog::Catalog;
pub use exports::{Export, ExportFormat, ExportRecords};
pub use plans::{CompileError, CompiledJob, PlanLookup};
pub use preview::{MAX_PREVIEW_RECORDS, PreparedPreview, Preview};
pub use progress::{Follower, Progress};
pub use runner::RecordRunner;
pub use submit::{NumRecords, SubmitRequest};
pub use views::{Page, RecordsOf};

use catalog::check_caller;
use plans::PlanCache;

/// How many failed records a job summary lists.
pub const FIRST_ERRORS: u32 = 5;

/// Jobs, their records, traces, exports and progress; see the module docs. Cheap to clone.
#[derive(Clone)]
pub struct JobService {
    store: Arc<dyn Store>,
    /// The work queue on the same database: cancelling, failing and finalizing jobs, which only
    /// this service does.
    queue: Arc<dyn Queue>,
    plans: Arc<PlanCache>,
    catalog: Arc<Catalog>,
    limits: LimitsConfig,
    /// Wakes this replica's workers after a submit, so they need not wait for the next poll.
    wake: Arc<Notify>,
    /// Lists tools at submit time, so tool-config errors are the client's 422, not failed
    /// records; closes a finished job's `per_job` MCP sessions.
    tools: ToolHub,
    /// Where parsing, compiling and generating run: off the runtime threads, one per core.
    cpu: CpuGate,
    runner: RecordRunner,
    /// Where seeds other than uploaded datasets resolve (allow-listed directories, the Hub).
    sources: Arc<SeedSources>,
    /// Finished jobs' exports written out for ranged reads, by ETag, in `render_dir`.
    renders: Arc<crate::rendered::RenderCache<String>>,
    render_dir: std::path::PathBuf,
    /// Records of this replica waiting on a model, by job (the worker pool reports them).
    activity: Arc<Activity>,
    /// The response cache mode of a job or preview that names none (`llm.cache.default_mode`).
    cache_default: crate::domain::models::CacheMode,
}

impl JobService {
    /// A service over the database `db` (its store and its queue), with the server's
    /// `catalog`; records are generated with `llm` and `tools` (one MCP session pool per
    /// process).
    pub fn new(
        db: Arc<dyn Database>,
        catalog: Catalog,
        limits: LimitsConfig,
        llm: Arc<dyn ChatModel>,
        tools: ToolHub,
    ) -> Self {
        let store: Arc<dyn Store> = db.clone();
        let queue: Arc<dyn Queue> = db;
        let cpu = CpuGate::per_core();
        let runner = RecordRunner::new(
            llm,
            tools.clone(),
            cpu.clone(),
            limits.max_prompt_chars,
            limits.max_image_bytes,
            SeedBlocks::new(store.clone(), crate::config::DEFAULT_SEED_CACHE_BYTES),
        );
        Self {
            store,
            queue,
            plans: Arc::new(PlanCache::new(256)),
            catalog: Arc::new(catalog),
            limits,
            wake: Arc::new(Notify::new()),
            tools,
            cpu,
            runner,
            sources: Arc::new(SeedSources::none()),
            renders: Arc::default(),
            render_dir: std::env::temp_dir(),
            activity: Arc::default(),
            cache_default: crate::domain::models::CacheMode::Off,
        }
    }

    /// The same service with `mode` as the response cache mode of jobs that name none.
    pub fn with_cache_default(mut self, mode: crate::domain::models::CacheMode) -> Self {
        self.cache_default = mode;
        self
    }

    /// `chat` behind the response cache `job` uses (`chat` itself when its mode is `off`).
    pub fn cached_chat<'a>(
        &'a self,
        chat: &'a dyn ChatModel,
        job: &'a CompiledJob,
    ) -> crate::llm::CachedChat<'a> {
        crate::llm::CachedChat {
            inner: chat,
            store: self.store.as_ref(),
            cache: &job.cache,
        }
    }

    /// Where the worker pool reports its records' model waits (see [`Activity`]).
    pub fn activity(&self) -> &Activity {
        &self.activity
    }

    /// The same service writing exports for ranged reads into `dir` (the system's temporary
    /// directory otherwise).
    pub fn with_render_dir(mut self, dir: std::path::PathBuf) -> Self {
        self.render_dir = dir;
        self
    }

    /// The same service with a seed block cache of `seed_cache_bytes` (shared by every job of
    /// the process) and the server-side seed `sources`.
    pub fn with_datasets(mut self, seed_cache_bytes: u64, sources: SeedSources) -> Self {
        self.runner
            .set_seeds(SeedBlocks::new(self.store.clone(), seed_cache_bytes));
        self.sources = Arc::new(sources);
        self
    }

    /// Notified after each submit on this replica: the worker pool claims at once.
    pub fn submitted(&self) -> &Arc<Notify> {
        &self.wake
    }

    /// Where CPU-heavy work runs (see [`CpuGate`]).
    pub fn cpu(&self) -> &CpuGate {
        &self.cpu
    }

    /// The configured limits.
    pub fn limits(&self) -> &LimitsConfig {
        &self.limits
    }

    /// Generates records for the worker pool and for previews.
    pub fn runner(&self) -> &RecordRunner {
        &self.runner
    }

    /// What validation columns run with here (the ruff for Python code validators, the
    /// remote endpoint allow list).
    pub fn validators(&self) -> &Arc<crate::generate::ValidatorEnv> {
        &self.catalog.plan_context().validators
    }

    /// Whether the server config defines model alias `alias` (a job may define others).
    pub fn is_server_model_alias(&self, alias: &str) -> bool {
        self.catalog.is_server_model_alias(alias)
    }

    /// Whether the database takes a write, for readiness.
    pub async fn probe_store(&self) -> Result<(), StoreError> {
        self.store.probe_write().await
    }
}
