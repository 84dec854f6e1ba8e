//! The media column types, `embedding` and `image`: typed model and parser
//! (`EmbeddingColumnConfig`, `ImageColumnConfig`).

use serde::Deserialize;
use serde_json::Value;

use super::columns::ColumnIssues;
use super::llm_column::{MultiModalContext, check_multi_modal};

/// `EmbeddingColumnConfig`: embeds the text of another column.
#[derive(Debug, Clone, PartialEq)]
pub struct EmbeddingColumn {
    /// The column whose text (or list of texts) is embedded.
    pub target_column: String,
    /// An embedding model config.
    pub model_alias: String,
}

/// `ImageColumnConfig`: generates images from a prompt.
#[derive(Debug, Clone, PartialEq)]
pub struct ImageColumn {
    /// Jinja prompt template.
    pub prompt: String,
    /// An image model config.
    pub model_alias: String,
    /// Images (or other media) from other columns sent with the prompt.
    pub multi_modal_context: Option<Vec<MultiModalContext>>,
}

/// Fields of `embedding` columns besides the common ones.
pub(crate) const EMBEDDING_FIELDS: &[&str] = &["target_column", "model_alias"];
/// Fields of `image` columns besides the common ones.
pub(crate) const IMAGE_FIELDS: &[&str] = &["prompt", "model_alias", "multi_modal_context"];

#[derive(Deserialize)]
struct EmbeddingDe {
    target_column: String,
    model_alias: String,
}

#[derive(Deserialize)]
struct ImageDe {
    prompt: String,
    model_alias: String,
    #[serde(default)]
    multi_modal_context: Option<Vec<MultiModalContext>>,
}

pub(crate) fn parse_embedding(
    issues: &mut ColumnIssues<'_>,
    value: &Value,
) -> Option<EmbeddingColumn> {
    let de = issues.de::<EmbeddingDe>(value)?;
    Some(EmbeddingColumn {
        target_column: de.target_column,
        model_alias: de.model_alias,
    })
}

pub(crate) fn parse_image(issues: &mut ColumnIssues<'_>, value: &Value) -> Option<ImageColumn> {
    let de = issues.de::<ImageDe>(value)?;
    check_multi_modal(issues, de.multi_modal_context.as_deref());
    Some(ImageColumn {
        prompt: de.prompt,
        model_alias: de.model_alias,
        multi_modal_context: de.multi_modal_context,
    })
}
