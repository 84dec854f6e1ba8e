//! The DataDesigner dataset config as synthgate accepts it: columns, model and tool configs,
//! seed rows, and the job's run config.
//!
//! Parsing mirrors DataDesigner 0.9.7 (`data_designer.config`): the same field names and
//! defaults, and unknown keys are rejected (`extra="forbid"`). Parsing only checks *shape*
//! (types, required and unknown fields); whether synthgate can run the config (references,
//! cycles, aliases, sampler ranges, unsupported features) is decided by
//! [`crate::generate::Plan::compile`]. Both report [`ConfigIssue`]s with stable codes listed in
//! [`ISSUE_CODES`].

mod columns;
mod extra_sampler_params;
mod issues;
mod llm_column;
mod media_column;
mod parse;
pub use parse::{MAX_COLUMNS, PartialConfig};
mod processors;
pub use processors::{KNOWN_PROCESSOR_TYPES, ProcessorConfig, ProcessorKind, ProfilerConfig};
mod record_selection;
pub use record_selection::{OnExhausted, RecordSelection};
mod run_config;
mod sampler_params;
mod seed;
mod validation_column;

use serde_json::Value;

use super::models::{ModelConfig, ToolConfig};

pub use columns::{
    ColumnConfig, ColumnKind, ExprDtype, ExpressionColumn, KNOWN_COLUMN_TYPES,
    REASONING_CONTENT_POSTFIX, SamplerColumn, SkipConfig, TRACE_POSTFIX,
};
pub use extra_sampler_params::{
    BernoulliMixtureParams, CityFilter, DEFAULT_AGE_RANGE, MAX_AGE, MIN_AGE, PersonFromFakerParams,
    PersonParams, ScipyParams,
};
pub(crate) use issues::deserialize_at;
pub use issues::{ISSUE_CODES, codes};
pub use llm_column::{
    CODE_LANGS, LlmColumn, LlmKind, MediaDataType, Modality, MultiModalContext, Score, TraceType,
};
pub use media_column::{EmbeddingColumn, ImageColumn};
pub use run_config::{JinjaRenderingEngine, RequestAdmissionTuning, RunConfig};
pub(crate) use sampler_params::json_kind;
pub use sampler_params::{
    BernoulliParams, BinomialParams, CategoryParams, DatetimeParams, GaussianParams, PoissonParams,
    SamplerParams, SamplerType, Scalar, SubcategoryParams, TimedeltaParams, UniformParams,
    UuidParams,
};
pub use seed::{
    FileSystemSource, REDACTED_TOKEN, SamplingStrategy, SeedConfig, SeedSource, SeedToken,
    SelectionStrategy, redact_seed_token,
};
pub use validation_column::{
    CodeLang, PYTHON_CALLABLE_HELP, RemoteValidatorParams, SqlDialect, ValidationColumn, Validator,
};

/// One problem found in a submitted config, with a stable code and where it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigIssue {
    /// Stable snake_case code (`unknown_column_type`, `dependency_cycle`, ...); see
    /// [`ISSUE_CODES`].
    pub code: &'static str,
    /// The column the problem is in, when it is in one (by name).
    pub column: Option<String>,
    /// Dotted path of the field inside the column or config, e.g. `params.low`.
    pub field: Option<String>,
    /// Readable on its own: names the column and field.
    pub message: String,
}

/// A parsed DataDesigner config (the inner `data_designer` object).
#[derive(Debug, Clone)]
pub struct DatasetConfig {
    /// Model configs that came with the job (server ones are merged at validation).
    pub model_configs: Vec<ModelConfig>,
    /// Tool configs that came with the job.
    pub tool_configs: Vec<ToolConfig>,
    /// The inner object, normalized, as stored with the job.
    pub raw: Value,
    /// The columns, in config order.
    pub columns: Vec<ColumnConfig>,
    /// Where seed rows come from, if any.
    pub seed_config: Option<SeedConfig>,
    /// DataDesigner `constraints`, kept as given; checked and compiled with the plan.
    pub constraints: Option<Value>,
    /// DataDesigner `processors`, in config order.
    pub processors: Vec<ProcessorConfig>,
    /// DataDesigner `profilers` (judge-score profilers).
    pub profilers: Vec<ProfilerConfig>,
    /// `record_selection`: keep generating until `num_records` candidates pass a predicate.
    pub record_selection: Option<RecordSelection>,
}

impl DatasetConfig {
    /// Accepts `{"data_designer": {...}, "library_version": ...}` or the inner object.
    ///
    /// Returns every shape problem found, in column order.
    pub fn parse(value: &Value) -> Result<Self, Vec<ConfigIssue>> {
        parse::parse_dataset_config(value)
    }

    /// The model aliases the LLM columns name.
    pub fn llm_model_aliases(&self) -> std::collections::HashSet<String> {
        self.columns
            .iter()
            .filter_map(|c| match &c.kind {
                ColumnKind::Llm(l) => Some(l.model_alias.clone()),
                _ => None,
            })
            .collect()
    }

    /// Like [`Self::parse`], but keeps going past shape problems: what parsed, plus every
    /// shape issue, so that compiling can report the rest's problems in the same answer.
    /// `Err` only when nothing can be compiled (not an object, too many columns).
    pub fn parse_partial(value: &Value) -> Result<PartialConfig, Vec<ConfigIssue>> {
        parse::parse_partial(value)
    }

    /// The `seed_config` of a raw config (wrapped or inner), when it parses: lets a seed be
    /// resolved (an async lookup of stored datasets) before the full validation, which
    /// reports its problems with the rest.
    pub fn seed_config_of(value: &Value) -> Option<SeedConfig> {
        let inner = value.get("data_designer").unwrap_or(value);
        let seed_config = inner.get("seed_config").filter(|v| !v.is_null())?;
        seed::parse_seed_config(seed_config, &mut Vec::new())
    }
}

#[cfg(test)]
pub(crate) mod fixtures;
#[cfg(test)]
mod tests;
