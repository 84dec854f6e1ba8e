//! Server-side seed sources, called through their public hooks (`datasets::sources`) on a
//! real store of each backend: `paths` for the allow-listed directories' path safety and
//! caching, `listing` for `directory` / `file_contents` rows against DataDesigner's own
//! readers, `hub` for `hf` seeds against the Hub test double, and `hub_process` for the Hub
//! token in a running server (refused from jobs, never in responses, logs or the database).

mod hub;
mod hub_process;
mod listing;
mod paths;

use serde_json::{Map, Value};
use synthgate::config::Config;
use synthgate::datasets::DatasetMeta;
use synthgate::datasets::resolve::ResolveCtx;
use synthgate::datasets::sources::SeedSources;
use synthgate::domain::dataset::ConfigIssue;
use synthgate::store::Store;

/// Sources built from a default config after `tweak`.
pub fn sources(tweak: impl FnOnce(&mut Config)) -> SeedSources {
    let mut config = Config::default();
    config.datasets.decoder_program = Some(crate::helpers::decoder_program());
    tweak(&mut config);
    SeedSources::from_config(&config)
}

/// A resolve context for `owner` on `store`.
pub fn ctx<'a>(store: &'a dyn Store, owner: Option<&'a str>, s: &'a SeedSources) -> ResolveCtx<'a> {
    ResolveCtx {
        store,
        owner,
        sources: s,
    }
}

/// Every row of a stored dataset, in order.
pub async fn rows_of(store: &dyn Store, meta: &DatasetMeta) -> Vec<Map<String, Value>> {
    let mut out = Vec::new();
    for b in 0..meta.num_blocks() {
        out.extend(
            store
                .read_dataset_block(meta.id, b)
                .await
                .expect("read block"),
        );
    }
    assert_eq!(out.len() as u64, meta.num_rows);
    out
}

/// The single issue of a refusal.
pub fn one_issue(r: Result<Vec<DatasetMeta>, Vec<ConfigIssue>>) -> ConfigIssue {
    match r {
        Ok(found) => panic!(
            "expected a refusal, got datasets {:?}",
            found.iter().map(|m| &m.name).collect::<Vec<_>>()
        ),
        Err(mut issues) => {
            assert_eq!(issues.len(), 1, "{issues:?}");
            issues.remove(0)
        }
    }
}
