//! How a generated record ends: its values, or a stable error saying where it failed.
//!
//! A failed record is data, not an HTTP error: it is stored with its code, message, column and
//! stage, and is never silently dropped.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use super::{JobId, RecordId, RecordStatus};

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

/// A stored record.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordRow {
    pub id: RecordId,
    pub job_id: JobId,
    /// Position in the job's dataset, from 0.
    pub index: u32,
    pub status: RecordStatus,
    /// Column values (object), set when completed; partial values may be kept on failure.
    pub values: Option<Value>,
    /// How many times the record was claimed.
    pub attempts: u32,
    pub error: Option<RecordError>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// A stored trace.
#[derive(Debug, Clone, PartialEq)]
pub struct TraceRow {
    pub record_id: RecordId,
    pub column: String,
    pub messages: Value,
    pub created_at: DateTime<Utc>,
}

/// A record that reached a final state, for progress streams.
#[derive(Debug, Clone, PartialEq)]
pub struct FinishedRecord {
    pub id: RecordId,
    pub index: u32,
    pub status: RecordStatus,
    pub error_code: Option<String>,
    pub updated_at: DateTime<Utc>,
}

/// The message trace of one LLM column of a record, as generated.
#[derive(Debug, Clone, PartialEq)]
pub struct Trace {
    /// The LLM column.
    pub column: String,
    /// The ordered message list (JSON array).
    pub messages: Value,
}
