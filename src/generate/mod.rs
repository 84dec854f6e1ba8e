//! Generating one record: the column DAG, samplers, Jinja rendering and (later) LLM columns.
//!
//! INTERFACE STUB: the full implementation replaces this file; the signatures are the contract.

use serde_json::{Map, Value};

use crate::domain::dataset::{ConfigIssue, DatasetConfig};
use crate::domain::record::{RecordError, RecordOutcome};

/// Names defined outside the job config that columns may reference.
#[derive(Debug, Clone, Default)]
pub struct PlanContext {
    /// Model aliases defined in the server config.
    pub model_aliases: Vec<String>,
    /// Tool aliases defined in the server config.
    pub tool_aliases: Vec<String>,
}

/// A validated, compiled job config: columns in dependency order, templates parsed.
#[derive(Debug)]
pub struct Plan {
    output_columns: Vec<String>,
}

impl Plan {
    /// Validates `config` fully and compiles it for a job with `seed`.
    pub fn compile(
        _config: &DatasetConfig,
        _ctx: &PlanContext,
        _seed: u64,
    ) -> Result<Self, Vec<ConfigIssue>> {
        Ok(Self {
            output_columns: Vec::new(),
        })
    }

    /// Columns of a dataset row, in order (dropped columns excluded).
    pub fn output_columns(&self) -> &[String] {
        &self.output_columns
    }

    /// Generates record `index`. Deterministic in (seed, index).
    pub fn generate(&self, index: u64) -> RecordOutcome {
        let _ = (index, Map::<String, Value>::new());
        RecordOutcome::Failed {
            values: None,
            error: RecordError {
                code: "not_implemented".into(),
                message: "generation is not implemented yet".into(),
                column: None,
                stage: None,
            },
        }
    }
}
