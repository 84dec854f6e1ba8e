//! `GET /v1/data-designer/jobs`: the key's Data Designer jobs, with the client's paging,
//! filters and search (`JobListParams`).

use axum::Json;
use axum::extract::State;
use chrono::{DateTime, Utc};
use serde::Deserialize;

use utoipa::IntoParams;

use crate::api::extract::{self, ApiQuery};
use crate::auth::Caller;
use crate::domain::JobStatus;
use crate::domain::job::{JobFilter, JobOrder, TextField, TextMatch, TextTest};
use crate::error::{ApiError, ErrorBody};
use crate::state::AppState;

use super::views::{
    DEFAULT_NAME, DEFAULT_NAMESPACE, DEFAULT_PROJECT, DataDesignerJobList, DataDesignerPagination,
    META, NAMESPACE, PROJECT, PlatformStatus, job_view, platform_status,
};

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
    /// `created_at`, `-created_at` (newest first, the default), `updated_at` or `-updated_at`.
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

/// The job filter and order of a list query: everything the client may ask is applied by the
/// store, in the one statement that reads the page.
fn selection(q: &ListJobsQuery) -> Result<(JobFilter, JobOrder), ApiError> {
    let order = match q.sort.as_deref() {
        None => JobOrder::CreatedDesc,
        Some(sort) => JobOrder::parse(sort).ok_or_else(|| {
            ApiError::InvalidRequest(format!(
                "query parameter 'sort': '{sort}' is not one of {}",
                JobOrder::NAMES.join(", ")
            ))
        })?,
    };
    if let Some(status) = q
        .filter_status
        .as_deref()
        .filter(|s| !PlatformStatus::NAMES.contains(s))
    {
        return Err(ApiError::InvalidRequest(format!(
            "query parameter 'filter[status]': '{status}' is not one of {}",
            PlatformStatus::NAMES.join(", ")
        )));
    }
    let time = |name: &str, raw: &Option<String>| -> Result<Option<DateTime<Utc>>, ApiError> {
        raw.as_deref()
            .map(|r| extract::parse_time(name, r))
            .transpose()
    };
    let statuses = q
        .filter_status
        .as_deref()
        .map(|st| {
            JobStatus::ALL
                .into_iter()
                .filter(|s| platform_status(*s).as_str() == st)
                .collect()
        })
        .unwrap_or_default();
    let mut text = Vec::new();
    let fields = [
        (TextField::Name, DEFAULT_NAME),
        (field(PROJECT), DEFAULT_PROJECT),
        (field(NAMESPACE), DEFAULT_NAMESPACE),
    ];
    let [name, project, namespace] = fields;
    for ((field, default), exact) in [
        (name.clone(), &q.filter_name),
        (project.clone(), &q.filter_project),
        (namespace, &q.filter_namespace),
    ] {
        if let Some(exact) = exact {
            text.push(TextMatch {
                field,
                when_missing: default.to_owned(),
                test: TextTest::Equals(exact.clone()),
            });
        }
    }
    for ((field, default), terms) in [(name, &q.search_name), (project, &q.search_project)] {
        let terms = terms_of(terms);
        if !terms.is_empty() {
            text.push(TextMatch {
                field,
                when_missing: default.to_owned(),
                test: TextTest::ContainsAny(terms),
            });
        }
    }
    let filter = JobFilter {
        statuses,
        created_from: time("filter[created_at][gte]", &q.created_gte)?,
        created_to: time("filter[created_at][lte]", &q.created_lte)?,
        updated_from: time("filter[updated_at][gte]", &q.updated_gte)?,
        updated_to: time("filter[updated_at][lte]", &q.updated_lte)?,
        text,
        ..JobFilter::default()
    };
    Ok((filter, order))
}

/// A field of the door's own metadata.
fn field(key: &str) -> TextField {
    TextField::Metadata(vec![META.to_owned(), key.to_owned()])
}

/// The comma-separated terms of a search, trimmed, empty ones dropped.
fn terms_of(raw: &Option<String>) -> Vec<String> {
    raw.as_deref()
        .unwrap_or_default()
        .split(',')
        .map(|t| t.trim().to_owned())
        .filter(|t| !t.is_empty())
        .collect()
}

/// List Data Designer jobs
///
/// The key's jobs that pass the filters, in the order `sort` names (newest first by default), a
/// page at a time: one query a page, filters and order applied by the database.
/// `pagination.page` is the one asked for and `total_pages` is `page + 1` while more follow,
/// else `page` (the client's `list_jobs()` stops on their equality); the total is not counted.
#[utoipa::path(get, path = "/v1/data-designer/jobs", operation_id = "data_designer_list_jobs", tag = "data-designer",
    params(ListJobsQuery),
    responses(
        (status = 200, description = "A page of jobs", body = DataDesignerJobList),
        (status = 422, description = "A page or page size of 0, an unknown parameter, a sort other than `created_at`, `updated_at` and their `-` forms, a bad status or time (`invalid_request`)", body = ErrorBody),
    ))]
pub async fn list_jobs(
    State(state): State<AppState>,
    caller: Caller,
    ApiQuery(q): ApiQuery<ListJobsQuery>,
) -> Result<Json<DataDesignerJobList>, ApiError> {
    let max = state.config.limits.max_page_size;
    let page = q.page.unwrap_or(1);
    let size = q.page_size.unwrap_or(max).min(max);
    if page == 0 || size == 0 {
        return Err(ApiError::InvalidRequest(
            "query parameters 'page' and 'page_size' start at 1".into(),
        ));
    }
    let (filter, order) = selection(&q)?;
    let listed = state
        .jobs
        .numbered_jobs(caller.owner(), &filter, order, page - 1, size)
        .await?;
    let data: Vec<_> = listed.items.iter().map(job_view).collect();
    Ok(Json(DataDesignerJobList {
        object: "list",
        pagination: DataDesignerPagination {
            page,
            page_size: size,
            current_page_size: data.len(),
            total_pages: if listed.more { page + 1 } else { page },
        },
        data,
        sort: q.sort.unwrap_or_else(|| "-created_at".into()),
    }))
}
