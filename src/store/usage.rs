//! Per-job counters the writer adds to in the transaction that writes the records: LLM usage
//! per model alias, tool use per column, and the records written per outcome.
//!
//! Usage is added by `complete_records`, in the transaction that writes the records, from the
//! results it writes: a job's usage is the sum over its stored results, exact after any crash.
//! (The `job_usage` migration's note that re-run requests are counted again predates this: the
//! requests of an attempt whose result is not stored are not counted; its re-run's are.)

pub use crate::domain::usage::UsageCounts;
use crate::domain::usage::{ToolOutcome, ToolUsage};

/// An increment of one job's usage of one model alias.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageDelta {
    /// The job.
    pub job_id: crate::domain::JobId,
    /// The model alias.
    pub model_alias: String,
    /// What to add.
    pub counts: UsageCounts,
}

/// The usage of written results summed per job and alias, in `(job, alias)` order: every
/// writer updates `job_usage` rows in the same order, so two batches never deadlock on them.
pub(crate) fn sum<'a>(
    written: impl IntoIterator<
        Item = (
            crate::domain::JobId,
            &'a std::collections::BTreeMap<String, UsageCounts>,
        ),
    >,
) -> Vec<UsageDelta> {
    let mut sums: std::collections::BTreeMap<(crate::domain::JobId, &str), UsageCounts> =
        Default::default();
    for (job_id, usage) in written {
        for (alias, counts) in usage {
            sums.entry((job_id, alias.as_str()))
                .or_default()
                .add(counts);
        }
    }
    sums.into_iter()
        .map(|((job_id, alias), counts)| UsageDelta {
            job_id,
            model_alias: alias.to_owned(),
            counts,
        })
        .collect()
}

/// Records written to one job, by outcome: what `job_record_counts` gains.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct RecordTally {
    pub completed: i64,
    pub failed: i64,
    /// Completed candidates of a `record_selection` job whose predicate was true.
    pub passed: i64,
    /// Completed candidates whose predicate was false.
    pub rejected: i64,
}

/// The written records counted per job (`true`: completed, with its selection verdict), in
/// job order, the order every writer updates `job_record_counts` rows in, as for [`sum`].
pub(crate) fn tally(
    written: impl IntoIterator<
        Item = (
            crate::domain::JobId,
            bool,
            Option<crate::domain::selection::Selection>,
        ),
    >,
) -> Vec<(crate::domain::JobId, RecordTally)> {
    use crate::domain::selection::Selection;
    let mut per_job: std::collections::BTreeMap<crate::domain::JobId, RecordTally> =
        Default::default();
    for (job_id, completed, selection) in written {
        let t = per_job.entry(job_id).or_default();
        if completed {
            t.completed += 1;
            match selection {
                Some(Selection::Accepted) => t.passed += 1,
                Some(Selection::Rejected) => t.rejected += 1,
                _ => {}
            }
        } else {
            t.failed += 1;
        }
    }
    per_job.into_iter().collect()
}

/// A job's token usage by model alias, the same statement on both backends.
pub(crate) async fn get<'e, DB, E>(
    exec: E,
    job_id: crate::domain::JobId,
) -> Result<std::collections::BTreeMap<String, UsageCounts>, super::StoreError>
where
    DB: sqlx::Database,
    E: sqlx::Executor<'e, Database = DB>,
    DB::Arguments: sqlx::IntoArguments<DB>,
    for<'q> uuid::Uuid: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    for<'r> (String, i64, i64, i64, i64, i64): sqlx::FromRow<'r, DB::Row>,
{
    let rows: Vec<(String, i64, i64, i64, i64, i64)> = sqlx::query_as(
        "select model_alias, requests, prompt_tokens, completion_tokens, cached_requests, \
                cost_nanos \
         from job_usage
         where job_id = $1 order by model_alias",
    )
    .bind(job_id.0)
    .fetch_all(exec)
    .await?;
    Ok(from_rows(rows))
}

/// Builds the per-alias (or per-column) map from `(key, requests, prompt, completion, cached,
/// cost)` rows (a negative count reads as 0).
pub(crate) fn from_rows(
    rows: Vec<(String, i64, i64, i64, i64, i64)>,
) -> std::collections::BTreeMap<String, UsageCounts> {
    let n = |x: i64| u64::try_from(x).unwrap_or(0);
    rows.into_iter()
        .map(|(alias, r, p, c, h, cost)| {
            let counts = UsageCounts {
                requests: n(r),
                prompt_tokens: n(p),
                completion_tokens: n(c),
                cached_requests: n(h),
                cost_nanos: n(cost),
            };
            (alias, counts)
        })
        .collect()
}

/// Counts as the databases' signed integers, saturating.
pub(crate) fn to_i64(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// The `outcome` of the `job_tool_usage` row that counts a column's tool-calling turns.
pub(crate) const TURNS: &str = "turns";

/// One `job_tool_usage` increment: (job, column, tool, outcome) and the count to add.
pub(crate) type ToolDelta<'a> = ((crate::domain::JobId, &'a str, &'a str, &'static str), i64);

/// The tool use of written results summed per row key, in key order (the order every writer
/// updates rows in, so two batches never deadlock on them). Zero counts are left out.
pub(crate) fn sum_tools<'a>(
    written: impl IntoIterator<
        Item = (
            crate::domain::JobId,
            &'a std::collections::BTreeMap<String, ToolUsage>,
        ),
    >,
) -> Vec<ToolDelta<'a>> {
    let mut sums: std::collections::BTreeMap<_, i64> = Default::default();
    for (job_id, columns) in written {
        for (column, u) in columns {
            if u.tool_turns > 0 {
                *sums
                    .entry((job_id, column.as_str(), "", TURNS))
                    .or_default() += to_i64(u.tool_turns);
            }
            for (tool, outcomes) in &u.tool_calls {
                for (outcome, n) in outcomes {
                    *sums
                        .entry((job_id, column.as_str(), tool.as_str(), outcome.as_str()))
                        .or_default() += to_i64(*n);
                }
            }
        }
    }
    sums.into_iter().filter(|(_, n)| *n > 0).collect()
}

/// Builds the per-column map from `(column, tool, outcome, n)` rows, shared by both backends.
/// Rows of an outcome this build does not know are skipped, not failed on.
pub(crate) fn tools_from_rows(
    rows: impl IntoIterator<Item = (String, String, String, i64)>,
) -> std::collections::BTreeMap<String, ToolUsage> {
    let mut out: std::collections::BTreeMap<String, ToolUsage> = Default::default();
    for (column, tool, outcome, n) in rows {
        let n = u64::try_from(n).unwrap_or(0);
        let u = out.entry(column).or_default();
        if outcome == TURNS {
            u.tool_turns += n;
        } else if let Some(o) = ToolOutcome::parse(&outcome) {
            *u.tool_calls.entry(tool).or_default().entry(o).or_default() += n;
        }
    }
    out
}
