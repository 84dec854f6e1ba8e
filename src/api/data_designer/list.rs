//! `GET /v1/data-designer/jobs`: the key's Data Designer jobs, with the client's paging,
//! filters and search (`JobListParams`).

use axum::Json;
use axum::extract::State;
use chrono::{DateTime, Utc};
use serde::Deserialize;
use serde_json::{Value, json};
use utoipa::IntoParams;

use crate::api::extract::{self, ApiQuery};
use crate::auth::Caller;
use crate::domain::JobStatus;
use crate::domain::job::{JobFilter, JobSummary};
use crate::error::{ApiError, ErrorBody};
use crate::state::AppState;

use super::jobs::{job_view, names, platform_status};

/// Query of the job list: the client's `JobListParams`, as its query string writes them
/// (`filter[status]=active`, `search[name]=a,b`). An unknown parameter is refused.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct ListJobsQuery {
    /// From 1.
    pub page: Option<u32>,
    /// Default and most: `limits.max_page_size`.
    pub page_size: Option<u32>,
    /// Only `-created_at` (newest first, the default) is served.
    pub sort: Option<String>,
    /// Jobs of this status (`pending`, `active`, `cancelling`, `cancelled`, `completed`,
    /// `error`).
    #[serde(rename = "filter[status]")]
    pub filter_status: Option<String>,
    /// Jobs of exactly this name.
    #[serde(rename = "filter[name]")]
    pub filter_name: Option<String>,
    /// Jobs of exactly this project.
    #[serde(rename = "filter[project]")]
    pub filter_project: Option<String>,
    /// Jobs of exactly this namespace.
    #[serde(rename = "filter[namespace]")]
    pub filter_namespace: Option<String>,
    /// Created at or after (RFC 3339, or a date and time without offset, read as UTC).
    #[serde(rename = "filter[created_at][gte]")]
    pub created_gte: Option<String>,
    /// Created at or before.
    #[serde(rename = "filter[created_at][lte]")]
    pub created_lte: Option<String>,
    /// Updated at or after.
    #[serde(rename = "filter[updated_at][gte]")]
    pub updated_gte: Option<String>,
    /// Updated at or before.
    #[serde(rename = "filter[updated_at][lte]")]
    pub updated_lte: Option<String>,
    /// Comma-separated terms: jobs whose name contains one of them (case-insensitive).
    #[serde(rename = "search[name]")]
    pub search_name: Option<String>,
    /// Comma-separated terms: jobs whose project contains one of them (case-insensitive).
    #[serde(rename = "search[project]")]
    pub search_project: Option<String>,
}

/// Which jobs a list keeps, from its query.
struct ListFilter {
    status: Option<String>,
    name: Option<String>,
    project: Option<String>,
    namespace: Option<String>,
    created: (Option<DateTime<Utc>>, Option<DateTime<Utc>>),
    updated: (Option<DateTime<Utc>>, Option<DateTime<Utc>>),
    search_name: Vec<String>,
    search_project: Vec<String>,
}

impl ListFilter {
    fn from_query(q: &ListJobsQuery) -> Result<Self, ApiError> {
        const STATUSES: [&str; 6] = [
            "pending",
            "active",
            "cancelling",
            "cancelled",
            "completed",
            "error",
        ];
        if let Some(sort) = q.sort.as_deref().filter(|s| *s != "-created_at") {
            return Err(ApiError::InvalidRequest(format!(
                "query parameter 'sort': '{sort}' is not served; jobs are listed newest first \
                 ('-created_at')"
            )));
        }
        if let Some(status) = q.filter_status.as_deref().filter(|s| !STATUSES.contains(s)) {
            return Err(ApiError::InvalidRequest(format!(
                "query parameter 'filter[status]': '{status}' is not one of {}",
                STATUSES.join(", ")
            )));
        }
        let time = |name: &str, raw: &Option<String>| -> Result<Option<DateTime<Utc>>, ApiError> {
            raw.as_deref()
                .map(|r| extract::parse_time(name, r))
                .transpose()
        };
        let terms = |raw: &Option<String>| -> Vec<String> {
            raw.as_deref()
                .unwrap_or_default()
                .split(',')
                .map(|t| t.trim().to_lowercase())
                .filter(|t| !t.is_empty())
                .collect()
        };
        Ok(Self {
            status: q.filter_status.clone(),
            name: q.filter_name.clone(),
            project: q.filter_project.clone(),
            namespace: q.filter_namespace.clone(),
            created: (
                time("filter[created_at][gte]", &q.created_gte)?,
                time("filter[created_at][lte]", &q.created_lte)?,
            ),
            updated: (
                time("filter[updated_at][gte]", &q.updated_gte)?,
                time("filter[updated_at][lte]", &q.updated_lte)?,
            ),
            search_name: terms(&q.search_name),
            search_project: terms(&q.search_project),
        })
    }

    /// What of the filter the store applies itself: the status and the creation times (to
    /// the millisecond of the ids), so the walk below reads only jobs that may pass.
    /// [`Self::keeps`] still checks every job it reads.
    fn in_store(&self) -> JobFilter {
        let statuses = self
            .status
            .as_deref()
            .map(|st| {
                JobStatus::ALL
                    .into_iter()
                    .filter(|s| platform_status(*s) == st)
                    .collect()
            })
            .unwrap_or_default();
        JobFilter {
            statuses,
            created_after: self.created.0,
            created_before: self
                .created
                .1
                .map(|lte| lte + chrono::Duration::milliseconds(1)),
            ..JobFilter::default()
        }
    }

    fn keeps(&self, s: &JobSummary) -> bool {
        let job = &s.job;
        let (name, project, namespace) = names(s);
        let within =
            |t: DateTime<Utc>, (gte, lte): (Option<DateTime<Utc>>, Option<DateTime<Utc>>)| {
                gte.is_none_or(|g| t >= g) && lte.is_none_or(|l| t <= l)
            };
        let found = |field: &str, terms: &[String]| {
            terms.is_empty() || {
                let field = field.to_lowercase();
                terms.iter().any(|t| field.contains(t.as_str()))
            }
        };
        self.status
            .as_deref()
            .is_none_or(|st| st == platform_status(job.status))
            && self.name.as_deref().is_none_or(|n| n == name)
            && self.project.as_deref().is_none_or(|p| p == project)
            && self.namespace.as_deref().is_none_or(|n| n == namespace)
            && within(job.created_at, self.created)
            && within(job.updated_at, self.updated)
            && found(&name, &self.search_name)
            && found(&project, &self.search_project)
    }
}

/// List Data Designer jobs
///
/// The key's jobs that pass the filters, newest first, a page at a time. `pagination.page` is
/// the one asked for and `total_pages` is `page + 1` while more follow, else `page` (the
/// client's `list_jobs()` stops on their equality); the total is not counted.
#[utoipa::path(get, path = "/v1/data-designer/jobs", operation_id = "data_designer_list_jobs", tag = "data-designer",
    params(ListJobsQuery),
    responses(
        (status = 200, description = "A page of jobs", body = Object),
        (status = 422, description = "A page or page size of 0, an unknown parameter, a sort other than `-created_at`, a bad status or time (`invalid_request`)", body = ErrorBody),
    ))]
pub async fn list_jobs(
    State(state): State<AppState>,
    caller: Caller,
    ApiQuery(q): ApiQuery<ListJobsQuery>,
) -> Result<Json<Value>, ApiError> {
    let max = state.config.limits.max_page_size;
    let page = q.page.unwrap_or(1);
    let size = q.page_size.unwrap_or(max).min(max);
    if page == 0 || size == 0 {
        return Err(ApiError::InvalidRequest(
            "query parameters 'page' and 'page_size' start at 1".into(),
        ));
    }
    let filter = ListFilter::from_query(&q)?;
    // The jobs are walked newest first through our cursor pages, keeping those the filter
    // passes, up to the page asked for and one job past it (whether another page follows).
    // The total is not counted (that would read every job on every page).
    let skip = u64::from(page - 1) * u64::from(size);
    let mut kept = 0u64;
    let mut data = Vec::new();
    let mut more = false;
    let mut before = None;
    let in_store = filter.in_store();
    'walk: loop {
        let chunk = state
            .jobs
            .jobs(caller.owner(), before, max, &in_store)
            .await?;
        for s in &chunk.items {
            if !filter.keeps(s) {
                continue;
            }
            if kept >= skip + u64::from(size) {
                more = true;
                break 'walk;
            }
            if kept >= skip {
                data.push(job_view(s));
            }
            kept += 1;
        }
        match chunk.items.last() {
            Some(last) if chunk.more => before = Some(last.job.id),
            _ => break,
        }
    }
    Ok(Json(json!({
        "object": "list",
        "data": data,
        "sort": "-created_at",
        "pagination": {
            "page": page,
            "page_size": size,
            "current_page_size": data.len(),
            "total_pages": if more { page + 1 } else { page },
        },
    })))
}
