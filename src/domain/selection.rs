//! Record selection (a config's `record_selection`): the candidates of such a job, what became
//! of each, and the job's five counts. A job with it generates candidates until `num_records`
//! of them are accepted, or its candidate budget is spent.
//!
//! Which candidates are accepted is decided by index, not by arrival: the accepted records are
//! the first `num_records` candidates (by index) whose predicate held. Candidates are claimed
//! in index order and every claimed index gets a result, so that set is the same whatever the
//! replicas, workers, restarts or timing: a re-run with the same seed returns the same records.
//! Candidates past it that also passed (they were in flight when the target was reached) are
//! `trimmed` when the job finishes.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

pub use crate::domain::dataset::OnExhausted;

/// The job error code of a `record_selection` job that spent its candidate budget before
/// accepting `num_records`, with `on_exhausted: raise` (a macro: SQL statements embed it).
macro_rules! exhausted_code {
    () => {
        "record_selection_exhausted"
    };
}
pub(crate) use exhausted_code;

/// [`exhausted_code!`] as a constant.
pub const EXHAUSTED: &str = exhausted_code!();

/// What became of one candidate of a `record_selection` job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Selection {
    /// Its predicate was true and it is among the first `num_records` such candidates.
    Accepted,
    /// Its predicate was false.
    Rejected,
    /// Its predicate was null: the column was skipped, missing or not a boolean.
    NullPredicate,
    /// It failed to generate.
    FailedGeneration,
    /// Its predicate was true, but `num_records` candidates before it were accepted.
    Trimmed,
}

impl Selection {
    pub const ALL: [Self; 5] = [
        Self::Accepted,
        Self::Rejected,
        Self::NullPredicate,
        Self::FailedGeneration,
        Self::Trimmed,
    ];

    /// The stored and displayed form.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Accepted => "accepted",
            Self::Rejected => "rejected",
            Self::NullPredicate => "null_predicate",
            Self::FailedGeneration => "failed_generation",
            Self::Trimmed => "trimmed",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|v| v.as_str() == s)
    }

    /// The verdict on a completed candidate's predicate value: a boolean decides, anything
    /// else (null, absent, a string) is `null_predicate`.
    pub fn of_predicate(value: Option<&serde_json::Value>) -> Self {
        match value.and_then(serde_json::Value::as_bool) {
            Some(true) => Self::Accepted,
            Some(false) => Self::Rejected,
            None => Self::NullPredicate,
        }
    }
}

/// Which candidates of a `record_selection` job a listing shows: one verdict, or `all`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum SelectionFilter {
    Accepted,
    Rejected,
    NullPredicate,
    FailedGeneration,
    Trimmed,
    /// Every candidate.
    All,
}

impl SelectionFilter {
    /// The one verdict it keeps (`None`: all).
    pub fn verdict(self) -> Option<Selection> {
        match self {
            Self::Accepted => Some(Selection::Accepted),
            Self::Rejected => Some(Selection::Rejected),
            Self::NullPredicate => Some(Selection::NullPredicate),
            Self::FailedGeneration => Some(Selection::FailedGeneration),
            Self::Trimmed => Some(Selection::Trimmed),
            Self::All => None,
        }
    }
}

/// A job's record selection, as stored with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SelectionSpec {
    /// The most candidates the job generates.
    pub max_candidates: u32,
    pub on_exhausted: OnExhausted,
}

/// The five counts of a `record_selection` job; they add up to the candidates generated.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct SelectionCounts {
    /// Accepted records (at most the job's `num_records`).
    pub accepted: u64,
    pub rejected: u64,
    pub null_predicate: u64,
    pub failed_generation: u64,
    /// Passed after `num_records` were accepted (in flight when the target was reached).
    pub trimmed: u64,
    /// The accepted records asked for: the job's `num_records`.
    pub target: u64,
    /// The candidate budget, `record_selection.max_candidate_records`.
    pub max_candidate_records: u64,
}

impl SelectionCounts {
    /// From the job's stored counters: `passed` completed candidates whose predicate held
    /// (accepted and trimmed), `rejected` whose predicate was false, and its completed and
    /// failed rows.
    pub fn from_stored(
        target: u32,
        max_candidates: u32,
        passed: u64,
        rejected: u64,
        completed: u64,
        failed: u64,
    ) -> Self {
        let accepted = passed.min(u64::from(target));
        Self {
            accepted,
            rejected,
            null_predicate: completed.saturating_sub(passed + rejected),
            failed_generation: failed,
            trimmed: passed - accepted,
            target: u64::from(target),
            max_candidate_records: u64::from(max_candidates),
        }
    }

    /// Candidates generated (every one has a result).
    pub fn candidates(&self) -> u64 {
        self.accepted + self.rejected + self.null_predicate + self.failed_generation + self.trimmed
    }

    /// Accepted records still missing.
    pub fn missing(&self) -> u64 {
        self.target.saturating_sub(self.accepted)
    }

    /// Candidates the budget still allows, besides those generated and `in_progress`.
    pub fn budget_left(&self, in_progress: u64) -> u64 {
        self.max_candidate_records
            .saturating_sub(self.candidates() + in_progress)
    }

    /// The budget ran out before the target was met (meaningful once the job finished).
    pub fn exhausted(&self) -> bool {
        self.accepted < self.target
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stored_forms_round_trip() {
        for s in Selection::ALL {
            assert_eq!(Selection::parse(s.as_str()), Some(s));
        }
        assert_eq!(Selection::parse("kept"), None);
    }

    #[test]
    fn a_predicate_decides_only_by_a_boolean() {
        use serde_json::json;
        assert_eq!(
            Selection::of_predicate(Some(&json!(true))),
            Selection::Accepted
        );
        assert_eq!(
            Selection::of_predicate(Some(&json!(false))),
            Selection::Rejected
        );
        for v in [json!(null), json!("true"), json!(1)] {
            assert_eq!(Selection::of_predicate(Some(&v)), Selection::NullPredicate);
        }
        assert_eq!(Selection::of_predicate(None), Selection::NullPredicate);
    }

    #[test]
    fn the_five_counts_add_up_to_the_candidates() {
        // Target 10: 12 passed (2 trimmed), 30 rejected, 50 completed (8 null), 4 failed.
        let c = SelectionCounts::from_stored(10, 100, 12, 30, 50, 4);
        assert_eq!(
            (
                c.accepted,
                c.trimmed,
                c.rejected,
                c.null_predicate,
                c.failed_generation
            ),
            (10, 2, 30, 8, 4)
        );
        assert_eq!(c.candidates(), 54);
        assert!(!c.exhausted());
        assert_eq!(c.budget_left(6), 40);
        let c = SelectionCounts::from_stored(10, 20, 3, 17, 20, 0);
        assert!(c.exhausted());
        assert_eq!((c.missing(), c.budget_left(0)), (7, 0));
    }
}
