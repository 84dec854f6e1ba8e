//! Compiling the media columns: `embedding` (its target column and model alias) and `image`
//! (its prompt template, model alias and image context columns).

use super::super::columns::StepKind;
use super::super::llm::media::{EmbeddingStep, ImageStep};
use super::super::validate::Aliases;
use super::{ColumnParts, Compiler};
use crate::domain::dataset::{EmbeddingColumn, ImageColumn, codes};

impl Compiler<'_> {
    pub(super) fn embedding(
        &mut self,
        ci: usize,
        e: &EmbeddingColumn,
        aliases: &Aliases,
        p: &mut ColumnParts,
    ) -> Option<StepKind> {
        self.check_model_alias(ci, &e.model_alias, aliases);
        // The target is a data dependency: a skipped target skips the embedding.
        let slot = self.resolve(ci, "target_column", &e.target_column, &mut p.deps)?;
        let producer_slot = self.column_slot[self.producer[slot]];
        if !p.required.contains(&producer_slot) {
            p.required.push(producer_slot);
        }
        Some(StepKind::Embedding(EmbeddingStep {
            model_alias: e.model_alias.clone(),
            target_slot: slot,
        }))
    }

    pub(super) fn image(
        &mut self,
        ci: usize,
        i: &ImageColumn,
        aliases: &Aliases,
        p: &mut ColumnParts,
    ) -> Option<StepKind> {
        self.check_model_alias(ci, &i.model_alias, aliases);
        let prompt = self.template(ci, "prompt", &i.prompt, p, true);
        for (k, m) in i.multi_modal_context.iter().flatten().enumerate() {
            let field = format!("multi_modal_context[{k}].column_name");
            if let Some(slot) = self.resolve(ci, &field, &m.column_name, &mut p.deps) {
                let producer_slot = self.column_slot[self.producer[slot]];
                if !p.required.contains(&producer_slot) {
                    p.required.push(producer_slot);
                }
            }
        }
        Some(StepKind::Image(ImageStep {
            model_alias: i.model_alias.clone(),
            prompt: prompt?,
            contexts: i.multi_modal_context.clone().unwrap_or_default(),
        }))
    }

    /// Reports a `model_alias` defined neither in the job nor on the server.
    fn check_model_alias(&mut self, ci: usize, alias: &str, aliases: &Aliases) {
        let column = self.columns[ci].name.clone();
        self.issues.extend(Aliases::check(
            &aliases.models,
            alias,
            codes::UNKNOWN_MODEL_ALIAS,
            &column,
            "model_alias",
        ));
    }
}
