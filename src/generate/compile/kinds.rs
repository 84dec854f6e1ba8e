//! Compiling the type-specific parts of columns: seed-dataset, sampler and LLM columns.

use std::collections::HashMap;

use super::super::columns::StepKind;
use super::super::samplers::{SamplerIssues, compile_convert, compile_dist, param_references};
use super::super::seed;
use super::super::validate::Aliases;
use super::{ColumnParts, Compiler};
use crate::domain::dataset::{
    ColumnConfig, ConfigIssue, DatasetConfig, LlmColumn, SamplerColumn, codes,
};
use crate::generate::PeopleSource;
use crate::generate::llm::LlmStep;

impl Compiler<'_> {
    pub(super) fn seed_column(
        &mut self,
        col: &ColumnConfig,
        config: &DatasetConfig,
        rows: Option<&seed::SeedRows>,
    ) -> Option<StepKind> {
        let problem = match (&config.seed_config, rows) {
            (None, _) => Some("seed-dataset columns need a seed_config".to_owned()),
            (Some(_), Some(rows)) if !rows.keys().contains(&col.name) => Some(format!(
                "the seed {} no field '{}'; fields: {}",
                if rows.is_stored() {
                    "dataset has"
                } else {
                    "rows have"
                },
                col.name,
                rows.keys().join(", ")
            )),
            _ => None,
        };
        if let Some(msg) = problem {
            self.issues.push(ConfigIssue::in_column(
                codes::INVALID_SEED_CONFIG,
                &col.name,
                None,
                msg,
            ));
        }
        Some(StepKind::Seed {
            field: col.name.clone(),
        })
    }

    pub(super) fn sampler(
        &mut self,
        ci: usize,
        s: &SamplerColumn,
        by_name: &HashMap<&str, &ColumnConfig>,
        people: &PeopleSource,
        p: &mut ColumnParts,
    ) -> Option<StepKind> {
        let mut fields = vec![("params".to_owned(), &s.params)];
        let mut conditions = Vec::new();
        for (cond, params) in &s.conditional_params {
            let field = format!("conditional_params.{cond}");
            // DataDesigner renders `{{ condition }}` and compares the text with `True`.
            conditions.push(self.template(ci, &field, &format!("{{{{ {cond} }}}}"), p, false));
            fields.push((field, params));
        }
        for (field, params) in &fields {
            if let Some((key, name)) = param_references(params) {
                self.resolve(ci, &format!("{field}.{key}"), name, &mut p.deps);
            }
        }
        let column = self.columns[ci].name.clone();
        let mut issues = SamplerIssues {
            column: &column,
            out: &mut self.issues,
            people,
        };
        let mut dists = Vec::with_capacity(fields.len());
        for (field, params) in &fields {
            dists.push(compile_dist(
                field,
                params,
                &self.slots,
                by_name,
                &mut issues,
            ));
        }
        let convert = compile_convert(s.sampler_type, s.convert_to.as_deref(), &mut issues);
        let mut dists = dists.into_iter();
        let base = dists.next().flatten();
        let conditional: Option<Vec<_>> = conditions
            .into_iter()
            .zip(dists)
            .map(|(t, d)| Some((t?, d?)))
            .collect();
        Some(StepKind::Sampler {
            base: base?,
            conditional: conditional?,
            convert: convert?,
            constraints: Vec::new(),
        })
    }

    pub(super) fn llm(
        &mut self,
        ci: usize,
        l: &LlmColumn,
        aliases: &Aliases,
        p: &mut ColumnParts,
    ) -> Option<StepKind> {
        let column = self.columns[ci].name.clone();
        let model = Aliases::check(
            &aliases.models,
            &l.model_alias,
            codes::UNKNOWN_MODEL_ALIAS,
            &column,
            "model_alias",
        );
        let tool = l.tool_alias.as_deref().and_then(|t| {
            Aliases::check(
                &aliases.tools,
                t,
                codes::UNKNOWN_TOOL_ALIAS,
                &column,
                "tool_alias",
            )
        });
        self.issues.extend(model.into_iter().chain(tool));
        let prompt = self.template(ci, "prompt", &l.prompt, p, true);
        // An empty source means no system message, as in DataDesigner (which renders only a
        // non-empty template); the empty-render guard is for templates that print nothing
        // because a field they read is missing.
        let system = l
            .system_prompt
            .as_ref()
            .filter(|system| !system.is_empty())
            .map(|system| self.template(ci, "system_prompt", system, p, true));
        for (i, m) in l.multi_modal_context.iter().flatten().enumerate() {
            let field = format!("multi_modal_context[{i}].column_name");
            if let Some(slot) = self.resolve(ci, &field, &m.column_name, &mut p.deps) {
                let producer_slot = self.column_slot[self.producer[slot]];
                if !p.required.contains(&producer_slot) {
                    p.required.push(producer_slot);
                }
            }
        }
        // A template that failed to compile was reported above; the plan is rejected anyway.
        let prompt = prompt?;
        let system = match system {
            Some(s) => Some(s?),
            None => None,
        };
        match LlmStep::new(l.clone(), prompt, system) {
            Ok(step) => Some(StepKind::Llm(Box::new(step))),
            Err((field, msg)) => {
                self.issue(codes::INVALID_CONFIG, ci, Some(&field), msg);
                None
            }
        }
    }
}
