//! STUB (seed-sources replaces it): allow-listed server directories for `local`,
//! `directory` and `file_contents` seeds. Without them, nothing resolves here.

use crate::datasets::DatasetMeta;
use crate::datasets::resolve::ResolveCtx;
use crate::domain::dataset::{ConfigIssue, FileSystemSource, codes};

/// `local` after no uploaded dataset matched `path`: the stub has no directories to look in,
/// so nothing matches (`resolve` then reports `seed_dataset_not_found`).
pub async fn resolve_local(
    _ctx: &ResolveCtx<'_>,
    _path: &str,
) -> Result<Vec<DatasetMeta>, Vec<ConfigIssue>> {
    Ok(Vec::new())
}

/// `directory` (`contents: None`) and `file_contents` (`contents: Some(encoding)`): the stub
/// serves no directories.
pub async fn resolve_directory(
    _ctx: &ResolveCtx<'_>,
    _files: &FileSystemSource,
    contents: Option<&str>,
) -> Result<Vec<DatasetMeta>, Vec<ConfigIssue>> {
    let seed_type = if contents.is_some() {
        "file_contents"
    } else {
        "directory"
    };
    Err(vec![ConfigIssue::at_field(
        codes::UNSUPPORTED_SEED_SOURCE,
        "seed_config.source.seed_type",
        format!(
            "seed_type '{seed_type}' needs server seed directories, and this server has none; \
             upload the rows as a dataset and use seed_type 'local' with its file name"
        ),
    )])
}
