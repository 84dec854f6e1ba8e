//! Checks that do not depend on the column graph: job model and tool configs, and which model and tool aliases a column may name.

use std::collections::{BTreeSet, HashSet};

use super::PlanContext;
use crate::domain::dataset::{ConfigIssue, DatasetConfig, codes};

/// Range problems and duplicate aliases in the job's model and tool configs.
pub(crate) fn model_and_tool_configs(config: &DatasetConfig, issues: &mut Vec<ConfigIssue>) {
    let mut seen = HashSet::new();
    for (i, m) in config.model_configs.iter().enumerate() {
        for p in m.problems() {
            let field = format!("model_configs[{i}].{}", p.field);
            let msg = format!("model config '{}': {}", m.alias, p.message);
            issues.push(ConfigIssue::at_field(
                codes::INVALID_MODEL_CONFIG,
                &field,
                msg,
            ));
        }
        if !seen.insert(m.alias.as_str()) {
            let msg = format!("model alias '{}' is defined more than once", m.alias);
            let field = format!("model_configs[{i}].alias");
            issues.push(ConfigIssue::at_field(
                codes::INVALID_MODEL_CONFIG,
                &field,
                msg,
            ));
        }
    }
    let mut seen = HashSet::new();
    for (i, t) in config.tool_configs.iter().enumerate() {
        for p in t.problems() {
            let field = format!("tool_configs[{i}].{}", p.field);
            let msg = format!("tool config '{}': {}", t.tool_alias, p.message);
            issues.push(ConfigIssue::at_field(
                codes::INVALID_TOOL_CONFIG,
                &field,
                msg,
            ));
        }
        if !seen.insert(t.tool_alias.as_str()) {
            let msg = format!("tool alias '{}' is defined more than once", t.tool_alias);
            let field = format!("tool_configs[{i}].tool_alias");
            issues.push(ConfigIssue::at_field(
                codes::INVALID_TOOL_CONFIG,
                &field,
                msg,
            ));
        }
    }
}

/// The model and tool aliases LLM columns may name: the job's plus the server's.
pub(crate) struct Aliases {
    pub(crate) models: BTreeSet<String>,
    pub(crate) tools: BTreeSet<String>,
}

impl Aliases {
    pub(crate) fn new(config: &DatasetConfig, ctx: &PlanContext) -> Self {
        let models = config
            .model_configs
            .iter()
            .map(|m| m.alias.clone())
            .chain(ctx.model_aliases.iter().cloned())
            .collect();
        let tools = config
            .tool_configs
            .iter()
            .map(|t| t.tool_alias.clone())
            .chain(ctx.tool_aliases.iter().cloned())
            .collect();
        Self { models, tools }
    }

    /// An `unknown_*_alias` issue when `alias` is not in `known`.
    pub(crate) fn check(
        known: &BTreeSet<String>,
        alias: &str,
        code: &'static str,
        column: &str,
        field: &str,
    ) -> Option<ConfigIssue> {
        if known.contains(alias) {
            return None;
        }
        let listed = if known.is_empty() {
            "none are defined".to_owned()
        } else {
            let names: Vec<&str> = known.iter().map(String::as_str).collect();
            format!("known aliases: {}", names.join(", "))
        };
        let msg = format!("{field} '{alias}' is not defined in the job or on the server; {listed}");
        Some(ConfigIssue::in_column(code, column, Some(field), msg))
    }
}
