//! The top level of a DataDesigner config: the optional `{data_designer, library_version}`
//! wrapper, then `columns`, `model_configs`, `tool_configs`, `seed_config`, `constraints`,
//! `processors`, `profilers` and `record_selection`.

use serde_json::Value;

use super::columns::parse_column;
use super::issues::{codes, deserialize_at, join_path};
use super::processors::{parse_processors, parse_profilers};
use super::record_selection::parse_record_selection;
use super::sampler_params::json_kind;
use super::seed::parse_seed_config;
use super::{ConfigIssue, DatasetConfig};
use crate::domain::models::{ModelConfig, ToolConfig};

const TOP_LEVEL_KEYS: &[&str] = &[
    "columns",
    "model_configs",
    "tool_configs",
    "seed_config",
    "constraints",
    "processors",
    "profilers",
    "record_selection",
];

const WRAPPER_KEYS: &[&str] = &["data_designer", "library_version"];

/// Most columns one config may have. DataDesigner configs have tens; a thousand leaves room
/// for generated ones while bounding the work of validating and generating a record.
pub const MAX_COLUMNS: usize = 1_000;

/// See [`DatasetConfig::parse`].
pub(crate) fn parse_dataset_config(value: &Value) -> Result<DatasetConfig, Vec<ConfigIssue>> {
    let partial = parse_partial(value)?;
    if partial.issues.is_empty() {
        Ok(partial.config)
    } else {
        Err(partial.issues)
    }
}

/// See [`DatasetConfig::parse_partial`]. `Err` only when nothing can be compiled at all (not
/// an object, too many columns).
pub(crate) fn parse_partial(value: &Value) -> Result<PartialConfig, Vec<ConfigIssue>> {
    let mut issues = Vec::new();
    let inner = match value.get("data_designer") {
        Some(inner) => {
            for key in value.as_object().into_iter().flat_map(|o| o.keys()) {
                if !WRAPPER_KEYS.contains(&key.as_str()) {
                    issues.push(unknown_key(key, WRAPPER_KEYS));
                }
            }
            if let Some(v) = value.get("library_version")
                && !(v.is_string() || v.is_null())
            {
                let msg = format!("invalid type: {}, expected a string", json_kind(v));
                issues.push(ConfigIssue::at_field(
                    codes::INVALID_CONFIG,
                    "library_version",
                    msg,
                ));
            }
            inner
        }
        None => value,
    };
    let Value::Object(obj) = inner else {
        let msg = format!(
            "invalid type: {}, expected a config object",
            json_kind(inner)
        );
        issues.push(ConfigIssue::new(codes::INVALID_CONFIG, None, None, msg));
        return Err(issues);
    };
    for key in obj.keys() {
        if !TOP_LEVEL_KEYS.contains(&key.as_str()) {
            issues.push(unknown_key(key, TOP_LEVEL_KEYS));
        }
    }

    let (model_configs, unparsed_model_aliases, model_config_indices) = parse_list::<ModelConfig>(
        obj.get("model_configs"),
        "model_configs",
        "alias",
        codes::INVALID_MODEL_CONFIG,
        &mut issues,
    );
    let (tool_configs, unparsed_tool_aliases, tool_config_indices) = parse_list::<ToolConfig>(
        obj.get("tool_configs"),
        "tool_configs",
        "tool_alias",
        codes::INVALID_TOOL_CONFIG,
        &mut issues,
    );
    let processors = parse_processors(obj.get("processors"), &mut issues);
    let profilers = parse_profilers(obj.get("profilers"), &mut issues);
    let record_selection = parse_record_selection(obj.get("record_selection"), &mut issues);
    let seed_config = match obj.get("seed_config") {
        None | Some(Value::Null) => None,
        Some(v) => parse_seed_config(v, &mut issues),
    };

    let mut columns = Vec::new();
    let mut unparsed_columns = Vec::new();
    match obj.get("columns") {
        None | Some(Value::Null) => {}
        Some(Value::Array(items)) if items.len() > MAX_COLUMNS => {
            // Checked before anything else is done per column: what follows (compiling,
            // ordering, probing a record) must not get a budget proportional to any input.
            let msg = format!(
                "the config has {} columns; a job may have at most {MAX_COLUMNS}",
                items.len()
            );
            issues.push(ConfigIssue::at_field(
                codes::TOO_MANY_COLUMNS,
                "columns",
                msg,
            ));
            return Err(issues);
        }
        Some(Value::Array(items)) => {
            for (i, item) in items.iter().enumerate() {
                match parse_column(i, item, &mut issues) {
                    Some(column) => columns.push(column),
                    None => unparsed_columns
                        .extend(item.get("name").and_then(Value::as_str).map(str::to_owned)),
                }
            }
        }
        Some(other) => {
            let msg = format!(
                "invalid type: {}, expected a list of columns",
                json_kind(other)
            );
            issues.push(ConfigIssue::at_field(codes::INVALID_CONFIG, "columns", msg));
        }
    }

    let optional = |key: &str| obj.get(key).filter(|v| !v.is_null()).cloned();
    let config = DatasetConfig {
        model_configs,
        tool_configs,
        raw: inner.clone(),
        columns,
        seed_config,
        constraints: optional("constraints"),
        processors,
        profilers,
        record_selection,
    };
    Ok(PartialConfig {
        config,
        issues,
        unparsed_columns,
        unparsed_model_aliases,
        unparsed_tool_aliases,
        model_config_indices,
        tool_config_indices,
    })
}

/// A config parsed as far as its shape allows: the parts that parsed, the shape issues, and
/// the names the parts that did not parse would have defined, so that compiling the rest does
/// not report references to them as unknown.
#[derive(Debug, Clone)]
pub struct PartialConfig {
    /// The parts that parsed.
    pub config: DatasetConfig,
    /// Every shape problem.
    pub issues: Vec<ConfigIssue>,
    /// Names of columns that did not parse (when they had one).
    pub unparsed_columns: Vec<String>,
    /// Aliases of model configs that did not parse (when they had one).
    pub unparsed_model_aliases: Vec<String>,
    /// Aliases of tool configs that did not parse (when they had one).
    pub unparsed_tool_aliases: Vec<String>,
    /// The index in the submitted `model_configs` of each parsed model config.
    pub model_config_indices: Vec<usize>,
    /// The index in the submitted `tool_configs` of each parsed tool config.
    pub tool_config_indices: Vec<usize>,
}

impl PartialConfig {
    /// Points an issue found on the parsed parts back at the submitted config: with an entry
    /// of `model_configs` or `tool_configs` left out, later entries' indices shift.
    pub fn locate(&self, mut issue: ConfigIssue) -> ConfigIssue {
        for (key, indices) in [
            ("model_configs", &self.model_config_indices),
            ("tool_configs", &self.tool_config_indices),
        ] {
            let Some(field) = issue.field.as_deref() else {
                continue;
            };
            let Some(rest) = field.strip_prefix(key).and_then(|r| r.strip_prefix('[')) else {
                continue;
            };
            let Some((i, _)) = rest.split_once(']') else {
                continue;
            };
            let Some(&orig) = i.parse::<usize>().ok().and_then(|i| indices.get(i)) else {
                continue;
            };
            let (from, to) = (format!("{key}[{i}]"), format!("{key}[{orig}]"));
            issue.field = Some(field.replacen(&from, &to, 1));
            issue.message = issue.message.replacen(&from, &to, 1);
        }
        issue
    }
}

fn unknown_key(key: &str, expected: &[&str]) -> ConfigIssue {
    let expected: Vec<String> = expected.iter().map(|k| format!("`{k}`")).collect();
    let msg = format!(
        "unknown field `{key}`, expected one of {}",
        expected.join(", ")
    );
    ConfigIssue::at_field(codes::INVALID_CONFIG, key, msg)
}

/// Parses a list of model or tool configs, one issue per bad entry; also returns the
/// `alias_key` of the entries that did not parse, and the index of each entry that did.
fn parse_list<T: serde::de::DeserializeOwned>(
    value: Option<&Value>,
    key: &str,
    alias_key: &str,
    code: &'static str,
    issues: &mut Vec<ConfigIssue>,
) -> (Vec<T>, Vec<String>, Vec<usize>) {
    let items = match value {
        None | Some(Value::Null) => return (Vec::new(), Vec::new(), Vec::new()),
        Some(Value::Array(items)) => items,
        Some(other) => {
            let msg = format!("invalid type: {}, expected a list", json_kind(other));
            issues.push(ConfigIssue::at_field(code, key, msg));
            return (Vec::new(), Vec::new(), Vec::new());
        }
    };
    let mut out = Vec::with_capacity(items.len());
    let mut unparsed = Vec::new();
    let mut indices = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        match deserialize_at::<T>(item) {
            Ok(t) => {
                out.push(t);
                indices.push(i);
            }
            Err((path, msg)) => {
                let field = join_path(&format!("{key}[{i}]"), &path);
                issues.push(ConfigIssue::at_field(code, &field, msg));
                unparsed.extend(
                    item.get(alias_key)
                        .and_then(Value::as_str)
                        .map(str::to_owned),
                );
            }
        }
    }
    (out, unparsed, indices)
}
