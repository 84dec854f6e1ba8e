//! Previews: a few records of a config generated in the request, with their traces, and
//! nothing stored, for trying a config before submitting it as a job.

use futures::StreamExt as _;
use futures::stream::FuturesUnordered;
use tokio_util::sync::CancellationToken;

use crate::auth::Caller;
use crate::datasets::seed_cache::SeedReadError;
use crate::domain::dataset::DatasetConfig;
use crate::domain::record::{RecordError, RecordErrorCode, RecordOutcome};
use crate::domain::selection::{Selection, SelectionCounts};
use crate::error::ApiError;
use crate::generate::Generated;
use crate::mcp::CallScope;

use super::analysis::{DatasetProfile, Profiler};
use super::runner::Sessions;
use super::submit::Validated;
use super::{JobService, SubmitRequest, check_caller};

/// The most records one preview may ask for.
pub const MAX_PREVIEW_RECORDS: u32 = 10;

/// The most candidates a preview of a `record_selection` config generates (fewer when the
/// config's own budget is smaller): a preview answers in the request, so its budget is small.
pub const MAX_PREVIEW_CANDIDATES: u32 = 100;

/// A preview's records.
#[derive(Debug)]
pub struct Preview {
    /// Columns of a dataset row, in order.
    pub columns: Vec<String>,
    /// The seed used (given or drawn), to reproduce the preview as a job.
    pub seed: u64,
    /// The records, by index.
    pub records: Vec<Generated>,
    /// The statistics of the completed records, when asked for
    /// ([`PreparedPreview::with_profile`]; also `None` if the config no longer parses, which
    /// validation rules out).
    pub profile: Option<DatasetProfile>,
    /// With `record_selection`: the five counts of the candidates it generated (`records` are
    /// the accepted ones).
    pub selection: Option<SelectionCounts>,
}

/// A preview request that passed every check ([`JobService::prepare_preview`]).
#[derive(Debug)]
pub struct PreparedPreview {
    validated: Validated,
    /// Whether [`JobService::run_preview`] profiles the records.
    profile: bool,
}

impl PreparedPreview {
    /// The preview also profiles its records (`Preview::profile`): the Data Designer door
    /// sends the profile; `/v1/preview` and `/mcp` do not, and skip the work.
    pub fn with_profile(mut self) -> Self {
        self.profile = true;
        self
    }

    /// Records it will generate.
    pub fn num_records(&self) -> u32 {
        self.validated.num_records
    }

    /// Columns of a dataset row, in order.
    pub fn columns(&self) -> &[String] {
        self.validated.compiled.plan.output_columns()
    }
}

impl JobService {
    /// Validates `req` as a submit would (with at most [`MAX_PREVIEW_RECORDS`] records), then
    /// generates its records concurrently, as the worker pool would. Dropping the future
    /// (the client went away) cancels the LLM calls in flight and closes the preview's MCP
    /// sessions.
    pub async fn preview(&self, req: SubmitRequest, caller: &Caller) -> Result<Preview, ApiError> {
        self.preview_reporting(req, caller, &|_, _| {}).await
    }

    /// [`preview`](Self::preview), calling `on_record(done, total)` as each record finishes
    /// (the MCP tool turns these into progress notifications).
    pub async fn preview_reporting(
        &self,
        req: SubmitRequest,
        caller: &Caller,
        on_record: &(dyn Fn(u32, u32) + Sync),
    ) -> Result<Preview, ApiError> {
        let prepared = self.prepare_preview(req, caller).await?;
        self.run_preview(prepared, on_record).await
    }

    /// Everything a preview checks before it generates anything: the request as a submit
    /// would check it, the caller's aliases, the tools' providers, a probe of the plan. A
    /// streamed preview answers these with an error status before its stream starts.
    pub async fn prepare_preview(
        &self,
        req: SubmitRequest,
        caller: &Caller,
    ) -> Result<PreparedPreview, ApiError> {
        let seed = self.resolve_seed(&req.config, caller.owner()).await?;
        let v = self
            .cpu
            .run(|| self.validate(&req, MAX_PREVIEW_RECORDS, seed.as_ref()))
            .await?;
        check_caller(&v.compiled, caller)?;
        self.check_tools(&v.compiled).await?;
        self.probe(&v.compiled).await?;
        Ok(PreparedPreview {
            validated: v,
            profile: false,
        })
    }

    /// Generates a prepared preview's records, calling `on_record(done, total)` as each
    /// finishes.
    pub async fn run_preview(
        &self,
        prepared: PreparedPreview,
        on_record: &(dyn Fn(u32, u32) + Sync),
    ) -> Result<Preview, ApiError> {
        let (v, profile) = (prepared.validated, prepared.profile);
        // One scope per preview: its `per_job` MCP sessions live as long as the request.
        let preview_id = uuid::Uuid::new_v4();
        let _sessions = Sessions::Job(&self.tools, preview_id);
        let cancel = CancellationToken::new();
        let _cancel_on_drop = cancel.clone().drop_guard();
        let (mut records, selection): (Vec<Generated>, _) = match v.selection {
            None => {
                let all = 0..v.num_records;
                let records = self
                    .preview_records(&v, all, preview_id, &cancel, &|done| {
                        on_record(done, v.num_records)
                    })
                    .await?;
                (records.into_iter().map(|(_, g)| g).collect(), None)
            }
            Some(spec) => {
                let budget = spec.max_candidates.min(MAX_PREVIEW_CANDIDATES);
                let (records, counts) = self
                    .select_preview(&v, budget, preview_id, &cancel, on_record)
                    .await?;
                (records, Some(counts))
            }
        };
        records.iter_mut().for_each(inline_media);
        let profile = profile
            .then(|| DatasetConfig::parse(&v.config).ok())
            .flatten()
            .map(|config| {
                let mut profiler = Profiler::new(&config, &v.compiled.plan);
                for r in &records {
                    if let RecordOutcome::Completed { values } = &r.outcome {
                        profiler.add(Some(values));
                    }
                }
                profiler.finish(u64::from(v.num_records))
            });
        Ok(Preview {
            columns: v.compiled.plan.output_columns().to_vec(),
            seed: v.seed,
            records,
            profile,
            selection,
        })
    }

    /// Generates records `indexes` of a preview concurrently, as the worker pool would;
    /// returns them by index, calling `on_record(done)` as each finishes.
    async fn preview_records(
        &self,
        v: &Validated,
        indexes: std::ops::Range<u32>,
        preview_id: uuid::Uuid,
        cancel: &CancellationToken,
        on_record: &(dyn Fn(u32) + Sync),
    ) -> Result<Vec<(u32, Generated)>, ApiError> {
        let mut runs: FuturesUnordered<_> = indexes
            .map(|i| {
                let scope = CallScope {
                    job: preview_id,
                    record: uuid::Uuid::new_v4(),
                };
                async move {
                    let chat = self.cached_chat(self.runner.llm(), &v.compiled);
                    let run = self.runner.run(
                        &v.compiled,
                        i,
                        scope,
                        &chat,
                        &crate::generate::Unpooled,
                        cancel,
                    );
                    (i, run.await)
                }
            })
            .collect();
        // Finished in any order, kept by index.
        let mut finished = Vec::with_capacity(runs.len());
        while let Some((i, run)) = runs.next().await {
            finished.push((i, run));
            on_record(finished.len() as u32);
        }
        finished.sort_by_key(|(i, _)| *i);
        let mut records = Vec::with_capacity(finished.len());
        for (i, run) in finished {
            records.push((
                i,
                match run {
                    Ok(generated) => generated,
                    // The database failed: the preview as a whole is unavailable.
                    Err(SeedReadError::Store { source, .. }) => return Err(source.into()),
                    Err(e) => Generated::failed(RecordError::new(
                        RecordErrorCode::SeedReadFailed,
                        None,
                        e.to_string(),
                    )),
                },
            ));
        }
        Ok(records)
    }

    /// A `record_selection` preview: candidates in waves of as many as accepted records are
    /// still missing (as the queue carves them), until `num_records` passed or `budget`
    /// candidates were generated. Returns the first `num_records` that passed, by index, and
    /// the five counts. A preview whose budget ran out returns what it accepted, whatever
    /// `on_exhausted` says: its counts show it, and a preview is for tuning the predicate.
    async fn select_preview(
        &self,
        v: &Validated,
        budget: u32,
        preview_id: uuid::Uuid,
        cancel: &CancellationToken,
        on_record: &(dyn Fn(u32, u32) + Sync),
    ) -> Result<(Vec<Generated>, SelectionCounts), ApiError> {
        let target = v.num_records;
        let mut candidates: Vec<(u32, Generated)> = Vec::new();
        let mut next = 0;
        let passed = |c: &[(u32, Generated)]| {
            c.iter()
                .filter(|(_, g)| g.selection == Some(Selection::Accepted))
                .count() as u32
        };
        loop {
            let have = passed(&candidates);
            on_record(have.min(target), target);
            if have >= target || next >= budget {
                break;
            }
            let wave = (target - have).min(budget - next);
            let more = self
                .preview_records(v, next..next + wave, preview_id, cancel, &|_| {})
                .await?;
            candidates.extend(more);
            next += wave;
        }
        let count = |s: Selection| {
            candidates
                .iter()
                .filter(|(_, g)| g.outcome.is_completed() && g.selection == Some(s))
                .count() as u64
        };
        let completed = candidates
            .iter()
            .filter(|(_, g)| g.outcome.is_completed())
            .count() as u64;
        let counts = SelectionCounts::from_stored(
            target,
            budget,
            count(Selection::Accepted),
            count(Selection::Rejected),
            completed,
            candidates.len() as u64 - completed,
        );
        let accepted = candidates
            .into_iter()
            .filter(|(_, g)| g.outcome.is_completed() && g.selection == Some(Selection::Accepted))
            .take(target as usize)
            .map(|(_, g)| g)
            .collect();
        Ok((accepted, counts))
    }
}

/// A preview stores nothing, so a reference to a stored image would lead nowhere: an image
/// column's cell holds its images as base64 strings instead, as DataDesigner's preview
/// (dataframe mode) does. A preview has at most 10 records, so this stays small.
fn inline_media(g: &mut Generated) {
    use base64::Engine as _;
    let values = match &mut g.outcome {
        RecordOutcome::Completed { values } => values,
        RecordOutcome::Failed {
            values: Some(values),
            ..
        } => values,
        RecordOutcome::Failed { values: None, .. } => return,
    };
    for m in std::mem::take(&mut g.media) {
        let b64 = base64::engine::general_purpose::STANDARD.encode(&m.data);
        if let Some(serde_json::Value::Array(cells)) = values.get_mut(&m.column)
            && let Some(cell) = cells.get_mut(m.index as usize)
        {
            *cell = b64.into();
        }
    }
}
