//! A job as stored and as shown: its row, its record counts, and why it failed.
//!
//! The store reads and writes these; the job service hands them to the HTTP layer, which turns
//! them into response bodies. They carry no handle to a database.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::record::RecordError;
use super::usage::{ToolUsage, UsageCounts};
use super::{JobId, JobStatus, RecordId};

/// A stored job.
#[derive(Debug, Clone, PartialEq)]
pub struct JobRow {
    pub id: JobId,
    pub owner: Option<String>,
    pub status: JobStatus,
    pub config: Value,
    pub num_records: u32,
    pub seed: u64,
    pub metadata: Option<Value>,
    pub run_config: Value,
    pub idempotency_key: Option<String>,
    pub request_hash: Option<String>,
    /// Set when the job as a whole failed (e.g. `error_rate_exceeded`).
    pub error: Option<JobError>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    /// When the first record was claimed.
    pub started_at: Option<DateTime<Utc>>,
    /// When the job reached a terminal status.
    pub finished_at: Option<DateTime<Utc>>,
    /// The columns of a dataset row, in order, as compiled at submit. `None` for jobs stored
    /// before the column list was kept (their plan gives it).
    pub output_columns: Option<Vec<String>>,
    /// The stored datasets the job's seed was bound to at submit, in reading order; `None`
    /// for a job without a stored seed.
    pub seed_datasets: Option<Vec<crate::domain::DatasetId>>,
    /// The name the client gave the job, if any.
    pub name: Option<String>,
    /// Where the job sits in an OpenTelemetry trace (`telemetry::JobTrace`'s text); `None`
    /// when spans were not exported at submit.
    pub trace_context: Option<String>,
    /// Its `record_selection` (`num_records` then counts accepted records), if it has one.
    pub selection: Option<crate::domain::selection::SelectionSpec>,
    /// How its model calls use the response cache of its API key.
    pub cache_mode: crate::domain::models::CacheMode,
    /// Its budget, in billionths of the price's unit, if it has one.
    pub max_cost_nanos: Option<u64>,
}

/// Why a job as a whole failed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobError {
    pub code: String,
    pub message: String,
}

/// Record counts of a job by status.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobCounts {
    pub pending: u64,
    pub in_progress: u64,
    pub completed: u64,
    pub failed: u64,
    pub cancelled: u64,
    /// Of `in_progress`, the records waiting on a model (for a request slot or the answer)
    /// on the replica that read the counts; not stored, and not part of the total.
    #[serde(default)]
    pub waiting_for_model: u64,
    /// The five counts of a `record_selection` job (its records above are its candidates).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selection: Option<crate::domain::selection::SelectionCounts>,
}

impl JobCounts {
    /// All records of the job.
    pub fn total(&self) -> u64 {
        self.pending + self.in_progress + self.completed + self.failed + self.cancelled
    }
}

/// Everything a job response shows, read in one round trip: the job, its counts, its first
/// failed records and its LLM usage.
#[derive(Debug, Clone, PartialEq)]
pub struct JobSummary {
    /// The job.
    pub job: JobRow,
    /// Its records by status.
    pub counts: JobCounts,
    /// Its first failed records, by index (at most the number asked for).
    pub first_errors: Vec<FailedRecord>,
    /// LLM requests and tokens by model alias, sorted by alias.
    pub usage: BTreeMap<String, UsageCounts>,
    /// The same by column (LLM, embedding and image columns), sorted by column.
    pub column_usage: BTreeMap<String, UsageCounts>,
    /// Tool turns and calls by LLM column, sorted by column.
    pub tool_usage: BTreeMap<String, ToolUsage>,
}

/// A failed record, as a job summary lists it.
#[derive(Debug, Clone, PartialEq)]
pub struct FailedRecord {
    /// The record.
    pub id: RecordId,
    /// Its position in the dataset.
    pub index: u32,
    /// Why it failed.
    pub error: RecordError,
}

/// What a job listing keeps: every filter given must hold (`GET /v1/jobs`'s query).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct JobFilter {
    /// Any of these statuses (empty: any status).
    pub statuses: Vec<crate::domain::status::JobStatus>,
    /// Exactly this name.
    pub name: Option<String>,
    /// Top-level metadata keys each equal to its scalar value (a string, number or boolean),
    /// compared as JSON.
    pub metadata: Vec<(String, Value)>,
    /// Created at or after this instant (to the millisecond, from the job's UUIDv7 id).
    pub created_after: Option<DateTime<Utc>>,
    /// Created strictly before this instant (to the millisecond).
    pub created_before: Option<DateTime<Utc>>,
    /// Created at or after this instant, as its `created_at` shows it (to the microsecond).
    pub created_from: Option<DateTime<Utc>>,
    /// Created at or before this instant, as its `created_at` shows it.
    pub created_to: Option<DateTime<Utc>>,
    /// Last updated at or after this instant.
    pub updated_from: Option<DateTime<Utc>>,
    /// Last updated at or before this instant.
    pub updated_to: Option<DateTime<Utc>>,
    /// Tests on text fields (the name, strings in the metadata), each of which must hold.
    pub text: Vec<TextMatch>,
}

/// A test on one text field of a job, for the Data Designer door's filters and searches.
#[derive(Debug, Clone, PartialEq)]
pub struct TextMatch {
    /// The field.
    pub field: TextField,
    /// Its value when the job has none (the door's defaults, so a job listed with a default
    /// name is found by it).
    pub when_missing: String,
    /// What it must satisfy.
    pub test: TextTest,
}

/// A text field of a job.
#[derive(Debug, Clone, PartialEq)]
pub enum TextField {
    /// The job's name.
    Name,
    /// The string at this path of keys in its metadata.
    Metadata(Vec<String>),
}

/// What a [`TextMatch`] asks of its field.
#[derive(Debug, Clone, PartialEq)]
pub enum TextTest {
    /// Equal to this text.
    Equals(String),
    /// Containing at least one of these terms, ignoring ASCII case (none: always holds).
    ContainsAny(Vec<String>),
}

/// The order of a numbered page of jobs (the Data Designer door's `sort`); ties, and jobs
/// created in one millisecond, go by id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobOrder {
    /// `created_at`: oldest first.
    CreatedAsc,
    /// `-created_at`: newest first.
    CreatedDesc,
    /// `updated_at`: least recently updated first.
    UpdatedAsc,
    /// `-updated_at`: most recently updated first.
    UpdatedDesc,
}

impl JobOrder {
    /// The order a `sort` value names, as the Data Designer client writes it.
    pub fn parse(sort: &str) -> Option<Self> {
        Some(match sort {
            "created_at" => Self::CreatedAsc,
            "-created_at" => Self::CreatedDesc,
            "updated_at" => Self::UpdatedAsc,
            "-updated_at" => Self::UpdatedDesc,
            _ => return None,
        })
    }

    /// Every `sort` value served, for the error that refuses another.
    pub const NAMES: [&'static str; 4] = ["created_at", "-created_at", "updated_at", "-updated_at"];
}
