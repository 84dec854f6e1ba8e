//! Column configs (`data_designer.config.column_configs`): the typed model and the parser that
//! reads `column_type` first, then the fields of that type.
//!
//! Every issue names the column (by `name`, or by index when it has none) and the field.

use serde::Deserialize;
use serde_json::{Map, Value};

use super::ConfigIssue;
use super::issues::{codes, deserialize_at, join_path};
use super::llm_column::{LlmColumn, parse_llm};
use super::media_column::{
    EMBEDDING_FIELDS, EmbeddingColumn, IMAGE_FIELDS, ImageColumn, parse_embedding, parse_image,
};
use super::sampler_params::{SamplerParams, SamplerType, json_kind, parse_params};
use super::validation_column::{PYTHON_CALLABLE_HELP, ValidationColumn, parse_validation};

/// Suffix of the side column holding an LLM column's message trace.
pub const TRACE_POSTFIX: &str = "__trace";
/// Suffix of the side column holding an LLM column's final reasoning content.
pub const REASONING_CONTENT_POSTFIX: &str = "__reasoning_content";

/// Column types synthgate serves, in the order error messages list them.
pub const KNOWN_COLUMN_TYPES: &[&str] = &[
    "sampler",
    "expression",
    "seed-dataset",
    "llm-text",
    "llm-code",
    "llm-structured",
    "llm-judge",
    "validation",
    "embedding",
    "image",
];

const COMMON_FIELDS: &[&str] = &["name", "drop", "column_type", "skip", "propagate_skip"];
const SAMPLER_FIELDS: &[&str] = &["sampler_type", "params", "conditional_params", "convert_to"];
const EXPRESSION_FIELDS: &[&str] = &["expr", "dtype"];
const VALIDATION_FIELDS: &[&str] = &[
    "target_columns",
    "validator_type",
    "validator_params",
    "batch_size",
];
const LLM_FIELDS: &[&str] = &[
    "prompt",
    "model_alias",
    "system_prompt",
    "multi_modal_context",
    "tool_alias",
    "with_trace",
    "extract_reasoning_content",
];

/// One column of the dataset.
#[derive(Debug, Clone, PartialEq)]
pub struct ColumnConfig {
    /// Unique column name.
    pub name: String,
    /// Generated and usable by later columns, but left out of the dataset row.
    pub drop: bool,
    /// When to skip generating this column for a record.
    pub skip: Option<SkipConfig>,
    /// Skip this column when a column it reads was skipped (default true).
    pub propagate_skip: bool,
    /// What kind of column, with its type-specific fields.
    pub kind: ColumnKind,
}

/// DataDesigner's `SkipConfig`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SkipConfig {
    /// Jinja template (with `{{ }}`); the column is skipped when it renders truthy.
    pub when: String,
    /// Value written for skipped cells (a scalar or null).
    #[serde(default)]
    pub value: Value,
}

/// The type-specific part of a column.
#[derive(Debug, Clone, PartialEq)]
pub enum ColumnKind {
    /// `sampler`.
    Sampler(SamplerColumn),
    /// `expression`.
    Expression(ExpressionColumn),
    /// `seed-dataset`: the value of the seed row field with the column's name.
    SeedDataset,
    /// `llm-text`, `llm-code`, `llm-structured`, `llm-judge`.
    Llm(LlmColumn),
    /// `validation`: checks other columns' values with a code or remote validator.
    Validation(ValidationColumn),
    /// `embedding`.
    Embedding(EmbeddingColumn),
    /// `image`.
    Image(ImageColumn),
    /// A column type this build does not serve (none of DataDesigner 0.9.6's today), or the
    /// stand-in for a column that did not parse, so that one 422 can list every problem
    /// without reporting references to it as unknown. Never compiled into a step.
    Unsupported {
        /// The `column_type` given.
        column_type: String,
    },
}

/// `SamplerColumnConfig`.
#[derive(Debug, Clone, PartialEq)]
pub struct SamplerColumn {
    /// Which sampler.
    pub sampler_type: SamplerType,
    /// Its parameters.
    pub params: SamplerParams,
    /// `(condition, params)` in config order; the first true condition's params are used.
    pub conditional_params: Vec<(String, SamplerParams)>,
    /// `float`/`int`/`str` for numbers and categories, a strftime format for datetimes.
    pub convert_to: Option<String>,
}

/// `ExpressionColumnConfig`.
#[derive(Debug, Clone, PartialEq)]
pub struct ExpressionColumn {
    /// Jinja template rendered per record.
    pub expr: String,
    /// Type the rendered text is converted to.
    pub dtype: ExprDtype,
}

/// An expression column's output type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ExprDtype {
    /// Integer (via float, truncated, as Python's `int(float(x))`).
    Int,
    /// Float.
    Float,
    /// The rendered text (the default).
    #[default]
    Str,
    /// Boolean (a number's truthiness, else `x.lower() == "true"`).
    Bool,
}

#[derive(Deserialize)]
struct CommonDe {
    name: String,
    #[serde(default)]
    drop: bool,
    #[serde(default)]
    skip: Option<SkipConfig>,
    #[serde(default = "yes")]
    propagate_skip: bool,
}

fn yes() -> bool {
    true
}

#[derive(Deserialize)]
struct SamplerDe {
    sampler_type: String,
    params: Value,
    #[serde(default)]
    conditional_params: Map<String, Value>,
    #[serde(default)]
    convert_to: Option<String>,
}

#[derive(Deserialize)]
struct ExpressionDe {
    expr: String,
    #[serde(default)]
    dtype: ExprDtype,
}

/// Collects issues for one column: knows how to name it and where its fields are.
pub(crate) struct ColumnIssues<'a> {
    name: Option<&'a str>,
    index: usize,
    out: &'a mut Vec<ConfigIssue>,
}

impl ColumnIssues<'_> {
    pub(crate) fn push(&mut self, code: &'static str, field: &str, detail: impl std::fmt::Display) {
        let issue = match self.name {
            Some(name) => {
                ConfigIssue::in_column(code, name, (!field.is_empty()).then_some(field), detail)
            }
            None => {
                let path = join_path(&format!("columns[{}]", self.index), field);
                let message = if field.is_empty() {
                    format!("column at index {}: {detail}", self.index)
                } else {
                    format!("column at index {}: field '{field}': {detail}", self.index)
                };
                ConfigIssue {
                    code,
                    column: None,
                    field: Some(path),
                    message,
                }
            }
        };
        self.out.push(issue);
    }

    /// Deserializes `T` from the column object, recording an `invalid_config` issue on failure.
    pub(crate) fn de<T: serde::de::DeserializeOwned>(&mut self, value: &Value) -> Option<T> {
        match deserialize_at::<T>(value) {
            Ok(t) => Some(t),
            Err((path, msg)) => {
                self.push(codes::INVALID_CONFIG, &path, msg);
                None
            }
        }
    }
}

/// Parses one entry of `columns`. Returns `None` (with issues) when it cannot be used.
pub(crate) fn parse_column(
    index: usize,
    value: &Value,
    out: &mut Vec<ConfigIssue>,
) -> Option<ColumnConfig> {
    let name = value.get("name").and_then(Value::as_str);
    let mut issues = ColumnIssues { name, index, out };
    let Value::Object(obj) = value else {
        issues.push(
            codes::INVALID_CONFIG,
            "",
            format!(
                "invalid type: {}, expected a column object",
                json_kind(value)
            ),
        );
        return None;
    };
    let column_type = match obj.get("column_type") {
        Some(Value::String(s)) => s.as_str(),
        Some(other) => {
            let msg = format!("invalid type: {}, expected a string", json_kind(other));
            issues.push(codes::INVALID_CONFIG, "column_type", msg);
            return None;
        }
        None => {
            issues.push(
                codes::INVALID_CONFIG,
                "column_type",
                "missing field `column_type`",
            );
            return None;
        }
    };
    let specific: &[&str] = match column_type {
        "sampler" => SAMPLER_FIELDS,
        "expression" => EXPRESSION_FIELDS,
        "seed-dataset" => &[],
        "llm-text" => LLM_FIELDS,
        "llm-code" | "llm-structured" | "llm-judge" => LLM_FIELDS,
        "validation" => VALIDATION_FIELDS,
        "custom" => {
            // The config carries only the generator function's name; nothing could run it.
            let msg = format!(
                "custom columns run a Python function; {PYTHON_CALLABLE_HELP}. Use an \
                 `expression` column (Jinja) or an `llm-*` column instead"
            );
            issues.push(codes::PYTHON_CALLABLE_NOT_SERVED, "column_type", msg);
            return None;
        }
        "embedding" => EMBEDDING_FIELDS,
        "image" => IMAGE_FIELDS,
        other => {
            let msg = format!(
                "unknown column_type '{other}'; known types: {}",
                KNOWN_COLUMN_TYPES.join(", ")
            );
            issues.push(codes::UNKNOWN_COLUMN_TYPE, "column_type", msg);
            return None;
        }
    };
    let extra: &[&str] = match column_type {
        "llm-code" => &["code_lang"],
        "llm-structured" => &["output_format"],
        "llm-judge" => &["scores"],
        _ => &[],
    };
    let allowed: Vec<&str> = [COMMON_FIELDS, specific, extra].concat();
    for key in obj.keys() {
        if !allowed.contains(&key.as_str()) {
            let expected = allowed.iter().map(|k| format!("`{k}`")).collect::<Vec<_>>();
            let msg = format!(
                "unknown field `{key}`, expected one of {}",
                expected.join(", ")
            );
            issues.push(codes::INVALID_CONFIG, key, msg);
        }
    }
    let common = issues.de::<CommonDe>(value);
    let kind = match column_type {
        "sampler" => parse_sampler(&mut issues, value).map(ColumnKind::Sampler),
        "expression" => parse_expression(&mut issues, value),
        "seed-dataset" => Some(ColumnKind::SeedDataset),
        "validation" => parse_validation(&mut issues, value).map(ColumnKind::Validation),
        "embedding" => parse_embedding(&mut issues, value).map(ColumnKind::Embedding),
        "image" => parse_image(&mut issues, value).map(ColumnKind::Image),
        _ => parse_llm(&mut issues, column_type, value).map(ColumnKind::Llm),
    };
    let common = common?;
    if let Some(skip) = &common.skip {
        if matches!(column_type, "sampler" | "seed-dataset") {
            let msg = format!(
                "skip is not supported on {column_type} columns; they are generated for every \
                 record"
            );
            issues.push(codes::INVALID_CONFIG, "skip", msg);
        }
        if matches!(skip.value, Value::Array(_) | Value::Object(_)) {
            let msg = "must be a bool, string, number or null";
            issues.push(codes::INVALID_CONFIG, "skip.value", msg);
        }
    }
    Some(ColumnConfig {
        name: common.name,
        drop: common.drop,
        skip: common.skip,
        propagate_skip: common.propagate_skip,
        kind: kind?,
    })
}

fn parse_sampler(issues: &mut ColumnIssues<'_>, value: &Value) -> Option<SamplerColumn> {
    let de = issues.de::<SamplerDe>(value)?;
    let Some(sampler_type) = SamplerType::parse(&de.sampler_type) else {
        let known: Vec<&str> = SamplerType::ALL.iter().map(|t| t.as_str()).collect();
        let msg = format!(
            "unknown sampler_type '{}'; known types: {}",
            de.sampler_type,
            known.join(", ")
        );
        issues.push(codes::INVALID_CONFIG, "sampler_type", msg);
        return None;
    };
    let mut ok = true;
    let mut parse = |prefix: String, raw: &Value| match parse_params(sampler_type, raw) {
        Ok(p) => Some(p),
        Err((path, msg)) => {
            issues.push(codes::INVALID_CONFIG, &join_path(&prefix, &path), msg);
            ok = false;
            None
        }
    };
    let params = parse("params".into(), &de.params);
    let mut conditional = Vec::with_capacity(de.conditional_params.len());
    for (cond, raw) in &de.conditional_params {
        if let Some(p) = parse(format!("conditional_params.{cond}"), raw) {
            conditional.push((cond.clone(), p));
        }
    }
    if !ok {
        return None;
    }
    Some(SamplerColumn {
        sampler_type,
        params: params?,
        conditional_params: conditional,
        convert_to: de.convert_to,
    })
}

fn parse_expression(issues: &mut ColumnIssues<'_>, value: &Value) -> Option<ColumnKind> {
    let de = issues.de::<ExpressionDe>(value)?;
    if de.expr.trim().is_empty() {
        let msg = "the expression is empty; write a Jinja template such as '{{ column_name }}'";
        issues.push(codes::INVALID_CONFIG, "expr", msg);
        return None;
    }
    Some(ColumnKind::Expression(ExpressionColumn {
        expr: de.expr,
        dtype: de.dtype,
    }))
}
