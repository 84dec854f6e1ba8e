//! Compiling the media columns: `embedding` (its target column and model alias) and `image`.

use super::super::columns::StepKind;
use super::super::media::EmbeddingStep;
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
        let column = self.columns[ci].name.clone();
        self.issues.extend(Aliases::check(
            &aliases.models,
            &e.model_alias,
            codes::UNKNOWN_MODEL_ALIAS,
            &column,
            "model_alias",
        ));
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

    pub(super) fn image(&mut self, ci: usize, _i: &ImageColumn) -> Option<StepKind> {
        let msg = "column_type 'image' is not served by synthgate yet";
        self.issue(codes::UNSUPPORTED_COLUMN_TYPE, ci, Some("column_type"), msg);
        None
    }
}
