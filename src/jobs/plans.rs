//! Compiled plans: a job's config parsed, validated and compiled once, shared by every record
//! of the job, and cached by job id so the workers' hot path does no I/O.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use crate::datasets::DatasetId;
use crate::datasets::resolve::{ResolvedSeed, bind};
use crate::domain::JobId;
use crate::domain::dataset::{ConfigIssue, DatasetConfig, RunConfig, codes};
use crate::domain::job::JobRow;
use crate::domain::models::{ModelConfig, ToolConfig};
use crate::error::ApiError;
use crate::generate::Plan;
use crate::store::StoreError;
use crate::telemetry::JobTrace;

use super::{Catalog, JobService};

/// A job's config, validated and compiled, shared by the workers generating its records.
#[derive(Debug)]
pub struct CompiledJob {
    /// Columns in dependency order with templates compiled.
    pub plan: Plan,
    /// The job's run config (error-rate shutdown, trace override).
    pub run_config: RunConfig,
    /// Model configs by alias: the server's, overridden by the job's own.
    pub models: HashMap<String, ModelConfig>,
    /// Tool configs by alias: the server's, overridden by the job's own.
    pub tools: HashMap<String, ToolConfig>,
    /// The server's own model and tool configs, which a restricted API key is held to.
    pub catalog: Arc<Catalog>,
    /// The datasets the seed reads, in order (`jobs.seed_datasets`); empty for inline rows or
    /// no seed. A stored [`crate::generate::SeedRow`]'s `part` indexes this.
    pub seed_datasets: Vec<DatasetId>,
    /// The job's place in a trace, which its records' spans join; `None` when spans were not
    /// exported at submit.
    pub trace: Option<JobTrace>,
    /// Whose response cache its model calls use, and how.
    pub cache: crate::llm::CacheUse,
    /// Its cost budget, in billionths of the price's unit.
    pub max_cost_nanos: Option<u64>,
}

/// Why a stored job's plan could not be had.
#[derive(Debug)]
pub enum CompileError {
    /// The stored config no longer compiles (the server config changed since submit, or a
    /// dataset the job is bound to is gone).
    Invalid(Vec<ConfigIssue>),
    /// Reading the job's seed datasets failed.
    Store(StoreError),
}

impl From<CompileError> for ApiError {
    fn from(e: CompileError) -> Self {
        match e {
            CompileError::Invalid(issues) => Self::InvalidConfig(issues),
            CompileError::Store(e) => e.into(),
        }
    }
}

/// Result of [`JobService::compiled_by_id`].
#[derive(Debug)]
pub enum PlanLookup {
    /// The compiled job.
    Ready(Arc<CompiledJob>),
    /// The stored config no longer validates (e.g. the server config changed since submit).
    Invalid(Vec<ConfigIssue>),
    /// No such job.
    Missing,
}

impl JobService {
    /// The compiled plan of a job, compiling it from the stored config on a cache miss (on
    /// the [`CpuGate`]), with the datasets the job was bound to at submit: every replica reads
    /// the same seed rows, whatever was uploaded since.
    pub async fn compiled(&self, job: &JobRow) -> Result<Arc<CompiledJob>, CompileError> {
        if let Some(c) = self.plans.get(job.id) {
            return Ok(c);
        }
        let seed = self.bound_seed(job).await?;
        self.cpu
            .run(|| self.compile_stored(job, seed))
            .await
            .map_err(CompileError::Invalid)
    }

    /// The datasets `job` is bound to, read back; one that is gone is a config issue naming
    /// it, so the job's records fail with a clear error instead of waiting for rows.
    async fn bound_seed(&self, job: &JobRow) -> Result<Option<ResolvedSeed>, CompileError> {
        let Some(ids) = job.seed_datasets.as_ref().filter(|ids| !ids.is_empty()) else {
            return Ok(None);
        };
        let found = self
            .store
            .get_datasets(ids)
            .await
            .map_err(CompileError::Store)?;
        let mut ordered = Vec::with_capacity(ids.len());
        for id in ids {
            let Some(d) = found.iter().find(|d| d.id == *id) else {
                return Err(CompileError::Invalid(vec![ConfigIssue::at_field(
                    codes::SEED_DATASET_NOT_FOUND,
                    "seed_config.source",
                    format!(
                        "seed dataset {id}, which this job was bound to at submit, no longer \
                         exists; submit the job again after uploading its seed file"
                    ),
                )]));
            };
            ordered.push(d.clone());
        }
        bind(&ordered)
            .map(Some)
            .map_err(|i| CompileError::Invalid(vec![i]))
    }

    fn compile_stored(
        &self,
        job: &JobRow,
        seed: Option<ResolvedSeed>,
    ) -> Result<Arc<CompiledJob>, Vec<ConfigIssue>> {
        let dataset = DatasetConfig::parse(&job.config)?;
        let run_config = RunConfig::parse(&job.run_config)?;
        let stored = seed.as_ref().map(|s| &s.stored);
        let plan = Plan::compile_seeded(&dataset, self.catalog.plan_context(), job.seed, stored)?;
        let used = plan.model_aliases();
        let (models, tools) = self.catalog.resolve(&dataset, &used, &job.id.to_string())?;
        let compiled = Arc::new(CompiledJob {
            plan,
            run_config,
            models,
            tools,
            catalog: self.catalog.clone(),
            seed_datasets: seed.map(|s| s.ids).unwrap_or_default(),
            trace: job.trace_context.as_deref().and_then(JobTrace::parse),
            cache: crate::llm::CacheUse {
                owner: job.owner.clone().unwrap_or_default(),
                mode: job.cache_mode,
            },
            max_cost_nanos: job.max_cost_nanos,
        });
        self.plans.insert(job.id, compiled.clone());
        Ok(compiled)
    }

    /// The compiled plan of job `id`, from the cache, or loaded and compiled on a miss.
    /// Workers call this per record, so the hit path does no I/O.
    pub async fn compiled_by_id(&self, id: JobId) -> Result<PlanLookup, StoreError> {
        if let Some(c) = self.plans.get(id) {
            return Ok(PlanLookup::Ready(c));
        }
        let Some(job) = self.store.get_job(id, None).await? else {
            return Ok(PlanLookup::Missing);
        };
        match self.compiled(&job).await {
            Ok(c) => Ok(PlanLookup::Ready(c)),
            Err(CompileError::Invalid(issues)) => Ok(PlanLookup::Invalid(issues)),
            Err(CompileError::Store(e)) => Err(e),
        }
    }
}

/// Compiled plans by job id. Bounded; the oldest entry goes first. A miss only costs a compile.
pub(super) struct PlanCache {
    cap: usize,
    inner: Mutex<CacheInner>,
}

/// Entries plus their insertion order, for eviction.
type CacheInner = (HashMap<JobId, Arc<CompiledJob>>, VecDeque<JobId>);

impl PlanCache {
    pub(super) fn new(cap: usize) -> Self {
        Self {
            cap,
            inner: Mutex::new((HashMap::new(), VecDeque::new())),
        }
    }

    pub(super) fn get(&self, id: JobId) -> Option<Arc<CompiledJob>> {
        let guard = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        guard.0.get(&id).cloned()
    }

    pub(super) fn insert(&self, id: JobId, plan: Arc<CompiledJob>) {
        let mut guard = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let (map, order) = &mut *guard;
        if map.insert(id, plan).is_none() {
            order.push_back(id);
        }
        while map.len() > self.cap {
            match order.pop_front() {
                Some(old) => {
                    map.remove(&old);
                }
                None => break,
            }
        }
    }

    pub(super) fn remove(&self, id: JobId) {
        let mut guard = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let (map, order) = &mut *guard;
        if map.remove(&id).is_some() {
            order.retain(|j| *j != id);
        }
    }
}
