//! A batch write of results, written once for both backends: the fence (only results whose
//! chunk the writer still holds, and within its range as it now is, are written), the result rows (an index written before keeps
//! its first result), the chunks' written counts (a chunk whose records are all written goes),
//! the new rows' traces and media, and the usage of exactly the new rows, all in one
//! transaction, so a crash or a retried batch counts nothing twice.
//!
//! Each backend says the steps in its own SQL ([`CompleteSteps`]): multi-row inserts in parts
//! on SQLite, `unnest` arrays on Postgres, whose fence also locks the held chunks in key order.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap, HashSet};

use uuid::Uuid;

use super::chunks::to_count;
use super::written::{dedup_results, dedup_traces};
use super::{ChunkKey, RecordResult, StoreError, storable};
use crate::domain::media::Media;
use crate::domain::record::Trace;
use crate::domain::{JobId, RecordId};
use crate::store::usage::{self, ToolDelta, UsageDelta};

/// The statements of one batch write, on the backend's open transaction, for one writer
/// (the lease owner the implementation holds).
pub(crate) trait CompleteSteps {
    /// Of `keys` (sorted, without duplicates), the chunks this writer still holds, as
    /// `(job_id, start_idx, end_idx)`; on a backend with row locks, locked until the commit,
    /// in key order.
    async fn held(&mut self, keys: &[ChunkKey]) -> Result<Vec<(Uuid, i64, i64)>, StoreError>;

    /// Inserts a row for each result whose index has none; returns the new rows' ids.
    async fn insert_records(&mut self, results: &[&RecordResult]) -> Result<Vec<Uuid>, StoreError>;

    /// Adds each count to its chunk's written records, and deletes the chunks all of whose
    /// records are now written.
    async fn count_written(
        &mut self,
        per_chunk: &BTreeMap<ChunkKey, i64>,
    ) -> Result<(), StoreError>;

    /// Inserts the traces of new rows.
    async fn insert_traces(&mut self, traces: &[(RecordId, &Trace)]) -> Result<(), StoreError>;

    /// Inserts the images of a new row (one that exists already is kept).
    async fn insert_media(&mut self, record: RecordId, media: &[Media]) -> Result<(), StoreError>;

    /// Adds the new rows' LLM usage (by alias, then by column), tool calls and
    /// completed/failed counts to their jobs.
    async fn add_usage(
        &mut self,
        deltas: &[UsageDelta],
        columns: &[UsageDelta],
        tools: &[ToolDelta<'_>],
        tally: &[(JobId, usage::RecordTally)],
    ) -> Result<(), StoreError>;
}

/// The results worth writing: one per record id, made storable (see [`storable`]), and the
/// chunks they belong to, sorted. Empty when there is nothing to write: no transaction needed.
pub(crate) fn prepare(results: &[RecordResult]) -> (Vec<Cow<'_, RecordResult>>, Vec<ChunkKey>) {
    let results: Vec<Cow<'_, RecordResult>> = dedup_results(results)
        .into_iter()
        .map(storable::storable)
        .collect();
    let mut keys: Vec<ChunkKey> = results.iter().map(|r| r.chunk).collect();
    keys.sort_unstable();
    keys.dedup();
    (results, keys)
}

/// Writes `results` (from [`prepare`]) through `steps`; returns the ids written, in the order
/// of `results`. The caller commits.
pub(crate) async fn complete<S: CompleteSteps>(
    steps: &mut S,
    results: &[Cow<'_, RecordResult>],
    keys: &[ChunkKey],
) -> Result<Vec<RecordId>, StoreError> {
    // Each held chunk's end as it is now: a claim that took a chunk over may have cut it (the
    // rest given back as a chunk of its own), and the owner is the replica, so results of the
    // lease before the cut still pass the owner check. Only those inside the chunk as it now
    // is are its own: one past the cut, counted here, would make the chunk go before its own
    // records are written, and they would never be.
    let held: HashMap<ChunkKey, u32> = steps
        .held(keys)
        .await?
        .into_iter()
        .map(|(job, start, end)| {
            let key = ChunkKey {
                job_id: JobId(job),
                start: to_count(start),
            };
            (key, to_count(end))
        })
        .collect();
    let fenced: Vec<&RecordResult> = results
        .iter()
        .map(|r| r.as_ref())
        .filter(|r| held.get(&r.chunk).is_some_and(|&end| r.index < end))
        .collect();
    if fenced.is_empty() {
        return Ok(Vec::new());
    }
    let written: HashSet<Uuid> = steps.insert_records(&fenced).await?.into_iter().collect();
    let new: Vec<&RecordResult> = fenced
        .into_iter()
        .filter(|r| written.contains(&r.id.0))
        .collect();
    if new.is_empty() {
        return Ok(Vec::new());
    }
    let mut per_chunk: BTreeMap<ChunkKey, i64> = BTreeMap::new();
    for r in &new {
        *per_chunk.entry(r.chunk).or_default() += 1;
    }
    steps.count_written(&per_chunk).await?;
    // Traces and media of the new rows (a new row has none yet).
    let traces: Vec<(RecordId, &Trace)> = new
        .iter()
        .flat_map(|r| dedup_traces(&r.traces).into_iter().map(|t| (r.id, t)))
        .collect();
    if !traces.is_empty() {
        steps.insert_traces(&traces).await?;
    }
    for r in new.iter().filter(|r| !r.media.is_empty()) {
        steps.insert_media(r.id, &r.media).await?;
    }
    // Usage of the written results only, in their transaction: exact whatever crashes, and a
    // retried batch whose first commit did land counts nothing twice.
    let deltas = usage::sum(new.iter().map(|r| (r.job_id, &r.usage)));
    let columns = usage::sum(new.iter().map(|r| (r.job_id, &r.column_usage)));
    let tools = usage::sum_tools(new.iter().map(|r| (r.job_id, &r.tool_usage)));
    let tally = usage::tally(new.iter().map(|r| {
        let w = super::written::Written::from(*r);
        (r.job_id, r.outcome.is_completed(), w.selection)
    }));
    steps.add_usage(&deltas, &columns, &tools, &tally).await?;
    Ok(results
        .iter()
        .filter(|r| written.contains(&r.id.0))
        .map(|r| r.id)
        .collect())
}
