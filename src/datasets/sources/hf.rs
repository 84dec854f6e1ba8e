//! STUB (seed-sources replaces it): `hf` seeds fetched from the Hugging Face Hub.

use crate::datasets::DatasetMeta;
use crate::datasets::resolve::ResolveCtx;
use crate::domain::dataset::{ConfigIssue, codes};

/// `hf` seed `path` at `endpoint`: the stub does not fetch from the Hub.
pub async fn resolve(
    _ctx: &ResolveCtx<'_>,
    _path: &str,
    _endpoint: &str,
    _token_given: bool,
) -> Result<Vec<DatasetMeta>, Vec<ConfigIssue>> {
    Err(vec![ConfigIssue::at_field(
        codes::UNSUPPORTED_SEED_SOURCE,
        "seed_config.source.seed_type",
        "seed_type 'hf' is not served by this server; download the file and upload it \
         (POST /v1/datasets), then use seed_type 'local' with its file name"
            .to_owned(),
    )])
}
