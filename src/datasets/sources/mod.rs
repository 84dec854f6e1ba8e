//! Server-side seed sources: files a job's seed names that the *server* reads, each imported
//! as a stored dataset owned by the caller (so every worker reads the same rows whatever
//! happens to the files later).
//!
//! * [`server`]: the allow-listed directories (`datasets.seed_dirs`): a `local` path that
//!   matched no upload, and `directory` / `file_contents` listings ([`listing`]), with the
//!   path checks in [`fs`].
//! * [`hf`]: Hugging Face Hub files, through the Hub's HTTP API ([`hub`]).
//!
//! Each import is cached by its dataset's `source_ref` (a server file's canonical path, mtime
//! and size; a Hub file's commit; a listing's digest), so a second job reuses the stored
//! dataset instead of reading or downloading again.

mod fs;
pub mod hf;
mod hub;
mod listing;
pub mod server;

use std::path::PathBuf;
use std::time::Duration;

use secrecy::SecretString;

use crate::config::Config;
use crate::config::DatasetLimits;
use crate::datasets::resolve::ResolveCtx;
use crate::datasets::{DatasetFormat, DatasetMeta, DatasetQuery, ImportError};
use crate::domain::dataset::{ConfigIssue, codes};

/// The server-side sources a seed can resolve against: built once at start-up from the
/// `datasets` config section and shared by every submit.
#[derive(Debug, Clone)]
pub struct SeedSources {
    /// `datasets.seed_dirs`, as configured (canonicalized at each lookup).
    dirs: Vec<PathBuf>,
    /// `datasets.max_seed_files`.
    max_files: usize,
    /// `datasets.max_seed_bytes`: what a `file_contents` seed may read in all.
    max_listing_bytes: u64,
    /// `datasets.max_upload_bytes`: the largest server file or Hub download imported.
    max_file_bytes: u64,
    /// The importer's limits.
    import_limits: DatasetLimits,
    /// The Hub client; `None` when `datasets.hf.enabled` is off.
    hub: Option<hub::Hub>,
}

impl SeedSources {
    /// From the server config. The Hub token is read from `datasets.hf.token_env` (checked at
    /// config load), else `datasets.hf.token`.
    pub fn from_config(config: &Config) -> Self {
        let d = &config.datasets;
        let token =
            d.hf.token_env
                .as_ref()
                .and_then(|var| std::env::var(var).ok())
                .filter(|t| !t.is_empty())
                .map(SecretString::from)
                .or_else(|| d.hf.token.clone());
        let hub = if d.hf.enabled {
            let timeout = Duration::from_secs(d.hf.timeout_sec);
            match hub::Hub::new(&d.hf.endpoint, token, timeout, &d.hf.redirect_hosts) {
                Ok(h) => Some(h),
                Err(e) => {
                    // The endpoint was checked at config load; only a TLS set-up failure
                    // lands here.
                    tracing::error!(error = %e, "hf seeds are off: cannot build the Hub client");
                    None
                }
            }
        } else {
            None
        };
        Self {
            dirs: d.seed_dirs.clone(),
            max_files: d.max_seed_files,
            max_listing_bytes: d.max_seed_bytes,
            max_file_bytes: d.max_upload_bytes,
            import_limits: d.limits(),
            hub,
        }
    }

    /// No server-side sources: no seed directory, no Hub.
    pub fn none() -> Self {
        let defaults = crate::config::DatasetsConfig::default();
        Self {
            dirs: Vec::new(),
            max_files: defaults.max_seed_files,
            max_listing_bytes: defaults.max_seed_bytes,
            max_file_bytes: defaults.max_upload_bytes,
            import_limits: defaults.limits(),
            hub: None,
        }
    }
}

/// The format a seed file's name gives: the importer's extensions, plus `.json`, which
/// DataDesigner accepts as JSON Lines (`orient='records', lines=True`).
fn dataset_format(name: &str) -> Option<DatasetFormat> {
    DatasetFormat::from_file_name(name).or_else(|| {
        name.rsplit_once('.')
            .filter(|(_, ext)| ext.eq_ignore_ascii_case("json"))
            .map(|_| DatasetFormat::Jsonl)
    })
}

/// The caller's newest ready dataset imported from `source_ref`, if any.
async fn reuse_by_ref(
    ctx: &ResolveCtx<'_>,
    source_ref: &str,
    field: &str,
) -> Result<Option<DatasetMeta>, ConfigIssue> {
    let q = DatasetQuery {
        source_ref: Some(source_ref.to_owned()),
        limit: 1,
        ..DatasetQuery::default()
    };
    match ctx.store.find_datasets(ctx.owner, &q).await {
        Ok(found) => Ok(found.into_iter().next()),
        Err(e) => Err(server_failure(field, &e.to_string())),
    }
}

/// An import failure as an issue at `field` about `what`. The importer's own codes
/// (`invalid_dataset`, `unsupported_dataset_format`) are kept; an internal failure is logged
/// and reported without its cause.
fn import_issue(e: ImportError, field: &str, what: &str) -> ConfigIssue {
    if e.code == "internal" {
        return server_failure(field, &e.message);
    }
    ConfigIssue::at_field(e.code, field, format!("{what}: {}", e.message))
}

/// A failure on the server's side (database, temporary files): logged with its cause; the job
/// gets `seed_fetch_failed` without it.
fn server_failure(field: &str, cause: &str) -> ConfigIssue {
    tracing::error!(error = cause, "seed source: server-side failure");
    ConfigIssue::at_field(
        codes::SEED_FETCH_FAILED,
        field,
        "the server could not store the seed dataset; try again later",
    )
}

/// More files matched than `datasets.max_seed_files`.
fn too_many_files(field: &str, max: usize) -> ConfigIssue {
    ConfigIssue::at_field(
        codes::SEED_SOURCE_TOO_LARGE,
        field,
        format!(
            "the seed matches more than {max} files, this server's limit \
             (datasets.max_seed_files); narrow the path or pattern"
        ),
    )
}
