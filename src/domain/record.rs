//! How a generated record ends: its values, or a stable error saying where it failed.
//!
//! A failed record is data, not an HTTP error: it is stored with its code, message, column and
//! stage, and is never silently dropped.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

/// Why a record failed: a stable code, a message, and where.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct RecordError {
    /// Stable snake_case code, e.g. `template_error`, `unstorable_value`, `record_abandoned`.
    pub code: String,
    /// Readable on its own; never contains secrets.
    pub message: String,
    /// The column being generated when it failed.
    pub column: Option<String>,
    /// The stage within the column (`render`, `sample`, `convert`, `llm`, `tool`, ...).
    pub stage: Option<String>,
}

/// How a record ended.
#[derive(Debug, Clone, PartialEq)]
pub enum RecordOutcome {
    /// Values of the record's columns (an object).
    Completed { values: Value },
    /// The error, and the values generated before it, if any.
    Failed {
        values: Option<Value>,
        error: RecordError,
    },
}
