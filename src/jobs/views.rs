//! Reading jobs, records and traces for clients. A job summary (the job, its counts, first
//! errors and usage) is one store round trip, for one job as for a page of them; its column
//! list was stored at submit, so no plan is compiled to show it.

use std::collections::HashMap;

use serde_json::Value;

use crate::domain::dataset::TRACE_POSTFIX;
use crate::domain::job::{JobFilter, JobOrder, JobRow, JobSummary};
use crate::domain::record::{RecordRow, TraceRow};
use crate::domain::selection::{Selection, SelectionFilter};
use crate::domain::{JobId, RecordId, RecordStatus};
use crate::error::ApiError;
use crate::store::{JobSelect, RecordSelect};

use super::{FIRST_ERRORS, JobService};

/// Which records of a job a listing asks for: a status, a `record_selection` verdict, both or
/// neither.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RecordsOf {
    pub status: Option<RecordStatus>,
    pub selection: Option<SelectionFilter>,
}

/// A page of jobs or records.
#[derive(Debug)]
pub struct Page<T> {
    /// At most the page size.
    pub items: Vec<T>,
    /// More follow the last one.
    pub more: bool,
}

impl<T> Page<T> {
    /// A page of at most `limit` of `rows`, read with a limit of `limit + 1` to tell whether
    /// more follow.
    fn of(mut rows: Vec<T>, limit: u32) -> Self {
        let more = rows.len() > limit as usize;
        rows.truncate(limit as usize);
        Self { items: rows, more }
    }
}

impl JobService {
    /// This replica's model waits, into counts read from the store (bounded by the records in
    /// progress the store counts, which the two reads may disagree on for a moment).
    fn fill_activity(&self, summary: &mut JobSummary) {
        let waiting = self.activity.waiting_for_model(summary.job.id);
        summary.counts.waiting_for_model = waiting.min(summary.counts.in_progress);
    }

    /// A job visible to `owner` (`None`: any job), or `job_not_found`.
    pub async fn get(&self, id: JobId, owner: Option<&str>) -> Result<JobRow, ApiError> {
        self.store
            .get_job(id, owner)
            .await?
            .ok_or_else(|| ApiError::JobNotFound(id.to_string()))
    }

    /// The summary of a job visible to `owner`, or `job_not_found`.
    pub async fn summary(&self, id: JobId, owner: Option<&str>) -> Result<JobSummary, ApiError> {
        let mut found = self
            .store
            .job_summaries(JobSelect::One { id, owner }, FIRST_ERRORS)
            .await?;
        let Some(mut summary) = found.pop() else {
            return Err(ApiError::JobNotFound(id.to_string()));
        };
        self.fill_columns(&mut summary.job).await;
        self.fill_activity(&mut summary);
        Ok(summary)
    }

    /// Summaries of `owner`'s jobs (every job for `None`) that `filter` keeps, newest first,
    /// strictly older than `before`, at most `limit`.
    pub async fn jobs(
        &self,
        owner: Option<&str>,
        before: Option<JobId>,
        limit: u32,
        filter: &JobFilter,
    ) -> Result<Page<JobSummary>, ApiError> {
        let select = JobSelect::Page {
            owner,
            before,
            limit: limit + 1,
            filter,
        };
        let mut page = Page::of(self.store.job_summaries(select, FIRST_ERRORS).await?, limit);
        for s in &mut page.items {
            self.fill_activity(s);
            self.fill_columns(&mut s.job).await;
        }
        Ok(page)
    }

    /// Page `page` (from 0) of `size` summaries of `owner`'s jobs that `filter` keeps, in
    /// `order`: one statement, however far the page is. Says whether more follow.
    pub async fn numbered_jobs(
        &self,
        owner: Option<&str>,
        filter: &JobFilter,
        order: JobOrder,
        page: u32,
        size: u32,
    ) -> Result<Page<JobSummary>, ApiError> {
        let select = JobSelect::Numbered {
            owner,
            filter,
            order,
            offset: u64::from(page) * u64::from(size),
            limit: size + 1,
        };
        let mut page = Page::of(self.store.job_summaries(select, FIRST_ERRORS).await?, size);
        for s in &mut page.items {
            self.fill_activity(s);
            self.fill_columns(&mut s.job).await;
        }
        Ok(page)
    }

    /// A page of the records of a job visible to `owner`: by index, strictly after `after`,
    /// optionally of one status; with `traces`, each record's traces join its values as
    /// `{column}__trace`. A `record_selection` job lists its accepted records (with or without
    /// `status=completed`) unless a verdict is asked for (`selection`, which other jobs refuse:
    /// their records have none) or `status=failed`.
    pub async fn records(
        &self,
        id: JobId,
        owner: Option<&str>,
        after: Option<u32>,
        which: RecordsOf,
        limit: u32,
        traces: bool,
    ) -> Result<Page<RecordRow>, ApiError> {
        let job = self.get(id, owner).await?;
        let selection = match (job.selection, which.selection) {
            (None, None | Some(SelectionFilter::All)) => None,
            (None, Some(f)) => {
                return Err(ApiError::InvalidRequest(format!(
                    "selection: job {id} has no record_selection, so its records have no \
                     verdict to filter by ({:?} asked)",
                    f
                )));
            }
            // The dataset: its completed records are the accepted ones (`status=completed`
            // included, so the MCP tools and any client asking for completed records get the
            // dataset); `status=failed` lists the failed candidates.
            (Some(_), None) => match which.status {
                None | Some(RecordStatus::Completed) => Some(Selection::Accepted),
                Some(_) => None,
            },
            (Some(_), Some(f)) => f.verdict(),
        };
        let select = RecordSelect {
            status: which.status,
            selection,
        };
        let rows = self
            .store
            .list_records(id, after, select, limit + 1)
            .await?;
        let mut page = Page::of(rows, limit);
        if traces {
            self.attach_traces(&mut page.items).await?;
        }
        Ok(page)
    }

    /// A record of a job visible to `owner`, or `record_not_found`.
    pub async fn record(&self, id: RecordId, owner: Option<&str>) -> Result<RecordRow, ApiError> {
        self.store
            .get_record(id, owner)
            .await?
            .ok_or_else(|| ApiError::RecordNotFound(id.to_string()))
    }

    /// The traces of a record visible to `owner`, by column; only `column`'s when given
    /// (`trace_not_found` when it has none).
    pub async fn traces(
        &self,
        id: RecordId,
        owner: Option<&str>,
        column: Option<&str>,
    ) -> Result<Vec<TraceRow>, ApiError> {
        self.record(id, owner).await?;
        let rows = self.store.get_traces(id, column).await?;
        if let Some(column) = column
            && rows.is_empty()
        {
            return Err(ApiError::TraceNotFound(format!(
                "record {id} has no trace for column '{column}'"
            )));
        }
        Ok(rows)
    }

    /// One stored image of a record's `image` column: `(mime type, bytes)`, for the record's
    /// owner only (as the record itself).
    pub async fn media(
        &self,
        id: RecordId,
        owner: Option<&str>,
        column: &str,
        index: u32,
    ) -> Result<(String, Vec<u8>), ApiError> {
        self.record(id, owner).await?;
        self.store
            .get_media(id, column, index)
            .await?
            .ok_or_else(|| {
                ApiError::MediaNotFound(format!(
                    "record {id} has no image {index} in column '{column}'"
                ))
            })
    }

    /// Adds each record's traces to its values as `{column}__trace`.
    pub(super) async fn attach_traces(&self, rows: &mut [RecordRow]) -> Result<(), ApiError> {
        let ids: Vec<_> = rows.iter().map(|r| r.id).collect();
        let mut by_record: HashMap<_, Vec<_>> = HashMap::new();
        for t in self.store.traces_for(&ids).await? {
            by_record.entry(t.record_id).or_default().push(t);
        }
        for row in rows {
            let (Some(traces), Some(Value::Object(values))) =
                (by_record.remove(&row.id), row.values.as_mut())
            else {
                continue;
            };
            for t in traces {
                values.insert(format!("{}{TRACE_POSTFIX}", t.column), t.messages);
            }
        }
        Ok(())
    }

    /// The admission state, on this replica, of each model provider an active job's columns
    /// call (throttling, circuit, requests in flight): why a job may be slower than its
    /// `max_parallel_requests` say. Empty for a finished job.
    pub async fn provider_states(
        &self,
        job: &JobRow,
    ) -> std::collections::BTreeMap<String, crate::llm::ProviderAdmission> {
        if job.status.is_terminal() {
            return Default::default();
        }
        let Ok(compiled) = self.compiled(job).await else {
            return Default::default();
        };
        let providers: std::collections::BTreeSet<&str> = compiled
            .plan
            .model_aliases()
            .iter()
            .filter_map(|a| compiled.models.get(a).map(|m| m.provider.as_str()))
            .collect();
        providers
            .into_iter()
            .filter_map(|p| {
                let state = self.runner.llm().provider_state(p)?;
                Some((p.to_owned(), state))
            })
            .collect()
    }

    /// Jobs stored before their column list was kept get it from their plan (cached, or
    /// compiled from the stored config); a config that no longer compiles shows none.
    async fn fill_columns(&self, job: &mut JobRow) {
        if job.output_columns.is_none() {
            let columns = self
                .compiled(job)
                .await
                .map(|c| c.plan.output_columns().to_vec())
                .unwrap_or_default();
            job.output_columns = Some(columns);
        }
    }
}
