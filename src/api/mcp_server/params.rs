//! The arguments of the MCP tools that have no REST twin type. Preview and submit take
//! [`CreateJobRequest`](crate::api::dto::CreateJobRequest), `list_jobs` and `list_datasets` the
//! REST queries, so both doors accept the same input. Ids are strings here, as in REST paths,
//! so a bad one gets the same `invalid_id` error.

use schemars::JsonSchema;
use serde::Deserialize;

use crate::domain::RecordStatus;

/// A job, by id.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct JobIdArgs {
    /// The job's id (a UUID, as `submit_job` returned it).
    pub job_id: String,
}

/// Waiting for a job.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WaitJobArgs {
    /// The job's id.
    pub job_id: String,
    /// How long to wait, in seconds (default 60, at most 600). The job as it is then comes
    /// back either way; call again to keep waiting.
    #[schemars(range(min = 1, max = 600))]
    pub timeout_sec: Option<u64>,
}

/// A page of a job's records.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RecordsArgs {
    /// The job's id.
    pub job_id: String,
    /// Page size (default 100, at most `limits.max_page_size`).
    #[schemars(range(min = 1))]
    pub limit: Option<u32>,
    /// `next_cursor` of the previous page.
    pub cursor: Option<String>,
    /// Only records with this status.
    pub status: Option<RecordFilter>,
    /// Add each record's LLM traces as `{column}__trace` values.
    pub include_traces: Option<bool>,
}

/// The statuses a listed record can have: a record is listed once it has a result.
#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RecordFilter {
    /// Generated.
    Completed,
    /// Failed, with an error.
    Failed,
}

impl From<RecordFilter> for RecordStatus {
    fn from(f: RecordFilter) -> Self {
        match f {
            RecordFilter::Completed => RecordStatus::Completed,
            RecordFilter::Failed => RecordStatus::Failed,
        }
    }
}

/// A record, by id.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RecordIdArgs {
    /// The record's id (a UUID, from `get_records`).
    pub record_id: String,
}

/// A record's traces.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TraceArgs {
    /// The record's id.
    pub record_id: String,
    /// Only this LLM column's trace.
    pub column: Option<String>,
}

/// A dataset, by id.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DatasetIdArgs {
    /// The dataset's id (a UUID, from `list_datasets`).
    pub dataset_id: String,
}
