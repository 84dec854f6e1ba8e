//! Generating one record: the column DAG, samplers, Jinja rendering, LLM, media and validation
//! columns.
//!
//! [`Plan::compile`] validates a parsed [`DatasetConfig`] completely (issue codes in
//! [`crate::domain::dataset::ISSUE_CODES`]) and compiles it once per job: templates parsed
//! into one minijinja environment, sampler parameters checked, columns in dependency order.
//! [`Plan::generate`] then produces record `index` without I/O; it is deterministic in
//! (job seed, record index) and shared by worker tasks through an `Arc`.
//!
//! Module map, by part:
//!
//! * the plan: `compile` (validation and ordering), `dag` (topological order, cycles),
//!   `validate` (model/tool configs, aliases), `dtypes` (each dataset column's value type,
//!   for typed exports), `rng` (the seeding scheme);
//! * the record: `columns` (per-record steps), `run` (a record with its I/O: the section
//!   loop, LLM and validation steps), `processors` (drop_columns and schema_transform), `seed`
//!   (seed rows), `waits` (what a record waits for);
//! * `samplers/`: sampler columns: parameters compiled (`mod.rs`) and drawn (`sampling`),
//!   scipy.stats distributions (`scipy`), the person samplers (`person`, `person_compile`,
//!   `person_fields`, `phone`; `faker_person` over Python Faker's data in `faker_locales`),
//!   and sampler constraints (`constraints`);
//! * `llm/`: columns that call a model: LLM columns and their tool loop (`mod.rs`), the answer
//!   asked for and read back (`llm_output`, `code` for llm-code), embedding and image columns
//!   (`media`) and image context (`multimodal`);
//! * `validation/`: validation columns (ruff, SQL parsing, remote validators);
//! * templates and values: `template` (minijinja), `convert` (Python-style casts), `datetime`.

mod columns;
mod compile;
mod convert;
mod dag;
mod datetime;
mod dtypes;
mod jinja_builtins;
mod llm;
mod processors;
mod pycompat;
mod rng;
mod run;
mod samplers;
mod seed;
mod selection;
mod template;
mod validate;
pub(crate) mod validation;
mod waits;

#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use serde_json::{Map, Value};

use crate::domain::dataset::{ConfigIssue, DatasetConfig};
use crate::domain::models::GenerationType;
use crate::domain::record::{RecordError, RecordOutcome, Trace};
use crate::domain::usage::{ToolUsage, UsageCounts};
use columns::{RecordState, Step, StepEnv};

pub use dtypes::ColumnType;
pub use llm::LlmRuntime;
pub(crate) use llm::parse_answers_for_fuzzing;
pub use samplers::person::PeopleSource;
pub use seed::{SeedRow, StoredSeed};
pub use template::{MAX_RENDERED_LEN, TEMPLATE_FUEL};
pub use validation::ValidatorEnv;
pub use waits::{Unpooled, Waits, waiting};

/// Names defined outside the job config that columns may reference.
#[derive(Debug, Clone, Default)]
pub struct PlanContext {
    /// Model aliases defined in the server config.
    pub model_aliases: Vec<String>,
    /// Tool aliases defined in the server config.
    pub tool_aliases: Vec<String>,
    /// The managed person datasets `person` samplers read.
    pub people: PeopleSource,
    /// What validation columns may run on this server (ruff, remote endpoints).
    pub validators: Arc<ValidatorEnv>,
}

/// One generated record: its outcome, the traces of its LLM columns, and what it cost.
#[derive(Debug)]
pub struct Generated {
    /// Values or the error.
    pub outcome: RecordOutcome,
    /// Traces of LLM columns that keep one (`with_trace`, or the run-config override).
    pub traces: Vec<Trace>,
    /// LLM requests and tokens by model alias (spent even when the record then failed).
    pub usage: BTreeMap<String, UsageCounts>,
    /// The same by column (LLM, embedding and image columns).
    pub column_usage: BTreeMap<String, UsageCounts>,
    /// Tool turns and calls by LLM column (also kept when the record failed).
    pub tool_usage: BTreeMap<String, ToolUsage>,
    /// Images of `image` columns; the values hold references to them.
    pub media: Vec<crate::domain::media::Media>,
    /// The verdict of a completed record of a `record_selection` job; `None` otherwise.
    pub selection: Option<crate::domain::selection::Selection>,
}

impl Generated {
    /// A record that failed before anything was generated: no values, traces or usage.
    pub fn failed(error: RecordError) -> Self {
        let outcome = RecordOutcome::Failed {
            values: None,
            error,
        };
        Self::cpu(outcome, None)
    }

    /// A record of a CPU-only plan: its outcome and verdict, no traces, usage or media.
    fn cpu(outcome: RecordOutcome, selection: Option<crate::domain::selection::Selection>) -> Self {
        Self {
            outcome,
            traces: Vec::new(),
            usage: BTreeMap::new(),
            column_usage: BTreeMap::new(),
            tool_usage: BTreeMap::new(),
            media: Vec::new(),
            selection,
        }
    }
}

/// What a record's LLM columns left behind while it was generated.
#[derive(Default)]
struct Spent {
    traces: Vec<Trace>,
    usage: BTreeMap<String, UsageCounts>,
    /// The same usage by column.
    column_usage: BTreeMap<String, UsageCounts>,
    tool_usage: BTreeMap<String, ToolUsage>,
    media: Vec<crate::domain::media::Media>,
}

impl Spent {
    /// Counts `counts` of column `column`, on model alias `alias`.
    fn add(&mut self, column: &str, alias: &str, counts: UsageCounts) {
        self.usage.entry(alias.to_owned()).or_default().add(&counts);
        self.column_usage
            .entry(column.to_owned())
            .or_default()
            .add(&counts);
    }
}

impl Spent {
    fn into_generated(self, outcome: RecordOutcome) -> Generated {
        Generated {
            outcome,
            traces: self.traces,
            usage: self.usage,
            column_usage: self.column_usage,
            tool_usage: self.tool_usage,
            media: self.media,
            selection: None,
        }
    }
}

/// A validated, compiled job config: columns in dependency order, templates parsed.
#[derive(Debug)]
pub struct Plan {
    /// The job seed every random stream is keyed by.
    seed: u64,
    /// Dataset row columns, in order.
    output_columns: Vec<String>,
    /// Record slot of each output column.
    output_slots: Vec<usize>,
    /// Column and side-column name → record slot (the template context's keys).
    names: Arc<HashMap<String, usize>>,
    /// Slot → whether some template reads it.
    ctx_slots: Vec<bool>,
    /// Columns in dependency order.
    steps: Vec<Step>,
    /// Every template of the job, compiled once.
    templates: template::Templates,
    /// The seed rows records walk (inline rows, or the shape of stored ones), if the job has
    /// a seed config.
    seed_rows: Option<seed::SeedRows>,
    /// The `schema_transform` processors' datasets, in config order.
    outputs: Vec<processors::OutputDataset>,
    /// The templates of `outputs`.
    output_templates: template::Templates,
    /// The `record_selection` predicate, if the job has one.
    predicate: Option<selection::Predicate>,
}

impl Plan {
    /// Validates `config` fully and compiles it for a job with `seed`. A seed other than
    /// inline rows is refused: see [`Self::compile_seeded`].
    ///
    /// Returns every issue found: global ones (features, model/tool configs, seed config)
    /// first, then per column in config order, then dependency cycles.
    pub fn compile(
        config: &DatasetConfig,
        ctx: &PlanContext,
        seed: u64,
    ) -> Result<Self, Vec<ConfigIssue>> {
        compile::compile(config, ctx, seed, &[], None)
    }

    /// [`Self::compile`] for a config whose `seed_config.source` was resolved to `stored`
    /// datasets (ignored for inline rows): seed-dataset columns and templates are checked
    /// against the datasets' fields, and records take rows by [`Self::seed_row`].
    pub fn compile_seeded(
        config: &DatasetConfig,
        ctx: &PlanContext,
        seed: u64,
        stored: Option<&StoredSeed>,
    ) -> Result<Self, Vec<ConfigIssue>> {
        compile::compile(config, ctx, seed, &[], stored)
    }

    /// [`Self::compile`] for a config whose columns did not all parse: `unparsed` names the
    /// columns that did not, so that references to them are not reported again. Used to
    /// report every problem of a config at once; such a plan is never run (the parse issues
    /// refuse the config).
    pub fn compile_with_placeholders(
        config: &DatasetConfig,
        ctx: &PlanContext,
        seed: u64,
        unparsed: &[String],
        stored: Option<&StoredSeed>,
    ) -> Result<Self, Vec<ConfigIssue>> {
        compile::compile(config, ctx, seed, unparsed, stored)
    }

    /// Columns of a dataset row, in order: config order (seed fields first when they are not
    /// listed), dropped columns excluded, `{name}__reasoning_content` right after an LLM column
    /// that extracts reasoning (and dropped with it). Traces (`{name}__trace`) are stored apart
    /// and are not row columns.
    pub fn output_columns(&self) -> &[String] {
        &self.output_columns
    }

    /// The names of the processor datasets (`schema_transform` processors), in config order.
    pub fn output_datasets(&self) -> Vec<&str> {
        self.outputs.iter().map(|o| o.name.as_str()).collect()
    }

    /// The columns of processor dataset `name` (its template's keys), if there is one.
    pub fn output_dataset_columns(&self, name: &str) -> Option<Vec<String>> {
        self.outputs
            .iter()
            .find(|o| o.name == name)
            .map(processors::OutputDataset::columns)
    }

    /// Renders the row of processor dataset `name` for `row`, a row of the main dataset
    /// (`None`: no such dataset). CPU work: call it where CPU work runs.
    pub fn render_output(&self, name: &str, row: &Value) -> Option<Result<Value, String>> {
        let output = self.outputs.iter().find(|o| o.name == name)?;
        Some(output.render(&self.output_templates, row))
    }

    /// `{name}__trace` for the output LLM columns that keep a trace (all of them when
    /// `save_all`, i.e. `debug_override_save_all_column_traces`), in output order.
    pub fn trace_columns(&self, save_all: bool) -> Vec<String> {
        self.output_columns
            .iter()
            .filter(|name| {
                self.steps.iter().any(|s| {
                    &s.name == *name
                        && matches!(&s.kind, columns::StepKind::Llm(l)
                            if save_all || l.column.with_trace != crate::domain::dataset::TraceType::None)
                })
            })
            .map(|name| format!("{name}{}", crate::domain::dataset::TRACE_POSTFIX))
            .collect()
    }

    /// `(column, tool_alias, model_alias)` of every LLM column that uses tools.
    pub fn tool_uses(&self) -> Vec<(String, String, String)> {
        self.llm_aliases()
            .into_iter()
            .filter_map(|(c, m, t)| t.map(|t| (c, t, m)))
            .collect()
    }

    /// The model aliases the LLM columns use.
    pub fn model_aliases(&self) -> std::collections::HashSet<String> {
        self.llm_aliases().into_iter().map(|(_, m, _)| m).collect()
    }

    /// `(column, model_alias, tool_alias)` of every column that calls a model (LLM and
    /// embedding columns; only LLM columns have tools).
    pub fn llm_aliases(&self) -> Vec<(String, String, Option<String>)> {
        self.steps
            .iter()
            .filter_map(|s| match &s.kind {
                columns::StepKind::Llm(l) => Some((
                    s.name.clone(),
                    l.column.model_alias.clone(),
                    l.column.tool_alias.clone(),
                )),
                columns::StepKind::Embedding(e) => {
                    Some((s.name.clone(), e.model_alias.clone(), None))
                }
                columns::StepKind::Image(i) => Some((s.name.clone(), i.model_alias.clone(), None)),
                columns::StepKind::Seed { .. }
                | columns::StepKind::Sampler { .. }
                | columns::StepKind::Expression { .. }
                | columns::StepKind::Validation(_) => None,
            })
            .collect()
    }

    /// `(column, column_type, model_alias, the generation type the column needs)` of every
    /// column that calls a model.
    pub fn model_uses(&self) -> Vec<(String, &'static str, String, GenerationType)> {
        self.steps
            .iter()
            .filter_map(|s| match &s.kind {
                columns::StepKind::Llm(l) => Some((
                    s.name.clone(),
                    l.column.column_type(),
                    l.column.model_alias.clone(),
                    GenerationType::ChatCompletion,
                )),
                columns::StepKind::Embedding(e) => Some((
                    s.name.clone(),
                    "embedding",
                    e.model_alias.clone(),
                    GenerationType::Embedding,
                )),
                columns::StepKind::Image(i) => Some((
                    s.name.clone(),
                    "image",
                    i.model_alias.clone(),
                    GenerationType::Image,
                )),
                columns::StepKind::Seed { .. }
                | columns::StepKind::Sampler { .. }
                | columns::StepKind::Expression { .. }
                | columns::StepKind::Validation(_) => None,
            })
            .collect()
    }

    /// Whether every column is CPU work (samplers, expressions, seed columns): no LLM,
    /// embedding, image or validation column, so [`Self::generate`] produces exactly what
    /// [`Self::generate_with`] would, and a chunk of records can be generated together in one
    /// CPU section.
    pub fn is_cpu_only(&self) -> bool {
        !self.steps.iter().any(columns::Step::is_io)
    }

    /// Where the seed row of record `index` is: `None` without a seed config. A stored row is
    /// read by the caller (the record runner, through its block cache) and handed to
    /// [`Self::generate`] or [`Self::generate_with`]; an inline one is handed as it is.
    pub fn seed_row(&self, index: u64) -> Option<SeedRow<'_>> {
        self.seed_rows.as_ref().map(|rows| rows.row(index))
    }

    /// Generates record 0 without LLM columns and reports a template that exhausts its
    /// rendering budget (fuel, output size, `range` length). Such a template fails every
    /// record whatever the data, so it is a config error (`422 invalid_template`) rather than
    /// a job of failed records. Other render errors may depend on the record and are left to
    /// generation. Costs one record (bounded by the fuel) per submit. `seed_row` is record
    /// 0's (see [`Self::seed_row`]).
    pub fn probe(&self, seed_row: Option<&Map<String, Value>>) -> Option<ConfigIssue> {
        let RecordOutcome::Failed { error, .. } = self.generate(0, seed_row) else {
            return None;
        };
        let message = error
            .message
            .split_once(": ")
            .map_or(error.message.as_str(), |(_, m)| m);
        message
            .starts_with(template::BUDGET_EXCEEDED)
            .then(|| ConfigIssue {
                code: crate::domain::dataset::codes::INVALID_TEMPLATE,
                column: error.column.clone(),
                field: None,
                message: format!(
                    "column '{}': the template cannot be rendered within its budget ({message})",
                    error.column.as_deref().unwrap_or_default()
                ),
            })
    }

    /// Generates record `index`, whose seed row is `seed_row` (see [`Self::seed_row`]; `None`
    /// without a seed config). Deterministic in (seed, index).
    ///
    /// A failed record keeps the output values generated before the failing column.
    pub fn generate(&self, index: u64, seed_row: Option<&Map<String, Value>>) -> RecordOutcome {
        self.generate_record(index, seed_row).outcome
    }

    /// [`Self::generate`] with the record's `record_selection` verdict, for a plan that is CPU
    /// work only ([`Self::is_cpu_only`]): nothing else of [`Generated`] is set.
    pub fn generate_record(&self, index: u64, seed_row: Option<&Map<String, Value>>) -> Generated {
        let mut rec = RecordState::new(&self.names, &self.ctx_slots);
        let env = StepEnv {
            templates: &self.templates,
            seed: self.seed,
            index,
            seed_row,
            budget: template::RecordBudget::for_record(self.seed, index),
        };
        for step in &self.steps {
            if let Err(e) = step.run(&env, &mut rec) {
                return Generated::cpu(self.failed(step, e, &rec), None);
            }
        }
        let outcome = RecordOutcome::Completed {
            values: self.row(&rec),
        };
        Generated::cpu(outcome, self.verdict(&rec))
    }

    /// A completed record's `record_selection` verdict (`None` without one).
    fn verdict(&self, rec: &RecordState<'_>) -> Option<crate::domain::selection::Selection> {
        self.predicate.as_ref().map(|p| p.judge(rec))
    }

    /// Whether the job has `record_selection`.
    pub fn selects(&self) -> bool {
        self.predicate.is_some()
    }

    /// The outcome of a record whose `step` failed: the error plus the values made before it.
    fn failed(&self, step: &Step, e: columns::StepError, rec: &RecordState<'_>) -> RecordOutcome {
        RecordOutcome::Failed {
            values: Some(self.row(rec)),
            error: RecordError::new(
                e.code,
                Some(step.name.clone()),
                format!("column '{}': {}", step.name, e.message),
            ),
        }
    }

    /// The output columns generated so far, as a row object.
    fn row(&self, rec: &RecordState<'_>) -> Value {
        let mut row = Map::with_capacity(self.output_columns.len());
        for (name, &slot) in self.output_columns.iter().zip(&self.output_slots) {
            if rec.set[slot] {
                row.insert(name.clone(), rec.values[slot].clone());
            }
        }
        Value::Object(row)
    }
}
