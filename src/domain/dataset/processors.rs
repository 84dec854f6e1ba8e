//! `processors` and `profilers` (`data_designer.config.processors`,
//! `data_designer.config.analysis.column_profilers`): their shapes as DataDesigner 0.9.6 writes
//! them. Whether their names and templates fit the columns is decided at compile.

use serde::Deserialize;
use serde_json::{Map, Value};

use super::ConfigIssue;
use super::issues::{codes, deserialize_at, join_path};
use super::sampler_params::json_kind;

/// The processor types DataDesigner 0.9.6 defines (`ProcessorType`).
pub const KNOWN_PROCESSOR_TYPES: &[&str] = &["drop_columns", "schema_transform"];

/// One entry of `processors`.
#[derive(Debug, Clone, PartialEq)]
pub struct ProcessorConfig {
    /// `name`: names the processor's output (a `schema_transform` dataset is served by it).
    pub name: String,
    /// What it does.
    pub kind: ProcessorKind,
}

/// The processor types.
#[derive(Debug, Clone, PartialEq)]
pub enum ProcessorKind {
    /// `drop_columns`: these columns (or `*` globs over column names) leave the dataset.
    DropColumns {
        /// `column_names`, as given.
        column_names: Vec<String>,
    },
    /// `schema_transform`: a second dataset, one row per record, each string in `template`
    /// rendered with Jinja over the record.
    SchemaTransform {
        /// `template`: output column → a JSON value whose strings are Jinja templates.
        template: Map<String, Value>,
    },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct DropColumnsShape {
    name: String,
    column_names: Vec<String>,
    #[serde(rename = "processor_type")]
    _processor_type: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SchemaTransformShape {
    name: String,
    template: Map<String, Value>,
    #[serde(rename = "processor_type")]
    _processor_type: String,
}

/// DataDesigner's `JudgeScoreProfilerConfig`, its only column profiler: LLM summaries of the
/// scores of `llm-judge` columns, plus their distributions.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProfilerConfig {
    /// The model that would write the summaries; must be a defined alias.
    pub model_alias: String,
    /// Score samples shown to the model per summary (`>= 1`, default 20; `null`: no summary).
    #[serde(default = "default_sample_size")]
    pub summary_score_sample_size: Option<u32>,
}

fn default_sample_size() -> Option<u32> {
    Some(20)
}

/// Parses `processors` (absent or `null`: none). One issue per bad entry.
pub(crate) fn parse_processors(
    value: Option<&Value>,
    issues: &mut Vec<ConfigIssue>,
) -> Vec<ProcessorConfig> {
    let Some(items) = list(value, "processors", issues) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let at = format!("processors[{i}]");
        let kind = item.get("processor_type").and_then(Value::as_str);
        let parsed = match kind {
            Some("drop_columns") => deserialize_at::<DropColumnsShape>(item).map(|s| {
                let kind = ProcessorKind::DropColumns {
                    column_names: s.column_names,
                };
                (s.name, kind)
            }),
            Some("schema_transform") => deserialize_at::<SchemaTransformShape>(item).map(|s| {
                (
                    s.name,
                    ProcessorKind::SchemaTransform {
                        template: s.template,
                    },
                )
            }),
            other => {
                let got = other.map_or_else(
                    || "missing".to_owned(),
                    |t| format!("'{t}' is not a processor type"),
                );
                let msg = format!(
                    "processor_type {got}; expected one of {}",
                    KNOWN_PROCESSOR_TYPES.join(", ")
                );
                issues.push(ConfigIssue::at_field(
                    codes::INVALID_CONFIG,
                    &format!("{at}.processor_type"),
                    msg,
                ));
                continue;
            }
        };
        match parsed {
            Ok((name, kind)) => out.push(ProcessorConfig { name, kind }),
            Err((path, msg)) => {
                let field = join_path(&at, &path);
                issues.push(ConfigIssue::at_field(codes::INVALID_CONFIG, &field, msg));
            }
        }
    }
    out
}

/// Parses `profilers` (absent or `null`: none). One issue per bad entry.
pub(crate) fn parse_profilers(
    value: Option<&Value>,
    issues: &mut Vec<ConfigIssue>,
) -> Vec<ProfilerConfig> {
    let Some(items) = list(value, "profilers", issues) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (i, item) in items.iter().enumerate() {
        match deserialize_at::<ProfilerConfig>(item) {
            Ok(p) if p.summary_score_sample_size == Some(0) => {
                let field = format!("profilers[{i}].summary_score_sample_size");
                let msg = "must be at least 1, or null for no summaries";
                issues.push(ConfigIssue::at_field(codes::INVALID_CONFIG, &field, msg));
            }
            Ok(p) => out.push(p),
            Err((path, msg)) => {
                let field = join_path(&format!("profilers[{i}]"), &path);
                issues.push(ConfigIssue::at_field(codes::INVALID_CONFIG, &field, msg));
            }
        }
    }
    out
}

fn list<'v>(
    value: Option<&'v Value>,
    key: &str,
    issues: &mut Vec<ConfigIssue>,
) -> Option<&'v Vec<Value>> {
    match value {
        None | Some(Value::Null) => None,
        Some(Value::Array(items)) => Some(items),
        Some(other) => {
            let msg = format!("invalid type: {}, expected a list", json_kind(other));
            issues.push(ConfigIssue::at_field(codes::INVALID_CONFIG, key, msg));
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn parses_both_processor_types_and_names_bad_fields() {
        let mut issues = Vec::new();
        let v = json!([
            {"name": "d", "processor_type": "drop_columns", "column_names": ["a", "b*"]},
            {"name": "chat", "processor_type": "schema_transform", "template": {"m": "{{ a }}"}},
            {"name": "x", "processor_type": "sort"},
            {"name": "y", "processor_type": "drop_columns", "column_names": ["a"], "build_stage": "post_batch"},
        ]);
        let out = parse_processors(Some(&v), &mut issues);
        assert_eq!(out.len(), 2);
        assert_eq!(out[0].name, "d");
        assert!(
            matches!(&out[1].kind, ProcessorKind::SchemaTransform { template } if template.contains_key("m"))
        );
        let fields: Vec<_> = issues.iter().map(|i| i.field.clone().unwrap()).collect();
        assert_eq!(
            fields,
            ["processors[2].processor_type", "processors[3].build_stage"]
        );
    }

    #[test]
    fn profilers_default_and_range() {
        let mut issues = Vec::new();
        let v =
            json!([{"model_alias": "judge"}, {"model_alias": "j", "summary_score_sample_size": 0}]);
        let out = parse_profilers(Some(&v), &mut issues);
        assert_eq!(out[0].summary_score_sample_size, Some(20));
        assert_eq!(out.len(), 1);
        assert_eq!(
            issues[0].field.as_deref(),
            Some("profilers[1].summary_score_sample_size")
        );
    }
}
