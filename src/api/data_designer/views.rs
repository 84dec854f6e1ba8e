//! The Data Designer door's views of a job: its response bodies, typed as NVIDIA's client
//! models them (`nemo_microservices.types.data_designer`), so the published spec says what the
//! door answers and a client generated from it reads them; and how a job's fields map onto
//! them. The Data Designer fields a job was created with (project, namespace, description,
//! custom fields) are kept in its metadata under [`META`]; its name is the job's own.

use serde::Serialize;
use serde_json::{Map, Value, json};
use utoipa::ToSchema;

use super::jobs::DataDesignerJobSpec;
use crate::domain::JobStatus;
use crate::domain::job::JobSummary;

/// The key of the job metadata that holds the Data Designer job's own fields (its name is the
/// job's own, not kept here).
pub(in crate::api) const META: &str = "data_designer";
/// Keys under [`META`] that the list filters on.
pub(in crate::api) const PROJECT: &str = "project";
pub(in crate::api) const NAMESPACE: &str = "namespace";
/// What the client shows for a job without a name, project or namespace (a job submitted at
/// `/v1/jobs`, or one the client sent without them).
pub(in crate::api) const DEFAULT_NAME: &str = "nemo-data-designer-job";
pub(in crate::api) const DEFAULT_PROJECT: &str = "nemo-data-designer";
pub(in crate::api) const DEFAULT_NAMESPACE: &str = "default";

/// A job's status as the platform names it (`PlatformJobStatus`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum PlatformStatus {
    /// Queued.
    Pending,
    /// Running.
    Active,
    Cancelling,
    Cancelled,
    Completed,
    /// Failed.
    Error,
}

impl PlatformStatus {
    /// Every status, as the list's `filter[status]` takes them.
    pub(in crate::api) const NAMES: [&'static str; 6] = [
        "pending",
        "active",
        "cancelling",
        "cancelled",
        "completed",
        "error",
    ];

    pub(in crate::api) fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Active => "active",
            Self::Cancelling => "cancelling",
            Self::Cancelled => "cancelled",
            Self::Completed => "completed",
            Self::Error => "error",
        }
    }
}

/// The client's `DataDesignerJob`.
#[derive(Debug, Serialize, ToSchema)]
pub struct DataDesignerJob {
    /// The job's id (a UUID; the same job at `/v1/jobs/{id}`).
    pub id: String,
    pub name: String,
    pub project: String,
    pub namespace: String,
    pub description: Option<String>,
    /// What it was created with: `{num_records, config}`.
    pub spec: DataDesignerJobSpec,
    pub status: PlatformStatus,
    /// The records' progress (`num_records`, `completed`, `failed`, `in_progress`, `pending`)
    /// and `synthgate_status`; where they apply, `cached_requests`, `cost`, `max_cost`,
    /// `record_selection` and `providers` (see docs/data-designer-client.md).
    #[schema(value_type = Object)]
    pub status_details: Value,
    /// The job's error (`code`, `message`) and its first `failed_records`, when it has them.
    #[schema(value_type = Object)]
    pub error_details: Value,
    /// Always empty: a job belongs to the key that submitted it.
    #[schema(value_type = Object)]
    pub ownership: Value,
    /// As the client sent them.
    #[schema(value_type = Object)]
    pub custom_fields: Value,
    /// RFC 3339.
    #[schema(format = DateTime)]
    pub created_at: String,
    /// RFC 3339.
    #[schema(format = DateTime)]
    pub updated_at: String,
}

/// The client's `PlatformJobStatusResponse`.
#[derive(Debug, Serialize, ToSchema)]
pub struct DataDesignerJobStatus {
    pub job_id: String,
    pub status: PlatformStatus,
    /// As in [`DataDesignerJob`].
    #[schema(value_type = Object)]
    pub status_details: Value,
    /// As in [`DataDesignerJob`].
    #[schema(value_type = Object)]
    pub error_details: Value,
    /// Always empty: a job here is one step.
    #[schema(value_type = Vec<Object>)]
    pub steps: Vec<Value>,
}

/// A page of the client's job list (`DataDesignerJobsPage`).
#[derive(Debug, Serialize, ToSchema)]
pub struct DataDesignerJobList {
    /// Always `list`.
    pub object: &'static str,
    pub data: Vec<DataDesignerJob>,
    /// The order served (`-created_at` unless the query named another).
    pub sort: String,
    pub pagination: DataDesignerPagination,
}

/// Where a page of the job list sits.
#[derive(Debug, Serialize, ToSchema)]
pub struct DataDesignerPagination {
    /// The page asked for, from 1.
    pub page: u32,
    pub page_size: u32,
    /// Jobs on this page.
    pub current_page_size: usize,
    /// `page + 1` while more follow, else `page` (the total is not counted): the client's
    /// `list_jobs()` stops when it equals `page`.
    pub total_pages: u32,
}

/// Our status as the platform's `PlatformJobStatus`.
pub(in crate::api) fn platform_status(status: JobStatus) -> PlatformStatus {
    match status {
        JobStatus::Queued => PlatformStatus::Pending,
        JobStatus::Running => PlatformStatus::Active,
        JobStatus::Cancelling => PlatformStatus::Cancelling,
        JobStatus::Cancelled => PlatformStatus::Cancelled,
        JobStatus::Completed => PlatformStatus::Completed,
        JobStatus::Failed => PlatformStatus::Error,
    }
}

/// `status_details`: the records' progress, and our own status name; the calls answered by the
/// response cache, the cost and budget (with priced models); for a job with
/// `record_selection`, its five counts, and whether its budget ran out (a `return_partial` job
/// completes short of `num_records`: this says so).
pub(in crate::api) fn status_details(s: &JobSummary) -> Value {
    let mut details = json!({
        "num_records": s.job.num_records,
        "completed": s.counts.completed,
        "failed": s.counts.failed,
        "in_progress": s.counts.in_progress,
        "pending": s.counts.pending,
        "synthgate_status": s.job.status.as_str(),
    });
    let cached: u64 = s.usage.values().map(|u| u.cached_requests).sum();
    if cached > 0 {
        details["cached_requests"] = cached.into();
    }
    if let Some(cost) = crate::api::dto::job_cost(&s.usage) {
        details["cost"] = cost.into();
    }
    if let Some(max) = s.job.max_cost_nanos {
        details["max_cost"] = crate::domain::models::prices::from_nanos(max).into();
    }
    if let Some(sel) = &s.counts.selection {
        let mut v = serde_json::to_value(sel).unwrap_or_default();
        v["candidates"] = sel.candidates().into();
        v["exhausted"] = (s.job.status.is_terminal() && sel.exhausted()).into();
        details["record_selection"] = v;
    }
    details
}

/// `error_details`: the job's error, and the first failed records' errors.
pub(in crate::api) fn error_details(s: &JobSummary) -> Value {
    let job = &s.job;
    let mut error_details = Map::new();
    if let Some(e) = &job.error {
        error_details.insert("code".into(), e.code.clone().into());
        error_details.insert("message".into(), e.message.clone().into());
    }
    if !s.first_errors.is_empty() {
        let records: Vec<Value> = s
            .first_errors
            .iter()
            .map(|f| {
                json!({"record_id": f.id.to_string(), "index": f.index,
                    "code": f.error.code.as_str(), "column": f.error.column,
                    "message": f.error.message})
            })
            .collect();
        error_details.insert("failed_records".into(), records.into());
    }
    Value::Object(error_details)
}

/// The Data Designer fields a job was created with (`/v1` jobs have none).
fn meta(s: &JobSummary) -> Option<&Value> {
    s.job.metadata.as_ref().and_then(|m| m.get(META))
}

/// A job's `(name, project, namespace)`, the client's defaults where it has none.
fn names(s: &JobSummary) -> (String, String, String) {
    let field = |k: &str, default: &str| {
        meta(s)
            .and_then(|m| m.get(k))
            .and_then(Value::as_str)
            .unwrap_or(default)
            .to_owned()
    };
    (
        s.job
            .name
            .clone()
            .unwrap_or_else(|| DEFAULT_NAME.to_owned()),
        field(PROJECT, DEFAULT_PROJECT),
        field(NAMESPACE, DEFAULT_NAMESPACE),
    )
}

/// A job as the client's `DataDesignerJob`.
pub(in crate::api) fn job_view(s: &JobSummary) -> DataDesignerJob {
    let job = &s.job;
    let (name, project, namespace) = names(s);
    let field = |k: &str| meta(s).and_then(|m| m.get(k)).cloned();
    DataDesignerJob {
        id: job.id.to_string(),
        name,
        project,
        namespace,
        description: field("description").and_then(|d| d.as_str().map(str::to_owned)),
        spec: DataDesignerJobSpec {
            num_records: i64::from(job.num_records),
            config: job.config.clone(),
        },
        status: platform_status(job.status),
        status_details: status_details(s),
        error_details: error_details(s),
        ownership: json!({}),
        custom_fields: field("custom_fields").unwrap_or_else(|| json!({})),
        created_at: job.created_at.to_rfc3339(),
        updated_at: job.updated_at.to_rfc3339(),
    }
}
