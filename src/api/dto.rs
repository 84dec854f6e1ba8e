//! Request and response bodies of the v1 API, with their OpenAPI schemas.

use chrono::{DateTime, Utc};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::{IntoParams, ToSchema};

use crate::domain::job::{JobCounts, JobError, JobSummary};
use crate::domain::models::CacheMode;
use crate::domain::record::{RecordError, RecordErrorCode, RecordRow};
use crate::domain::selection::{Selection, SelectionCounts, SelectionFilter};
use crate::domain::usage::{ToolUsage, UsageCounts};
use crate::domain::{JobId, JobStatus, RecordId, RecordStatus};

/// `POST /v1/jobs` as JSON.
///
/// The first example needs no LLM; the second needs the model alias `writer` in the server
/// config (as docs/llm-columns.md shows).
#[derive(Debug, Deserialize, ToSchema, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schema(examples(
    json!({
        "config": {"columns": [
            {"name": "topic", "column_type": "sampler", "sampler_type": "category",
             "params": {"values": ["math", "history"]}},
            {"name": "level", "column_type": "sampler", "sampler_type": "uniform",
             "params": {"low": 1, "high": 10, "decimal_places": 1}},
            {"name": "title", "column_type": "expression",
             "expr": "{{ topic | upper }} at level {{ level }}"}
        ]},
        "num_records": 3,
        "seed": 7,
        "metadata": {"purpose": "example"}
    }),
    json!({
        "config": {"columns": [
            {"name": "topic", "column_type": "sampler", "sampler_type": "category",
             "params": {"values": ["math", "history"]}},
            {"name": "answer", "column_type": "llm-text", "model_alias": "writer",
             "prompt": "Explain {{ topic }}.", "with_trace": "all_messages"}
        ]},
        "num_records": 2,
        "run_config": {"disable_early_shutdown": true}
    })
))]
pub struct CreateJobRequest {
    /// A DataDesigner config: `{"data_designer": {...}, "library_version": ...}` or the inner object.
    #[schema(value_type = Object)]
    #[schemars(extend("type" = "object"))]
    pub config: Value,
    /// Records to generate, from 1 to `limits.max_num_records`.
    #[schema(value_type = i64, minimum = 1)]
    #[schemars(extend("type" = "integer", "minimum" = 1))]
    pub num_records: serde_json::Number,
    /// Job seed; a record's sampled values depend only on it and the record index. Random if absent.
    #[serde(default)]
    pub seed: Option<u64>,
    /// Anything; returned as given.
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub metadata: Option<Value>,
    /// DataDesigner `RunConfig` (e.g. `shutdown_error_rate`, `disable_early_shutdown`).
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub run_config: Option<Value>,
    /// A name to find the job by (`GET /v1/jobs?name=`): up to 256 characters, not blank, no
    /// control characters. Names need not be unique.
    #[serde(default)]
    pub name: Option<String>,
    /// The response cache of this API key for the job's model calls: `off`, `read_write`
    /// (answer from it when it can, cache the rest) or `refresh` (ask the model, replace the
    /// cached answers). Default: the server's `llm.cache.default_mode` (`off` unless set).
    #[serde(default)]
    #[schemars(with = "Option<String>", extend("enum" = ["off", "read_write", "refresh", null]))]
    pub cache: Option<CacheMode>,
    /// A budget, in the unit of the server's model prices: once the job's cost passes it, no
    /// more of its records start, those in flight finish, and the job fails with
    /// `cost_budget_exceeded` (nothing generated is lost). Needs priced models.
    #[serde(default)]
    pub max_cost: Option<f64>,
}

/// Query of `POST /v1/jobs` when the body is a DataDesigner YAML file.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct CreateJobQuery {
    /// Records to generate (required for a YAML config body).
    #[param(value_type = Option<i64>, minimum = 1)]
    pub num_records: Option<String>,
    /// Job seed.
    pub seed: Option<u64>,
    /// Job name (see the JSON body's `name`).
    pub name: Option<String>,
    /// Response cache mode (see the JSON body's `cache`).
    pub cache: Option<CacheMode>,
}

/// Record counts by status.
#[derive(Debug, Serialize, Deserialize, ToSchema, Clone, Copy, PartialEq, Eq)]
pub struct Counts {
    /// All records of the job.
    pub total: u64,
    /// Waiting to be claimed.
    pub pending: u64,
    /// Claimed by a worker and being generated.
    pub in_progress: u64,
    /// Of `in_progress`, the records waiting on a model: for one of its
    /// `max_parallel_requests` slots, or for its answer. Counted by the replica that answered
    /// (with several replicas, its share); not part of `total`.
    #[serde(default)]
    pub waiting_for_model: u64,
    /// Generated.
    pub completed: u64,
    /// Failed (kept, with their error).
    pub failed: u64,
    /// Never ran (job cancelled or stopped).
    pub cancelled: u64,
    /// A job with `record_selection`: its five counts (they add up to the candidates
    /// generated, `completed + failed`), its target and budget. Its records above are its
    /// candidates; `pending` is the fewest more it needs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selection: Option<SelectionCounts>,
}

impl From<JobCounts> for Counts {
    fn from(c: JobCounts) -> Self {
        Self {
            total: c.total(),
            pending: c.pending,
            in_progress: c.in_progress,
            completed: c.completed,
            failed: c.failed,
            cancelled: c.cancelled,
            waiting_for_model: c.waiting_for_model,
            selection: c.selection,
        }
    }
}

/// Why a job as a whole failed.
#[derive(Debug, Serialize, ToSchema)]
pub struct JobErrorResponse {
    /// Stable code, e.g. `error_rate_exceeded`.
    pub code: String,
    /// Readable explanation.
    pub message: String,
}

impl From<JobError> for JobErrorResponse {
    fn from(e: JobError) -> Self {
        Self {
            code: e.code,
            message: e.message,
        }
    }
}

/// A failed record, as summarized on the job.
#[derive(Debug, Serialize, ToSchema)]
pub struct RecordErrorSummary {
    /// The record.
    #[schema(value_type = String, format = Uuid)]
    pub record_id: RecordId,
    /// Its index in the dataset.
    pub index: u32,
    /// The error.
    pub error: RecordError,
}

/// A job: status, progress and where it failed.
#[derive(Debug, Serialize, ToSchema)]
pub struct JobResponse {
    /// Job id (UUIDv7).
    #[schema(value_type = String, format = Uuid)]
    pub id: JobId,
    /// Lifecycle status.
    pub status: JobStatus,
    /// Records requested.
    pub num_records: u32,
    /// The job seed.
    pub seed: u64,
    /// The name given at submit, if any.
    pub name: Option<String>,
    /// Client metadata, as given.
    #[schema(value_type = Option<Object>)]
    pub metadata: Option<Value>,
    /// Record counts by status.
    pub counts: Counts,
    /// Columns of a dataset row, in order (dropped columns excluded).
    pub columns: Vec<String>,
    /// Set when the job as a whole failed.
    pub error: Option<JobErrorResponse>,
    /// The first failed records (up to 5), by index.
    pub first_errors: Vec<RecordErrorSummary>,
    /// LLM requests and tokens by model alias: those of the stored records (completed or
    /// failed), each counted in the transaction that writes the record, so exact after any
    /// crash. An attempt whose result was not stored (lost with a crashed process, or
    /// superseded after its lease was taken over) is not counted.
    /// With `cost` where the server's model config has `prices`.
    pub usage: std::collections::BTreeMap<String, UsageCounts>,
    /// The same usage by column (LLM, embedding and image columns).
    pub column_usage: std::collections::BTreeMap<String, UsageCounts>,
    /// What the job's model calls cost in all, at the server's prices when they were made
    /// (the sum of `usage`'s); absent when no model it used has prices.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cost: Option<f64>,
    /// The job's budget (`max_cost` at submit), if it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_cost: Option<f64>,
    /// Tool use by LLM column, counted like `usage`: tool-calling turns, and calls by tool and
    /// outcome (`ok`, `extraction_error`, `validation_error`, `execution_error`,
    /// `formatting_error`, `refused`). Failed records count too. Empty for a job whose columns
    /// use no tools.
    pub tool_usage: std::collections::BTreeMap<String, ToolUsage>,
    /// While the job is queued or running (on `GET /v1/jobs/{id}` only): each model provider
    /// its columns call, as the replica that answers sees it now. Its `concurrency_limit`
    /// drops when the provider throttles and grows back as it answers; `circuit` is `open`
    /// while a failing provider is sent only one probe per interval.
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub providers: std::collections::BTreeMap<String, crate::llm::ProviderAdmission>,
    /// When the job was accepted.
    pub created_at: DateTime<Utc>,
    /// Last status change.
    pub updated_at: DateTime<Utc>,
    /// When the first record was claimed.
    pub started_at: Option<DateTime<Utc>>,
    /// When the job reached a terminal status.
    pub finished_at: Option<DateTime<Utc>>,
}

impl From<JobSummary> for JobResponse {
    fn from(s: JobSummary) -> Self {
        let job = s.job;
        Self {
            id: job.id,
            status: job.status,
            num_records: job.num_records,
            seed: job.seed,
            name: job.name,
            metadata: job.metadata,
            counts: s.counts.into(),
            columns: job.output_columns.unwrap_or_default(),
            error: job.error.map(Into::into),
            first_errors: s
                .first_errors
                .into_iter()
                .map(|f| RecordErrorSummary {
                    record_id: f.id,
                    index: f.index,
                    error: f.error,
                })
                .collect(),
            cost: job_cost(&s.usage),
            max_cost: job
                .max_cost_nanos
                .map(crate::domain::models::prices::from_nanos),
            usage: s.usage,
            column_usage: s.column_usage,
            tool_usage: s.tool_usage,
            providers: Default::default(),
            created_at: job.created_at,
            updated_at: job.updated_at,
            started_at: job.started_at,
            finished_at: job.finished_at,
        }
    }
}

/// A job's total cost, when any of its usage is priced.
pub(crate) fn job_cost(usage: &std::collections::BTreeMap<String, UsageCounts>) -> Option<f64> {
    let nanos: u64 = usage.values().map(|u| u.cost_nanos).sum();
    (nanos > 0).then(|| crate::domain::models::prices::from_nanos(nanos))
}

/// The config a job was submitted with.
#[derive(Debug, Serialize, ToSchema)]
pub struct JobConfigResponse {
    /// The job.
    #[schema(value_type = String, format = Uuid)]
    pub job_id: JobId,
    /// The DataDesigner config (the inner object), as stored at submit.
    #[schema(value_type = Object)]
    pub config: Value,
    /// The DataDesigner `RunConfig`, as given (`{}` when none was).
    #[schema(value_type = Object)]
    pub run_config: Value,
}

/// A page of jobs, newest first.
#[derive(Debug, Serialize, ToSchema)]
pub struct JobListResponse {
    /// The jobs.
    pub jobs: Vec<JobResponse>,
    /// Pass as `cursor` for the next page; absent on the last page.
    pub next_cursor: Option<String>,
}

/// Query of `GET /v1/jobs` (and the arguments of the MCP tool `list_jobs`).
#[derive(Debug, Deserialize, IntoParams, JsonSchema)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct ListJobsQuery {
    /// Page size (default 20, at most `limits.max_page_size`).
    #[param(minimum = 1)]
    #[schemars(range(min = 1))]
    pub limit: Option<u32>,
    /// `next_cursor` of the previous page (issued for the same filters).
    pub cursor: Option<String>,
    /// Jobs of these statuses, comma-separated (`queued`, `running`, `cancelling`,
    /// `completed`, `failed`, `cancelled`).
    pub status: Option<String>,
    /// Jobs of exactly this name.
    pub name: Option<String>,
    /// A JSON object: jobs whose metadata has each of its top-level keys with that value (a
    /// string, number or boolean), e.g. `{"team":"search"}`.
    pub metadata: Option<String>,
    /// Created at or after (RFC 3339, or a date and time without offset, read as UTC).
    pub created_after: Option<String>,
    /// Created before.
    pub created_before: Option<String>,
}

/// One record.
#[derive(Debug, Serialize, ToSchema)]
pub struct RecordResponse {
    /// Record id (UUIDv7).
    #[schema(value_type = String, format = Uuid)]
    pub id: RecordId,
    /// Its job.
    #[schema(value_type = String, format = Uuid)]
    pub job_id: JobId,
    /// Position in the dataset, from 0.
    pub index: u32,
    /// Lifecycle status.
    pub status: RecordStatus,
    /// Column values; on failure, those generated before the error.
    #[schema(value_type = Option<Object>)]
    pub values: Option<Value>,
    /// Why it failed.
    pub error: Option<RecordError>,
    /// Times it was claimed (more than 1 after a worker died or a drain requeued it).
    pub attempts: u32,
    /// When it was created (with the job).
    pub created_at: DateTime<Utc>,
    /// Last change.
    pub updated_at: DateTime<Utc>,
    /// What became of it, in a job with `record_selection` (absent otherwise): `accepted`
    /// (in the dataset), `rejected`, `null_predicate`, `failed_generation` or `trimmed`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub selection: Option<Selection>,
}

impl From<RecordRow> for RecordResponse {
    fn from(r: RecordRow) -> Self {
        Self {
            id: r.id,
            job_id: r.job_id,
            index: r.index,
            status: r.status,
            values: r.values,
            error: r.error,
            attempts: r.attempts,
            created_at: r.created_at,
            updated_at: r.updated_at,
            selection: r.selection,
        }
    }
}

/// A page of a job's records, by index.
#[derive(Debug, Serialize, ToSchema)]
pub struct RecordListResponse {
    /// The records.
    pub records: Vec<RecordResponse>,
    /// Pass as `cursor` for the next page; absent on the last page.
    pub next_cursor: Option<String>,
}

/// How `GET /v1/jobs/{id}/records` answers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum RecordsFormat {
    /// A JSON page of records with status and errors (default).
    #[default]
    Json,
    /// The whole dataset (completed records' values), one JSON object per line, streamed.
    Jsonl,
    /// The whole dataset as CSV with a header row, streamed; nested values are JSON text.
    Csv,
    /// The whole dataset as a Parquet file, streamed one row group per chunk of records;
    /// column types from the config, nested values as JSON text.
    Parquet,
}

/// Query of `GET /v1/jobs/{id}/records`.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct ListRecordsQuery {
    /// `json` (paged), `jsonl`, `csv` or `parquet` (whole dataset, streamed).
    pub format: Option<RecordsFormat>,
    /// Page size for `json` (default 100, at most `limits.max_page_size`).
    #[param(minimum = 1)]
    pub limit: Option<u32>,
    /// `next_cursor` of the previous page.
    pub cursor: Option<String>,
    /// Only records in this status, `completed` or `failed` (`json` only; exports hold
    /// completed records). Other statuses are refused: such records have no result to list.
    pub status: Option<RecordStatus>,
    /// For a job with `record_selection` (`json` only): the candidates with this verdict, or
    /// `all`. Without it (and without `status`) such a job lists its accepted records, as its
    /// exports hold. Refused for other jobs.
    #[param(inline)]
    pub selection: Option<SelectionFilter>,
    /// Add `{column}__trace` (the column's message list) to each row, for LLM columns that keep
    /// a trace.
    pub include_traces: Option<bool>,
}

/// Liveness and readiness answers.
#[derive(Debug, Serialize, ToSchema)]
pub struct HealthResponse {
    /// `ok`, `ready` or `not_ready`.
    pub status: String,
    /// Per dependency: `ok` or what is wrong.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub checks: Option<serde_json::Map<String, Value>>,
}

/// `event: progress` of the job event stream.
#[derive(Debug, Serialize, ToSchema)]
pub struct ProgressEvent {
    /// The job.
    #[schema(value_type = String, format = Uuid)]
    pub job_id: JobId,
    /// Its status.
    pub status: JobStatus,
    /// Record counts by status.
    pub counts: Counts,
}

/// `event: record` of the job event stream: one record reached a final state.
#[derive(Debug, Serialize, ToSchema)]
pub struct RecordEvent {
    /// The record.
    #[schema(value_type = String, format = Uuid)]
    pub record_id: RecordId,
    /// Its index.
    pub index: u32,
    /// `completed`, `failed` or `cancelled`.
    pub status: RecordStatus,
    /// The error code when it failed.
    #[schema(value_type = Option<RecordErrorCode>)]
    pub error_code: Option<String>,
}

/// Query of `GET /v1/records/{id}/trace`.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct TraceQuery {
    /// Only this column's trace.
    pub column: Option<String>,
}

/// The traces of one record.
#[derive(Debug, Serialize, ToSchema)]
pub struct TraceResponse {
    /// The record.
    #[schema(value_type = String, format = Uuid)]
    pub record_id: RecordId,
    /// One entry per LLM column that kept a trace, by column name.
    pub traces: Vec<ColumnTrace>,
}

/// One LLM column's trace: DataDesigner's `{column}__trace` message list.
#[derive(Debug, Serialize, ToSchema)]
pub struct ColumnTrace {
    /// The column.
    pub column: String,
    /// Ordered messages: `{role, content: [blocks], reasoning_content?, tool_calls?, tool_call_id?}`.
    #[schema(value_type = Vec<Object>)]
    pub messages: Value,
}
