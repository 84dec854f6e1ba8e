//! A `record_selection` predicate: which column decides, checked at compile time to be
//! boolean-valued, and the verdict it gives a generated record.

use std::collections::HashMap;

use crate::domain::dataset::codes::INVALID_RECORD_SELECTION;
use crate::domain::dataset::{
    ColumnConfig, ColumnKind, ConfigIssue, ExprDtype, RecordSelection, SamplerParams,
};
use crate::domain::selection::Selection;

use super::columns::RecordState;

/// The column a selection job's verdicts read, as a record slot.
#[derive(Debug, Clone)]
pub(crate) struct Predicate {
    slot: usize,
    /// A validation column decides by this field of its value (`is_valid`).
    field: Option<&'static str>,
}

/// How a column kind may be a predicate: `Some(field)` where its value's `field` is read,
/// `Some(None)` where the value itself is a boolean, `None` where it is not boolean-valued.
fn boolean_valued(col: &ColumnConfig) -> Option<Option<&'static str>> {
    match &col.kind {
        ColumnKind::Expression(e) if e.dtype == ExprDtype::Bool => Some(None),
        ColumnKind::Validation(_) => Some(Some("is_valid")),
        ColumnKind::Sampler(s) => {
            let bools = |p: &SamplerParams| matches!(p, SamplerParams::Category(c) if c.values.iter().all(|v| v.0.is_boolean()));
            let all = bools(&s.params) && s.conditional_params.iter().all(|(_, p)| bools(p));
            (all && s.convert_to.is_none()).then_some(None)
        }
        _ => None,
    }
}

/// Checks `selection` against the config's columns and returns its predicate; issues name
/// `record_selection.predicate_column`.
pub(crate) fn compile(
    selection: Option<&RecordSelection>,
    columns: &[&ColumnConfig],
    slots: &HashMap<String, usize>,
    issues: &mut Vec<ConfigIssue>,
) -> Option<Predicate> {
    let selection = selection?;
    let name = selection.predicate_column.as_str();
    let field = "record_selection.predicate_column";
    let Some(col) = columns.iter().find(|c| c.name == name) else {
        let msg = format!("names column '{name}', which the config does not define");
        issues.push(ConfigIssue::at_field(INVALID_RECORD_SELECTION, field, msg));
        return None;
    };
    let Some(read) = boolean_valued(col) else {
        let msg = format!(
            "column '{name}' is not boolean-valued; a predicate is an expression column with \
             dtype: bool (e.g. expr: \"{{{{ score >= 4 }}}}\"), a validation column (its \
             is_valid decides) or a category sampler of true/false values"
        );
        issues.push(ConfigIssue::at_field(INVALID_RECORD_SELECTION, field, msg));
        return None;
    };
    Some(Predicate {
        slot: *slots.get(name)?,
        field: read,
    })
}

impl Predicate {
    /// The verdict on a completed record: its predicate's boolean, else `null_predicate`
    /// (the column was skipped, or its value is not a boolean).
    pub(crate) fn judge(&self, rec: &RecordState<'_>) -> Selection {
        if !rec.set[self.slot] {
            return Selection::NullPredicate;
        }
        let value = &rec.values[self.slot];
        Selection::of_predicate(match self.field {
            Some(f) => value.get(f),
            None => Some(value),
        })
    }
}
