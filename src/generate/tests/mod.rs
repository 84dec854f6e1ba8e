//! Tests of `generate` through its public API: `Plan::compile`, `output_columns`, `generate`.

mod compile_issues;
mod config_issues;
mod constraints;
mod person_and_scipy;
mod processors;
mod records;
mod samplers;
mod seed_and_skip;
mod template_budgets;
mod template_producers;
mod template_refs;

use serde_json::{Map, Value, json};

use super::{Plan, PlanContext};
use crate::domain::dataset::{ConfigIssue, DatasetConfig};
use crate::domain::record::{RecordError, RecordErrorCode, RecordOutcome, RecordStage};

/// Server context with one model alias and one tool alias.
pub(super) fn server() -> PlanContext {
    PlanContext {
        model_aliases: vec!["server-model".into()],
        tool_aliases: vec!["server-tools".into()],
        ..PlanContext::default()
    }
}

/// Compiles `{"columns": columns}` plus any other top-level keys in `extra`.
pub(super) fn try_plan(config: Value, seed: u64) -> Result<Plan, Vec<ConfigIssue>> {
    let cfg = DatasetConfig::parse(&config).unwrap_or_else(|e| panic!("parse failed: {e:#?}"));
    Plan::compile(&cfg, &server(), seed)
}

pub(super) fn plan(config: Value) -> Plan {
    try_plan(config, 42).unwrap_or_else(|e| panic!("compile failed: {e:#?}"))
}

pub(super) fn plan_columns(columns: Value) -> Plan {
    plan(json!({ "columns": columns }))
}

pub(super) fn issues(config: Value) -> Vec<ConfigIssue> {
    try_plan(config, 42).expect_err("should not compile")
}

pub(super) fn column_issues(columns: Value) -> Vec<ConfigIssue> {
    issues(json!({ "columns": columns }))
}

/// Generates record `index` of a plan without stored seed rows.
pub(super) fn generate(plan: &Plan, index: u64) -> RecordOutcome {
    let row = match plan.seed_row(index) {
        Some(crate::generate::SeedRow::Inline(row)) => Some(row),
        Some(stored) => panic!("a stored seed row needs a reader: {stored:?}"),
        None => None,
    };
    plan.generate(index, row)
}

/// The values of a completed record.
pub(super) fn row(plan: &Plan, index: u64) -> Map<String, Value> {
    match generate(plan, index) {
        RecordOutcome::Completed {
            values: Value::Object(m),
        } => m,
        other => panic!("record {index} did not complete: {other:?}"),
    }
}

/// The error and partial values of a failed record.
pub(super) fn failure(plan: &Plan, index: u64) -> (RecordError, Map<String, Value>) {
    match generate(plan, index) {
        RecordOutcome::Failed {
            values: Some(Value::Object(m)),
            error,
        } => (error, m),
        other => panic!("record {index} did not fail: {other:?}"),
    }
}

pub(super) fn sampler(name: &str, sampler_type: &str, params: Value) -> Value {
    json!({"name": name, "column_type": "sampler", "sampler_type": sampler_type, "params": params})
}

pub(super) fn expr(name: &str, expr: &str) -> Value {
    json!({"name": name, "column_type": "expression", "expr": expr})
}

#[test]
fn plan_is_send_and_sync() {
    fn check<T: Send + Sync>() {}
    check::<Plan>();
}
