//! Submitting a job: the request as the HTTP layer decoded it, its full validation (count,
//! metadata, config, run config, model and tool configs, the tools themselves), and the insert.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::budgets::{check_budget, selection_budget_issue};
use crate::auth::Caller;
use crate::datasets::resolve::{ResolveCtx, ResolveError, ResolvedSeed, resolve};
use crate::datasets::seed_cache::SeedReadError;
use crate::domain::JobId;
use crate::domain::dataset::{ConfigIssue, DatasetConfig, RunConfig, SeedSource, codes};
use crate::domain::job::JobSummary;
use crate::domain::models::CacheMode;
use crate::domain::models::{GenerationType, ModelConfig};
use crate::domain::selection::SelectionSpec;
use crate::error::ApiError;
use crate::generate::Plan;
use crate::llm::CacheUse;
use crate::store::{CreateOutcome, NewJob};
use crate::tools::ToolsetError;

use super::{Catalog, CompiledJob, JobService, check_caller};

/// JSON numbers above 2^53 lose precision in JavaScript clients, so generated seeds stay below.
const MAX_GENERATED_SEED: u64 = (1 << 53) - 1;

/// What a client asks for in `POST /v1/jobs`, after decoding JSON or YAML.
#[derive(Debug, Clone)]
pub struct SubmitRequest {
    /// DataDesigner config (wrapped or inner).
    pub config: Value,
    /// Requested record count, unchecked.
    pub num_records: NumRecords,
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
    /// A name to find the job by (unchecked; see [`MAX_JOB_NAME_CHARS`]).
    pub name: Option<String>,
    /// The response cache mode; `None`: the server's default.
    pub cache: Option<CacheMode>,
    /// A budget in the unit of the server's model prices (unchecked).
    pub max_cost: Option<f64>,
}

impl SubmitRequest {
    /// A request of `config` and `num_records` and nothing else: what the Data Designer doors
    /// start from (their clients send no seed, run config, key or cache mode).
    pub fn of(config: Value, num_records: i64) -> Self {
        Self {
            config,
            num_records: NumRecords::Count(num_records),
            seed: None,
            metadata: None,
            run_config: None,
            idempotency_key: None,
            owner: None,
            name: None,
            cache: None,
            max_cost: None,
        }
    }
}

/// The longest job name, in characters.
pub const MAX_JOB_NAME_CHARS: usize = 256;

/// A requested record count as the client wrote it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NumRecords {
    /// An integer (not yet checked against the limits).
    Count(i64),
    /// An integer beyond the 64-bit range, either way: out of range, not malformed.
    Beyond,
}

/// A request that passed validation.
#[derive(Debug)]
pub(super) struct Validated {
    /// Records to generate (accepted ones, with `record_selection`).
    pub num_records: u32,
    /// The config's `record_selection`, as the job stores it.
    pub selection: Option<SelectionSpec>,
    /// The job's budget, in billionths of the price's unit.
    pub max_cost_nanos: Option<u64>,
    /// The job seed (given or drawn).
    pub seed: u64,
    /// The inner DataDesigner config, as stored.
    pub config: Value,
    /// The run config as given (`{}` when absent).
    pub run_config_value: Value,
    /// Plan, run config and model configs.
    pub compiled: CompiledJob,
}

impl JobService {
    /// Validates fully, then inserts the job and its records. Returns the job's summary and
    /// whether it was created (`false`: an earlier request with the same idempotency key made
    /// it, and the summary is that job's now).
    pub async fn submit(
        &self,
        mut req: SubmitRequest,
        caller: &Caller,
    ) -> Result<(JobSummary, bool), ApiError> {
        req.owner = caller.owner().map(str::to_owned);
        let id = JobId::new();
        let max = self.limits.max_num_records;
        let seed = self.resolve_seed(&req.config, caller.owner()).await?;
        // A token the seed source gave has done its work: it is not stored, hashed or echoed.
        crate::domain::dataset::redact_seed_token(&mut req.config);
        let v = self
            .cpu
            .run(|| {
                check_storable(&req)?;
                self.validate_scoped(&req, max, &id.to_string(), seed.as_ref())
            })
            .await?;
        check_caller(&v.compiled, caller)?;
        self.check_tools(&v.compiled).await?;
        self.probe(&v.compiled).await?;
        let request_hash = request_hash(&req, &v.config);
        let num_records = v.num_records;
        let seed = v.seed;
        // The job's span is a child of this request's; its ids are chosen now and stored, so
        // every replica's records and the job's end agree on them.
        let trace = crate::telemetry::JobTrace::begin();
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
            output_columns: v.compiled.plan.output_columns().to_vec(),
            max_live_jobs: self.limits.max_jobs_in_flight_per_key,
            max_live_records: self.limits.max_records_in_flight_per_key,
            seed_datasets: v.compiled.seed_datasets.clone(),
            name: req.name.clone(),
            trace_context: trace.as_ref().map(crate::telemetry::JobTrace::to_text),
            selection: v.selection,
            cache_mode: v.compiled.cache.mode,
            max_cost_nanos: v.max_cost_nanos,
        };
        match self.store.create_job(&job).await? {
            CreateOutcome::Created(row) => {
                let mut compiled = v.compiled;
                compiled.trace = trace;
                self.plans.insert(row.id, Arc::new(compiled));
                self.wake.notify_waiters();
                metrics::counter!(crate::metrics::JOBS_SUBMITTED).increment(1);
                tracing::info!(job.id = %row.id, num_records, "job accepted");
                // Just inserted: every record pending, nothing failed or spent.
                let counts = crate::store::unstarted_counts(&row);
                let summary = JobSummary {
                    job: row,
                    counts,
                    first_errors: Vec::new(),
                    usage: Default::default(),
                    column_usage: Default::default(),
                    tool_usage: Default::default(),
                };
                Ok((summary, true))
            }
            CreateOutcome::TooManyJobs { live } => Err(ApiError::TooManyJobs(format!(
                "this API key already has {live} jobs queued or running (limits.max_jobs_in_flight_per_key = {}); wait for one to finish",
                self.limits.max_jobs_in_flight_per_key.unwrap_or_default()
            ))),
            CreateOutcome::TooManyRecords { live } => Err(ApiError::TooManyJobs(format!(
                "this API key's queued and running jobs hold {live} records, and this job's \
                 {num_records} would pass limits.max_records_in_flight_per_key = {}; wait for \
                 jobs to finish",
                self.limits
                    .max_records_in_flight_per_key
                    .unwrap_or_default()
            ))),
            CreateOutcome::SeedDatasetsMissing(ids) => Err(ApiError::SeedDatasetNotFound(format!(
                "seed_config.source: dataset {} was deleted while the job was being submitted; \
                 upload it again (POST /v1/datasets or `synthgate submit`)",
                ids.iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            ))),
            CreateOutcome::Existing(row) => {
                if row.request_hash.as_deref() != Some(request_hash.as_str()) {
                    return Err(ApiError::IdempotencyConflict(
                        req.idempotency_key.unwrap_or_default(),
                    ));
                }
                Ok((self.summary(row.id, None).await?, false))
            }
        }
    }

    /// Validates a request fully: count within `1..=max`, metadata size, config, run config,
    /// model and tool configs. A job's own concurrency caps get a scope of their own (a
    /// preview's, say); see [`Self::validate_scoped`].
    /// The seed must be resolved first (see [`Self::resolve_seed`]); the template probe
    /// comes after (see [`Self::probe`]).
    pub(super) fn validate(
        &self,
        req: &SubmitRequest,
        max: u32,
        seed: Option<&ResolvedSeed>,
    ) -> Result<Validated, ApiError> {
        self.validate_scoped(req, max, &JobId::new().to_string(), seed)
    }

    /// Resolves the config's seed source, unless it has none or inline rows: the datasets it
    /// names, which the job is then compiled with and bound to. Its issues (an unknown file
    /// name, say) are the 422 on their own: the rest of the config would only add noise about
    /// seed fields nobody could look up.
    pub(super) async fn resolve_seed(
        &self,
        config: &Value,
        owner: Option<&str>,
    ) -> Result<Option<ResolvedSeed>, ApiError> {
        let Some(seed_config) = DatasetConfig::seed_config_of(config) else {
            return Ok(None);
        };
        // Inline rows need no dataset. A NUL character cannot be looked up in the database;
        // the validation that follows refuses it as `unstorable_value`.
        if matches!(seed_config.source, SeedSource::Inline { .. })
            || crate::queue::storable::find_nul(config).is_some()
        {
            return Ok(None);
        }
        let ctx = ResolveCtx {
            store: self.store.as_ref(),
            owner,
            sources: &self.sources,
        };
        match resolve(&ctx, &seed_config.source).await {
            Ok(seed) => Ok(Some(seed)),
            Err(ResolveError::Issues(issues)) => Err(ApiError::InvalidConfig(issues)),
            Err(ResolveError::Store(e)) => Err(e.into()),
        }
    }

    /// Generates record 0 without LLM columns to find a template that can never render (see
    /// [`Plan::probe`]); reads its seed row first.
    pub(super) async fn probe(&self, compiled: &CompiledJob) -> Result<(), ApiError> {
        let row = match self.runner.seed_row(compiled, 0).await {
            Ok(row) => row,
            Err(SeedReadError::Store { source, .. }) => return Err(source.into()),
            Err(e) => return Err(ApiError::Internal(e.to_string())),
        };
        match self.cpu.run(|| compiled.plan.probe(row.get())).await {
            Some(issue) => Err(ApiError::InvalidConfig(vec![issue])),
            None => Ok(()),
        }
    }

    /// [`Self::validate`], with the job's own `max_parallel_requests` scoped to `scope` (the
    /// job id): they cap that job's requests only.
    fn validate_scoped(
        &self,
        req: &SubmitRequest,
        max: u32,
        scope: &str,
        bound: Option<&ResolvedSeed>,
    ) -> Result<Validated, ApiError> {
        if let Some(metadata) = &req.metadata {
            check_metadata(metadata, self.limits.max_metadata_bytes)?;
        }
        if let Some(name) = &req.name {
            check_name(name)?;
        }
        let num_records = match req.num_records {
            NumRecords::Count(n) if (1..=i64::from(max)).contains(&n) => n as u32,
            NumRecords::Count(n) => return Err(num_records_out_of_range(max, &n.to_string())),
            NumRecords::Beyond => {
                return Err(num_records_out_of_range(
                    max,
                    "a number beyond the supported range",
                ));
            }
        };
        // Every problem of the config comes back in one answer: shape, run config, compile
        // (columns, seed, processors) and the server-side checks, each on what did parse.
        let partial = DatasetConfig::parse_partial(&req.config).map_err(ApiError::InvalidConfig)?;
        let mut issues = partial.issues.clone();
        let dataset = &partial.config;
        let run_config_value = req.run_config.clone().unwrap_or_else(|| json!({}));
        let run_config = RunConfig::parse(&run_config_value)
            .map_err(|i| issues.extend(prefix_run_config(i)))
            .ok();
        let seed = req
            .seed
            .unwrap_or_else(|| rand::random::<u64>() & MAX_GENERATED_SEED);
        // Names the parts that did not parse would define are known, so the rest is not
        // reported as referring to them.
        let mut ctx = self.catalog.plan_context().clone();
        ctx.model_aliases
            .extend(partial.unparsed_model_aliases.iter().cloned());
        ctx.tool_aliases
            .extend(partial.unparsed_tool_aliases.iter().cloned());
        let stored = bound.map(|s| &s.stored);
        let plan =
            Plan::compile_with_placeholders(dataset, &ctx, seed, &partial.unparsed_columns, stored)
                .map_err(|i| issues.extend(i.into_iter().map(|i| partial.locate(i))))
                .ok();
        let used: HashSet<String> = match &plan {
            Some(plan) => plan.model_aliases(),
            None => dataset.llm_model_aliases(),
        };
        let resolved = self
            .catalog
            .resolve(dataset, &used, scope)
            .map_err(|i| issues.extend(i.into_iter().map(|i| partial.locate(i))))
            .ok();
        // Model types need both the compiled columns and the resolved models; reported with
        // the rest, not one round trip later.
        if let (Some(plan), Some((models, _))) = (&plan, &resolved) {
            issues.extend(model_type_issues(plan, models, &self.catalog));
        }
        let selection = dataset.record_selection.as_ref().map(|s| SelectionSpec {
            max_candidates: s.max_candidate_records,
            on_exhausted: s.on_exhausted,
        });
        // The budget is a job's, whatever `max` a preview asks for (a preview caps it lower).
        let budget_max = self.limits.max_num_records;
        issues.extend(selection_budget_issue(selection, num_records, budget_max));
        let (Some(plan), Some(run_config), Some((models, tools)), true) =
            (plan, run_config, resolved, issues.is_empty())
        else {
            return Err(ApiError::InvalidConfig(issues));
        };
        let max_cost_nanos = check_budget(req.max_cost, &plan, &models)?;
        let cache = CacheUse {
            owner: req.owner.clone().unwrap_or_default(),
            mode: req.cache.unwrap_or(self.cache_default),
        };
        Ok(Validated {
            num_records,
            selection,
            max_cost_nanos,
            seed,
            config: partial.config.raw,
            run_config_value,
            compiled: CompiledJob {
                plan,
                run_config,
                models,
                tools,
                catalog: self.catalog.clone(),
                seed_datasets: bound.map(|s| s.ids.clone()).unwrap_or_default(),
                trace: None,
                cache,
                max_cost_nanos,
            },
        })
    }

    /// Resolves every (tool config, model) pair the job's LLM columns use against the live
    /// providers: duplicate tool names, allowed tools no provider has, and models barred from
    /// every provider are config errors now, not failed records later. Connects to providers
    /// not yet connected (their tool lists are cached for the workers).
    pub(super) async fn check_tools(&self, compiled: &CompiledJob) -> Result<(), ApiError> {
        let uses = compiled.plan.tool_uses();
        if uses.is_empty() {
            return Ok(());
        }
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
            if let Err(e) = self.tools.toolset(cfg, Some(model), None).await {
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
}

/// Columns whose model is of another generation type than the column needs (an LLM column on
/// an embedding model, an embedding column on a chat model), and embedding columns whose model
/// is served by an Anthropic provider, which has no embeddings API.
fn model_type_issues(
    plan: &Plan,
    models: &HashMap<String, ModelConfig>,
    catalog: &Catalog,
) -> Vec<ConfigIssue> {
    let mut issues = Vec::new();
    for (column, column_type, alias, wanted) in plan.model_uses() {
        let Some(model) = models.get(&alias) else {
            continue;
        };
        let Some(kind) = model.inference_parameters.kind() else {
            continue;
        };
        let message = if kind != wanted {
            let needs = match wanted {
                GenerationType::ChatCompletion => "LLM columns need a chat-completion model",
                GenerationType::Embedding => "embedding columns need an embedding model",
                GenerationType::Image => "image columns need an image model",
            };
            let article = match kind {
                GenerationType::ChatCompletion => "a",
                GenerationType::Embedding | GenerationType::Image => "an",
            };
            format!(
                "column '{column}': model alias '{alias}' is {article} {} model; {needs}",
                kind.as_str()
            )
        } else if wanted != GenerationType::ChatCompletion
            && catalog.is_anthropic_provider(&model.provider)
        {
            format!(
                "column '{column}': model alias '{alias}' is served by Anthropic provider '{}', which has no {} API; {column_type} columns need an OpenAI-compatible provider",
                model.provider,
                kind.as_str()
            )
        } else {
            continue;
        };
        issues.push(ConfigIssue {
            code: codes::MODEL_TYPE_MISMATCH,
            message,
            column: Some(column),
            field: Some("model_alias".into()),
        });
    }
    issues
}

fn num_records_out_of_range(max: u32, got: &str) -> ApiError {
    ApiError::NumRecordsOutOfRange(format!(
        "num_records must be between 1 and {max}, got {got}"
    ))
}

/// Refuses a blank name, one over [`MAX_JOB_NAME_CHARS`], or one with a control character
/// (a name is shown in lists and terminals).
fn check_name(name: &str) -> Result<(), ApiError> {
    let why = if name.trim().is_empty() {
        "must not be empty or blank".to_owned()
    } else if name.chars().count() > MAX_JOB_NAME_CHARS {
        format!("longer than {MAX_JOB_NAME_CHARS} characters")
    } else if name.chars().any(char::is_control) {
        "must not hold control characters (newlines, tabs, NUL)".to_owned()
    } else {
        return Ok(());
    };
    Err(ApiError::InvalidRequest(format!("field 'name': {why}")))
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
        let Some(path) = value.and_then(crate::queue::storable::find_nul) else {
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

/// Identifies a request for idempotency: the same config, count, seed, metadata, run config
/// and name.
fn request_hash(req: &SubmitRequest, inner_config: &Value) -> String {
    let mut canonical = json!({
        "config": inner_config,
        "num_records": match req.num_records {
            NumRecords::Count(n) => json!(n),
            NumRecords::Beyond => Value::Null,
        },
        "seed": req.seed,
        "metadata": req.metadata,
        "run_config": req.run_config,
    });
    // Named only when given, so a request without a name hashes as it did before names.
    if let (Some(name), Value::Object(map)) = (&req.name, &mut canonical) {
        map.insert("name".into(), json!(name));
    }
    hex::encode(Sha256::digest(canonical.to_string().as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_is_measured_as_compact_json() {
        assert!(check_metadata(&json!({"a": "b"}), 9).is_ok());
        let e = check_metadata(&json!({"a": "bc"}), 9).unwrap_err();
        assert_eq!(e.code(), "metadata_too_large");
        assert!(e.to_string().contains("10 bytes"), "{e}");
    }
}
