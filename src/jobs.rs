//! The job service: submit, cancel, and the compiled-plan cache. The only code that creates a
//! job or asks for a status change; workers move records, the store finalizes.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use tokio::sync::Notify;

use crate::auth::Caller;
use crate::config::LimitsConfig;
use crate::cpu::CpuGate;
use crate::domain::dataset::{ConfigIssue, DatasetConfig, RunConfig, codes};
use crate::domain::models::{JobLimit, ModelConfig, ToolConfig, reserved_extra_body_fields};
use crate::domain::{JobId, JobStatus};
use crate::error::ApiError;
use crate::generate::{Plan, PlanContext};
use crate::store::{CancelOutcome, CreateOutcome, JobRow, NewJob, Store, StoreError};
use crate::tools::{ToolHub, ToolsetError};

/// JSON numbers above 2^53 lose precision in JavaScript clients, so generated seeds stay below.
const MAX_GENERATED_SEED: u64 = (1 << 53) - 1;

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
    pub server: Arc<ServerModels>,
}

/// A request that passed validation.
#[derive(Debug)]
pub struct Validated {
    /// Records to generate.
    pub num_records: u32,
    /// The job seed (given or drawn).
    pub seed: u64,
    /// The inner DataDesigner config, as stored.
    pub config: Value,
    /// The run config as given (`{}` when absent).
    pub run_config_value: Value,
    /// Plan, run config and model configs.
    pub compiled: CompiledJob,
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

/// What a client asks for in `POST /v1/jobs`, after decoding JSON or YAML.
#[derive(Debug, Clone)]
pub struct SubmitRequest {
    /// DataDesigner config (wrapped or inner).
    pub config: Value,
    /// Requested record count, unchecked.
    pub num_records: i64,
    /// Job seed; random when absent.
    pub seed: Option<u64>,
    /// Client metadata.
    pub metadata: Option<Value>,
    /// DataDesigner run config.
    pub run_config: Option<Value>,
    /// `Idempotency-Key` header.
    pub idempotency_key: Option<String>,
    /// API key name, when auth is on.
    pub owner: Option<String>,
}

/// Submits and cancels jobs, and hands out compiled plans.
#[derive(Clone)]
pub struct JobService {
    store: Arc<dyn Store>,
    plans: Arc<PlanCache>,
    ctx: Arc<PlanContext>,
    /// Server-defined model configs, and the provider names job model configs may use.
    models: Arc<ServerModels>,
    limits: LimitsConfig,
    /// Wakes this replica's workers after a submit, so they need not wait for the next poll.
    wake: Arc<Notify>,
    /// Lists tools at submit time, so tool-config errors are the client's 422, not failed records.
    tools: Option<ToolHub>,
    /// Where parsing, compiling and generating run: off the runtime threads, one per core.
    cpu: CpuGate,
}

impl JobService {
    /// A service over `store`; `ctx` lists the server-defined model and tool aliases.
    pub fn new(
        store: Arc<dyn Store>,
        ctx: PlanContext,
        models: ServerModels,
        limits: LimitsConfig,
        wake: Arc<Notify>,
        tools: Option<ToolHub>,
    ) -> Self {
        Self {
            store,
            plans: Arc::new(PlanCache::new(256)),
            ctx: Arc::new(ctx),
            models: Arc::new(models),
            limits,
            wake,
            tools,
            cpu: CpuGate::per_core(),
        }
    }

    /// Validates fully, then inserts the job and its records. Returns the job and whether it
    /// was created (`false`: an earlier request with the same idempotency key made it).
    pub async fn submit(
        &self,
        mut req: SubmitRequest,
        caller: &Caller,
    ) -> Result<(JobRow, bool), ApiError> {
        req.owner = caller.owner().map(str::to_owned);
        let id = JobId::new();
        let max = self.limits.max_num_records;
        let v = self
            .cpu
            .run(|| {
                check_storable(&req)?;
                self.validate_scoped(&req, max, &id.to_string())
            })
            .await?;
        check_caller(&v.compiled, caller)?;
        self.check_tools(&v.compiled).await?;
        let request_hash = request_hash(&req, &v.config);
        let num_records = v.num_records;
        let seed = v.seed;
        let job = NewJob {
            id,
            owner: req.owner.clone(),
            config: v.config,
            num_records,
            seed,
            metadata: req.metadata.clone(),
            run_config: v.run_config_value,
            idempotency_key: req.idempotency_key.clone(),
            request_hash: Some(request_hash.clone()),
            max_live_jobs: self.limits.max_jobs_in_flight_per_key,
        };
        match self.store.create_job(&job).await? {
            CreateOutcome::Created(row) => {
                self.plans.insert(row.id, Arc::new(v.compiled));
                self.wake.notify_waiters();
                metrics::counter!(crate::metrics::JOBS_SUBMITTED).increment(1);
                tracing::info!(job.id = %row.id, num_records, "job accepted");
                Ok((row, true))
            }
            CreateOutcome::TooManyJobs { live } => Err(ApiError::TooManyJobs(format!(
                "this API key already has {live} jobs queued or running (limits.max_jobs_in_flight_per_key = {}); wait for one to finish",
                self.limits.max_jobs_in_flight_per_key.unwrap_or_default()
            ))),
            CreateOutcome::Existing(row) => {
                if row.request_hash.as_deref() != Some(request_hash.as_str()) {
                    return Err(ApiError::IdempotencyConflict(
                        req.idempotency_key.unwrap_or_default(),
                    ));
                }
                Ok((row, false))
            }
        }
    }

    /// Validates a request fully: count within `1..=max`, metadata size, config, run config,
    /// model and tool configs. A job's own concurrency caps get a scope of their own (a
    /// preview's, say); see [`Self::validate_scoped`].
    pub fn validate(&self, req: &SubmitRequest, max: u32) -> Result<Validated, ApiError> {
        self.validate_scoped(req, max, &JobId::new().to_string())
    }

    /// [`Self::validate`], with the job's own `max_parallel_requests` scoped to `scope` (the
    /// job id): they cap that job's requests only.
    fn validate_scoped(
        &self,
        req: &SubmitRequest,
        max: u32,
        scope: &str,
    ) -> Result<Validated, ApiError> {
        if let Some(metadata) = &req.metadata {
            check_metadata(metadata, self.limits.max_metadata_bytes)?;
        }
        if req.num_records < 1 || req.num_records > i64::from(max) {
            let got = match req.num_records {
                i64::MAX | i64::MIN => "a number beyond the supported range".to_owned(),
                n => n.to_string(),
            };
            return Err(ApiError::NumRecordsOutOfRange(format!(
                "num_records must be between 1 and {max}, got {got}"
            )));
        }
        let dataset = DatasetConfig::parse(&req.config).map_err(ApiError::InvalidConfig)?;
        let run_config_value = req.run_config.clone().unwrap_or_else(|| json!({}));
        let run_config = RunConfig::parse(&run_config_value)
            .map_err(|issues| ApiError::InvalidConfig(prefix_run_config(issues)))?;
        let seed = req
            .seed
            .unwrap_or_else(|| rand::random::<u64>() & MAX_GENERATED_SEED);
        let plan = Plan::compile(&dataset, &self.ctx, seed).map_err(ApiError::InvalidConfig)?;
        if let Some(issue) = plan.probe() {
            return Err(ApiError::InvalidConfig(vec![issue]));
        }
        let (models, tools) = self
            .models
            .resolve(&dataset, scope)
            .map_err(ApiError::InvalidConfig)?;
        Ok(Validated {
            num_records: req.num_records as u32,
            seed,
            config: dataset.raw,
            run_config_value,
            compiled: CompiledJob {
                plan,
                run_config,
                models,
                tools,
                server: self.models.clone(),
            },
        })
    }

    /// Resolves every (tool config, model) pair the job's LLM columns use against the live
    /// providers: duplicate tool names, allowed tools no provider has, and models barred from
    /// every provider are config errors now, not failed records later. Connects to providers
    /// not yet connected (their tool lists are cached for the workers).
    pub async fn check_tools(&self, compiled: &CompiledJob) -> Result<(), ApiError> {
        let uses = compiled.plan.tool_uses();
        if uses.is_empty() {
            return Ok(());
        }
        let Some(hub) = &self.tools else {
            return Err(ApiError::McpUnavailable("this server runs no tools".into()));
        };
        let mut issues = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for (column, tool_alias, model_alias) in uses {
            if !seen.insert((tool_alias.clone(), model_alias.clone())) {
                continue;
            }
            let (Some(cfg), Some(model)) = (
                compiled.tools.get(&tool_alias),
                compiled.models.get(&model_alias),
            ) else {
                continue; // unknown aliases were reported by the compile step
            };
            if let Err(e) = hub.toolset(cfg, Some(model), None).await {
                let code = match &e {
                    ToolsetError::ProviderUnavailable { .. } => {
                        return Err(ApiError::McpUnavailable(e.to_string()));
                    }
                    ToolsetError::DuplicateToolName { .. } => codes::DUPLICATE_TOOL_NAME,
                    ToolsetError::AllowedToolNotFound { .. } => codes::UNKNOWN_TOOL,
                    ToolsetError::ModelNotAllowed { .. } => codes::INVALID_TOOL_CONFIG,
                };
                issues.push(ConfigIssue {
                    code,
                    column: Some(column),
                    field: Some("tool_alias".into()),
                    message: e.to_string(),
                });
            }
        }
        if issues.is_empty() {
            Ok(())
        } else {
            Err(ApiError::InvalidConfig(issues))
        }
    }

    /// A job visible to `owner` (`None`: any job), or `job_not_found`.
    pub async fn get(&self, id: JobId, owner: Option<&str>) -> Result<JobRow, ApiError> {
        self.store
            .get_job(id, owner)
            .await?
            .ok_or_else(|| ApiError::JobNotFound(id.to_string()))
    }

    /// Requests cancellation: no new record of the job is claimed; records in flight finish.
    /// Whether the job had already finished is decided by the store in the cancel's own
    /// transaction, so a cancel racing the last record's write gets `job_finished`, never a
    /// `200` with a finished job.
    pub async fn cancel(&self, id: JobId, owner: Option<&str>) -> Result<JobRow, ApiError> {
        // Visibility first: another key's job is not found, whatever its status.
        self.get(id, owner).await?;
        match self.store.request_cancel(id).await? {
            CancelOutcome::Accepted(job) => {
                tracing::info!(job.id = %id, status = job.status.as_str(), "job cancel requested");
                if job.status.is_terminal() {
                    self.forget(id);
                }
                Ok(job)
            }
            CancelOutcome::Finished(job) => Err(ApiError::JobFinished {
                id: id.to_string(),
                status: job.status.as_str(),
            }),
            CancelOutcome::NotFound => Err(ApiError::JobNotFound(id.to_string())),
        }
    }

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
        let plan = Plan::compile(&dataset, &self.ctx, job.seed)?;
        let (models, tools) = self.models.resolve(&dataset, &job.id.to_string())?;
        let compiled = Arc::new(CompiledJob {
            plan,
            run_config,
            models,
            tools,
            server: self.models.clone(),
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

    /// Where CPU-heavy work runs (see [`CpuGate`]).
    pub fn cpu(&self) -> &CpuGate {
        &self.cpu
    }

    /// The configured limits.
    pub fn limits(&self) -> &LimitsConfig {
        &self.limits
    }

    /// Whether the server config defines model alias `alias` (a job may define others).
    pub fn is_server_model_alias(&self, alias: &str) -> bool {
        self.ctx.model_aliases.iter().any(|a| a == alias)
    }

    /// The store this service writes to.
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    /// Drops a finished job's plan from the cache, and closes its `per_job` MCP sessions.
    pub fn forget(&self, id: JobId) {
        self.plans.remove(id);
        if let Some(t) = &self.tools {
            t.pool().release_job(id.0);
        }
    }

    /// Whether a job status means workers may still claim its records.
    pub fn is_claimable(status: JobStatus) -> bool {
        matches!(status, JobStatus::Queued | JobStatus::Running)
    }
}

/// Checks the caller's per-key allow lists against every model and tool alias the job's LLM
/// columns use (`403 alias_not_allowed`), as the job really uses them.
///
/// An allow list names server aliases. A key with `allow_models` may use an alias in its list
/// only as the server defines it: the job may re-tune it (temperature, `max_tokens`, its own
/// `max_parallel_requests`...) but its effective definition must call the same provider and
/// model, and may only narrow the model's `mcp_servers`. A key with `allow_tools` may use the
/// server tool aliases in its list, which a job can narrow but never widen (checked for every
/// key by [`ServerModels::resolve`]). Aliases a job defines itself are for keys without a list.
pub fn check_caller(compiled: &CompiledJob, caller: &Caller) -> Result<(), ApiError> {
    let server = &compiled.server;
    for (column, model, tool) in compiled.plan.llm_aliases() {
        if !caller.may_use_model(&model) {
            return Err(ApiError::Forbidden(format!(
                "column '{column}': this API key may not use model alias '{model}'"
            )));
        }
        if caller.restricts_models()
            && let Some(effective) = compiled.models.get(&model)
        {
            let Some(own) = server.configs.iter().find(|m| m.alias == model) else {
                return Err(ApiError::Forbidden(format!(
                    "column '{column}': this API key may use model alias '{model}' only as the server defines it, and the server defines no such alias"
                )));
            };
            if let Err(why) = within_server_model(own, effective) {
                return Err(ApiError::Forbidden(format!(
                    "column '{column}': this API key may use model alias '{model}' only as the server defines it: {why}"
                )));
            }
        }
        let Some(tool) = tool else { continue };
        if !caller.may_use_tools(&tool) {
            return Err(ApiError::Forbidden(format!(
                "column '{column}': this API key may not use tool alias '{tool}'"
            )));
        }
        if caller.restricts_tools() && !server.tool_configs.iter().any(|t| t.tool_alias == tool) {
            return Err(ApiError::Forbidden(format!(
                "column '{column}': this API key may use tool alias '{tool}' only as the server defines it, and the server defines no such alias"
            )));
        }
    }
    Ok(())
}

/// Whether a job's definition of a server model alias calls what the server's does.
fn within_server_model(own: &ModelConfig, job: &ModelConfig) -> Result<(), String> {
    if job.provider != own.provider || job.model != own.model {
        return Err(format!(
            "the job's model_configs point it at provider '{}', model '{}' instead of provider '{}', model '{}'",
            job.provider, job.model, own.provider, own.model
        ));
    }
    if let Some(allowed) = &own.mcp_servers {
        let wider: Vec<&str> = match &job.mcp_servers {
            None => vec!["(all)"],
            Some(j) => j
                .iter()
                .filter(|p| !allowed.contains(p))
                .map(String::as_str)
                .collect(),
        };
        if !wider.is_empty() {
            return Err(format!(
                "its mcp_servers may only narrow the server's [{}], not add {}",
                allowed.join(", "),
                wider.join(", ")
            ));
        }
    }
    Ok(())
}

/// Refuses metadata whose compact JSON is over `max` bytes (`422 metadata_too_large`), counted
/// without building the text.
fn check_metadata(metadata: &Value, max: usize) -> Result<(), ApiError> {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut n = Count(0);
    // Writing to a counter cannot fail, and a Value always serializes.
    let _ = serde_json::to_writer(&mut n, metadata);
    if n.0 > max {
        return Err(ApiError::MetadataTooLarge(format!(
            "field 'metadata': {} bytes as JSON, over the limit of {max} (limits.max_metadata_bytes)",
            n.0
        )));
    }
    Ok(())
}

/// The server's model and tool configs, and the provider names job configs may use.
#[derive(Debug, Default)]
pub struct ServerModels {
    /// Server model configs.
    pub configs: Vec<ModelConfig>,
    /// Names of the server's model providers.
    pub providers: Vec<String>,
    /// Server tool configs.
    pub tool_configs: Vec<ToolConfig>,
    /// Names a tool config's `providers` may use: MCP providers and inline tools.
    pub tool_providers: Vec<String>,
}

impl ServerModels {
    /// The model and tool configs a job sees: the server's, overridden by alias by the job's.
    /// A job's configs must name providers the server defines (providers never come with a
    /// job: they hold commands, URLs and keys), may not set request fields the service
    /// computes through `extra_body`, and may redefine a server tool alias only to narrow it
    /// (a subset of its providers and of its `allow_tools`). The job's own model configs get
    /// a [`JobLimit`] in `scope`, so their `max_parallel_requests` caps this job only.
    #[expect(clippy::type_complexity, reason = "a pair of alias maps")]
    fn resolve(
        &self,
        dataset: &DatasetConfig,
        scope: &str,
    ) -> Result<(HashMap<String, ModelConfig>, HashMap<String, ToolConfig>), Vec<ConfigIssue>> {
        let mut issues = Vec::new();
        for (i, m) in dataset.model_configs.iter().enumerate() {
            if !self.providers.contains(&m.provider) {
                let known = if self.providers.is_empty() {
                    "none".to_owned()
                } else {
                    self.providers.join(", ")
                };
                issues.push(ConfigIssue {
                    code: codes::INVALID_MODEL_CONFIG,
                    column: None,
                    field: Some(format!("model_configs[{i}].provider")),
                    message: format!(
                        "model config '{}': provider '{}' is not defined on the server (defined: {known})",
                        m.alias, m.provider
                    ),
                });
            }
            for key in m
                .inference_parameters
                .extra_body
                .as_ref()
                .map(reserved_extra_body_fields)
                .unwrap_or_default()
            {
                issues.push(ConfigIssue {
                    code: codes::RESERVED_EXTRA_BODY_FIELD,
                    column: None,
                    field: Some(format!(
                        "model_configs[{i}].inference_parameters.extra_body.{key}"
                    )),
                    message: format!(
                        "model config '{}': extra_body may not set '{key}': the service computes it",
                        m.alias
                    ),
                });
            }
        }
        for (i, t) in dataset.tool_configs.iter().enumerate() {
            for (j, p) in t.providers.iter().enumerate() {
                if !self.tool_providers.contains(p) {
                    let known = if self.tool_providers.is_empty() {
                        "none".to_owned()
                    } else {
                        self.tool_providers.join(", ")
                    };
                    issues.push(ConfigIssue {
                        code: codes::INVALID_TOOL_CONFIG,
                        column: None,
                        field: Some(format!("tool_configs[{i}].providers[{j}]")),
                        message: format!(
                            "tool config '{}': provider '{p}' is not defined on the server (defined: {known})",
                            t.tool_alias
                        ),
                    });
                }
            }
            if let Some(own) = self
                .tool_configs
                .iter()
                .find(|o| o.tool_alias == t.tool_alias)
            {
                narrowing_issues(i, own, t, &mut issues);
            }
        }
        if !issues.is_empty() {
            return Err(issues);
        }
        let mut tools: HashMap<String, ToolConfig> = self
            .tool_configs
            .iter()
            .map(|t| (t.tool_alias.clone(), t.clone()))
            .collect();
        for t in &dataset.tool_configs {
            tools.insert(t.tool_alias.clone(), t.clone());
        }
        let mut out: HashMap<String, ModelConfig> = self
            .configs
            .iter()
            .map(|m| (m.alias.clone(), m.clone()))
            .collect();
        // The job's cap per (provider, model): the least of its own aliases', as DataDesigner
        // shares one limit among aliases of a model.
        let mut caps: HashMap<(&str, &str), u32> = HashMap::new();
        for m in &dataset.model_configs {
            let cap = m.inference_parameters.max_parallel_requests;
            caps.entry((&m.provider, &m.model))
                .and_modify(|c| *c = (*c).min(cap))
                .or_insert(cap);
        }
        for m in &dataset.model_configs {
            let mut m = m.clone();
            m.job_limit = Some(JobLimit {
                scope: scope.to_owned(),
                cap: caps[&(m.provider.as_str(), m.model.as_str())],
            });
            out.insert(m.alias.clone(), m);
        }
        Ok((out, tools))
    }
}

/// Refuses a request holding text the database cannot store (a NUL character, anywhere in
/// the config, metadata or run config: in a column name as in a prompt or a key), with `422
/// unstorable_value` naming the field, on every backend alike.
fn check_storable(req: &SubmitRequest) -> Result<(), ApiError> {
    let fields = [
        ("config", Some(&req.config)),
        ("metadata", req.metadata.as_ref()),
        ("run_config", req.run_config.as_ref()),
    ];
    for (name, value) in fields {
        let Some(path) = value.and_then(crate::store::storable::find_nul) else {
            continue;
        };
        let field = match path.as_str() {
            "" => name.to_owned(),
            p if p.starts_with('[') => format!("{name}{p}"),
            p => format!("{name}.{p}"),
        };
        return Err(ApiError::UnstorableValue(format!(
            "field '{field}': contains a NUL character (\\u0000), which cannot be stored"
        )));
    }
    Ok(())
}

/// What a job's tool config `t` (at `tool_configs[i]`) adds to the server's `own` definition
/// of the same alias: providers the server's does not route to, tools its `allow_tools` hides.
fn narrowing_issues(i: usize, own: &ToolConfig, t: &ToolConfig, issues: &mut Vec<ConfigIssue>) {
    let alias = &t.tool_alias;
    let issue = |field: String, message: String| ConfigIssue {
        code: codes::INVALID_TOOL_CONFIG,
        column: None,
        field: Some(field),
        message: format!(
            "tool config '{alias}' redefines the server's, which a job may narrow but not widen: {message}"
        ),
    };
    for (j, p) in t.providers.iter().enumerate() {
        if !own.providers.contains(p) {
            issues.push(issue(
                format!("tool_configs[{i}].providers[{j}]"),
                format!(
                    "provider '{p}' is not among the server's [{}]",
                    own.providers.join(", ")
                ),
            ));
        }
    }
    let Some(allowed) = &own.allow_tools else {
        return;
    };
    match &t.allow_tools {
        None => issues.push(issue(
            format!("tool_configs[{i}].allow_tools"),
            format!(
                "the server allows only [{}]; list those you need (or fewer) in allow_tools",
                allowed.join(", ")
            ),
        )),
        Some(mine) => {
            for (j, name) in mine.iter().enumerate() {
                if !allowed.contains(name) {
                    issues.push(issue(
                        format!("tool_configs[{i}].allow_tools[{j}]"),
                        format!(
                            "tool '{name}' is not among the server's allowed [{}]",
                            allowed.join(", ")
                        ),
                    ));
                }
            }
        }
    }
}

fn prefix_run_config(issues: Vec<ConfigIssue>) -> Vec<ConfigIssue> {
    issues
        .into_iter()
        .map(|mut i| {
            i.field = Some(match i.field.take() {
                Some(f) => format!("run_config.{f}"),
                None => "run_config".to_owned(),
            });
            i
        })
        .collect()
}

/// Identifies a request for idempotency: the same config, count, seed, metadata and run config.
fn request_hash(req: &SubmitRequest, inner_config: &Value) -> String {
    let canonical = json!({
        "config": inner_config,
        "num_records": req.num_records,
        "seed": req.seed,
        "metadata": req.metadata,
        "run_config": req.run_config,
    });
    hex::encode(Sha256::digest(canonical.to_string().as_bytes()))
}

/// Compiled plans by job id. Bounded; the oldest entry goes first. A miss only costs a compile.
struct PlanCache {
    cap: usize,
    inner: Mutex<CacheInner>,
}

/// Entries plus their insertion order, for eviction.
type CacheInner = (HashMap<JobId, Arc<CompiledJob>>, VecDeque<JobId>);

impl PlanCache {
    fn new(cap: usize) -> Self {
        Self {
            cap,
            inner: Mutex::new((HashMap::new(), VecDeque::new())),
        }
    }

    fn get(&self, id: JobId) -> Option<Arc<CompiledJob>> {
        let guard = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        guard.0.get(&id).cloned()
    }

    fn insert(&self, id: JobId, plan: Arc<CompiledJob>) {
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

    fn remove(&self, id: JobId) {
        let mut guard = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let (map, order) = &mut *guard;
        if map.remove(&id).is_some() {
            order.retain(|j| *j != id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model(v: Value) -> ModelConfig {
        serde_json::from_value(v).unwrap()
    }

    fn tool(v: Value) -> ToolConfig {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn a_restricted_alias_keeps_its_model_and_may_only_narrow_mcp_servers() {
        let own =
            model(json!({"alias": "a", "model": "m", "provider": "p", "mcp_servers": ["x", "y"]}));
        let job = |v: Value| {
            let mut base = json!({"alias": "a", "model": "m", "provider": "p",
                "inference_parameters": {"temperature": 0.1}});
            base.as_object_mut()
                .unwrap()
                .extend(v.as_object().unwrap().clone());
            model(base)
        };
        assert!(within_server_model(&own, &job(json!({"mcp_servers": ["x"]}))).is_ok());
        assert!(within_server_model(&own, &job(json!({"mcp_servers": []}))).is_ok());
        let e = within_server_model(&own, &job(json!({}))).unwrap_err();
        assert!(e.contains("(all)"), "{e}");
        let e = within_server_model(&own, &job(json!({"mcp_servers": ["x", "z"]}))).unwrap_err();
        assert!(e.contains("not add z"), "{e}");
        let e = within_server_model(&own, &job(json!({"model": "other", "mcp_servers": []})))
            .unwrap_err();
        assert!(e.contains("model 'other'"), "{e}");
        let e = within_server_model(&own, &job(json!({"provider": "q", "mcp_servers": []})))
            .unwrap_err();
        assert!(e.contains("provider 'q'"), "{e}");
    }

    #[test]
    fn a_job_tool_config_may_narrow_but_not_widen_the_servers() {
        let own =
            tool(json!({"tool_alias": "t", "providers": ["a", "b"], "allow_tools": ["x", "y"]}));
        let fields = |v: Value| {
            let mut issues = Vec::new();
            narrowing_issues(0, &own, &tool(v), &mut issues);
            issues
                .into_iter()
                .map(|i| i.field.unwrap())
                .collect::<Vec<_>>()
        };
        assert!(
            fields(
                json!({"tool_alias": "t", "providers": ["b"], "allow_tools": ["y"],
                "max_tool_call_turns": 9})
            )
            .is_empty()
        );
        assert_eq!(
            fields(json!({"tool_alias": "t", "providers": ["a", "c"]})),
            [
                "tool_configs[0].providers[1]",
                "tool_configs[0].allow_tools"
            ]
        );
        assert_eq!(
            fields(json!({"tool_alias": "t", "providers": ["a"], "allow_tools": ["x", "z"]})),
            ["tool_configs[0].allow_tools[1]"]
        );
        let open = tool(json!({"tool_alias": "t", "providers": ["a"]}));
        let mut issues = Vec::new();
        narrowing_issues(
            0,
            &open,
            &tool(json!({"tool_alias": "t", "providers": ["a"]})),
            &mut issues,
        );
        assert!(
            issues.is_empty(),
            "no server allow list: any of the provider's tools"
        );
    }

    #[test]
    fn metadata_is_measured_as_compact_json() {
        assert!(check_metadata(&json!({"a": "b"}), 9).is_ok());
        let e = check_metadata(&json!({"a": "bc"}), 9).unwrap_err();
        assert_eq!(e.code(), "metadata_too_large");
        assert!(e.to_string().contains("10 bytes"), "{e}");
    }
}
