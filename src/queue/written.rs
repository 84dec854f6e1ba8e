//! What a batch write stores of each result: the columns a finished record writes, and one
//! result per record and one trace per column when a batch names them twice.

use serde_json::Value;

use super::RecordResult;
use crate::domain::RecordStatus;
use crate::domain::record::{RecordError, RecordOutcome, Trace};
use crate::domain::selection::Selection;

/// The columns a finished record writes, flattened from its result.
pub(crate) struct Written<'a> {
    pub status: RecordStatus,
    pub values: Option<&'a Value>,
    pub error: Option<&'a RecordError>,
    /// A completed candidate's verdict; a failed one has none (it is `failed_generation`).
    pub selection: Option<Selection>,
}

impl<'a> From<&'a RecordResult> for Written<'a> {
    fn from(r: &'a RecordResult) -> Self {
        match &r.outcome {
            RecordOutcome::Completed { values } => Written {
                status: RecordStatus::Completed,
                values: Some(values),
                error: None,
                selection: r.selection.filter(|s| {
                    matches!(
                        s,
                        Selection::Accepted | Selection::Rejected | Selection::NullPredicate
                    )
                }),
            },
            RecordOutcome::Failed { values, error } => Written {
                status: RecordStatus::Failed,
                values: values.as_ref(),
                error: Some(error),
                selection: None,
            },
        }
    }
}

/// The results to write, first occurrence per record (job and index): a batch should not
/// name a record twice, and if it does the first result wins on both backends.
pub(crate) fn dedup_results(results: &[RecordResult]) -> Vec<&RecordResult> {
    let mut seen = std::collections::HashSet::new();
    results
        .iter()
        .filter(|r| seen.insert((r.job_id, r.index)))
        .collect()
}

/// A record's traces with one entry per column, the last one winning.
pub(crate) fn dedup_traces(traces: &[Trace]) -> Vec<&Trace> {
    let mut out: Vec<&Trace> = Vec::with_capacity(traces.len());
    for t in traces {
        match out.iter_mut().find(|o| o.column == t.column) {
            Some(slot) => *slot = t,
            None => out.push(t),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duplicate_trace_columns_keep_the_last() {
        let t = |c: &str, m: i32| Trace {
            column: c.to_owned(),
            messages: serde_json::json!([m]),
        };
        let traces = [t("a", 1), t("b", 2), t("a", 3)];
        let kept: Vec<_> = dedup_traces(&traces)
            .into_iter()
            .map(|t| (t.column.as_str(), t.messages.clone()))
            .collect();
        assert_eq!(
            kept,
            [("a", serde_json::json!([3])), ("b", serde_json::json!([2]))]
        );
    }
}
