//! This door's views of a job, typed as NVIDIA's platform models them
//! (`nemo_platform_plugin.jobs.schemas`), and how a job is found: by workspace and name.
//!
//! A job's fields are the first door's ([`crate::api::data_designer::views`]): the workspace
//! is kept where that door keeps its namespace, so both doors show one job alike.

use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;

use crate::api::data_designer::jobs::DataDesignerJobSpec;
use crate::api::data_designer::views::{
    DEFAULT_NAMESPACE, META, NAMESPACE, PlatformStatus, job_view,
};
use crate::auth::Caller;
use crate::domain::job::{JobFilter, JobOrder, JobSummary, TextField, TextMatch, TextTest};
use crate::error::ApiError;
use crate::state::AppState;

/// The most characters of a workspace or job name.
const MAX_NAME: usize = 63;

/// A job as the platform's job response (`CreateJob` in its spec).
#[derive(Debug, Serialize, ToSchema)]
pub struct PlatformJob {
    /// The job's id (a UUID; the same job at `/v1/jobs/{id}`).
    pub id: String,
    /// Its name in the workspace: how this door addresses it.
    pub name: String,
    pub workspace: String,
    pub project: Option<String>,
    pub description: Option<String>,
    /// What it was created with: `{num_records, config}`.
    pub spec: DataDesignerJobSpec,
    pub status: PlatformStatus,
    /// As the first door's `status_details` (see docs/data-designer-client.md).
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

/// The platform's `PlatformJobStatusResponse`.
#[derive(Debug, Serialize, ToSchema)]
pub struct PlatformJobStatus {
    pub id: String,
    pub name: String,
    pub status: PlatformStatus,
    /// As in [`PlatformJob`].
    #[schema(value_type = Object)]
    pub status_details: Value,
    /// As in [`PlatformJob`].
    #[schema(value_type = Object)]
    pub error_details: Value,
    /// Always empty: a job here is one step.
    #[schema(value_type = Vec<Object>)]
    pub steps: Vec<Value>,
    /// RFC 3339.
    #[schema(format = DateTime)]
    pub created_at: String,
    /// RFC 3339.
    #[schema(format = DateTime)]
    pub updated_at: String,
}

/// A job as this door shows it.
pub(super) fn platform_job(s: &JobSummary) -> PlatformJob {
    let v = job_view(s);
    PlatformJob {
        id: v.id,
        name: v.name,
        workspace: v.namespace,
        project: Some(v.project),
        description: v.description,
        spec: v.spec,
        status: v.status,
        status_details: v.status_details,
        error_details: v.error_details,
        ownership: v.ownership,
        custom_fields: v.custom_fields,
        created_at: v.created_at,
        updated_at: v.updated_at,
    }
}

/// A job's status as this door shows it.
pub(super) fn platform_status_view(s: &JobSummary) -> PlatformJobStatus {
    let v = platform_job(s);
    PlatformJobStatus {
        id: v.id,
        name: v.name,
        status: v.status,
        status_details: v.status_details,
        error_details: v.error_details,
        steps: Vec::new(),
        created_at: v.created_at,
        updated_at: v.updated_at,
    }
}

/// Checks a workspace or job name from a path or body: 1 to 63 characters, ASCII letters,
/// digits and `-_.@+`, starting with a letter or digit (the platform's names are a subset).
pub(super) fn check_name(what: &str, name: &str) -> Result<(), ApiError> {
    let ok = !name.is_empty()
        && name.len() <= MAX_NAME
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.@+".contains(c));
    if ok {
        Ok(())
    } else {
        Err(ApiError::InvalidRequest(format!(
            "{what} '{name}': a name is 1 to {MAX_NAME} ASCII letters, digits and '-_.@+', \
             starting with a letter or digit"
        )))
    }
}

/// The filter that selects the jobs of `workspace`.
pub(super) fn in_workspace(workspace: &str) -> TextMatch {
    TextMatch {
        field: TextField::Metadata(vec![META.to_owned(), NAMESPACE.to_owned()]),
        when_missing: DEFAULT_NAMESPACE.to_owned(),
        test: TextTest::Equals(workspace.to_owned()),
    }
}

/// The caller's job named `name` in `workspace` (the newest, should a `/v1` job share the name);
/// `job_not_found` when there is none.
pub(super) async fn job_named(
    state: &AppState,
    caller: &Caller,
    workspace: &str,
    name: &str,
) -> Result<JobSummary, ApiError> {
    check_name("workspace", workspace)?;
    let filter = JobFilter {
        name: Some(name.to_owned()),
        text: vec![in_workspace(workspace)],
        ..JobFilter::default()
    };
    let page = state
        .jobs
        .numbered_jobs(caller.owner(), &filter, JobOrder::CreatedDesc, 0, 1)
        .await?;
    page.items
        .into_iter()
        .next()
        .ok_or_else(|| ApiError::JobNotFound(format!("'{name}' in workspace '{workspace}'")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_url_safe() {
        for ok in [
            "default",
            "team-a",
            "data-designer-1a2b3c4d",
            "a",
            "x.y_z@1+2",
        ] {
            assert!(check_name("workspace", ok).is_ok(), "{ok}");
        }
        for bad in ["", "-", "-a", "a/b", "a b", "é", &"a".repeat(64), "a%2Fb"] {
            let e = check_name("workspace", bad).unwrap_err();
            assert_eq!(e.code(), "invalid_request", "{bad}");
        }
    }
}
