//! The DataDesigner dataset config as synthgate accepts it: columns, model and tool configs,
//! seed rows, and the job's run config.
//!
//! INTERFACE STUB: the full parser replaces this file; the signatures below are the contract.

use serde_json::Value;

use super::models::{ModelConfig, ToolConfig};

/// One problem found in a submitted config, with a stable code and where it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigIssue {
    /// Stable snake_case code (`unknown_column_type`, `dependency_cycle`, ...).
    pub code: &'static str,
    /// The column the problem is in, when it is in one.
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
}

impl DatasetConfig {
    /// Accepts `{"data_designer": {...}, "library_version": ...}` or the inner object.
    pub fn parse(value: &Value) -> Result<Self, Vec<ConfigIssue>> {
        let inner = value.get("data_designer").unwrap_or(value).clone();
        Ok(Self {
            model_configs: Vec::new(),
            tool_configs: Vec::new(),
            raw: inner,
        })
    }
}

/// DataDesigner's `RunConfig` fields that synthgate honours, plus its own trace override.
#[derive(Debug, Clone, PartialEq, Default, serde::Serialize, serde::Deserialize)]
pub struct RunConfig {
    pub disable_early_shutdown: bool,
    pub shutdown_error_rate: f64,
    pub shutdown_error_window: u32,
}

impl RunConfig {
    pub fn parse(_value: &Value) -> Result<Self, Vec<ConfigIssue>> {
        Ok(Self {
            disable_early_shutdown: false,
            shutdown_error_rate: 0.5,
            shutdown_error_window: 10,
        })
    }
    pub fn effective_shutdown_error_rate(&self) -> f64 {
        if self.disable_early_shutdown {
            1.0
        } else {
            self.shutdown_error_rate
        }
    }
}
