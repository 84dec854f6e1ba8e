//! `synthgate jobs list|show|cancel|wait|delete`: the caller's jobs on the server.
//!
//! As for the other subcommands, stdout carries only data (the table, the job as JSON) and
//! everything else goes to stderr. Exit codes: 0 on success; 1 when a waited-for job ends
//! `failed` or `cancelled`; 2 when a request fails.

use std::process::ExitCode;

use reqwest::{Method, header};
use serde::Deserialize;

use super::client::{Api, REQUEST_TIMEOUT, RequestError, ServerArgs, report};
use super::events::JobView;
use super::terminal::{note, say, say_raw};
use super::{table, wait};

/// Arguments of `synthgate jobs`.
#[derive(Debug, Clone, clap::Args)]
pub struct JobsArgs {
    #[command(subcommand)]
    pub command: JobsCommand,
}

/// The `jobs` subcommands.
#[derive(Debug, Clone, clap::Subcommand)]
pub enum JobsCommand {
    /// List your jobs, newest first.
    List(JobListArgs),
    /// Print a job (status, counts, first errors, usage) as JSON.
    Show(JobIdArgs),
    /// Cancel a job: records not started are not run; those in flight finish.
    Cancel(JobIdArgs),
    /// Follow a job with a progress bar until it finishes; exit 0 only if it completed with at
    /// least one record that did not fail.
    Wait(JobIdArgs),
    /// Delete a finished job with its records, traces and usage.
    Delete(JobIdArgs),
}

/// Arguments of `synthgate jobs list`.
#[derive(Debug, Clone, clap::Args)]
pub struct JobListArgs {
    /// Only jobs of these statuses, comma-separated (queued, running, cancelling, completed,
    /// failed, cancelled).
    #[arg(long, value_name = "STATUS")]
    pub status: Option<String>,
    /// Only jobs of exactly this name.
    #[arg(long, value_name = "NAME")]
    pub name: Option<String>,
    /// Only jobs whose metadata has these keys and values, as a JSON object.
    #[arg(long, value_name = "JSON")]
    pub metadata: Option<String>,
    /// Only jobs created at or after this time (RFC 3339, or a date).
    #[arg(long, value_name = "TIME")]
    pub since: Option<String>,
    /// List at most this many.
    #[arg(long, value_name = "N", default_value_t = 50)]
    pub limit: usize,
    #[command(flatten)]
    pub server: ServerArgs,
}

/// Arguments of the `jobs` subcommands that name one job.
#[derive(Debug, Clone, clap::Args)]
pub struct JobIdArgs {
    /// The job id.
    pub id: String,
    #[command(flatten)]
    pub server: ServerArgs,
}

/// Runs a `jobs` subcommand.
pub async fn jobs(args: JobsArgs) -> anyhow::Result<ExitCode> {
    let outcome = match args.command {
        JobsCommand::List(a) => list(a).await,
        JobsCommand::Show(a) => show(a).await,
        JobsCommand::Cancel(a) => cancel(a).await,
        JobsCommand::Wait(a) => return Ok(wait_job(a).await.unwrap_or_else(|e| report(&e))),
        JobsCommand::Delete(a) => delete(a).await,
    };
    Ok(outcome.map_or_else(|e| report(&e), |()| ExitCode::SUCCESS))
}

/// One page of `GET /v1/jobs`.
#[derive(Debug, Deserialize)]
struct JobPage {
    jobs: Vec<JobView>,
    #[serde(default)]
    next_cursor: Option<String>,
}

/// The query of `GET /v1/jobs` for `args` (without the cursor).
fn list_query(args: &JobListArgs) -> Vec<(&'static str, String)> {
    let mut query = vec![("limit", args.limit.clamp(1, 1000).to_string())];
    let filters = [
        ("status", &args.status),
        ("name", &args.name),
        ("metadata", &args.metadata),
        ("created_after", &args.since),
    ];
    for (key, value) in filters {
        if let Some(value) = value {
            query.push((key, value.clone()));
        }
    }
    query
}

async fn list(args: JobListArgs) -> Result<(), RequestError> {
    let api = Api::new(&args.server)?;
    let mut all: Vec<JobView> = Vec::new();
    let mut cursor: Option<String> = None;
    while all.len() < args.limit {
        let mut query = list_query(&args);
        if let Some(cursor) = &cursor {
            query.push(("cursor", cursor.clone()));
        }
        let request = api
            .request(Method::GET, &["v1", "jobs"])
            .query(&query)
            .header(header::ACCEPT, "application/json")
            .timeout(REQUEST_TIMEOUT);
        let page: JobPage = api.send(request).await?.json().await?;
        all.extend(page.jobs);
        // A cursor that does not move would loop forever.
        match page.next_cursor {
            Some(next) if cursor.as_deref() != Some(next.as_str()) => cursor = Some(next),
            _ => break,
        }
    }
    all.truncate(args.limit);
    say_raw!("{}", job_table(&all));
    Ok(())
}

/// `jobs list`: id, name, status, progress, failures and creation time.
fn job_table(jobs: &[JobView]) -> String {
    let rows: Vec<[String; 6]> = jobs
        .iter()
        .map(|j| {
            [
                j.id.clone(),
                j.name.clone().unwrap_or_default(),
                j.status.clone(),
                format!("{}/{}", j.counts.finished(), j.counts.total),
                j.counts.failed.to_string(),
                j.created_at.clone(),
            ]
        })
        .collect();
    let header = ["ID", "NAME", "STATUS", "DONE", "FAILED", "CREATED"];
    table::render(header, &rows)
}

async fn show(args: JobIdArgs) -> Result<(), RequestError> {
    let api = Api::new(&args.server)?;
    let job: serde_json::Value = api.get_json(&["v1", "jobs", &args.id]).await?;
    let text = serde_json::to_string_pretty(&job).expect("a JSON value always serializes");
    say!("{text}");
    Ok(())
}

async fn cancel(args: JobIdArgs) -> Result<(), RequestError> {
    let api = Api::new(&args.server)?;
    let request = api
        .request(Method::POST, &["v1", "jobs", &args.id, "cancel"])
        .header(header::ACCEPT, "application/json")
        .timeout(REQUEST_TIMEOUT);
    let job: JobView = api.send(request).await?.json().await?;
    note!("job {} is {}", job.id, job.status);
    Ok(())
}

async fn wait_job(args: JobIdArgs) -> Result<ExitCode, RequestError> {
    let api = Api::new(&args.server)?;
    let job: JobView = api.get_json(&["v1", "jobs", &args.id]).await?;
    wait::wait_and_report(&api, &job).await
}

async fn delete(args: JobIdArgs) -> Result<(), RequestError> {
    let api = Api::new(&args.server)?;
    let request = api
        .request(Method::DELETE, &["v1", "jobs", &args.id])
        .timeout(REQUEST_TIMEOUT);
    api.send(request).await?;
    note!("deleted job {}", args.id);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filters_become_the_query() {
        let args = JobListArgs {
            status: Some("failed,cancelled".into()),
            name: Some("nightly".into()),
            metadata: None,
            since: Some("2026-11-01".into()),
            limit: 5000,
            server: ServerArgs {
                url: "http://x".into(),
                api_key: None,
            },
        };
        assert_eq!(
            list_query(&args),
            vec![
                ("limit", "1000".to_owned()),
                ("status", "failed,cancelled".to_owned()),
                ("name", "nightly".to_owned()),
                ("created_after", "2026-11-01".to_owned()),
            ]
        );
    }
}
