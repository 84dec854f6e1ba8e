//! Compiled plans: a job's config parsed, validated and compiled once, shared by every record
//! of the job, and cached by job id so the workers' hot path does no I/O.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use crate::domain::JobId;
use crate::domain::dataset::{ConfigIssue, DatasetConfig, RunConfig};
use crate::domain::job::JobRow;
use crate::domain::models::{ModelConfig, ToolConfig};
use crate::generate::Plan;
use crate::store::StoreError;

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
    /// the [`CpuGate`]).
    pub async fn compiled(&self, job: &JobRow) -> Result<Arc<CompiledJob>, Vec<ConfigIssue>> {
        if let Some(c) = self.plans.get(job.id) {
            return Ok(c);
        }
        self.cpu.run(|| self.compile_stored(job)).await
    }

    fn compile_stored(&self, job: &JobRow) -> Result<Arc<CompiledJob>, Vec<ConfigIssue>> {
        let dataset = DatasetConfig::parse(&job.config)?;
        let run_config = RunConfig::parse(&job.run_config)?;
        let plan = Plan::compile(&dataset, self.catalog.plan_context(), job.seed)?;
        let used = plan.model_aliases();
        let (models, tools) = self.catalog.resolve(&dataset, &used, &job.id.to_string())?;
        let compiled = Arc::new(CompiledJob {
            plan,
            run_config,
            models,
            tools,
            catalog: self.catalog.clone(),
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
        Ok(match self.compiled(&job).await {
            Ok(c) => PlanLookup::Ready(c),
            Err(issues) => PlanLookup::Invalid(issues),
        })
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
