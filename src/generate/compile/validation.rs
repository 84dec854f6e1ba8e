//! Compiling validation columns: resolving the target columns, and checking that this server
//! can run the validator (ruff for Python, the allow list for remote endpoints).

use std::sync::Arc;

use super::super::columns::StepKind;
use super::super::validation::{Unservable, ValidationStep, ValidatorEnv};
use super::{ColumnParts, Compiler};
use crate::domain::dataset::{ValidationColumn, Validator, codes};

impl Compiler<'_> {
    pub(super) fn validation(
        &mut self,
        ci: usize,
        v: &ValidationColumn,
        env: &Arc<ValidatorEnv>,
        p: &mut ColumnParts,
    ) -> Option<StepKind> {
        let mut targets = Vec::with_capacity(v.target_columns.len());
        for (i, name) in v.target_columns.iter().enumerate() {
            let field = format!("target_columns[{i}]");
            if let Some(slot) = self.resolve(ci, &field, name, &mut p.deps) {
                // A skipped target skips the validation (DataDesigner's required columns).
                let producer_slot = self.column_slot[self.producer[slot]];
                if !p.required.contains(&producer_slot) {
                    p.required.push(producer_slot);
                }
                targets.push((name.clone(), slot));
            }
        }
        if targets.len() != v.target_columns.len() {
            return None;
        }
        match ValidationStep::new(v, targets, env) {
            Ok(step) => Some(StepKind::Validation(Box::new(step))),
            Err(Unservable::Ruff(why)) => {
                let msg = format!(
                    "Python code validators run ruff, which this server cannot run ({why}); \
                     the operator sets validators.ruff_path"
                );
                self.issue(
                    codes::CODE_VALIDATOR_UNAVAILABLE,
                    ci,
                    Some("validator_params.code_lang"),
                    msg,
                );
                None
            }
            Err(Unservable::Endpoint) => {
                let url = match &v.validator {
                    Validator::Remote(r) => r.endpoint_url.as_str(),
                    Validator::Code(_) => "",
                };
                let msg = format!(
                    "'{url}' is not an allowed remote validator endpoint; the server's \
                     validators.remote_endpoints lists the endpoints jobs may use"
                );
                self.issue(
                    codes::REMOTE_VALIDATOR_NOT_ALLOWED,
                    ci,
                    Some("validator_params.endpoint_url"),
                    msg,
                );
                None
            }
        }
    }
}
