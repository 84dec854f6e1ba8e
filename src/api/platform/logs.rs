//! `GET .../jobs/create/{name}/logs`: a job's log, what `wait_until_done()` echoes and
//! `get_logs()` returns, paged as the platform pages it (`limit`, `page_cursor`, `tail`).
//!
//! The entries are the first door's ([`crate::api::data_designer::logs::log_lines`]): made from
//! the job's state, they only grow, which the client relies on (it shows the entries past
//! those it has seen, by position). Each `message` is a JSON object with `name`, `levelname`
//! and `message`, the shape the client parses. A cursor is the position of the page's first
//! entry, so it stays valid while the log grows.

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use serde_json::json;
use utoipa::{IntoParams, ToSchema};

use super::errors::PlatformErrorBody;
use super::views::job_named;
use crate::api::data_designer::logs::log_lines;
use crate::api::extract::{ApiPath, ApiQuery};
use crate::auth::Caller;
use crate::error::ApiError;
use crate::state::AppState;

/// Entries a page when the query names no `limit` (the platform's default).
const DEFAULT_LIMIT: usize = 100;
/// The most entries a page (the platform's bound on `limit` and `tail`).
const MAX_LIMIT: usize = 10_000;

/// Query of a job's log.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct LogsQuery {
    /// Entries a page, 1 to 10,000 (default 100).
    pub limit: Option<usize>,
    /// The `next_page` or `prev_page` of an earlier answer.
    pub page_cursor: Option<String>,
    /// The last this many entries, 1 to 10,000; not with `limit` or `page_cursor`.
    pub tail: Option<usize>,
}

/// A page of a job's log (`PlatformJobLogPage`).
#[derive(Debug, Serialize, ToSchema)]
pub struct PlatformLogPage {
    pub data: Vec<PlatformLogEntry>,
    /// Entries in the whole log now.
    pub total: usize,
    /// The cursor of the next page; null on the last.
    pub next_page: Option<String>,
    /// The cursor of the page before; null on the first.
    pub prev_page: Option<String>,
}

/// One entry of a job's log (`PlatformJobLog`).
#[derive(Debug, Serialize, ToSchema)]
pub struct PlatformLogEntry {
    /// RFC 3339: when the job last changed.
    #[schema(format = DateTime)]
    pub timestamp: String,
    /// The job's name.
    pub job: String,
    /// Always `data-designer`.
    pub job_step: &'static str,
    /// Always `generate`.
    pub job_task: &'static str,
    /// A JSON object as text: `{"name", "levelname", "message"}`.
    pub message: String,
}

/// The window of `total` entries a query asks for: `(start, end)`.
fn window(q: &LogsQuery, total: usize) -> Result<(usize, usize), ApiError> {
    let bounded = |name: &str, n: usize| {
        if (1..=MAX_LIMIT).contains(&n) {
            Ok(n)
        } else {
            Err(ApiError::InvalidRequest(format!(
                "query parameter '{name}': {n} is not from 1 to {MAX_LIMIT}"
            )))
        }
    };
    if let Some(tail) = q.tail {
        if q.limit.is_some() || q.page_cursor.is_some() {
            return Err(ApiError::InvalidRequest(
                "query parameter 'tail' cannot be combined with 'limit' or 'page_cursor'".into(),
            ));
        }
        let tail = bounded("tail", tail)?;
        return Ok((total.saturating_sub(tail), total));
    }
    let limit = bounded("limit", q.limit.unwrap_or(DEFAULT_LIMIT))?;
    let start = match &q.page_cursor {
        None => 0,
        Some(c) => c
            .parse::<usize>()
            .map_err(|_| ApiError::InvalidCursor(format!("'{c}' is not a cursor of this log")))?,
    };
    let start = start.min(total);
    Ok((start, (start + limit).min(total)))
}

/// A job's log
///
/// Entries that only grow while the job runs: submitted, each tenth of its records done, and
/// at the end a warning per failed record (the first few) and how it ended.
#[utoipa::path(get, path = "/apis/data-designer/v2/workspaces/{workspace}/jobs/create/{name}/logs",
    operation_id = "platform_job_logs", tag = "nemo-platform",
    params(("workspace" = String, Path, description = "Workspace"),
        ("name" = String, Path, description = "Job name"), LogsQuery),
    responses(
        (status = 200, description = "A page of the log", body = PlatformLogPage),
        (status = 400, description = "A cursor this log did not give (`invalid_cursor`)", body = PlatformErrorBody),
        (status = 404, description = "No such job in the workspace, or another key's (`job_not_found`)", body = PlatformErrorBody),
        (status = 422, description = "A malformed query or workspace (`invalid_request`)", body = PlatformErrorBody),
    ))]
pub async fn job_logs(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath((workspace, name)): ApiPath<(String, String)>,
    ApiQuery(q): ApiQuery<LogsQuery>,
) -> Result<Json<PlatformLogPage>, ApiError> {
    let s = job_named(&state, &caller, &workspace, &name).await?;
    let lines = log_lines(&s);
    let total = lines.len();
    let (start, end) = window(&q, total)?;
    let timestamp = s.job.updated_at.to_rfc3339();
    let job = s.job.name.clone().unwrap_or(name);
    let data = lines[start..end]
        .iter()
        .map(|(level, message)| PlatformLogEntry {
            timestamp: timestamp.clone(),
            job: job.clone(),
            job_step: "data-designer",
            job_task: "generate",
            message: json!({"name": "data_designer.synthgate", "levelname": level,
                "message": message})
            .to_string(),
        })
        .collect();
    // The page before starts a page's length (as asked) before this one.
    let asked = q.limit.unwrap_or(DEFAULT_LIMIT);
    Ok(Json(PlatformLogPage {
        data,
        total,
        next_page: (end < total).then(|| end.to_string()),
        prev_page: (start > 0 && q.tail.is_none()).then(|| start.saturating_sub(asked).to_string()),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(limit: Option<usize>, cursor: Option<&str>, tail: Option<usize>) -> LogsQuery {
        LogsQuery {
            limit,
            page_cursor: cursor.map(str::to_owned),
            tail,
        }
    }

    #[test]
    fn pages_follow_their_cursors() {
        assert_eq!(window(&q(None, None, None), 12).unwrap(), (0, 12));
        assert_eq!(window(&q(Some(5), None, None), 12).unwrap(), (0, 5));
        assert_eq!(window(&q(Some(5), Some("10"), None), 12).unwrap(), (10, 12));
        assert_eq!(window(&q(Some(5), Some("99"), None), 12).unwrap(), (12, 12));
        assert_eq!(window(&q(None, None, Some(3)), 12).unwrap(), (9, 12));
        assert_eq!(window(&q(None, None, Some(30)), 12).unwrap(), (0, 12));
        for bad in [
            q(Some(0), None, None),
            q(Some(1), None, Some(2)),
            q(None, None, Some(10_001)),
        ] {
            assert_eq!(window(&bad, 12).unwrap_err().code(), "invalid_request");
        }
        assert_eq!(
            window(&q(None, Some("x"), None), 12).unwrap_err().code(),
            "invalid_cursor"
        );
    }
}
