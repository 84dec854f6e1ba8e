//! LLM usage per job and model alias: what the writer adds and what the job response shows.
//!
//! Usage is added by `complete_records`, in the transaction that writes the records, from the
//! results it writes: a job's usage is the sum over its stored results, exact after any crash.
//! (The `job_usage` migration's note that re-run requests are counted again predates this: the
//! requests of an attempt whose result is not stored are not counted; its re-run's are.)

pub use crate::domain::usage::UsageCounts;

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

/// Builds the per-alias map from `(alias, requests, prompt, completion)` rows; shared by both
/// backends, which store counts as signed integers.
pub(crate) fn from_rows(
    rows: Vec<(String, i64, i64, i64)>,
) -> std::collections::BTreeMap<String, UsageCounts> {
    let n = |x: i64| u64::try_from(x).unwrap_or(0);
    rows.into_iter()
        .map(|(alias, r, p, c)| {
            let counts = UsageCounts {
                requests: n(r),
                prompt_tokens: n(p),
                completion_tokens: n(c),
            };
            (alias, counts)
        })
        .collect()
}

/// Counts as the databases' signed integers, saturating.
pub(crate) fn to_i64(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}
