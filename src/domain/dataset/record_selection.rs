//! `record_selection`: generate candidates until `num_records` of them pass a boolean
//! predicate column (DataDesigner issue #790, the shape of its proposal #817), instead of
//! generating `num_records` and filtering by hand.

use serde::Deserialize;
use serde_json::Value;

use super::ConfigIssue;
use super::issues::{codes, deserialize_at, join_path};

/// What a job does when its candidate budget runs out before `num_records` were accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OnExhausted {
    /// The job fails with `record_selection_exhausted`; every candidate stays readable.
    Raise,
    /// The job completes with the records it accepted, and its status says so.
    ReturnPartial,
}

impl OnExhausted {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Raise => "raise",
            Self::ReturnPartial => "return_partial",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "raise" => Some(Self::Raise),
            "return_partial" => Some(Self::ReturnPartial),
            _ => None,
        }
    }
}

/// A parsed `record_selection` block. With it, a job's `num_records` counts accepted records.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RecordSelection {
    /// The column whose value decides: `true` keeps the record, `false` rejects it, null
    /// (skipped, missing) is `null_predicate`. A validation column decides by `is_valid`.
    pub predicate_column: String,
    /// The most candidates generated to find them: the job's hard budget. Required, as in the
    /// proposal: an open-ended loop over a predicate that never holds would spend without end.
    pub max_candidate_records: u32,
    /// `raise` (the default, as upstream: a short dataset is not silently accepted) or
    /// `return_partial`.
    #[serde(default = "raise")]
    pub on_exhausted: OnExhausted,
}

fn raise() -> OnExhausted {
    OnExhausted::Raise
}

/// Parses `record_selection` (absent or `null`: none).
pub(crate) fn parse_record_selection(
    value: Option<&Value>,
    issues: &mut Vec<ConfigIssue>,
) -> Option<RecordSelection> {
    let value = value.filter(|v| !v.is_null())?;
    match deserialize_at::<RecordSelection>(value) {
        Ok(s) if s.max_candidate_records == 0 => {
            issues.push(ConfigIssue::at_field(
                codes::INVALID_RECORD_SELECTION,
                "record_selection.max_candidate_records",
                "must be at least 1",
            ));
            None
        }
        Ok(s) => Some(s),
        Err((path, message)) => {
            issues.push(ConfigIssue::at_field(
                codes::INVALID_RECORD_SELECTION,
                &join_path("record_selection", &path),
                message,
            ));
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn parse(v: Value) -> (Option<RecordSelection>, Vec<ConfigIssue>) {
        let mut issues = Vec::new();
        (parse_record_selection(Some(&v), &mut issues), issues)
    }

    #[test]
    fn parses_with_the_default_of_raise() {
        let (s, issues) = parse(json!({"predicate_column": "keep", "max_candidate_records": 50}));
        assert!(issues.is_empty(), "{issues:?}");
        let s = s.unwrap();
        assert_eq!(s.on_exhausted, OnExhausted::Raise);
        assert_eq!(s.max_candidate_records, 50);
        let (s, _) = parse(
            json!({"predicate_column": "keep", "max_candidate_records": 5,
                                  "on_exhausted": "return_partial"}),
        );
        assert_eq!(s.unwrap().on_exhausted, OnExhausted::ReturnPartial);
        assert_eq!(parse(Value::Null).0, None);
    }

    #[test]
    fn bad_shapes_name_the_field() {
        for (v, field) in [
            (
                json!({"max_candidate_records": 5}),
                "record_selection.predicate_column",
            ),
            (
                json!({"predicate_column": "k"}),
                "record_selection.max_candidate_records",
            ),
            (
                json!({"predicate_column": "k", "max_candidate_records": -1}),
                "record_selection.max_candidate_records",
            ),
            (
                json!({"predicate_column": "k", "max_candidate_records": 0}),
                "record_selection.max_candidate_records",
            ),
            (
                json!({"predicate_column": "k", "max_candidate_records": 5, "on_exhausted": "skip"}),
                "record_selection.on_exhausted",
            ),
            (
                json!({"predicate_column": "k", "max_candidate_records": 5, "extra": 1}),
                "record_selection",
            ),
            (json!("keep"), "record_selection"),
        ] {
            let (s, issues) = parse(v.clone());
            assert!(s.is_none(), "{v}");
            assert_eq!(issues.len(), 1, "{v}: {issues:?}");
            assert_eq!(issues[0].code, codes::INVALID_RECORD_SELECTION);
            assert!(
                issues[0].field.as_deref().unwrap().starts_with(field),
                "{v}: {issues:?}"
            );
        }
    }
}
