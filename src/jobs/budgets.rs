//! The two budgets a job may carry, checked at submit: a cost budget (`max_cost`) and the
//! candidate budget of its `record_selection`.

use std::collections::HashMap;

use crate::domain::dataset::{ConfigIssue, codes};
use crate::domain::models::ModelConfig;
use crate::domain::selection::SelectionSpec;
use crate::error::ApiError;
use crate::generate::Plan;

/// A cost budget must be a positive number, and some model the job uses must have prices (a
/// budget over unpriced models could never be reached).
pub(super) fn check_budget(
    max_cost: Option<f64>,
    plan: &Plan,
    models: &HashMap<String, ModelConfig>,
) -> Result<Option<u64>, ApiError> {
    let Some(max) = max_cost else {
        return Ok(None);
    };
    if !(max.is_finite() && max > 0.0) {
        return Err(ApiError::InvalidRequest(format!(
            "max_cost: must be a number above 0, got {max}"
        )));
    }
    let priced = plan
        .model_aliases()
        .iter()
        .any(|a| models.get(a).is_some_and(|m| m.prices.is_some()));
    if !priced {
        return Err(ApiError::InvalidRequest(
            "max_cost: no model this job uses has prices on this server (model_configs[].prices), \
             so its cost is not counted and the budget could never stop it"
                .into(),
        ));
    }
    Ok(Some(crate::domain::models::prices::to_nanos(max)))
}

/// A `record_selection` budget must allow `num_records` candidates (it is a number of
/// candidates, each accepted record one of them) and stay within what one job may generate:
/// the budget, not `num_records`, bounds the job's work.
pub(super) fn selection_budget_issue(
    selection: Option<SelectionSpec>,
    num_records: u32,
    max: u32,
) -> Option<ConfigIssue> {
    let budget = selection?.max_candidates;
    let field = "record_selection.max_candidate_records";
    let msg = if budget < num_records {
        format!(
            "{budget} candidates cannot give num_records ({num_records}) accepted records; \
             it must be at least num_records"
        )
    } else if budget > max {
        format!("{budget} is over the {max} records one job may generate on this server")
    } else {
        return None;
    };
    Some(ConfigIssue::at_field(
        codes::INVALID_RECORD_SELECTION,
        field,
        msg,
    ))
}
